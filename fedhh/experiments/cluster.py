"""A suite's runs as Dask tasks: a LocalCluster on this machine, or an existing scheduler.

The runs of a suite are independent, so each is one task (``compute_run``). The client (the
process that plans the suite) stays the single writer of the result store: it loads what the
store holds, submits only the runs it lacks, and saves each record as its task finishes, so an
interrupted suite keeps every finished run and a second invocation submits nothing.

What travels through the scheduler is small: the suite's settings and the planned run out, the
run's record back (metrics, per-round diagnostics and a few arrays of codes). The dataset never
does: a worker opens it by the suite's name or path, from its own machine's cache
(``FEDHH_CACHE``; a built-in dataset is built there on first use, under a lock, so once per
machine) and checks that it is the dataset the client planned with (its identity is part of
every store key). A worker keeps one ``Suite`` per settings between tasks (the dataset, its
ground truth and the last encoded vocabulary), nothing more.

Every worker must run the client's fedhh: the same code (``code_fingerprint``: a digest of the
package's sources and data, so a changed simulator is told apart even under one version number).
``check_workers`` compares all workers before anything is submitted, and each task compares
again on the worker that runs it (a worker may join later); a difference is a ConfigError
naming the workers, never a stored result computed by other code.

Dask retries a run whose worker died on another worker; a run that raises is not stored (the
next invocation retries it), the others go on and are stored, and the first error is raised
when they are done. A lost scheduler ends the suite at once (``SchedulerLost``: what finished
is stored). Ctrl-C (KeyboardInterrupt) cancels the pending runs and closes what was started
here. Runs are tasks keyed by their store key, so suites of several clients that share a run
share its task: a suite's cancel is not forced (a run another client waits for goes on), and a
run cancelled by another client is submitted again (``CANCELS_RESUBMITTED`` times).

``connect`` first asks the scheduler who it is, within ``CONNECT_S``: Dask's own client timeout
bounds only the TCP connect, and a server that accepts but never speaks Dask (an HTTP server,
the scheduler's dashboard port) would hold it for ever. The connection and the answer are
timed apart, so that a host that never connects (down, or dropping the connection attempts) is
not taken for a server that connects and never answers as Dask.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Callable, Collection, Coroutine, Iterator, Sequence
from concurrent.futures import CancelledError, Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import fedhh
from fedhh.backoff import Backoff
from fedhh.data.registry import DEFAULT_DATASET
from fedhh.errors import ConfigError, DatasetError, FedhhError
from fedhh.experiments.code import (
    RESULT_LIBRARIES,
    changed_on_disk,
    code_fingerprint,
    library_versions,
)
from fedhh.experiments.runner import (
    CONTENTS,
    PlannedRun,
    ProgressCallback,
    ProgressEvent,
    Suite,
    legacy_identity,
    this_worker,
)
from fedhh.experiments.spec import SuiteSettings
from fedhh.experiments.store import RunRecord

if TYPE_CHECKING:
    from distributed import Client

log = logging.getLogger(__name__)

GIB = 1 << 30
# Memory one worker may use (LocalCluster's memory_limit): one run at a time, the dataset's
# mapped pages counted in. A run over the 1.6M-user default dataset peaks at 0.8-1.5 GiB
# resident (docs/benchmarks.md: 1.51 GiB with 256-bit codes, the target is 6 GB); the worker
# also keeps the dataset's ground truth and one encoded vocabulary between runs.
RUN_MEMORY_GIB = 4.0
# What a LocalCluster leaves to the client and the rest of the machine.
RESERVED_GIB = 2.0
# The least memory a LocalCluster worker may be given. A worker process holds about 0.2 GiB
# before its first run (Python, Dask, numpy, fedhh; 0.21 GiB after the runs of
# synthetic-reddit-small). Below its own size it is restarted the moment it starts, for ever,
# before any run reaches it (--worker-memory 0.01 kept `experiments` waiting without a word);
# a little above, every run is killed on 4 workers.
MIN_WORKER_MEMORY_GIB = 0.5
# How long a scheduler has to accept the connection and answer who it is.
CONNECT_S = 30.0
# How long a suite waits for a first worker on a scheduler that has none (its workers may be
# starting with it); without a bound, a scheduler nobody started workers for is waited on for
# ever.
WORKERS_WAIT_S = 120.0
# How long a refused connection is retried in silence before the suite says it waits for it
# (before, a mistyped port sat silent for the whole of CONNECT_S, then failed).
REFUSED_SAY_S = 3.0
# What starts a worker fit for the runs (the address to fill in).
WORKER_COMMAND = f"dask worker {{address}} --nthreads 1 --memory-limit {RUN_MEMORY_GIB:g}GiB"


class SchedulerLost(FedhhError):
    """The client lost its Dask scheduler during the suite; the runs that finished are stored."""


class WorkersDied(FedhhError):
    """Runs whose workers died each time Dask gave them one (KilledWorker: killed, or restarted
    past their memory limit); the runs that finished are stored."""


@dataclass(frozen=True)
class ClusterOptions:
    """Where the runs go: ``scheduler`` (an address) or a LocalCluster of ``workers`` processes
    (0: as many as this machine's cores and memory allow), each with ``worker_memory_gib``."""

    workers: int | None = None
    scheduler: str | None = None
    worker_memory_gib: float = RUN_MEMORY_GIB

    def __post_init__(self) -> None:
        if self.workers is not None and self.scheduler is not None:
            raise ConfigError("give --workers or --scheduler, not both")
        if self.workers is not None and self.workers < 0:
            raise ConfigError(f"workers must be >= 0, got {self.workers}")
        if not self.worker_memory_gib > 0:
            raise ConfigError(f"worker memory must be > 0 GiB, got {self.worker_memory_gib}")
        if self.workers is not None and self.worker_memory_gib < MIN_WORKER_MEMORY_GIB:
            raise ConfigError(
                f"--worker-memory {self.worker_memory_gib:g} GiB is less than a worker process "
                f"needs before its first run (about 0.2 GiB): give at least "
                f"{MIN_WORKER_MEMORY_GIB:g} GiB ({RUN_MEMORY_GIB:g} GiB fits a run over the "
                "1.6M-user default dataset)")

    @property
    def distributed(self) -> bool:
        return self.workers is not None or self.scheduler is not None


def machine() -> tuple[int, float]:
    """This machine's usable cores and its memory in GiB, as Dask counts them (CPU affinity,
    cgroup quotas and limits, and rlimits included)."""
    from dask.system import cpu_count
    from distributed.system import memory_limit

    return max(cpu_count(), 1), memory_limit() / GIB


def local_workers(options: ClusterOptions) -> int:
    """The LocalCluster's size: the workers asked for, or one per core as far as the memory
    allows; ConfigError when the workers asked for cannot each have their memory."""
    cores, memory = machine()
    fits = int(max(memory - RESERVED_GIB, 0) // options.worker_memory_gib)
    if options.workers:
        if options.workers > fits:
            most = (f"at most {fits}" if fits > 0 else
                    "not even one fits: give less --worker-memory")
            raise ConfigError(
                f"--workers {options.workers} needs {options.workers} x "
                f"{options.worker_memory_gib:g} GiB, this machine has {memory:.1f} GiB "
                f"({RESERVED_GIB:g} GiB kept for the rest): {most}")
        return options.workers
    return max(1, min(cores, fits))


def check_scheduler(address: str, timeout_s: float,
                    say: Callable[[str], None] | None = None) -> None:
    """ConfigError, naming ``address``, unless a Dask scheduler there answers who it is within
    ``timeout_s``: "cannot reach" when no TCP connection is made in that time, "not a Dask
    scheduler" when one is and no Dask answer comes in the rest of it. Callable from inside a
    running event loop (the probe runs on a thread of its own). ``say``: told once when the
    connection is still refused after ``REFUSED_SAY_S`` (a mistyped port, or a scheduler still
    starting), with how long it is retried."""
    from distributed.comm import connect as open_comm
    from distributed.comm.addressing import parse_address, parse_host_port
    from distributed.security import Security

    try:
        scheme, location = parse_address(address)
        host, port = parse_host_port(location)
    except ValueError as error:
        raise ConfigError(f"{address} is not a Dask address: {error}") from None
    arguments = Security().get_connection_args("client")
    if scheme == "tls" and arguments.get("ssl_context") is None:
        raise ConfigError(f"{address} is a TLS address, and this client has no TLS "
                          "configuration: set Dask's distributed.comm.tls (ca-file, client.cert, "
                          "client.key)")

    async def identity(left: float) -> object:
        # (Dask's connect bounds its own part a second later: the outer bound speaks first)
        comm = await open_comm(address, timeout=left + 1.0, **arguments)
        try:
            await comm.write({"op": "identity", "reply": True})
            return await comm.read()
        finally:
            comm.abort()

    async def probe() -> object:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        await _reach(address, host, port, timeout_s, say)
        try:
            left = max(deadline - loop.time(), 0.0)
            return await asyncio.wait_for(identity(left), left)
        except TimeoutError:  # (before OSError: it is one)
            raise ConfigError(f"{address} is not a Dask scheduler, or not answering: no Dask "
                              f"reply within {timeout_s:g} s (a dashboard's port? a scheduler "
                              "listens on 8786 by default, its dashboard on 8787)") from None
        except OSError as error:  # distributed's CommClosedError: the server hung up
            raise ConfigError(f"{address} is not a Dask scheduler, or not answering: it closed "
                              f"the connection ({_cause(error)})") from None
        except Exception:
            # What a server that speaks another protocol makes of Dask's frames: anything from
            # a reply that is no handshake to a MemoryError (its bytes read as a frame length
            # of exabytes), none of which says anything to the user.
            raise ConfigError(f"{address} is not a Dask scheduler: it answered in another "
                              "protocol, not with a Dask message (an HTTP server, such as a "
                              "dashboard? a scheduler listens on 8786 by default, its "
                              "dashboard on 8787)") from None

    info = _on_own_thread(probe())
    kind = info.get("type") if isinstance(info, dict) else None
    if kind != "Scheduler":
        raise ConfigError(f"{address} is not a Dask scheduler but a Dask {kind or 'server'}")


async def _reach(address: str, host: str, port: int, timeout_s: float,
                 say: Callable[[str], None] | None = None) -> None:
    """A TCP connection to host:port within ``timeout_s`` (then closed), retried while refused,
    as Dask's own connect does (a scheduler still starting); ConfigError saying it cannot be
    reached, with the last failure. Dask's connect runs its handshake in the same bound, where
    a server that never answers could not be told from a host that never connects."""
    failure: BaseException | None = None
    started = time.monotonic()
    said = say is None

    async def attempts() -> None:
        nonlocal failure, said
        backoff = Backoff(0.01, 1.0)
        while True:
            try:
                _, writer = await asyncio.open_connection(host, port)
            except socket.gaierror as error:
                if error.errno != socket.EAI_NONAME:  # (EAI_AGAIN: DNS may answer later)
                    failure = error
                    await backoff.sleep()
                    continue
                # The name server says no such host: no retry will change that (a typo in
                # --scheduler waited 30 s for it).
                raise ConfigError(f"cannot reach the Dask scheduler {address}: there is no "
                                  f"host named {host!r} ({error.strerror})") from None
            except OSError as error:
                failure = error
                if not said and time.monotonic() - started >= REFUSED_SAY_S:
                    said = True
                    assert say is not None
                    say(f"the Dask scheduler {address} does not accept the connection "
                        f"({_cause(error)}); retrying for up to {timeout_s:g} s in case it is "
                        "starting (a wrong address? Ctrl-C stops)")
                await backoff.sleep()
                continue
            writer.close()
            return

    try:
        await asyncio.wait_for(attempts(), timeout_s)
    except TimeoutError:
        reason = _cause(failure) if failure is not None else "no connection"
        raise ConfigError(f"cannot reach the Dask scheduler {address} within {timeout_s:g} s: "
                          f"{reason}") from None


def _cause(error: BaseException) -> str:
    """A connection failure in one line: distributed wraps the OS's error in a CommClosedError
    whose text names its connector object; the OS's error is what the user can act on. (One
    without text: distributed's for a connection closed as soon as it was made.)"""
    cause = error.__cause__ if isinstance(error.__cause__, OSError) else error
    text = " ".join(str(cause).split()) or "the connection was closed"
    return f"{type(cause).__name__}: {text}"


_T = TypeVar("_T")


def _on_own_thread(coroutine: Coroutine[Any, Any, _T]) -> _T:
    """``asyncio.run(coroutine)`` on a thread of its own: asyncio.run refuses to start inside
    a running event loop (Jupyter, an async caller of connect). A daemon thread, so that
    Ctrl-C while it waits does not wait for it."""
    result: Future[_T] = Future()

    def run() -> None:
        try:
            result.set_result(asyncio.run(coroutine))
        except BaseException as error:  # (handed to the waiting thread, which raises it)
            result.set_exception(error)

    threading.Thread(target=run, name="fedhh-check-scheduler", daemon=True).start()
    return result.result()


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    level = logging.getLogger(logger).level
    logging.getLogger(logger).setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logging.getLogger(logger).setLevel(level)


def close_client(client: Client) -> None:
    """Closes ``client``. One that lost its scheduler is still trying to reconnect, and closing
    it cancels that attempt: Dask logs the cancel with its traceback and, on a loaded machine,
    the cancel can trip asyncio's "Cannot change state of expiring Timeout" (a RuntimeError,
    ci-under-load on 2026-12-06), which raised from a ``finally`` would stand in for the
    ``SchedulerLost`` that says what happened. Only a client still running may raise."""
    if client.status == "running":
        client.close()
        return
    with _quiet("distributed.client"), contextlib.suppress(RuntimeError):
        client.close()


@contextlib.contextmanager
def connect(options: ClusterOptions, say: Callable[[str], None] | None = None
            ) -> Iterator[Client]:
    """A client of the scheduler named (ConfigError unless it answers as one within
    ``CONNECT_S``; ``say``: check_scheduler's), or of a LocalCluster started here (and closed
    on exit, its worker processes with it)."""
    import dask
    from distributed import Client, LocalCluster

    if options.scheduler is not None:
        check_scheduler(options.scheduler, CONNECT_S, say)
        client = Client(options.scheduler, timeout=f"{CONNECT_S}s")
        try:
            yield client
        finally:
            close_client(client)
        return
    workers = local_workers(options)
    # 127.0.0.1 and ports chosen by the OS: nothing listens beyond this machine. No dashboard
    # (the scheduler's HTTP routes, health and metrics, listen on a port of the OS's choice).
    scheduler = {"dashboard": False, "dashboard_address": "127.0.0.1:0"}
    # Dask's nannies set MALLOC_TRIM_THRESHOLD_=65536 in their workers, so glibc returns the
    # pages of every large array freed and the next round faults them in again: the 11 runs of
    # `rounds --seeds 1` on synthetic-reddit-small took 6.4 s of system time on one worker,
    # 2.9 s serially, 4.2 s without it. The simulator releases its big buffers itself.
    environ = {k: v for k, v in dask.config.get("distributed.nanny.pre-spawn-environ").items()
               if k != "MALLOC_TRIM_THRESHOLD_"}
    spawn = dask.config.set({"distributed.nanny.pre-spawn-environ": environ})
    nanny = logging.getLogger("distributed.nanny")
    level = nanny.level
    nanny.addFilter(_restart_said)
    hold = SignalsHeld(say)
    # A signal while the workers start is held until they have (it then stops the suite, the
    # cluster closing as after any other): before, it interrupted LocalCluster's start, and
    # distributed's own close at exit failed on the workers still starting, with a traceback
    # of 28 lines under "interrupted".
    starting = SignalsHeld(say, START_HOLD_S, STARTING, quiet_s=0.0)
    try:
        starting.start()
        with starting, hold, spawn, LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True,
                memory_limit=int(options.worker_memory_gib * GIB), host="127.0.0.1",
                scheduler_port=0, dashboard_address=None, worker_dashboard_address=None,
                scheduler_kwargs=scheduler, preload=[__name__], silence_logs=logging.ERROR
        ) as cluster, Client(cluster) as client:
            try:
                starting.release()
                yield client
            finally:
                # The cluster closes: a worker still computing a run (Ctrl-C, SIGTERM, a
                # failed run), or one slow to exit on a loaded machine after the last run
                # (seen at load 16: twice at the end of a suite that succeeded), is killed by
                # its nanny after 4 s, with a warning ("Worker process still alive after 4.0
                # seconds, killing") of what this close means to do: every result is stored.
                nanny.setLevel(logging.CRITICAL)
                hold.start()  # a Ctrl-C now would interrupt the close (SignalsHeld)
    finally:
        nanny.setLevel(level)
        nanny.removeFilter(_restart_said)


RESTARTED = ("a Dask worker process stopped (killed, past its memory limit, or crashed); Dask "
             "starts another in its place, and a run it was computing goes to a worker again "
             "(up to 3 times)")


def _restart_said(record: logging.LogRecord) -> bool:
    """A LocalCluster nanny's "Restarting worker (status=Status.running)" in the suite's words
    (``RESTARTED``). Before, those words alone, the one line a worker's death printed (why it
    died is logged below warnings): they told neither what had happened nor that the run goes
    on."""
    if str(record.msg).startswith("Restarting worker"):
        record.msg, record.args = RESTARTED, ()
    return True


# How long SignalsHeld holds Ctrl-C and SIGTERM while the LocalCluster closes (it takes a few
# seconds: a worker still computing is killed after 4 s); a signal after that interrupts the
# close, should it never end.
CLOSE_HOLD_S = 30.0
# A signal within this long of the hold's start is the one that stopped the suite, sent again
# (timeout(1) signals the command and then its group), not a second request: not answered.
SAME_SIGNAL_S = 1.0
# How long a signal is held while the LocalCluster's workers start (a few seconds, more on a
# loaded machine); one after that interrupts the start, should it never end.
START_HOLD_S = 60.0
STOPPING = ("stopping the LocalCluster's Dask workers first (a few seconds; a run in progress "
            "is abandoned)")
STARTING = "stopping once the LocalCluster's Dask workers have started (a few seconds)"


class SignalsHeld:
    """Ctrl-C and SIGTERM held while the LocalCluster closes, from ``start`` to the end of the
    ``with`` block: a signal then is answered with one line (``say``) and acted on once the
    cluster is closed (KeyboardInterrupt on the way out, unless an exception already leaves),
    or at once after ``CLOSE_HOLD_S``. Before, a second Ctrl-C interrupted the close, and
    distributed closed the cluster again at exit: a suite stopped by two Ctrl-C exited after
    12.5 s instead of 4.6 s. On the main thread only (elsewhere, no handler can be set)."""

    def __init__(self, say: Callable[[str], None] | None = None,
                 hold_s: float = CLOSE_HOLD_S, line: str = STOPPING,
                 quiet_s: float | None = None) -> None:
        self.say, self.hold_s, self.line = say, hold_s, line
        self.quiet_s = quiet_s  # (None: SAME_SIGNAL_S, read when a signal comes)
        self.began: float | None = None
        self.signalled = False
        self.told = False
        self._previous: dict[int, Any] = {}

    def __enter__(self) -> SignalsHeld:
        return self

    def start(self) -> None:
        if self.began is not None or threading.current_thread() is not threading.main_thread():
            return
        self.began = time.monotonic()
        for signum in (signal.SIGINT, signal.SIGTERM):
            self._previous[signum] = signal.signal(signum, self._held)

    def _held(self, signum: int, frame: object) -> None:
        assert self.began is not None
        waited = time.monotonic() - self.began
        if waited >= self.hold_s:
            raise KeyboardInterrupt
        self.signalled = True
        quiet_s = SAME_SIGNAL_S if self.quiet_s is None else self.quiet_s
        if self.told or waited < quiet_s or self.say is None:
            return
        self.told = True
        with contextlib.suppress(RuntimeError):  # (a write it interrupted: the line is lost)
            self.say(self.line)

    def release(self) -> None:
        """The handlers from before ``start`` again, and KeyboardInterrupt if a signal was held
        (once: the ``with`` block's end raises it no more)."""
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()
        if self.signalled:
            self.signalled = False
            raise KeyboardInterrupt  # (the signal held: the suite stops)

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is None:
            self.release()
        else:
            with contextlib.suppress(KeyboardInterrupt):  # (an exception already leaves)
                self.release()


def dask_setup(worker: object) -> None:
    """Dask's preload hook, in each LocalCluster worker process: Ctrl-C in the terminal, and
    SIGTERM from `timeout` or a process manager that signals the group, reach every process of
    the group, and only the client acts on them (cancels the runs and closes the cluster, whose
    nannies stop their workers and kill one still computing after a grace period). A worker
    that stopped by itself would print its traceback, or its nanny "Restarting worker" before
    the client had closed the cluster. A run that fails is the client's to tell, once per
    error (``execute``): the worker's own "Compute Failed" dump of it (its key, task, exception
    and traceback, 6 lines a run on the client's terminal, which the workers share) is not
    written (before, a suite given an impossible privacy target printed it for every run)."""
    logging.getLogger("distributed.worker").addFilter(_not_compute_failed)
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)


