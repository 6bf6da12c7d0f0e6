"""`fedhh privacy`: local epsilon of OptPrefixTree, the forward map, baselines, central noise.

Usage::

    fedhh privacy [optprefixtree] --eps-agg 1 --delta 1e-6 --rounds 4 --devices 1600000
                  [--sampling-rate 0.5] [--privacy-method sum|clones|paper|closed-form] [--json]
                  [--completion-rounds 32 [--completion-weight 0.2]]  (as a run has them)
    fedhh privacy amplify --eps-local 8.47 --delta 1e-6 --rounds 4 --devices 1600000
                  [--sampling-rate 0.5] [--privacy-method ...]  (default: every method)
    fedhh privacy triehh --theta 10 --eps-agg 1 --delta 1e-6 --rounds 4 --devices 1600000
    fedhh privacy triehh++ --theta 10 --eps-agg 1 --delta 1e-6 --rounds 4
    fedhh privacy central-gaussian --eps-agg 1 --delta 1e-6 --rounds 4 [--sensitivity 1]
    fedhh privacy central-laplace --eps-agg 1 --delta 1e-6 --rounds 4 [--sensitivity 1]
                  [--coordinates 1]

JSON output (``--json``), one object; every form has ``mechanism``, and every form but the
central ones ``sources`` (the theorems the figure rests on, as the text's ``sources:`` line;
amplify: in each of its ``results``):

* optprefixtree: ``eps_local`` (the answer), ``eps_agg_target``, ``eps_agg_achieved``,
  ``delta``, ``rounds``, ``num_devices``, ``sampling_rate``, ``method``, ``tolerance``,
  ``evaluations``, ``conditions_verified``, ``notes``, and ``breakdown`` with ``tightest``
  ("pld", "rdp", "advanced-composition" or "pure"), ``pld_epsilon`` (method "sum"),
  ``rdp_epsilon``, ``rdp_order`` (best alpha), ``advanced_epsilon``, ``per_round_epsilon``,
  ``per_round_delta``, ``slack_delta``, ``participants`` (per round); with
  ``--completion-rounds``, ``completion_rounds`` (those budgeted) and
  ``completion_rounds_asked``, ``rounds`` counting both; ``networked_eps_local`` (the figure a
  networked run holds, at most its max_eps_local) and, where that cap holds it with
  ``--completion-rounds``, ``networked_completion_rounds`` (those a networked run keeps).
* amplify: ``eps_local``, ``delta``, ``rounds``, ``num_devices``, ``sampling_rate`` and
  ``results``: one object per method with ``method``, ``eps_agg`` (the answer at ``delta``),
  ``tightest``, ``conditions_verified``, ``notes`` and the same per-path figures as
  ``breakdown`` above.
* triehh / triehh++: ``sampling_rate`` (the answer), ``theta``, ``rounds``, ``eps_agg``,
  ``delta``, ``per_round_epsilon``, ``per_round_delta``, ``alpha`` (TrieHH++),
  ``batch_size`` (TrieHH: devices per round).
* central-gaussian / central-laplace: ``noise_scale`` (the answer: sigma, resp. Laplace b, per
  coordinate per round), also as ``sigma`` resp. ``scale``; ``pld_noise_scale``,
  ``rdp_noise_scale``, ``advanced_noise_scale`` (Laplace), ``tightest``, ``sensitivity``
  (``mechanism`` is the sub-variant name, e.g. "central-gaussian"). Non-finite numbers are
  null.

Bad option values end with a one-line error naming the option and exit code 2. The accounting
modules (scipy, dp_accounting) are imported only by the form that needs them.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import Any

from fedhh.cli import options
from fedhh.config import MAX_ROUNDS
from fedhh.errors import ConfigError, PrivacyError
from fedhh.privacy.methods import DEFAULT_METHOD, LEGACY_NAMES, METHODS
from fedhh.privacy.solver import EPS_LOCAL_MAX

# The most rounds one run can have: MAX_ROUNDS main rounds and as many completion rounds
# (fedhh.config). Every form's cost grows with T (the accountants keep one entry per round), and
# `--rounds 100000000` ran for minutes, growing gigabytes, before Ctrl-C, with no answer.
MAX_ACCOUNTED_ROUNDS = 2 * MAX_ROUNDS
ROUNDS_LIMIT = (f"the most one run can have: {MAX_ROUNDS:,} rounds and {MAX_ROUNDS:,} "
                "completion rounds")

MECHANISMS = (
    "optprefixtree", "amplify", "triehh", "triehh++", "central-gaussian", "central-laplace",
)


# (the shared option types: every command words a bad number as these do)
_number = options.number_in
# inf passes "> 0": the wording says finite too (``number_in`` refuses every non-finite value).
_positive = _number(lambda x: x > 0, "positive and finite")


def _integer(minimum: int, maximum: int | None = None, why: str = "") -> Callable[[str], int]:
    return options.integer_in(minimum, maximum, f"({why})" if why else "")


def register(subparsers: Any) -> None:
    """Add the `privacy` subcommand to the `fedhh` parser."""
    parser = subparsers.add_parser(
        "privacy",
        help="privacy accounting: local epsilon, the forward map, baselines, central noise",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "mechanism", nargs="?", choices=MECHANISMS, default="optprefixtree",
        help="what to compute (default: optprefixtree, the local epsilon; amplify: the "
             "aggregate epsilon of a given local epsilon)",
    )  # fmt: skip
    parser.add_argument(
        "--eps-agg", type=_positive,
        help="aggregate epsilon target (every form but amplify)",
    )  # fmt: skip
    parser.add_argument(
        "--eps-local", type=_number(lambda x: 0 < x <= EPS_LOCAL_MAX,
                                    f"in (0, {EPS_LOCAL_MAX:g}] (the largest the accountants "
                                    "solve for; a device's coins resolve 2^-32, so any "
                                    "eps_local above ln(2^32 - 1) = 22.18 randomizes as that "
                                    "one)"),
        help=f"per-round local epsilon (amplify; at most {EPS_LOCAL_MAX:g})",
    )  # fmt: skip
    parser.add_argument(
        "--delta", type=_number(lambda x: 0 < x < 1, "in (0, 1)"),
        help="aggregate delta",
    )  # fmt: skip
    parser.add_argument(
        "--rounds", type=_integer(1, MAX_ACCOUNTED_ROUNDS, ROUNDS_LIMIT),
        help=f"number of rounds T (at most {MAX_ACCOUNTED_ROUNDS:,}: {ROUNDS_LIMIT})",
    )  # fmt: skip
    parser.add_argument("--devices", type=_integer(2), help="number of devices n")
    parser.add_argument(
        "--sampling-rate", type=_number(lambda x: 0 < x <= 1, "in (0, 1]"),
        help="Poisson device sampling rate q (optprefixtree, amplify; default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--privacy-method", "--method", dest="method", choices=(*METHODS, *LEGACY_NAMES),
        default=None,
        help=f"accounting for optprefixtree (default: {DEFAULT_METHOD}) and amplify (default: "
             "all); the name of the run setting (`fedhh simulate --privacy-method`), --method "
             "its former name here; 'exact' is the former name of 'clones'",
    )  # fmt: skip
    parser.add_argument(
        "--completion-rounds", type=_integer(0, MAX_ROUNDS),
        help="optprefixtree: completion rounds after the --rounds main ones, each at its own "
             "weight of a round's budget, as a run has them (`fedhh simulate`, `fedhh admin "
             "start`, `fedhh up`: 32 by default there; here 0): as many of them as --devices "
             "can budget, the figure the run's own is (a networked run holds it at its "
             "max_eps_local, 10 by default)",
    )  # fmt: skip
    parser.add_argument(
        "--completion-weight", type=_number(lambda x: 0 < x <= 1, "in (0, 1]"),
        help="with --completion-rounds: the first one's weight (default 0.2, a run's; a "
             "quarter of it for the 2nd and 3rd, less after)",
    )  # fmt: skip
    parser.add_argument("--theta", type=_integer(1), help="threshold of TrieHH/TrieHH++")
    parser.add_argument(
        "--sensitivity", type=_positive,
        help="central-gaussian, central-laplace: L2 (Gaussian) or L1 (Laplace) sensitivity "
             "of each round's sum (default 1)",
    )  # fmt: skip
    parser.add_argument(
        "--coordinates", type=_integer(1),
        help="central-laplace: how many coordinates a neighbour changes, each by sensitivity / "
             "coordinates (default 1; fedhh's histograms: 2, with --sensitivity 2)",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def _require(args: argparse.Namespace, *names: str) -> None:
    """Every option of ``names`` that ``args`` lacks, named at once (before, one a try:
    `fedhh privacy --delta 1e-6 --rounds 4` said --eps-agg, and then --devices). --delta and
    --rounds are required here, not by argparse, which stopped first on those two alone."""
    missing = [f"--{name.replace('_', '-')}" for name in names if getattr(args, name) is None]
    if missing:
        listed = missing[0] if len(missing) == 1 else (
            f"{', '.join(missing[:-1])} and {missing[-1]}")
        raise ConfigError(f"{listed} {'is' if len(missing) == 1 else 'are'} "
                          f"required for {args.mechanism}")


# The results each method's figure rests on, printed with it (and in --json as ``sources``):
# a figure without them cannot be checked against the literature. The same results are named
# in fedhh.privacy (methods, sum_pld, shuffle, accountant, composition, subsampling).
SOURCES = {
    "sum": "per round: the exact privacy loss distribution of the per-coordinate sums of "
           "one-hot + asymmetric RR, worst case over the other devices' data, as a "
           "connect-the-dots PLD (Doroshenko et al. 2022, Alg. 1); rounds composed adaptively "
           "(Zhu, Dong, Wang 2022, Thm 10); capped by basic composition (Dwork & Roth, "
           "Thm 3.16)",
    "clones": "per round: amplification by shuffling of eps_local-LDP reports, the reduction "
              "of \"Hiding Among the Clones\" (Feldman, McMillan, Talwar 2021, Sec. 3), its "
              "divergences evaluated numerically",
    "paper": "per round: the paper's Algorithm 'Privacy Analysis': shuffle RDP of FMT23 "
             "(Feldman, McMillan, Talwar 2023, Thm 3.2, clone probability of its Lemma 3.5)",
    "closed-form": "per round: the closed form of Feldman, McMillan, Talwar 2021, Thm 3.1",
}
SAMPLED_SOURCES = {
    "sum": "each sampled round given its participant count (Dong, Roth, Su 2022, Thm 4.2)",
    "clones": "each sampled round given its participant count",
    "paper": "sampling as the paper does: Zhu & Wang 2019, Thm 5",
    "closed-form": "sampling not accounted",
}
RDP_PATH = "RDP composition (Mironov 2017, Prop. 1) converted by CKS20 Prop. 12"
KOV_PATH = "advanced composition (KOV Thm 3.4)"


def _composition(method: str, sampled: bool) -> str:
    """How a shuffle method composes its rounds (``fedhh.privacy.accountant``): the paper's
    sampled rounds have an RDP curve only, the closed form an (eps, delta) only."""
    if method == "closed-form":
        return ("rounds composed by basic composition (Dwork & Roth, Thm 3.16)" if sampled
                else f"rounds composed by {KOV_PATH}")
    if method == "paper" and sampled:
        return f"rounds composed by {RDP_PATH}"
    return f"rounds composed by the tighter of {RDP_PATH} and {KOV_PATH}"


def sources(method: str, sampled: bool) -> str:
    """The theorems a method's aggregate figure rests on, in one line."""
    parts = [SOURCES[method]]
    if sampled:
        parts.append(SAMPLED_SOURCES[method])
    if method != "sum":
        parts.append(_composition(method, sampled))
    return "; ".join(parts)


