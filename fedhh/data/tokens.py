"""The ``unicode`` (default), ``general`` and ``tokens`` codebooks: Huffman codes over single
bytes and multi-byte tokens, trained on a public sample of many kinds of items.

Why tokens. A byte code spends bits per byte: an emoji is four bytes (90 bits with ``english``,
whose non-ASCII bytes are escaped), a URL such as ``https://www.wikipedia.org/`` 188 bits, a
Japanese word of five characters 350. The prefix tree finds an item only when its code is
short enough for the rounds (docs/codecs.md), so the code decides which kinds of items can be
found at all. A code over tokens (whole words, word pieces, ``https://``, ``.com``, ``@gmail.com``,
emoji, CJK characters) writes each of those in 27, 68 and 119 bits (Huffman over the tokens'
frequencies: about -log2 of the token's share per token).

Which tokens. Three codebooks come out of one training, and docs/codecs.md compares them:

- ``general`` (the default before 2026-12) keeps English letters as cheap as ``english`` does
  and adds, as tokens, every frequent multi-byte character (emoji, CJK, accented letters) and
  the pieces of structured items (tokens holding punctuation or only digits: ``https://``, ``www.``,
  ``.com/``, ``@gmail.com``, ``.14``, ``2017``). It is trained on the sample below with English
  words holding ``GENERAL_ENGLISH_SHARE`` of the weight. Words keep letter-by-letter codes,
  which matters for the prefix tree: words sharing a stem share a prefix, and a shared prefix's
  summed count survives the early rounds, whose selection is not yet conditioned on the prefix
  list (measured: with word-piece tokens, ``synthetic-german`` lost a quarter of its words).
- ``tokens`` adds word pieces as well (every BPE token): the shortest codes for words, at that
  cost on populations of words; on URLs it is the shortest.
- ``unicode`` (the default) keeps ``general``'s structural pieces of two or more characters,
  has no token for a single character, and writes continuation bytes raw
  (``fedhh.codec.codebook``): a character is its first byte's codeword and 6 bits a further
  byte, for scripts the sample barely holds (Hangul, Devanagari, Thai: ~28 bits a character,
  not ~47).

Training (``train_tokens_codebook``, ``train_general_codebook``), deterministic:

1. **A sample of the item domain** (``training_sample``), from data that ships in packages and
   from generated shapes, each part with a fixed share of the total weight (``SHARES``):
   natural-language words with their counts (pyspellchecker's 12 languages; wordfreq's lists
   of 12 more languages, letter words only, none of the languages or lists the built-in
   synthetic populations are drawn from except where noted in docs/codecs.md), each also
   capitalised; every pictographic character of Unicode (category So) with the emoji
   modifiers, joiner and variation selector; numbers, decimals, versions and years; URLs,
   e-mail addresses and identifiers generated from templates over pyspellchecker's English
   words (scheme, ``www.``, common top-level domains, paths; the largest public mail
   providers; separators ``-``, ``_``, ``.`` and digits).
2. **Candidate tokens**: byte-pair encoding over characters (the ``tokenizers`` library's BPE
   trainer, no pre-tokenizer: an item is one sequence) on the sample, each item repeated in
   proportion to its weight; every multi-character token it learns is a candidate (whole
   characters, so tokens never split a character).
3. **Codewords**: Huffman over (end, escape, single bytes, tokens) with weights counted from
   the canonical writings of the sample (``fedhh.codec.codebook``: the shortest), iterated
   (``EM_ROUNDS``), since the writing depends on the code. ``tokens``: printable ASCII bytes
   and the escape keep at least ``FLOOR_SHARE`` of the weight (as ``train_codebook``), other
   bytes without that share are escaped. ``general``: every byte that can occur in UTF-8 keeps
   at least ``GENERAL_FLOOR_SHARE`` (so no character costs an escape; the escape is left for
   the 13 bytes UTF-8 never uses). Tokens no writing uses are dropped.

``python -m fedhh.data.codebooks`` rewrites ``books/general.json`` and ``books/tokens.json``
(about three minutes on two cores); ``--check`` retrains and compares.
"""

from __future__ import annotations

import math
import string
import unicodedata
from collections import defaultdict
from collections.abc import Iterator