def _not_compute_failed(record: logging.LogRecord) -> bool:
    return not str(record.msg).startswith("Compute Failed")


def _worker_code() -> tuple[str, str, dict[str, str], list[str]]:
    """What a worker runs: fedhh's version, its code, the result libraries' versions, and the
    fedhh files changed on disk since it loaded them (it runs the old ones: restart it)."""
    try:
        return fedhh.__version__, code_fingerprint(), library_versions(), changed_on_disk()
    except OSError as error:  # (check_workers reads an OSError as a worker it cannot reach)
        raise ImportError(f"cannot read its fedhh package: {_error_line(error)}") from None


def _code_words(code: tuple[str, ...] | Sequence[Any]) -> str:
    """A worker's ``_worker_code`` in words: its fedhh and the result libraries whose versions
    differ from this process's (each with this one's)."""
    mine = library_versions()
    theirs = code[2] if len(code) > 2 and isinstance(code[2], dict) else {}
    # (an older fedhh tells no library versions)
    differ = [f"{name} {theirs.get(name, 'not installed')} (here {version})"
              for name, version in mine.items() if theirs and theirs.get(name) != version]
    return (f"fedhh {code[0]}, code {code[1][:12]}" + "".join(f", {d}" for d in differ)
            + (f", {_stale_words(code[3])}" if _stale(code) else ""))


