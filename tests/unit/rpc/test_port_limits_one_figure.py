"""Each limit the gRPC, Connect and framed ports share is one figure, defined once and taken
by the others (the same object, not an equal copy that is free to drift): a connection's
handshake (``http_listener.HEAD_TIMEOUT_S``), a unary request's arrival
(``request_waits.REQUEST_TIMEOUT_S``), an idle connection's end
(``serving.MAX_CONNECTION_IDLE_MS``) and the range of a receive cap
(``serving.check_receive_cap``)."""

from __future__ import annotations

import inspect

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc import http_listener, request_waits, serving
from fedhh.rpc.connect import ConnectServer
from fedhh.rpc.framed.server import FramedLimits
from fedhh.rpc.request_waits import RequestWaits


def default(function: object, name: str) -> object:
    return inspect.signature(function).parameters[name].default  # type: ignore[arg-type]


def framed_default(name: str) -> object:
    return FramedLimits.__dataclass_fields__[name].default


def test_a_unary_requests_deadline_is_one_figure_on_every_port() -> None:
    """Before, connect.BODY_TIMEOUT_S, request_waits.REQUEST_TIMEOUT_S and the framed port's
    handshake_timeout_s (which stood for both its handshake and its requests) were three
    copies of 10 s."""
    figure = request_waits.REQUEST_TIMEOUT_S
    assert default(RequestWaits, "timeout_s") is figure  # (gRPC's port, and the framed one's)
    assert default(ConnectServer, "body_timeout_s") is figure
    assert framed_default("request_timeout_s") is figure


def test_a_connections_handshake_and_idle_end_are_one_figure_on_every_port() -> None:
    head = http_listener.HEAD_TIMEOUT_S
    assert default(http_listener.Listener, "head_timeout_s") is head  # (Connect, dashboard)
    assert framed_default("handshake_timeout_s") is head
    options = dict(serving.server_options())
    assert options["grpc.server_handshake_timeout_ms"] == round(head * 1000)
    assert options["grpc.max_connection_idle_ms"] == serving.MAX_CONNECTION_IDLE_MS
    assert framed_default("idle_timeout_s") == serving.MAX_CONNECTION_IDLE_MS / 1000


@pytest.mark.parametrize("cap", [1023, serving.MAX_MESSAGE_BYTES + 1])
def test_a_receive_cap_outside_the_one_range_is_refused_on_every_port(cap: int) -> None:
    """1 KiB to the clients' MAX_MESSAGE_BYTES on each port; before, the framed port took a
    cap of one byte up, or above what any client sends."""
    refusals = []
    for make in (lambda: serving.server_options(cap),
                 lambda: ConnectServer("test port", [], cap, None),
                 lambda: FramedLimits(cap, 4)):
        with pytest.raises(ConfigError) as refused:
            make()
        refusals.append(str(refused.value).split(" must be ")[1])
    assert len(set(refusals)) == 1, refusals


def test_the_web_demo_pages_head_deadline_is_the_listeners() -> None:
    """The web demo's server keeps its own copy of the listeners' head deadline because the
    command line imports no network module at its top (test_layers); the copy must read the
    same, or a page's request would be held to another deadline than every port's."""
    from fedhh.cli import webdemo

    assert webdemo.HEAD_TIMEOUT_S == http_listener.HEAD_TIMEOUT_S


def test_the_aggregators_message_cap_ends_at_every_ports_ceiling(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The aggregator's round limits took their ceiling from a 16 MiB of their own; it is now
    the ports' one figure (serving.MAX_MESSAGE_BYTES), so a ceiling lowered there holds here."""
    from fedhh_aggregator.rounds import Limits

    monkeypatch.setattr(serving, "MAX_MESSAGE_BYTES", 1 << 20)
    Limits(max_message_bytes=1 << 20)
    with pytest.raises(ConfigError, match="max_message_bytes must be in"):
        Limits(max_message_bytes=(1 << 20) + 1)
