"""`fedhh up`: the whole system on this machine, one discovery, then a clean shutdown.

Starts the secure-aggregation service, the coordinator and device processes as local processes
on 127.0.0.1 (OS-chosen ports, TLS from a fresh development CA, fresh secrets), enrolls every
user of the dataset as a device, runs one OptPrefixTree discovery, prints the heavy hitters,
the rounds and the privacy spent, and stops everything. With --dashboard the coordinator also
serves its web dashboard: its address is printed when the services are up (watch the rounds
live), and the stack stays up after the run until Ctrl-C. With --web the coordinator and the
aggregator also serve their device calls over the Connect protocol (the port web devices use,
fedhh/rpc/connect.py), and the last device process speaks only Connect (`fedhh device
--connect`), beside the others on gRPC. With --web-devices N (which implies --web) it also
serves a demo page that runs N browser devices in one tab (the TypeScript device of clients/web),
each with its own enrolment token, identity, privacy budget and a dataset user's items: the page
shows each device's enrolment, check-in, round stage, contribution and privacy spent, and the
run's progress, and the dashboard links to it.

The defaults fit the small real corpus (Shakespeare: about 1,400 speaking characters, each a
device). A sum over so few devices hides each report less than one over the paper's 1.6 million,
so the default aggregate target is eps_agg = 2 (eps_local 4.79 per round for the 4 main rounds
and the 7 completion rounds that the 1,248 contributors n_min allows can budget); at 1.6 million
devices eps_agg = 1 allows eps_local 10.7 (10.60 beside the 32 completion rounds).
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import math
import signal
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from fedhh.cli import options
from fedhh.cli.admin import dropped_completions, run_trim_note
from fedhh.cli.narrator import Narrator, contributors
from fedhh.cli.up_budgets import refuse_spent_lifetime, refuse_unpaid_rounds
from fedhh.cli.webdemo import MAX_WEB_DEVICES
from fedhh.codec.codebook import BUILTIN_NAMES, codebook_from_spec
from fedhh.codec.shown import (
    columns,
    cut_marks_note,
    fitted_rows,
    ljust,
    page_isolated,
    printable,
    printable_rows,
)
from fedhh.config import Mode, RunConfig, codec_value
from fedhh.config.flags import add_run_arguments, config_from_args, given_text
from fedhh.errors import ConfigError, PrivacyError, StateError

# What raises n_min here (the note on dropped completion rounds names them; `fedhh up` has
# no --min-devices: n_min is --min-fraction of --devices).
N_MIN_FLAGS = "--devices or --min-fraction"


def register(subparsers: Any) -> None:
    options.add_command(subparsers, "up", "run the whole system locally for one discovery",
                        __doc__, add_arguments, run)


# The demo's own defaults (the rest are RunConfig's). The accountant charges each round for its
# smallest releasable cohort, n_min = min_fraction x devices. No device is made to drop out
# here, so 0.9 rather than 0.7. With the 5-bit code and the exact accounting of the released
# sums, eps_agg 2 finds 9 to 14 words on Shakespeare in simulation over 8 seeds (8 to 11 in
# the same seeds before the completion rounds and the output's target of issue 27);
# eps_agg 1 (eps_local 3.61) finds 0 to 4. The codec is chosen by the dataset (DEMO_CODEC).
UP_DEFAULTS = {"eps_agg": 2.0, "selection": "weighted", "codec": None,
               "stage_ms": 30_000, "checkin_ms": 30_000}
# Without --codec: the 5-bit code for the Shakespeare demo (lower-case words: 5 bits a
# letter), the unicode codebook for any other dataset, whose items may be URLs, e-mail
# addresses, numbers or emoji (a URL of 25 characters: 121 bits in it, 194 in the 5-bit
# code, docs/codecs.md). Chosen by the dataset's name, never by its items: the operator
# does not see the devices' data.
DEMO_DATASET, DEMO_CODEC, OTHER_CODEC = "shakespeare", "5bit", "unicode"
# Set from the devices started, not by hand.
DERIVED = ("target_devices", "min_devices")
MIN_DEVICES = 3  # RunConfig's smallest n_min
SETTLE_S = 10.0  # how long the run's end waits for the demo page to report its devices
MAX_PROCESSES = 32
ITEM_COLUMNS_MIN, ITEM_COLUMNS_MAX = 20, 48  # the result list's item column


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--dataset", default=DEMO_DATASET, help="dataset whose users become "
                   f"devices (default {DEMO_DATASET}; without --codec, its items are coded with "
                   f"{DEMO_CODEC}, any other dataset's with the {OTHER_CODEC} codebook)")
    p.add_argument("--devices", type=options.positive_int, default=None,
                   help="devices (dataset users) to start (default: every user)")
    p.add_argument("--processes", type=process_count, default=4,
                   help=f"device processes to spread the devices over (default 4, at most "
                        f"{MAX_PROCESSES})")
    p.add_argument("--min-fraction", type=options.probability, default=0.9,
                   help="n_min as a fraction of the devices (default 0.9)")
    p.add_argument("--insecure", action="store_true", help="plaintext on loopback, no TLS")
    p.add_argument("--seed", type=options.non_negative_int, default=None,
                   help="TEST MODE: seeded device randomness (default: OS entropy)")
    p.add_argument("--workdir", help="keep logs, keys and the SQLite file here (default: a "
                   "temporary directory, removed at the end; only the last folder of the path "
                   "is made); a later `fedhh up` there "
                   "reuses them, its devices' budgets included (a rerun that would move a user "
                   "to another device process, or whose devices' budgets cannot pay for a "
                   "round, is refused before they start; users new to it get a token)")
    p.add_argument("--timeout", type=options.positive_float, default=900.0,
                   help="give up after this many seconds in which the run made no progress "
                        "(no stage of a round began or ended; default 900)")
    p.add_argument("--dashboard", action="store_true",
                   help="serve the coordinator's web dashboard, print its address, and keep "
                        "the stack up after the run until Ctrl-C")
    p.add_argument("--web", action="store_true",
                   help="also serve the device calls over the Connect protocol (for web "
                        "devices), print those addresses, and run the last device process "
                        "over them")
    p.add_argument("--web-devices", type=web_device_count, default=0, metavar="N",
                   help="(implies --web) also serve a demo page that runs N browser devices "
                        f"(at most {MAX_WEB_DEVICES}) in one tab beside the Python devices: "
                        "the last N dataset users holding an item, each with its own enrolment "
                        "token, identity and privacy budget (IndexedDB). Its address is "
                        "printed; the run starts once the page's devices enrolled or after "
                        "--web-wait seconds. The run does not need them: n_min counts the "
                        "Python devices only, so it finishes if nobody opens the page. The "
                        "stack stays up after the run until Ctrl-C. Builds clients/web (needs "
                        "a source checkout, Node >= 20.19 and npm)")
    p.add_argument("--web-wait", type=options.non_negative_float, default=60.0,
                   metavar="SECONDS",
                   help="with --web-devices: how long to wait for the page's devices to enrol "
                        "before the run starts without the rest (default 60)")
    add_run_arguments(p, Mode.NETWORK, defaults=UP_DEFAULTS, exclude=DERIVED)


# (each is a Python process of ~80 MB: 1,387 of them, one per Shakespeare device, were being
# started on a 2-core machine)
process_count = options.integer_in(1, MAX_PROCESSES, "device processes (each is a Python "
                                   "process hosting many devices)")


def completion_clause(stored: RunConfig) -> str:
    """The run line's words on its completion rounds, "" without any. They complete the items
    the main rounds leave unended, whatever their length: with completion rounds the main rounds
    take adaptive segments, which reach short of max_bits (52 of 60 bits for 1,200 devices of odd
    items). Before, the line said "completing items longer than 60 bits"."""
    if not stored.completion():
        return ""
    return (f", the last {stored.completion()} completing the items the main rounds leave "
            f"unended, the first at eps_local + ln {stored.completion_weight} (a quarter of it "
            "for the 2nd and 3rd, less after)")


def demo_run_id(runs: list[Any]) -> str:
    """``demo``, or ``demo-2``, ``demo-3``, ... the first a store kept in --workdir does not
    hold yet (a second `fedhh up` in the same workdir was refused ALREADY_EXISTS, once its
    whole stack had started)."""
    taken = {run.run_id for run in runs}
    return next(name for name in ("demo", *(f"demo-{n}" for n in range(2, len(taken) + 3)))
                if name not in taken)


def cancel_unfinished(admin: Any, runs: list[Any]) -> list[str]:
    """Cancel the runs an earlier `fedhh up` in the same --workdir left pending or running (it
    was interrupted, or gave up at --timeout), and return their ids. Before, the coordinator
    resumed such a run as it started and drove it to its end, spending the devices' budget on
    a discovery nobody waited for, while the new run's check-in waited behind it, for minutes,
    saying only "check-in (1387 devices so far)"; now only a round it resumed ends first (the
    coordinator cancels a running run between rounds)."""
    left = [run.run_id for run in runs if run.state in ("pending", "running")]
    for run_id in left:
        admin.cancel(run_id)
    return left


def unfinished_runs(workdir: str) -> list[str] | None:
    """The runs the store in ``workdir`` holds pending or running, oldest first: those a
    rerun there cancels (``cancel_unfinished``). Read once the services are stopped, as a
    selector reads the coordinator's store (no lock, no schema made); [] when no coordinator
    made its store, None when the store does not read."""
    import sqlite3

    from fedhh.errors import FedhhError
    from fedhh.rpc.topology import STORE_FILE
    from fedhh_coordinator.store import ACTIVE, Store

    location = Path(workdir, STORE_FILE)
    if not location.is_file():
        return []
    try:
        store = Store(location, selector=True)
        try:
            return [run_id for run_id, _ in store.run_states(ACTIVE)]
        finally:
            store.close()
    except (FedhhError, sqlite3.Error):
        return None


def rerun_note(left: list[str] | None) -> str:
    """What a `fedhh up --workdir` rerun does with the runs an interrupted one left (``left``:
    ``unfinished_runs``). Before, it said the rerun "cancels the run left unfinished" also
    when Ctrl-C came before any run was started."""
    if left is None:
        return " (a `fedhh up --workdir` there cancels any run left unfinished before it " \
               "starts its own)"
    if not left:
        return " (no run was left unfinished: a `fedhh up --workdir` there starts its own " \
               "with them)"
    named = ", ".join(printable(run_id) for run_id in left)
    return (f" (run{'s' if len(left) > 1 else ''} {named} left unfinished: a `fedhh up "
            "--workdir` there cancels " + ("them" if len(left) > 1 else "it")
            + " before it starts its own)")


def web_device_count(text: str) -> int:
    count = options.non_negative_int(text)
    if count > MAX_WEB_DEVICES:
        # A browser opens 6 connections per host and port; each device's long-polls hold one.
        raise argparse.ArgumentTypeError(
            f"at most {MAX_WEB_DEVICES} browser devices share one tab (a browser opens 6 "
            f"connections per host, and each device's long-poll holds one), got {count}")
    return count


def run(args: argparse.Namespace) -> int:
    """``_run``, with SIGTERM (docker stop, kill, timeout) ending it as Ctrl-C does: the
    services stopped and the temporary workdir, with its keys and tokens, removed."""
    from fedhh.cli.main import interrupt_once

    previous = signal.getsignal(signal.SIGTERM), signal.getsignal(signal.SIGINT)
    interrupt_once()
    try:
        return _run(args)
    except KeyboardInterrupt:
        # (before, Ctrl-C said only "interrupted": not whether the store, and the run it left
        # unfinished, were kept, nor what a rerun does with that run)
        print("fedhh up: the services are stopped; "
              + (f"their store, logs and keys are kept in {args.workdir}"
                 + rerun_note(unfinished_runs(args.workdir))
                 if args.workdir else "their temporary folder is removed"),
              file=sys.stderr, flush=True)
        raise
    finally:
        if signal.getsignal(signal.SIGTERM) is not signal.SIG_IGN:  # (else interrupted: later
            signal.signal(signal.SIGTERM, previous[0])  # signals stay ignored to the end)
            signal.signal(signal.SIGINT, previous[1])


def codec_shown(spec: str, given: str | None) -> str:
    """The run's codec as the console names it: a built-in codebook by its name; a codebook
    of --codec by the file it came from (or as inline JSON) and its own name, as the operator
    knows it (before, 'a codebook of its own' for every one of them)."""
    if spec in BUILTIN_NAMES:
        return spec
    source = ("inline JSON" if given is None or given.strip().startswith("{")
              else printable(given.strip()))
    return f"the codebook {printable(codebook_from_spec(spec).name)!r} of --codec {source}"


def refuse_shards(config: Any) -> None:
    """`fedhh up` starts one aggregator and no combiner, so a run of several shards failed
    every attempt of its first round ("sharded rounds (shard_size) need a combiner"), after
    the whole stack had started: it is refused before anything starts."""
    from fedhh.secagg.shards import shard_sizes

    if config.shard_size is None:
        return
    shards = shard_sizes(config.target_devices, config.shard_size)
    if len(shards) > 1:
        raise ConfigError(
            f"--shard-size {config.shard_size} splits the {config.target_devices} devices "
            f"into {len(shards)} shards, and sharded rounds need a combiner with aggregator "
            "workers, which `fedhh up` does not start (it runs one aggregator): drop "
            "--shard-size here; docs/scaling.md runs sharded rounds (fedhh combiner)")


def refuse_over_lifetime(config: RunConfig) -> None:
    """ConfigError, before anything starts, for a run whose target exceeds the lifetime budget
    of each device of `fedhh up`'s coordinator (its defaults, ``LifetimeBudget()``), which
    refuses such a run. Before, the services and every device started (35 s on 2 busy cores)
    and then the run was refused with "FAILED_PRECONDITION: a run of (eps 1000000.0, ...)
    exceeds every device's lifetime budget", naming no option."""
    from fedhh.privacy.ledger import shown_above
    from fedhh_coordinator.budgets import LifetimeBudget

    budget = LifetimeBudget()
    try:
        budget.check_run(config.eps_agg, config.delta)
    except PrivacyError:
        # (with :g alone, --eps-agg 10.000000000000002 read "--eps-agg 10: more than ... eps 10")
        raise ConfigError(
            f"--eps-agg {shown_above(config.eps_agg, budget.eps)} --delta "
            f"{shown_above(config.delta, budget.delta)}: more than the lifetime "
            f"budget each device of the local coordinator holds (eps {budget.eps:g}, delta "
            f"{budget.delta:g} per {budget.period_s / 86400:g} days), so it would refuse the "
            f"run: give at most --eps-agg {budget.eps:g} and --delta {budget.delta:g}") from None


