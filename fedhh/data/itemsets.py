"""Item distributions beyond English words, from data that ships in registry packages, and
small populations drawn from them: German words, URLs and emoji.

- `german_words`: wordfreq's ``large`` German list (with umlauts; wordfreq case-folds, so ß is
  written ss), letter words only (its digit patterns and punctuation dropped).
- `url_items`: URLs ``https://<domain>/`` and ``https://<domain>/<path>``. The domains are the
  web domains among the tokens of wordfreq's lists of 13 languages (``youtube.com``,
  ``pic.twitter.com``, ``idnes.cz``...) with their summed frequencies, kept when the last label
  is one of `TLDS` and the label before it has at least two characters (so abbreviations such
  as ``t.ex`` or ``d.lgs`` are not domains); each domain's weight is split half to its bare URL
  and half over `PATHS_PER_DOMAIN` paths, the most frequent English words of four or more
  letters with Zipf weights. Long items (often over 100 bits) that share long prefixes.
- `emoji_items`: the pictographic tokens of wordfreq's lists of 11 languages (emoji with their
  skin-tone modifiers, joiners and variation selectors, flags, and symbols such as ♪ or ★: every
  character of Unicode category So, Sk, Cf or Mn, at least one So, not starting with a joiner or
  modifier), frequencies summed. Many share prefixes (👍, 👍🏻, 👍🏼; 🤷‍♂️, 🤷🏻‍♂️).

`sample_population` draws users from such a distribution: user u holds ``1 + Poisson(mean - 1)``
tokens drawn independently from the weights, counted per item. It is deterministic in the seed
and returns an in-memory `FederatedDataset` (the built-in ``synthetic-german``,
``synthetic-urls`` and ``synthetic-emoji`` datasets are such populations, saved to the cache).
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable

import numpy as np

from fedhh.data.dataset import FederatedDataset, _narrow_counts
from fedhh.data.lexicon import WeightedStrings
from fedhh.data.wordlists import wordfreq_frequencies
from fedhh.errors import DatasetError

ITEMSETS_VERSION = 1
TLDS = frozenset({
    "com", "org", "net", "edu", "gov", "info", "io", "co", "me", "tv", "fm", "ly", "eu", "us",
    "uk", "de", "fr", "it", "es", "nl", "pl", "ru", "cz", "fi", "se", "jp", "br", "ca", "au",
    "ch", "at", "be", "dk", "no", "pt", "gr", "in",
})  # fmt: skip
URL_LANGUAGES = ("en", "de", "es", "fr", "pt", "it", "nl", "pl", "ru", "ja", "sv", "cs", "fi")
EMOJI_LANGUAGES = ("en", "de", "es", "fr", "pt", "it", "nl", "pl", "ru", "ja", "ar")
MAX_DOMAINS = 1000
PATHS_PER_DOMAIN = 30
LETTER_WORD = re.compile(r"[^\W\d_]+(?:[-'][^\W\d_]+)*")
_DOMAIN = re.compile(r"(?:[a-z0-9](?:[a-z0-9-]*[a-z0-9])?\.)+([a-z]{2,})")
_PATH_WORD = re.compile(r"[a-z]{4,}")


def _table(table: dict[str, float]) -> WeightedStrings:
    order = sorted(table, key=lambda s: (-table[s], s))
    return WeightedStrings(tuple(order), np.array([table[s] for s in order], dtype=np.float64))


def letter_words(lang: str, limit: int) -> dict[str, float]:
    """wordfreq's letter words of ``lang`` (no digit, no punctuation but an inner ``-`` or
    ``'``) with their frequencies, in wordfreq's order, most frequent first (at most
    ``limit``): the German population's words here, the English ones of
    ``fedhh.experiments.populations``."""
    words, freqs = wordfreq_frequencies(lang)
    table: dict[str, float] = {}
    for word, freq in zip(words, freqs.tolist(), strict=True):
        if LETTER_WORD.fullmatch(word) and word not in table:
            table[word] = freq
            if len(table) >= limit:
                break
    return table


def german_words(limit: int = 200_000) -> WeightedStrings:
    """wordfreq's German letter words, most frequent first (at most ``limit``)."""
    return _table(letter_words("de", limit))