def _breakdown_lines(b: Any) -> list[str]:
    if b.method == "sum":
        return [f"  privacy loss distribution of the released sums: eps = {b.pld_epsilon:.5f}"]
    return [
        f"  RDP path (Mironov Prop. 1, CKS20 Prop. 12): eps = {b.rdp_epsilon:.5f} at alpha = "
        f"{b.rdp_order}",
        f"  advanced composition (KOV Thm 3.4): eps = {b.advanced_epsilon:.5f} "
        f"(per round eps = {b.per_round_epsilon:.5f}, delta = {b.per_round_delta:.3g})",
    ]


def _local_epsilon(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    from fedhh.privacy.solver import solve_local_epsilon

    _require(args, "eps_agg", "delta", "rounds", "devices")
    if args.completion_weight is not None and not args.completion_rounds:
        raise ConfigError("--completion-weight weighs completion rounds: give "
                          "--completion-rounds too")
    if args.completion_rounds:
        sol, completion = _with_completions(args, _networked_cap())
    else:
        sol = solve_local_epsilon(
            args.eps_agg, args.delta, args.rounds, args.devices, args.sampling_rate,
            args.method or DEFAULT_METHOD,
        )
        completion = {}
    b = sol.breakdown
    cited = sources(sol.method, args.sampling_rate < 1.0)
    lines = [
        f"eps_local = {sol.eps_local:.4f}  (method {sol.method}, tolerance {sol.tolerance})",
        f"achieved eps_agg = {sol.eps_agg_achieved:.5f} <= {sol.eps_agg_target} "
        f"at delta = {sol.delta}, {_rounds(sol.rounds)}, {b.participants} participants per round",
        *_breakdown_lines(b),
        f"  tightest: {b.tightest}; conditions verified: {sol.conditions_verified}",
        f"  sources: {cited}",
    ] + [f"  note: {note}" for note in sol.notes]
    if completion:
        lines.insert(2, f"  {completion.pop('said')}")
    cap = _networked_cap()
    if sol.eps_local > cap:
        networked = completion.get("networked_completion_rounds")
        rounds = "" if networked is None else (
            f" with {networked} completion round{'' if networked == 1 else 's'}"
            + ("" if networked == completion["completion_rounds"] else
               f", not {completion['completion_rounds']} (each one's {cap:g} + ln(its weight) "
               "must stay positive),"))
        lines.append(f"  note: a networked run (fedhh admin start, fedhh up) holds eps_local at "
                     f"its max_eps_local, {cap:g} by default, which each device's own floor "
                     f"refuses to exceed: it runs at {cap:g}{rounds} and spends less than "
                     f"eps_agg; fedhh simulate runs at {sol.eps_local:.4f}")
    return {**sol.to_dict(), **completion, "networked_eps_local": min(sol.eps_local, cap),
            "mechanism": args.mechanism, "sources": cited}, lines


def _networked_cap() -> float:
    """The cap a networked run puts on a solved local epsilon: the coordinator holds it at the
    run's max_eps_local (``open_ledger``), by default the devices' own floor, since each device
    refuses more (`fedhh device --max-eps-local`); the run then spends less than eps_agg.
    Before, this form gave a figure above it (10.6035 at 1.6M devices and eps_agg 1) as the
    run's own."""
    from fedhh.config import RunConfig

    return float(RunConfig.max_eps_local)


def _with_completions(args: argparse.Namespace, cap: float) -> tuple[Any, dict[str, Any]]:
    """The local epsilon of --rounds main rounds and as many of --completion-rounds as can be
    budgeted among --devices, each at eps_local + ln(its weight): the allocation a run plans
    (``fedhh.config.with_most_completions``, ``RunConfig.round_weights``), so the figure is the
    one `fedhh simulate` and the coordinator solve for. Before, `fedhh privacy` had no
    completion rounds: --rounds 4 said 4.853 at eps_agg 2 over 1,248 devices, the run 4.789.

    Where the figure is above ``cap`` (``_networked_cap``), also the completion rounds a
    networked run keeps (``networked_completion_rounds``): the coordinator plans them over
    its ``open_ledger``, which holds eps_local at the cap, so each of its rounds needs
    cap + ln(its weight) > 0. Before, the form gave simulate's count as the networked run's
    (at 1,248 devices, eps_agg 20 and weight 3e-5: 1 round, where the coordinator keeps 0)."""
    from fedhh.config import RunConfig, with_most_completions
    from fedhh.privacy.accountant import allocation_offsets, check_offsets
    from fedhh.privacy.solver import solve_allocation, solve_local_epsilon

    if args.method not in (None, "sum"):
        raise ConfigError(f"--completion-rounds needs the sum accountant, not --privacy-method "
                          f"{args.method} (a run's completion rounds need it too)")
    if args.rounds > MAX_ROUNDS:
        raise ConfigError(f"--rounds {args.rounds} with --completion-rounds: a run has at most "
                          f"{MAX_ROUNDS:,} main rounds")
    asked = RunConfig(eps_agg=args.eps_agg, delta=args.delta, rounds=args.rounds,
                      completion_rounds=args.completion_rounds,
                      completion_weight=args.completion_weight or RunConfig.completion_weight)
    # (each count solved once: the networked plan asks again of the counts the first asked)
    solved: dict[int, Any] = {}

    def plan(config: RunConfig) -> Any:
        count = config.completion()
        if count not in solved:
            weights = config.round_weights()
            try:
                solved[count] = (
                    solve_local_epsilon(args.eps_agg, args.delta, args.rounds, args.devices,
                                        args.sampling_rate) if weights is None else
                    solve_allocation(args.eps_agg, args.delta, allocation_offsets(weights),
                                     args.devices, args.sampling_rate))
            except PrivacyError as error:
                solved[count] = error
        if isinstance(solved[count], PrivacyError):
            raise solved[count]
        return solved[count]

    def networked(config: RunConfig) -> Any:
        solution = plan(config)
        weights = config.round_weights()
        if solution.eps_local > cap and weights is not None:
            offsets = allocation_offsets(weights)
            check_offsets(cap, offsets, len(offsets), "sum")  # (PrivacyError: not budgeted)
        return solution

    run, sol = with_most_completions(asked, plan, lambda solution: solution.eps_local)
    kept = run.completion()
    said = (f"with {kept} of the {asked.completion()} completion rounds asked for (the most "
            f"{args.devices} devices can budget: each round's eps_local + ln(its weight) must "
            "stay positive)" if kept < asked.completion() else
            f"with {kept} completion round{'' if kept == 1 else 's'}")
    if kept:
        said += f", the first at eps_local + ln {run.completion_weights()[0]:g}"
    shown = {"completion_rounds": kept, "completion_rounds_asked": asked.completion(),
             "said": said}
    if sol.eps_local > cap:
        held, _ = with_most_completions(asked, networked,
                                        lambda solution: min(solution.eps_local, cap))
        shown["networked_completion_rounds"] = held.completion()
    return sol, shown


def _rounds(count: int) -> str:
    """"1 round", "4 rounds" (README's `privacy amplify --rounds 1` said "1 rounds")."""
    return f"{count} round{'' if count == 1 else 's'}"


def _amplify(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    from fedhh.privacy.accountant import aggregate_epsilon

    _require(args, "eps_local", "delta", "rounds", "devices")
    chosen = [args.method] if args.method else list(METHODS)
    results, lines = [], [
        f"eps_local = {args.eps_local} per round, {_rounds(args.rounds)}, {args.devices} devices"
        f", sampling rate {args.sampling_rate}: aggregate (eps, delta) by method"
    ]
    for method in chosen:
        agg = aggregate_epsilon(
            args.eps_local, args.delta, args.rounds, args.devices, args.sampling_rate, method
        )
        cited = sources(agg.method, args.sampling_rate < 1.0)
        results.append({**agg.to_dict(), "sources": cited})
        proven = "" if agg.conditions_verified else "  [conditions not verified]"
        lines.append(f"{agg.method:>11}: eps = {agg.eps_agg:.5f}, delta = {agg.delta:.3g}"
                     f"  ({agg.tightest}){proven}")
        lines.append(f"{'':>11}  sources: {cited}")
    payload = {
        "mechanism": args.mechanism, "eps_local": args.eps_local, "delta": args.delta,
        "rounds": args.rounds, "num_devices": args.devices,
        "sampling_rate": args.sampling_rate, "results": results,
    }
    return payload, lines


def _baseline(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    from fedhh.privacy.baselines import triehh_rate, triehhpp_rate

    _require(args, "eps_agg", "delta", "rounds", "theta",
             *(["devices"] if args.mechanism == "triehh" else []))
    if args.mechanism == "triehh":
        rate = triehh_rate(args.theta, args.devices, args.rounds, args.eps_agg, args.delta)
        if rate.batch_size is not None and rate.batch_size < rate.theta:
            # A prefix is kept on theta votes of the round's sampled devices: none could be.
            raise PrivacyError(
                f"TrieHH samples {rate.batch_size} of the {args.devices} devices a round at "
                f"this budget, fewer than theta = {rate.theta} votes: it could find nothing; "
                "use more devices, a lower --theta or a larger --eps-agg")
    else:
        rate = triehhpp_rate(args.theta, args.rounds, args.eps_agg, args.delta)
    cited = BASELINE_SOURCES[args.mechanism]
    lines = [
        f"sampling_rate = {rate.sampling_rate:.6g}  ({args.mechanism}, theta {rate.theta})",
        f"  per round eps = {rate.per_round_epsilon:.5f}, delta = {rate.per_round_delta:.3g}",
        f"  sources: {cited}",
    ]
    if rate.alpha is not None:
        lines.append(f"  alpha = {rate.alpha:.6g}")
    if rate.batch_size is not None:
        lines.append(f"  devices per round = {rate.batch_size}")
    return {**rate.to_dict(), "mechanism": args.mechanism, "sources": cited}, lines


BASELINE_SOURCES = {
    "triehh": "Zhu, Kairouz, McMahan, Sun, Li 2020, Cor. 1 (T rounds of sampling m of n "
              "devices, threshold theta)",
    "triehh++": "Cormode & Bharadwaj 2022, Lemma 3 (Poisson sampling and threshold, per "
                "round); rounds composed by KOV Thm 3.4",
}


def _central(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    from fedhh.privacy.central import gaussian_calibration, laplace_calibration

    _require(args, "eps_agg", "delta", "rounds")
    if args.mechanism == "central-gaussian":
        cal = gaussian_calibration(args.eps_agg, args.delta, args.rounds, args.sensitivity)
        alias = "sigma"
        route = "  exact: sqrt(T) x the analytic Gaussian mechanism's sigma (Balle-Wang Thm 8)"
    else:
        cal = laplace_calibration(args.eps_agg, args.delta, args.rounds, args.sensitivity,
                                  args.coordinates)
        alias = "scale"
        route = (f"  PLD route (Koskela, Jalko, Honkela 2020): {cal.pld_noise_scale:.6g}; "
                 f"RDP route (Mironov 2017, Table 2; CKS20 Prop. 12): "
                 f"{cal.rdp_noise_scale:.6g}; advanced composition (KOV Thm 3.4): "
                 f"{cal.advanced_noise_scale:.6g}; tightest: {cal.tightest}")
    lines = [f"{alias} = {cal.noise_scale:.6g} per coordinate per round ({cal.mechanism})", route]
    return {**cal.to_dict(), alias: cal.noise_scale, "mechanism": args.mechanism}, lines


def _compute(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    # An option a form does not read is refused, not ignored: --eps-local given to the form
    # whose answer is eps_local would be silently replaced by that answer, and so would
    # --sampling-rate given to TrieHH, whose answer is the sampling rate.
    central_only = ("sensitivity", "coordinates")
    local_only = ("sampling_rate", "method")
    tree_only = ("completion_rounds", "completion_weight")
    unread = {"optprefixtree": ("eps_local", "theta", *central_only),
              "amplify": ("eps_agg", "theta", *central_only, *tree_only),
              "triehh": ("eps_local", *local_only, *central_only, *tree_only),
              "triehh++": ("eps_local", "devices", *local_only, *central_only, *tree_only),
              "central-gaussian": ("eps_local", "theta", "devices", *local_only, "coordinates",
                                   *tree_only),
              "central-laplace": ("eps_local", "theta", "devices", *local_only, *tree_only),
              }[args.mechanism]
    for name in unread:
        if getattr(args, name, None) is not None:
            flag = "privacy-method" if name == "method" else name.replace("_", "-")
            raise ConfigError(f"--{flag} does not apply to {args.mechanism}")
    for name, default in (("sampling_rate", 1.0), ("sensitivity", 1.0), ("coordinates", 1)):
        if getattr(args, name, None) is None:
            setattr(args, name, default)
    if args.mechanism == "optprefixtree":
        return _local_epsilon(args)
    if args.mechanism == "amplify":
        return _amplify(args)
    if args.mechanism in ("triehh", "triehh++"):
        return _baseline(args)
    return _central(args)


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def run(args: argparse.Namespace) -> int:
    """Handler of `fedhh privacy`."""
    payload, lines = _compute(args)
    if args.json:
        print(json.dumps(_jsonable(payload), indent=2, sort_keys=True))
    else:
        print("\n".join(lines))
    return 0
