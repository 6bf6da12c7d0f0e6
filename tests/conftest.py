"""The suite runs on three pytest-xdist workers on two cores (pyproject's addopts; `-n 0` for one
process): the service tests mostly wait, so a third worker keeps the cores busy (-n 2: 720 s,
-n 3: 644 s, quiet, 2231 tests).
Tests that start real services are grouped in units (SERVICE_UNITS), each run on one worker, one
test at a time as in a serial run: they wait on processes and on stage windows, and two of the
same kind at once would starve each other's devices. Every other test file, CPU-bound and
self-contained, is a unit of one file (its module fixtures built once) that goes to whichever
worker is free."""

from __future__ import annotations

from typing import Any

from xdist.scheduler import LoadScopeScheduling

# The units of tests that start real services, each run one test at a time on one worker, in
# the order they start: the longest first, so that none of them begins last (-n 3, quiet:
# services 584 s, docker 188, security 176, browser 156, dashboard 100 of a 644 s suite).
# tests/security left the service unit when the selectors' and the session stream's tests made
# it the critical path, tests/dashboard with the third worker; the web devices' rounds against
# the real services are a unit beside the service unit rather than after it.
SERVICE_UNITS = {
    "services": ("tests/integration/",),
    "docker": ("tests/deploy/",),
    "security": ("tests/security/",),
    "browser": ("tests/web/test_web_wire.py", "tests/web/test_web_discovery.py",
                "tests/web/test_web_identity.py", "tests/web/test_web_demo.py"),
    "dashboard": ("tests/dashboard/",),
}


def _unit(nodeid: str) -> str | None:
    for unit, paths in SERVICE_UNITS.items():
        if nodeid.startswith(paths):
            return unit
    return None


class ServiceGroups(LoadScopeScheduling):
    """xdist's scope scheduling with the service folders as one scope each (a mark-based
    ``--dist loadgroup`` cannot do it under pytest 9.2, which no longer reads ``Item._nodeid``)."""

    def _split_scope(self, nodeid: str) -> str:
        return _unit(nodeid) or nodeid.split("::", 1)[0]


def pytest_collection_modifyitems(items: list[Any]) -> None:
    """The service units first, in SERVICE_UNITS' order, then every other file as collected."""
    rank = {unit: k for k, unit in enumerate(SERVICE_UNITS)}
    items.sort(key=lambda item: rank.get(_unit(item.nodeid) or "", len(rank)))


def pytest_xdist_make_scheduler(config: Any, log: Any) -> ServiceGroups:
    # Units in the order pytest_collection_modifyitems left them, not largest first (xdist's
    # count of tests per unit says nothing of their length).
    config.option.loadscopereorder = False
    return ServiceGroups(config, log)
