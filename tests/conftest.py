"""The suite runs on three pytest-xdist workers on two cores (pyproject's addopts; `-n 0` for one
process): the service tests mostly wait, so a third worker keeps the cores busy (-n 2: 720 s,
-n 3: 644 s, quiet, 2231 tests).
Tests that start real services share one worker, one test at a time as in a serial run: they
wait on processes and on stage windows, and two of them at once would each starve the other's
devices. The docker deployment test is one unit of its own the same way, and every other test
file, CPU-bound and self-contained, is a unit of one file (its module fixtures built once) that
goes to whichever worker is free."""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

SERVICE_FOLDERS = {"tests/integration/": "services", "tests/dashboard/": "services",
                   # The attacks on the real services: a unit of their own since the
                   # selectors' and the session stream's tests made the service unit the
                   # suite's critical path (13:09 quiet with the install).
                   "tests/security/": "security", "tests/deploy/": "docker",
                   # The web devices' rounds against the real services: a unit of their
                   # own, one test at a time, beside the service unit rather than after it
                   # (the service unit is the suite's longest; both wait more than they
                   # compute, as the CPU-bound files the other worker runs beside it do).
                   "tests/web/test_web_wire.py": "browser",
                   "tests/web/test_web_discovery.py": "browser",
                   "tests/web/test_web_identity.py": "browser",
                   "tests/web/test_web_demo.py": "browser"}


class ServiceGroups(LoadScopeScheduling):
    """xdist's scope scheduling with the service folders as one scope each (a mark-based
    ``--dist loadgroup`` cannot do it under pytest 9.2, which no longer reads ``Item._nodeid``)."""

    def _split_scope(self, nodeid: str) -> str:
        for folder, group in SERVICE_FOLDERS.items():
            if nodeid.startswith(folder):
                return group
        return nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """The browser unit right after the docker unit, not where tests/web is collected (last):
    there it started only when every other unit had, and ran alone at the end."""
    browser = tuple(f for f, group in SERVICE_FOLDERS.items() if group == "browser")
    moved = [item for item in items if item.nodeid.startswith(browser)]
    if not moved:
        return
    rest = [item for item in items if not item.nodeid.startswith(browser)]
    after = max((k for k, item in enumerate(rest) if item.nodeid.startswith("tests/deploy/")),
                default=-1) + 1
    items[:] = rest[:after] + moved + rest[after:]


def pytest_xdist_make_scheduler(config: Any, log: Any) -> ServiceGroups:
    # Units in collection order, not largest first: tests/dashboard and tests/deploy come right
    # after the few quick tests/cli files, so the two long units start at once, one per worker,
    # the browser unit next (pytest_collection_modifyitems), and the short files fill in around
    # them.
    config.option.loadscopereorder = False
    return ServiceGroups(config, log)