class TargetCheck:
    """Whether the coordinator can budget the run's (eps_agg, delta) target, solved on a thread
    while the services start (``refuse_if_unmet`` waits for it before any device starts).

    The coordinator refuses a run exactly when no local epsilon meets the target even without
    completion rounds (``with_most_completions`` over ``open_ledger``, its StartRun's own
    plan): that plan is what is solved here, whole, for the completion rounds it keeps too
    (the run's codes, ``warn_past_run_codes``): 1.7 s for the default Shakespeare fleet,
    against 0.48 s for the run without completion rounds alone. Before, `fedhh up --eps-agg
    0.0001` started the whole stack, every device included (~15 s), and then ended
    "FAILED_PRECONDITION: eps_agg=0.0001, ... needs an eps_local below 0.001953"; solving
    first would add the solver's 0.5-2 s to every `up` (5 s at load 19 on 2 cores), while the
    aggregator's and the coordinator's starts take longer than that.

    An `up` that ends before it waited for the solve (a start that failed, Ctrl-C) leaves the
    thread running, and the interpreter's exit waits for it (``_wait_at_exit``). Before, the
    exit did not: a daemon thread still inside numpy or scipy when the interpreter finalizes
    is stopped where it stands, which can abort the process or print noise."""

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.planned = config  # (the coordinator's plan once solved: ``planned_run``)
        self.eps_local: float | None = None  # (its main rounds' eps_local, once solved)
        self.round_eps: tuple[float, ...] | None = None  # (each round's, once solved)
        self._error: PrivacyError | None = None
        self._thread = threading.Thread(target=self._solve, name="fedhh-up-target-check",
                                        daemon=True)  # (Ctrl-C does not wait for it)
        self._thread.start()
        atexit.register(self._wait_at_exit)

    def _solve(self) -> None:
        from fedhh.config import with_most_completions
        from fedhh_coordinator.runs import open_ledger

        try:
            # (the StartRun's own plan: it raises as the coordinator refuses, and gives the
            # completion rounds it keeps, so the run's codes, for ``warn_past_codes``)
            self.planned, ledger = with_most_completions(self.config, open_ledger,
                                                         lambda ledger: ledger.eps_local)
            self.eps_local = float(ledger.eps_local)
            self.round_eps = tuple(ledger.round_epsilon(i) for i in range(ledger.rounds))
        except PrivacyError as error:
            self._error = error
        except Exception:  # (anything else is the coordinator's StartRun's to say)
            pass

    def _wait(self) -> None:
        while self._thread.is_alive():  # (timed: Ctrl-C reaches a timed join)
            self._thread.join(0.5)

    def _wait_at_exit(self) -> None:
        """At the interpreter's exit (atexit runs before daemon threads are stopped): wait for
        the solve, a few seconds at most. A Ctrl-C meanwhile leaves it (the user insists)."""
        with contextlib.suppress(KeyboardInterrupt):
            self._wait()

    def refuse_if_unmet(self) -> RunConfig:
        """ConfigError naming the options if the coordinator would refuse the target; else the
        configuration it runs (``self.config`` with the completion rounds it can budget; as
        given where the solve failed otherwise)."""
        self._wait()
        atexit.unregister(self._wait_at_exit)  # (solved: nothing left for the exit to wait for)
        if self._error is not None:
            raise ConfigError(f"--eps-agg {self.config.eps_agg:g} --delta "
                              f"{self.config.delta:g}: the coordinator would refuse the run "
                              f"({self.config.min_devices:,} devices are n_min, "
                              f"{N_MIN_FLAGS} raise it): {self._error}")
        return self.planned


