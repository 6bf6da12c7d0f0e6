"""Mask generator: known-answer vectors, independence from chunking, stability across processes."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.prg import MaskGenerator, mask_dtype, pair_mask_key, self_mask_key

KEY = bytes(range(16))
# Hard-coded outputs: AES-128-CTR keystream of KEY from the all-zero counter block, read as
# little-endian integers. Any change to the generator (key schedule, counter, endianness) breaks
# these, and with them the masks devices and servers of different versions would compute.
KAT_U16 = [41414, 14139, 36743, 33371, 20335, 25217, 51361, 31192]
KAT_U32 = [926654918, 2187038599, 1652641647, 2044250273, 2501068403, 515162261, 3820845897,
           170783845]
SELF_KEY = "ab26982aadb00e3dc15f743aaf59b635"  # self_mask_key(0^32, bytes(range(32)), 7)
KAT_SELF_U32 = [3685713194, 3962021301, 3103970806, 3906933401, 2840798974, 2536867765]
PAIR_KEY = "ca9e52809e27af74399949d38ab5ef14"  # pair_mask_key(0x11^32, bytes(range(32)), 3, 9)
LONG_TAIL = [15724, 1430, 611, 13705]  # last 4 of a 200000-element uint16 mask of KEY
LONG_SUM = 6569619617


def test_known_answer_vectors() -> None:
    assert MaskGenerator(8, 16).generate(KEY).tolist() == KAT_U16
    assert MaskGenerator(8, 32).generate(KEY).tolist() == KAT_U32
    long = MaskGenerator(200_000, 16).generate(KEY)
    assert long[-4:].tolist() == LONG_TAIL
    assert int(long.astype(np.int64).sum()) == LONG_SUM


def test_key_derivation_vectors() -> None:
    sid = bytes(range(32))
    key = self_mask_key(bytes(32), sid, 7)
    assert key.hex() == SELF_KEY
    assert MaskGenerator(6, 32).generate(key).tolist() == KAT_SELF_U32
    assert pair_mask_key(b"\x11" * 32, sid, 3, 9).hex() == PAIR_KEY
    assert pair_mask_key(b"\x11" * 32, sid, 9, 3).hex() == PAIR_KEY  # symmetric in (u, v)
    assert self_mask_key(bytes(32), sid, 8) != key  # bound to the device id
    assert self_mask_key(bytes(32), bytes(32), 7) != key  # bound to the session


def test_keystream_is_aes_of_the_counter_blocks() -> None:
    """Independent check of the construction: block i is AES_K(i as a 128-bit big-endian int)."""
    ecb = Cipher(algorithms.AES(KEY), modes.ECB()).encryptor()
    blocks = b"".join(ecb.update(i.to_bytes(16, "big")) for i in range(3))
    expected = np.frombuffer(blocks, dtype="<u4")
    assert MaskGenerator(12, 32).generate(KEY).tolist() == expected.tolist()


def test_stable_across_processes() -> None:
    code = ("from fedhh.secagg.prg import MaskGenerator;"
            f"print(MaskGenerator(8, 16).generate({KEY!r}).tolist())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == str(KAT_U16)


@pytest.mark.parametrize("dimension", [1, 7, 8, 9, 100, 1023, 4099])
@pytest.mark.parametrize("bits", [16, 32])
def test_chunking_does_not_change_the_mask(dimension: int, bits: int) -> None:
    whole = MaskGenerator(dimension, bits, chunk_bytes=1 << 20).generate(KEY)
    for chunk in (16, 48, 4096):
        assert np.array_equal(MaskGenerator(dimension, bits, chunk_bytes=chunk).generate(KEY),
                              whole)


def test_adding_with_both_signs_cancels_and_wraps() -> None:
    gen = MaskGenerator(1000, 16)
    acc = np.arange(1000, dtype=np.uint16)
    gen.add(acc, KEY)
    assert not np.array_equal(acc, np.arange(1000))
    gen.add(acc, KEY, -1)
    assert np.array_equal(acc, np.arange(1000, dtype=np.uint16))
    twice = gen.zeros()
    gen.add(twice, KEY)
    gen.add(twice, KEY)
    expected = (2 * gen.generate(KEY).astype(np.int64)) % (1 << 16)
    assert np.array_equal(twice.astype(np.int64), expected)


@pytest.mark.parametrize("dimension", [1, 9, 4096, 5000])
@pytest.mark.parametrize("bits", [16, 32])
@pytest.mark.parametrize("count", [0, 1, 7, 40])
def test_add_many_is_each_add_in_turn(dimension: int, bits: int, count: int) -> None:
    # Batches of up to 128 KiB of vectors (16 rows of 4096 16-bit entries, 6 of 5000 32-bit
    # ones); a generator whose chunk is shorter than a vector adds each key on its own.
    keys = [self_mask_key(bytes(32), bytes(range(32)), i) for i in range(count)]
    signs = [1 if i % 3 else -1 for i in range(count)]
    for chunk in (1 << 18, 64):
        gen = MaskGenerator(dimension, bits, chunk_bytes=chunk)
        start = np.arange(dimension).astype(gen.native_dtype)
        each, many = start.copy(), start.copy()
        for key, sign in zip(keys, signs, strict=True):
            gen.add(each, key, sign)
        gen.add_many(many, keys, signs)
        assert np.array_equal(many, each)
        gen.add_many(many, keys, [-s for s in signs])  # and the batch again, undone
        assert np.array_equal(many, start)


def test_add_many_refuses_bad_arguments_and_changes_nothing() -> None:
    gen = MaskGenerator(10, 32)
    acc = gen.zeros()
    for keys, signs, match in (([KEY], [1, 1], "signs"), ([KEY, KEY + b"x"], [1, 1], "key"),
                               ([KEY, KEY], [1, 0], "sign")):
        with pytest.raises(ValueError, match=match):
            gen.add_many(acc, keys, signs)
        assert not acc.any()
    with pytest.raises(ValueError, match="accumulator"):
        gen.add_many(np.zeros(10, np.uint16), [KEY], [1])


def test_rejects_bad_arguments() -> None:
    gen = MaskGenerator(10, 32)
    with pytest.raises(ValueError, match="accumulator"):
        gen.add(np.zeros(10, np.uint16), KEY)
    with pytest.raises(ValueError, match="accumulator"):
        gen.add(np.zeros(11, np.uint32), KEY)
    with pytest.raises(ValueError, match="key"):
        gen.add(gen.zeros(), KEY + b"x")
    with pytest.raises(ValueError, match="sign"):
        gen.add(gen.zeros(), KEY, 2)
    with pytest.raises(SecAggConfigError, match="modulus_bits"):
        mask_dtype(8)
    with pytest.raises(SecAggConfigError, match="dimension"):
        MaskGenerator(0, 16)


def test_masks_look_uniform() -> None:
    """A sanity check, not a proof: mean and spread of 2^16 uint16 draws."""
    m = MaskGenerator(1 << 16, 16).generate(KEY).astype(np.float64)
    # mean of U{0..65535} is 32767.5 with sd 18918 per draw; 6 sigma over 2^16 draws is ~444.
    assert abs(m.mean() - 32767.5) < 450
    counts = np.bincount(m.astype(np.int64) >> 12, minlength=16)
    assert counts.min() > 3700 and counts.max() < 4500  # 4096 expected per bucket
