"""The status posts of the demo page's server (fedhh/cli/webdemo.py, `fedhh up --web-devices`):
a post that is not a device list as the page posts it is answered 400 and changes nothing, a
post from a page of another origin is answered 403, and what `fedhh up` prints of the devices
after the run (`summary`) never fails on what was posted. Before, a body that was a JSON list
dropped the connection unanswered, and "spent": "x" (or a task that was no object) was taken and
made `summary` raise when `fedhh up` reported the browser devices."""

from __future__ import annotations

import http.client
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli.webdemo import DemoPage, summary

GOOD = {"user": 8, "deviceId": "3", "state": "checking in", "note": "", "noAnswerSince": 0,
        "task": "run-1 round 1.0", "stage": "", "error": "", "spent": 0.5,
        "tasks": [{"task": "run-1 round 1.0", "outcome": "completed", "contributed": True,
                   "detail": ""}]}


def post(port: int, body: str, origin: str | None = None) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Content-Type": "application/json"}
    if origin is not None:
        headers["Origin"] = origin
    try:
        connection.request("POST", "/status", body=body, headers=headers)
        return connection.getresponse().status
    finally:
        connection.close()


@pytest.fixture
def page(tmp_path: Path) -> Iterator[DemoPage]:
    (tmp_path / "browser").mkdir()
    (tmp_path / "browser" / "demo.js").write_text("// the bundle")
    with DemoPage(tmp_path, None) as page:
        yield page


BAD = [
    "[1]", '"devices"', "null", "{}", '{"devices": {}}', '{"devices": [1]}',
    '{"devices": [{"user": 1, "spent": "x"}]}', '{"devices": [{"user": 1, "spent": NaN}]}',
    '{"devices": [{"user": 1, "spent": true}]}', '{"devices": [{"user": {"a": 1}}]}',
    '{"devices": [{"user": 1, "tasks": "abc"}]}', '{"devices": [{"user": 1, "tasks": [1, 2]}]}',
    '{"devices": [{"user": 1, "tasks": [{"contributed": "yes"}]}]}',
    '{"devices": [{"user": 1, "deviceId": 5}]}',
    json.dumps({"devices": [GOOD] * 11}),  # more devices than a page runs
    "{not json", "\udcff",
]


def test_posts_that_are_not_the_pages_device_list_are_refused_and_change_nothing(
        page: DemoPage) -> None:
    assert post(page.port, json.dumps({"devices": [GOOD]})) == 204
    for body in BAD:
        assert post(page.port, body.encode("utf-8", "surrogateescape").decode("latin-1")) \
            == 400, body
        assert page.devices() == [GOOD], body
    assert summary(page.devices()) == [
        "user 8 (device 3, local eps spent 0.500): run-1 round 1.0: contributed"]
    assert page.wait_settled(0.01)


def test_only_the_demo_pages_origins_may_post(page: DemoPage) -> None:
    for origin in page.origins():
        assert post(page.port, json.dumps({"devices": [GOOD]}), origin) == 204
    other = {**GOOD, "user": 9}
    for origin in ("https://evil.example", "null", f"http://127.0.0.1:{page.port + 1}"):
        assert post(page.port, json.dumps({"devices": [other]}), origin) == 403, origin
    assert page.devices() == [GOOD]
