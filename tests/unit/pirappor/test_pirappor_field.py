"""Finite fields: primality and prime powers against brute force, the appendix's rule for q,
and the field axioms exhaustively on small prime and extension fields (sampled on large ones)."""

from __future__ import annotations

import math
from decimal import Decimal

import numpy as np
import pytest

from fedhh.errors import ConfigError
from fedhh.pirappor.field import (
    TABLE_MAX_Q,
    ExtensionField,
    PrimeField,
    field,
    first_irreducible,
    is_irreducible,
    is_prime,
    prime_power,
    smallest_prime_power_above,
)


def brute_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def test_is_prime_matches_trial_division() -> None:
    assert [n for n in range(20_000) if is_prime(n)] == [n for n in range(20_000)
                                                          if brute_prime(n)]
    # Carmichael numbers and strong pseudoprimes to small bases are composite.
    for n in (561, 41041, 825265, 3215031751, 2152302898747, 3474749660383):
        assert not is_prime(n)
    for n in (2**31 - 1, 8388617, 4294967291, 2**61 - 1):
        assert is_prime(n)


def test_prime_power_matches_factorisation() -> None:
    def brute(q: int) -> tuple[int, int] | None:
        for p in range(2, q + 1):
            if q % p == 0:
                k = 0
                while q % p == 0:
                    q //= p
                    k += 1
                return (p, k) if q == 1 else None
        return None

    for q in range(0, 3000):
        assert prime_power(q) == (brute(q) if q >= 2 else None), q
    assert prime_power(2**30) == (2, 30)
    assert prime_power(3**19) == (3, 19)
    assert prime_power(2**31 - 1) == (2**31 - 1, 1)


@pytest.mark.parametrize("bound, q", [
    (1, 2), (2, 3), (4, 5), (7, 8), (8, 9), (9, 11), (1 << 10, 1031), (1 << 11, 2053),
    (1 << 23, 8388617), (Decimal(1).exp() + 1, 4), (Decimal(2).exp() + 1, 9),
    (Decimal(8).exp() + 1, 2999), (31, 32), (Decimal("48.5"), 49), (242, 243), (131071, 131072),
])
def test_smallest_prime_power_above(bound: Decimal | int, q: int) -> None:
    assert smallest_prime_power_above(bound) == q
    assert q > bound
    assert all(prime_power(x) is None for x in range(math.floor(bound) + 1, q))


SMALL = [2, 3, 4, 5, 7, 8, 9, 16, 25, 27, 32, 49]


@pytest.mark.parametrize("q", SMALL)
def test_field_axioms_exhaustively(q: int) -> None:
    gf = field(q)
    a = np.arange(q, dtype=np.int64)
    x, y = np.meshgrid(a, a, indexing="ij")
    total, product = gf.add(x, y), gf.mul(x, y)
    # (GF(q), +) and (GF(q) \ 0, *) are groups: every row of their tables is a permutation.
    assert all(np.array_equal(np.sort(row), a) for row in total)
    assert all(np.array_equal(np.sort(row[1:]), a[1:]) for row in product[1:])
    assert np.array_equal(total, total.T) and np.array_equal(product, product.T)
    assert np.array_equal(total[0], a) and np.array_equal(product[1], a)
    assert np.all(product[0] == 0)
    z = a[None, None, :]
    assert np.array_equal(gf.mul(x[..., None], gf.add(y[..., None], z)),
                          gf.add(product[..., None], gf.mul(x[..., None], z)))
    assert np.array_equal(gf.mul(product[..., None], z), gf.mul(x[..., None],
                                                                gf.mul(y[..., None], z)))
    assert np.array_equal(gf.add(total[..., None], z), gf.add(x[..., None],
                                                              gf.add(y[..., None], z)))
    assert np.array_equal(gf.sub(total, y), x)
    assert np.all(gf.add(a, gf.neg(a)) == 0)
    assert np.all(gf.mul(a[1:], gf.inv(a[1:])) == 1)
    # Characteristic p: p times anything is 0.
    acc = np.zeros(q, dtype=np.int64)
    for _ in range(gf.p):
        acc = gf.add(acc, a)
    assert np.all(acc == 0)