def _stale(code: tuple[str, ...] | Sequence[Any]) -> bool:
    """Whether a worker's ``_worker_code`` says its fedhh files changed on disk since it
    loaded them (an older fedhh does not say)."""
    return len(code) > 3 and bool(code[3])


def _stale_words(changed: Sequence[str]) -> str:
    return f"its fedhh files changed on disk since it started ({_files_shown(changed)})"


def _files_shown(changed: Sequence[str]) -> str:
    """The first two of ``changed`` and how many more, for a line."""
    return ", ".join(changed[:2]) + (f" and {len(changed) - 2} more" if len(changed) > 2
                                     else "")


def _error_line(error: BaseException) -> str:
    """A worker's error in one line (Dask wraps one it could not send back as a plain
    Exception whose text is the original's repr, which names its type)."""
    text = " ".join(str(error).split())
    return text if type(error) is Exception else f"{type(error).__name__}: {text}"


def check_workers(client: Client, datasets: Collection[str] = (DEFAULT_DATASET,)) -> None:
    """Refuse workers whose fedhh is not the client's (``code_fingerprint``), or that cannot
    load it, naming them; warn of workers that cannot be reached (ConfigError when none can)
    and, when the runs' ``datasets`` (names or paths) include the default one, of workers whose
    memory limit is below what a run over it may need. ``RUN_MEMORY_GIB`` is that dataset's
    figure: before, the warning was given whatever the dataset, a 3,000-user file's too."""
    mine = code_fingerprint()
    found: dict[str, tuple[str, str, dict[str, str]] | BaseException] = client.run(
        _worker_code, on_error="return")
    # on_error="return" also returns the scheduler's failure to reach a worker (an OSError:
    # refused, timed out, distributed's CommClosedError), as a worker that just died gives.
    # Dask gives a dead worker's runs to the others, and each run checks its worker's code
    # again, so such a worker is passed over, not taken for one without fedhh.
    lost = {address: error for address, error in found.items() if isinstance(error, OSError)}
    if lost:
        listed = ", ".join(f"{address} ({_error_line(error)})"
                           for address, error in sorted(lost.items()))
        if len(lost) == len(found):
            raise ConfigError(f"cannot reach any of the {len(found)} Dask workers: {listed}")
        log.warning("%d of %d Dask workers cannot be reached, and are not checked (a dead "
                    "worker is given no runs; a worker checks its fedhh for each run): %s",
                    len(lost), len(found), listed)
    others = {address: (f"cannot load fedhh: {_error_line(code)}"
                        if isinstance(code, BaseException)
                        else _code_words(code))
              for address, code in found.items()
              if address not in lost and (isinstance(code, BaseException) or code[1] != mine)}
    if others:
        listed = ", ".join(f"{address} ({what})" for address, what in sorted(others.items()))
        # A worker whose files were updated under it (a `git pull` or an edit in the checkout
        # it runs from) keeps the code it loaded: restarting it is the remedy, not installing
        # (before, "install the same fedhh" alone, to a researcher whose workers share the
        # client's checkout).
        stale = len([a for a, code in found.items()
                     if a in others and not isinstance(code, BaseException) and _stale(code)])
        remedy = (f"install the same fedhh, and the same versions of "
                  f"{', '.join(RESULT_LIBRARIES)}, on every worker")
        if stale == len(others):
            remedy = (f"restart {'it' if stale == 1 else 'them'}: a Dask worker keeps running "
                      "the fedhh it loaded when it started")
        elif stale:
            remedy += "; restart those whose files changed on disk since they started"
        mine_changed = changed_on_disk()
        if mine_changed:
            # The client is the one left behind (files updated while it planned or built a
            # dataset, and the workers started after, or were restarted, with the new ones).
            remedy = (f"this client's own fedhh files changed on disk since it started "
                      f"({_files_shown(mine_changed)}): run the same command again; or {remedy}")
        raise ConfigError(f"{len(others)} of {len(found) - len(lost)} Dask workers do not run "
                          f"this client's fedhh (fedhh {fedhh.__version__}, code {mine[:12]}): "
                          f"{listed}; {remedy}")
    workers = client.scheduler_info(n_workers=-1)["workers"]
    small = sorted(address for address, w in workers.items()
                   if 0 < float(w.get("memory_limit") or 0) < RUN_MEMORY_GIB * GIB)
    if small and DEFAULT_DATASET in datasets:
        log.warning("%s a memory limit under %g GiB, what one run over the 1.6M-user "
                    "default dataset may need: %s",
                    "1 Dask worker has" if len(small) == 1 else f"{len(small)} Dask workers have",
                    RUN_MEMORY_GIB, ", ".join(small))


