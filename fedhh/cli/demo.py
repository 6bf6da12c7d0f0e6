"""`fedhh demo`: the Quick start's main job on embedded defaults.

Runs OptPrefixTree over the default population (``synthetic-reddit``: 1.6 million simulated
users, generated and cached on first use) at eps_agg = 1, delta = 1e-6, T = 4, P = 10^7, and
prints the discovered heavy hitters, the rounds and the privacy spent.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedhh.cli import simulate


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("demo", help="run the main job on the embedded default",
                              description=__doc__)
    simulate.add_run_options(p)
    p.set_defaults(handler=run, json=None, plot=None, top=25, quiet=False)


def run(args: argparse.Namespace) -> int:
    return simulate.run(args)
