"""Finite fields GF(q), q = p^k below 2^31, with exact vectorised arithmetic on int64 arrays.

PI-RAPPOR (Feldman and Talwar 2021, Section 4, Algorithm 3) evaluates affine functions
``v(w) = v_0 + sum_j v_j w_j`` over GF(q), and the OptPrefixTree appendix "PI-RAPPOR" takes q
to be the smallest *prime power* above max(e^eps + 1, 2^segment). That is usually a prime, but
not always (9 above 2^3 = 8, or 4, 8, 9, 25, 27, 32, ... above e^eps + 1 for some eps), so both
kinds of field are implemented exactly:

- a prime field GF(p): codes are the residues 0..p-1, arithmetic is integer arithmetic mod p
  (products of two residues fit an int64 because p < 2^31);
- an extension field GF(p^k), k >= 2: the code c stands for the polynomial sum_i d_i x^i over
  GF(p) whose coefficients d_i are the base-p digits of c (d_0 least significant), and products
  are reduced modulo a fixed monic irreducible polynomial f of degree k, the first one in the
  order of ``_monic_polynomials`` (so every device and server builds the same field).

Every operation is exact integer arithmetic; nothing is approximated. ``field(q)`` gives the
field of a prime power q (cached).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterator
from decimal import Decimal
from functools import lru_cache

import numpy as np

from fedhh.errors import ConfigError

MAX_Q = 1 << 31  # products of two prime-field residues must fit an int64
TABLE_MAX_Q = 256  # extension fields up to this size compute through q x q tables (512 KiB each)
_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)  # deterministic below 3.3e24


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin (the bases above decide every n < 3.3 * 10^24)."""
    if n < 2:
        return False
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, r = n - 1, 0
    while d % 2 == 0:
        d //= 2
        r += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(r - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def prime_power(q: int) -> tuple[int, int] | None:
    """(p, k) with q = p^k, p prime, k >= 1; None if q is not a prime power."""
    if q < 2:
        return None
    for k in range(q.bit_length(), 0, -1):
        p = round(q ** (1.0 / k))
        for c in (p - 1, p, p + 1):
            if c >= 2 and c**k == q and is_prime(c):
                return c, k
    return None


def smallest_prime_power_above(bound: Decimal | int) -> int:
    """The smallest prime power q with q > bound (strictly), as the appendix asks."""
    q = math.floor(bound) + 1
    while prime_power(q) is None:
        q += 1
    return q


class Field(ABC):
    """GF(q): the operations every field offers, on int64 arrays of codes (broadcasting);
    ``PrimeField`` and ``ExtensionField`` implement them."""

    q: int
    p: int
    k: int

    @abstractmethod
    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The field operation, elementwise."""

    @abstractmethod
    def neg(self, a: np.ndarray) -> np.ndarray:
        """The field operation, elementwise."""

    @abstractmethod
    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """The field operation, elementwise."""

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.add(a, self.neg(b))

    def inv(self, a: np.ndarray) -> np.ndarray:
        """Multiplicative inverses, a^(q-2) (Lagrange); every element must be non-zero."""
        a = np.asarray(a, dtype=np.int64)
        if np.any(a == 0):
            raise ZeroDivisionError("zero has no inverse in a field")
        result = np.ones_like(a)
        base = a.copy()
        e = self.q - 2
        while e:
            if e & 1:
                result = self.mul(result, base)
            e >>= 1
            if e:
                base = self.mul(base, base)
        return result

    def __repr__(self) -> str:
        return f"GF({self.p}^{self.k})" if self.k > 1 else f"GF({self.q})"


class PrimeField(Field):
    """GF(p): integer arithmetic modulo the prime p."""

    def __init__(self, p: int) -> None:
        self.q = self.p = p
        self.k = 1

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (np.asarray(a, dtype=np.int64) + b) % self.p

    def neg(self, a: np.ndarray) -> np.ndarray:
        return (-np.asarray(a, dtype=np.int64)) % self.p

    def sub(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (np.asarray(a, dtype=np.int64) - b) % self.p

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (np.asarray(a, dtype=np.int64) * b) % self.p


class ExtensionField(Field):
    """GF(p^k), k >= 2: polynomials over GF(p) modulo the irreducible ``modulus`` (its
    coefficients, constant term first, leading 1 last)."""

    def __init__(self, p: int, k: int) -> None:
        self.p, self.k, self.q = p, k, p**k
        self.modulus = first_irreducible(p, k)
        self._powers = np.array([p**i for i in range(k)], dtype=np.int64)
        # For p = 2 a code's bits are its coefficients: the modulus's low k bits as a mask.
        self._low = sum(c << i for i, c in enumerate(self.modulus[:k]))
        # Small fields (PI-RAPPOR's GF(4), GF(8), GF(9), ... at small eps): the q x q tables of
        # the polynomial arithmetic below, one lookup per operation instead of k^2 array passes.
        self._tables: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        if self.q <= TABLE_MAX_Q:
            codes = np.arange(self.q, dtype=np.int64)
            x, y = codes[:, None], codes[None, :]
            self._tables = (self._poly_add(x, y), self._poly_neg(codes), self._poly_mul(x, y))

    def digits(self, a: np.ndarray) -> np.ndarray:
        """Coefficients (..., k), constant term first."""
        a = np.asarray(a, dtype=np.int64)
        return (a[..., None] // self._powers) % self.p

    def from_digits(self, d: np.ndarray) -> np.ndarray:
        return (np.asarray(d, dtype=np.int64) * self._powers).sum(axis=-1)

    def add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
        if self.p == 2:
            return a ^ b
        if self._tables is not None:
            return self._tables[0][a, b]
        return self._poly_add(a, b)

    def neg(self, a: np.ndarray) -> np.ndarray:
        a = np.asarray(a, dtype=np.int64)
        if self.p == 2:
            return a.copy()
        if self._tables is not None:
            return self._tables[1][a]
        return self._poly_neg(a)

    def mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        if self._tables is not None:
            return self._tables[2][np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)]
        return self._poly_mul(a, b)

    def _poly_add(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return self.from_digits((self.digits(a) + self.digits(b)) % self.p)

    def _poly_neg(self, a: np.ndarray) -> np.ndarray:
        return self.from_digits((-self.digits(a)) % self.p)

    def _poly_mul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        a, b = np.broadcast_arrays(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
        if self.p == 2:
            return self._mul_binary(a, b)
        k, p = self.k, self.p
        da, db = self.digits(a), self.digits(b)
        prod = np.zeros((*a.shape, 2 * k - 1), dtype=np.int64)
        for i in range(k):
            prod[..., i : i + k] += da[..., i : i + 1] * db
        prod %= p
        # x^k = -(f_0 + f_1 x + ... + f_{k-1} x^{k-1}): fold the high coefficients down.
        for top in range(2 * k - 2, k - 1, -1):
            c = prod[..., top]
            for j in range(k):
                if self.modulus[j]:
                    prod[..., top - k + j] -= c * self.modulus[j]
            prod[..., top - k : top] %= p
        return self.from_digits(prod[..., :k] % p)

    def _mul_binary(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        """Carry-less product in GF(2)[x] reduced mod f, on the bits of the codes."""
        k = self.k
        acc = np.zeros(a.shape, dtype=np.int64)
        for i in range(k):
            acc ^= np.where((b >> i) & 1, a << i, 0)
        for top in range(2 * k - 2, k - 1, -1):
            bit = (acc >> top) & 1
            acc ^= bit * (((1 << k) | self._low) << (top - k))
        return acc


@lru_cache(maxsize=64)
def field(q: int) -> Field:
    """GF(q) for a prime power 2 <= q < 2^31."""
    if not 2 <= q < MAX_Q:
        raise ConfigError(f"field size must be a prime power in [2, 2^31), got {q}")
    pk = prime_power(q)
    if pk is None:
        raise ConfigError(f"field size must be a prime power, got {q}")
    p, k = pk
    return PrimeField(p) if k == 1 else ExtensionField(p, k)


# ---- polynomials over GF(p), as lists of coefficients, constant term first ----------------


def _trim(f: list[int]) -> list[int]:
    while f and f[-1] == 0:
        f = f[:-1]
    return f


def _poly_mod(a: list[int], f: list[int], p: int) -> list[int]:
    a = _trim([c % p for c in a])
    inv_lead = pow(f[-1], -1, p)
    while len(a) >= len(f):
        c = a[-1] * inv_lead % p
        shift = len(a) - len(f)
        for i, fc in enumerate(f):
            a[shift + i] = (a[shift + i] - c * fc) % p
        a = _trim(a)
    return a


def _poly_mulmod(a: list[int], b: list[int], f: list[int], p: int) -> list[int]:
    if not a or not b:
        return []
    prod = [0] * (len(a) + len(b) - 1)
    for i, x in enumerate(a):
        if x:
            for j, y in enumerate(b):
                prod[i + j] += x * y
    return _poly_mod(prod, f, p)


def _poly_gcd(a: list[int], b: list[int], p: int) -> list[int]:
    a, b = _trim(a), _trim(b)
    while b:
        a, b = b, _poly_mod(a, b, p)
    return a


def _x_to_p_power(g: list[int], f: list[int], p: int) -> list[int]:
    """g^p mod f (square and multiply)."""
    result, base, e = [1], g, p
    while e:
        if e & 1:
            result = _poly_mulmod(result, base, f, p)
        base = _poly_mulmod(base, base, f, p)
        e >>= 1
    return result


def is_irreducible(f: list[int], p: int) -> bool:
    """Ben-Or's test: a monic f of degree k is irreducible over GF(p) iff
    gcd(f, x^(p^i) - x) = 1 for i = 1..floor(k/2)."""
    k = len(f) - 1
    h = [0, 1]  # x
    for _ in range(k // 2):
        h = _x_to_p_power(h, f, p)
        diff = list(h) + [0] * max(0, 2 - len(h))
        diff[1] = (diff[1] - 1) % p
        if len(_poly_gcd(f, diff, p)) != 1:
            return False
    return True


def _monic_polynomials(p: int, k: int) -> Iterator[list[int]]:
    """Monic degree-k polynomials with a non-zero constant term, in order of the integer whose
    base-p digits are (f_0, ..., f_{k-1})."""
    for code in range(p**k):
        coeffs = [(code // p**i) % p for i in range(k)]
        if coeffs[0]:
            yield [*coeffs, 1]


@lru_cache(maxsize=64)
def first_irreducible(p: int, k: int) -> tuple[int, ...]:
    """The first monic irreducible polynomial of degree k over GF(p) (coefficients, constant
    term first), in the order of ``_monic_polynomials``."""
    for f in _monic_polynomials(p, k):
        if is_irreducible(f, p):
            return tuple(f)
    raise AssertionError(f"no irreducible polynomial of degree {k} over GF({p})")  # unreachable