def await_workers(client: Client, address: str, timeout_s: float,
                  say: Callable[[str], None]) -> None:
    """Return once the scheduler has a worker; if it has none, ``say`` so and wait up to
    ``timeout_s`` for one (ConfigError naming the scheduler and what to start if none comes).
    Dask would keep the runs queued without a word until a worker joins, for ever if none
    does."""
    if client.scheduler_info(n_workers=-1)["workers"]:
        return
    command = WORKER_COMMAND.format(address=address)
    say(f"the Dask scheduler {address} has no workers yet; waiting up to {timeout_s:g} s for "
        f"one (start them with `{command}`)")
    try:
        client.wait_for_workers(1, timeout=timeout_s)
    except TimeoutError:
        raise ConfigError(f"no Dask worker joined the scheduler {address} in {timeout_s:g} s: "
                          f"start workers with `{command}` on each machine (fedhh installed), "
                          "then run the same command again") from None
    except (OSError, RuntimeError) as error:
        # The scheduler went away during the wait: Dask's client failed to reconnect and said
        # only "Timed out trying to connect to ADDRESS after 30 s", as if the address had
        # never answered. On a loaded machine its reconnect can instead trip asyncio's own
        # "Cannot change state of expiring Timeout" (a RuntimeError, the suite under load on
        # 2026-12-05): lost all the same while the client has no scheduler; else a bug, raised.
        if isinstance(error, RuntimeError) and client.status == "running":
            raise
        raise SchedulerLost(f"lost the Dask scheduler {address} while waiting for its first "
                            f"worker ({_cause(error)}): no run was sent; start the scheduler "
                            "and its workers again, then run the same command") from None


