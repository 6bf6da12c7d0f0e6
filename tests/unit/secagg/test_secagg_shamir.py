"""Shamir sharing over GF(2^256 + 297): the field, exhaustive small cases, corruption."""

from __future__ import annotations

import contextlib
import itertools
import math
from collections.abc import Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.secagg import shamir
from fedhh.secagg.primitives import DeterministicRandom

_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61, 67, 71, 73)


def _probable_prime(n: int, bases: tuple[int, ...] = _BASES) -> bool:
    """Miller-Rabin with fixed bases (deterministic test, error < 4^-len(bases) for composites
    that are not adversarially constructed)."""
    if n < 2:
        return False
    for p in bases:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in bases:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def test_prime_is_the_smallest_prime_above_2_256() -> None:
    assert shamir.PRIME == 2**256 + 297
    assert _probable_prime(shamir.PRIME)
    assert not any(_probable_prime(c) for c in range(2**256 + 1, shamir.PRIME, 2))


@pytest.mark.parametrize("prime", [7, 13])
def test_exhaustive_small_field(prime: int) -> None:
    """Every secret and every polynomial of degree < t over GF(p), every t-subset of 5 holders:
    t shares reconstruct the secret; the share vectors are exactly the polynomial's values."""
    xs = [1, 2, 3, 4, 5][: prime - 1]
    for t in (1, 2, 3):
        for secret in range(prime):
            for coeffs in itertools.product(range(prime), repeat=t - 1):
                ys = [(secret + sum(c * x ** (i + 1) for i, c in enumerate(coeffs))) % prime
                      for x in xs]
                for subset in itertools.combinations(range(len(xs)), t):
                    points = [(xs[i], ys[i]) for i in subset]
                    assert shamir.reconstruct(points, prime=prime, bound=prime) == secret


def test_fewer_than_t_shares_are_independent_of_the_secret() -> None:
    """Over GF(7) with t = 3: for each secret, the 49 polynomials map one-to-one onto the 49
    possible share pairs of 2 holders, so 2 shares are uniform whatever the secret."""
    prime, xs = 7, (2, 5)
    for secret in range(prime):
        seen: dict[tuple[int, ...], int] = {}
        for a1, a2 in itertools.product(range(prime), repeat=2):
            ys = tuple((secret + a1 * x + a2 * x * x) % prime for x in xs)
            seen[ys] = seen.get(ys, 0) + 1
        assert len(seen) == prime * prime and set(seen.values()) == {1}


@pytest.mark.parametrize(("n", "t"), [(1, 1), (5, 3), (21, 11), (40, 40)])
def test_share_and_reconstruct_every_window(n: int, t: int) -> None:
    rand = DeterministicRandom(n * 100 + t)
    secret = int.from_bytes(rand(32), "big")
    xs = list(range(3, 3 + 7 * n, 7))  # sparse points, not 1..n: the general form
    ys = shamir.share(secret, t, xs, rand)
    points = list(zip(xs, ys, strict=True))
    for start in range(n - t + 1):
        assert shamir.reconstruct(points[start:start + t]) == secret
    assert shamir.reconstruct(points[::-1][:t]) == secret
    if t > 1:  # t - 1 shares interpolate some other value (with overwhelming probability)
        with contextlib.suppress(shamir.ShareError):
            assert shamir.reconstruct(points[: t - 1]) != secret


@pytest.mark.parametrize(("xs", "t"), [([1], 1), ([1, 2, 3], 3), (list(range(1, 83)), 54),
                                      (list(range(1, 201)), 200), ([7, 3, 1, 2], 4),
                                      ([2**24 - 3, 2**24 - 2, 2**24 - 1], 2)])
