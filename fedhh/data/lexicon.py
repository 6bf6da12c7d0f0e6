"""The lexicon of the synthetic population: real English words plus a rare tail of real-looking
strings.

`english_lexicon` turns wordfreq's English list into a distribution over concrete tokens, the way
LEAF preprocessed Reddit (lowercase ASCII): non-ASCII entries are dropped, and wordfreq's
digit-smashed number patterns ("0000", "00th", "0.0") are expanded into concrete numbers
("2017", "21st", "3.5") with a Benford first digit and, for 4-digit numbers, years peaking at
2017 (the LEAF Reddit dump is December 2017).

`rare_tail` generates the strings a dictionary does not hold but Reddit does: typos of real words
(deletion, doubling, swap, keyboard slips), elongations ("soooo", "hahahaha"), usernames and
handles, hashtags, run-together words ("idontknow"), long numbers, sizes and prices ("250k",
"1080p"), and web domains. Each string gets a popularity weight; most are rare, a few are common.
Everything is deterministic in the Generator passed in.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fedhh.data.wordlists import wordfreq_frequencies

_WORD = re.compile(r"[a-z]+(?:['._-][a-z]+)*'?")
_SMASHED = re.compile(r"[0-9a-z.,:'_-]*\d[0-9a-z.,:'_-]*")
_ORDINAL = re.compile(r"0+(st|nd|rd|th)")
_BENFORD = np.log10(1.0 + 1.0 / np.arange(1, 10))
_BENFORD_CDF = np.cumsum(_BENFORD / _BENFORD.sum())


@dataclass(frozen=True)
class WeightedStrings:
    """Strings with positive weights (not normalized), most frequent first."""

    strings: tuple[str, ...]
    weights: np.ndarray
    kinds: tuple[str, ...] = ()


def _sorted(table: dict[str, float], kind: dict[str, str] | None = None) -> WeightedStrings:
    order = sorted(table, key=lambda s: (-table[s], s))
    kinds = tuple(kind[s] for s in order) if kind is not None else ()
    return WeightedStrings(tuple(order), np.array([table[s] for s in order]), kinds)


def _digits(rng: np.random.Generator, length: int, size: int) -> list[str]:
    """``size`` numbers of ``length`` digits as text (no leading zero), Benford first digit."""
    first = rng.choice(np.arange(1, 10), size=size, p=_BENFORD / _BENFORD.sum())
    if length == 1:
        return [str(v) for v in first.tolist()]
    rest = rng.integers(0, 10, size=(size, length - 1))
    text = np.concatenate([first[:, None], rest], axis=1).astype("U1")
    return ["".join(row) for row in text.tolist()]


def _digits_u(rng: _Uniforms, length: int, size: int) -> list[str]:
    """Like `_digits` from buffered uniforms (Benford first digit)."""
    out = []
    for _ in range(size):
        first = 1 + int(np.searchsorted(_BENFORD_CDF, rng.random(), side="right"))
        out.append(str(min(first, 9)) + "".join(str(rng.below(10)) for _ in range(length - 1)))
    return out


def _ordinal_suffix(n: int) -> str:
    if 10 <= n % 100 <= 20:
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def _expand_template(template: str, mass: float, rng: np.random.Generator) -> dict[str, float]:
    """Concrete numbers for one digit-smashed wordfreq entry, sharing its mass."""
    samples = int(np.clip(mass * 4e6, 8, 4000))
    out: dict[str, float] = {}
    ordinal = _ORDINAL.fullmatch(template)
    runs = [(m.start(), m.end()) for m in re.finditer(r"\d+", template)]
    if template == "0000":
        years = 2017 - rng.geometric(0.12, size=samples // 2) + 1
        picks = [str(y) for y in np.clip(years, 1900, 2018).tolist()]
        picks += _digits(rng, 4, samples - len(picks))
    else:
        columns: list[list[str]] = []
        for i, (lo, hi) in enumerate(runs):
            length = hi - lo
            decimal_point_next = template[hi : hi + 1] == "."
            if length == 1 and (i > 0 or decimal_point_next):
                columns.append([str(v) for v in rng.integers(0, 10, size=samples).tolist()])
            else:
                columns.append(_digits(rng, length, samples))
        picks = []
        for j in range(samples):
            text = template
            for (lo, hi), column in zip(reversed(runs), reversed(columns), strict=True):
                text = text[:lo] + column[j] + text[hi:]
            if ordinal:
                number = int(text[: len(text) - 2])
                text = f"{number}{_ordinal_suffix(number)}"
            picks.append(text)
    values_, counts = np.unique(np.array(picks), return_counts=True)
    for value, count in zip(values_.tolist(), counts.tolist(), strict=True):
        out[value] = out.get(value, 0.0) + mass * count / samples
    return out


def english_lexicon(rng: np.random.Generator) -> WeightedStrings:
    """wordfreq's large English list as lowercase ASCII tokens with concrete numbers."""
    words, freqs = wordfreq_frequencies("en", "large")
    table: dict[str, float] = {}
    templates: list[tuple[str, float]] = []
    for word, freq in zip(words, freqs.tolist(), strict=True):
        if not word.isascii() or any(ch.isspace() for ch in word):
            continue
        if any(ch.isdigit() for ch in word):
            if _SMASHED.fullmatch(word):
                templates.append((word, freq))
        elif _WORD.fullmatch(word):
            table[word] = table.get(word, 0.0) + freq
    for template, mass in templates:
        if "0" not in template:  # a single digit or an unsmashed token such as "ps4"
            table[template] = table.get(template, 0.0) + mass
            continue
        for value, share in _expand_template(template, mass, rng).items():
            table[value] = table.get(value, 0.0) + share
    return _sorted(table)


