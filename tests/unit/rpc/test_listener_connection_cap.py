"""A device-facing port's connections under the open-file limit
(``fedhh.rpc.http_listener.connection_cap``): the port's default is held to a quarter of the
limit without a word, and only a figure the operator asked for above that quarter is warned
about, once. Before, every aggregator start warned that its framed port held "at most 5000
connections ... not the 16384 asked for" (a limit of 20,000), 256 at the usual 1,024, of a
default nobody had asked for; its Connect port's 512 did the same at 1,024."""

from __future__ import annotations

import argparse
import asyncio
import logging
from typing import Any

import pytest

from fedhh.cli.main import build_parser
from fedhh.rpc import http_listener
from fedhh_aggregator.main import AggregatorSettings, start

COORDINATOR_PUBLIC = bytes(32)
TOKEN = b"control-token-for-tests-0123456789"
WARNING = "holds at most"


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.levelno >= logging.WARNING and WARNING in r.getMessage()]


def _held(caplog: pytest.LogCaptureFixture, files: int, **asked: Any) -> tuple[int, int]:
    """Connections the framed session port and the Connect port of an aggregator hold, started
    under an open-file limit of ``files`` (as if) with ``asked`` as its settings."""
    async def scenario() -> tuple[int, int]:
        agg = await start(AggregatorSettings(
            coordinator_public=COORDINATOR_PUBLIC, control_token=TOKEN, insecure=True,
            session_listen="127.0.0.1:0", web_listen="127.0.0.1:0", **asked))
        try:
            assert agg.sessions is not None and agg.sessions.listener is not None
            assert agg.web is not None and agg.web._served is not None
            return (agg.sessions.listener.max_connections,
                    agg.web._served.listener.max_connections)
        finally:
            await agg.stop(grace=0.5)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(http_listener, "open_file_limit", lambda: files)
        with caplog.at_level(logging.WARNING):
            return asyncio.run(asyncio.wait_for(scenario(), 60))


def test_the_defaults_are_held_to_the_limit_without_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    assert _held(caplog, 20_000) == (5000, 512)
    assert _held(caplog, 1024) == (256, 256)
    assert _held(caplog, 1 << 30) == (16384, 512)
    assert _warnings(caplog) == []


def test_a_figure_asked_for_above_the_limit_is_held_to_it_and_warned_about_once(
        caplog: pytest.LogCaptureFixture) -> None:
    assert _held(caplog, 1024, session_max_connections=16384, web_max_connections=200) \
        == (256, 200)
    assert _warnings(caplog) == [
        "the aggregator's session port holds at most 256 connections, a quarter of the "
        "process's open-file limit (1024), not the 16384 asked for: raise the limit "
        "(ulimit -n, or the container's nofile) to hold more"]


def test_the_options_left_out_ask_for_nothing() -> None:
    """The services' --session-max-connections and --web-max-connections default to None,
    the port's own default (before, 16384 and 512, as if typed)."""
    for service in ("aggregator", "coordinator", "selector"):
        command = next(a for a in build_parser(service)._actions  # (argparse keeps them private)
                       if isinstance(a, argparse._SubParsersAction)).choices[service]
        defaults = {a.dest: a.default for a in command._actions}
        assert defaults["session_max_connections"] is None, service
        assert defaults["web_max_connections"] is None, service