@pytest.mark.parametrize("q", [4, 9, 27, 32, 49, 121, 243, 256])
def test_small_extension_fields_look_up_their_polynomial_arithmetic(q: int) -> None:
    """Up to TABLE_MAX_Q the operations are table lookups: every entry is the polynomial
    arithmetic's (the path of larger fields), and out-of-field codes are refused."""
    gf = field(q)
    assert isinstance(gf, ExtensionField) and q <= TABLE_MAX_Q
    a = np.arange(q, dtype=np.int64)
    x, y = a[:, None], a[None, :]
    assert np.array_equal(gf.mul(x, y), gf._poly_mul(x, y))
    assert np.array_equal(gf.add(x, y), gf._poly_add(x, y))
    assert np.array_equal(gf.neg(a), gf._poly_neg(a))
    assert gf.mul(np.int64(2), np.int64(3)) == gf._poly_mul(np.int64(2), np.int64(3))
    with pytest.raises(IndexError):
        gf.mul(np.array([q]), np.array([1]))
    assert field(2 * TABLE_MAX_Q)._tables is None  # type: ignore[attr-defined]


@pytest.mark.parametrize("q", [2**17, 3**11, 5**7, 2**20, 7**5, 8388617, 2**31 - 1])
def test_large_fields_sampled(q: int) -> None:
    gf = field(q)
    rng = np.random.default_rng(q)
    x, y, z = (rng.integers(0, q, 5000) for _ in range(3))
    assert np.array_equal(gf.mul(x, gf.add(y, z)), gf.add(gf.mul(x, y), gf.mul(x, z)))
    assert np.array_equal(gf.mul(gf.mul(x, y), z), gf.mul(x, gf.mul(y, z)))
    nonzero = x[x != 0]
    assert np.all(gf.mul(nonzero, gf.inv(nonzero)) == 1)
    # Fermat: a^q = a for every element (computed by square and multiply with gf.mul).
    power, base, e = np.ones_like(x), x.copy(), q
    while e:
        if e & 1:
            power = gf.mul(power, base)
        base = gf.mul(base, base)
        e >>= 1
    assert np.array_equal(power, x)


def test_field_kinds_and_moduli() -> None:
    assert isinstance(field(8388617), PrimeField)
    nine = field(9)
    assert isinstance(nine, ExtensionField) and (nine.p, nine.k) == (3, 2)
    assert nine.modulus == (1, 0, 1)  # x^2 + 1
    assert field(4).modulus == (1, 1, 1)  # x^2 + x + 1
    assert repr(nine) == "GF(3^2)" and repr(field(7)) == "GF(7)"


@pytest.mark.parametrize("p, k", [(2, 2), (2, 3), (2, 4), (3, 2), (3, 3), (5, 2)])
def test_irreducibility_against_root_and_factor_search(p: int, k: int) -> None:
    """A monic polynomial of degree <= 3 is irreducible iff it has no root; for degree 4 over
    GF(2) also check it is not a product of two irreducible quadratics (only x^2 + x + 1)."""
    def value(f: list[int], x: int) -> int:
        return sum(c * x**i for i, c in enumerate(f)) % p

    for code in range(p**k):
        f = [(code // p**i) % p for i in range(k)] + [1]
        expected = all(value(f, x) for x in range(p))
        if k == 4 and p == 2:
            expected = expected and f != [1, 0, 1, 0, 1]  # (x^2 + x + 1)^2
        assert is_irreducible(f, p) == expected, f
    assert is_irreducible(list(first_irreducible(p, k)), p)


def test_bad_field_sizes() -> None:
    for q in (0, 1, 6, 12, 2**31, 2**40):
        with pytest.raises(ConfigError):
            field(q)
    with pytest.raises(ZeroDivisionError):
        field(7).inv(np.array([3, 0]))