# --- the rare tail -----------------------------------------------------------------------------

_KEYBOARD = [
    "qwertyuiop",
    "asdfghjkl",
    "zxcvbnm",
]
def _split(text: str) -> tuple[str, ...]:
    return tuple(text.split())


_EXPRESSIVE = _split(
    "so no yes yeah lol lmao omg wow please what why oh ok okay nice cool damn god love really "
    "hey yay aww ugh hmm wtf rofl yep nope sure great good bad sad hi bye thanks dude bro man "
    "fuck shit hell whoa hooray boo right wait stop go hello ah uh um yo nah meh huh haha hehe "
    "lmfao yass slay bruh"
)
_TLDS = (".com", ".com", ".com", ".org", ".net", ".io", ".co.uk", ".tv", ".gg")
_HANDLE_WORDS = _split(
    "dark shadow night wolf dragon ninja pixel cyber cosmic random lazy happy angry silent "
    "crazy sneaky magic iron golden lucky epic mega ultra super captain doctor mister lord "
    "king queen panda tiger fox cat dog bear raven ghost pirate wizard gamer potato pickle "
    "banana taco noodle waffle cookie bacon throwaway real official the not just"
)


class _Uniforms:
    """Buffered uniforms from a Generator: far cheaper than one Generator call per draw."""

    def __init__(self, rng: np.random.Generator, block: int = 1 << 20) -> None:
        self._rng = rng
        self._block = block
        self._buf: list[float] = []
        self._pos = 0

    def random(self) -> float:
        if self._pos == len(self._buf):
            self._buf = self._rng.random(self._block).tolist()
            self._pos = 0
        self._pos += 1
        return self._buf[self._pos - 1]

    def below(self, n: int) -> int:
        """A uniform integer in [0, n)."""
        return min(int(self.random() * n), n - 1)

    def between(self, lo: int, hi: int) -> int:
        """A uniform integer in [lo, hi)."""
        return lo + self.below(hi - lo)


def _neighbors() -> dict[str, str]:
    near: dict[str, str] = {}
    for r, row in enumerate(_KEYBOARD):
        for c, ch in enumerate(row):
            around = [row[k] for k in (c - 1, c + 1) if 0 <= k < len(row)]
            for rr in (r - 1, r + 1):
                if 0 <= rr < len(_KEYBOARD):
                    around += [_KEYBOARD[rr][k] for k in (c - 1, c) if 0 <= k < len(_KEYBOARD[rr])]
            near[ch] = "".join(around)
    return near


