"""Shamir secret sharing over GF(p), p = 2^256 + 297, in plain Python integers.

p is the smallest prime above 2^256 (the tests check primality and that every odd number in
(2^256, p) is composite), so any 32-byte secret, read as a big-endian integer, is a field element.
A share is the pair (x, y) with x a non-zero point and y = f(x) in [0, p), transmitted as 33
big-endian bytes. f is a uniformly random polynomial of degree <= t - 1 with f(0) = secret (drawn
as its forward differences at 0, rejection-sampled from the injected randomness source:
:func:`share_many`), so any t - 1 shares at distinct non-zero points are independent of the
secret and any t determine it. SecAgg+ takes the points 1..k: a device's j-th neighbour in
ascending id order holds f(j) (docs/secagg.md, section 3).

Reconstruction uses exactly the t points it is given (Lagrange interpolation at 0; Shamir
1979). Points within 1..w for a small w, as SecAgg+'s are, take the binomial form of the weights
(:func:`reconstruct`): one exact integer sum and one reduction. Other points take the general
form, each point's weight computed exactly and the weighted sum taken as one fraction with one
modular inversion. A result >= 2^256 cannot be a 32-byte secret: it proves a corrupted share
and raises :class:`ShareError`.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Iterator, Sequence

import numpy as np

from fedhh.secagg.errors import SecAggError
from fedhh.secagg.primitives import RandomSource

__all__ = [
    "PRIME",
    "SECRET_BYTES",
    "SHARE_BYTES",
    "ShareError",
    "below_prime",
    "decode_share",
    "encode_share",
    "packed_below_prime",
    "reconstruct",
    "reconstruct_many",
    "share",
    "share_many",
]

PRIME = (1 << 256) + 297
SECRET_BYTES = 32
SHARE_BYTES = 33  # a y value in [0, p) as big-endian bytes
_SECRET_BOUND = 1 << 256
_NUMPY_BOUND = 1 << 62  # x's below it subtract exactly in int64


class ShareError(SecAggError, ValueError):
    """A share or a set of shares is malformed, or the points reconstruct no 32-byte secret."""


def _random_elements(rand: RandomSource, prime: int, count: int) -> list[int]:
    """``count`` independent uniform elements of GF(prime), by rejection sampling.

    Candidates are ``prime.bit_length()``-bit integers, accepted below ``prime`` (for p just
    above 2^256, about one in two), read from one draw of random bytes per batch: drawing each
    candidate on its own took two OS calls per coefficient, a tenth of a device's key sharing.
    """
    nbits = prime.bit_length()
    nbytes = (nbits + 7) // 8
    mask = (1 << nbits) - 1
    out: list[int] = []
    while len(out) < count:
        # Twice what is missing, plus a few: one batch almost always suffices.
        batch = rand(nbytes * (2 * (count - len(out)) + 8))
        for offset in range(0, len(batch) - nbytes + 1, nbytes):
            candidate = int.from_bytes(batch[offset:offset + nbytes], "big") & mask
            if candidate < prime:
                out.append(candidate)
                if len(out) == count:
                    break
    return out


def share(secret: int, threshold: int, xs: Sequence[int], rand: RandomSource,
          prime: int = PRIME) -> list[int]:
    """The y values f(x) for each x in ``xs`` of a fresh random polynomial with f(0) = secret.

    ``threshold`` shares reconstruct the secret; fewer reveal nothing about it.
    """
    return share_many([secret], threshold, xs, rand, prime)[0]


def share_many(secrets: Sequence[int], threshold: int, xs: Sequence[int], rand: RandomSource,
               prime: int = PRIME) -> list[list[int]]:
    """:func:`share` of each secret among the same points, each with its own fresh random
    polynomial: ``result[j][i]`` is f_j(xs[i]).

    Each polynomial is drawn in Newton's forward-difference form: with d = threshold - 1,
    f(x) = sum_{i=0}^{d} D_i C(x, i) where D_0 = f(0) = the secret and D_1..D_d (the
    differences Delta^i f(0)) are uniform elements of GF(p), secret j's the j-th d of one
    :func:`_random_elements` draw. The binomials C(x, i), i <= d < p, are a basis of the
    polynomials of degree <= d over GF(p) (triangular in the monomials, with the invertible
    leading coefficients 1/i!), so uniform differences are uniform coefficients: the shares
    have exactly the distribution of Shamir's (t - 1 of them independent of the secret).
    SecAgg+'s points 1..k (:func:`_values_at_one_to`) then cost additions only; any other
    points take :func:`_newton_value`.
    """
    for secret in secrets:
        if not 0 <= secret < prime:
            raise ShareError(f"secret must be in [0, p), got a {secret.bit_length()}-bit value")
    if not 1 <= threshold <= len(xs):
        raise ShareError(f"threshold must be in [1, {len(xs)}], got {threshold}")
    if len(set(xs)) != len(xs) or any(not 0 < x < prime for x in xs):
        raise ShareError("share points must be distinct and non-zero")
    degree = threshold - 1
    differences = _random_elements(rand, prime, len(secrets) * degree)
    tables = [[secret, *differences[j * degree:(j + 1) * degree]]
              for j, secret in enumerate(secrets)]
    if list(xs) == list(range(1, len(xs) + 1)):
        return [_values_at_one_to(table, len(xs), prime) for table in tables]
    return [[_newton_value(table, x) % prime for x in xs] for table in tables]


def _values_at_one_to(table: list[int], count: int, prime: int) -> list[int]:
    """f(1), ..., f(count) from f's forward differences at 0, ``table[i]`` = Delta^i f(0).

    One step of the difference table, Delta^i f(x + 1) = Delta^i f(x) + Delta^(i+1) f(x) for
    every i at once, is one shift and one addition when the table is one integer with
    Delta^i f(x) in bits [i w, (i + 1) w): T <- T + (T >> w). Kept exact and reduced only as
    each f(x) is read, Delta^i f(x) = sum_j C(x, j) Delta^(i+j) f(0) < p 2^x, so lanes of
    w >= bitlen(p) + count bits never carry into each other. (At t = 58, k = 88 a device's
    two secrets took 35-50% of the time of Horner's rule on packed coefficients: 88 steps of
    a 20,000-bit integer each instead of 88 x 57 products.)"""
    width_bytes = -(-(prime.bit_length() + count) // 8)
    packed = int.from_bytes(b"".join(d.to_bytes(width_bytes, "little") for d in table),
                            "little")
    shift, lane = 8 * width_bytes, (1 << 8 * width_bytes) - 1
    values = []
    for _ in range(count):
        packed += packed >> shift
        values.append((packed & lane) % prime)
    return values


def _newton_value(table: list[int], x: int) -> int:
    """sum_i table[i] C(x, i), exactly (C(x, i) = 0 for i > x)."""
    total, binomial = table[0], 1
    for i, difference in enumerate(table[1:], start=1):
        binomial = binomial * (x - i + 1) // i
        if not binomial:
            break
        total += difference * binomial
    return total


def reconstruct(points: Sequence[tuple[int, int]], prime: int = PRIME,
                bound: int = _SECRET_BOUND) -> int:
    """f(0) from the points (x, f(x)); raises :class:`ShareError` if it is >= ``bound``.

    Lagrange interpolation at 0 (Shamir 1979): f(0) = sum_i y_i L_i with
    L_i = prod_{j != i} x_j / (x_j - x_i). Points that all lie in 1..w with w at most twice
    their number take :func:`_binomial_sum` (SecAgg+'s points 1..k: 206 -> 72 us at t = 58,
    k = 88 on a 2.1 GHz core), any others :func:`_fraction_sum`."""
    if not points:
        raise ShareError("reconstruction needs at least one share")
    xs = [x for x, _ in points]
    if len(set(xs)) != len(xs) or any(not 0 < x < prime for x in xs):
        raise ShareError("share points must be distinct and non-zero")
    if any(not 0 <= y < prime for _, y in points):
        raise ShareError("share values must be in [0, p)")
    if max(xs) <= 2 * len(xs):
        secret = _binomial_sum(points, xs, prime)
    else:
        secret = _fraction_sum(points, xs, prime)
    if secret >= bound:
        raise ShareError("shares reconstruct a value >= 2^256: a share is corrupt")
    return secret


# A batch row whose missing points take more int64 products than this goes through
# :func:`reconstruct` on its own (its products would widen every row of its bucket).
_BATCH_GROUPS = 4
_BATCH_CELLS = 1 << 21  # int64 cells of one bucket's difference table, at most (16 MiB)


def reconstruct_many(xs: np.ndarray, ys: Sequence[Sequence[int]], prime: int = PRIME,
                     bound: int = _SECRET_BOUND) -> list[int | None]:
    """:func:`reconstruct` of many secrets at once: row r's shares are (xs[r, i], ys[r][i]),
    its value f_r(0), or None where that is >= ``bound`` (a corrupt share).

    ``xs`` is an integer table of shape (rows, t), each row strictly increasing within
    [1, 2^31); each y is in [0, p) (the server checks them as they arrive:
    :func:`below_prime`). Each row takes :func:`_binomial_sum`'s form, f(0) =
    [sum_i y_i (-1)^(x_i-1) C(w, x_i) prod_{m in M} (m - x_i)] * prod_i x_i / w! mod p with
    w = max x and M = {1..w} \\ xs, but the products over M, which cost the one-secret path
    most of its time in numpy calls of its own, are made for every row of a bucket (rows of
    the same number of int64 products) in a few array operations. A server that takes each
    secret's t smallest points (the first of its holders in roster order) keeps M to the
    holders that did not answer among the first t or so: about 2.4x faster per secret than
    the first t shares to arrive through :func:`reconstruct` (bench/bench_rebuild.py).
    """
    xs = np.asarray(xs)
    if xs.ndim != 2 or xs.dtype.kind not in "iu" or xs.shape[0] != len(ys):
        raise ShareError("points must be an integer table with one row per secret")
    rows, t = xs.shape
    if rows == 0:
        return []
    if t == 0 or any(len(row) != t for row in ys):
        raise ShareError(f"each secret needs its {t} share values")
    xs = xs.astype(np.int64, copy=False)
    if xs[:, 0].min() < 1 or xs[:, -1].max() >= 1 << 31 or (
            t > 1 and np.diff(xs, axis=1).min() < 1):
        raise ShareError("each row's points must be strictly increasing within [1, 2^31)")
    widest = xs[:, -1]
    missing_counts = widest - t
    group = _group_size(int(widest.max()))
    groups = -(-missing_counts // group)
    # Row r's products over its missing points, as int64 partial products per point, one
    # list per group of factors (none: no point missing); None: rebuilt one by one.
    factors: list[list[list[int]] | None] = [None] * rows
    for count in np.unique(groups).tolist():
        members = np.flatnonzero(groups == count)
        if count == 0:
            for r in members.tolist():
                factors[r] = []
            continue
        if count > _BATCH_GROUPS:
            continue
        step = max(1, _BATCH_CELLS // (t * count * group))
        for start in range(0, members.size, step):
            chunk = members[start:start + step]
            products = _missing_products(xs[chunk], missing_counts[chunk], count, group)
            for r, row in zip(chunk.tolist(), products, strict=True):
                factors[r] = row
    secrets: list[int | None] = []
    for points, values, w, row_factors in zip(xs.tolist(), ys, widest.tolist(), factors,
                                              strict=True):
        if row_factors is None:
            try:
                secrets.append(reconstruct(list(zip(points, values, strict=True)), prime, bound))
            except ShareError:
                secrets.append(None)
            continue
        # (each map is a C loop: a generator expression over the t terms took twice as long)
        weights: Iterator[int] = map(_signed_binomials(w).__getitem__, points)
        for partial in row_factors:
            weights = map(operator.mul, weights, partial)
        total = sum(map(operator.mul, values, weights))
        secret = (total % prime * (math.prod(points) % prime) % prime
                  * _inverse_factorial(w, prime) % prime)
        secrets.append(secret if secret < bound else None)
    return secrets


def _group_size(widest: int) -> int:
    """How many differences m - x of points in 1..``widest`` multiply within int64: the
    largest g with (widest - 1)^g < 2^62 (at least 1)."""
    top, g = max(widest - 1, 2), 1
    while top ** (g + 1) < 1 << 62:
        g += 1
    return g


def _missing_products(xs: np.ndarray, counts: np.ndarray, groups: int, group: int
                      ) -> list[list[list[int]]]:
    """prod_{m in M_r} (m - xs[r, i]) for each row r and i, M_r = {1..max xs[r]} \\ xs[r]
    (``counts[r]`` = |M_r| <= ``groups * group``), exactly, as ``groups`` lists of partial
    products per row (their product, point by point, is the whole): each row's missing points
    gathered into one padded table, the differences taken and multiplied ``group`` at a time
    in int64."""
    rows, t = xs.shape
    width = groups * group
    span = int(xs[:, -1].max()) + 1
    present = np.zeros((rows, span), dtype=bool)
    present[np.arange(rows)[:, np.newaxis], xs] = True
    missing = ~present
    missing[:, 0] = False
    missing &= np.arange(span)[np.newaxis, :] <= xs[:, -1:]
    row_of, values = np.nonzero(missing)  # (row-major: each row's points ascending)
    starts = np.cumsum(counts) - counts
    table = np.zeros((rows, width), dtype=np.int64)
    table[row_of, np.arange(row_of.size) - starts[row_of]] = values
    differences = table[:, np.newaxis, :] - xs[:, :, np.newaxis]
    padding = np.arange(width)[np.newaxis, :] >= counts[:, np.newaxis]
    differences[np.broadcast_to(padding[:, np.newaxis, :], differences.shape)] = 1
    grouped = differences.reshape(rows, t, groups, group).prod(axis=3)
    return grouped.transpose(0, 2, 1).tolist()


def _binomial_sum(points: Sequence[tuple[int, int]], xs: list[int], prime: int) -> int:
    """f(0) for points S within W = {1, ..., w}, w = max(xs) < prime.

    Over the whole window the weights are integers: L_i(W) = prod_{j in W, j != i} j/(j - i)
    = (w!/i) / ((-1)^(i-1) (i-1)! (w-i)!) = (-1)^(i-1) C(w, i). Leaving out the missing
    points M = W \\ S divides out their factors: L_i(S) = L_i(W) prod_{m in M} (m - i)/m, and
    prod_{m in M} m = w! / prod_{i in S} i. So
    f(0) = [sum_{i in S} y_i (-1)^(i-1) C(w, i) prod_{m in M} (m - i)] * prod_{i in S} i / w!,
    an exact integer sum reduced once and one multiplication by 1/w! mod p (w! is invertible:
    its factors are below p)."""
    w = max(xs)
    missing = sorted(set(range(1, w + 1)).difference(xs))
    weights = _signed_binomials(w)
    factors = _difference_products(missing, xs)
    total = sum(y * weights[x] * f for (x, y), f in zip(points, factors, strict=True))
    return total % prime * (math.prod(xs) % prime) % prime * _inverse_factorial(w, prime) % prime


@functools.lru_cache(maxsize=256)
def _signed_binomials(w: int) -> tuple[int, ...]:
    """(-1)^(i-1) C(w, i) at index i = 1..w (index 0 unused): the weights L_i of the points
    1..w (:func:`_binomial_sum`)."""
    return (0, *(math.comb(w, i) if i % 2 else -math.comb(w, i) for i in range(1, w + 1)))


@functools.lru_cache(maxsize=256)
def _inverse_factorial(w: int, prime: int) -> int:
    return pow(math.factorial(w) % prime, -1, prime)


def _difference_products(columns: Sequence[int], rows: Sequence[int], *,
                         diagonal: bool = False) -> list[int]:
    """prod_j (columns[j] - rows[i]) for each i, exactly; with ``diagonal`` (``columns`` is
    ``rows``), rows[i] in place of the zero at j = i. Values below 2^62 give the factors from
    one numpy subtraction, and as many of them as fit in 62 bits are multiplied together there
    (values up to 5,000: four to a factor, a quarter of the big-integer products in Python)."""
    if not columns:
        return [1] * len(rows)
    top = max(max(columns), max(rows))
    if top >= _NUMPY_BOUND:
        return [math.prod(c - r if not diagonal or j != i else r for j, c in enumerate(columns))
                for i, r in enumerate(rows)]
    # |c - r| < top and r <= top: a product of 62 // bits of them is below 2^62.
    group = max(1, 62 // top.bit_length())
    width = -(-len(columns) // group) * group
    table = np.ones((len(rows), width), dtype=np.int64)
    lhs = np.asarray(rows, dtype=np.int64)
    np.subtract(np.asarray(columns, dtype=np.int64)[np.newaxis, :], lhs[:, np.newaxis],
                out=table[:, :len(columns)])
    if diagonal:
        table[np.arange(len(rows)), np.arange(len(rows))] = lhs
    grouped = table[:, 0::group].copy()
    for offset in range(1, group):
        grouped *= table[:, offset::group]
    return [math.prod(row) for row in grouped.tolist()]


def _fraction_sum(points: Sequence[tuple[int, int]], xs: list[int], prime: int) -> int:
    """f(0) for any distinct non-zero points below ``prime``.

    With P = prod_j x_j and e_i = x_i prod_{j != i} (x_j - x_i), an integer, f(0) is
    P * sum_i y_i / e_i, summed as one fraction N / D (N <- N e_i + y_i D, D <- D e_i, mod p)
    and divided once: three products mod p per point and one inversion."""
    numerator, denominator = 0, 1
    for (_, y), e in zip(points, _difference_products(xs, xs, diagonal=True), strict=True):
        e %= prime
        numerator = (numerator * e + y * denominator) % prime
        denominator = denominator * e % prime
    # (no e_i is 0 mod p: its factors are nonzero and smaller than p in magnitude)
    return math.prod(xs) % prime * numerator % prime * pow(denominator, -1, prime) % prime


def below_prime(values: np.ndarray, prime: int = PRIME) -> bool:
    """Whether every row of ``values`` (uint8, ``SHARE_BYTES`` per row: big-endian share
    values, as :func:`encode_share` writes them) is below ``prime``. Exact: rows of one width
    order as their integers do, so each is compared with prime's bytes at the first byte where
    they differ. Rows whose first byte is below prime's are below it whatever follows: for
    p = 2^256 + 297 that is every value below 2^256, all but a 2^-247 share of honest ones,
    settled by one comparison instead of the whole table's."""
    limit = _prime_bytes(prime)
    if bool(np.all(values[:, 0] < limit[0])):
        return True
    differ = values != limit
    first = differ.argmax(axis=1)
    rows = np.arange(len(values))
    return bool(np.all(differ[rows, first] & (values[rows, first] < limit[first])))


