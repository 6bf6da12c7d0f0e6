"""What the coordinator needs to charge every attempt that reached unmasking, against the real
``fedhh aggregator`` process (issue 10, "charge on unmask" and the inflated contributor count):

- a release carries the evidence of its contributors, so an inflated count is refused
  (``verify_release``) before a byte of the sum is read;
- GetOutcome answers after the outcome was delivered (tombstones), and, with ``--state-dir``,
  after the aggregator was killed and restarted: a round lost in the restart is reported
  aborted, with whether unmasking had begun;
- an abort after unmasking began (an out-of-range sum, a cancel) says so, in GetResult's
  abort and in GetOutcome.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "integration"))
from aggregator_testkit import (
    TOKEN,
    AggregatorProcess,
    Cohort,
    expect_status,
    make_cohort,
    run,
    session,
)

from fedhh.errors import ConfigError, ConflictError, StateError
from fedhh.rpc.aggregator_client import AggregatorControl, RoundAborted
from fedhh.rpc.device_client import ParticipationEnd, SessionResult, participate
from fedhh.secagg import (
    MaskedInput,
    MaskedInputRequest,
    ReleaseEvidence,
    ReleaseEvidenceError,
    ShareKeysRequest,
    Stage,
    verify_release,
)
from fedhh_aggregator.journal import Journal

pytestmark = pytest.mark.slow
N = 8
ATTACKER = Path(__file__).resolve().parent / "test_secagg_lying_aggregator.py"


def _cohort(round_id: bytes, seed: int = 0, windows_ms: tuple[int, ...] = (600_000,) * 5
            ) -> Cohort:
    # (stages far apart, as make_cohort's: they close once every device the test keeps has
    # answered, and the windows start before the aggregator's process does. At 20 s, a busy
    # machine's slow start could leave live devices late for the advertisement, and let a
    # round the test holds at a stage abort at its deadline before the restart it awaits.)
    return make_cohort(N, 64, N - 1, 5, n_min=5, windows_ms=windows_ms,  # type: ignore[arg-type]
                       consistency_check=True, round_id=round_id, seed=seed)


def _keys(cohort: Cohort) -> dict[int, bytes]:
    return {u: a.identity_key for u, a in cohort.admissions.items()}


async def _everyone(channel: grpc.aio.Channel, cohort: Cohort,
                    drop: Stage | None = None) -> list[SessionResult]:
    return list(await asyncio.gather(*(
        participate(channel, cohort.device(u), cohort.reports[u],
                    identity_key=cohort.identity_keys[u], admission=cohort.admissions[u],
                    drop_at=drop)
        for u in range(1, N + 1))))


# -- the evidence of a release ----------------------------------------------------------------

def test_an_inflated_contributor_count_is_refused_before_the_sum_is_read(tmp_path: Path
                                                                         ) -> None:
    """The aggregator claims ten times the contributors and lists the whole cohort as
    survivors; the survivors' signatures cover the true U3, so verify_release refuses the
    evidence in the release hook, and the sum is never read."""
    cohort = _cohort(b"sec/inflated")
    seen: list[ReleaseEvidence] = []

    async def check(evidence: ReleaseEvidence) -> None:
        seen.append(evidence)
        verify_release(cohort.config, _keys(cohort), evidence)

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            fetch = asyncio.create_task(control.result(cohort.round_id, 60, check))
            outcomes = await _everyone(channel, cohort)
            assert all(o.contributed for o in outcomes)
            with pytest.raises(ReleaseEvidenceError, match="claims 80 contributors"):
                await fetch
            # Drops the sum if the aggregator still holds it. (It may already have written the
            # whole stream, which the client then discarded unread: "delivered" says only that.)
            assert await control.cancel(cohort.round_id) == "released"
            outcome = await control.outcome(cohort.round_id)
            assert (outcome.state, outcome.sum_available) == ("released", False)
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path, command=[sys.executable, str(ATTACKER)],
                           env={"FEDHH_ATTACK_MODE": "inflate",
                                "FEDHH_ATTACK_REPORT": str(tmp_path / "unused")}) as agg:
        run(scenario(agg), timeout=120)
    evidence = seen[0]
    assert evidence.num_contributors == 10 * N and evidence.survivors == tuple(range(1, N + 1))
    # Without the inflated claim, the same signatures verify all N contributors.
    honest = ReleaseEvidence(evidence.survivors, evidence.signatures, N)
    assert verify_release(cohort.config, _keys(cohort), honest) == N


# -- outcomes after delivery and across restarts ----------------------------------------------

def test_outcomes_outlive_their_delivery(tmp_path: Path) -> None:
    released = _cohort(b"sec/delivered", seed=1)
    small = _cohort(b"sec/too-few", seed=2, windows_ms=(1500, *(600_000,) * 4))

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(released.signed)
            running = await control.outcome(released.round_id)
            assert (running.state, running.stage, running.reached_unmask, running.durable) == (
                "running", Stage.ADVERTISE_KEYS, False, False)
            fetch = asyncio.create_task(control.result(released.round_id, 60))
            await _everyone(channel, released)
            result = await fetch
            with pytest.raises(StateError):  # the sum itself is gone
                await control.result(released.round_id, 0)
            outcome = await control.outcome(released.round_id)
            assert (outcome.state, outcome.delivered, outcome.reached_unmask,
                    outcome.num_contributors, outcome.session_id) == (
                "released", True, True, result.num_contributors, released.session_id)
            # Nobody comes to the second round: it aborts before unmasking.
            await control.open_round(small.signed)
            with pytest.raises(RoundAborted) as aborted:
                await control.result(small.round_id, 30)
            assert (aborted.value.reason, aborted.value.reached_unmask) == (
                "too_few_devices", False)
            outcome = await control.outcome(small.round_id)
            assert (outcome.state, outcome.abort_reason, outcome.reached_unmask) == (
                "aborted", "too_few_devices", False)
            assert (await control.outcome(b"sec/never")).state == "unknown"
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=120)


class _StoreAway(Exception):
    """The coordinator's charge could not be written: the hook lets nothing of the sum be
    read."""


def test_a_held_sum_is_kept_until_the_coordinator_says_it_read_it(tmp_path: Path) -> None:
    """GetResult with ``hold``: a fetch whose release hook fails (the coordinator's store
    away) leaves the sum at the aggregator, whole or not on the wire; the next fetch reads it,
    and CancelRound's ``delivered`` drops it as delivered. Before, a sum sent whole was dropped
    (the 8-device sum here fits the transport's buffers): the attempt charged as lost."""
    cohort = _cohort(b"sec/held", seed=3)

    async def refuse(evidence: ReleaseEvidence) -> None:
        raise _StoreAway

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(cohort.signed)
            fetch = asyncio.create_task(control.result(cohort.round_id, 60, refuse, hold=True))
            await _everyone(channel, cohort)
            with pytest.raises(_StoreAway):
                await fetch
            held = await control.outcome(cohort.round_id)
            assert (held.state, held.sum_available, held.delivered) == ("released", True, False)
            result = await control.result(cohort.round_id, 5, hold=True)
            assert result.num_contributors == N
            assert await control.cancel(cohort.round_id, delivered=True) == "released"
            read = await control.outcome(cohort.round_id)
            assert (read.state, read.sum_available, read.delivered) == ("released", False, True)
            with pytest.raises(StateError):  # dropped now
                await control.result(cohort.round_id, 0, hold=True)
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=120)