_TYPO_KINDS = np.array([0.25, 0.15, 0.35, 0.15, 0.10])  # drop, double, swap, slip, extra key


def _typo(word: str, kind: int, rng: _Uniforms, near: dict[str, str]) -> str:
    i = rng.below(len(word))
    if kind == 0:  # dropped letter
        return word[:i] + word[i + 1 :]
    if kind == 1:  # doubled letter
        return word[:i] + word[i] + word[i:]
    if kind == 2:  # swapped neighbours
        i = min(i, len(word) - 2)
        return word[:i] + word[i + 1] + word[i] + word[i + 2 :]
    options = near.get(word[i], "")
    if not options:
        return word[:i] + word[i + 1 :]
    slip = options[rng.below(len(options))]
    if kind == 3:  # keyboard slip replaces the letter
        return word[:i] + slip + word[i + 1 :]
    return word[:i] + slip + word[i:]  # keyboard slip adds a letter


def _elongate(word: str, rng: _Uniforms) -> tuple[str, int]:
    extra = min(1 + int(math.log(1.0 - rng.random()) / math.log(0.65)), 14)
    if word in ("haha", "hehe"):
        return word[:2] * (2 + extra), extra
    if word == "lol":
        return ("lo" * (1 + extra) + "l", extra) if rng.random() < 0.3 else ("lo" + "o" * extra
                                                                              + "l", extra)
    vowels = [i for i, ch in enumerate(word) if ch in "aeiouy"]
    i = vowels[-1] if vowels and rng.random() < 0.7 else len(word) - 1
    return word[: i + 1] + word[i] * extra + word[i + 1 :], extra


def _handle(rng: _Uniforms, pool: list[str]) -> str:
    a = _HANDLE_WORDS[rng.below(len(_HANDLE_WORDS))]
    b = pool[rng.below(len(pool))]
    style = rng.below(7)
    digits = str(rng.below(10 ** rng.between(1, 5)))
    if style == 0:
        return f"{a}{b}"
    if style == 1:
        return f"{a}_{b}"
    if style == 2:
        return f"{b}{digits}"
    if style == 3:
        return f"{a}{b}{digits}"
    if style == 4:
        return f"xx{b}xx"
    if style == 5:
        return f"@{a}{b}"
    return f"{b}_{digits}"


def _number(rng: _Uniforms) -> str:
    style = rng.below(8)
    if style == 0:
        return _digits_u(rng, rng.between(5, 10), 1)[0]
    if style == 1:
        return f"{_digits_u(rng, rng.between(1, 4), 1)[0]}k"
    if style == 2:
        return f"{_digits_u(rng, rng.between(2, 5), 1)[0]}p"
    if style == 3:
        return f"{rng.between(1, 13)}:{rng.between(0, 60):02d}"
    if style == 4:
        return f"{rng.between(0, 100)}.{rng.between(0, 10 ** 4)}"
    if style == 5:
        return f"{_digits_u(rng, rng.between(1, 4), 1)[0]}%"
    if style == 6:
        return f"{rng.between(1, 100)}x"
    return f"v{rng.between(1, 20)}.{rng.between(0, 20)}"


TAIL_KINDS = 7


