"""The services state the client pings they accept, and a device pings no more often (outside
probe, thirty-sixth stop). Devices ping every ``fedhh_device.main.KEEPALIVE_S`` during a call;
the services relied on gRPC's default ping policy (one ping per 5 minutes without data, 2
strikes), so a change on either side, or of gRPC's defaults, could have a service close every
device's long-poll (GOAWAY ENHANCE_YOUR_CALM) with nothing to say so. Each service's options,
as its server is built with them, are read here and held against the device's."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any
from unittest import mock

import grpc
import pytest

from fedhh.rpc import serving
from fedhh_aggregator import main as aggregator_main
from fedhh_aggregator.rounds import Limits
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator import selector_main
from fedhh_device import main as device_main

MIN_RECV = "grpc.http2.min_recv_ping_interval_without_data_ms"
STRIKES = "grpc.http2.max_ping_strikes"
WITHOUT_CALLS = "grpc.keepalive_permit_without_calls"


def effective(options: Sequence[tuple[str, Any]]) -> dict[str, Any]:
    return dict(options)  # (a key given twice: the last one counts, as in gRPC's channel args)


def built_options(monkeypatch: pytest.MonkeyPatch, extra: Sequence[tuple[str, Any]]
                  ) -> dict[str, Any]:
    """The options ``serving.new_server`` hands gRPC for a service's ``extra`` options."""
    seen: list[Sequence[tuple[str, Any]]] = []

    def server(*, options: Sequence[tuple[str, Any]], **_: Any) -> object:
        seen.append(options)
        return object()

    monkeypatch.setattr(grpc.aio, "server", server)
    serving.new_server(extra_options=extra)
    (options,) = seen
    return effective(options)


SERVICES = {"coordinator": coordinator_main.SERVER_OPTIONS,
            "selector": selector_main.SERVER_OPTIONS,
            "aggregator": aggregator_main.server_options(Limits()),
            "combiner": ()}


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_each_service_states_the_pings_it_takes(monkeypatch: pytest.MonkeyPatch,
                                                service: str) -> None:
    options = built_options(monkeypatch, SERVICES[service])
    assert options[MIN_RECV] == serving.MIN_PING_INTERVAL_MS == 300_000
    assert options[STRIKES] == serving.MAX_PING_STRIKES >= 1
    assert options[WITHOUT_CALLS] == 0


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_device_pings_no_more_often_than_a_service_takes(monkeypatch: pytest.MonkeyPatch,
                                                           service: str) -> None:
    server = built_options(monkeypatch, SERVICES[service])
    device = effective(device_main.OPTIONS)
    assert device["grpc.keepalive_time_ms"] == int(device_main.KEEPALIVE_S * 1000)
    assert device["grpc.keepalive_time_ms"] >= server[MIN_RECV], (
        "devices would ping more often than the services accept: every long-poll's "
        "connection would be closed after the strikes")
    # pings with no call open: the device sends none, or the service takes them
    assert device["grpc.keepalive_permit_without_calls"] == 0 or server[WITHOUT_CALLS] == 1
    # and any channel the device makes with its own interval keeps to the bound
    assert effective(device_main.channel_options())["grpc.keepalive_time_ms"] \
        >= server[MIN_RECV]


def _peer_channel_options(monkeypatch: pytest.MonkeyPatch, user: str) -> dict[str, Any]:
    """The options the ``user``'s channel to its peer is opened with (its own code path)."""
    from fedhh_aggregator.workers import Worker, parse_worker
    from fedhh_coordinator.control import GrpcAggregator

    seen: list[Sequence[tuple[str, Any]]] = []

    def insecure_channel(address: str, options: Sequence[tuple[str, Any]]) -> object:
        seen.append(options)
        return mock.MagicMock()  # (stubs are built on it; nothing is called)

    monkeypatch.setattr(grpc.aio, "insecure_channel", insecure_channel)
    if user == "the coordinator to its aggregator or combiner":
        GrpcAggregator("127.0.0.1:7100", None, b"t" * 32)
    elif user == "a combiner to its worker":
        Worker(0, parse_worker("127.0.0.1:7101"), None, b"t" * 32)
    else:  # a selector to its leader: selector_main opens it with control_client's
        from fedhh.rpc.control_client import open_channel
        assert "open_channel(args.leader" in Path(selector_main.__file__).read_text()
        open_channel("127.0.0.1:7000")
    (options,) = seen
    return effective(options)


@pytest.mark.parametrize("user", ["the coordinator to its aggregator or combiner",
                                  "a combiner to its worker", "a selector to its leader"])
def test_a_service_pings_its_peers_as_a_device_does(monkeypatch: pytest.MonkeyPatch,
                                                    user: str) -> None:
    # (before, the services' channels to their peers had no pings: a selector's stream to a
    # leader whose host vanished without a reset was waited on for good)
    peer = _peer_channel_options(monkeypatch, user)
    device = effective(device_main.OPTIONS)
    for key in ("grpc.keepalive_time_ms", "grpc.keepalive_timeout_ms",
                "grpc.http2.ping_timeout_ms", "grpc.http2.max_pings_without_data",
                "grpc.keepalive_permit_without_calls", "grpc.max_receive_message_length"):
        assert peer[key] == device[key], key
    assert peer["grpc.keepalive_time_ms"] >= serving.MIN_PING_INTERVAL_MS