# The reason Dask gives the futures it cancels when the client loses its scheduler.
LOST_REASON = "scheduler-connection-lost"
# How often a run refused by a worker (``refused_by``) is sent to the other workers.
MOVES_ELSEWHERE = 3
# How many of the failed runs a suite's last lines name (the rest are counted).
NAMED_FAILURES = 8
# How often a run cancelled by another client of the scheduler is submitted again.
CANCELS_RESUBMITTED = 3

WORKERS_GONE_S = 10.0  # how long the scheduler has had no worker before the suite says so


class WorkerWatch:
    """Says so when every worker has left the scheduler in the middle of a suite, or every
    worker is paused, and when that ends. Dask keeps the runs queued without a word until a
    worker joins or resumes: a suite whose workers all died or were stopped (`--scheduler`:
    nothing restarts them) sat still with its progress bar for ever, and nothing told that
    Ctrl-C keeps what finished. A worker is paused when its memory passes Dask's pause
    threshold (``distributed.worker.memory.pause``, 80% of its limit by default; the nanny
    restarts it only at 95%): a fedhh worker keeps its dataset, ground truth and one encoded
    vocabulary between runs, so one whose limit is too small for them stays paused, and a
    suite whose workers were all paused sat still for ever too, the reason in the workers'
    logs alone.

    ``check(now)`` is one look (``workers()``: how many the scheduler has; ``paused()``, if
    given: the paused ones, each in words); ``start`` looks every ``interval`` seconds on a
    daemon thread until ``stop``."""

    def __init__(self, workers: Callable[[], int], say: Callable[[str], None], address: str,
                 grace_s: float = WORKERS_GONE_S, interval_s: float = 2.0,
                 paused: Callable[[], list[str]] | None = None) -> None:
        self.workers, self.say, self.address = workers, say, address
        self.paused = paused
        self.grace_s, self.interval_s = grace_s, interval_s
        self.gone_since: float | None = None
        self.said = False
        self.paused_since: float | None = None
        self.said_paused = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def check(self, now: float) -> None:
        try:
            count = self.workers()
            paused = self.paused() if self.paused is not None and count else []
        except Exception:  # (a scheduler going away is execute's to report)
            return
        if count and len(paused) >= count:
            self._all_paused(now, paused)
        elif self.said_paused:
            running = count - len(paused)
            self.say(f"{running} Dask worker{'s' if running != 1 else ''} of {self.address} "
                     f"{'run' if running != 1 else 'runs'} again: the runs go on"
                     if running else
                     f"the paused Dask workers have left {self.address}")
            self.paused_since, self.said_paused = None, False
        else:
            self.paused_since = None
        if count == 0:
            if self.gone_since is None:
                self.gone_since = now
            elif not self.said and now - self.gone_since >= self.grace_s:
                self.said = True
                command = WORKER_COMMAND.format(address=self.address)
                self.say(f"every Dask worker has left the scheduler {self.address} "
                         f"({now - self.gone_since:.0f} s ago): the runs not done wait until "
                         f"one joins (`{command}`); Ctrl-C stops here, and every finished run "
                         "stays stored")
            return
        if self.said:
            self.say(f"{count} Dask worker{'s' if count > 1 else ''} joined "
                     f"{self.address}: the runs go on")
        self.gone_since, self.said = None, False

    def _all_paused(self, now: float, paused: list[str]) -> None:
        if self.paused_since is None:
            self.paused_since = now
        if self.said_paused or now - self.paused_since < self.grace_s:
            return
        self.said_paused = True
        command = WORKER_COMMAND.format(address=self.address)
        self.say(f"every Dask worker of {self.address} is paused ({now - self.paused_since:.0f} "
                 f"s): {', '.join(paused)}. Dask pauses a worker whose memory passes its "
                 "pause threshold (80% of its limit by default), and a fedhh worker keeps its "
                 "dataset between runs, so it may never resume: the runs not done wait. "
                 f"Start workers with more memory (`{command}`; with --workers, "
                 "--worker-memory); Ctrl-C stops here, and every finished run stays stored")

    def start(self) -> WorkerWatch:
        def watch() -> None:
            while not self._stop.wait(self.interval_s):
                self.check(time.monotonic())

        self._thread = threading.Thread(target=watch, name="fedhh-worker-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)


def paused_workers(info: dict[str, Any]) -> list[str]:
    """The paused workers of a scheduler's ``identity`` (``Client.scheduler_info``), each as
    its address with its memory and limit."""
    out = []
    for address, worker in sorted(info.get("workers", {}).items()):
        if worker.get("status") != "paused":
            continue
        limit = float(worker.get("memory_limit") or 0) / GIB
        memory = float((worker.get("metrics") or {}).get("memory") or 0) / GIB
        held = f"{memory:.2f} GiB" + (f" of its {limit:.2f} GiB limit" if limit else "")
        out.append(f"{address} ({held})")
    return out


def describe(client: Client) -> str:
    """The workers the client reaches, in words (warns of workers that run several tasks at
    once: those runs share the worker's memory limit)."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    threads = sorted({int(w["nthreads"]) for w in workers.values()})
    limits = sorted({float(w.get("memory_limit") or 0) / GIB for w in workers.values()})
    if threads and threads[-1] > 1:
        log.warning("workers with %s threads run as many runs at once, sharing their memory "
                    "limit; start them with --nthreads 1", threads[-1])
    if not workers:  # (all of them left since await_workers)
        return "no Dask workers"
    # (a worker started with `--memory-limit 0` has none: it read "0.0 GiB"; a limit under
    # 1 GiB keeps two digits: 150 MB read "0.1 GiB")
    sized = [f"{m:.1f}" if m >= 1 else f"{m:.2g}" for m in limits if m > 0]
    memory = " or ".join(([f"{'/'.join(sized)} GiB"] if sized else [])
                         + (["no memory limit"] if 0 in limits else []))
    plural = "s" if len(workers) != 1 else ""
    return (f"{len(workers)} Dask worker{plural}, {'/'.join(map(str, threads))} thread(s), "
            f"{memory}")


_SUITES: dict[SuiteSettings, Suite] = {}


def compute_run(settings: SuiteSettings, run: PlannedRun, identity: dict[str, Any],
                code: str) -> RunRecord:
    """One run, on a worker whose fedhh is the client's (``code``: the client's
    ``code_fingerprint``): its suite's dataset opened from this machine's cache (once per
    worker process) and checked against the client's identity of it. The errors name the
    worker; a refusal of this worker's (other code, its dataset or cache) carries its address
    as ``refused_by``, so that ``execute`` sends the run to another worker."""
    try:
        suite = _worker_suite(settings, run, identity, code)
    except FedhhError as error:
        address = _worker_address()
        if address is not None:
            error.refused_by = address  # type: ignore[attr-defined]  # (pickled with it)
        raise
    return suite.compute(run)


def _worker_address() -> str | None:
    """This Dask worker's address, None outside one."""
    try:
        from distributed import get_worker

        return str(get_worker().address)
    except (ImportError, ValueError):
        return None


