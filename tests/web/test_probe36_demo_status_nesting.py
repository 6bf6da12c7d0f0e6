"""A status post to the demo page's server nested too deeply for the JSON parser is answered
400 and changes nothing. Before, the parser's RecursionError (a body of 100,000 nested lists,
within the 256 KiB cap) dropped the connection unanswered."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli.webdemo import MAX_STATUS_BYTES, DemoPage

DEVICE = {"user": 8, "deviceId": "3", "state": "checking in", "spent": 0.5, "tasks": []}


def post(port: int, body: str) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("POST", "/status", body=body,
                           headers={"Content-Type": "application/json"})
        answer = connection.getresponse()
        return answer.status, answer.read()
    finally:
        connection.close()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[DemoPage]:
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")
    with DemoPage(tmp_path, None) as page:
        yield page


@pytest.mark.parametrize("body", [
    "[" * 100_000 + "]" * 100_000,
    '{"devices": ' + "[" * 100_000 + "]" * 100_000 + "}",
    '{"devices": [{"user": 1, "tasks": [' + '{"a":' * 40_000 + "1" + "}" * 40_000 + "]}]}",
])
def test_a_post_nested_too_deeply_is_answered_400_and_changes_nothing(
        page: DemoPage, body: str) -> None:
    assert len(body.encode()) <= MAX_STATUS_BYTES
    assert post(page.port, json.dumps({"devices": [DEVICE]}))[0] == 204
    status, text = post(page.port, body)
    assert (status, text) == (400, b"nested too deeply")
    assert page.devices() == [DEVICE]
