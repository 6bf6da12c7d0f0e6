/**
 * The lying-server failure bound a device computes itself before it joins a round
 * (fedhh/secagg/params.py `failure_bounds(..., Threat.LYING)`, checked by
 * fedhh/secagg/device.py `_check_policy`), and the tolerance rule that keeps this
 * implementation from accepting a config the Python device refuses.
 *
 * The model (params.py): n devices, C = floor(corrupt * n + 1e-9) of them corrupt, each device's
 * k neighbours a uniform k-subset of the others, each device dropping out with probability
 * `dropout`. The bound is privacy + disconnection:
 *
 * - privacy = min(1, n * P[H >= 2t - k]), H ~ Hypergeometric(n - 1, C, k);
 * - disconnection = 0 for the complete graph (k = n - 1), else
 *   min(1, n^2 / 2 * E[dropout^(k - J)]), J ~ Hypergeometric(n, C, k).
 *
 * Both are floating-point sums of exp(log C(C, j) + log C(N - C, k - j) - log C(N, k)), in
 * the same order as Python's, with log C(a, b) from lgamma. Python's math.lgamma is CPython's
 * own Lanczos approximation; here `lgammaInt` (only integer arguments occur) is the exact
 * factorial's logarithm up to 22! and Stirling's series with four correction terms beyond it
 * (truncation error below 1/(1188 x^9) < 4e-16 for x >= 23). Neither is correctly rounded:
 * each lgamma value is off by a few units in the last place (ulp) of its value, at most
 * about (n + 1) ln(n + 1), and a pmf term sums nine of them. So the two bounds differ by a
 * relative amount of order 9 * 2 * 4 ulp of (n + 1) ln(n + 1).
 *
 * The tolerance rule: `boundTolerance(n)` = 2^-40 + 2^-45 * (n + 1) ln(n + 1), about 128
 * units of 2^-52 of the largest lgamma value (3e-8 at n = 10^5, 8e-6 at n = 2^24), and never
 * below 2^-40. The vectors check |ours - Python's| <= tolerance * Python's: 205 cases from
 * Python (the largest difference is 1.8% of the tolerance) and 150 random ones from this
 * implementation checked in Python (tests/web/test_web_vectors.py). Python 3.12's compensated
 * sum() would move Python's bound by rounding only, far inside the tolerance.
 *
 * The decision: the device accepts only when ours <= 2^-security_bits * (1 - tolerance), so
 * whenever our bound is within the tolerance of Python's, Python accepts too: this device never
 * accepts what Python refuses. In the band of twice the tolerance below the target it may
 * refuse configs Python accepts; the coordinator's choice (choose_parameters: the smallest t meeting
 * the target) falls in that band with probability of the order of the tolerance.
 */

const LN_SQRT_2PI = 0.9189385332046727; // 0.5 * ln(2 pi)

/** ln((x - 1)!) for a positive integer x: the value of lgamma at an integer. */
export function lgammaInt(x: number): number {
  if (!(Number.isInteger(x) && x >= 1)) throw new RangeError(`lgammaInt needs an integer >= 1, got ${x}`);
  if (x <= 2) return 0;
  if (x <= 23) {
    let factorial = 1; // (x - 1)! <= 22! is exact in a double
    for (let i = 2; i < x; i++) factorial *= i;
    return Math.log(factorial);
  }
  const inv = 1 / x;
  const inv2 = inv * inv;
  // Stirling: (x - 1/2) ln x - x + ln sqrt(2 pi) + 1/(12x) - 1/(360x^3) + 1/(1260x^5) - 1/(1680x^7)
  const series = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 / 1680)));
  return (x - 0.5) * Math.log(x) - x + LN_SQRT_2PI + series;
}

function logComb(a: number, b: number): number {
  return lgammaInt(a + 1) - lgammaInt(b + 1) - lgammaInt(a - b + 1);
}

/** P[J = j] for J ~ Hypergeometric(population, successes, draws), or 0 where impossible. */
function hypergeometric(population: number, successes: number, draws: number):
    (j: number) => number {
  const total = logComb(population, draws);
  const failures = population - successes;
  return (j) => (j <= successes && draws - j <= failures
    ? Math.exp(logComb(successes, j) + logComb(failures, draws - j) - total) : 0);
}

export class BoundError extends Error {
  override name = "BoundError";
}

/**
 * privacy + disconnection of (n, k, t) against a lying server, as Python's failure_bounds
 * computes them (the terms Python adds as exact zeros are skipped, which changes nothing).
 */
export function lyingServerBound(n: number, k: number, t: number, dropout: number,
                                 corrupt: number): number {
  if (!(Number.isInteger(n) && n >= 2 && Number.isInteger(k) && k >= 1 && k <= n - 1
        && (k % 2 === 0 || k === n - 1))) {
    throw new BoundError(`(n, k) = (${n}, ${k}) is not a neighbour graph`);
  }
  if (!(dropout >= 0 && dropout < 1)) throw new BoundError(`dropout must be in [0, 1), got ${dropout}`);
  if (!(corrupt >= 0 && corrupt < 1)) throw new BoundError(`corrupt must be in [0, 1), got ${corrupt}`);
  if (!(Number.isInteger(t) && t >= 1 && t <= k)) throw new BoundError(`t must be in [1, ${k}], got ${t}`);
  const nCorrupt = Math.floor(corrupt * n + 1e-9);
  // h_at_least[x] = P[H >= x], accumulated from x = k down, as Python does.
  const pmfH = hypergeometric(n - 1, nCorrupt, k);
  const x = Math.max(0, 2 * t - k);
  let tail = 0;
  for (let j = Math.min(k, nCorrupt); j >= x; j--) tail += pmfH(j);
  const privacy = Math.min(1, n * tail);
  let disconnection = 0;
  if (k !== n - 1) {
    const pmfJ = hypergeometric(n, nCorrupt, k);
    let allBad = 0;
    for (let j = Math.max(0, k - (n - nCorrupt)); j <= Math.min(k, nCorrupt); j++) {
      allBad += pmfJ(j) * dropout ** (k - j);
    }
    disconnection = Math.min(1, ((n * n) / 2) * allBad);
  }
  return privacy + disconnection;
}

/** The relative tolerance between this bound and Python's at cohort size n (module docstring). */
export function boundTolerance(n: number): number {
  return 2 ** -40 + 2 ** -45 * (n + 1) * Math.log(n + 1);
}

/** The decision: accept only if the bound is below the target by more than the tolerance. */
export function boundAccepts(bound: number, n: number, securityBits: number): boolean {
  return bound <= 2 ** -securityBits * (1 - boundTolerance(n));
}
