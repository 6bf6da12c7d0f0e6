"""The leader's side of the selector tier (docs/scaling.md, "Selectors").

Selectors (``fedhh selector``, ``fedhh_coordinator.selector``) serve devices' Enroll and GetTask
and hold their waiting devices; each keeps one stream to the leader coordinator
(``SelectorControl.Attach``), authenticated with the selector token over TLS (never the
control token: that one the aggregation workers hold too, and they are not trusted with the
cohorts; a holder of the selector token can present check-ins for any enrolled device). A
leader started without a selector token refuses every selector. The hub is the leader's end of
those streams and a listener of the leader's one ``Lobby``:

- it announces each check-in's opening and closing to every selector, and each selector answers
  with batches of its devices: new round keys presented, and devices joining the open check-in;
- every key is claimed in the leader's one ``KeyOwners`` (the leader's own device service
  shares it), so a device presenting another's keys is refused whichever selector it asked;
- joined devices enter the one pool, so the cohort is drawn uniformly (OS entropy) over every
  selector's devices and the leader's own (the Sybil argument of ``fedhh_coordinator.lobby``);
- the signed tasks go to each selector in a few messages (``TASKS_PER_MESSAGE`` each), the last
  one marked, after which the selector tells its other pool members "none"; the selector
  acknowledges them with a batch that names the check-in and no device. A selector that has
  not acknowledged them within a check-in window is logged by name (stopped, swapped out: its
  stream stays open while its drawn devices get no task; before, nothing named it), and a
  selector hands out no task whose round's first deadline has passed
  (``fedhh_coordinator.selector``).

A batch that breaks the contract (``check_batch``) ends the stream with INVALID_ARGUMENT before
any of it is applied. A selector whose stream ends takes its devices out of an open check-in's
pool (they ask another selector and join again there); members already drawn keep their seats
(a member that cannot get its task is a dropout).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field

import grpc
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from fedhh.errors import AuthenticationError, ConfigError
from fedhh.rpc.credentials import check_bearer
from fedhh.rpc.errors import status_errors
from fedhh.v1 import coordinator_pb2 as pb
from fedhh.v1 import coordinator_pb2_grpc as pb_grpc
from fedhh_coordinator import auth
from fedhh_coordinator.keys import KeyOwners
from fedhh_coordinator.lobby import Lobby

log = logging.getLogger(__name__)

MAX_BATCH = 4096  # devices per selector batch
TASKS_PER_MESSAGE = 2048
MAX_NAME_BYTES = 64
KEY_BYTES = 32
CHALLENGE_BYTES = 32
SELECTOR_ATTACH_CONTEXT = b"fedhh/v1/selector-attach\x00"  # domain of the leader's key proof
# The leader's clock as its stream to a selector opens (Unix ms, in the stream's initial
# metadata): the deadlines of the tasks it sends are on that clock, and the selector reads them
# on it (``fedhh_coordinator.selector.SelectorLobby.leader_now``), not on its own.
LEADER_TIME_KEY = "fedhh-leader-unix-ms"
NO_SELECTOR_TOKEN = ("this coordinator takes no selectors: it was started without a selector "
                     "token (--selector-token-file PATH or $FEDHH_SELECTOR_TOKEN)")


@dataclass(eq=False)
class Session:
    """One selector's stream."""

    name: str
    queue: asyncio.Queue[pb.LeaderMessage | None] = field(default_factory=asyncio.Queue)
    devices: set[int] = field(default_factory=set)  # its devices in the open check-in's pool
    unacked: int = 0  # the check-in whose tasks it was sent and has not acknowledged
    # whether it acknowledged any check-in's tasks since it attached: a selector older than
    # the acknowledgement (92aca6e8) never does, and is named once (``check_acks``)
    acks: bool = False
    named: bool = False  # named by ``check_acks`` while it had acknowledged none

    def send(self, message: pb.LeaderMessage) -> None:
        self.queue.put_nowait(message)


def attach_transcript(challenge: bytes, name: str) -> bytes:
    """What the leader signs for a selector's hello (``LeaderMessage.key_proof``): a selector
    started with a --coordinator-key other than the leader's stops before it serves a device
    (it enrolled devices, spending their one-time tokens and handing them the wrong key, until
    the first round's tasks failed to verify)."""
    return SELECTOR_ATTACH_CONTEXT + challenge + name.encode()


