"""The selector tier without a network: the leader's hub (fedhh_coordinator.hub) fed batches
as selectors send them, and a selector's lobby (fedhh_coordinator.selector) fed the leader's
messages. One pool over every selector, a uniform draw over it, one owner per round key
whichever selector a device asked, tasks batched per selector, bad batches refused whole."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import ConfigError
from fedhh.secagg.config import RoundConfig, StageDeadlines
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.db import open_database
from fedhh_coordinator.hub import MAX_BATCH, TASKS_PER_MESSAGE, SelectorHub, Session, check_batch
from fedhh_coordinator.keys import COPIED, KeyOwners
from fedhh_coordinator.lobby import Lobby
from fedhh_coordinator.selector import SelectorLobby

TOKEN = b"t" * 24
LEADER_KEY = Ed25519PrivateKey.from_private_bytes(b"k" * 32)


def keys(i: int) -> tuple[bytes, bytes]:
    return i.to_bytes(4, "big") * 8, (i + 1_000_000).to_bytes(4, "big") * 8


def entry(i: int, pair: tuple[bytes, bytes] | None = None) -> pb.CheckIn:
    c_pk, s_pk = pair or keys(i)
    return pb.CheckIn(device_id=i, c_pk=c_pk, s_pk=s_pk)


def run(coro: object) -> object:
    return asyncio.run(asyncio.wait_for(coro, 20))  # type: ignore[arg-type]


def drain(session: Session) -> list[pb.LeaderMessage]:
    out = []
    while not session.queue.empty():
        message = session.queue.get_nowait()
        if message is not None:
            out.append(message)
    return out


def hub_with(*names: str) -> tuple[Lobby, KeyOwners, SelectorHub, list[Session]]:
    lobby, owners = Lobby(), KeyOwners()
    hub = SelectorHub(lobby, owners, TOKEN, LEADER_KEY)
    sessions = [Session(name) for name in names]
    hub.sessions.update(sessions)
    return lobby, owners, hub, sessions


async def opened(lobby: Lobby, capacity: int, pool_size: int | None = None
                 ) -> asyncio.Task[list[int]]:
    collecting = asyncio.create_task(lobby.collect(capacity, 10, pool_size=pool_size,
                                                   quiet_s=5))
    while not lobby.is_open:
        await asyncio.sleep(0)
    return collecting


def test_the_cohort_is_drawn_over_every_selector_and_each_gets_its_tasks_in_batches() -> None:
    async def scenario() -> None:
        lobby, _, hub, (a, b) = hub_with("a", "b")
        collecting = await opened(lobby, capacity=5000, pool_size=5000)
        assert [m.opened for m in drain(a) if m.HasField("opened")] == [lobby.checkin]
        hub.apply(a, pb.SelectorBatch(checkin=lobby.checkin,
                                      joined=[entry(i) for i in range(1, 3001)]))
        hub.apply(b, pb.SelectorBatch(checkin=lobby.checkin,
                                      joined=[entry(i) for i in range(3001, 5001)]))
        cohort = await collecting
        assert cohort == list(range(1, 5001))
        assert lobby.round_keys(4000) == keys(4000)
        lobby.deliver({d: pb.SignedTask(task=d.to_bytes(4, "big")) for d in cohort})
        to_a = [m.tasks for m in drain(a) if m.HasField("tasks")]
        to_b = [m.tasks for m in drain(b) if m.HasField("tasks")]
        # a's 3000 members in two messages, b's 2000 in one; the last of each marked.
        assert [len(t.tasks) for t in to_a] == [TASKS_PER_MESSAGE, 3000 - TASKS_PER_MESSAGE]
        assert [t.last for t in to_a] == [False, True]
        assert [len(t.tasks) for t in to_b] == [2000] and to_b[0].last
        assert set(to_a[0].tasks) | set(to_a[1].tasks) == set(range(1, 3001))
        assert to_b[0].tasks[4000].task == (4000).to_bytes(4, "big")
        lobby.clear()
        assert [m.cleared for m in drain(a)] == [lobby.checkin]

    run(scenario())


def test_the_draw_is_uniform_over_the_selectors_pools() -> None:
    """Selector a holds 30 devices and b 10; a cohort of 20 is drawn 200 times. b's seats in a
    draw are hypergeometric in [0, 10], mean 5, variance 20 * 1/4 * 3/4 * 20/39 = 1.923; over
    200 draws the total has mean 1000 and variance 384.6. Bernstein's inequality (each draw
    within 5 of its mean): P(|S - 1000| >= 135) <= 2 exp(-(135^2 / 2) / (384.6 + 5 * 135 / 3))
    = 9e-7, the false-failure rate. A draw by arrival (a's devices first) gives b no seat."""

    async def scenario() -> int:
        lobby, _, hub, (a, b) = hub_with("a", "b")
        seats = 0
        for _ in range(200):
            collecting = await opened(lobby, capacity=20, pool_size=40)
            hub.apply(a, pb.SelectorBatch(checkin=lobby.checkin,
                                          joined=[entry(i) for i in range(1, 31)]))
            hub.apply(b, pb.SelectorBatch(checkin=lobby.checkin,
                                          joined=[entry(i) for i in range(31, 41)]))
            cohort = await collecting
            assert len(cohort) == 20
            seats += sum(1 for d in cohort if d > 30)
            lobby.clear()
        return seats

    seats = run(scenario())
    assert 865 <= seats <= 1135, seats  # type: ignore[operator]


def test_a_key_belongs_to_the_device_that_presented_it_first_across_selectors() -> None:
    async def scenario() -> None:
        lobby, owners, hub, (a, b) = hub_with("a", "b")
        # The owner presents its keys at selector a while no check-in is open.
        hub.apply(a, pb.SelectorBatch(presented=[entry(1)]))
        collecting = await opened(lobby, capacity=2, pool_size=2)
        drain(a), drain(b)
        # A copier at selector b joins first with the owner's keys: refused, not in the pool.
        hub.apply(b, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(2, keys(1))]))
        refusals = [m.refused for m in drain(b) if m.HasField("refused")]
        assert [(r.device_id, r.reason) for r in refusals] == [(2, COPIED)]
        assert lobby.cohort_size == 0
        # The owner joins at b (its selector a died, say) and the copier with its own keys.
        hub.apply(b, pb.SelectorBatch(checkin=lobby.checkin,
                                      joined=[entry(1), entry(2)]))
        assert await collecting == [1, 2]
        assert owners.current(1) == keys(1)
        # The leader's own device service shares the registry: the copier is refused there too.
        with pytest.raises(ConfigError, match="another device first"):
            owners.claim(3, (keys(1)[0], keys(3)[1]))

    run(scenario())