def packed_below_prime(blob: bytes, prime: int = PRIME) -> bool:
    """:func:`below_prime` of the share values written one after another in ``blob``
    (``SHARE_BYTES`` each), as a device's unmask response carries them. Exact, as there: a
    value whose first byte is below prime's is below it, which settles all but a 2^-247 share
    of honest values at p = 2^256 + 297 in one pass over every SHARE_BYTES-th byte; any other
    goes through :func:`below_prime`'s comparison. (The server checks each response as it
    arrives, among other devices' work, where NumPy's calls cost several times their cost in
    a loop: in the protocol's one-process simulation at k = 88, 47-71 us a response through
    the table against 6 through this pass.)"""
    if len(blob) % SHARE_BYTES:
        raise ShareError(f"share values are {SHARE_BYTES} bytes each")
    if max(blob[::SHARE_BYTES], default=0) < prime >> 8 * (SHARE_BYTES - 1):  # (its first byte)
        return True
    return below_prime(np.frombuffer(blob, dtype=np.uint8).reshape(-1, SHARE_BYTES), prime)


@functools.lru_cache(maxsize=4)
def _prime_bytes(prime: int) -> np.ndarray:
    """``prime`` as ``SHARE_BYTES`` big-endian bytes (read-only: a view of immutable bytes)."""
    return np.frombuffer(prime.to_bytes(SHARE_BYTES, "big"), dtype=np.uint8)


def encode_share(y: int) -> bytes:
    """33 big-endian bytes of a share value."""
    return y.to_bytes(SHARE_BYTES, "big")


def decode_share(data: bytes, prime: int = PRIME) -> int:
    """Inverse of :func:`encode_share`; rejects a wrong length or a value >= p."""
    if not isinstance(data, bytes) or len(data) != SHARE_BYTES:
        raise ShareError(f"a share is {SHARE_BYTES} bytes")
    y = int.from_bytes(data, "big")
    if y >= prime:
        raise ShareError("share value >= p")
    return y
