"""Progress meters for the long steps of preparing data: generating a population, converting a
file, checking a dataset, counting its ground truth.

A meter is a tqdm bar on stderr, shown only when the caller asks for progress and stderr is a
terminal (logs and pipes stay clean), and only once its step has taken ``DELAY_S`` (quick steps
leave no trace). While shown it is redrawn every ``REDRAW_S`` even when its count does not move,
so a step that works for a while between two counts shows its clock running, not a frozen bar.
Library functions take ``progress: bool``; only entry points decide whether it is on.
"""

from __future__ import annotations

import sys
import threading
import time
from types import TracebackType
from typing import Any

DELAY_S = 1.0
REDRAW_S = 1.0


def shown(progress: bool) -> bool:
    """Whether progress asked for is shown: only on a terminal."""
    isatty = getattr(sys.stderr, "isatty", None)
    return bool(progress and isatty is not None and isatty())


def announce(progress: bool, text: str) -> None:
    """One line on stderr for what a meter cannot say (e.g. why a first run takes minutes)."""
    if shown(progress):
        sys.stderr.write(text + "\n")
        sys.stderr.flush()


class Meter:
    """Counts a step's work; draws it as a bar when shown (see the module docstring).

    ``update`` may be called from worker threads; drawing happens under one lock.
    """

    def __init__(self, progress: bool, desc: str, total: int | None = None, unit: str = "it",
                 unit_scale: bool = False) -> None:
        # (a label names a dataset, whose name a stranger's meta.json or file name gives: its
        # escape sequences shown as \x1b, not acted on by the terminal the bar is drawn on)
        from fedhh.codec.shown import message_text

        self.desc = message_text(desc)
        self.total = total
        self.n = 0
        self._unit = unit
        self._unit_scale = unit_scale
        self._started = time.monotonic()
        self._bar: Any = None
        self._postfix: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if shown(progress):
            self._file = sys.stderr
            self._ticker = threading.Thread(target=self._tick, name="progress", daemon=True)
            self._ticker.start()

    def update(self, n: int = 1) -> None:
        with self._lock:
            self.n += n
            if self._bar is not None:
                self._bar.update(n)
            else:
                self._show_if_due()

    def set_postfix(self, **values: Any) -> None:
        """Figures shown after the bar (kept until the bar is shown)."""
        with self._lock:
            self._postfix = values
            if self._bar is not None:
                self._bar.set_postfix(values, refresh=False)

    def close(self) -> None:
        self._stop.set()
        if self._ticker is not None and self._ticker is not threading.current_thread():
            self._ticker.join()
        with self._lock:
            if self._bar is not None:
                self._bar.close()
                self._bar = None

    def __enter__(self) -> Meter:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def _tick(self) -> None:
        while not self._stop.wait(min(REDRAW_S, DELAY_S) if self._bar is None else REDRAW_S):
            with self._lock:
                if self._stop.is_set():
                    return
                if self._bar is None:
                    self._show_if_due()
                else:
                    self._bar.refresh()

    def _show_if_due(self) -> None:
        """Create the bar once the step has lasted DELAY_S (caller holds the lock)."""
        if self._ticker is None or time.monotonic() - self._started < DELAY_S:
            return
        from tqdm import tqdm

        bar = tqdm(desc=self.desc, total=self.total, initial=self.n, unit=self._unit,
                   unit_scale=self._unit_scale, file=self._file, dynamic_ncols=True)
        # The bar's clock starts with the step, not with the bar.
        bar.start_t -= time.monotonic() - self._started
        if self._postfix:
            bar.set_postfix(self._postfix, refresh=False)
        bar.refresh()
        self._bar = bar
