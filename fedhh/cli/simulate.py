"""`fedhh simulate`: a whole discovery over a simulated population, exactly.

Prints a per-round progress bar and a summary; ``--json PATH`` writes machine-readable results
with the keys ``heavy_hitters`` (list of {"item", "estimate", "round"}), ``deny_list``,
``metrics``, ``rounds`` (per-round diagnostics), ``privacy``, ``config``, ``dataset`` and
``timings``; ``--plot PATH`` draws the paper's marginal discovered-frequency plot.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from fedhh.algorithms import ALGORITHMS, PrivacyTarget, build_algorithm
from fedhh.cli import options
from fedhh.codec import CODEC_NAMES, DEFAULT_CODEBOOK, codec_spec
from fedhh.mechanisms import TailKind
from fedhh.prefixtree import RoundReport, TreeConfig
from fedhh.privacy import PrivacyLedger
from fedhh.selection import Selection, SelectionRule
from fedhh.simulation.runner import SimulationConfig, SimulationResult, config_summary, simulate

DEFAULT_DATASET = "synthetic-reddit"


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "simulate", help="run a discovery over a simulated population",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_run_options(p)
    p.add_argument("--json", metavar="PATH", help="write the results as JSON")
    p.add_argument("--plot", metavar="PATH", help="write the marginal discovered-frequency plot")
    p.add_argument("--top", type=options.non_negative_int, default=20,
                   help="heavy hitters to list on the terminal (default 20)")
    p.add_argument("--quiet", action="store_true", help="no progress bar, no summary")
    p.set_defaults(handler=run)


def add_run_options(p: argparse.ArgumentParser) -> None:
    """Every knob of a simulated run (shared with the experiments)."""
    p.add_argument("--dataset", default=DEFAULT_DATASET, metavar="PATH_OR_NAME",
                   help=f"dataset name or path (default {DEFAULT_DATASET})")
    p.add_argument("--algorithm", choices=ALGORITHMS, default="optprefixtree")
    p.add_argument("--eps-agg", type=options.positive_float, default=1.0,
                   help="aggregate epsilon of the whole run (default 1)")
    p.add_argument("--delta", type=options.open_unit, default=1e-6,
                   help="aggregate delta (default 1e-6)")
    p.add_argument("--eps-local", type=options.positive_float, default=None,
                   help="explicit per-round local epsilon (overrides the accountant)")
    p.add_argument("--privacy-method", default=None,
                   help="accountant method for the local epsilon (see `fedhh privacy --help`)")
    p.add_argument("--rounds", type=options.positive_int, default=4)
    p.add_argument("--dim-limit", type=options.positive_int, default=10_000_000,
                   help="bound P on a round's domain size (default 1e7)")
    p.add_argument("--fp-ratio", type=options.positive_float, default=0.5,
                   help="target false-positive ratio gamma (default 0.5)")
    p.add_argument("--fp-ratio-of", choices=("kept", "discoveries"), default="kept",
                   help="gamma relative to the kept elements (the paper's Algorithm as written; "
                        "gamma < 1) or to the expected true discoveries (the paper's appendix "
                        "figures for gamma up to 2)")
    p.add_argument("--tau0", type=options.non_negative_float, default=1.0,
                   help="initial threshold multiplier (default 1)")
    p.add_argument("--eta", type=options.open_unit, default=0.5,
                   help="PruneHH step: E <- eta * E (default 0.5)")
    p.add_argument("--tail", choices=[t.value for t in TailKind], default="binomial",
                   help="law of a zero-count estimate: exact binomial (default) or the paper's "
                        "Gaussian approximation")
    p.add_argument("--segment-bits", type=options.positive_int, default=None,
                   help="fixed segment length (default: adaptive segmentation)")
    p.add_argument("--selection", choices=[r.value for r in SelectionRule], default="uniform")
    p.add_argument("--no-prefix-conditioning", action="store_true",
                   help="select among all items, not only those on the prefix list")
    p.add_argument("--deny-list", metavar="PATH", help="file of items to exclude, one per line")
    p.add_argument("--warm-start", action="store_true",
                   help="deny-list the built-in public warm-start list")
    p.add_argument("--two-runs", action="store_true",
                   help="run twice, the first run's output being the second's deny list "
                        "(the budget covers both)")
    p.add_argument("--encoding", type=_codec_option, default=DEFAULT_CODEBOOK,
                   metavar="CODEBOOK",
                   help=f"item codebook: {', '.join(CODEC_NAMES)} (default {DEFAULT_CODEBOOK}), "
                        "or a codebook JSON file (docs/codecs.md)")
    p.add_argument("--max-bits", type=options.positive_int, default=60,
                   help="bits per encoded item r (default 60)")
    p.add_argument("--sampling-rate", type=options.probability, default=None,
                   help="device sampling rate (OptPrefixTree: Poisson q, default 1; TrieHH and "
                        "TrieHH++: overrides the calibrated rate)")
    p.add_argument("--theta", type=options.positive_int, default=10,
                   help="TrieHH/TrieHH++ vote threshold (default 10)")
    p.add_argument("--noise-scale", type=options.positive_float, default=None,
                   help="central baselines: explicit noise scale (overrides calibration)")
    p.add_argument("--single-item", action="store_true",
                   help="single-data-point mode: each device keeps one item for every round")
    p.add_argument("--per-device", action="store_true",
                   help="randomize every report instead of drawing the sum exactly (slow)")
    p.add_argument("--seed", type=options.non_negative_int, default=0)


def _codec_option(text: str) -> str:
    from fedhh.errors import ConfigError

    try:
        return codec_spec(text)
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def build_config(
    args: argparse.Namespace, num_devices: int
) -> tuple[SimulationConfig, dict, PrivacyLedger | None]:
    """The simulation config, the privacy calibration and (OptPrefixTree with a privacy target)
    the ledger that will record every round's spend."""
    from fedhh.data.wordlists import load_item_list, warm_start_list

    deny: list[str] = []
    if args.deny_list:
        deny.extend(load_item_list(args.deny_list))
    if args.warm_start:
        deny.extend(warm_start_list())
    runs = 2 if args.two_runs else 1
    choice = build_algorithm(
        args.algorithm, args.rounds * runs, num_devices,
        PrivacyTarget(args.eps_agg, args.delta, args.privacy_method),
        eps_local=args.eps_local, sampling_rate=args.sampling_rate, theta=args.theta,
        noise_scale=args.noise_scale, tail=TailKind(args.tail),
    )
    config = SimulationConfig(
        tree=TreeConfig(rounds=args.rounds, dim_limit=args.dim_limit, fp_ratio=args.fp_ratio,
                        tau0=args.tau0, eta=args.eta, segment_bits=args.segment_bits,
                        fp_ratio_of=args.fp_ratio_of),
        mechanism=choice.mechanism,
        encoding=args.encoding,
        max_bits=args.max_bits,
        selection=Selection(SelectionRule(args.selection), not args.no_prefix_conditioning),
        participation=choice.participation,
        single_item=args.single_item,
        deny_list=tuple(deny),
        runs=runs,
        seed=args.seed,
        per_device=args.per_device,
    )
    config.validate()
    privacy = {"eps_agg": args.eps_agg, "delta": args.delta, "charged_rounds": args.rounds * runs,
               **choice.privacy}
    ledger = None
    if args.algorithm == "optprefixtree" and args.eps_local is None:
        q = config.participation.rate
        ledger = PrivacyLedger.open(
            args.eps_agg, args.delta, args.rounds * runs,
            n_min=num_devices if q >= 1 else max(2, round(q * num_devices)),
            sampling_rate=q, eps_local=choice.privacy["eps_local"],
            **({"method": args.privacy_method} if args.privacy_method else {}),
        )
    return config, privacy, ledger


