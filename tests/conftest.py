"""The suite runs on three pytest-xdist workers on two cores (pyproject's addopts; `-n 0` for one
process): the service tests mostly wait, so a third worker keeps the cores busy (-n 2: 720 s,
-n 3: 644 s, quiet, 2231 tests).
Tests that start real services share one worker, one test at a time as in a serial run: they
wait on processes and on stage windows, and two of them at once would each starve the other's
devices. The docker deployment test is one unit of its own the same way, and every other test
file, CPU-bound and self-contained, is a unit of one file (its module fixtures built once) that
goes to whichever worker is free."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
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
        return _group(nodeid) or nodeid.split("::", 1)[0]


# The long units first, in this order, each to a worker of its own as the run starts; every
# other file then goes to whichever worker is free.
FIRST = ("services", "security", "docker", "browser")


def _group(nodeid: str) -> str | None:
    for folder, group in SERVICE_FOLDERS.items():
        if nodeid.startswith(folder):
            return group
    return None


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """The service units ahead of every other file, the services' first: where they were
    collected, after tests/cli (90 files, ~400 s of one worker by 2026-12-04), the services
    unit, the suite's longest, started only once the workers had taken every file before it,
    and the suite waited for it alone at the end."""
    rank = {group: k for k, group in enumerate(FIRST)}

    def order(item: Any) -> int:
        group = _group(item.nodeid)
        if group is not None:
            return rank.get(group, len(FIRST))
        # The other web files (Chromium, npm: 3-11 s each) next: collected last, they were
        # the last units dealt, and two workers ended 13-21 s after the first (quiet run of
        # 2026-12-04) where the unit files' few seconds each would have evened the ends.
        return len(FIRST) + (0 if item.nodeid.startswith("tests/web/") else 1)

    items.sort(key=order)


def pytest_xdist_make_scheduler(config: Any, log: Any) -> ServiceGroups:
    # Units in the order pytest_collection_modifyitems leaves them, not largest first: the
    # service units count few tests each, so xdist's reordering would put them last.
    config.option.loadscopereorder = False
    return ServiceGroups(config, log)


@pytest.fixture(autouse=True)
def _root_logger_restored() -> Iterator[None]:
    """The root logger's handlers, level and record factory put back after each test. A
    command run in-process (``fedhh device``, ``fedhh selector``...) configures logging as
    its process's own (``fedhh.rpc.observability.configure_logging``): a handler on the test's
    captured stderr, closed after the test, to which a later test's log records went as
    "--- Logging error --- ValueError: I/O operation on closed file" on its own stderr (the
    selector case of test_tls_dir_errors left one since d14125b, and seven `fedhh up` tests
    that read their stderr's one line failed after it on the same xdist worker)."""
    root = logging.getLogger()
    handlers, level, factory = root.handlers[:], root.level, logging.getLogRecordFactory()
    yield
    root.handlers[:] = handlers
    root.setLevel(level)
    logging.setLogRecordFactory(factory)