def rare_tail(
    english: WeightedStrings, rng: np.random.Generator, size: int = 1_000_000,
    on_kind: Callable[[], None] | None = None,
) -> WeightedStrings:
    """About ``size`` distinct real-looking strings absent from ``english``, with weights;
    ``on_kind`` is called as each of the `TAIL_KINDS` kinds is done (progress).

    Shares of the tail's weight: typos 35%, handles 15%, numbers 15%, elongations 15%,
    run-together words 10%, hashtags 5%, domains 5%. Within a kind, a string's weight is its
    source word's frequency to a power below one times a lognormal factor, so a few strings are
    common ("soooo", "teh") and most are seen once or twice in the population.
    """
    known = set(english.strings)
    words = [w for w in english.strings[:200_000] if w.isalpha()]
    freq = np.array([english.weights[i] for i, w in enumerate(english.strings[:200_000])
                     if w.isalpha()])
    near = _neighbors()
    uni = _Uniforms(rng)
    shares = {"typo": 0.35, "handle": 0.15, "number": 0.15, "elongation": 0.15,
              "concatenation": 0.10, "hashtag": 0.05, "domain": 0.05}
    counts = {"typo": 0.40, "handle": 0.25, "number": 0.12, "elongation": 0.02,
              "concatenation": 0.12, "hashtag": 0.05, "domain": 0.04}
    table: dict[str, float] = {}
    kind_of: dict[str, str] = {}

    def add(kind: str, strings: list[str], raw: np.ndarray) -> None:
        fresh: dict[str, float] = {}
        for s, w in zip(strings, raw.tolist(), strict=True):
            if s and s not in known and s not in table and not any(c.isspace() for c in s):
                fresh[s] = fresh.get(s, 0.0) + w
        total = sum(fresh.values())
        for s, w in fresh.items():
            table[s] = shares[kind] * w / total
            kind_of[s] = kind
        if on_kind is not None:
            on_kind()

    def lognormal(n: int, sigma: float = 1.5) -> np.ndarray:
        return rng.lognormal(0.0, sigma, size=n)

    n = int(counts["typo"] * size)
    long_words = np.flatnonzero(np.array([len(w) >= 3 for w in words]))
    p = freq[long_words] ** 0.6 * np.array([len(words[i]) for i in long_words.tolist()])
    src = rng.choice(long_words, size=n, p=p / p.sum())
    kinds = rng.choice(5, size=n, p=_TYPO_KINDS)
    add("typo", [_typo(words[i], k, uni, near)
                 for i, k in zip(src.tolist(), kinds.tolist(), strict=True)],
        freq[src] ** 0.6 * _TYPO_KINDS[kinds] * lognormal(n))

    n = int(counts["elongation"] * size)
    rank_weight = 1.0 / np.arange(1, len(_EXPRESSIVE) + 1) ** 0.7
    picks = rng.choice(len(_EXPRESSIVE), size=n, p=rank_weight / rank_weight.sum())
    made = [_elongate(_EXPRESSIVE[i], uni) for i in picks.tolist()]
    add("elongation", [m[0] for m in made],
        rank_weight[picks] * 0.6 ** np.array([m[1] for m in made]) * lognormal(n, 0.5))

    pool = words[:20_000]
    n = int(counts["handle"] * size)
    add("handle", [_handle(uni, pool) for _ in range(n)], lognormal(n, 1.2))

    n = int(counts["number"] * size)
    add("number", [_number(uni) for _ in range(n)], lognormal(n, 1.2))

    n = int(counts["concatenation"] * size)
    small = np.array(words[:300])
    p_small = freq[:300] / freq[:300].sum()
    content = np.array(words[100:20_000])
    p_content = freq[100:20_000] ** 0.5
    p_content /= p_content.sum()
    a = rng.choice(300, size=n, p=p_small)
    b = rng.choice(content.size, size=n, p=p_content)
    first = rng.random(n) < 0.5
    add("concatenation",
        [small[i] + content[j] if f else content[j] + small[i]
         for i, j, f in zip(a.tolist(), b.tolist(), first.tolist(), strict=True)],
        (p_small[a] * p_content[b]) ** 0.5 * lognormal(n))

    n = int(counts["hashtag"] * size)
    a, b = rng.choice(content.size, size=n, p=p_content), rng.choice(content.size, size=n,
                                                                     p=p_content)
    single = rng.random(n) < 0.5
    add("hashtag", ["#" + content[i] + ("" if s else content[j])
                    for i, j, s in zip(a.tolist(), b.tolist(), single.tolist(), strict=True)],
        p_content[a] * lognormal(n))

    n = int(counts["domain"] * size)
    a = rng.choice(content.size, size=n, p=p_content)
    tld = rng.integers(0, len(_TLDS), size=n)
    add("domain", [content[i] + _TLDS[t] for i, t in zip(a.tolist(), tld.tolist(), strict=True)],
        p_content[a] * lognormal(n))
    return _sorted(table, kind_of)