def test_the_leaders_device_service_holds_the_hubs_registry_from_the_start() -> None:
    """Before: ``owners or KeyOwners()`` with the registry empty at start-up (a KeyOwners
    with no key is falsy) gave the coordinator's own device ports a private registry: a key
    presented at a selector and copied at the coordinator's port was not refused."""
    from fedhh_coordinator.service import DeviceService

    lobby, owners, _, _ = hub_with()
    devices = DeviceService(None, lobby, b"k" * 32, None, None, owners)  # type: ignore[arg-type]
    assert devices.owners is owners


def test_a_selector_that_goes_takes_its_waiting_devices_out_of_the_pool() -> None:
    async def scenario() -> None:
        lobby, _, hub, (a, b) = hub_with("a", "b")
        collecting = await opened(lobby, capacity=4, pool_size=4)
        hub.apply(a, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(1), entry(2)]))
        hub.apply(b, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(3)]))
        assert lobby.cohort_size == 3
        hub._detach(a)
        assert lobby.cohort_size == 1 and hub.sessions == {b}
        # Its devices ask b and join again, with the keys they own.
        hub.apply(b, pb.SelectorBatch(checkin=lobby.checkin,
                                      joined=[entry(1), entry(2), entry(4)]))
        assert await collecting == [1, 2, 3, 4]
        lobby.deliver({d: pb.SignedTask(task=bytes([d])) for d in (1, 2, 3, 4)})
        (tasks,) = [m.tasks for m in drain(b) if m.HasField("tasks")]
        assert sorted(tasks.tasks) == [1, 2, 3, 4] and tasks.last
        assert [m.opened for m in drain(a) if m.HasField("opened")] == [lobby.checkin]

    run(scenario())