import numpy as np

from fedhh.codec.codebook import (
    CONTINUATION_BYTES,
    CONTINUATION_PAYLOAD_BITS,
    FLOOR_SHARE,
    MAX_CODEWORD_BITS,
    PRINTABLE_ASCII,
    Codebook,
    huffman_codewords,
)
from fedhh.data.itemsets import letter_words
from fedhh.errors import ConfigError

VOCABULARY = 8192           # BPE vocabulary (characters and merges) before pruning
BPE_COPIES = 1_000_000      # the sample, repeated in proportion to weight, for the BPE trainer
EM_ROUNDS = 3
SEED = 20261127
GENERAL_ENGLISH_SHARE = 0.9
GENERAL_FLOOR_SHARE = 2e-5
UTF8_BYTES = tuple(b for b in range(256) if b not in (0xC0, 0xC1) and b < 0xF5)
SPELLCHECKER_LANGUAGES = ("en", "es", "fr", "pt", "de", "it", "ru", "ar", "nl", "fa", "lv", "eu")
WORDFREQ_LANGUAGES = ("ja", "zh", "pl", "cs", "sv", "fi", "uk", "he", "bn", "ca", "mk", "nb")
WORDS_PER_LANGUAGE = 30_000
CAPITALISED_SHARE = 0.25    # of each word's weight, given to its capitalised form
# Shares of the total weight (they add up to 1).
SHARES = {
    "english": 0.20, "languages": 0.30, "wordfreq": 0.15, "pictographs": 0.06, "numbers": 0.09,
    "urls": 0.08, "emails": 0.05, "identifiers": 0.07,
}
TLDS = ("com", "org", "net", "de", "uk", "io", "co", "edu", "gov", "fr", "jp", "ru", "info",
        "me", "tv", "ca", "au", "nl", "it", "es", "br", "pl", "ch", "in", "us", "eu")
MAIL_PROVIDERS = ("gmail.com", "yahoo.com", "hotmail.com", "outlook.com", "icloud.com",
                  "aol.com", "gmx.de", "web.de", "mail.ru", "yandex.ru", "proton.me", "qq.com")
EMOJI_PARTS = ("\u200d", "\ufe0f", "\U0001f3fb", "\U0001f3fc", "\U0001f3fd", "\U0001f3fe",
               "\U0001f3ff")
# The descriptions name the module by the path it had when the shipped books were trained: they
# are part of books/*.json (and of every codec spec made from them), which must not change.
DESCRIPTION = (
    "Huffman code over BPE tokens (tokenizers) and single bytes, trained by fedhh.codec.tokens "
    "on words of 24 languages (pyspellchecker, wordfreq), Unicode pictographs, and generated "
    "numbers, URLs, e-mail addresses and identifiers; printable ASCII always coded, other bytes "
    "escaped unless frequent"
)
GENERAL_DESCRIPTION = (
    "Huffman code over single bytes, multi-byte characters and the punctuation and digit "
    "tokens of URLs, e-mail addresses and numbers (BPE, tokenizers), trained by "
    "fedhh.codec.tokens on English words (pyspellchecker, 90% of the weight) and words of 23 "
    "more languages, Unicode pictographs, numbers, URLs, e-mail addresses and identifiers; "
    "every UTF-8 byte coded"
)
UNICODE_DESCRIPTION = (
    "The general codebook's training (fedhh.data.tokens) without single-character tokens and "
    "with every continuation byte of a multi-byte character written as its six payload bits: "
    "a character costs its first byte's codeword and 6 bits per further byte"
)

Sample = list[tuple[str, float]]


def _share(pairs: Sample, total: float) -> Sample:
    weight = sum(w for _, w in pairs)
    return [(item, w / weight * total) for item, w in pairs]


def _words(pairs: Sample) -> Sample:
    """Words with their capitalised forms (proper nouns, German nouns, sentence starts)."""
    out: Sample = []
    for word, weight in pairs:
        capital = word[:1].upper() + word[1:]
        if capital != word:
            out.append((word, weight * (1 - CAPITALISED_SHARE)))
            out.append((capital, weight * CAPITALISED_SHARE))
        else:
            out.append((word, weight))
    return out


