"""A networked run's progress told as it happens, one line a change (``fedhh up``, ``fedhh
admin wait``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def contributors(r: Any) -> int:
    """A released ``RoundSummary``'s reports in its total, which its estimates are over; its
    ``participants`` is the charge (n_min for a sharded round with a shard lost after
    unmasking, docs/scaling.md). A coordinator before the field sends 0: its charge then."""
    return int(r.contributors) or int(r.participants)


class Narrator:
    """Prints each change of a run as it happens: check-in, each secure-aggregation stage,
    the release of each round (contributors, kept, found) or its abort with the reason."""

    def __init__(self, echo: Callable[[str], None] | None = None) -> None:
        self.shown: set[tuple[int, int]] = set()
        self.last = ""
        self.echo = echo  # each line also goes here (the demo page's progress)

    def tell(self, line: str, indent: bool = True) -> None:
        if indent:
            say(line)
        else:
            print(line, flush=True)
        if self.echo is not None:
            self.echo(line)

    def __call__(self, run: Any) -> None:
        for r in run.rounds:
            if r.state in ("open", "releasing") or (r.round, r.attempt) in self.shown:
                continue
            self.shown.add((r.round, r.attempt))
            if r.state == "released":
                n = contributors(r)
                charged = f" (charged at {r.participants})" if n != r.participants else ""
                self.tell(f"round {r.round} attempt {r.attempt}: released: {n} "
                          f"contributors{charged}, {r.kept} kept, {r.finished} found "
                          f"({r.seconds:.0f} s)")
            else:
                self.tell(f"round {r.round} attempt {r.attempt}: {r.state}: {r.reason}")
        p = run.progress
        if run.state != "running" or not p.phase or (p.round, p.attempt) in self.shown:
            # (an attempt already told as released or aborted: the coordinator stores the
            # round before it moves its progress on, so one answer can hold both, and
            # "releasing" was told after "released")
            return
        what = {"check-in": f"check-in ({p.devices} device{'' if p.devices == 1 else 's'} "
                            "so far)",
                "secure aggregation": f"secure aggregation with {p.devices} devices"
                                      + (f": {p.stage.lower().replace('_', ' ')}"
                                         if p.stage else ""),
                "releasing": f"releasing the sum of {p.devices} proven contributors"}.get(
                    p.phase, p.phase)
        line = f"round {p.round} attempt {p.attempt}: {what}"
        if line != self.last and not (p.phase == "check-in" and self.last.startswith(
                f"round {p.round} attempt {p.attempt}: check-in")):
            self.tell(line)
        self.last = line


def say(line: str) -> None:
    print(f"  {line}", flush=True)