@pytest.mark.parametrize(("batch", "hello", "error"), [
    (pb.SelectorBatch(), True, "names the selector"),
    (pb.SelectorBatch(name="a", presented=[entry(1)]), True, "nothing else"),
    (pb.SelectorBatch(name="a"), False, "only the first message"),
    (pb.SelectorBatch(name="a", challenge=b"c" * 31), True, "challenge is 32 bytes, got 31"),
    (pb.SelectorBatch(challenge=b"c" * 32), False, "only the first message"),
    (pb.SelectorBatch(presented=[entry(1, (b"x" * 31, keys(1)[1]))]), False, "32-byte"),
    (pb.SelectorBatch(presented=[entry(1, (keys(1)[0], keys(1)[0]))]), False, "distinct"),
    (pb.SelectorBatch(presented=[entry(0)]), False, "device_id 0 is out of range"),
    (pb.SelectorBatch(checkin=9, joined=[entry(1)]), False, "check-in 9, which was never"),
    (pb.SelectorBatch(presented=[entry(i) for i in range(1, MAX_BATCH + 2)]), False,
     "at most 4096"),
])
def test_a_bad_batch_is_named_and_refused(batch: pb.SelectorBatch, hello: bool,
                                          error: str) -> None:
    with pytest.raises(ConfigError, match=error):
        check_batch(batch, latest_checkin=1, hello=hello)


def test_the_leader_proves_its_key_to_a_selector_with_the_key_it_signs_tasks_with() -> None:
    """check_key_proof accepts the leader's signature over the hello's challenge and name
    only under the leader's key, for that challenge and that name."""
    from fedhh.rpc.credentials import raw_public
    from fedhh_coordinator.hub import attach_transcript
    from fedhh_coordinator.selector import WrongCoordinatorKey, check_key_proof

    challenge = b"c" * 32
    proof = LEADER_KEY.sign(attach_transcript(challenge, "sel-1"))
    check_key_proof(proof, challenge, "sel-1", raw_public(LEADER_KEY))
    other = raw_public(Ed25519PrivateKey.from_private_bytes(b"o" * 32))
    for args in ((proof, challenge, "sel-1", other), (proof, b"d" * 32, "sel-1",
                 raw_public(LEADER_KEY)), (proof, challenge, "sel-2", raw_public(LEADER_KEY))):
        with pytest.raises(WrongCoordinatorKey):
            check_key_proof(*args)


def test_a_batch_with_one_bad_entry_changes_nothing() -> None:
    """The hub checks a whole batch before it applies any of it (Attach's reader)."""
    lobby, owners, _, (a,) = hub_with("a")
    batch = pb.SelectorBatch(presented=[entry(1), entry(2, (b"", b""))])
    with pytest.raises(ConfigError):
        check_batch(batch, lobby.checkin, hello=False)
    assert len(owners) == 0 and drain(a) == []


def test_the_hub_refuses_a_caller_without_the_selector_token() -> None:
    _, _, hub, _ = hub_with()
    from fedhh.errors import AuthenticationError

    hub.authenticate((("authorization", f"Bearer {TOKEN.decode()}"),))
    for metadata in ((), (("authorization", "Bearer " + "u" * 24),)):
        with pytest.raises(AuthenticationError):
            hub.authenticate(metadata)  # type: ignore[arg-type]