def _worker_suite(settings: SuiteSettings, run: PlannedRun, identity: dict[str, Any],
                  code: str) -> Suite:
    """This worker's suite for ``settings``, once its code and dataset are checked against
    the client's (``compute_run``)."""
    if code != code_fingerprint():
        libraries = ", ".join(f"{k} {v}" for k, v in library_versions().items())
        changed = changed_on_disk()
        refusal = ConfigError(
            f"{this_worker()} runs other fedhh code (fedhh {fedhh.__version__}, code "
            f"{code_fingerprint()[:12]}, with {libraries}) than the client (code {code[:12]}): "
            + (f"{_stale_words(changed)}: restart it; " if changed else "")
            + "install the same fedhh, and the same versions of those libraries, on every "
            "worker")
        refusal.other_code = True  # type: ignore[attr-defined]  # (pickled with it: _left_behind)
        raise refusal
    name = run.dataset or settings.dataset
    try:
        suite = _SUITES.get(settings)
        if suite is None:
            _SUITES.clear()  # one suite per worker: its dataset and caches, no older ones
            suite = _SUITES[settings] = Suite(settings, None, max_populations=1)
        found = suite.data(name).identity
    except DatasetError as error:
        raise DatasetError(f"on {this_worker()}: {error}") from error
    except OSError as error:
        # The worker's own cache cannot be used (FEDHH_CACHE under a file, not writable, a full
        # disk): the OS's error alone named a path on the worker's machine as if it were the
        # client's.
        from fedhh.data.registry import cache_root

        raise DatasetError(f"on {this_worker()}: cannot open the dataset {name!r} (the "
                           f"cache there: {cache_root()}, FEDHH_CACHE): "
                           f"{_error_line(error)}") from error
    if found != identity:
        if legacy_identity(found) == legacy_identity(identity) is not None:
            # (the same name, folder and sizes: before content digests, taken for the same)
            raise DatasetError(
                f"dataset {name!r} on {this_worker()} has the client's name, folder and sizes "
                f"but other contents (SHA-256 {found.get(CONTENTS, '?')[:12]}, the client's "
                f"{identity.get(CONTENTS, '?')[:12]}: another build, such as another seed, or "
                "an edited file): the name or path must give the same dataset on every machine")
        raise DatasetError(f"dataset {name!r} on {this_worker()} is {found}, the client "
                           f"planned with {identity}: the name or path must give the same "
                           "dataset on every machine")
    return suite


