"""A device-facing service started with --max-streams-per-connection below the calls a device
process puts on one connection by default (``DEVICE_CALLS_PER_CONNECTION``, 1,024) says so
in its log, with what to run the device processes with: gRPC queues their calls past the cap
(a GetTask long-poll or a session stream for its whole wait), and neither side can settle it
alone. Before, nothing said it: the devices' polls just waited."""

from __future__ import annotations

import asyncio

import pytest

from fedhh.cli.main import build_parser
from fedhh.rpc import serving
from fedhh.rpc.channel_pool import DEVICE_CALLS_PER_CONNECTION
from fedhh_device.fleet import DEVICES_PER_CONNECTION


def _warned(cap: int | None, caplog: pytest.LogCaptureFixture) -> list[str]:
    caplog.clear()

    async def start() -> None:
        server = serving.new_server(max_concurrent_streams=cap)
        await server.stop(None)

    asyncio.run(start())
    return [r.getMessage() for r in caplog.records if "--max-streams-per-connection" in
            r.getMessage()]


def test_a_stream_cap_below_a_device_process_s_calls_per_connection_is_warned_of(
        caplog: pytest.LogCaptureFixture) -> None:
    assert _warned(512, caplog) == [
        "--max-streams-per-connection 512 is below the 1,024 calls a `fedhh device` process "
        "puts on one connection by default (--devices-per-connection): its devices' calls "
        "past the cap wait for a stream, a GetTask long-poll or a session stream holding one "
        "for its whole wait. Run device processes with --devices-per-connection 512 or less"]
    for cap in (None, DEVICE_CALLS_PER_CONNECTION, 2048, 4096):
        assert _warned(cap, caplog) == [], cap


def test_device_processes_put_one_number_of_calls_on_a_connection() -> None:
    """The CLI's default --devices-per-connection (a literal: the parser loads no network
    code) is the fleet's and the one the warning compares with."""
    parser = build_parser()
    args = parser.parse_args(["device", "--coordinator", "127.0.0.1:1", "--ca", "ca.pem",
                              "--state-dir", "state"])
    assert args.devices_per_connection == DEVICES_PER_CONNECTION == DEVICE_CALLS_PER_CONNECTION