def test_secrets_shared_together_match_the_differences_they_were_drawn_as(
        xs: list[int], t: int) -> None:
    """Each secret's polynomial is f(x) = sum_i D_i C(x, i) with D_0 the secret and the next
    t - 1 draws its differences: the values at 1..k (the difference table in one integer,
    however large its unreduced lanes grow: the largest secret, t = 200) and at any other
    points must be exactly those, mod p."""
    secrets = [shamir.PRIME - 1, 0, 2**256 - 1]
    rand = DeterministicRandom(len(xs) * 100 + t)
    ys = shamir.share_many(secrets, t, xs, rand)
    # The same draws, t - 1 per secret in order, evaluated directly.
    differences = shamir._random_elements(DeterministicRandom(len(xs) * 100 + t),
                                          shamir.PRIME, len(secrets) * (t - 1))
    for j, secret in enumerate(secrets):
        mine = [secret, *differences[j * (t - 1):(j + 1) * (t - 1)]]
        assert ys[j] == [sum(d * math.comb(x, i) for i, d in enumerate(mine)) % shamir.PRIME
                         for x in xs]
        if j and len(xs) >= t:
            assert shamir.reconstruct(list(zip(xs, ys[j], strict=True))[:t]) == secret


@pytest.mark.parametrize("prime", [7, 11])
def test_uniform_differences_draw_every_polynomial_once(prime: int) -> None:
    """Over GF(p) with t = 3: the p^2 difference pairs a sharing can draw give p^2 distinct
    value vectors at the points 1..3, i.e. every polynomial of degree <= 2 through (0, s)
    exactly once: shares distributed as Shamir's, whose coefficients are drawn instead."""
    def draws(first: bytes) -> Callable[[int], bytes]:
        """One draw of candidate bytes, ``first`` first (each byte one candidate)."""
        return lambda n: first + bytes(n - len(first))

    for secret in range(prime):
        seen = set()
        for d1, d2 in itertools.product(range(prime), repeat=2):
            ys = shamir.share(secret, 3, [1, 2, 3], draws(bytes([d1, d2])), prime=prime)
            seen.add(tuple(ys))
        assert len(seen) == prime * prime


def test_random_elements_are_below_the_prime_and_use_the_stream_in_order() -> None:
    """Rejection sampling from batched draws: candidates of the bit length of p, those >= p
    skipped, in the order the stream gives them."""
    small = 251  # 8-bit candidates, about 2% rejected
    values = shamir._random_elements(DeterministicRandom(7), small, 2000)
    stream = DeterministicRandom(7)(2 * 2000 + 8)
    assert values == [b for b in stream if b < small][:2000]
    assert len(set(values)) == small


def test_extremes_of_the_secret_range() -> None:
    rand = DeterministicRandom(1)
    for secret in (0, 1, 2**256 - 1):
        ys = shamir.share(secret, 3, [1, 2, 3, 4], rand)
        assert shamir.reconstruct([(2, ys[1]), (4, ys[3]), (1, ys[0])]) == secret


def test_sharing_is_randomised() -> None:
    a = shamir.share(5, 3, [1, 2, 3], DeterministicRandom(1))
    b = shamir.share(5, 3, [1, 2, 3], DeterministicRandom(2))
    assert a != b


def test_reconstruction_at_or_above_2_256_is_rejected() -> None:
    """A secret >= 2^256 is not a 32-byte value: it proves a corrupted share."""
    for value in (2**256, shamir.PRIME - 1):
        ys = shamir.share(value, 2, [1, 2], DeterministicRandom(3))
        with pytest.raises(shamir.ShareError, match="corrupt"):
            shamir.reconstruct(list(zip([1, 2], ys, strict=True)))


def test_a_corrupted_share_changes_the_result() -> None:
    rand = DeterministicRandom(4)
    secret = int.from_bytes(rand(32), "big")
    ys = shamir.share(secret, 3, [1, 2, 3], rand)
    bad = [(1, ys[0]), (2, (ys[1] + 1) % shamir.PRIME), (3, ys[2])]
    with contextlib.suppress(shamir.ShareError):
        assert shamir.reconstruct(bad) != secret


def test_points_beyond_int64_reconstruct_as_small_ones_do() -> None:
    """Device ids are small, and their differences are taken in int64; points up to p (the
    API allows any non-zero field element) take the exact path, mixed with small ones too."""
    rand = DeterministicRandom(6)
    secret = int.from_bytes(rand(32), "big")
    for xs in ([2, 5, (1 << 62) + 3, shamir.PRIME - 1], [(1 << 62) - 1, 7, 9, 1 << 62]):
        ys = shamir.share(secret, 3, xs, rand)
        for window in (slice(0, 3), slice(1, 4)):
            assert shamir.reconstruct(list(zip(xs, ys, strict=True))[window]) == secret