def warn_past_run_codes(dataset: Any, planned: RunConfig, devices: int,
                        asked: RunConfig, planned_eps_local: float | None = None
                        ) -> Callable[[], bool] | None:
    """``warn_past_codes`` of the items the run's ``devices`` (the dataset's first users)
    hold past the codes of ``planned`` (the coordinator's plan, its main rounds at
    ``planned_eps_local`` where ``TargetCheck`` solved it), before any device starts; the cost
    figured as the coordinator's ledger would (``open_ledger``). Before, the plan was solved
    again here, on the main thread, before any device started (0.5-2 s a solve). Returns
    ``weight_one_helps`` of the run, for the note after it (None where the plan is unsolved)."""
    from fedhh.cli.simulate import (
        PAST_NAMED,
        warn_past_codes,
        warn_unreachable_completions,
        weight_one_helps,
    )
    from fedhh.codec import Codec
    from fedhh.data.long_items import past_the_codes
    from fedhh.server.causes import rounds_reach
    from fedhh_coordinator.runs import open_ledger

    def eps_local(config: RunConfig) -> float | None:
        if planned_eps_local is not None and config == planned:
            return planned_eps_local
        try:
            return float(open_ledger(config).eps_local)
        except (ConfigError, PrivacyError):
            return None

    cohort = planned.target_devices or devices
    reach = (rounds_reach(planned, planned_eps_local, cohort, Mode.NETWORK)
             if planned_eps_local is not None and planned.completion() else None)
    codec = Codec.from_spec(planned.codec, reach or planned.code_bits(Mode.NETWORK))
    past = past_the_codes(dataset, codec, PAST_NAMED, devices, tuple(planned.deny_items()))
    warn_past_codes(past, planned, Mode.NETWORK, "fedhh up", asked, eps_local, reach)
    if reach is not None and planned_eps_local is not None:
        warn_unreachable_completions(dataset, planned, devices, cohort, planned_eps_local,
                                     Mode.NETWORK, "fedhh up", eps_local)
    return None if planned_eps_local is None else weight_one_helps(
        dataset, planned, devices, cohort, planned_eps_local, Mode.NETWORK, eps_local)


