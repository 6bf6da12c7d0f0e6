"""The outcome journal's versions (fedhh_aggregator.journal): each line carries the oldest
version that reads it rightly, so what version 2 added (the combiner's ``shards_opened``,
``dropped``, a ``finish`` with ``held``) is refused by a version 1 reader rather than misread
(``held`` read as a total lost with the process), and an aggregator's journal stays version 1;
a line of a newer version is refused as such, not as damage; version 1 journals of every kind
read as before."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh_aggregator.journal import Journal

SESSION = bytes(32)


def written(directory: Path) -> list[tuple[str, bool, int]]:
    """(op, held, v) of each line of the journal in ``directory``."""
    return [(line["op"], line.get("held", False), line["v"])
            for line in map(json.loads, (directory / "outcomes.jsonl").read_text().splitlines())]


def journal_of_every_kind(directory: Path) -> None:
    async def write() -> None:
        journal = Journal(directory)
        journal.load()
        journal.rewrite()
        try:
            await journal.opened(b"held", SESSION, {"shards": []})
            await journal.shards_opened(b"held")
            await journal.unmask_started(b"held")
            journal.finished(b"held", "released", "", True, 4, held=True)
            await journal.opened(b"dropped", SESSION)
            journal.finished(b"dropped", "released", "", True, 4, held=True)
            await asyncio.wrap_future(journal.dropped(b"dropped"))
            await journal.opened(b"plain", SESSION)
            journal.finished(b"plain", "released", "", True, 4)
            await asyncio.wrap_future(journal.delivered(b"plain"))
        finally:
            journal.close()

    asyncio.run(write())


EXPECTED = [
    ("open", False, 1), ("shards_opened", False, 2), ("unmask", False, 1),
    ("finish", True, 2), ("open", False, 1), ("finish", True, 2), ("dropped", False, 2),
    ("open", False, 1), ("finish", False, 1), ("delivered", False, 1)]


def test_what_version_2_added_is_written_as_version_2_and_the_rest_as_version_1(
        tmp_path: Path) -> None:
    # Before, every line said version 1, and a combiner of version 1 read a held total's
    # finish as a total lost with the process (``held`` ignored).
    journal_of_every_kind(tmp_path)
    assert written(tmp_path) == EXPECTED
    # The start's rewrite keeps each line's version (it adds an unmask line where a finish
    # says unmasking was reached).
    journal = Journal(tmp_path)
    journal.load()
    journal.rewrite()
    journal.close()
    assert set(written(tmp_path)) == set(EXPECTED)


def test_a_line_of_a_newer_version_is_refused_as_such(tmp_path: Path) -> None:
    # Before: "damaged (not a journal record); move the file away", advice that loses every
    # record where running the newer fedhh loses none.
    journal_of_every_kind(tmp_path)
    path = tmp_path / "outcomes.jsonl"
    newer = {"v": 3, "op": "open", "round": b"r".hex(), "session": SESSION.hex(), "at": 1.0}
    path.write_text(path.read_text() + json.dumps(newer) + "\n")
    with pytest.raises(ConfigError) as refused:
        Journal(tmp_path).load()
    assert str(refused.value) == (
        f"{path}:11 was written by a newer fedhh (journal version 3; this one reads versions "
        "1 to 2): start the newer version on it, or move the file away to start without the "
        "record of earlier rounds")


@pytest.mark.parametrize("version", [0, -1, True, 2.0, "2", None])
def test_a_line_of_no_version_is_damage(tmp_path: Path, version: object) -> None:
    line = {"v": version, "op": "open", "round": b"r".hex(), "session": SESSION.hex(),
            "at": 1.0}
    (tmp_path / "outcomes.jsonl").write_text(json.dumps(line) + "\n")
    with pytest.raises(ConfigError, match=r"outcomes\.jsonl:1 is damaged \(not a journal "
                                          r"record\)"):
        Journal(tmp_path).load()


def test_a_version_1_journal_of_every_kind_reads_as_before(tmp_path: Path) -> None:
    # As the combiner wrote its own kinds before they were version 2.
    journal_of_every_kind(tmp_path)
    path = tmp_path / "outcomes.jsonl"
    path.write_text("".join(json.dumps({**line, "v": 1}) + "\n"
                            for line in map(json.loads, path.read_text().splitlines())))
    journal = Journal(tmp_path)
    records = journal.load()
    journal.close()
    held, dropped, plain = records[b"held"], records[b"dropped"], records[b"plain"]
    assert (held.shards_opened, held.unmask_started, held.held, held.delivered) == (
        True, True, True, False)
    assert (dropped.held, dropped.dropped) == (True, True)
    assert (plain.held, plain.delivered, plain.contributors) == (False, True, 4)


@pytest.mark.parametrize(("shards", "lost"), [((0, 2), (1,)), ((0, 2), ()), (None, None)])
def test_the_shards_of_a_released_total_read_back_and_survive_a_rewrite(
        tmp_path: Path, shards: tuple[int, ...] | None, lost: tuple[int, ...] | None) -> None:
    # (a restarted combiner fetches only these shard sums again: CombinedRound.take_over_released;
    # None, a line written before the field: every shard, the count checked alone; ``lost``,
    # the others that reached unmasking, as the coordinator's charge counts them)
    async def write() -> None:
        journal = Journal(tmp_path)
        journal.load()
        journal.rewrite()
        try:
            await journal.opened(b"r", SESSION, {"shards": []})
            await asyncio.wrap_future(journal.finished(b"r", "released", "", True, 6, held=True,
                                                       shards=shards, lost=lost))
        finally:
            journal.close()

    def read_back(rewrite: bool) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        journal = Journal(tmp_path)
        try:
            (record,) = journal.load().values()
            if rewrite:
                journal.rewrite()
            return record.released_shards, record.lost_shards
        finally:
            journal.close()

    asyncio.run(write())
    assert read_back(rewrite=True) == (shards, lost)
    assert read_back(rewrite=False) == (shards, lost)  # (the rewritten file)


@pytest.mark.parametrize("field", ["shards", "lost"])
@pytest.mark.parametrize("shards", ['"0"', "[true]", "[-1]", "[100000]", '["0"]'])
def test_released_shards_that_could_not_have_been_written_are_damage(
        tmp_path: Path, shards: str, field: str) -> None:
    round_id = b"r".hex()
    (tmp_path / "outcomes.jsonl").write_text(
        f'{{"v":1,"op":"open","round":"{round_id}","session":"{"00" * 32}","at":1}}\n'
        f'{{"v":2,"op":"finish","round":"{round_id}","state":"released","reason":"",'
        f'"reached_unmask":true,"contributors":6,"at":2,"held":true,"{field}":{shards}}}\n')
    journal = Journal(tmp_path)
    try:
        what = "released" if field == "shards" else "lost"
        with pytest.raises(ConfigError, match=rf"outcomes.jsonl:2 is damaged \({what} shards"):
            journal.load()
    finally:
        journal.close()