def _spellchecker_words(lang: str) -> Sample:
    from fedhh.data.wordlists import spellchecker_counts

    return [(w, float(n)) for w, n in spellchecker_counts(lang)[:WORDS_PER_LANGUAGE]]


def _zipf_picker(words: list[str], rng: np.random.Generator) -> Iterator[str]:
    weights = 1.0 / np.arange(1, len(words) + 1)
    picks = rng.choice(len(words), size=1 << 20, p=weights / weights.sum())
    while True:
        for i in picks.tolist():
            yield words[i]


def _numbers(rng: np.random.Generator) -> Sample:
    out: Sample = [(str(n), 1.0 / (n + 1)) for n in range(10_000)]
    out += [(str(year), 0.02) for year in range(1900, 2041)]
    for _ in range(4000):
        parts = [str(rng.integers(0, 20)), str(rng.integers(0, 40))]
        if rng.random() < 0.5:
            parts.append(str(rng.integers(0, 40)))
        out.append((".".join(parts), 0.01))
        out.append((f"{rng.integers(0, 1000)}.{rng.integers(0, 100):02d}", 0.005))
        out.append(("".join(str(d) for d in rng.integers(0, 10, size=rng.integers(5, 12))),
                    0.005))
    return out


def _urls(english: list[str], rng: np.random.Generator) -> Sample:
    word = _zipf_picker(english, rng)
    tld_weights = 1.0 / np.arange(1, len(TLDS) + 1)
    tld_weights /= tld_weights.sum()
    out: Sample = []
    for _ in range(30_000):
        host = next(word) + (next(word) if rng.random() < 0.3 else "")
        if rng.random() < 0.2:
            host = next(word) + "." + host
        host += "." + TLDS[int(rng.choice(len(TLDS), p=tld_weights))]
        scheme = "https://" if rng.random() < 0.8 else "http://"
        url = scheme + ("www." if rng.random() < 0.4 else "") + host
        if rng.random() < 0.7:
            url += "/" + "/".join(next(word) for _ in range(int(rng.integers(0, 3))))
        out.append((url, 1.0))
    return out


def _emails(english: list[str], rng: np.random.Generator) -> Sample:
    word = _zipf_picker(english, rng)
    out: Sample = []
    for _ in range(15_000):
        local = next(word) + ["", ".", "_"][int(rng.integers(0, 3))] + next(word)
        if rng.random() < 0.3:
            local += str(rng.integers(1, 100))
        out.append((f"{local}@{MAIL_PROVIDERS[int(rng.integers(0, len(MAIL_PROVIDERS)))]}", 1.0))
    return out


def _identifiers(english: list[str], rng: np.random.Generator) -> Sample:
    word = _zipf_picker(english, rng)
    out: Sample = []
    for _ in range(20_000):
        parts = [next(word) for _ in range(int(rng.integers(1, 4)))]
        style = int(rng.integers(0, 4))
        if style == 3:
            text = parts[0] + "".join(p.capitalize() for p in parts[1:])
        else:
            text = ["-", "_", "."][style].join(parts)
        if rng.random() < 0.3:
            text += str(rng.integers(0, 10))
        out.append((text, 1.0))
    return out


def _pictographs() -> Sample:
    symbols = [chr(c) for c in range(0x80, 0x110000) if unicodedata.category(chr(c)) == "So"]
    return [(s, 1.0) for s in symbols] + [(p, len(symbols) / 50) for p in EMOJI_PARTS]


def training_parts(seed: int = SEED) -> dict[str, Sample]:
    """The parts of the training sample by name (``SHARES``), each with its own weights."""
    rng = np.random.default_rng(seed)
    english = [w for w, _ in _spellchecker_words("en") if w.isascii() and w.isalpha()][:20_000]
    return {
        "english": _words(_spellchecker_words("en")),
        "languages": [pair for lang in SPELLCHECKER_LANGUAGES[1:]
                      for pair in _share(_words(_spellchecker_words(lang)), 1.0)],
        "wordfreq": [pair for lang in WORDFREQ_LANGUAGES for pair in _share(
            _words(list(letter_words(lang, WORDS_PER_LANGUAGE).items())), 1.0)],
        "pictographs": _pictographs(),
        "numbers": _numbers(rng),
        "urls": _urls(english, rng),
        "emails": _emails(english, rng),
        "identifiers": _identifiers(english, rng),
    }