def check_batch(batch: pb.SelectorBatch, latest_checkin: int, hello: bool) -> None:
    """Raise ConfigError naming the first thing ``batch`` gets wrong: the hello (``hello``)
    names the selector and carries no devices; later batches name nothing, hold at most
    ``MAX_BATCH`` devices with ids in range and two distinct 32-byte keys each, and join only a
    check-in the leader announced."""
    if hello:
        name = batch.name.encode()
        if not 1 <= len(name) <= MAX_NAME_BYTES or not batch.name.isprintable():
            raise ConfigError(f"the first message names the selector (1 to {MAX_NAME_BYTES} "
                              "printable bytes)")
        if len(batch.challenge) not in (0, CHALLENGE_BYTES):
            raise ConfigError(f"the hello's challenge is {CHALLENGE_BYTES} bytes, got "
                              f"{len(batch.challenge)}")
        if batch.presented or batch.joined or batch.checkin:
            raise ConfigError("the first message names the selector and nothing else")
        return
    if batch.name or batch.challenge:
        raise ConfigError("only the first message names the selector")
    count = len(batch.presented) + len(batch.joined)
    if count > MAX_BATCH:
        raise ConfigError(f"a batch holds at most {MAX_BATCH} devices, got {count}")
    if batch.joined and not 1 <= batch.checkin <= latest_checkin:
        raise ConfigError(f"joins for check-in {batch.checkin}, which was never opened "
                          f"(latest {latest_checkin})")
    for entry in (*batch.presented, *batch.joined):
        if not 1 <= entry.device_id <= auth.MAX_DEVICE_ID:
            raise ConfigError(f"device_id {entry.device_id} is out of range")
        if len(entry.c_pk) != KEY_BYTES or len(entry.s_pk) != KEY_BYTES \
                or entry.c_pk == entry.s_pk:
            raise ConfigError(f"device {entry.device_id}: round keys must be two distinct "
                              f"{KEY_BYTES}-byte keys")


