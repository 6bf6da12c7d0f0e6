"""Benchmark: how long the runner's writes wait beside a bulk write of enrollment tokens.

The coordinator's store is one SQLite connection behind a lock, shared by the runner (a round's
``open_round`` and ``charge_round``) and the admin calls (``MintEnrollmentTokens``, a tokens
file imported). While a mint or an import of ``--tokens`` tokens runs in one thread, another
opens and charges a round over and over, as a runner's charges would come, timing each pair
from its call to its return: what a charge waits for is the bulk write's transaction under way.

Usage:
    PYTHONPATH=server .venv/bin/python bench/bench_bulk_tokens.py [--kind import] [--tokens 200000]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from fedhh_coordinator.enrollment import import_tokens, mint, new_tokens
from fedhh_coordinator.store import Store

HELD_S = 120.0  # (only bounds a wait for a bulk write that never begins)


def measure(kind: str, count: int, folder: Path) -> dict[str, Any]:
    store = Store(folder / "coordinator.sqlite")
    store.create_run("r", {}, 1.0, {}, {}, [])
    path = folder / "device-tokens.txt"
    if kind == "import":
        path.write_text("".join(f"{t}\n" for t in new_tokens(count)))
    begun, ended = threading.Event(), threading.Event()
    transactions: list[float] = []
    begin = store.db.transaction

    def timed() -> Any:  # (each transaction; the bulk write's, from its thread, timed)
        if threading.current_thread() is not writer:
            return begin()
        begun.set()
        return _Timed(begin(), transactions)

    def bulk() -> None:
        try:
            mint(store, count) if kind == "mint" else import_tokens(store, str(path))
        finally:
            ended.set()

    writer = threading.Thread(target=bulk)
    store.db.transaction = timed  # type: ignore[method-assign]
    started = time.perf_counter()
    writer.start()
    if not begun.wait(HELD_S):
        raise SystemExit("the bulk write never began")
    waits: list[float] = []
    while not ended.is_set():
        round_ = len(waits) + 1
        asked = time.perf_counter()
        attempt = store.open_round("r", round_)
        store.charge_round("r", round_, attempt, "releasing", 10, {"round": round_})
        waits.append(time.perf_counter() - asked)
    writer.join()
    total = time.perf_counter() - started
    store.close()
    return {"kind": kind, "tokens": count, "total_s": total, "transactions": transactions,
            "waits": waits}


class _Timed:
    """A transaction's context manager that records how long it was held."""

    def __init__(self, inner: Any, held: list[float]) -> None:
        self.inner, self.held = inner, held

    def __enter__(self) -> Any:
        self.at = time.perf_counter()
        return self.inner.__enter__()

    def __exit__(self, *exc: Any) -> Any:
        try:
            return self.inner.__exit__(*exc)
        finally:
            self.held.append(time.perf_counter() - self.at)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kind", choices=("mint", "import"), default="import")
    parser.add_argument("--tokens", type=int, default=200_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        got = measure(args.kind, args.tokens, Path(folder))
    held, waits = got["transactions"], got["waits"]
    print(f"{got['kind']} of {got['tokens']:,} tokens: {got['total_s']:.2f} s, "
          f"{len(held)} transactions (median {statistics.median(held) * 1e3:.0f} ms, "
          f"longest {max(held) * 1e3:.0f} ms); load {os.getloadavg()[0]:.1f}")
    if waits:
        print(f"  {len(waits)} open+charge pairs beside it: median "
              f"{statistics.median(waits) * 1e3:.0f} ms, longest {max(waits) * 1e3:.0f} ms")


if __name__ == "__main__":
    main()