def test_a_selectors_devices_wait_join_and_get_their_tasks_or_none() -> None:
    async def scenario() -> None:
        lobby = SelectorLobby()
        lobby.attached()
        lobby.handle(pb.LeaderMessage(closed=0))
        # Before any check-in: the device's keys are presented, and it waits for the opening.
        waiting = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 10)) for d in (1, 2, 3)]
        await asyncio.sleep(0)
        first = lobby.take_batch()
        assert first is not None and [e.device_id for e in first.presented] == [1, 2, 3]
        lobby.handle(pb.LeaderMessage(opened=5))
        for _ in range(3):
            await asyncio.sleep(0)
        joins = lobby.take_batch()
        assert joins is not None and joins.checkin == 5
        assert [(e.device_id, (e.c_pk, e.s_pk)) for e in joins.joined] == \
            [(d, keys(d)) for d in (1, 2, 3)]
        assert lobby.take_batch() is None
        lobby.handle(pb.LeaderMessage(refused=pb.DeviceRefusal(device_id=3, reason="copied")))
        with pytest.raises(ConfigError, match="copied"):
            await waiting[2]
        lobby.handle(pb.LeaderMessage(closed=5))
        task = pb.SignedTask(task=b"one")
        lobby.handle(pb.LeaderMessage(tasks=pb.SelectorTasks(checkin=5, tasks={1: task},
                                                             last=True)))
        assert await waiting[0] == task
        assert await waiting[1] is None  # not drawn: told once, with the check-in's last tasks

    run(scenario())


def test_a_device_waiting_for_the_check_in_is_its_call_alone() -> None:
    """A device's wait for the check-in to open, then for its task, runs in its call's own
    task: before, asyncio.wait_for made a task more of each device waiting for the opening (3
    more for 3 devices), a selector's whole pool of them."""
    async def scenario() -> None:
        lobby = SelectorLobby()
        lobby.attached()
        mine = len(asyncio.all_tasks())
        waiting = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 10)) for d in (1, 2, 3)]
        await asyncio.sleep(0)
        assert len(asyncio.all_tasks()) == mine + len(waiting)
        lobby.handle(pb.LeaderMessage(opened=4))
        for _ in range(3):
            await asyncio.sleep(0)
        assert lobby.pool_size == 3 and len(asyncio.all_tasks()) == mine + len(waiting)
        lobby.handle(pb.LeaderMessage(tasks=pb.SelectorTasks(
            checkin=4, tasks={2: pb.SignedTask(task=b"two")}, last=True)))
        assert await asyncio.gather(*waiting) == [None, pb.SignedTask(task=b"two"), None]
        # A wait that runs out says none, as before.
        assert await lobby.wait_for_task(1, keys(1), 0.01) is None

    run(scenario())


def test_a_selector_that_loses_the_leader_tells_its_devices_none_and_presents_again() -> None:
    async def scenario() -> None:
        lobby = SelectorLobby()
        lobby.attached()
        lobby.handle(pb.LeaderMessage(opened=1))
        waiting = asyncio.create_task(lobby.wait_for_task(1, keys(1), 10))
        await asyncio.sleep(0)
        assert lobby.pool_size == 1
        lobby.detached()
        assert await waiting is None
        # Not attached: nobody joins, and the keys are presented to the next leader.
        assert await lobby.wait_for_task(1, keys(1), 0.01) is None
        lobby.attached()
        lobby.handle(pb.LeaderMessage(closed=1))
        again = asyncio.create_task(lobby.wait_for_task(1, keys(1), 10))
        await asyncio.sleep(0)
        batch = lobby.take_batch()
        assert batch is not None and [e.device_id for e in batch.presented] == [1]
        again.cancel()

    run(scenario())


