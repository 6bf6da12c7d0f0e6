"""`fedhh experiments`: the paper's studies at full scale, written up as a report folder.

One subcommand per study, and `all`:

  segmentation  1. adaptive versus uniform segments (single item)
  dimension     2. dimension limits 20M, 10M, 1M and 1M with one extra round (single item)
  fp-ratio      3. false-positive ratio gamma in {0.5, 1, 1.5, 2} (single item)
  sampling      4. device sampling rates 0.1 to 1.0 and the local epsilon each implies
  selection     5. weighted and uniform selection, with and without prefix-list conditioning
  deny-list     6. one run, warm start, two runs, and the warm start list alone
  comparison    7. OptPrefixTree against TrieHH, TrieHH++, central Laplace and Gaussian (5-bit)
  rounds        8. T = 3 to 12 rounds (multiple items, 5-bit)
  codebooks     9. English letters, bytes and trained codebooks (default dataset and German)
  pi-rappor    10. one-hot + randomized response against PI-RAPPOR (found, bytes, decode time)
  accounting   11. the accountant of the released sums against the shuffle bound (side by side)

The utility levers beyond the paper (docs/utility.md), each on the populations it names
(development, the default dataset, held out), `utility-all` for all of them:

  segment-plans      12. planned segment schedules (lookahead, spread) against greedy
  leftover-rounds    13. rounds the tree finishes without (5-bit, T = 12): passes, spread
  finished-target    14. a false-positive target of its own for finished items
  threshold-weights  15. thresholds weighted by the parent's evidence
  round-budget       16. unequal budget splits over the rounds
  selection-hint     17. selection weighted by the prefix's estimate
  possible-elements  18. the dimension limit counts the possible elements only
  consistency        19. constrained inference over the tree (single item)
  utility            20. every lever alone and combined, on every population
  small-regime       21. candidates for the small-population regime (development only)
  round-items        22. several items per report (swept on development only)
  item-kinds         23. items of every kind: codebooks and completion rounds (docs/codecs.md)

Every configuration runs once per seed (--seeds N: seeds 0..N-1) and is stored in a result
store (--store, default <cache>/experiments); a finished run is never recomputed, so an
interrupted suite resumes where it stopped and a finished one only rewrites the report. The
report folder (--out) holds README.md (claims summary first), PNG figures, CSV/JSON of every
number and the exact `fedhh simulate` command of every run.

By default the runs are computed one after the other in this process. They are independent, so
they can be Dask tasks instead: --workers N starts a Dask LocalCluster of N worker processes on
this machine (--workers alone: one per core, as many as the memory allows), --scheduler ADDRESS
sends them to an existing cluster (`dask scheduler` with `dask worker --nthreads 1
--memory-limit 4GiB` on each machine). Each worker runs one run at a time; one run over the
1.6M-user default dataset peaks at 0.8-1.5 GiB resident, and a worker may use 4 GiB
(--worker-memory; Dask restarts a worker past it and its run goes to another). Each machine
opens the dataset from its own cache (FEDHH_CACHE: a built-in dataset is built there once); only
settings and results travel. This process alone writes the result store, as each run finishes.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import logging
import re
import shlex
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from fedhh.cli import options
from fedhh.errors import ConfigError, FedhhError
from fedhh.experiments.cluster import (
    CONNECT_S,
    RUN_MEMORY_GIB,
    ClusterOptions,
    check_scheduler,
    local_workers,
)
from fedhh.experiments.studies import STUDIES, STUDY_NAMES

if TYPE_CHECKING:
    from fedhh.experiments.runner import PlannedRun, ProgressCallback, Suite
    from fedhh.experiments.store import RunRecord

DEFAULT_DATASET = "synthetic-reddit"
DEFAULT_OUT = "experiments-report"
DEFAULT_SEEDS = 3


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "experiments", help="run the paper's studies and write a report",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dataset", default=DEFAULT_DATASET, metavar="PATH_OR_NAME",
                        help=f"dataset name or path (default {DEFAULT_DATASET})")
    common.add_argument("--out", default=DEFAULT_OUT, metavar="DIR",
                        help=f"report folder (default {DEFAULT_OUT})")
    common.add_argument("--seeds", "--repeats", dest="seeds", type=options.positive_int,
                        default=DEFAULT_SEEDS, metavar="N",
                        help=f"repeat every configuration with seeds 0..N-1 (default "
                             f"{DEFAULT_SEEDS})")
    common.add_argument("--eps-agg", type=options.positive_float, default=1.0,
                        help="aggregate epsilon of every run (default 1)")
    common.add_argument("--delta", type=options.open_unit, default=1e-6,
                        help="aggregate delta (default 1e-6)")
    common.add_argument("--store", metavar="DIR", default=None,
                        help="result store (default <cache>/experiments)")
    common.add_argument("--dry-run", action="store_true",
                        help="list the runs and whether they are stored; run nothing, build "
                             "no dataset (a run on a dataset not built yet is listed as "
                             "unknown: every stored result is keyed by its dataset's "
                             "identity)")
    common.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    cluster = common.add_argument_group(
        "Dask", "compute the runs as Dask tasks (default: one after the other, here); this "
        "process stores each result as it comes back")
    cluster.add_argument("--workers", type=options.positive_int, nargs="?", const=0, default=None,
                       metavar="N",
                       help="a Dask LocalCluster of N worker processes on this machine, one "
                            "run at a time each (N left out: one per core, as many as the "
                            "memory allows at --worker-memory each)")
    cluster.add_argument("--scheduler", metavar="ADDRESS", default=None, type=scheduler_address,
                       help="an existing Dask scheduler, e.g. tcp://10.0.0.5:8786; start its "
                            "workers with `dask worker ADDRESS --nthreads 1 --memory-limit "
                            "4GiB`, fedhh installed and the dataset reachable by the same name "
                            "or path on each machine")
    cluster.add_argument("--worker-memory", type=options.positive_float,
                         default=None, metavar="GIB",
                         help=f"with --workers: memory limit of each LocalCluster worker "
                              f"(default {RUN_MEMORY_GIB:g} GiB: one run over the 1.6M-user "
                              "default dataset peaks at 0.8-1.5 GiB; at least 0.5 GiB)")
    sub = p.add_subparsers(dest="study", required=True, metavar="STUDY")
    titles = {s.name: f"{s.number}. {s.title}" for s in STUDIES}
    groups = {"all": "The paper's studies (1-9), one report.",
              "utility-all": "The utility levers' studies (12-23), one report."}
    for name in (*STUDY_NAMES, *groups):
        sp = sub.add_parser(name, parents=[common], help=titles.get(name, groups.get(name)),
                            description=titles.get(name, groups.get(name)))
        sp.set_defaults(handler=run)


_SCHEDULER = re.compile(r"((tcp|tls)://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+):[0-9]{1,5}",
                        re.IGNORECASE)


def scheduler_address(text: str) -> str:
    """A Dask scheduler's address: [tcp:// or tls://]HOST:PORT, its scheme in lower case (a
    scheme is case-insensitive, RFC 3986 section 3.1, but Dask looks up 'TCP' as given)."""
    if not _SCHEDULER.fullmatch(text) or not 0 < int(text.rsplit(":", 1)[1]) < 65536:
        scheme = text.partition("://")[0].lower() if "://" in text else ""
        raise argparse.ArgumentTypeError(
            f"a scheduler is [tcp://]HOST:PORT (or tls://HOST:PORT), e.g. tcp://10.0.0.5:8786, "
            f"got {text!r}" + _SCHEME_HINTS.get(scheme, ""))
    scheme, sep, rest = text.partition("://")
    return f"{scheme.lower()}{sep}{rest}" if sep else text


# (the dashboard's http:// link is the one address `dask scheduler` prints as a link)
_SCHEME_HINTS = {
    **dict.fromkeys(("http", "https"), ": that is a web page (a scheduler's dashboard?); give "
                    "the address its log prints as 'Scheduler at:'"),
    **dict.fromkeys(("ws", "wss", "ucx", "inproc"), ": fedhh connects over tcp:// or tls:// "
                    "only; start the scheduler with --protocol tcp"),
}


def suite_command(args: argparse.Namespace) -> str:
    """The canonical command line of an invocation (recorded in the report)."""
    argv = ["fedhh", "experiments", args.study, "--dataset", args.dataset, "--out", args.out,
            "--seeds", str(args.seeds), "--eps-agg", f"{args.eps_agg:g}",
            "--delta", f"{args.delta:g}"]
    if args.store:
        argv += ["--store", args.store]
    return shlex.join(argv)


def run_on_dask(cluster: ClusterOptions, suite: Suite, missing: list[PlannedRun],
                records: dict[str, RunRecord], progress: ProgressCallback, verbose: bool,
                bar: Any) -> str:
    """Compute the ``missing`` runs on Dask, adding them to ``records``; the workers in words."""
    import distributed  # noqa: F401 - configures its loggers on import, before the next line

    from fedhh.experiments.cluster import (
        WORKERS_WAIT_S,
        await_workers,
        connect,
        describe,
        execute,
    )

    # distributed logs every connection at INFO on a handler of its own; -v keeps them.
    logger = logging.getLogger("distributed")
    logger.setLevel(logging.DEBUG if verbose else logging.WARNING)
    with _above_the_bar(bar, [logger]), connect(cluster, _above_the_bar_line) as client:
        if cluster.scheduler is not None:
            await_workers(client, cluster.scheduler, WORKERS_WAIT_S, _above_the_bar_line)
        workers = describe(client)
        if bar is not None:
            bar.write(f"experiments: {workers}", file=sys.stderr)
        records.update(execute(suite, missing, client, progress, _above_the_bar_line))
    return workers


def _above_the_bar_line(line: str) -> None:
    """A line on stderr above the progress bar, if any (and with --quiet too: it says why
    nothing happens)."""
    from tqdm import tqdm

    tqdm.write(f"experiments: {line}", file=sys.stderr)


@contextlib.contextmanager
def _above_the_bar(bar: Any, loggers: list[logging.Logger]) -> Iterator[None]:
    """The loggers' lines written above the progress bar, each on a line of its own (written
    to stderr as they are, a warning would continue the bar's line)."""
    if bar is None:
        yield
        return
    from tqdm.contrib.logging import logging_redirect_tqdm

    with logging_redirect_tqdm(loggers):
        yield


