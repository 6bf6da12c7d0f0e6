"""Benchmark: what the codebook costs in bits and in items found, `unicode` against `general`.

Two measurements:

1. **Bits per character** on the frequency-weighted word lists of languages no codebook was
   trained on (wordfreq's ``small`` lists of Korean, Hindi, Tamil, Greek, Vietnamese, Turkish;
   letter words holding a non-ASCII letter), and on the parts of the training sample
   (`fedhh.data.tokens`), whose mean code length each book should keep.
2. **Whole items found** by `fedhh simulate` at the defaults (only `--codec` changes), on the
   built-in populations, study 23's `mixed-kinds`, and a population of held-out scripts:
   400,000 users, each holding 1-5 words drawn by frequency from the Korean, Hindi, Tamil and
   Greek lists (the 2,000 most frequent non-ASCII letter words of each, each language a
   quarter of the draws).

    .venv/bin/python bench/bench_codebooks.py               # seeds 0 and 1
    .venv/bin/python bench/bench_codebooks.py --seeds 0     # one seed

Results are printed and written to docs/benchmarks/codebooks.md.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import unicodedata
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
from bench.reporting import publish  # noqa: E402
from fedhh.codec import Codec  # noqa: E402

OUT = ROOT / "docs" / "benchmarks" / "codebooks.md"
BOOKS = ("general", "unicode")
HELD_OUT = ("ko", "hi", "ta", "el", "vi", "tr")
POPULATION_LANGUAGES = ("ko", "hi", "ta", "el")
WORDS_PER_LANGUAGE = 2000
USERS = 400_000
DATASETS = ("synthetic-reddit", "synthetic-urls", "synthetic-emoji", "synthetic-german",
            "mixed-kinds")


def letter_word(word: str) -> bool:
    """A word of letters (with the marks and joiners Indic scripts write inside words), not
    plain ASCII."""
    return not word.isascii() and all(
        ch.isalpha() or unicodedata.category(ch).startswith("M") or ch in "\u200c\u200d"
        for ch in word)


def held_out_words(lang: str, limit: int) -> tuple[list[str], np.ndarray]:
    """The ``limit`` most frequent letter words of wordfreq's small list, with frequencies
    (wordfreq's buckets are centibels: bucket i holds words of frequency 10^(-i/100))."""
    from wordfreq import get_frequency_list

    words: list[str] = []
    freqs: list[float] = []
    for i, bucket in enumerate(get_frequency_list(lang, wordlist="small")):
        for word in bucket:
            if letter_word(word):
                words.append(word)
                freqs.append(10 ** (-i / 100))
        if len(words) >= limit:
            break
    return words[:limit], np.array(freqs[:limit])


def bits_per_character() -> list[str]:
    codecs = {name: Codec(name, 1024) for name in BOOKS}
    lines = ["| language (held out) | " + " | ".join(f"`{n}` bits/char" for n in BOOKS) + " |",
             "| --- |" + " --- |" * len(BOOKS)]
    for lang in HELD_OUT:
        words, freqs = held_out_words(lang, 3000)
        chars = np.array([len(w) for w in words])
        cells = []
        for codec in codecs.values():
            lengths = codec.encode_many(words).lengths
            cells.append(f"{float((lengths * freqs).sum() / (chars * freqs).sum()):.1f}")
        lines.append(f"| {lang} | " + " | ".join(cells) + " |")
    return lines


PARTS = {"english": "English words", "pictographs": "pictographs", "numbers": "numbers",
         "urls": "URLs", "emails": "e-mail addresses", "identifiers": "identifiers"}


def training_parts() -> list[str]:
    from fedhh.data.tokens import training_parts as sample_parts

    parts = {PARTS[name]: pairs for name, pairs in sample_parts().items() if name in PARTS}
    codecs = {name: Codec(name, 1024) for name in BOOKS}
    lines = ["| training part | " + " | ".join(f"`{n}` mean bits" for n in BOOKS) + " |",
             "| --- |" + " --- |" * len(BOOKS)]
    for label, pairs in parts.items():
        items = [x for x, _ in pairs]
        weights = np.array([w for _, w in pairs])
        cells = [f"{float((c.encode_many(items).lengths * weights).sum() / weights.sum()):.1f}"
                 for c in codecs.values()]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def write_population(path: Path) -> None:
    rng = np.random.default_rng(7)
    words: list[str] = []
    shares: list[np.ndarray] = []
    for lang in POPULATION_LANGUAGES:
        got, freqs = held_out_words(lang, WORDS_PER_LANGUAGE)
        words += got
        shares.append(freqs / freqs.sum() / len(POPULATION_LANGUAGES))
    p = np.concatenate(shares)
    sizes = rng.integers(1, 6, USERS)
    picks = rng.choice(len(words), size=int(sizes.sum()), p=p / p.sum())
    ends = np.cumsum(sizes)
    with path.open("w", encoding="utf-8") as out:
        for stop, size in zip(ends.tolist(), sizes.tolist(), strict=True):
            out.write(" ".join(words[i] for i in picks[stop - size : stop]) + "\n")


def simulate(dataset: str, book: str, seed: int, tmp: Path) -> dict:
    out = tmp / f"{Path(dataset).stem}-{book}-{seed}.json"
    subprocess.run([sys.executable, "-m", "fedhh.cli.main", "simulate", "--dataset", dataset,
                    "--codec", book, "--seed", str(seed), "--quiet", "--json", str(out)],
                   check=True, cwd=ROOT)
    result = json.loads(out.read_text())
    return {"whole": result["metrics"]["whole_items_found"],
            "precision": result["metrics"]["whole_precision"], "rounds": len(result["rounds"])}


def items_found(seeds: list[int]) -> list[str]:
    lines = ["| population | " + " | ".join(f"`{n}`: whole items (precision, rounds)"
                                           for n in BOOKS) + " |",
             "| --- |" + " --- |" * len(BOOKS)]
    with tempfile.TemporaryDirectory() as name:
        tmp = Path(name)
        held = tmp / "held-out-scripts.txt"
        write_population(held)
        for dataset in (str(held), *DATASETS):
            cells = []
            for book in BOOKS:
                runs = [simulate(dataset, book, seed, tmp) for seed in seeds]
                cells.append(", ".join(f"{r['whole']} ({r['precision']:.3f}, {r['rounds']})"
                                       for r in runs))
            label = "held-out scripts (ko, hi, ta, el)" if dataset == str(held) else dataset
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
            print(lines[-1], flush=True)
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    args = parser.parse_args()
    lines = ["# Codebooks: `unicode` against `general`", "",
             f"`.venv/bin/python bench/bench_codebooks.py --seeds {' '.join(map(str, args.seeds))}`"
             " (bench/bench_codebooks.py says what each part measures).", ""]
    lines += [*bits_per_character(), "", *training_parts(), ""]
    lines += [f"Whole items found at the defaults, seeds {', '.join(map(str, args.seeds))}:", ""]
    lines += items_found(args.seeds)
    publish(lines, OUT)


if __name__ == "__main__":
    main()
