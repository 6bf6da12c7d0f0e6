"""The trained built-in codebooks, rebuilt from the public data they come from.

``unicode`` (the default), ``general`` and ``tokens`` come from
``fedhh.data.tokens.train_codebooks``: BPE tokens and Huffman codes over a sample of words of 24
languages, pictographs, numbers, URLs, e-mail addresses and identifiers (it needs the
``tokenizers`` package: ``pip install 'fedhh[train]'``).

``english`` and ``german`` are ``train_codebook`` over pyspellchecker's word counts of the
language (OpenSubtitles 2018 via OPUS, MIT licence; the same source as the English warm-start
list, and not the wordfreq lists the synthetic populations are drawn from), with every printable
ASCII character given a codeword. The JSON files in ``fedhh/codec/books/`` are the output of
``python -m fedhh.data.codebooks`` (``--check``: retrain and compare with the shipped files,
exit 1 on a difference); a test checks that retraining gives the same ``english`` and ``german``
files, and that the ``tokens`` training is deterministic on a small sample.
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
    """Retrain the built-in codebook ``name`` from its source data."""
    from fedhh.data.wordlists import spellchecker_counts

    if name in TOKEN_BOOKS:
        from fedhh.data.tokens import train_codebooks

        return train_codebooks()[name]
    if name not in TRAINED:
        raise ConfigError(f"no trained built-in codebook {name!r}; trained: {', '.join(TRAINED)}")
    lang, description = TRAINED[name]
    return train_codebook(((w, float(n)) for w, n in spellchecker_counts(lang)), name,
                          description=description)


TOKEN_BOOKS = ("unicode", "general", "tokens")


def book_path(name: str) -> Path:
    return Path(str(resources.files("fedhh.codec").joinpath("books", f"{name}.json")))


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    check = "--check" in args
    names = [a for a in args if not a.startswith("--")] or [*TOKEN_BOOKS, *TRAINED]
    token_books = {}
    if set(names) & set(TOKEN_BOOKS):
        from fedhh.data.tokens import train_codebooks

        token_books = train_codebooks()  # one sample and one BPE for both
    differ = []
    for name in names:
        path = book_path(name)
        book = token_books[name] if name in token_books else train_builtin(name)
        text = book.to_json()
        if check:
            same = path.read_text(encoding="utf-8") == text
            print(f"{path}: {'reproduced' if same else 'DIFFERS from the retrained codebook'}")
            if not same:
                differ.append(name)
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
