"""A selector comes back to a leader that restarted within the hold the leader's first check-in
keeps for the devices of its previous process (``fedhh_coordinator.lobby.RETURN_S``): its
channel to the leader reconnects at least every ``serving.RECONNECT_MAX_MS``, as a device's
does. Before, it had gRPC's own backoff (1.6x up to 120 s): with the leader down 150 s, a
client on PEER_OPTIONS that retried at most 5 s apart was back 24.8 s after the leader served
again, its devices past the hold; 2.9 s with the cap. (LeaderLink itself pauses up to 7.5 s
between tries, still within the hold with a reconnection.)"""

from __future__ import annotations

import asyncio
import random
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from fedhh.cli.main import build_parser
from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh_coordinator import selector, selector_main
from fedhh_coordinator.lobby import RETURN_S
from fedhh_coordinator.selector import LeaderLink, LeaderRefused, SelectorLobby
from fedhh_coordinator.store import Store


def test_the_selectors_channel_to_its_leader_reconnects_within_the_return_hold(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[Any] = []
    open_channel = selector_main.open_channel

    def recording(address: str, credentials: Any = None, options: Any = None) -> Any:
        opened.append(options)
        return open_channel(address, credentials, options)

    class Link(selector_main.LeaderLink):
        async def serve(self) -> None:  # (the channel is opened: the start ends here)
            raise LeaderRefused(grpc.StatusCode.INVALID_ARGUMENT, "seen")

    monkeypatch.setattr(selector_main, "open_channel", recording)
    monkeypatch.setattr(selector_main, "LeaderLink", Link)
    monkeypatch.setenv("FEDHH_SELECTOR_TOKEN", "s" * 32)
    key = tmp_path / "coordinator.pub"
    key.write_bytes(ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    Store(tmp_path / "s.sqlite").db.close()  # (the coordinator's, which a selector reads)
    args = build_parser("selector").parse_args([
        "selector", "--insecure", "--listen", "127.0.0.1:0", "--metrics-port", "0",
        "--leader", "127.0.0.1:9", "--db", str(tmp_path / "s.sqlite"),
        "--coordinator-key", str(key)])
    with pytest.raises(ConfigError, match="refused this selector"):
        asyncio.run(selector_main.serve(args))
    (options,) = opened
    options = options or serving.PEER_OPTIONS  # (open_channel's default)
    assert dict(options).get("grpc.max_reconnect_backoff_ms") == serving.RECONNECT_MAX_MS
    # (the pings and message caps of every peer channel are kept)
    assert set(serving.PEER_OPTIONS) <= set(options)


class _Top(random.Random):
    """Jitter at the top of its range: the longest pause LeaderLink draws."""

    def random(self) -> float:
        return 1.0 - 2.0 ** -53


def test_the_selectors_longest_pause_between_tries_and_a_reconnection_fit_the_hold(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """LeaderLink's pause after a lost leader is drawn from zero to a bound that doubles from
    0.2 s to 7.5 s (full jitter, fedhh.backoff): 7.5 s at the most, which with a reconnection
    (2 s) is back within the leader's hold for its returning devices (20 s). 8b23fd7 said and
    tested 5 s; until the one backoff, the pause was drawn from half to one and a half times a
    bound doubling to 5 s."""
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        if len(pauses) == 12:
            raise asyncio.CancelledError  # (long past the doubling's cap)

    async def lost() -> None:
        raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(),
                                   grpc.aio.Metadata(), "leader down")

    async def go() -> None:
        channel = grpc.aio.insecure_channel("127.0.0.1:9")
        link = LeaderLink(SelectorLobby(), channel, b"s" * 32, "selector", b"k" * 32)
        link._jitter = _Top()
        monkeypatch.setattr(link, "_attach", lost)
        try:
            with monkeypatch.context() as patched, pytest.raises(asyncio.CancelledError):
                patched.setattr(selector.asyncio, "sleep", sleep)
                await link.serve()
        finally:
            await channel.close()

    asyncio.run(go())
    assert max(pauses) == pytest.approx(7.5) and pauses[-1] == max(pauses)
    assert max(pauses) + serving.RECONNECT_MAX_MS / 1000 < RETURN_S
