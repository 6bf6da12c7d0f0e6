"""The aiohttp internals ``fedhh.rpc.http_listener`` reads are there in the installed aiohttp,
whose range pyproject.toml pins (aiohttp>=3.13). aiohttp keeps no public word of them, and a
missing one fails silently: before 3.11 no ``_request_in_progress``, so the fair listener
counted every connection busy and never evicted an idle one (test_fair_listener's newcomer
cut instead), and the head deadline's grace lost a request under way; before 3.13 a bad chunk
size reached the Connect handler as an uncaught error (a 500 and an ERROR traceback per such
request, test_connect_parser_error_headers)."""

from __future__ import annotations

import inspect

from aiohttp import web


def test_the_request_handler_has_the_fields_the_listener_reads() -> None:
    slots = set(getattr(web.RequestHandler, "__slots__", ()))
    assert {"_messages", "_request_in_progress"} <= slots, sorted(slots)


def test_a_parser_error_is_queued_as_a_message_carrying_it() -> None:
    """What the listener's data_received looks for to end a body whose framing broke
    (test_connect_malformed_body)."""
    from aiohttp.http_exceptions import BadHttpMessage
    from aiohttp.web_protocol import _ErrInfo

    error = BadHttpMessage("x")
    assert _ErrInfo(status=400, exc=error, message="x").exc is error


def test_handle_error_takes_what_the_override_passes_on() -> None:
    parameters = list(inspect.signature(web.RequestHandler.handle_error).parameters)
    assert parameters == ["self", "request", "status", "exc", "message"], parameters
