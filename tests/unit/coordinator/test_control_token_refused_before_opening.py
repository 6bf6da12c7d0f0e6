"""An aggregation service that refuses the coordinator's control token before a round opens
(the combiner's DescribeWorkers, a round's OpenRound or OpenShardedRound) stops the coordinator
as a refusal once the round opened does: ``ControlTokenRefused``, the attempt left open and
uncharged, and the next coordinator, started with the service's token, tries that attempt again
as it stands, not counted against max_attempts. ``main.serve`` ends with exit status 1 and a
critical log naming --control-token-file, the run still running. Before, each refusal aborted
its attempt free (OpenRound's UNAUTHENTICATED read as a refusal of the round, its
PERMISSION_DENIED as the service unreachable) and the next attempt was opened and refused alike:
the run failed once its max_attempts were spent, though only the token file was wrong.

The control client over a fake service (gRPC), the link over test_link_charging's fakes, and
the coordinator's serve() against a combiner that refuses its token.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import grpc
import pytest
from control_fake_kit import listening, served
from in_process_coordinator_kit import in_process
from test_link_charging import (
    DEVICES,
    Coordinator,
    FakeCombiner,
    Fleet,
    Plan,
    attempts,
    config,
    every,
    spends,
)

from fedhh.errors import AuthenticationError, ConfigError
from fedhh.secagg.config import RoundConfig, SignedConfig, StageDeadlines
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator.aggregation import AggregatorUnavailable, ControlTokenRefused
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

TOKEN_CODES = (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED)
REFUSAL = ("the combiner refused DescribeWorkers (UNAUTHENTICATED: missing or invalid control "
           "token); the coordinator's --control-token-file must hold the token the service "
           "was started with")
SIGNED = SignedConfig(RoundConfig(
    round_id=b"r/1/1", num_devices=4, dimension=8, modulus_bits=16, n_min=3, k=3, t=2,
    graph_seed=bytes(32), deadlines=StageDeadlines(*([1] * 5))).to_bytes(), b"signature")
NOT_SIGNED = "the round config is not signed by the coordinator"


class Refusing(pb_grpc.AggregatorControlServicer, pb_grpc.CombinerControlServicer):
    """A single aggregator and a combiner that fail every opening with ``code`` and
    ``details``, and DescribeWorkers and GetOutcome with ``code`` too unless ``token_ok``
    (then GetOutcome knows no round)."""

    def __init__(self, code: grpc.StatusCode, details: str = "missing or invalid control token",
                 token_ok: bool = False) -> None:
        self.code, self.details, self.token_ok = code, details, token_ok

    async def _refuse(self, request: Any, context: Any) -> Any:
        await context.abort(self.code, self.details)

    OpenRound = OpenShardedRound = _refuse

    async def DescribeWorkers(self, request: Any, context: Any) -> Any:
        await context.abort(self.code, self.details)

    async def GetOutcome(self, request: Any, context: Any) -> Any:
        if not self.token_ok:
            await context.abort(self.code, self.details)
        return pb.GetOutcomeResponse(state=pb.OUTCOME_STATE_UNKNOWN)


def opened(code: grpc.StatusCode, service: str, **refusing: Any) -> BaseException:
    """What ``service``'s (single or combiner) open_round raised against a service failing it
    with ``code`` (``Refusing``'s ``details``, ``token_ok``)."""
    async def go() -> BaseException:
        async with served(Refusing(code, **refusing), single=True) as aggregator:
            try:
                if service == "single":
                    await aggregator.single.open_round(SIGNED)
                else:
                    await aggregator.combiner.open_round(b"r/1/1", [(SIGNED, 0)])
            except Exception as error:
                return error
        raise AssertionError("the call succeeded")

    return asyncio.run(go())


@pytest.mark.parametrize("service,call", [("single", "OpenRound"),
                                          ("combiner", "OpenShardedRound")])
@pytest.mark.parametrize("code", TOKEN_CODES)
def test_a_refused_token_at_the_opening_is_control_token_refused(
        code: grpc.StatusCode, service: str, call: str) -> None:
    said = opened(code, service)
    assert isinstance(said, ControlTokenRefused), repr(said)  # before: Authentication/Unavail
    kind = "aggregator" if service == "single" else "combiner"
    assert str(said) == (f"the {kind} refused {call} ({code.name}: missing or invalid control "
                         f"token); the coordinator's --control-token-file must hold the token "
                         f"the service was started with")


@pytest.mark.parametrize("service", ["single", "combiner"])
def test_other_failed_openings_read_as_before(service: str) -> None:
    away = opened(grpc.StatusCode.UNAVAILABLE, service)
    assert type(away) is AggregatorUnavailable and "unreachable (UNAVAILABLE)" in str(away)
    assert type(opened(grpc.StatusCode.INVALID_ARGUMENT, service)) is ConfigError


@pytest.mark.parametrize("service", ["single", "combiner"])
def test_an_opening_refused_for_its_signature_is_the_rounds_refusal(service: str) -> None:
    """UNAUTHENTICATED from a service that takes the token (its GetOutcome answers) is the
    config's signature refused (a --signing-key the service does not hold): the round's
    refusal, which aborts the attempt, as before, not a stop for the token."""
    said = opened(grpc.StatusCode.UNAUTHENTICATED, service, details=NOT_SIGNED, token_ok=True)
    assert type(said) is AuthenticationError and NOT_SIGNED in str(said)


def _refuse_token(*_: Any) -> Any:
    raise ControlTokenRefused(REFUSAL)


@pytest.mark.parametrize("where", ["workers", "open_sharded"])
def test_a_refused_token_before_the_round_opened_spends_no_attempt(
        tmp_path: Path, where: str) -> None:
    """Refused twice (two coordinators with the wrong token), then served: the run's one
    allowed attempt (max_attempts 1) releases, never settled or counted in between."""
    store = Store(tmp_path / "coordinator.sqlite")
    fleet = Fleet(store)
    asyncio.run(create_run(store, config(max_attempts=1), "run"))

    async def refused(wrong: FakeCombiner) -> None:
        setattr(wrong, where, _refuse_token)
        with pytest.raises(ControlTokenRefused, match="--control-token-file"):
            await asyncio.wait_for(Coordinator(store, fleet, wrong).drive("run"), 60)

    for _ in range(2):
        wrong = FakeCombiner(Plan(every("released")), fleet.keys)
        asyncio.run(refused(wrong))  # before: StateError, released nothing in 1 attempt
        assert attempts(store, "run") == [(1, "open", 0)]
        assert store.run("run").state == "running" and wrong.opened == []
    right = FakeCombiner(Plan(every("released")), fleet.keys)
    asyncio.run(asyncio.wait_for(Coordinator(store, fleet, right).drive("run"), 60))
    assert attempts(store, "run") == [(1, "released", DEVICES)]
    assert spends(store, "run") == [(0, 1, DEVICES)]


def test_the_coordinator_refused_its_token_exits_1_with_the_run_as_it_was(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    store = Store(tmp_path / "c.sqlite")
    asyncio.run(create_run(store, config(), "run"))
    store.close()

    async def go() -> int:
        async with listening(Refusing(grpc.StatusCode.UNAUTHENTICATED), single=True) as address:
            args, checked = in_process(tmp_path)
            args.aggregator = address
            args.lifetime_eps, args.lifetime_delta = 1e9, 0.5  # (test_link_charging's run's)
            # (60 s only bounds a failure: before, the run failed and the coordinator served on)
            return await asyncio.wait_for(coordinator_main.serve(args, checked), 60)

    with caplog.at_level(logging.CRITICAL):
        assert asyncio.run(go()) == 1
    stopped = [r for r in caplog.records if r.levelno == logging.CRITICAL]
    assert [r.getMessage() for r in stopped] == [
        "the aggregation service refuses the coordinator's control token, so no attempt can "
        "be settled by its word: the coordinator stops, its runs and their open attempts left "
        "as they are, uncharged, until it is started with the token the service holds"]
    assert "--control-token-file" in stopped[0].error  # type: ignore[attr-defined]
    store = Store(tmp_path / "c.sqlite")
    assert store.run("run").state == "running"
    assert attempts(store, "run") == [(1, "open", 0)] and spends(store, "run") == []
    store.close()