class SelectorHub(pb_grpc.SelectorControlServicer):
    """The leader's end of the selectors' streams (module docstring)."""

    def __init__(self, lobby: Lobby, owners: KeyOwners, selector_token: bytes | None,
                 key: Ed25519PrivateKey) -> None:
        self.lobby = lobby
        self.owners = owners
        self._token = selector_token  # None: this leader takes no selectors
        self._told = False
        self._key = key  # the coordinator's signing key: its proof to each selector
        self.sessions: set[Session] = set()
        self._where: dict[int, Session] = {}  # pool member of the open check-in -> selector
        self.clock = time.time  # (Unix s: the clock the round deadlines are set on, link.py's)
        lobby.listeners.append(self)

    def authenticate(self, metadata: tuple[tuple[str, str | bytes], ...] | None) -> None:
        if self._token is None:
            if not self._told:  # (once: a selector asks again every few seconds)
                self._told = True
                log.warning("a selector tried to attach; " + NO_SELECTOR_TOKEN)
            raise AuthenticationError(NO_SELECTOR_TOKEN)
        check_bearer(metadata, self._token,
                     "invalid selector token (a selector presents the coordinator's "
                     "selector token, not its control token)")

    # ---- the stream ------------------------------------------------------------------------
    # (Its refusals are the servicers' one mapping, ``status_errors``: before, it aborted with
    # codes of its own, and a reader that failed for another reason than a bad batch ended the
    # stream OK, unlogged, the selector attaching again and again.)
    @status_errors
    async def Attach(self, request_iterator: object, context: grpc.aio.ServicerContext
                     ) -> None:
        self.authenticate(context.invocation_metadata())
        hello = await context.read()
        if hello is grpc.aio.EOF:
            return
        check_batch(hello, self.lobby.checkin, hello=True)  # (a ConfigError, as one not parsed)
        await context.send_initial_metadata(((LEADER_TIME_KEY, str(int(self.clock() * 1000))),))
        session = Session(hello.name)
        self.sessions.add(session)
        log.info("selector attached", extra={"selector": session.name,
                                            "selectors": len(self.sessions)})
        if hello.challenge:
            session.send(pb.LeaderMessage(key_proof=self._key.sign(
                attach_transcript(hello.challenge, hello.name))))
        # Its first message: the state now (an open check-in to join, or the latest closed).
        session.send(pb.LeaderMessage(opened=self.lobby.checkin) if self.lobby.is_open
                     else pb.LeaderMessage(closed=self.lobby.checkin))
        reader = asyncio.create_task(self._read(session, context))
        try:
            while True:
                message = await session.queue.get()
                if message is None:
                    break
                await context.write(message)
        finally:
            # Detached before the await: a peer that dies ends the reader (EOF) and cancels
            # this call (gRPC) at about the same time, and a cancel that lands in the await
            # below skipped the detach, leaving a dead selector's devices in the pool.
            self._detach(session)
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
        bad = reader.exception() if reader.done() and not reader.cancelled() else None
        if isinstance(bad, ConfigError):
            log.warning("selector sent a bad batch", extra={"selector": session.name,
                                                            "error": str(bad)[:200]})
        if bad is not None:
            raise bad

    async def _read(self, session: Session, context: grpc.aio.ServicerContext) -> None:
        try:
            while True:
                batch = await context.read()
                if batch is grpc.aio.EOF:
                    return
                check_batch(batch, self.lobby.checkin, hello=False)
                self.apply(session, batch)
        finally:
            session.queue.put_nowait(None)

    def _detach(self, session: Session) -> None:
        self.sessions.discard(session)
        for device_id in session.devices:
            if self._where.get(device_id) is session:
                del self._where[device_id]
                self.lobby.leave(device_id)
        log.info("selector detached", extra={"selector": session.name,
                                            "devices_left": len(session.devices),
                                            "selectors": len(self.sessions)})
        session.devices = set()

    def apply(self, session: Session, batch: pb.SelectorBatch) -> None:
        """A checked batch: keys claimed, joins put in the pool; refusals sent back; or a
        check-in's tasks acknowledged (its id, no device)."""
        if batch.checkin and not (batch.presented or batch.joined):
            if session.unacked == batch.checkin:
                session.unacked = 0
            session.acks, session.named = True, False
            return
        for entry in batch.presented:
            self._claim(session, entry)
        current = batch.checkin == self.lobby.checkin and self.lobby.is_open
        for entry in batch.joined:
            keys = self._claim(session, entry)
            if keys is None or not current:
                continue  # refused, or a check-in that has closed: told at its end
            try:
                future = self.lobby.join(entry.device_id, keys)
            except ConfigError as error:
                session.send(pb.LeaderMessage(refused=pb.DeviceRefusal(
                    device_id=entry.device_id, reason=str(error))))
                continue
            if future is None:
                continue  # the pool is full or the device is not eligible: "none" at the end
            previous = self._where.get(entry.device_id)
            if previous is not None and previous is not session:
                previous.devices.discard(entry.device_id)
            self._where[entry.device_id] = session
            session.devices.add(entry.device_id)

    def _claim(self, session: Session, entry: pb.CheckIn) -> tuple[bytes, bytes] | None:
        keys = (bytes(entry.c_pk), bytes(entry.s_pk))
        try:
            self.owners.claim(entry.device_id, keys)
        except ConfigError as error:
            session.send(pb.LeaderMessage(refused=pb.DeviceRefusal(
                device_id=entry.device_id, reason=str(error))))
            return None
        return keys

    # ---- LobbyListener ---------------------------------------------------------------------
    def _broadcast(self, message: pb.LeaderMessage) -> None:
        for session in self.sessions:
            session.send(message)

    def opened(self, checkin: int) -> None:
        self._where = {}
        for session in self.sessions:
            session.devices = set()
        self._broadcast(pb.LeaderMessage(opened=checkin))

    def closed(self, checkin: int) -> None:
        self._broadcast(pb.LeaderMessage(closed=checkin))

    def delivered(self, checkin: int, tasks: dict[int, pb.SignedTask]) -> None:
        """Each selector's members' tasks, serialized once, in a few messages each."""
        mine: dict[Session, dict[int, pb.SignedTask]] = {s: {} for s in self.sessions}
        for device_id, task in tasks.items():
            session = self._where.get(device_id)
            if session is not None and session in mine:
                mine[session][device_id] = task
        sent = [s for s, its in mine.items() if its]
        for session in sent:
            session.unacked = checkin
        if sent:
            asyncio.get_running_loop().call_later(self.lobby.window_s, self.check_acks, checkin)
        for session, its in mine.items():
            items = sorted(its.items())
            for start in range(0, max(len(items), 1), TASKS_PER_MESSAGE):
                chunk = items[start:start + TASKS_PER_MESSAGE]
                session.send(pb.LeaderMessage(tasks=pb.SelectorTasks(
                    checkin=checkin, tasks=dict(chunk),
                    last=start + TASKS_PER_MESSAGE >= len(items))))

    def check_acks(self, checkin: int) -> list[str]:
        """Log, by name, each selector that has not acknowledged the tasks of ``checkin`` (a
        check-in window after they were sent: ``delivered``); their names. A selector that
        has acknowledged none since it attached is named once, not at each check-in: a
        selector older than the leader never acknowledges, and was named at every check-in
        (the first time says so; once it acknowledges one, it is named at each miss again)."""
        late = sorted((s for s in self.sessions if s.unacked == checkin and not s.named),
                      key=lambda s: s.name)
        for session in late:
            never = "" if session.acks else (
                "; it has acknowledged no check-in's tasks since it attached, which a selector "
                "older than this coordinator never does: not said again for it until it "
                "acknowledges some")
            session.named = not session.acks
            log.warning(f"selector {session.name!r} has not acknowledged the tasks of check-in "
                        f"{checkin} within the check-in window ({self.lobby.window_s:g} s): "
                        "its drawn devices are not getting them (the selector stopped or "
                        f"stalled; its stream is still open){never}",
                        extra={"selector": session.name, "checkin": checkin})
        return [session.name for session in late]

    def cleared(self, checkin: int) -> None:
        self._where = {}
        for session in self.sessions:
            session.devices = set()
        self._broadcast(pb.LeaderMessage(cleared=checkin))