async def _reach_unmask(channel: grpc.aio.Channel, cohort: Cohort) -> None:
    """Every device answers up to the consistency check and holds back its unmask shares."""
    outcomes = await _everyone(channel, cohort, drop=Stage.UNMASK)
    assert all(o.outcome == ParticipationEnd.DROPPED and o.reached == Stage.UNMASK
               for o in outcomes), outcomes


async def _reach_share_keys(channel: grpc.aio.Channel, cohort: Cohort) -> None:
    outcomes = await _everyone(channel, cohort, drop=Stage.SHARE_KEYS)
    assert all(o.outcome == ParticipationEnd.DROPPED for o in outcomes), outcomes


def test_a_restart_reports_which_lost_rounds_reached_unmasking(tmp_path: Path) -> None:
    delivered = _cohort(b"sec/r1", seed=1)
    unmasking = _cohort(b"sec/r2", seed=2)
    early = _cohort(b"sec/r3", seed=3)
    state = tmp_path / "state"

    async def before(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            for cohort in (delivered, unmasking, early):
                await control.open_round(cohort.signed)
            fetch = asyncio.create_task(control.result(delivered.round_id, 60))
            await _everyone(channel, delivered)
            await fetch
            await _reach_unmask(channel, unmasking)
            await _reach_share_keys(channel, early)
            outcome = await control.outcome(unmasking.round_id)
            assert (outcome.state, outcome.stage, outcome.reached_unmask, outcome.durable) == (
                "running", Stage.UNMASK, True, True)
            assert (await control.outcome(early.round_id)).reached_unmask is False
        finally:
            await channel.close()

    async def after(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            r1 = await control.outcome(delivered.round_id)
            assert (r1.state, r1.delivered, r1.num_contributors, r1.durable) == (
                "released", True, N, True)
            r2 = await control.outcome(unmasking.round_id)
            assert (r2.state, r2.abort_reason, r2.reached_unmask, r2.session_id) == (
                "aborted", "aggregator_restarted", True, unmasking.session_id)
            r3 = await control.outcome(early.round_id)
            assert (r3.state, r3.abort_reason, r3.reached_unmask) == (
                "aborted", "aggregator_restarted", False)
            assert (await control.outcome(b"sec/never")).state == "unknown"
            for cohort in (delivered, unmasking):  # a finished round is never reopened
                with pytest.raises(ConflictError):
                    await control.open_round(cohort.signed)
        finally:
            await channel.close()

    agg = AggregatorProcess(tmp_path / "agg", ["--state-dir", str(state)])
    try:
        agg.start()
        run(before(agg), timeout=120)
        agg.kill()  # SIGKILL: nothing is flushed on the way out
        agg.start()
        run(after(agg), timeout=60)
        assert agg.stop() == 0
        agg.start()  # the journal of a graceful stop reads the same
        run(after(agg), timeout=60)
    finally:
        agg.kill()
    # Without a state directory, a restart forgets: "unknown", and the answer says so.
    with AggregatorProcess(tmp_path / "plain") as plain:
        async def forgotten() -> None:
            channel = plain.channel()
            try:
                outcome = await AggregatorControl(channel, TOKEN).outcome(delivered.round_id)
                assert (outcome.state, outcome.durable) == ("unknown", False)
            finally:
                await channel.close()
        run(forgotten())


def test_a_damaged_journal_stops_the_service_and_a_torn_tail_does_not(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    journal = state / "outcomes.jsonl"
    journal.write_text('{"v":1,"op":"open","round":"72","session":"' + "00" * 32
                       + '","at":1.0}\n{"v":1,"op":"finish","round":"72","state":"abo')
    with AggregatorProcess(tmp_path / "torn", ["--state-dir", str(state)]) as agg:
        async def check() -> None:
            channel = agg.channel()
            try:
                outcome = await AggregatorControl(channel, TOKEN).outcome(b"r")
                assert (outcome.state, outcome.abort_reason, outcome.reached_unmask) == (
                    "aborted", "aggregator_restarted", False)
            finally:
                await channel.close()
        run(check())
    # The restart rewrote the file without the torn line: its open and finish records.
    lines = journal.read_text().splitlines()
    assert len(lines) == 2 and '"state":"aborted"' in lines[1]
    journal.write_text(journal.read_text() + "not json\n" + '{"v":1}\n')
    agg = AggregatorProcess(tmp_path / "damaged", ["--state-dir", str(state)])
    with pytest.raises(RuntimeError, match=r"outcomes\.jsonl:3 is damaged"):
        agg.start()
    assert agg.process is not None and agg.process.returncode == 2


OPEN = {"v": 1, "op": "open", "round": b"r/1/1".hex(), "session": "00" * 32, "at": 1.0}
FINISH = {"v": 1, "op": "finish", "round": b"r/1/1".hex(), "state": "released", "reason": "",
          "reached_unmask": True, "contributors": 5, "at": 2.0}


@pytest.mark.parametrize(("line", "refusal"), [
    ({**FINISH, "contributors": -5}, "a contributor count is 0 to 4294967295, not -5"),
    ({**FINISH, "contributors": 2**70}, "a contributor count is 0 to 4294967295, not 1180"),
    ({**FINISH, "contributors": 5.5}, "a contributor count is 0 to 4294967295, not 5.5"),
    ({**FINISH, "state": "bogus"}, "an outcome is one of released, aborted, not 'bogus'"),
    ({**FINISH, "reached_unmask": "no"},
     "a reason is text, reached_unmask and held true or false"),
    ({**FINISH, "held": 1}, "a reason is text, reached_unmask and held true or false"),
    ({**FINISH, "at": float("inf")}, "a time is a finite number of seconds, not inf"),
    ({**OPEN, "at": float("nan")}, "a time is a finite number of seconds, not nan"),
    ({**OPEN, "round": ""}, "a round id is 1 to 64 bytes, not 0"),
    ({**OPEN, "session": "00"}, "a session id is 32 bytes, not 1"),
])
def test_a_journal_line_with_values_never_written_is_damage(
        tmp_path: Path, line: dict[str, Any], refusal: str) -> None:
    """Lines that parse but were changed. Before: loaded, then GetOutcome answered INTERNAL
    (a count past uint32) or told the coordinator a made-up outcome ("bogus" as ABORTED)."""
    lines = [OPEN, line] if line["op"] == "finish" else [line]
    (tmp_path / "outcomes.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines))
    with pytest.raises(ConfigError) as refused:
        Journal(tmp_path).load()
    assert str(refused.value).startswith(f"{tmp_path / 'outcomes.jsonl'}:{len(lines)} is "
                                         f"damaged ({refusal}")


def test_a_long_reason_is_kept_to_what_a_status_carries(tmp_path: Path) -> None:
    line = {**FINISH, "state": "aborted", "reason": "x" * (1 << 20)}
    (tmp_path / "outcomes.jsonl").write_text(json.dumps(OPEN) + "\n" + json.dumps(line) + "\n")
    assert Journal(tmp_path).load()[b"r/1/1"].reason == "x" * 1000


# -- aborts after unmasking began -------------------------------------------------------------

def test_aborts_after_unmasking_began_say_so(tmp_path: Path) -> None:
    """An out-of-range sum (device 1 adds 1000 to a coordinate of its masked vector: the sum
    exceeds |U3| only after the masks are removed) and a cancel during unmasking are both
    reported with reached_unmask, in GetResult's abort and in GetOutcome."""
    out_of_range = _cohort(b"sec/out-of-range", seed=4)
    cancelled = _cohort(b"sec/cancelled", seed=5)

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            control = AggregatorControl(channel, TOKEN)
            await control.open_round(out_of_range.signed)
            await control.open_round(cancelled.signed)
            fetch = asyncio.create_task(control.result(out_of_range.round_id, 60))
            cheat = asyncio.create_task(_cheat(channel, out_of_range))
            honest = await asyncio.gather(*(
                participate(channel, out_of_range.device(u), out_of_range.reports[u],
                            identity_key=out_of_range.identity_keys[u],
                            admission=out_of_range.admissions[u])
                for u in range(2, N + 1)))
            await cheat
            assert all(o.contributed for o in honest)
            with pytest.raises(RoundAborted) as aborted:
                await fetch
            assert (aborted.value.reason, aborted.value.reached_unmask) == (
                "output_out_of_range", True)
            outcome = await control.outcome(out_of_range.round_id)
            assert (outcome.state, outcome.reached_unmask) == ("aborted", True)

            await _reach_unmask(channel, cancelled)
            assert await control.cancel(cancelled.round_id) == "aborted"
            with pytest.raises(RoundAborted) as aborted:
                await control.result(cancelled.round_id, 5)
            assert (aborted.value.reason, aborted.value.reached_unmask) == ("cancelled", True)
            outcome = await control.outcome(cancelled.round_id)
            assert (outcome.state, outcome.abort_reason, outcome.reached_unmask) == (
                "aborted", "cancelled", True)
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg), timeout=120)


async def _cheat(channel: grpc.aio.Channel, cohort: Cohort) -> None:
    """Device 1, honest except that it adds 1000 to coordinate 0 of its masked vector."""
    device = cohort.device(1)
    s = session(channel, cohort, 1, device)
    await s.advertise(device.advertise_keys())
    request: Any = (await s.await_request(Stage.SHARE_KEYS, 20_000))[1]
    assert isinstance(request, ShareKeysRequest)
    await s.submit_shares(device.share_keys(request))
    request = (await s.await_request(Stage.MASKED_INPUT, 20_000))[1]
    assert isinstance(request, MaskedInputRequest)
    honest = device.masked_input(request, cohort.reports[1])
    vector = honest.vector.copy()
    vector[0] += np.uint16(1000)
    assert await s.submit_masked_input(MaskedInput(honest.session_id, 1, vector))
    # Its vector is in the sum. The honest devices can finish the round without it from here
    # (on a busy machine the round may be over before its next call): it answers as long as
    # the round lets it.
    try:
        request = (await s.await_request(Stage.CONSISTENCY_CHECK, 20_000))[1]
        if request is None:  # the stage closed or the round ended without it
            return
        await s.submit_consistency(device.consistency_check(request))
        request = (await s.await_request(Stage.UNMASK, 20_000))[1]
        if request is None:
            return
        await s.submit_unmask(device.unmask(request))
    except grpc.aio.AioRpcError as error:
        assert error.code() in (grpc.StatusCode.FAILED_PRECONDITION, grpc.StatusCode.ABORTED)


def test_get_outcome_needs_the_control_token(tmp_path: Path) -> None:
    from fedhh.v1 import aggregator_pb2 as pb
    from fedhh.v1 import aggregator_pb2_grpc as pb_grpc

    async def scenario(agg: AggregatorProcess) -> None:
        channel = agg.channel()
        try:
            await expect_status(grpc.StatusCode.UNAUTHENTICATED, pb_grpc.AggregatorControlStub(
                channel).GetOutcome(pb.GetOutcomeRequest(round_id=b"r")))
        finally:
            await channel.close()

    with AggregatorProcess(tmp_path) as agg:
        run(scenario(agg))


def test_the_cli_documents_the_state_directory() -> None:
    done = subprocess.run([sys.executable, "-m", "fedhh.cli.main", "aggregator", "--help"],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "--state-dir" in done.stdout
