"""A device process whose metrics endpoint cannot start (a --metrics-port taken since the start's
check) closes what it opened before the error reaches its caller: its coordinators' channels and
its --state-dir's lock. Before, both were left open in a process that went on: the channels to
its end, and a later start over the same --state-dir waited for the lock this process held."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import Any

import pytest

from fedhh.cli.main import build_parser
from fedhh.errors import ConfigError
from fedhh.rpc.device_users import TOKEN_HEX_DIGITS
from fedhh_device import main


def test_a_metrics_port_taken_closes_the_channels_and_the_lock(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "users.txt").write_text("apple pear\nfig\n")
    (tmp_path / "tokens.txt").write_text("".join(f"{u:x}" * TOKEN_HEX_DIGITS + "\n"
                                                 for u in (1, 2)))
    state = tmp_path / "state"
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    args = build_parser("device").parse_args([
        "device", "--insecure", "--coordinator", "127.0.0.1:9", "--state-dir", str(state),
        "--dataset", str(tmp_path / "users.txt"), "--users", "0:2",
        "--enrollment-tokens-file", str(tmp_path / "tokens.txt"),
        "--metrics-port", str(taken.getsockname()[1]), "--metrics-host", "127.0.0.1"])
    inputs = main.read_inputs(args)
    opened: list[Any] = []
    closed: list[Any] = []
    factory = main.channel_factory

    def recording_factory(given: Any) -> Any:
        make = factory(given)

        def made(address: str) -> Any:
            channel = make(address)
            close = channel.close

            async def recorded(grace: float | None = None) -> None:
                closed.append(channel)
                await close(grace)

            channel.close = recorded
            opened.append(channel)
            return channel

        return made

    monkeypatch.setattr(main, "channel_factory", recording_factory)

    async def start() -> int | None:
        with pytest.raises(ConfigError, match="the metrics endpoint cannot listen"):
            await main.serve(args, inputs)
        stop = asyncio.Event()
        stop.set()  # (one try: None if the lock is still held)
        return await main.hold_state_dir(state, stop)

    try:
        held = asyncio.run(start())
    finally:
        taken.close()
    assert opened and closed == opened
    assert held is not None  # (the failed start let go of its lock)
