"""A selector reads the deadlines of the leader's tasks on the leader's clock: the leader tells
its time as the stream opens (``hub.LEADER_TIME_KEY``, in the initial metadata) and the
selector adds the time since on its own monotonic clock (``SelectorLobby.leader_now``).

Before, it read them on its own wall clock: a selector whose clock ran five minutes ahead of the
leader's took every round's tasks for late and handed out none (its devices heard "none" at
every check-in), and one five minutes behind handed out the tasks of a round that had begun
without it (stopped, SIGSTOP or swapped out, while they were sent). Here the selector's wall
clock is five minutes off either way, its monotonic clock the test's own."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.rpc.tasks import COHORT_TASK_CONTEXT
from fedhh.secagg.config import RoundConfig, StageDeadlines
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.hub import LEADER_TIME_KEY, SelectorHub
from fedhh_coordinator.keys import KeyOwners
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.selector import LeaderLink, SelectorLobby, leader_unix_s

TOKEN = b"t" * 24
LEADER_KEY = Ed25519PrivateKey.from_private_bytes(b"k" * 32)
LEADER_PUBLIC = LEADER_KEY.public_key().public_bytes_raw()
LEADER_NOW_S = 1_800_000_000.0
ADVERTISE_S = 10.0  # (the round's first stage ends this long after the leader sent its tasks)
KEYS = (b"c" * 32, b"s" * 32)


def signed_task(device_id: int, advertise_ms: int) -> pb.SignedTask:
    """A task signed by the leader whose round's first stage ends at ``advertise_ms``."""
    config = RoundConfig(b"run/1/1/x", 4, 8, 16, 2, 3, 2, b"g" * 32,
                         StageDeadlines(*(advertise_ms + 1000 * i for i in range(5))))
    task = pb.Task(device_id=device_id, round_config=config.to_bytes()).SerializeToString()
    return pb.SignedTask(task=task, shared_length=len(task),
                         shared_signature=LEADER_KEY.sign(COHORT_TASK_CONTEXT + task))


class Call:
    """One Attach stream of a stand-in leader that tells its clock; what the selector reads
    comes from ``answers``."""

    def __init__(self, metadata: tuple[tuple[str, str], ...]) -> None:
        self.metadata = metadata
        self.answers: asyncio.Queue[object] = asyncio.Queue()

    async def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        return self.metadata

    async def write(self, message: pb.SelectorBatch) -> None:
        return None

    async def read(self) -> object:
        return await self.answers.get()

    def cancel(self) -> None:
        return None


class Leader:
    def __init__(self, call: Call) -> None:
        self.call = call

    def Attach(self, metadata: object = None) -> Call:
        return self.call


@pytest.mark.parametrize("skew_s", [300.0, -300.0])
@pytest.mark.parametrize("stopped_s", [0.0, 50.0])
def test_the_selector_reads_the_tasks_deadlines_on_the_leaders_clock(
        skew_s: float, stopped_s: float) -> None:
    """``skew_s``: how far the selector's wall clock is off the leader's; ``stopped_s``: how
    long the selector was stopped between the leader's sending the tasks and its reading them
    (past the round's first deadline, ADVERTISE_S, or not)."""
    monotonic = [5_000.0]
    lobby = SelectorLobby()
    lobby.clock = lambda: LEADER_NOW_S + skew_s + monotonic[0] - 5_000.0
    lobby.monotonic = lambda: monotonic[0]
    call = Call(((LEADER_TIME_KEY, str(int(LEADER_NOW_S * 1000))),))

    async def scenario() -> pb.SignedTask | None:
        channel = grpc.aio.insecure_channel("127.0.0.1:9")  # never used: the stub is replaced
        link = LeaderLink(lobby, channel, TOKEN, "s1", LEADER_PUBLIC)
        link.stub = Leader(call)  # type: ignore[assignment]
        serving = asyncio.create_task(link.serve())
        try:
            call.answers.put_nowait(pb.LeaderMessage(closed=0))
            await asyncio.wait_for(link.attached.wait(), 10)
            waiting = asyncio.create_task(lobby.wait_for_task(1, KEYS, 30))
            call.answers.put_nowait(pb.LeaderMessage(opened=1))
            while lobby.pool_size == 0:
                await asyncio.sleep(0)
            call.answers.put_nowait(pb.LeaderMessage(closed=1))
            monotonic[0] += stopped_s
            call.answers.put_nowait(pb.LeaderMessage(tasks=pb.SelectorTasks(
                checkin=1, tasks={1: signed_task(1, int((LEADER_NOW_S + ADVERTISE_S) * 1000))},
                last=True)))
            return await asyncio.wait_for(waiting, 10)
        finally:
            serving.cancel()
            await asyncio.gather(serving, return_exceptions=True)
            await channel.close()

    got = asyncio.run(asyncio.wait_for(scenario(), 30))
    late = stopped_s > ADVERTISE_S
    assert (got is None) == late, (skew_s, stopped_s, got)


def test_the_leader_tells_its_clock_as_a_selectors_stream_opens() -> None:
    class Selector:
        def __init__(self) -> None:
            self.told: list[object] = []
            self.batches = [pb.SelectorBatch(name="s1")]
            self.gone = asyncio.Event()

        def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
            return (("authorization", f"Bearer {TOKEN.decode()}"),)

        async def send_initial_metadata(self, metadata: object) -> None:
            self.told.append(metadata)

        async def read(self) -> object:
            if self.batches:
                return self.batches.pop(0)
            await self.gone.wait()
            return grpc.aio.EOF

        async def write(self, message: pb.LeaderMessage) -> None:
            self.gone.set()

        async def abort(self, code: object, details: str) -> None:
            raise AssertionError(details)

    hub = SelectorHub(Lobby(), KeyOwners(), TOKEN, LEADER_KEY)
    hub.clock = lambda: LEADER_NOW_S + 0.25
    selector = Selector()
    asyncio.run(asyncio.wait_for(hub.Attach(None, selector), 10))  # type: ignore[arg-type]
    assert selector.told == [((LEADER_TIME_KEY, "1800000000250"),)]
    assert leader_unix_s(selector.told[0]) == LEADER_NOW_S + 0.25  # type: ignore[arg-type]


@pytest.mark.parametrize("metadata", [(), (("other", "1"),), ((LEADER_TIME_KEY, "soon"),),
                                      ((LEADER_TIME_KEY, "-5"),), ((LEADER_TIME_KEY, "9" * 40),),
                                      ((LEADER_TIME_KEY, "١٢٣"),)])
def test_a_leader_that_tells_no_readable_clock_leaves_the_selectors_own(
        metadata: tuple[tuple[str, str], ...]) -> None:
    """(a leader older than the telling, or one that tells something else: the selector's own
    clock, as before)"""
    assert leader_unix_s(metadata) is None
    lobby = SelectorLobby()
    lobby.clock = lambda: 42.0
    lobby.attached(leader_unix_s(metadata))
    assert lobby.leader_now() == 42.0