def _is_domain(token: str) -> bool:
    match = _DOMAIN.fullmatch(token)
    if match is None or match.group(1) not in TLDS:
        return False
    labels = token.split(".")
    return len(labels[-2]) >= 2


def url_items(max_domains: int = MAX_DOMAINS,
              paths_per_domain: int = PATHS_PER_DOMAIN) -> WeightedStrings:
    """URLs over wordfreq's web domains (see the module docstring)."""
    domains: dict[str, float] = {}
    for lang in URL_LANGUAGES:
        words, freqs = wordfreq_frequencies(lang)
        for word, freq in zip(words, freqs.tolist(), strict=True):
            if "." in word and _is_domain(word):
                domains[word] = domains.get(word, 0.0) + freq
    top = _table(domains)
    english, _ = wordfreq_frequencies("en")
    paths = [w for w in english[:5000] if _PATH_WORD.fullmatch(w)][:paths_per_domain]
    zipf = 1.0 / np.arange(1, len(paths) + 1)
    zipf /= zipf.sum()
    table: dict[str, float] = {}
    for domain, weight in zip(top.strings[:max_domains], top.weights[:max_domains].tolist(),
                              strict=True):
        table[f"https://{domain}/"] = weight / 2
        for path, share in zip(paths, zipf.tolist(), strict=True):
            table[f"https://{domain}/{path}"] = weight / 2 * share
    return _table(table)


def _is_pictographic(token: str) -> bool:
    # The first character decides for almost every one of the lists' millions of words (a
    # letter): look at the rest only after it.
    return (unicodedata.category(token[0]) == "So"
            and all(unicodedata.category(ch) in ("So", "Sk", "Cf", "Mn") for ch in token[1:]))


def emoji_items() -> WeightedStrings:
    """Emoji and pictographic symbols of wordfreq's lists (see the module docstring)."""
    table: dict[str, float] = {}
    for lang in EMOJI_LANGUAGES:
        words, freqs = wordfreq_frequencies(lang)
        for word, freq in zip(words, freqs.tolist(), strict=True):
            if _is_pictographic(word):
                table[word] = table.get(word, 0.0) + freq
    return _table(table)


def symbol_sample() -> list[tuple[str, float]]:
    """Every character of Unicode category So (Python's Unicode database), weight 1 each: a
    public sample of the emoji domain to train a codebook on (it knows the bytes of emoji, not
    their frequencies)."""
    return [(chr(c), 1.0) for c in range(0x80, 0x110000)
            if unicodedata.category(chr(c)) == "So"]


ITEMSETS: dict[str, Callable[[], WeightedStrings]] = {
    "german": german_words, "urls": url_items, "emoji": emoji_items,
}


def sample_population(strings: WeightedStrings, num_users: int, mean_tokens: float, seed: int,
                      name: str, provenance: str = "") -> FederatedDataset:
    """``num_users`` users, each holding ``1 + Poisson(mean_tokens - 1)`` tokens drawn from the
    weights (see the module docstring)."""
    if num_users < 1:
        raise DatasetError(f"num_users must be >= 1, got {num_users}")
    if not mean_tokens >= 1:
        raise DatasetError(f"mean_tokens must be >= 1, got {mean_tokens}")
    if not strings.strings:
        raise DatasetError(f"the item distribution of {name} is empty")
    rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ITEMSETS_VERSION,)))
    lengths = 1 + rng.poisson(mean_tokens - 1, size=num_users)
    p = strings.weights / strings.weights.sum()
    tokens = rng.choice(p.size, size=int(lengths.sum()), p=p)
    users = np.repeat(np.arange(num_users, dtype=np.int64), lengths)
    keys, counts = np.unique(users * p.size + tokens, return_counts=True)
    user_of, item_of = np.divmod(keys, p.size)
    used, items = np.unique(item_of, return_inverse=True)  # ids by frequency rank
    indptr = np.concatenate(([0], np.cumsum(np.bincount(user_of, minlength=num_users))))
    vocabulary = tuple(strings.strings[i] for i in used.tolist())
    return FederatedDataset(vocabulary, indptr.astype(np.int64), items.astype(np.int32),
                            _narrow_counts(counts), name, provenance)