def _run(args: argparse.Namespace) -> int:
    from fedhh.data.registry import resolve_dataset, resolve_dataset_path
    from fedhh.rpc.admin_client import AdminClient
    from fedhh.rpc.run_config import from_proto, to_proto
    from fedhh.rpc.topology import LocalTopology

    if args.codec is None:
        args.codec = codec_value(DEMO_CODEC if args.dataset == DEMO_DATASET else OTHER_CODEC)
    base = config_from_args(args, Mode.NETWORK, exclude=DERIVED)
    options.warn_deny_items_cut(base, "fedhh up")
    # The device processes run in the workdir: they are given the dataset's directory, absolute,
    # so a path relative to here still names it there (and they need not import it again).
    location = resolve_dataset_path(args.dataset).resolve()
    dataset = resolve_dataset(location)
    # (as fedhh simulate: a deny-list item no user holds whose other form, NFC or NFD or
    # without a leading byte-order mark, is the data's item; before, up said nothing of it)
    from fedhh.cli.simulate import warn_deny_twins

    warn_deny_twins(base.deny_items(), dataset.vocabulary, program="fedhh up")
    devices = min(args.devices or dataset.num_users, dataset.num_users)
    if args.devices and args.devices > dataset.num_users:
        print(f"fedhh up: --devices {args.devices:,}: {args.dataset} has {dataset.num_users:,} "
              "users; starting one device for each", file=sys.stderr, flush=True)
    has_items = (dataset.distinct_per_user()[:devices] > 0).tolist()
    browser_users: list[int] = []
    python_end = devices  # the Python devices' users are 0 .. python_end - 1
    if args.web_devices:
        from fedhh.cli.webdemo import choose_users

        browser_users, python_end = choose_users(has_items, args.web_devices)
    holding = int(sum(has_items))
    python_holding = holding - len(browser_users)
    if python_holding < MIN_DEVICES:
        raise ConfigError(f"--dataset {args.dataset}"
                          + (f" --devices {args.devices}" if args.devices else "")
                          + (f" --web-devices {args.web_devices}" if args.web_devices else "")
                          + f": {python_holding} of its users "
                          + ("holds" if python_holding == 1 else "hold") + " an item"
                          + (" beside the browser devices" if args.web_devices else "")
                          + f"; a round needs at least {MIN_DEVICES} devices (far more to hide "
                          "each report: the default Shakespeare fleet has 1,387)")
    processes = max(1, min(args.processes, python_end))
    # n_min counts the Python devices only: the run must not need the browser ones.
    min_devices = max(3, int(args.min_fraction * python_holding))
    config = replace(base, target_devices=holding, min_devices=min_devices).validate(
        Mode.NETWORK)
    refuse_shards(config)
    refuse_over_lifetime(config)
    per = -(-python_end // processes)
    starts = [i * per for i in range(processes) if i * per < python_end]
    hosts = {f"devices-{i}": range(lo, min(lo + per, python_end)) for i, lo in enumerate(starts)}
    counted = [user for user in range(python_end) if has_items[user]]  # (n_min's devices)
    # (a rerun's devices may have spent their lifetime budgets: said before anything starts)
    refused = (refuse_spent_lifetime(Path(args.workdir), hosts, counted, config)
               if args.workdir else set())
    target = TargetCheck(config)
    web = args.web or bool(args.web_devices)
    dist = None
    if args.web_devices:
        from fedhh.cli import webclient

        print("fedhh up: building the web device (clients/web)", flush=True)
        try:
            dist = webclient.build()  # before anything starts
        except webclient.BuildError as error:
            raise ConfigError(f"--web-devices: cannot build the web device (clients/web): "
                              f"{error}") from None
    codec = codec_shown(config.codec, given_text(args, "codec"))
    started = time.monotonic()
    # (entering the topology takes the workdir's lock: a refused rerun announces nothing)
    with LocalTopology(args.workdir, tls=not args.insecure) as topo, \
            contextlib.ExitStack() as stack:
        print(f"fedhh up: {python_holding} devices from {args.dataset} in {processes} processes"
              + (f", and {len(browser_users)} browser devices on a demo page" if browser_users
                 else "") + f"; items coded with {codec}", flush=True)
        demo = None
        if dist is not None:
            from fedhh.cli.webdemo import DemoPage
            from fedhh.rpc.serving import listener_context
            from fedhh.rpc.tls import TlsFiles

            tls = None if args.insecure else TlsFiles.from_dir(topo.workdir / "tls")
            # (the page binds 127.0.0.1 at a port of the OS's choice)
            demo = stack.enter_context(DemoPage(dist, listener_context(
                tls, "127.0.0.1:0", args.insecure, "the demo page")))
        web_flags = ["--web-listen", "127.0.0.1:0"] if web else []
        if demo is not None:
            web_flags += ["--web-origin", ",".join(demo.origins())]
        topo.start_aggregator(web_flags)
        scheme = "http" if args.insecure else "https"
        # Tasks name the aggregator's Connect port too, for the devices that speak only that.
        aggregator_web = (["--aggregator-web-url", f"{scheme}://{topo.web_address('aggregator')}"]
                          if web else [])
        topo.start_coordinator([*web_flags, *aggregator_web,
                                *(["--dashboard-port", "0"] if args.dashboard else []),
                                *(["--demo-url", demo.url] if demo is not None else [])])
        planned = target.refuse_if_unmet()  # (solved meanwhile: no device started yet)
        topo.refuse_moved_users(hosts)
        if target.round_eps is not None:
            refuse_unpaid_rounds(topo.workdir, hosts, [u for u in counted if u not in refused],
                                 min_devices, target.round_eps)
        weight_one = warn_past_run_codes(dataset, planned, devices, config, target.eps_local)
        extra = ["--min-cohort", str(min_devices)]
        extra += ["--seed", str(args.seed)] if args.seed is not None else []
        for i, lo in enumerate(starts):
            topo.start_devices(f"devices-{i}", str(location),
                               f"{lo}:{min(lo + per, python_end)}", extra,
                               connect=web and i == len(starts) - 1)
        topo.wait_for_devices()
        print(f"services up in {time.monotonic() - started:.1f} s (workdir {topo.workdir})",
              flush=True)
        if web:
            announce_web(topo, secure=not args.insecure, devices=python_end - starts[-1])
        if args.dashboard:
            announce_dashboard(topo, secure=not args.insecure)
        ca = None if args.insecure else topo.workdir / "tls" / "ca.pem"
        with AdminClient(topo.address("coordinator"), topo.token("admin"), ca) as admin:
            if demo is not None:
                enrolled = open_demo(demo, topo, admin, dataset, browser_users, min_devices,
                                     args.web_wait, secure=not args.insecure)
                config = replace(config, target_devices=python_holding + enrolled).validate(
                    Mode.NETWORK)
            narrator = Narrator(echo=demo.say if demo is not None else None)
            runs = admin.runs()
            for left in cancel_unfinished(admin, runs):
                narrator.tell(f"run {left}, left unfinished in {args.workdir} by an earlier "
                              "`fedhh up`, is cancelled (a round it resumed ends first): this "
                              "one runs a discovery of its own", indent=False)
            run_ = admin.start_run(to_proto(config), run_id=demo_run_id(runs))
            stored = from_proto(run_.config)  # completion rounds dropped if too few devices
            dropped = dropped_completions(config, stored, N_MIN_FLAGS)
            if dropped:
                narrator.tell(f"fedhh up: note: {dropped}", indent=False)
            from fedhh.cli.simulate import warn_deadline

            warn_deadline(stored, "fedhh up", Mode.NETWORK)  # (before, the list was cut silently)
            narrator.tell(f"run {run_.run_id}: eps_local {run_.eps_local:.3f} per round for "
                          f"(eps_agg {config.eps_agg}, delta {config.delta}) over up to "
                          f"{stored.total_rounds} rounds{completion_clause(stored)}",
                          indent=False)
            try:
                # (the page is told the released attempts as they come)
                final = admin.wait(run_.run_id, args.timeout, idle=True,
                                   on_change=narrator if demo is None
                                   else demo.following(narrator))
            except StateError as error:
                raise StateError(f"{error} (--timeout): the services are stopped mid-run; "
                                 + (f"its store and logs are kept in {args.workdir}"
                                    if args.workdir else "this machine may need a longer "
                                    "--timeout (the run's temporary folder is removed)")
                                 ) from None
            results = admin.results(run_.run_id)
        noise_made = held_by_no_device(dataset, devices, from_proto(final.config),
                                       results.heavy_hitters)
        _print_results(final, results, weight_one, noise_made)
        explain(final, results, sum(noise_made))
        if demo is not None:
            close_demo(demo, final, results)
        if args.dashboard or demo is not None:
            hold_until_interrupted("the dashboard" if demo is None else
                                   "the demo page" if not args.dashboard else
                                   "the dashboard and the demo page")
    print(f"shut down cleanly; total {time.monotonic() - started:.1f} s")
    return 0 if final.state == "done" else 1


def open_demo(demo: Any, topo: Any, admin: Any, dataset: Any, users: list[int],
              min_devices: int, wait_s: float, secure: bool) -> int:
    """Give the demo page its devices (a fresh one-time token each, their users' items),
    print its address, and wait up to ``wait_s`` for them to enrol; returns how many did."""
    tokens = admin.mint_tokens(len(users), label="fedhh up --web-devices")
    held = [dataset.user_items(user) for user in users]

    def port(name: str) -> int:
        return int(topo.web_address(name).rsplit(":", 1)[1])

    demo.configure(tokens=tokens, users=users,
                   items=[[dataset.vocabulary[i] for i in items.tolist()] for items, _ in held],
                   counts=[[int(c) for c in counts] for _, counts in held],
                   coordinator_port=port("coordinator"), aggregator_port=port("aggregator"),
                   min_cohort=min_devices)
    print(f"demo page ({len(users)} browser devices, users {', '.join(map(str, users))}): "
          f"{demo.url}"
          + (f" (its certificate, and the Connect ports', is signed by "
             f"{topo.workdir / 'tls' / 'ca.pem'}: trust it, or accept the browser's warning "
             "for 127.0.0.1 and localhost)" if secure else ""), flush=True)
    print(f"waiting up to {wait_s:.0f} s for the page's devices to enrol (open the page)",
          flush=True)
    enrolled = demo.wait_enrolled(len(users), wait_s)
    print(f"browser devices: {enrolled} of {len(users)} enrolled"
          + ("" if enrolled == len(users) else "; the run starts without the others (they may "
             "still join later rounds)"), flush=True)
    return enrolled


def _quoted_list(shown: list[str]) -> str:
    """Shown items (``printable``) as a list on one line, each quoted (an item may hold ", "),
    a quote inside one written ``\\x22``, as ``printable`` writes its escapes, and isolated
    (``page_isolated``: before, two right-to-left items side by side were listed in reverse,
    the quotes and comma between them taken into their direction). Before, the
    list was JSON, which doubled the backslash of every escape: ``\\u202eevil`` read
    ``\\\\u202eevil``, which by the escapes' rule is an item holding a backslash."""
    return "[" + ", ".join('"' + page_isolated(text.replace('"', "\\x22")) + '"'
                           for text in shown) + "]"


def close_demo(demo: Any, run: Any, results: Any) -> None:
    """The run's end on the page, and what each browser device did in the terminal."""
    from fedhh.cli.webdemo import summary, task_name

    demo.say(f"run {run.run_id}: {run.state}; eps_agg spent {run.eps_spent:.3f} over "
             f"{_released(run)}; heavy hitters: "
             + (_quoted_list(printable_rows([(h.item, h.truncated)
                                             for h in results.heavy_hitters]))
                if results.heavy_hitters else "none"))
    # The page posts a device's last round a moment after the coordinator released it; one
    # whose page stopped posting mid-round is told from the run's attempts.
    demo.follow(run)
    demo.wait_settled(SETTLE_S)
    attempts = {task_name(run.run_id, r.round, r.attempt): (r.state, r.contributors
                                                            or r.participants)
                for r in run.rounds}
    print("\nbrowser devices (as the page last reported them):")
    for line in summary(demo.devices(), attempts):
        print(f"  {line}")
    sys.stdout.flush()


def announce_dashboard(topo: Any, secure: bool) -> None:
    """The dashboard's address, and the `fedhh admin` line that reaches the coordinator while
    the stack stays up (before, its gRPC port was in the workdir's coordinator.ready.json
    alone, and the README's admin commands named the compose stack's)."""
    import shlex

    port = topo.services["coordinator"].ready["dashboard_port"]
    scheme = "https" if secure else "http"
    print(f"dashboard: {scheme}://127.0.0.1:{port}/ (sign in with the admin token in "
          f"{topo.workdir / 'admin.token'}"
          + (f"; its certificate is signed by {topo.workdir / 'tls' / 'ca.pem'}" if secure
             else "") + ")", flush=True)
    transport = ["--ca", str(topo.workdir / "tls" / "ca.pem")] if secure else ["--insecure"]
    line = shlex.join([*runnable_fedhh(), "admin", "--coordinator", topo.address("coordinator"),
                       *transport, "--token-file", str(topo.workdir / "admin.token"), "list"])
    print(f"admin: {line} (or status, results RUN: `fedhh admin --help`)", flush=True)


def runnable_fedhh() -> list[str]:
    """How another shell runs this fedhh: ``fedhh`` where that name on PATH is this
    environment's script, else the script's path (the README runs ``.venv/bin/fedhh`` and
    ``bootstrap.py`` the environment's Python, neither activating it), else this Python's
    ``-m fedhh.cli.main``. The interpreter's path is not resolved: a virtualenv's ``python``
    links to the system's, whose folder holds no fedhh."""
    import os
    import shutil

    script = Path(sys.executable).with_name("fedhh")
    if not script.is_file():
        return [sys.executable, "-m", "fedhh.cli.main"]
    found = shutil.which("fedhh")
    with contextlib.suppress(OSError):
        if found is not None and os.path.samefile(found, script):
            return ["fedhh"]
    return [str(script)]


def announce_web(topo: Any, secure: bool, devices: int) -> None:
    scheme = "https" if secure else "http"
    print(f"Connect ports (web devices): coordinator {scheme}://"
          f"{topo.web_address('coordinator')}, aggregator {scheme}://"
          f"{topo.web_address('aggregator')}; {devices} of the devices use them", flush=True)


def hold_until_interrupted(what: str = "the dashboard") -> None:
    """Keep the services (and so the dashboard or the demo page) up until Ctrl-C."""
    # (SIGTERM already means Ctrl-C here: ``run`` installed it for the whole command)
    forever = threading.Event()
    try:
        # Inside the try: a script that sends SIGINT once it reads this line could land it
        # before the try, and a run that had finished ended 130 as "left unfinished".
        print(f"\nThe stack stays up for {what}; press Ctrl-C to stop it.", flush=True)
        # A timed wait, because a process-directed SIGINT may land on one of gRPC's threads:
        # the handler then runs only when the main thread next returns to the interpreter,
        # which an untimed wait never does.
        while not forever.wait(0.5):
            pass
    except KeyboardInterrupt:
        print("stopping", flush=True)


def _eps(value: float) -> str:
    """A local epsilon to two decimals, or two significant digits below 0.005 (a tiny budget
    read "at eps_local 0.00")."""
    return f"{value:.2f}" if abs(value) >= 0.005 else f"{value:.2g}"


def _beyond_every_device(released: list[Any]) -> str:
    """What a threshold above the round's device count means: no item held by at most every
    device clears it, so what cleared it is noise (in every round, or in that one)."""
    noise_only = all(r.threshold > contributors(r) for r in released)
    return ("That is more than there are devices: no item's true count reaches it, so "
            + ("whatever this run found" if noise_only else "whatever that round found")
            + " cleared it by noise alone"
            + ". Give the run a larger --eps-agg (`fedhh privacy --eps-agg E --delta D "
            "--rounds T --devices N` tells the eps_local a target allows) or more devices.")


def held_by_no_device(dataset: Any, devices: int, config: RunConfig,
                      hitters: Any) -> list[bool]:
    """Whether each heavy hitter is an item whole (ended) that none of the run's ``devices``
    (the dataset's first users) holds: noise lifted it, and `fedhh up`, which hosts the data,
    can say so as `fedhh simulate` does (an operator's `fedhh admin results` cannot). Before,
    such a row (``apit'sw`` among 400 users' fruit) was listed as any other, a note below the
    list saying only that one "may be" noise. The items' codes are compared, as a round
    finds them."""
    import numpy as np

    from fedhh.codec import Codec

    whole = [at for at, h in enumerate(hitters) if h.ended and not h.truncated]
    if not whole or not devices:
        return [False] * len(hitters)
    codec = Codec.from_spec(config.codec, config.code_bits(Mode.NETWORK))
    held = np.unique(np.asarray(dataset.items[:int(dataset.indptr[devices])]))
    codes = codec.encode_many([dataset.vocabulary[i] for i in held.tolist()]).codes
    found = codec.encode_many([hitters[at].item for at in whole]).codes
    noise = set(np.asarray(whole)[~np.isin(found, codes)].tolist())
    return [at in noise for at in range(len(hitters))]


# Why an item many devices hold can be missing: a newcomer's 400 users holding 3 fruits each
# found apple and not banana, held by 27% of them against a threshold of 7.6%, and nothing said
# that a device reports one item a round (the paper's data selection, Section "Device Algorithm")
ONE_REPORT = ("Each device reports one of its items a round (one that extends a kept prefix; "
              "--selection says how it is drawn), so an item counts its holders' reports, not "
              "its holders: one held by 100 devices that hold 3 items each counts about 33.")


def explain(run: Any, results: Any, noise_made: int = 0) -> None:
    """Why the run ended where it did and why it found what it found (``noise_made``: how
    many listed items no device holds)."""
    from fedhh.privacy.accountant import allocation_offsets
    from fedhh.rpc.run_config import from_proto

    released = [r for r in run.rounds if r.state == "released"]
    config = from_proto(run.config)
    planned = config.total_rounds
    last = max(released, key=lambda r: r.round) if released else None
    if run.state == "done" and last is not None and len(released) < planned:
        why = (f"round {last.round} kept no prefix, so none was left to extend" if not last.kept
               else "every prefix kept reached its end, so no round was left to run")
        print(f"\nThe tree finished after {len(released)} of {planned} rounds: {why} "
              "(unused rounds are not charged).")
    if last is not None:
        n = contributors(last)
        share = last.threshold / n if n else 0.0
        weights = config.round_weights()
        eps = run.eps_local + (allocation_offsets(weights)[last.round - 1] if weights else 0.0)
        kind = (f"a completion round, at local epsilon {_eps(eps)} (the main rounds' "
                f"{_eps(run.eps_local)}: completion rounds carry a small share of the budget)"
                if last.round > config.rounds else f"at eps_local {_eps(eps)}")
        print(f"An item is found only if its estimated count clears the threshold: "
              f"{last.threshold:,.0f} of {n} devices ({share:.1%}) in round {last.round}, "
              f"{kind}. " + (_beyond_every_device(released) if n and last.threshold > n
                             else "With so few devices only the most common items stand out; "
                             "at the paper's scale (1.6 million devices, `fedhh simulate`) "
                             "the same privacy finds items held by a far smaller share. "
                             + ONE_REPORT))
        kept = sum(r.kept for r in released)
        # (a round that kept nothing has no false positives, whatever its tail at the last
        # threshold PruneHH tried)
        noise = sum(r.expected_false_positives for r in released if r.kept)
        if kept:
            marked = (f"; here, the data at hand, {noise_made} listed "
                      f"{'is' if noise_made == 1 else 'are'} held by no device, and marked so"
                      if noise_made else "")
            print(f"Noise alone is expected to lift about {noise:.1f} of the {kept} prefixes "
                  f"kept over the thresholds (PruneHH keeps these false positives at most "
                  f"gamma = {config.fp_ratio:g} of what it keeps; the table's "
                  f"exp-fp column), so an item in the list may be one of them{marked}.")


def _noted(hitter: Any) -> str:
    """A row's note after its round: a truncated row how much of its items it is
    (``prefix_words``: before, its … alone said it was cut, its items' ends never found); a
    row that stands for several cut prefixes showing the same text says so, and that its
    estimate is their sum (`fedhh simulate` said it; before, this list gave the sum as one
    prefix's count)."""
    from fedhh.codec.shown import cut_bytes, prefix_words

    cut = (f"; {prefix_words(hitter.bits, cut_bytes(hitter.item))}" if hitter.truncated
           else "")
    return cut + (f"; {hitter.note}" if hitter.note else "")


def _released(run: Any) -> str:
    # (an item that ends in the first round's segment takes one: before, "1 released rounds")
    return f"{run.rounds_released} released round{'' if run.rounds_released == 1 else 's'}"


def _print_results(run: Any, results: Any, weight_one: Callable[[], bool] | None = None,
                   noise_made: list[bool] | None = None) -> None:
    """Print ``run``'s rounds and ``results``, with the notes on its cut prefixes
    (``weight_one``: ``lost_in_completion_note``'s; ``noise_made``: ``held_by_no_device``'s,
    for each heavy hitter)."""
    print()
    print(f"run {run.run_id}: {run.state}" + (f" ({run.error})" if run.error else ""))
    print(f"privacy spent: eps_agg {run.eps_spent:.3f} of {run.config.eps_agg} at delta "
          f"{run.config.delta} over {_released(run)} "
          f"(eps_local {run.eps_local:.3f})")
    # (the two epsilons were named and never told apart: a newcomer's first question)
    print("(eps_local: what one device's report of a round can reveal of its data, "
          "randomized on the device; eps_agg: what the released sums, all the coordinator "
          "sees, reveal of any one device's data over the whole run, less, as each sum hides a "
          "report among the others'; smaller is more private: README, \"Privacy in one "
          "paragraph\", and docs/privacy.md)")
    print()
    cuts = any(r.cut for r in run.rounds)  # (a column only when a round cut something)
    # (threshold: the estimate an element had to clear, in devices; a completion round's is
    # many times a main round's, which is where long items are lost with few devices)
    headings = "round  attempt  state     devices  prefixes  s   domain   kept  exp-fp  found" \
        + ("  cut" if cuts else "") + "  threshold"
    print(headings)
    for r in run.rounds:
        devices = contributors(r) if r.state == "released" else r.participants
        # (a row with no reason, a released round's, ended in two spaces: rstrip)
        print((f"{r.round:5d}  {r.attempt:7d}  {r.state:8s}  {devices:7d}  "
               f"{r.prefixes:8d}  {r.segment_bits:2d}  {r.domain_size:7d}  {r.kept:5d}  "
               f"{f'{r.expected_false_positives:6.1f}' if r.kept else '     -'}  "
               f"{r.finished:5d}  " + (f"{r.cut:3d}  " if cuts else "")
               + (f"{r.threshold:9,.0f}  " if r.state == "released" and math.isfinite(
                   r.threshold) else "        -  ") + r.reason).rstrip())
    print(options.round_columns_legend(headings.split()))
    trimmed = run_trim_note(run)  # (before, kept prefixes left out went unsaid)
    if trimmed:
        print(f"\n{trimmed}.")
    print()
    if run.state != "done":
        # (a run that failed or was cancelled: what its released rounds found so far; before,
        # the list read as a finished run's, as `fedhh admin results` said already)
        from fedhh.cli.admin import unfinished_results

        print(f"fedhh up: note: {unfinished_results(run)}")
    count = len(results.heavy_hitters)
    print(f"{count} heavy hitter{'' if count == 1 else 's'} (by round, then estimate; estimates "
          "of different rounds are not comparable, `fedhh simulate --help` says why):")
    # (one list's rows read against the other's: a cut prefix сос… beside cocoa; an item or
    # prefix wider than ITEM_COLUMNS_MAX cut to it: before, it pushed its own row's count and
    # round on, past the others', by thousands of columns for a long URL)
    from fedhh.cli.simulate import column_cut_note

    fitted = fitted_rows([*((h.item, h.truncated) for h in results.heavy_hitters),
                          *((h.item, True) for h in results.cut_prefixes)], ITEM_COLUMNS_MAX)
    rows, cut_rows = fitted[:len(results.heavy_hitters)], fitted[len(results.heavy_hitters):]
    every = printable_rows(fitted)
    listed, cut = every[:len(rows)], every[len(rows):]
    whole = f"`fedhh admin ... results {printable(run.run_id)}`"
    width = min(ITEM_COLUMNS_MAX, max([ITEM_COLUMNS_MIN, *map(columns, listed + cut)]))
    from fedhh.cli.simulate import FALSE_POSITIVE

    noise_made = noise_made or [False] * len(listed)
    for i, (h, item, noise) in enumerate(zip(results.heavy_hitters, listed, noise_made,
                                             strict=True), start=1):
        print(f"  {i:3d}. {ljust(item, width)}  estimated count {h.estimate:8.1f}  "
              f"(round {h.round}{f'; {FALSE_POSITIVE}' if noise else ''}{_noted(h)})")
    cut_note = column_cut_note(results.heavy_hitters, rows, ITEM_COLUMNS_MAX, whole)
    if cut_note:
        print(cut_note)
    if results.cut_prefixes:
        # (not on the parse path: they load numpy)
        from fedhh.cli.simulate import cut_cause, cut_heading, lost_in_completion_note
        from fedhh.config import Mode
        from fedhh.rpc.run_config import from_proto
        from fedhh.server.causes import completion_budget_note, ran_out_cause

        stored = from_proto(run.config)
        code_bits = stored.code_bits(Mode.NETWORK)
        # (the planner asked, as `fedhh admin results` asks it: a console can wait the solve,
        # up to 1.7 s, that the coordinator's event loop cannot)
        ran_out = ran_out_cause(stored, run.eps_local, planner=True)
        last = max((r.round for r in run.rounds if r.state == "released"), default=0)
        print(cut_heading(len(results.cut_prefixes)))
        causes = [cut_cause(h.round, h.bits, code_bits, last, ran_out)
                  for h in results.cut_prefixes]
        for h, item, cause in zip(results.cut_prefixes, cut, causes, strict=True):
            print(f"       {ljust(item, width)}  estimated count "
                  f"{h.estimate:8.1f}  (round {h.round}; {cause}{_noted(h)})")
        cut_note = column_cut_note(results.cut_prefixes, cut_rows, ITEM_COLUMNS_MAX, whole)
        if cut_note:
            print(cut_note)
        # (as fedhh simulate says it: before, a networked run of URLs was not told either)
        note = lost_in_completion_note(
            causes, [(h.round, h.truncated) for h in results.heavy_hitters], stored.rounds,
            stored.completion_weight,
            {r.round: r.threshold for r in run.rounds if r.state == "released"}, weight_one)
        if note:
            print(note)
        budget = completion_budget_note(stored, run.eps_local, causes, planner=True)
        if budget:
            print(budget)
    every_hit = [*results.heavy_hitters, *results.cut_prefixes]
    widths = sorted({h.bits for h in every_hit if h.truncated})
    if widths:
        # (the cut rows' marks alone: a whole item's own ⟨+ is none)
        marks = cut_marks_note(text for (text, _), h in zip(fitted, every_hit, strict=True)
                               if h.truncated)
        print(f"(an item ending in … is a prefix of {'/'.join(map(str, widths))} bits: it "
              f"stands for every item starting so{marks}"
              "; see --max-bits and --completion-rounds)")
    sys.stdout.flush()
