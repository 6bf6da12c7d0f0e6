"""StartRun validates the request's fields before it checks the lifetime budget: before, the
budget check came first, and delta = 1.0 (or eps_agg = inf, or delta = nan) was refused as
"exceeds every device's lifetime budget" (FAILED_PRECONDITION), naming no field. A malformed
field is now INVALID_ARGUMENT naming it, and nothing is stored; a well-formed run over the
budget is still FAILED_PRECONDITION. Unit-level: the servicer called with a stand-in context."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import grpc
import pytest

from fedhh.config import RunConfig
from fedhh.rpc.run_config import to_proto
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.budgets import LifetimeBudget
from fedhh_coordinator.service import AdminService
from fedhh_coordinator.store import Store

TOKEN = b"admin-token-of-the-test"


class Aborted(Exception):
    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(code, details)
        self.code, self.details = code, details


class Context:
    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKEN.decode()}"),)

    async def abort(self, code: grpc.StatusCode, details: str) -> None:
        raise Aborted(code, details)


class Idle:
    def wake(self) -> None:  # pragma: no cover - nothing is started here
        raise AssertionError("no run may start")


def start(store: Store, config: RunConfig, run_id: str = "r") -> Aborted:
    admin = AdminService(store, Idle(), TOKEN, LifetimeBudget())  # type: ignore[arg-type]
    request = pb.StartRunRequest(config=to_proto(config), run_id=run_id)
    with pytest.raises(Aborted) as error:
        asyncio.run(admin.StartRun(request, Context()))  # type: ignore[arg-type]
    return error.value


@pytest.mark.parametrize(("fields", "named"), [
    ({"delta": 1.0}, "delta"),
    ({"delta": math.nan}, "delta"),
    ({"eps_agg": math.inf}, "eps_agg"),
    ({"eps_agg": -1.0}, "eps_agg"),
    ({"rounds": 0}, "rounds"),
])
def test_malformed_field_is_named_before_the_budget(tmp_path: Path, fields: dict[str, Any],
                                                    named: str) -> None:
    store = Store(tmp_path / "c.sqlite")
    aborted = start(store, RunConfig(**fields))
    assert aborted.code == grpc.StatusCode.INVALID_ARGUMENT, aborted.details
    assert named in aborted.details and "lifetime budget" not in aborted.details
    assert store.run_states() == []


def test_bad_run_id_is_named_before_the_budget(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    aborted = start(store, RunConfig(eps_agg=1e6), run_id="r\n")
    assert aborted.code == grpc.StatusCode.INVALID_ARGUMENT
    assert "run_id" in aborted.details


def test_well_formed_run_over_the_budget_is_still_refused(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    aborted = start(store, RunConfig(eps_agg=20.0))
    assert aborted.code == grpc.StatusCode.FAILED_PRECONDITION
    assert "lifetime budget" in aborted.details
    assert store.run_states() == []