def test_a_selector_does_not_make_a_store_where_none_is(tmp_path: Path) -> None:
    """--db with a typo: refused, no file or folder made (a new, empty store was, and the
    selector served devices nobody enrolled)."""
    missing = tmp_path / "typo" / "coordinator.sqlite"
    with pytest.raises(ConfigError, match="no coordinator store there"):
        open_database(missing, selector=True)
    assert not (tmp_path / "typo").exists()
    open_database(tmp_path / "coordinator.sqlite").close()  # the coordinator makes it
    open_database(tmp_path / "coordinator.sqlite", selector=True).close()


def test_a_file_that_is_not_a_store_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    """--db naming some other file (or a damaged store): one line, not a sqlite traceback."""
    other = tmp_path / "notes.sqlite"
    other.write_bytes(b"not a database, " * 400)
    for selector in (False, True):
        with pytest.raises(ConfigError, match="is not a usable SQLite store"):
            open_database(other, selector=selector)
    assert other.read_bytes() == b"not a database, " * 400


class DeadPeer:
    """An Attach call's context whose selector says hello, then is gone (``gone``: EOF)."""

    def __init__(self, hello: pb.SelectorBatch) -> None:
        self.hello: pb.SelectorBatch | None = hello
        self.gone = asyncio.Event()

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return (("authorization", f"Bearer {TOKEN.decode()}"),)

    async def read(self) -> object:
        import grpc

        if self.hello is not None:
            hello, self.hello = self.hello, None
            return hello
        await self.gone.wait()
        return grpc.aio.EOF

    async def send_initial_metadata(self, metadata: object) -> None:
        pass

    async def write(self, message: pb.LeaderMessage) -> None:
        pass

    async def abort(self, code: object, details: str) -> None:
        raise AssertionError(details)


@pytest.mark.parametrize("steps", range(12))
def test_a_selector_that_dies_is_detached_however_its_end_and_the_cancel_interleave(
    steps: int,
) -> None:
    """A selector killed mid check-in ends Attach's reader (EOF) and gRPC cancels the call;
    with the cancel ``steps`` loop turns after the EOF, the session and its waiting device
    still leave (before, a cancel in the handler's cleanup skipped the detach: CI once saw
    a run end with no "selector detached")."""
    async def scenario() -> None:
        lobby, _, hub, _ = hub_with()
        collecting = await opened(lobby, capacity=4, pool_size=4)
        peer = DeadPeer(pb.SelectorBatch(name="a"))
        call = asyncio.create_task(hub.Attach(None, peer))  # type: ignore[arg-type]
        while not hub.sessions:
            await asyncio.sleep(0)
        (session,) = hub.sessions
        hub.apply(session, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(1)]))
        assert lobby.cohort_size == 1
        peer.gone.set()
        for _ in range(steps):
            await asyncio.sleep(0)
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        assert hub.sessions == set() and lobby.cohort_size == 0
        collecting.cancel()
        await asyncio.gather(collecting, return_exceptions=True)

    run(scenario())


class _Call:
    """One Attach stream of a stand-in leader: what it reads comes from ``answers``."""

    def __init__(self) -> None:
        self.answers: asyncio.Queue[object] = asyncio.Queue()

    async def write(self, message: pb.SelectorBatch) -> None:
        return None

    async def initial_metadata(self) -> tuple[tuple[str, str], ...]:
        return ()  # (a leader that tells not its clock)

    async def read(self) -> object:
        return await self.answers.get()

    def cancel(self) -> None:
        return None


class _Leader:
    """A SelectorControl stub whose Attach calls the test answers one by one."""

    def __init__(self) -> None:
        self.calls: asyncio.Queue[_Call] = asyncio.Queue()

    def Attach(self, metadata: object = None) -> _Call:
        call = _Call()
        self.calls.put_nowait(call)
        return call


