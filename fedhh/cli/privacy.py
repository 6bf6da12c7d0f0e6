"""`fedhh privacy`: local epsilon of OptPrefixTree, baselines' sampling rates, central noise.

Usage::

    fedhh privacy [optprefixtree] --eps-agg 1 --delta 1e-6 --rounds 4 --devices 1600000
                  [--sampling-rate 0.5] [--method exact|paper|closed-form] [--json]
    fedhh privacy triehh --theta 10 --eps-agg 1 --delta 1e-6 --rounds 4 --devices 1600000
    fedhh privacy triehh++ --theta 10 --eps-agg 1 --delta 1e-6 --rounds 4
    fedhh privacy central-gaussian --eps-agg 1 --delta 1e-6 --rounds 4 [--sensitivity 1]
    fedhh privacy central-laplace --eps-agg 1 --delta 1e-6 --rounds 4 [--sensitivity 1]

JSON output (``--json``), one object; every form has ``mechanism``:

* optprefixtree: ``eps_local`` (the answer), ``eps_agg_target``, ``eps_agg_achieved``,
  ``delta``, ``rounds``, ``num_devices``, ``sampling_rate``, ``method``, ``tolerance``,
  ``evaluations``, ``conditions_verified``, ``notes``, and ``breakdown`` with ``tightest``
  ("rdp", "advanced-composition" or "pure"), ``rdp_epsilon``, ``rdp_order`` (best alpha),
  ``advanced_epsilon``, ``per_round_epsilon``, ``per_round_delta``, ``slack_delta``,
  ``participants`` (shuffle size). Non-finite numbers are null.
* triehh / triehh++: ``sampling_rate`` (the answer), ``theta``, ``rounds``, ``eps_agg``,
  ``delta``, ``per_round_epsilon``, ``per_round_delta``, ``alpha`` (TrieHH++),
  ``batch_size`` (TrieHH: devices per round).
* central-gaussian / central-laplace: ``noise_scale`` (the answer: sigma, resp. Laplace b, per
  coordinate per round), also as ``sigma`` resp. ``scale``; ``rdp_noise_scale``,
  ``advanced_noise_scale``, ``tightest``, ``sensitivity`` (``mechanism`` is the sub-variant
  name, e.g. "central-gaussian").

Bad option values end with a one-line error naming the option and exit code 2.
"""

from __future__ import annotations

import argparse
import json
import math
from collections.abc import Callable
from typing import Any

from fedhh.errors import ConfigError
from fedhh.privacy import (
    DEFAULT_METHOD,
    METHODS,
    gaussian_calibration,
    laplace_calibration,
    solve_local_epsilon,
    triehh_rate,
    triehhpp_rate,
)

MECHANISMS = ("optprefixtree", "triehh", "triehh++", "central-gaussian", "central-laplace")


def _number(check: Callable[[float], bool], what: str) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
        if not (math.isfinite(value) and check(value)):
            raise argparse.ArgumentTypeError(f"must be {what}, got {text}")
        return value

    return parse


def _integer(minimum: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text}")
        return value

    return parse


