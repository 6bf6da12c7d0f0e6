"""`fedhh up --workdir` again where its devices cannot pay for the run: refused in one sentence
before any device starts. Before, a second `fedhh up --eps-agg 6` in one workdir (12 of the
coordinator's lifetime eps 10 per device) ran 5 check-ins of 30 s, ~170 s, and failed; devices
whose own budgets of local epsilon were spent by earlier runs aborted a later round alike."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_kit import one_line_error
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from test_run_items_past_the_codes import FakeTopology, Started

from fedhh.rpc import topology
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.store import Store
from fedhh_device.budget import DeviceBudget
from fedhh_device.fleet import STATE_FILE, Identity
from fedhh_device.secagg_run import Floors

USERS = 300


class Workdir(FakeTopology):
    """The fake topology, in the workdir given (as LocalTopology is)."""

    def __init__(self, workdir: Any = None, tls: bool = True) -> None:
        self.workdir = Path(workdir)


@pytest.fixture
def up(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """`fedhh up` over USERS users in one device process (devices-0), in tmp_path/w."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(topology, "LocalTopology", Workdir)
    data = tmp_path / "users.jsonl"
    data.write_text("".join(json.dumps([f"w{u % 5}", f"v{u % 3}"]) + "\n"
                            for u in range(USERS)))
    return ["up", "--dataset", str(data), "--insecure", "--processes", "1", "--workdir",
            str(tmp_path / "w")]


def enrol(workdir: Path, users: range) -> dict[int, int]:
    """Devices enrolled by an earlier run: in the store and in devices-0's devices.json."""
    workdir.mkdir()
    store = Store(workdir / topology.STORE_FILE)
    ids = {u: store.add_device(bytes(32), Ed25519PrivateKey.generate().public_key()
                               .public_bytes_raw(), "") for u in users}
    store.close()
    identities = {str(u): Identity(d, bytes(32), Ed25519PrivateKey.generate(),
                                   bytes(32)).to_json() for u, d in ids.items()}
    (workdir / "devices-0").mkdir()
    (workdir / "devices-0" / STATE_FILE).write_text(json.dumps(identities))
    return ids


def charge(workdir: Path, ids: dict[int, int], eps: float) -> None:
    """An earlier run of (eps, 1e-6) charged to every device of ``ids`` by the coordinator."""
    store = Store(workdir / topology.STORE_FILE)
    store.create_run("demo", {}, 1.0, {}, {}, [])
    store.charge_devices("demo", list(ids.values()), eps, 1e-6)
    store.close()


def report(workdir: Path, users: range, eps_locals: list[float]) -> None:
    """An earlier run's reports, one per round at each of ``eps_locals``, in each device's own
    budget: made for the first of ``users`` through its own path (``DeviceBudget.report``),
    the same file for the others."""
    floors = Floors()
    folder = workdir / "devices-0" / "budgets"
    budget = DeviceBudget.load(folder / f"{users[0]}.json", floors.lifetime_eps_local,
                               floors.budget_period_s)
    for r, eps in enumerate(eps_locals, start=1):
        budget.report(pb.Task(run_id="demo", round=r, eps_local=eps),
                      lambda: np.zeros(1, dtype=np.int64))
    for user in users[1:]:
        shutil.copyfile(folder / f"{users[0]}.json", folder / f"{user}.json")


def test_a_rerun_past_the_coordinators_lifetime_budget_is_refused_before_any_device(
        up: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    charge(tmp_path / "w", enrol(tmp_path / "w", range(USERS)), 6.0)
    line = one_line_error([*up, "--eps-agg", "6"], capsys)
    assert f"--workdir {tmp_path / 'w'}: 300 of its 300 devices cannot join this run" in line
    assert "lifetime budget the coordinator keeps for each (eps 10, delta 1e-05 per 30 days)" \
        in line and "a round needs n_min 270: every attempt would abort" in line
    assert "use a new --workdir (its devices start with whole budgets)" in line


def test_a_rerun_the_lifetime_budget_still_pays_for_starts_its_devices(
        up: list[str], tmp_path: Path) -> None:
    # (4 of 10 spent, 6 asked: exactly at the budget, admitted; 29 devices refused leave 271)
    ids = enrol(tmp_path / "w", range(USERS))
    charge(tmp_path / "w", ids, 4.0)
    store = Store(tmp_path / "w" / topology.STORE_FILE)
    store.create_run("other", {}, 1.0, {}, {}, [])
    store.charge_devices("other", [ids[u] for u in range(29)], 0.5, 1e-6)
    store.close()
    from fedhh.cli.main import main

    with pytest.raises(Started):  # (3 completion rounds: the plan of the default 32 is slow)
        main([*up, "--eps-agg", "6", "--completion-rounds", "3"])


def test_a_rerun_whose_devices_spent_their_own_budget_names_the_round_they_cannot_answer(
        up: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (the run at its defaults: eps_local 3.341 in rounds 1-5, far less after; 95 of 100
    # spent leaves round 1 and no more for 40 devices, 97 leaves none for the rest)
    enrol(tmp_path / "w", range(USERS))
    report(tmp_path / "w", range(40), [9.5] * 10)
    report(tmp_path / "w", range(40, USERS), [9.7] * 10)
    line = one_line_error(up, capsys)
    assert (f"--workdir {tmp_path / 'w'}: round 1 of this run's 7 (local epsilon 3.34) finds "
            "40 of the 300 devices with enough of their own budget left") in line
    assert "(each reports at most local epsilon 100 in 30 days), and a round needs n_min 270" \
        in line
    assert "or wait until the earlier runs' reports leave the period (the first on 20" in line


def test_the_round_named_is_the_first_too_few_can_answer(
        up: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # (90 spent: rounds 1 and 2 at 3.341 fit, round 3 would take the sum past 100)
    enrol(tmp_path / "w", range(USERS))
    report(tmp_path / "w", range(USERS), [9.0] * 10)
    line = one_line_error(up, capsys)
    assert "round 3 of this run's 7 (local epsilon 3.34) finds 0 of the 300 devices" in line


def test_a_plan_above_the_devices_own_budget_is_refused_in_a_new_workdir(
        up: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    line = one_line_error([*up, "--eps-agg", "10", "--rounds", "24"], capsys)
    assert "this run's" in line and "rounds ask each device for local epsilon" in line
    assert "more than its own budget allows (each reports at most local epsilon 100 in 30 " \
        "days)" in line and "give a smaller --eps-agg, or fewer --rounds" in line