@contextlib.contextmanager
def _progress_bar(total: int, quiet: bool) -> Iterator[Any]:
    """A progress bar of ``total`` rounds on stderr (None if ``quiet``), closed on the way out
    however the suite ends, so that a line after it ("interrupted", an error) starts a line
    of its own; log lines meanwhile go above it."""
    if quiet:
        yield None
        return
    from tqdm import tqdm

    with tqdm(total=total, desc="experiments", unit="round", file=sys.stderr,
              dynamic_ncols=True) as bar, _above_the_bar(bar, [logging.root]):
        yield bar


def list_runs(suite: Suite, plan: list[PlannedRun]) -> None:
    """A dry run's listing: each run, stored or not, and its command. Runs on a dataset not
    built yet are "unknown" (``Suite.identity_of``): building it is the run's work, not the
    listing's."""
    known = [r for r in plan if r.dataset not in suite.unbuilt]
    # Counted as the run counts them: an entry the store cannot read is run again.
    stored, _ = suite.load_stored(known)
    for r in plan:
        state = ("unknown" if r.dataset in suite.unbuilt
                 else "stored " if r.key in stored else "pending")
        print(f"{state}  {r.study:12s}  {r.label}  seed {r.seed}\n         {r.command}")
    summary = f"{len(plan)} runs, {len(stored)} stored, {len(known) - len(stored)} to run"
    if suite.unbuilt:
        summary += (f", {len(plan) - len(known)} unknown: on datasets not built yet "
                    f"({', '.join(suite.unbuilt)}; the run builds them, and only then can "
                    "their stored runs be told)")
    print(summary)