def execute(suite: Suite, runs: Sequence[PlannedRun], client: Client,
            progress: ProgressCallback | None = None,
            say: Callable[[str], None] | None = None) -> dict[str, RunRecord]:
    """Compute ``runs`` (those ``Suite.load_stored`` found missing) on the client's workers and
    store each as it finishes (progress: a ``done`` event for a whole run, counted in
    ``suite.computed``); the records by key. SchedulerLost when the scheduler goes away.
    ``say``: where a ``WorkerWatch`` tells that every worker left (and came back)."""
    from distributed import as_completed

    store = suite.require_store()
    records: dict[str, RunRecord] = {}
    if not runs:
        return records
    check_workers(client, {run.dataset or suite.settings.dataset for run in runs})
    def submit(run: PlannedRun, key: str, **where: Any) -> Any:
        return client.submit(compute_run, suite.settings, run,
                             suite.data(run.dataset or suite.settings.dataset).identity,
                             code_fingerprint(), key=key, **where)

    futures = {submit(run, f"fedhh-run-{run.key}"): run for run in runs}
    pending = set(futures)
    cancels: dict[str, int] = {}
    failed: list[tuple[PlannedRun, Exception]] = []
    told: set[str] = set()  # (the failures' words already logged)
    lines = 0  # (the failed runs named with their error's words)
    refusing: set[str] = set()  # workers that refused a run (their dataset, cache or code)
    moves: dict[str, int] = {}
    watch = None
    if say is not None:
        address = getattr(client.scheduler, "address", "") or "(this client's)"
        watch = WorkerWatch(lambda: len(client.scheduler_info(n_workers=-1)["workers"]), say,
                            address,
                            paused=lambda: paused_workers(client.scheduler_info(n_workers=-1))
                            ).start()
    try:
        finished = as_completed(futures)
        for future in finished:
            run = futures[future]
            pending.discard(future)
            try:
                record = future.result()
            except Exception as error:
                address = getattr(client.scheduler, "address", "")
                if isinstance(error, CancelledError) and (
                        client.status != "running"
                        or getattr(error, "reason", "") == LOST_REASON):
                    # Dask cancels every pending run when the scheduler connection drops.
                    raise SchedulerLost(
                        f"lost the Dask scheduler {address}: {len(records)} of "
                        f"the {len(runs)} runs sent finished and are stored; run the same "
                        f"command again to compute the other {len(runs) - len(records)}"
                    ) from None
                if isinstance(error, CancelledError):
                    # Cancelled on a scheduler this client is still connected to: by another
                    # of its clients (a suite that shares the run's key and forced its
                    # cancel, `client.cancel(force=True)`), nothing this suite did. Dask
                    # has forgotten the key; the run goes again, under a key of its own.
                    cancels[run.key] = cancels.get(run.key, 0) + 1
                    if cancels[run.key] <= CANCELS_RESUBMITTED:
                        log.warning("%s / %s / seed %d was cancelled on the Dask scheduler %s "
                                    "by another of its clients; submitted again", run.study,
                                    run.label, run.seed, address)
                        again = submit(run, f"fedhh-run-{run.key}-again-{cancels[run.key]}")
                        futures[again] = run
                        pending.add(again)
                        finished.add(again)
                        continue
                    times = cancels[run.key]
                    error = FedhhError(
                        f"{run.study} / {run.label} / seed {run.seed} was cancelled on the "
                        f"Dask scheduler {address} by another of its clients each time it was "
                        f"sent ({'once' if times == 1 else f'{times} times'}): another suite "
                        "or client stops the same runs (a run's task is shared by every "
                        "client that submits its key); the runs that finished are stored")
                worker = getattr(error, "refused_by", None)
                if getattr(error, "other_code", False) and (mine := changed_on_disk()):
                    error = _left_behind(error, mine)
                if isinstance(worker, str):
                    # A worker that cannot compute any run (its cache or dataset missing,
                    # another dataset, other code) fails each at once and takes the next: one
                    # such worker among many failed most of a suite. Its runs go to the others.
                    if worker not in refusing:
                        refusing.add(worker)
                        log.warning("Dask worker %s refuses the runs, which go to the other "
                                    "workers: %s", worker, _error_line(error))
                        told.add(_failure(error))  # (its runs' lines, if they fail, name it)
                    elsewhere = [w for w in client.scheduler_info(n_workers=-1)["workers"]
                                 if w not in refusing]
                    moves[run.key] = moves.get(run.key, 0) + 1
                    if elsewhere and moves[run.key] <= MOVES_ELSEWHERE:
                        again = submit(run, f"fedhh-run-{run.key}-elsewhere-{moves[run.key]}",
                                       workers=elsewhere, allow_other_workers=False)
                        futures[again] = run
                        pending.add(again)
                        finished.add(again)
                        continue
                # An error told once: a worker that refuses every run (its dataset or cache
                # missing, other code) failed each with the same words, a line per run (191
                # lines for the paper's suite).
                text = _failure(error)
                if text not in told:
                    told.add(text)
                    lines += 1
                    log.error("%s / %s / seed %d failed: %s", run.study, run.label, run.seed,
                              text)
                failed.append((run, error))
                continue
            finally:
                future.release()  # the worker may forget the result (it is ours now)
            store.save(record)
            records[run.key] = record
            suite.computed += 1
            wall = float(record.data.get("timings", {}).get("wall_s", 0.0))
            log.info("%s / %s / seed %d: %.1f s", run.study, run.label, run.seed, wall)
            if progress is not None:
                progress(ProgressEvent("done", run, run.total_rounds, wall))
    except SchedulerLost:
        raise  # nothing to cancel: the scheduler that held the runs is gone
    except BaseException:
        # Not forced: a run another client of the scheduler also waits for (another suite
        # with the same run: the same key) goes on for it. (Forced, a suite's Ctrl-C
        # cancelled the other suite's runs, which then failed with FutureCancelledError.)
        client.cancel(list(pending), reason="the fedhh experiments client stopped")
        raise
    finally:
        if watch is not None:
            watch.stop()
    if failed:
        order = {run.key: i for i, run in enumerate(runs)}
        failed.sort(key=lambda failure: order[failure[0].key])  # (in the plan's order)
        names = ", ".join(f"{r.study} / {r.label} / seed {r.seed}" for r, _ in
                          failed[:NAMED_FAILURES])
        if len(failed) > NAMED_FAILURES:
            names += f" and {len(failed) - NAMED_FAILURES} more"
        # Each failure's words are told above, once (``told``), in the run's line: the suite's
        # own error is their count. Before, it was the first failure's error raised again: its
        # words came twice, Dask's repr of it in the run's line, then the command's error line;
        # and before WorkersDied a line named the runs that it names.
        repeated = len(failed) - lines
        summary = (f"{len(failed)} of {len(runs)} runs failed (not stored; the next invocation "
                   "retries them" + (f"; {repeated} with an error told above, not told again"
                                     if repeated else "") + f"): {names}")
        from distributed.scheduler import KilledWorker

        killed = [(r, e) for r, e in failed if isinstance(e, KilledWorker)]
        if len(killed) < len(failed):
            first = next(e for _, e in failed if not isinstance(e, KilledWorker))
            if isinstance(first, FedhhError | OSError):
                said = "" if repeated else (
                    "; its error is told above" if len(failed) == 1
                    else "; their errors are told above")
                raise FedhhError(summary + said) from first
            # (a bug's error: raised as it is, with its traceback)
            log.error("%s", summary)
            raise first
        raise WorkersDied(
            f"{len(killed)} of the {len(runs)} runs sent never finished ({names}): the "
            f"workers Dask gave {'it' if len(killed) == 1 else 'each'} to died "
            f"({_deaths(killed[0][1])}). A worker dies when it is killed or its "
            "memory passes its limit (Dask restarts it): give the workers more memory "
            f"(--worker-memory with --workers; `dask worker --memory-limit`, "
            f"{RUN_MEMORY_GIB:g} GiB fits a run over the 1.6M-user default dataset). The "
            f"{len(records)} runs that finished are stored; run the same command again to "
            f"compute the other {len(runs) - len(records)}") from None
    return records


