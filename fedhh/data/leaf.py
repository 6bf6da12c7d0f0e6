"""The LEAF JSON layout (Caldas et al., "LEAF: A Benchmark for Federated Settings").

A LEAF file is one JSON object::

    {"users": ["u1", ...], "num_samples": [n1, ...],
     "user_data": {"u1": {"x": [...], "y": [...]}, ...}}

Each element of a user's ``x`` is one sample. For LEAF Reddit it is either a comment string
(``reddit_json``, tokens separated by spaces) or, after LEAF's ``preprocess.py``, a list of
fixed-length token sequences (``reddit_leaf/{train,val,test}``) padded with ``<PAD>`` and framed by
``<BOS>``/``<EOS>``. We accept any nesting of lists whose leaves are strings; every leaf is split on
whitespace. The structural markers ``<PAD>``, ``<BOS>`` and ``<EOS>`` are dropped (they are not
words); LEAF's content placeholders ``<url>``, ``<user>``, ``<subreddit>`` are kept. ``y`` (labels
and metadata) is ignored.

A directory is read recursively (``*.json``, sorted by path). Files that differ only by a split
suffix (``reddit_0_train.json``, ``reddit_0_val.json``, ``reddit_0_test.json``, also with a
``_<digits>`` tail) form one group, and a user's samples are merged across the files of a group, so
a user holds all of their comments. A user id appearing in two groups is an error. One group's
files are held in memory at a time (LEAF writes files of a few hundred MB); the dataset itself is
built shard by shard.
"""

from __future__ import annotations

import json
import logging
import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from fedhh.data.jsonl import json_kind, loads, raw_control, shown_value
from fedhh.data.progress import Meter
from fedhh.data.text import Importer, Separators
from fedhh.errors import DatasetError
from fedhh.input_files import missing_reason, not_utf8, wide_encoding_problem

logger = logging.getLogger(__name__)

STRUCTURAL_TOKENS = frozenset({"<PAD>", "<BOS>", "<EOS>", "<pad>", "<bos>", "<eos>"})
_SPLIT_SUFFIX = re.compile(r"_(train|val|valid|validation|test)(_\d+)?$")


def leaf_files(path: str | os.PathLike[str]) -> list[Path]:
    """The JSON files of a LEAF file or directory, sorted; DatasetError if there are none."""
    root = Path(path)
    if root.is_file():
        return [root]
    if not root.is_dir():
        raise DatasetError(f"LEAF input {root} {missing_reason(root)}")
    files = sorted(p for p in root.rglob("*.json") if p.is_file() and not p.name.startswith("."))
    if not files:
        raise DatasetError(f"LEAF directory {root} holds no .json files")
    return files


def group_files(files: Iterable[Path]) -> list[list[Path]]:
    """Group files that differ only by a train/val/test suffix, keeping the first-seen order."""
    groups: dict[str, list[Path]] = {}
    for file in files:
        groups.setdefault(_SPLIT_SUFFIX.sub("", file.stem), []).append(file)
    return list(groups.values())


def read_leaf_file(path: Path) -> dict[str, Any]:
    """Parse and check one LEAF file's structure; DatasetError names the file and the defect."""
    try:
        raw = path.read_bytes()
    except OSError as error:
        raise DatasetError(f"cannot read LEAF file {path}: {error.strerror}") from None
    if (problem := wide_encoding_problem(raw)) is not None:
        raise DatasetError(f"{path}: {problem}; a LEAF file is UTF-8: save it so")
    try:
        text = raw.decode("utf-8-sig")  # (a BOM, as the text reader allows)
        # (numbers as the file writes them, as the JSON-lines reader reads them: before, a
        # sample's 1e5 was told as 100000.0, NaN passed for a number, and an integer of
        # thousands of digits ended in a traceback)
        data = loads(text)
    except UnicodeDecodeError as error:
        raise DatasetError(f"{path}: {not_utf8(error)}") from None
    except json.JSONDecodeError as error:
        if error.msg.startswith("Invalid control") and error.pos < len(text):
            # (before, "invalid JSON (Invalid control character at)", naming no character)
            raise DatasetError(
                f"{path}: line {error.lineno} column {error.colno}: invalid JSON: "
                f"{raw_control(text[error.pos])} inside a string; JSON holds a control "
                "character only escaped, as json.dumps writes it (\\t, \\u0000)") from None
        raise DatasetError(
            f"{path}: line {error.lineno} column {error.colno}: invalid JSON ({error.msg})"
            + (_JSON_LINES if error.msg == "Extra data" and _json_lines(text) else "")
        ) from None
    except RecursionError:
        raise DatasetError(f"{path}: JSON nested too deeply") from None
    except ValueError as error:  # (after JSONDecodeError, a ValueError too)
        raise DatasetError(f"{path}: invalid JSON ({error})") from None
    if not isinstance(data, dict):
        raise DatasetError(f"{path}: top level is a JSON {json_kind(data)}, expected a LEAF "
                           "object"
                           + (_every_user(data) or _JSON_LINES if isinstance(data, list)
                              else ""))
    users = data.get("users")
    user_data = data.get("user_data")
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise DatasetError(f"{path}: 'users' must be a list of strings"
                           + (_every_user(data) or _JSON_LINES
                              if "users" not in data and "user_data" not in data else ""))
    if not isinstance(user_data, dict):
        raise DatasetError(f"{path}: 'user_data' must be an object keyed by user id")
    if len(set(users)) != len(users):
        dup = next(u for u, c in Counter(users).items() if c > 1)
        raise DatasetError(f"{path}: user {dup!r} is listed twice in 'users'")
    samples = data.get("num_samples")
    if samples is not None and (not isinstance(samples, list) or len(samples) != len(users)):
        raise DatasetError(f"{path}: 'num_samples' must be a list as long as 'users' "
                           f"({len(users)})")
    for user in users:
        entry = user_data.get(user)
        if not isinstance(entry, dict) or not isinstance(entry.get("x"), list):
            raise DatasetError(f"{path}: user_data[{user!r}] must be an object with a list 'x'")
    return data