def _compute(args: argparse.Namespace, cluster: ClusterOptions, suite: Suite,
             plan: list[PlannedRun]) -> tuple[dict[str, RunRecord], str]:
    """Every run of ``plan``, stored or computed (here or on Dask); the workers in words."""
    from fedhh.experiments.runner import ProgressEvent

    with _progress_bar(sum(r.total_rounds for r in plan), args.quiet) as bar:

        def progress(event: ProgressEvent) -> None:
            if bar is None:
                return
            if event.kind in ("started", "done"):
                state = "" if event.kind == "started" else "done "
                bar.set_postfix_str(f"{state}{event.run.study}: {event.run.label}, "
                                    f"seed {event.run.seed}")
            bar.update(event.rounds)

        workers = "serial"
        if cluster.distributed:
            # A finished suite only rewrites the report: it needs no cluster.
            records, missing = suite.load_stored(plan, progress)
            workers = "none (every run was stored)"
            if missing:
                workers = run_on_dask(cluster, suite, missing, records, progress,
                                      args.verbose, bar)
        else:
            records = suite.execute(plan, progress)
    return records, workers


def code_of(records: dict[str, RunRecord]) -> dict[str, Any]:
    """The fedhh code of this invocation and of the runs the report uses: how many each digest
    computed ("unrecorded": stored before runs named their code). A stored run is reused
    whatever code stored it, so a report over an older store may hold runs of other code."""
    from collections import Counter

    from fedhh.experiments.code import code_identity

    counts = Counter(str(r.data.get("code", {}).get("digest") or "unrecorded")
                     for r in records.values())
    return {**code_identity(), "runs": dict(sorted(counts.items()))}


