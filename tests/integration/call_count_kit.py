"""Work counted in calls, which, unlike time, a busy machine does not change (issue 30)."""

from __future__ import annotations

import sys
from collections.abc import Callable


def calls(fn: Callable[[], object]) -> int:
    """The calls ``fn()`` makes, Python functions and builtins alike, as cProfile counts them
    (a generator's every resumption is one; ``fn`` itself is one)."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event == "call" or (event == "c_call" and arg is not sys.setprofile):
            count += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count