def register(subparsers: Any) -> None:
    """Add the `privacy` subcommand to the `fedhh` parser."""
    parser = subparsers.add_parser(
        "privacy",
        help="privacy accounting: local epsilon, baselines' sampling rates, central noise",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument(
        "mechanism", nargs="?", choices=MECHANISMS, default="optprefixtree",
        help="what to compute (default: optprefixtree, the local epsilon)",
    )  # fmt: skip
    parser.add_argument(
        "--eps-agg", required=True, type=_number(lambda x: x > 0, "positive"),
        help="aggregate epsilon target",
    )  # fmt: skip
    parser.add_argument(
        "--delta", required=True, type=_number(lambda x: 0 < x < 1, "in (0, 1)"),
        help="aggregate delta",
    )  # fmt: skip
    parser.add_argument("--rounds", required=True, type=_integer(1), help="number of rounds T")
    parser.add_argument("--devices", type=_integer(2), help="number of devices n")
    parser.add_argument(
        "--sampling-rate", type=_number(lambda x: 0 < x <= 1, "in (0, 1]"), default=1.0,
        help="Poisson device sampling rate q (optprefixtree)",
    )  # fmt: skip
    parser.add_argument(
        "--method", choices=METHODS, default=DEFAULT_METHOD,
        help="shuffle accounting for optprefixtree (default: exact)",
    )  # fmt: skip
    parser.add_argument("--theta", type=_integer(1), help="threshold of TrieHH/TrieHH++")
    parser.add_argument(
        "--sensitivity", type=_number(lambda x: x > 0, "positive"), default=1.0,
        help="L2 (Gaussian) or L1 (Laplace) sensitivity of each round's sum",
    )  # fmt: skip
    parser.add_argument("--json", action="store_true", help="print JSON")
    parser.set_defaults(handler=run)


def _require(args: argparse.Namespace, name: str) -> None:
    if getattr(args, name) is None:
        raise ConfigError(f"--{name.replace('_', '-')} is required for {args.mechanism}")


def _compute(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    mech = args.mechanism
    if mech == "optprefixtree":
        _require(args, "devices")
        sol = solve_local_epsilon(
            args.eps_agg, args.delta, args.rounds, args.devices, args.sampling_rate, args.method
        )
        b = sol.breakdown
        lines = [
            f"eps_local = {sol.eps_local:.4f}  (method {sol.method}, tolerance {sol.tolerance})",
            f"achieved eps_agg = {sol.eps_agg_achieved:.5f} <= {sol.eps_agg_target} "
            f"at delta = {sol.delta}, {sol.rounds} rounds, {b.participants} participants",
            f"  RDP path (CKS20 Prop. 12): eps = {b.rdp_epsilon:.5f} at alpha = {b.rdp_order}",
            f"  advanced composition (KOV Thm 3.4): eps = {b.advanced_epsilon:.5f} "
            f"(per round eps = {b.per_round_epsilon:.5f}, delta = {b.per_round_delta:.3g})",
            f"  tightest: {b.tightest}; conditions verified: {sol.conditions_verified}",
        ] + [f"  note: {note}" for note in sol.notes]
        return {**sol.to_dict(), "mechanism": mech}, lines
    if mech in ("triehh", "triehh++"):
        _require(args, "theta")
        if mech == "triehh":
            _require(args, "devices")
            rate = triehh_rate(args.theta, args.devices, args.rounds, args.eps_agg, args.delta)
        else:
            rate = triehhpp_rate(args.theta, args.rounds, args.eps_agg, args.delta)
        lines = [
            f"sampling_rate = {rate.sampling_rate:.6g}  ({mech}, theta {rate.theta})",
            f"  per round eps = {rate.per_round_epsilon:.5f}, delta = {rate.per_round_delta:.3g}",
        ]
        if rate.alpha is not None:
            lines.append(f"  alpha = {rate.alpha:.6g}")
        if rate.batch_size is not None:
            lines.append(f"  devices per round = {rate.batch_size}")
        return {**rate.to_dict(), "mechanism": mech}, lines
    if mech == "central-gaussian":
        cal = gaussian_calibration(args.eps_agg, args.delta, args.rounds, args.sensitivity)
        alias = "sigma"
    else:
        cal = laplace_calibration(args.eps_agg, args.delta, args.rounds, args.sensitivity)
        alias = "scale"
    lines = [
        f"{alias} = {cal.noise_scale:.6g} per coordinate per round ({cal.mechanism})",
        f"  RDP route: {cal.rdp_noise_scale:.6g}; advanced composition: "
        f"{cal.advanced_noise_scale:.6g}; tightest: {cal.tightest}",
    ]
    return {**cal.to_dict(), alias: cal.noise_scale, "mechanism": mech}, lines


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