def run(args: argparse.Namespace) -> int:
    from fedhh.data.registry import resolve_dataset
    from fedhh.data.truth import ground_truth

    dataset = resolve_dataset(args.dataset)
    config, privacy, ledger = build_config(args, dataset.num_users)
    truth = None if config.single_item else ground_truth(dataset)
    bar = None
    if not args.quiet:
        from tqdm import tqdm

        bar = tqdm(total=args.rounds * config.runs, desc="rounds", unit="round", file=sys.stderr)

    def progress(run_index: int, round_index: int, report: RoundReport) -> None:
        if bar is not None:
            bar.set_postfix(run=run_index, kept=report.kept, found=report.finished,
                            next_s=report.next_segment_bits)
            bar.update(1)

    result = simulate(dataset, config, truth, progress, ledger)
    if bar is not None:
        bar.update(bar.total - bar.n)
        bar.close()
    payload = result_payload(result, config, privacy, dataset.summary())
    if args.json:
        Path(args.json).write_text(json.dumps(payload, indent=2, default=_jsonable) + "\n")
    if args.plot:
        write_plot(result, config, args.plot)
    if not args.quiet:
        print_summary(payload, args.top)
    return 0


def write_plot(result: SimulationResult, config: SimulationConfig, path: str) -> None:
    from fedhh.errors import ConfigError
    from fedhh.plot import plot_marginal

    if result.truth is None:
        raise ConfigError("--plot needs the dataset's ground truth")
    plot_marginal([(config_label(config), result.output_codes)], result.truth, path)


