"""Token codebooks: the canonical (shortest) writing, the fast encoder against the plain
reference, JSON version 2, and the ``tokens`` training being deterministic."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fedhh.codec import Codebook, Codec
from fedhh.codec import codes as cw
from fedhh.codec.codebook import PRINTABLE_ASCII, builtin_codebook, huffman_codewords
from fedhh.errors import ConfigError

TOKENS = [b"th", b"the", b"he", b"ing", "😂".encode(), "ß".encode(), b"https://", b"ht"]


def small_book() -> Codebook:
    """Printable ASCII, eight tokens, an escape for the rest."""
    weights = [10.0, 1.0] + [1.0 + (b % 7) for b in PRINTABLE_ASCII] + [5, 8, 3, 4, 2, 2, 6, 1]
    codes = huffman_codewords(weights)
    singles = dict(zip(PRINTABLE_ASCII, codes[2 : 2 + len(PRINTABLE_ASCII)], strict=True))
    tokens = dict(zip(TOKENS, codes[2 + len(PRINTABLE_ASCII) :], strict=True))
    return Codebook("small", codes[0], codes[1], singles, "test", tokens)


def brute_force_shortest(book: Codebook, data: bytes) -> int:
    """The fewest bits of any writing of ``data`` (every split tried)."""
    if not data:
        return len(book.end)
    best = len(book.byte_bits(data[0])) + brute_force_shortest(book, data[1:])
    for token, code in book.tokens.items():
        if data.startswith(token):
            best = min(best, len(code) + brute_force_shortest(book, data[len(token):]))
    return best


items = st.text(alphabet=st.sampled_from(list("thein gsp:/.😂ßxé")), min_size=1, max_size=12)


@settings(max_examples=200, deadline=None, derandomize=True)
@given(item=items)
def test_the_writing_is_a_shortest_one(item: str) -> None:
    book = small_book()
    data = item.encode()
    symbols = book.symbols_of(data)
    assert b"".join(symbols) == data
    assert len(book.item_bits(item)) == brute_force_shortest(book, data)


def test_ties_go_to_the_longer_first_symbol() -> None:
    """Two writings of equal length: the one whose first symbol covers more bytes."""
    book = Codebook("tie", "00", "01", {ord("a"): "100", ord("b"): "101"}, "",
                    {b"ab": "110", b"aa": "111"})
    # "aab": a|ab (3 + 3) or aa|b (3 + 3): both 6 bits plus the end.
    assert book.symbols_of(b"aab") == [b"aa", b"b"]


@pytest.mark.parametrize("max_bits", [16, 60, 64, 200])
@settings(max_examples=60, deadline=None, derandomize=True)
@given(batch=st.lists(items, min_size=1, max_size=8))
def test_the_fast_encoder_equals_the_reference(max_bits: int, batch: list[str]) -> None:
    codec = Codec(small_book(), max_bits)
    got = codec.encode_many(batch)
    for item, code, length, cut in zip(batch, cw.to_ints(got.codes), got.lengths.tolist(),
                                       got.truncated.tolist(), strict=True):
        bits = codec.book.item_bits(item)
        assert code == int(bits[:max_bits].ljust(max_bits, "0"), 2)
        assert (length, cut) == (min(len(bits), max_bits), len(bits) > max_bits)
        if not cut:
            assert codec.display_item(code) == item


def test_the_tokens_codebook_writes_every_kind_of_item_in_few_bits() -> None:
    """The default's point (docs/codecs.md): emoji, CJK, URLs and numbers cost a fraction of
    what the byte code ``english`` spends on them; English words no more."""
    tokens, english = Codec("tokens", 1024), Codec("english", 1024)
    for item in ["👍🏽", "東京", "https://www.wikipedia.org/", "3.14159", "1234567"]:
        assert tokens.encode_many([item]).lengths[0] < 0.6 * english.encode_many(
            [item]).lengths[0], item
    words = ["the", "and", "people", "different", "government", "information"]
    assert tokens.encode_many(words).lengths.sum() <= english.encode_many(words).lengths.sum()


def test_token_codebooks_round_trip_through_json_version_2() -> None:
    book = small_book()
    data = book.to_dict()
    assert data["version"] == 2 and data["tokens"]["😂"]
    assert Codebook.from_json(book.to_json()) == book
    assert builtin_codebook("tokens").to_dict()["version"] == 2


@pytest.mark.parametrize(("change", "message"), [
    ({"tokens": {"a": "0"}}, "2 to 64 bytes"),
    ({"version": 1}, "exactly when it is version 2"),
    ({"tokens": {"th": "1"}}, "prefix-free"),
])
def test_bad_token_codebooks_are_refused(change: dict, message: str) -> None:
    data = small_book().to_dict()
    data.update(change)
    with pytest.raises(ConfigError, match=message):
        Codebook.from_dict(data)


def test_a_token_must_be_whole_characters() -> None:
    with pytest.raises(ConfigError, match="whole UTF-8 characters"):
        Codebook("x", "0", "10", {}, "", {b"\xf0\x9f": "11"})


def test_tokens_training_is_deterministic_on_a_small_sample() -> None:
    from fedhh.data.tokens import candidate_tokens, huffman_tokens_codebook

    sample = [("the", 50.0), ("then", 9.0), ("there", 8.0), ("https://a.com/", 3.0),
              ("https://b.org/", 2.0), ("😂", 4.0), ("😂😂", 1.0)]
    books = [huffman_tokens_codebook(sample, candidate_tokens(sample, 300, 2000))
             for _ in range(2)]
    assert books[0] == books[1]
    assert b"the" in books[0].tokens
    for item, _ in sample:
        assert Codec(books[0], 256).display_item(Codec(books[0], 256).encode(item)) == item