def test_bad_inputs() -> None:
    rand = DeterministicRandom(5)
    with pytest.raises(shamir.ShareError):
        shamir.share(shamir.PRIME, 1, [1], rand)
    with pytest.raises(shamir.ShareError):
        shamir.share(1, 3, [1, 2], rand)
    with pytest.raises(shamir.ShareError):
        shamir.share(1, 0, [1, 2], rand)
    with pytest.raises(shamir.ShareError):
        shamir.share(1, 2, [1, 1], rand)
    with pytest.raises(shamir.ShareError):
        shamir.share(1, 2, [0, 1], rand)
    with pytest.raises(shamir.ShareError):
        shamir.reconstruct([])
    with pytest.raises(shamir.ShareError):
        shamir.reconstruct([(1, 1), (1, 2)])
    with pytest.raises(shamir.ShareError):
        shamir.reconstruct([(1, shamir.PRIME)])


def test_share_encoding() -> None:
    for y in (0, 1, shamir.PRIME - 1):
        raw = shamir.encode_share(y)
        assert len(raw) == shamir.SHARE_BYTES and shamir.decode_share(raw) == y
    with pytest.raises(shamir.ShareError, match=">= p"):
        shamir.decode_share(shamir.PRIME.to_bytes(33, "big"))
    with pytest.raises(shamir.ShareError):
        shamir.decode_share(bytes(32))


@given(st.lists(st.one_of(
    st.integers(min_value=0, max_value=(1 << 264) - 1),
    st.integers(min_value=shamir.PRIME - 300, max_value=shamir.PRIME + 300),
    st.sampled_from([0, 1, shamir.PRIME - 1, shamir.PRIME, 1 << 256, (1 << 264) - 1])),
    min_size=1, max_size=8))
def test_packed_values_are_below_p_exactly_when_each_integer_is(values: list[int]) -> None:
    blob = b"".join(v.to_bytes(shamir.SHARE_BYTES, "big") for v in values)
    packed = np.frombuffer(blob, dtype=np.uint8).reshape(-1, shamir.SHARE_BYTES)
    assert shamir.below_prime(packed) == all(v < shamir.PRIME for v in values)
    assert shamir.below_prime(packed, prime=257) == all(v < 257 for v in values)
    # The same values as an unmask response sends them, one bytes object (its first-byte
    # pass settles the honest ones; the others go through the comparison above).
    assert shamir.packed_below_prime(blob) == all(v < shamir.PRIME for v in values)
    assert shamir.packed_below_prime(blob, prime=257) == all(v < 257 for v in values)


def test_packed_share_values_are_whole_values() -> None:
    assert shamir.packed_below_prime(b"")
    with pytest.raises(shamir.ShareError, match="33 bytes each"):
        shamir.packed_below_prime(bytes(shamir.SHARE_BYTES + 1))


@pytest.mark.parametrize("span_bits", [1, 2, 13, 20, 30, 31, 32, 40, 61, 62])
def test_difference_products_multiplied_in_groups_reconstruct_exactly(span_bits: int) -> None:
    """Each point's weight in the general form, the point times its differences to the
    others, is multiplied 62 // bits factors at a time in int64 (points of 2^62 and more take
    exact Python integers); at every span, and with the largest differences of one sign
    or the other, the secret comes back exactly."""
    rand = DeterministicRandom(span_bits)
    secret = int.from_bytes(rand(32), "big") >> 1
    top = 1 << span_bits
    for xs in ([1, top, *range(2, 60)], [top, *range(top - 59, top)], [3, top, 1, top - 1]):
        xs = list(dict.fromkeys(x for x in xs if 0 < x <= top))
        t = len(xs) - 1
        ys = shamir.share(secret, t, xs, rand)
        points = list(zip(xs, ys, strict=True))
        assert shamir.reconstruct(points[:t]) == secret
        assert shamir.reconstruct(points[1:]) == secret
        assert shamir.reconstruct(points[::-1][:t]) == secret