def _left_behind(refusal: BaseException, mine: Sequence[str]) -> ConfigError:
    """A worker's refusal of other code when this client's own fedhh files changed on disk
    since it started (``mine``): the worker, started since (a LocalCluster worker its nanny
    restarted after a death, in the checkout the client runs from), loaded the new ones.
    Before, the worker's "install the same fedhh on every worker", to a suite on one machine
    and one install."""
    worker = getattr(refusal, "refused_by", None)
    who = f"Dask worker {worker}" if worker else "a Dask worker"
    left = ConfigError(
        f"{who} runs fedhh's files as they are on disk now, and this client the ones it "
        f"loaded when it started: they changed since ({_files_shown(mine)}); run the same "
        "command again (the runs that finished are stored)")
    left.refused_by = getattr(refusal, "refused_by", None)  # type: ignore[attr-defined]
    return left


def _failure(error: BaseException) -> str:
    """A failed run's error in words, on one line: fedhh's own as the command says them, another
    named by its type, Dask's KilledWorker as what happened to its workers."""
    from distributed.scheduler import KilledWorker

    if isinstance(error, FedhhError):
        return " ".join(str(error).split())  # (as the command tells its own errors)
    if not isinstance(error, KilledWorker):
        return _error_line(error)
    return f"the Dask workers that ran it died ({_deaths(error)})"


def _deaths(error: Any) -> str:
    """How often the workers of a KilledWorker's run died, and the last of them."""
    worker = error.last_worker
    limit = float(getattr(worker, "memory_limit", 0) or 0)
    memory = f", memory limit {limit / GIB:.2g} GiB" if limit else ""
    return (f"{error.allowed_failures + 1} times; the last: "
            f"{getattr(worker, 'address', worker)}{memory}")


__all__ = ["CANCELS_RESUBMITTED", "CONNECT_S", "MIN_WORKER_MEMORY_GIB", "REFUSED_SAY_S",
           "RUN_MEMORY_GIB", "WORKERS_GONE_S", "WORKERS_WAIT_S", "ClusterOptions",
           "SchedulerLost", "SignalsHeld", "WorkerWatch", "WorkersDied", "await_workers",
           "check_scheduler", "check_workers", "code_fingerprint", "compute_run", "connect",
           "execute", "local_workers", "paused_workers"]