def run(args: argparse.Namespace) -> int:
    from fedhh.data.registry import cache_root
    from fedhh.experiments.populations import absolute, built
    from fedhh.experiments.report import check_report_folder, study_results, write_report
    from fedhh.experiments.runner import Suite, result_records
    from fedhh.experiments.spec import SuiteSettings
    from fedhh.experiments.store import ResultStore, StoreUnwritable, os_reason
    from fedhh.experiments.studies import PAPER_GROUP, UTILITY_GROUP, get_study, group_studies

    started = time.perf_counter()
    options.check_output_dir("--out", args.out)
    options.check_output_dir("--store", args.store)
    if args.worker_memory is not None and args.workers is None:
        # (it was ignored: the runs went one after the other here, or to the scheduler's
        # workers, whose limit is their own)
        raise ConfigError(
            "--worker-memory sets the memory of --workers' LocalCluster workers; "
            + ("a scheduler's workers have the limit they were started with (`dask worker "
               "ADDRESS --nthreads 1 --memory-limit 4GiB`)" if args.scheduler is not None
               else "without --workers the runs go one after the other in this process")
            + ": drop it, or add --workers")
    memory = RUN_MEMORY_GIB if args.worker_memory is None else args.worker_memory
    cluster = ClusterOptions(args.workers, args.scheduler, memory)
    if args.workers is not None:
        local_workers(cluster)  # refuses more workers than the memory holds, before any work
    if args.study in ("all", "utility-all"):
        studies = group_studies(PAPER_GROUP if args.study == "all" else UTILITY_GROUP)
    else:
        studies = [get_study(args.study)]
    if not args.dry_run:  # (before the dataset is built or hashed; a dry run writes no report)
        check_report_folder(args.out, [s.name for s in studies])
    seeds = list(range(args.seeds))
    store = ResultStore(args.store or cache_root() / "experiments")
    # A worker resolves a relative path in its own directory, not in this one.
    dataset = absolute(args.dataset) if cluster.distributed else args.dataset
    if cluster.scheduler is not None and not args.dry_run and not built(dataset):
        # The scheduler is asked before the dataset is built, not after: a wrong or unreachable
        # address was told once the build was done (over 10 minutes of silence for the default
        # dataset). Built, the dataset is opened first, so that a suite the store holds whole
        # needs no scheduler.
        check_scheduler(cluster.scheduler, CONNECT_S, _above_the_bar_line)
    suite = Suite(SuiteSettings(dataset, args.eps_agg, args.delta), store, listing=args.dry_run,
                  progress=not args.quiet)
    plan = suite.plan(studies, seeds)
    if args.dry_run:
        list_runs(suite, plan)
        return 0

    try:
        records, workers = _compute(args, cluster, suite, plan)
    except KeyboardInterrupt:
        # Ctrl-C (or SIGTERM) said only "interrupted": nothing told that what finished is
        # kept, where, and that the same command picks up from there.
        stored = suite.computed + suite.reused
        if stored:  # (with nothing stored yet there is nothing kept to tell of)
            sys.stderr.write(
                f"fedhh experiments {args.study}: {stored} of {len(plan)} runs are stored in "
                f"{store.root} ({suite.computed} computed by this invocation); the same command "
                f"computes the other {len(plan) - stored} and writes the report\n")
        raise
    except StoreUnwritable as error:
        stored = suite.computed + suite.reused
        raise StoreUnwritable(
            f"{error}; {stored} of the {len(plan)} runs are stored there: once it can be "
            f"written (space freed on its disk), the same command computes the other "
            f"{len(plan) - stored} and writes the report") from error
    invocation = time.perf_counter() - started
    results = [study_results(s, seeds, result_records(s, suite, seeds, records),
                             suite.dataset.num_users) for s in studies]
    meta = {
        "command": suite_command(args),
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "settings": {"dataset": args.dataset, "eps_agg": args.eps_agg, "delta": args.delta},
        "seeds": seeds,
        "studies": [s.name for s in studies],
        "dataset": suite.identity,
        "code": code_of(records),
        "timings": {
            "invocation_s": invocation,
            "runs": len(plan),
            "computed": suite.computed,
            "reused": suite.reused,
            "workers": workers,
            "runs_s": sum(float(r.data.get("timings", {}).get("wall_s", 0.0))
                          for r in records.values()),
        },
    }
    kept = (f"its {len(plan)} runs are stored in {store.root}, so once {args.out} can be "
            "written (or with another --out) the same command only writes the report")
    try:
        report = write_report(args.out, results, meta)
    except OSError as error:
        # (a full disk named nothing: "No space left on device" alone, after every run was
        # stored, and nothing said that the runs were kept)
        raise FedhhError(f"cannot write the report in {args.out}: {os_reason(error)}; "
                         f"{kept}") from error
    except ConfigError as error:  # (the folder written by another program since its check)
        raise ConfigError(f"{error}; {kept}") from error
    if not args.quiet:
        width = max((len(c.verdict) for c in report.claims), default=0)
        for c in report.claims:
            print(f"{c.verdict:<{width}}  [{c.study}] {c.claim}: ours {c.ours}, paper {c.paper}")
        print(f"\n{len(plan)} runs ({suite.computed} computed, {suite.reused} reused) in "
              f"{invocation / 60:.1f} min; report: {report.path}")
    return 0
