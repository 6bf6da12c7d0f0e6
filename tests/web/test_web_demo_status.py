"""The status posts of the demo page's server (fedhh/cli/webdemo.py, `fedhh up --web-devices`):
a post that is not a device list as the page posts it is answered 400 and changes nothing, a
post from a page of another origin is answered 403, and what `fedhh up` prints of the devices
after the run (`summary`) never fails on what was posted. Before, a body that was a JSON list
dropped the connection unanswered, and "spent": "x" (or a task that was no object) was taken and
made `summary` raise when `fedhh up` reported the browser devices."""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from fedhh.cli.webdemo import DemoPage, summary

GOOD = {"user": 8, "deviceId": "3", "state": "checking in", "note": "", "noAnswerSince": 0,
        "task": "run-1 round 1.0", "stage": "", "error": "", "spent": 0.5,
        "tasks": [{"task": "run-1 round 1.0", "outcome": "completed", "contributed": True,
                   "detail": ""}]}


def post(port: int, body: str, origin: str | None = None,
         headers: dict[str, str] | None = None) -> int:
    return call(port, "POST", "/status", body,
                {"Content-Type": "application/json", **({"Origin": origin} if origin else {}),
                 **(headers or {})})[0]


def call(port: int, method: str, path: str, body: str | None = None,
         headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
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
    '{"devices": [{"user": 1, "deviceId": 5}]}', '{"devices": [{"user": 1, "sent": "yes"}]}',
    # (a number no float holds: `summary` raised OverflowError on it)
    '{"devices": [{"user": 1, "spent": 1' + "0" * 400 + '}]}',
    '{"devices": [{"user": 1, "noAnswerSince": -1' + "0" * 309 + '}]}',
    json.dumps({"devices": [GOOD] * 11}),  # more devices than a page runs
    json.dumps({"load": 5, "devices": [GOOD]}), json.dumps({"load": "x" * 65, "devices": []}),
    '{"devices": [{"user": 1, "tasks": [{"interrupted": 3}]}]}',
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


def test_a_number_no_float_holds_is_refused_as_such(page: DemoPage) -> None:
    for number in ("NaN", "Infinity", "1" + "0" * 400):
        status, said = call(page.port, "POST", "/status",
                            '{"devices": [{"user": 1, "spent": ' + number + '}]}')
        assert (status, said) == (400, b"a device: spent must be a finite number a float "
                                       b"holds (at most about 1.8e308)"), number


def test_a_negative_length_is_refused_as_such(page: DemoPage) -> None:
    status, said = call(page.port, "POST", "/status", "",
                        {"Content-Type": "application/json", "Content-Length": "-1"})
    assert (status, said) == (400, b"Content-Length must not be negative, got -1")
    assert page.devices() == []


def test_requests_for_another_host_are_refused(page: DemoPage) -> None:
    """DNS rebinding: a site whose name now points at 127.0.0.1 is its own origin to the
    browser, so only the Host its requests carry tells them from the page's."""
    page.configure(tokens=["ab" * 32], users=[8], items=[["x"]], counts=[[1]],
                   coordinator_port=1, aggregator_port=2, min_cohort=3)
    for host in ("evil.example", f"evil.example:{page.port}", f"127.0.0.1:{page.port + 1}",
                 "127.0.0.1"):
        for method, path, body in (("GET", "/demo.json", None), ("GET", "/", None),
                                   ("POST", "/status", json.dumps({"devices": [GOOD]}))):
            status, said = call(page.port, method, path, body, {"Host": host})
            assert status == 421, (host, path)
            assert b"tokens" not in said and repr(host).encode() in said, said
    assert page.devices() == []
    for host in (f"127.0.0.1:{page.port}", f"LocalHost:{page.port}"):
        status, said = call(page.port, "GET", "/demo.json", None, {"Host": host})
        assert status == 200 and b"tokens" in said, host


def test_a_post_is_told_to_send_its_body_only_once_its_head_passed(page: DemoPage) -> None:
    """``Expect: 100-continue``: before, http.server answered 100 Continue to every post,
    refused ones too (their body then came for nothing)."""
    body = json.dumps({"devices": [GOOD]}).encode()
    foreign = "Origin: https://evil.example\r\n"
    cases = [  # (path, extra header lines, declared length)
        ("/status", "", len(body)), ("/status", foreign, len(body)),
        ("/elsewhere", "", len(body)), ("/status", "", 10**9)]
    answers = []
    for path, lines, length in cases:
        with socket.create_connection(("127.0.0.1", page.port), timeout=10) as connection:
            connection.sendall(f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{page.port}\r\n"
                               f"Content-Type: application/json\r\nContent-Length: {length}\r\n"
                               f"Expect: 100-continue\r\n{lines}\r\n".encode())
            answer = connection.makefile("rb")
            first = answer.readline().strip()
            final = first
            if first.startswith(b"HTTP/1.1 100 "):
                assert answer.readline() == b"\r\n"
                connection.sendall(body)
                final = answer.readline().strip()
            answers.append((first, final))
    refused = [b"HTTP/1.1 403 Forbidden", b"HTTP/1.1 404 Not Found",
               b"HTTP/1.1 413 Request Entity Too Large"]
    assert answers == [(b"HTTP/1.1 100 Continue", b"HTTP/1.1 204 No Content")] + [
        (status, status) for status in refused]
    assert page.devices() == [GOOD]
