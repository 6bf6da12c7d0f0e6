"""What a status post to the demo page's server may hold. One nested too deeply for the JSON
parser is answered 400 and changes nothing: before, the parser's RecursionError (a body of
100,000 nested lists, within the 256 KiB cap) dropped the connection unanswered. What a post
holds is printed by `fedhh up` on one line with its controls escaped."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli.webdemo import MAX_STATUS_BYTES, DemoPage, summary

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


def test_what_a_page_posted_is_printed_on_one_line_with_controls_escaped(page: DemoPage) -> None:
    # (before, `fedhh up` printed a post's "\x1b[2J" and line breaks as sent: a post could clear
    # the terminal or forge lines of the run's report)
    device = {**DEVICE, "error": "boom\x1b[2J\nuser 9 (device 1): contributed\u202e",
              "tasks": [{"task": "r1\x07", "outcome": "late", "detail": "a\rb"}]}
    assert post(page.port, json.dumps({"devices": [device]}))[0] == 204
    [line] = summary(page.devices())
    assert "\x1b" not in line and "\n" not in line and "\r" not in line and "\x07" not in line
    assert "\u202e" not in line
    assert line == ("user 8 (device 3, local eps spent 0.500): r1\\x07: late (a\\x0db); "
                    "failed: boom\\x1b[2J\\x0auser 9 (device 1): contributed\\u202e")