def test_a_selectors_health_is_not_serving_while_it_has_lost_its_leader() -> None:
    """The selector's device service health (what k8s's readiness and compose's healthcheck
    read) follows its link to the leader: SERVING once attached, NOT_SERVING when the stream
    ends, SERVING again on the next attach; the process overall (k8s's liveness) stays
    SERVING. Before, all stayed SERVING once first attached. Each step waits for its event
    (10 s bounds); the reconnect backoff is 0.1-0.3 s."""
    import grpc
    from grpc_health.v1 import health_pb2

    from fedhh.rpc import serving
    from fedhh.rpc.health import Health
    from fedhh_coordinator.selector import LeaderLink
    from fedhh_coordinator.selector_main import SERVICES, link_health

    ok, down = health_pb2.HealthCheckResponse.SERVING, health_pb2.HealthCheckResponse.NOT_SERVING

    async def scenario() -> None:
        health = Health(SERVICES)
        await serving.set_serving(health, SERVICES)  # as the selector does on its first attach
        told: asyncio.Queue[bool] = asyncio.Queue()
        tell = link_health(health)

        async def on_link(linked: bool) -> None:
            await tell(linked)
            told.put_nowait(linked)

        async def status() -> list[int]:
            return [(await health.Check(health_pb2.HealthCheckRequest(service=name), None)
                     ).status for name in ("", *SERVICES)]

        async def next_told() -> bool:
            return await asyncio.wait_for(told.get(), 10)

        channel = grpc.aio.insecure_channel("127.0.0.1:9")  # never used: the stub is replaced
        leader = _Leader()
        link = LeaderLink(SelectorLobby(), channel, TOKEN, "s1", b"", on_link)
        link.stub = leader  # type: ignore[assignment]
        task = asyncio.create_task(link.serve())
        try:
            for _ in range(2):  # attach, lose the leader; attach again, lose it again
                call = await asyncio.wait_for(leader.calls.get(), 10)
                call.answers.put_nowait(pb.LeaderMessage(closed=0))
                assert await next_told() is True
                assert await status() == [ok, ok] and link.linked
                call.answers.put_nowait(grpc.aio.EOF)
                assert await next_told() is False
                assert await status() == [ok, down] and not link.linked
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            await channel.close()

    run(scenario())


def test_a_selector_that_does_not_acknowledge_its_tasks_is_named_after_the_check_in_window(
        caplog: pytest.LogCaptureFixture) -> None:
    """A selector stopped (SIGSTOP) as its devices were drawn keeps its stream open while they
    get no task: the leader names it a check-in window after it sent them, where before no log
    named it. A selector that acknowledged them is not named."""
    async def scenario() -> None:
        lobby, _, hub, (stopped, live) = hub_with("stopped", "live")
        collecting = await opened(lobby, capacity=4, pool_size=4)
        hub.apply(stopped, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(1), entry(2)]))
        hub.apply(live, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(3), entry(4)]))
        await collecting
        lobby.window_s = 0.0  # (the timer's own length: it fires on the loop's next turn)
        lobby.deliver({d: pb.SignedTask(task=b"t") for d in (1, 2, 3, 4)})
        hub.apply(live, acknowledgement(lobby.checkin))
        while not any("has not acknowledged" in r.getMessage() for r in caplog.records):
            await asyncio.sleep(0)

    run(scenario())
    said = [r.getMessage() for r in caplog.records if "has not acknowledged" in r.getMessage()]
    assert said == ["selector 'stopped' has not acknowledged the tasks of check-in 1 within the "
                    "check-in window (0 s): its drawn devices are not getting them (the "
                    "selector stopped or stalled; its stream is still open); it has "
                    "acknowledged no check-in's tasks since it attached, which a selector older "
                    "than this coordinator never does: not said again for it until it "
                    "acknowledges some"]