_JSON_LINES = ("; it reads as JSON lines, one user a line (an array of items or an object of "
               "item counts): name it .jsonl, or import it with --format jsonl")


def _every_user(data: list[Any] | dict[str, Any]) -> str:
    """The hint for one JSON value holding every user, as ``json.dump(users, f)`` writes a
    list of users' item lists (or of their item-count objects) or an object of them keyed by
    user; "" for anything else. (Before, such a file was told to be renamed ``.jsonl``, where
    its one line read as one user whose items were lists.)"""
    held = list(data.values()) if isinstance(data, dict) else data
    if not held or not all(isinstance(user, (list, dict)) for user in held):
        return ""
    if isinstance(data, dict) and not all(isinstance(user, list) for user in held):
        return ""  # (an object of objects: a record per user, no users' item lists)
    kind = "array" if isinstance(data, list) else "object"
    return (f"; it is one JSON {kind} holding {len(held):,} users' items: fedhh reads users as "
            "JSON lines, each user's array of items (or object of item counts) on a line of "
            "its own in a .jsonl file: one json.dumps(user) a line, no indent "
            "(docs/datasets.md, 'JSON lines')")


def _json_lines(text: str) -> bool:
    """Whether ``text``'s first line alone is a JSON array, or an object that is no LEAF
    file's: a JSON-lines dataset (`fedhh.data.jsonl`) given as LEAF, by its name
    (``users.json``) or ``--format leaf``."""
    first = text.lstrip().partition("\n")[0]
    try:
        user = json.loads(first)
    except (ValueError, RecursionError):
        return False
    return isinstance(user, list) or (isinstance(user, dict)
                                      and not {"users", "user_data"} & user.keys())


def _check_encodable(text: str, path: Path, user: str) -> None:
    """JSON's ``\\ud83d`` escapes can spell a lone surrogate, which no UTF-8 item can hold."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as error:
        raise DatasetError(
            f"{path}: user {user!r}: a sample holds the lone surrogate "
            f"U+{ord(text[error.start]):04X} (a \\u escape that is half of a pair); "
            "items must be valid Unicode"
        ) from None


def _tokens(sample: Any, path: Path, user: str, drop: frozenset[str],
            separators: Separators | None = None) -> Iterator[str]:
    stack = [sample]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if not node.isascii():
                _check_encodable(node, path, user)
            if separators is not None:
                separators.see(node, f"{path.name}: user {user!r}")
            for token in node.split():
                if token not in drop:
                    yield token
        elif isinstance(node, list):
            stack.extend(reversed(node))
        else:
            raise DatasetError(
                f"{path}: user {user!r}: a sample holds a JSON {json_kind(node)} "
                f"({shown_value(node)}); expected strings or lists of strings"
            )


def iter_leaf_users(
    path: str | os.PathLike[str],
    *,
    lowercase: bool = False,
    drop_tokens: frozenset[str] = STRUCTURAL_TOKENS,
    meter: Meter | None = None,
    separators: Separators | None = None,
) -> Iterator[tuple[str, Counter[str]]]:
    """Yield (user id, item counts) for every user of a LEAF file or directory; ``meter``
    counts the files read and is closed after the last one; ``separators`` tallies the
    strings split at whitespace other than the space and the tab."""
    try:
        yield from _leaf_users(path, lowercase, drop_tokens, meter, separators)
    finally:
        if meter is not None:
            meter.close()


def _leaf_users(path: str | os.PathLike[str], lowercase: bool, drop_tokens: frozenset[str],
                meter: Meter | None, separators: Separators | None
                ) -> Iterator[tuple[str, Counter[str]]]:
    seen: dict[str, Path] = {}
    for group in group_files(leaf_files(path)):
        merged: dict[str, Counter[str]] = {}
        for file in group:
            data = read_leaf_file(file)
            for user in data["users"]:
                if user in seen:
                    raise DatasetError(f"{file}: user {user!r} also appears in {seen[user]}")
                counts = merged.setdefault(user, Counter())
                for sample in data["user_data"][user]["x"]:
                    tokens = _tokens(sample, file, user, drop_tokens, separators)
                    if lowercase:
                        counts.update(t.lower() for t in tokens)
                    else:
                        counts.update(tokens)
            del data
            if meter is not None:
                meter.update()
        for user in merged:
            seen[user] = group[0]
        yield from merged.items()


def _leaf_counts(path: Path, *, lowercase: bool, meter: Meter,
                 separators: Separators) -> Iterator[Counter[str]]:
    for _user, counts in iter_leaf_users(path, lowercase=lowercase, meter=meter,
                                         separators=separators):
        yield counts


def _leaf_file_count(source: Path) -> int:
    return len(leaf_files(source))


import_leaf = Importer(_leaf_counts, "leaf", "LEAF", splits=True, unit="string",
                       source_kind="LEAF JSON", files=_leaf_file_count)
