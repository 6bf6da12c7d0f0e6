"""A `fedhh up --workdir` rerun that splits the users otherwise than the run before (another
dataset, --devices or --processes) gets a token for every user each device process now hosts:
the kept tokens file is completed, its tokens kept.

Before, a process's tokens file was written once: the rerun's devices-1, hosting users 25..49
of a 100-user dataset where the run before (300 users) gave it 75..149, stopped the whole `up`
with "devices-1.tokens has no token for users [25, 26, 27, 28, 29]". The coordinator is faked:
only its admin API's MintTokens is called."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

import pytest

import fedhh.rpc.admin_client
from fedhh.errors import ConfigError
from fedhh.rpc.device_users import read_tokens, tokens_for
from fedhh.rpc.topology import LocalTopology

_counter = itertools.count()


class _Admin:
    minted: ClassVar[list[int]] = []

    def __init__(self, *args: Any) -> None:
        pass

    def __enter__(self) -> _Admin:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        pass

    def mint_tokens(self, count: int, label: str = "") -> list[str]:
        self.minted.append(count)
        return [f"{next(_counter):064x}" for _ in range(count)]


@pytest.fixture
def topology(tmp_path: Path, monkeypatch: pytest.MonkeyPatch
             ) -> Iterator[tuple[LocalTopology, str]]:
    """A topology whose coordinator is faked (only MintTokens, through _Admin) and a 100-user
    dataset."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(fedhh.rpc.admin_client, "AdminClient", _Admin)
    monkeypatch.setattr(_Admin, "minted", [])
    data = tmp_path / "users.txt"
    data.write_text("".join(f"item{u % 7} other\n" for u in range(100)))
    with LocalTopology(tmp_path / "work", tls=False) as topo:
        monkeypatch.setattr(topo, "address", lambda name: "127.0.0.1:1")
        yield topo, str(data)


def test_a_rerun_that_hosts_other_users_gets_their_tokens(
        topology: tuple[LocalTopology, str]) -> None:
    topo, data = topology
    path = topo.enrollment_tokens("devices-1", data, "75:100")
    before = read_tokens(path)
    assert sorted(before) == list(range(75, 100))
    # the rerun: the same process, other users (and some of the same)
    assert topo.enrollment_tokens("devices-1", data, "25:80") == path
    after = read_tokens(path)
    assert sorted(after) == list(range(25, 100))
    assert {u: after[u] for u in before} == before  # (kept: some may be enrolled)
    assert len(tokens_for(str(path), list(range(25, 80)))) == 55  # (before: refused)
    assert path.stat().st_mode & 0o777 == 0o600
    # nothing missing: nothing minted
    topo.enrollment_tokens("devices-1", data, "30:40")
    assert _Admin.minted == [25, 50]


def test_a_rerun_that_moves_a_user_to_another_process_is_refused(
        topology: tuple[LocalTopology, str]) -> None:
    """A user that devices-0 hosted keeps its identity and device budget in devices-0's state
    folder; devices-1 would enrol it afresh with a whole budget. Before, devices-1 got a token
    for it and the rerun went on."""
    topo, data = topology
    topo.enrollment_tokens("devices-0", data, "0:50")
    topo.enrollment_tokens("devices-1", data, "50:100")
    with pytest.raises(ConfigError, match=r"devices-1 would host user 34, which an earlier "
                       r"run there gave to devices-0 \(16 users move so\)"):
        topo.refuse_moved_users({"devices-0": range(34), "devices-1": range(34, 100)})
    # the same split, or users new to the workdir: no refusal
    topo.refuse_moved_users({"devices-0": range(50), "devices-1": range(50, 120)})
    topo.refuse_moved_users({"devices-0": range(40)})