def training_sample(seed: int = SEED) -> Sample:
    """The weighted sample the ``tokens`` codebook is trained on (module docstring)."""
    sample: Sample = []
    for name, pairs in training_parts(seed).items():
        sample += _share(pairs, SHARES[name])
    return sample


def candidate_tokens(sample: Sample, vocabulary: int = VOCABULARY,
                     copies: int = BPE_COPIES) -> list[bytes]:
    """Multi-character tokens learnt by BPE over characters (the ``tokenizers`` library)."""
    try:
        from tokenizers import Tokenizer, models, trainers
    except ImportError:
        raise ConfigError("training the tokens codebook needs the tokenizers package "
                          "(pip install 'fedhh[train]')") from None
    total = sum(w for _, w in sample)

    def repeated() -> Iterator[str]:
        for item, weight in sample:
            for _ in range(max(1, round(weight / total * copies))):
                yield item

    tokenizer = Tokenizer(models.BPE())
    trainer = trainers.BpeTrainer(vocab_size=vocabulary, min_frequency=2, show_progress=False,
                                  limit_alphabet=4000,
                                  initial_alphabet=[chr(b) for b in PRINTABLE_ASCII])
    tokenizer.train_from_iterator(repeated(), trainer)
    # Single bytes have codewords of their own; a token is two or more bytes (a multi-byte
    # character such as an emoji, or several characters).
    return sorted({t for t in (text.encode("utf-8") for text in tokenizer.get_vocab())
                   if len(t) >= 2})


def _writing_counts(sample: Sample, bits: dict[bytes, float], byte_bits: list[float],
                    longest: int) -> tuple[defaultdict[bytes, float], defaultdict[int, float]]:
    """Weighted counts of the tokens and single bytes in each item's cheapest writing."""
    tokens: defaultdict[bytes, float] = defaultdict(float)
    singles: defaultdict[int, float] = defaultdict(float)
    for item, weight in sample:
        data = item.encode("utf-8")
        n = len(data)
        cost = [0.0] * (n + 1)
        pick = [1] * n
        for i in range(n - 1, -1, -1):
            best, size = byte_bits[data[i]] + cost[i + 1], 1
            for k in range(2, min(longest, n - i) + 1):
                b = bits.get(data[i : i + k])
                if b is not None and b + cost[i + k] <= best:
                    best, size = b + cost[i + k], k
            cost[i], pick[i] = best, size
        i = 0
        while i < n:
            if pick[i] == 1:
                singles[data[i]] += weight
            else:
                tokens[data[i : i + pick[i]]] += weight
            i += pick[i]
    return tokens, singles