@settings(max_examples=100, derandomize=True, database=None, deadline=None)
@given(st.data())
def test_points_within_a_small_window_rebuild_as_any_points_do(data: st.DataObject) -> None:
    """Points inside 1..w with w at most twice their number take the binomial sum; it gives
    what the general fraction gives for every subset, in every order, and so the secret."""
    w = data.draw(st.integers(1, 120))
    t = data.draw(st.integers(-(-w // 2), w))
    xs = data.draw(st.permutations(range(1, w + 1)))[:t]
    if w not in xs:  # (the window is max(xs); keep it w)
        xs[0] = w
    rand = DeterministicRandom(w * 1000 + t)
    secret = int.from_bytes(rand(32), "big")
    ys = shamir.share(secret, t, xs, rand)
    points = list(zip(xs, ys, strict=True))
    assert max(xs) <= 2 * len(xs)
    assert shamir._binomial_sum(points, xs, shamir.PRIME) == secret
    assert shamir._fraction_sum(points, xs, shamir.PRIME) == secret
    assert shamir.reconstruct(points) == secret


def _batch(rows: list[tuple[int, list[int], int]], rand: DeterministicRandom
           ) -> tuple[np.ndarray, list[list[int]], list[int | None]]:
    """Rows (t, points, secret) shared and read back as reconstruct_many takes them."""
    xs, ys, expected = [], [], []
    for t, points, secret in rows:
        values = shamir.share(secret % shamir.PRIME, t, points, rand)
        xs.append(points)
        ys.append(values)
        expected.append(secret if secret < 1 << 256 else None)
    return np.array(xs, dtype=np.int64), ys, expected


@settings(max_examples=60, derandomize=True, database=None, deadline=None)
@given(st.data())
def test_a_batch_rebuilds_each_row_as_reconstruct_does(data: st.DataObject) -> None:
    """Rows of one t whose missing points fill no, one, several or more than the batched
    number of int64 products (those go one by one), and secrets that are no 32-byte value
    (>= 2^256: None, as a corrupt share gives), all come back as reconstruct gives them."""
    t = data.draw(st.integers(1, 60))
    rand = DeterministicRandom(t)
    rows = []
    for _ in range(data.draw(st.integers(1, 12))):
        window = t + data.draw(st.sampled_from([0, 1, 7, 8, 9, 33, 40, 200]))
        points = sorted(data.draw(st.permutations(range(1, window + 1)))[:t])
        secret = data.draw(st.one_of(st.integers(0, (1 << 256) - 1),
                                     st.integers(1 << 256, shamir.PRIME - 1)))
        rows.append((t, points, secret))
    xs, ys, expected = _batch(rows, rand)
    assert shamir.reconstruct_many(xs, ys) == expected
    for row, values, value in zip(xs.tolist(), ys, expected, strict=True):
        assert value is None or value == shamir.reconstruct(list(zip(row, values, strict=True)))


def test_a_batch_of_secagg_rows_at_their_smallest_points() -> None:
    """The server's case: k = 88, t = 58, each secret's 58 smallest points among the holders
    that answered (some bucket rows with one, some with several products per point)."""
    rand = DeterministicRandom(88)
    rows = []
    for r in range(300):
        answered = sorted(range(1, 89), key=lambda x, r=r: (x * 7919 + r * 104729) % 89)
        kept = sorted(answered[:58 + r % 31])[:58]
        rows.append((58, kept, int.from_bytes(rand(32), "big")))
    xs, ys, expected = _batch(rows, rand)
    assert shamir.reconstruct_many(xs, ys) == expected


@pytest.mark.parametrize("xs, ys, why", [
    (np.array([[2, 1]]), [[5, 6]], "strictly increasing"),
    (np.array([[0, 1]]), [[5, 6]], "strictly increasing"),
    (np.array([[1, 1 << 31]]), [[5, 6]], "strictly increasing"),
    (np.array([[1, 2]]), [[5]], "share values"),
    (np.array([1, 2]), [[5, 6]], "one row per secret"),
    (np.array([[1.0, 2.0]]), [[5, 6]], "one row per secret"),
    (np.array([[1, 2]]), [[5, 6], [7, 8]], "one row per secret"),
])
def test_a_batch_with_malformed_points_is_refused(xs: np.ndarray, ys: list[list[int]],
                                                  why: str) -> None:
    with pytest.raises(shamir.ShareError, match=why):
        shamir.reconstruct_many(xs, ys)
    assert shamir.reconstruct_many(np.zeros((0, 3), dtype=np.int64), []) == []