def test_a_selector_that_never_acknowledges_is_named_once_one_that_did_at_each_miss(
        caplog: pytest.LogCaptureFixture) -> None:
    """A selector older than the leader never acknowledges its tasks: it is named at the
    first check-in only (before, at every one), and named again at a miss once it has
    acknowledged some. One that acknowledged a check-in's tasks is named at each miss after."""
    async def scenario() -> list[list[str]]:
        lobby, _, hub, (old, new) = hub_with("old", "new")
        named = []
        for checkin in range(1, 6):
            collecting = await opened(lobby, capacity=2, pool_size=2)
            hub.apply(old, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(1)]))
            hub.apply(new, pb.SelectorBatch(checkin=lobby.checkin, joined=[entry(2)]))
            await collecting
            lobby.deliver({d: pb.SignedTask(task=b"t") for d in (1, 2)})
            if checkin == 1:
                hub.apply(new, acknowledgement(lobby.checkin))
            if checkin == 4:  # (the old one acknowledges at last: then it misses one)
                hub.apply(old, acknowledgement(lobby.checkin))
            named.append(hub.check_acks(lobby.checkin))
        return named

    named = run(scenario())
    assert named == [["old"], ["new"], ["new"], ["new"], ["new", "old"]]
    said = [r.getMessage() for r in caplog.records if "has not acknowledged" in r.getMessage()]
    assert ["not said again" in line for line in said if "'old'" in line] == [True, False]


def acknowledgement(checkin: int) -> pb.SelectorBatch:
    """What a selector sends once the last of a check-in's tasks reached it (its lobby's own
    batch, not built here by hand)."""
    lobby = SelectorLobby()
    lobby.attached()
    lobby.handle(pb.LeaderMessage(opened=checkin))
    lobby.handle(pb.LeaderMessage(tasks=pb.SelectorTasks(checkin=checkin, last=True)))
    batch = lobby.take_batch()
    assert batch is not None and lobby.take_batch() is None
    return batch


def signed_task(device_id: int, advertise_ms: int) -> pb.SignedTask:
    """A task whose round's first stage ends at ``advertise_ms`` (Unix ms)."""
    config = RoundConfig(b"run/1/1/x", 4, 8, 16, 2, 3, 2, b"g" * 32,
                         StageDeadlines(*(advertise_ms + 1000 * i for i in range(5))))
    return pb.SignedTask(task=pb.Task(device_id=device_id,
                                      round_config=config.to_bytes()).SerializeToString())


@pytest.mark.parametrize("late", [True, False])
def test_a_selector_hands_out_no_task_whose_round_has_begun_without_it(
        late: bool, caplog: pytest.LogCaptureFixture) -> None:
    """Resumed after a stop, a selector reads the tasks of a check-in whose round's first stage
    is over (its attempt aborted, or going on without them): its devices hear "none" and join
    the next check-in, where before they were handed the tasks 40 s late. Either way the
    tasks are acknowledged to the leader."""
    now_s = 1_800_000_000.0
    advertise_ms = int(now_s * 1000) + (-40_000 if late else 10_000)

    async def scenario() -> list[pb.SignedTask | None]:
        lobby = SelectorLobby()
        lobby.clock = lambda: now_s
        lobby.attached()
        lobby.handle(pb.LeaderMessage(opened=1))
        waiting = [asyncio.create_task(lobby.wait_for_task(d, keys(d), 10)) for d in (1, 2)]
        for _ in range(3):
            await asyncio.sleep(0)
        assert lobby.take_batch() is not None  # (their joins)
        lobby.handle(pb.LeaderMessage(closed=1))
        tasks = {d: signed_task(d, advertise_ms) for d in (1, 2)}
        lobby.handle(pb.LeaderMessage(tasks=pb.SelectorTasks(checkin=1, tasks=tasks,
                                                             last=True)))
        assert lobby.take_batch() == pb.SelectorBatch(checkin=1)
        return list(await asyncio.gather(*waiting))

    got = run(scenario())
    assert got == ([None, None] if late else [signed_task(d, advertise_ms) for d in (1, 2)])
    said = [r.getMessage() for r in caplog.records if "not handed out" in r.getMessage()]
    assert said == (["the tasks of check-in 1 came 40.0 s after their round's first deadline: "
                     "not handed out"] if late else [])
