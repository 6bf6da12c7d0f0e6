"""The trained built-in codebooks, rebuilt from the public word lists they come from.

``english`` and ``german`` are ``train_codebook`` over pyspellchecker's word counts of the
language (OpenSubtitles 2018 via OPUS, MIT licence; the same source as the English warm-start
list, and not the wordfreq lists the synthetic populations are drawn from), with every printable
ASCII character given a codeword. The JSON files in ``books/`` are the output of
``python -m fedhh.codec.training``; a test checks that retraining gives the same files.
"""

from __future__ import annotations

import sys
from importlib import resources
from pathlib import Path

from fedhh.codec.codebook import Codebook, train_codebook
from fedhh.errors import ConfigError

TRAINED = {
    "english": ("en", "Huffman code of UTF-8 bytes trained on pyspellchecker's English word "
                      "counts (OpenSubtitles 2018); printable ASCII always has a codeword; other "
                      "bytes are escaped"),
    "german": ("de", "Huffman code of UTF-8 bytes trained on pyspellchecker's German word "
                     "counts (OpenSubtitles 2018); printable ASCII always has a codeword; other "
                     "bytes are escaped"),
}


def train_builtin(name: str) -> Codebook:
    """Retrain the built-in codebook ``name`` from its source list."""
    from fedhh.data.wordlists import spellchecker_counts

    if name not in TRAINED:
        raise ConfigError(f"no trained built-in codebook {name!r}; trained: {', '.join(TRAINED)}")
    lang, description = TRAINED[name]
    return train_codebook(((w, float(n)) for w, n in spellchecker_counts(lang)), name,
                          description=description)


def book_path(name: str) -> Path:
    return Path(str(resources.files("fedhh.codec").joinpath("books", f"{name}.json")))


def main() -> int:
    for name in TRAINED:
        path = book_path(name)
        path.write_text(train_builtin(name).to_json(), encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