def huffman_tokens_codebook(sample: Sample, candidates: list[bytes], name: str = "tokens",
                            description: str = DESCRIPTION, rounds: int = EM_ROUNDS,
                            floor_share: float = FLOOR_SHARE,
                            floor_bytes: tuple[int, ...] = PRINTABLE_ASCII,
                            raw_continuations: bool = False) -> Codebook:
    """Codewords for the candidates and single bytes fitted to the sample's writings (step 3
    of the module docstring); ``floor_bytes`` keep at least ``floor_share`` of the weight.
    With ``raw_continuations`` continuation bytes cost their 6 payload bits and get no
    codeword (``fedhh.codec.codebook``), so a character's weight falls on its first byte."""
    total = sum(w for _, w in sample)
    items = total  # the end symbol: once per item
    longest = max((len(t) for t in candidates), default=1)
    # Start: a token costs a little less than its bytes would, so long tokens are preferred.
    bits = {t: 8.0 + 2.0 * (1 - len(t) / longest) for t in candidates}
    raw = set(CONTINUATION_BYTES) if raw_continuations else set()
    byte_bits = [float(CONTINUATION_PAYLOAD_BITS) if b in raw else 10.0 for b in range(256)]
    book: Codebook | None = None
    for _ in range(rounds):
        token_counts, single_counts = _writing_counts(sample, bits, byte_bits, longest)
        symbols_total = items + sum(token_counts.values()) + sum(
            w for b, w in single_counts.items() if b not in raw)
        floor = floor_share * symbols_total
        byte_weight = [0.0 if b in raw else float(single_counts.get(b, 0.0)) for b in range(256)]
        for b in floor_bytes:
            byte_weight[b] = max(byte_weight[b], floor)
        kept_bytes = [b for b in range(256) if byte_weight[b] >= floor and b not in raw]
        escaped = sum(w for b, w in enumerate(byte_weight) if b not in set(kept_bytes))
        kept_tokens = sorted(t for t in candidates if token_counts.get(t, 0.0) > 0)
        weights = [items, max(escaped, floor)]
        weights += [byte_weight[b] for b in kept_bytes]
        weights += [float(token_counts[t]) for t in kept_tokens]
        codes = huffman_codewords(weights)
        if max(len(c) for c in codes) > MAX_CODEWORD_BITS:
            raise ConfigError(f"the trained code has codewords longer than "
                              f"{MAX_CODEWORD_BITS} bits; raise floor_share or prune rare tokens")
        end, escape = codes[0], codes[1]
        byte_codes = dict(zip(kept_bytes, codes[2 : 2 + len(kept_bytes)], strict=True))
        token_codes = dict(zip(kept_tokens, codes[2 + len(kept_bytes) :], strict=True))
        book = Codebook(name, end, escape, byte_codes, description, token_codes,
                        raw_continuations)
        bits = {t: float(len(c)) for t, c in token_codes.items()}
        byte_bits = [float(len(book.byte_bits(b))) for b in range(256)]
        candidates = kept_tokens
    assert book is not None
    return book


def structural(candidates: list[bytes]) -> list[bytes]:
    """The ``general`` codebook's tokens: single multi-byte characters, and tokens of two or
    more characters holding punctuation or only digits."""
    out = []
    for token in candidates:
        text = token.decode("utf-8")
        if len(text) == 1 or text.isdigit() or any(ch in string.punctuation for ch in text):
            out.append(token)
    return out


def several_characters(candidates: list[bytes]) -> list[bytes]:
    """The ``unicode`` codebook's tokens: the structural pieces of two or more characters. A
    single character is its first byte and raw continuations there, so the characters of one
    Unicode block share a prefix, as the letters of a word's stem do: a token of its own for
    each symbol (``►``, ``♥``, ``😉``: ~23 bits each) made the first round hold each of them
    alone, and fewer were found (docs/codecs.md, "Raw continuations")."""
    return [t for t in candidates if len(t.decode("utf-8")) > 1]


def general_sample(sample: Sample) -> Sample:
    """English words at ``GENERAL_ENGLISH_SHARE`` of the weight, the rest of ``sample``
    (``training_sample``) sharing what is left."""
    english = _share(_spellchecker_words("en"), GENERAL_ENGLISH_SHARE)
    return english + _share(sample, 1 - GENERAL_ENGLISH_SHARE)


def train_codebooks(seed: int = SEED, vocabulary: int = VOCABULARY) -> dict[str, Codebook]:
    """The three trained token codebooks from scratch, sharing the sample and the BPE (module
    docstring)."""
    sample = training_sample(seed)
    candidates = candidate_tokens(sample, vocabulary)
    weighted, pieces = general_sample(sample), structural(candidates)
    general = huffman_tokens_codebook(
        weighted, pieces, "general", GENERAL_DESCRIPTION,
        floor_share=GENERAL_FLOOR_SHARE, floor_bytes=UTF8_BYTES)
    unicode = huffman_tokens_codebook(
        weighted, several_characters(pieces), "unicode", UNICODE_DESCRIPTION,
        floor_share=GENERAL_FLOOR_SHARE,
        floor_bytes=tuple(b for b in UTF8_BYTES if b not in CONTINUATION_BYTES),
        raw_continuations=True)
    return {"unicode": unicode, "general": general,
            "tokens": huffman_tokens_codebook(sample, candidates)}


def mean_bits(book: Codebook, sample: Sample) -> float:
    """Mean code length (with the end symbol) over a weighted sample."""
    total = sum(w for _, w in sample)
    return math.fsum(w * len(book.item_bits(x)) for x, w in sample) / total
