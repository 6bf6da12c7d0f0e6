"""A coordinator whose start fails after its first parts started closes every part that
started, in order, before the error reaches the caller: here a port taken between
``check_startup`` and its listener's start (another process's), for each listen option. Before,
the gRPC port was bound first and the aggregator's channel, the metrics endpoint, the dashboard
and the device ports started before the ``try``: a failure left them to the process's exit, the
metrics and dashboard ports still listening, the store open and its lock held."""

from __future__ import annotations

import asyncio
import fcntl
import os
import socket
from pathlib import Path
from typing import Any

import pytest

from fedhh.cli.main import build_parser
from fedhh.rpc import serving
from fedhh_coordinator import dashboard as dashboard_package
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator.control import GrpcAggregator
from fedhh_coordinator.store import Store

# Every listener, each on an OS-chosen port but the one taken.
LISTENERS = {"--listen": "127.0.0.1:0", "--metrics-port": "0", "--dashboard-port": "0",
             "--web-listen": "127.0.0.1:0", "--session-listen": "127.0.0.1:0"}


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def _lock_free(path: str) -> bool:
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # (another descriptor: refused if held)
        return True
    except BlockingIOError:
        return False
    finally:
        os.close(fd)


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the coordinator's start opened: its gRPC port, its metrics endpoint, its
    dashboard, and how often the store and the aggregator's channel were closed."""
    seen: dict[str, Any] = {"store_closed": 0, "aggregator_closed": 0}
    bind, start_metrics = serving.bind, coordinator_main.start_metrics
    start_dashboard = dashboard_package.start_dashboard
    close_store, close_aggregator = Store.close, GrpcAggregator.close

    def bound(*args: Any, **kwargs: Any) -> int:
        seen["port"] = bind(*args, **kwargs)
        return seen["port"]

    async def metrics(*args: Any, **kwargs: Any) -> Any:
        seen["metrics"] = await start_metrics(*args, **kwargs)
        return seen["metrics"]

    async def dashboard(*args: Any, **kwargs: Any) -> Any:
        seen["dashboard"] = await start_dashboard(*args, **kwargs)
        return seen["dashboard"]

    def store_closed(store: Store) -> None:
        seen["store_closed"] += 1
        close_store(store)

    async def aggregator_closed(aggregator: GrpcAggregator) -> None:
        seen["aggregator_closed"] += 1
        await close_aggregator(aggregator)

    monkeypatch.setattr(serving, "bind", bound)
    monkeypatch.setattr(coordinator_main, "start_metrics", metrics)
    monkeypatch.setattr(dashboard_package, "start_dashboard", dashboard)
    monkeypatch.setattr(Store, "close", store_closed)
    monkeypatch.setattr(GrpcAggregator, "close", aggregator_closed)
    # (scipy's and dp_accounting's imports: a second of a start, nothing this test looks at)
    monkeypatch.setattr(coordinator_main, "import_accountant_libraries", lambda: None)
    return seen


@pytest.mark.parametrize("taken", list(LISTENERS))
def test_a_port_taken_since_the_check_closes_what_had_started(
        taken: str, tmp_path: Path, started: dict[str, Any]) -> None:
    db = str(tmp_path / "c.sqlite")
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        taken_port = other.getsockname()[1]
        listeners = dict(LISTENERS, **{taken: str(taken_port) if taken.endswith("-port")
                                       else f"127.0.0.1:{taken_port}"})
        args = build_parser().parse_args([
            "coordinator", "--insecure", "--aggregator", "127.0.0.1:9", "--db", db,
            "--signing-key", str(tmp_path / "signing.pem"),
            *(part for option, value in listeners.items() for part in (option, value))])
        # (what check_startup read, the port then free)
        checked = coordinator_main.Checked(b"c" * 32, b"a" * 32, None)

        async def main() -> list[str]:
            with pytest.raises(Exception, match=str(taken_port)):
                await coordinator_main.serve(args, checked)
            return [task.get_name() for task in asyncio.all_tasks()]

        assert "runner" not in asyncio.run(main())
    assert started["store_closed"] == 1 and started["aggregator_closed"] == 1
    assert _lock_free(db + coordinator_main.STORE_LOCK_SUFFIX)
    for part in ("metrics", "dashboard"):  # (each that started before the taken one)
        if part in started:
            assert _refused(started[part].port), part
    assert ("metrics" in started) == (taken != "--metrics-port")
    # (the gRPC port is bound last, once the rest has started: a gRPC server listens from its
    # bind, and stopping one that never started leaves its port listening)
    assert "port" not in started