def config_label(config: SimulationConfig) -> str:
    return {"LocalRandomizer": "OptPrefixTree", "VoteThreshold": "TrieHH",
            "CentralNoise": "central DP"}.get(type(config.mechanism).__name__, "run")


def result_payload(result: SimulationResult, config: SimulationConfig, privacy: dict,
                   dataset_summary: dict) -> dict[str, Any]:
    payload = result.to_dict()
    payload["privacy"] = privacy
    payload["config"] = config_summary(config)
    payload["dataset"] = dataset_summary
    return payload


def _jsonable(value: Any) -> Any:
    if hasattr(value, "item"):
        return value.item()
    if hasattr(value, "value"):
        return value.value
    return str(value)


def print_summary(payload: dict[str, Any], top: int) -> None:
    ds = payload["dataset"]
    print(f"dataset {ds['name']}: {ds['users']:,} users, {ds['vocabulary']:,} distinct items")
    privacy = payload["privacy"]
    shown = {k: v for k, v in privacy.items() if isinstance(v, int | float | str)}
    print("privacy: " + ", ".join(f"{k}={_fmt(v)}" for k, v in shown.items()))
    print()
    header = ("round", "s", "prefixes", "domain", "n", "tau", "kept", "found", "next s",
              "E[FP]", "FP")
    rows = [header]
    for r in payload["rounds"]:
        rows.append((
            f"{r['extra'].get('run', 1)}.{r['round']}", r["segment_bits"], r["prefixes"],
            r["domain_size"], r["participants"], _fmt(r["tau"]), r["kept"], r["finished"],
            r["next_segment_bits"] if r["next_segment_bits"] is not None else "-",
            _fmt(r["expected_false_positives"]),
            r["actual_false_positives"] if r["actual_false_positives"] is not None else "-",
        ))
    _table(rows)
    hitters = payload["heavy_hitters"]
    print(f"\n{len(hitters)} heavy hitters discovered"
          + (f" (+{len(payload['deny_list'])} from the deny list)" if payload["deny_list"] else ""))
    if top:
        _table([("rank", "item", "estimate", "round")] + [
            (i + 1, h["item"] + (f"  ({h['note']})" if h.get("note") else ""),
             f"{h['estimate']:,.0f}", h["round"])
            for i, h in enumerate(hitters[:top])
        ])
        if any(h["truncated"] for h in hitters[:top]):
            print(f"(an item ending in … was truncated at {payload['config']['max_bits']} bits: "
                  "it stands for every item starting with those bits; see --max-bits)")
    metrics = payload["metrics"]
    if metrics:
        w, u = metrics["weighted"], metrics["unweighted"]
        print(f"\ntrue positives {metrics['true_positives']}, false positives "
              f"{metrics['false_positives']} (ratio {metrics['false_positive_ratio']:.3f})")
        print(f"utility loss: weighted {w['utility_loss']:.4f}, unweighted {u['utility_loss']:.4f}")
        recall = ", ".join(f"top-{k} {v:.2f}" for k, v in w["recall_at"].items())
        print(f"recall (weighted ranking): {recall}")
    t = payload["timings"]
    print(f"\ntime: {t['total_s']:.1f} s ({t['rounds_s']:.1f} s in rounds)")


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def _table(rows: list[tuple]) -> None:
    cells = [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(cells[0]))]
    for row in cells:
        print("  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)))
