"""The dashboard over HTTPS, in process: sign-in and sessions, the rate limit, security headers
on every response, escaping of user data, downloads, the live stream, and that it never writes
the coordinator's database."""

from __future__ import annotations

import asyncio
import hashlib
import http.client
import json
import logging
import re
import sqlite3
import ssl

import pytest
from dashboard_kit import TOKEN, XSS_LABEL, Served

from fedhh.errors import RateLimited
from fedhh.privacy import PrivacyLedger
from fedhh_coordinator.dashboard.auth import COOKIE, Sessions
from fedhh_coordinator.dashboard.reader import Reader
from fedhh_coordinator.dashboard.server import CSP, csv_cell, safe_next

PAGES = ["/", "/runs/r1", "/budgets", "/fleet"]
DATA = ["/runs/r1/heavy-hitters.csv", "/runs/r1/heavy-hitters.json", "/live/runs",
        "/live/runs/r1", "/live/fleet"]


def test_without_a_session_pages_send_to_sign_in_and_data_is_refused(served: Served) -> None:
    for path in PAGES:
        status, headers, body = served.request("GET", path)
        assert status == 303, path
        assert headers["Location"].startswith("/login?next=")
        assert b"apple" not in body and b"r1" not in body
    for path in DATA:
        status, _, body = served.request("GET", path)
        assert status == 401, path
        assert b"apple" not in body
    bogus = {"Cookie": f"{COOKIE}=not-a-session"}
    status, _, body = served.request("GET", "/runs/r1/heavy-hitters.json", headers=bogus)
    assert status == 401 and b"apple" not in body


def test_a_wrong_token_gets_the_sign_in_page_and_no_cookie(served: Served) -> None:
    status, headers, body = served.request("POST", "/login", {"token": "wrong" * 8})
    assert status == 401
    assert "Set-Cookie" not in headers
    assert b"That is not the admin token." in body and b"apple" not in body


def test_the_session_cookie_is_http_only_secure_strict_and_not_the_token(served: Served
                                                                         ) -> None:
    status, headers, _ = served.request("POST", "/login", {"token": TOKEN.decode(),
                                                           "next": "/fleet"})
    assert status == 303 and headers["Location"] == "/fleet"
    cookie = headers["Set-Cookie"]
    name, _, rest = cookie.partition("=")
    value = rest.split(";")[0]
    attributes = {a.strip().split("=")[0].lower() for a in cookie.split(";")[1:]}
    assert name == COOKIE and value and TOKEN.decode() not in cookie
    assert {"httponly", "secure", "samesite", "path"} <= attributes
    assert "samesite=strict" in cookie.lower() and "domain" not in attributes
    session = {"Cookie": f"{name}={value}"}
    for path in PAGES:
        status, _, _ = served.request("GET", path, headers=session)
        assert status == 200, path
    status, headers, _ = served.request("POST", "/logout", headers=session)
    assert status == 303
    status, _, _ = served.request("GET", "/", headers=session)
    assert status == 303  # the session ended


def test_sign_in_is_rate_limited_even_for_the_right_token(served: Served) -> None:
    # The fixture allows a client bursts of 5 attempts (the service's default is 10).
    for _ in range(5):
        assert served.request("POST", "/login", {"token": "guess" * 8})[0] == 401
    status, headers, body = served.request("POST", "/login", {"token": TOKEN.decode()})
    assert status == 429
    assert headers["Retry-After"] == "60" and "Set-Cookie" not in headers
    assert b"too many sign-in attempts" in body


def test_a_guesser_limits_itself_not_the_operator() -> None:
    """One client address guessing without pause (before: it took everyone's allowance, and
    the operator, signing in from another address, was answered 429 for as long as it went
    on)."""
    sessions = Sessions(TOKEN)
    for _ in range(10):
        assert sessions.login("192.0.2.66", "guess" * 8) is None
    for _ in range(1000):
        with pytest.raises(RateLimited):
            sessions.login("192.0.2.66", "guess" * 8)
    assert sessions.login("192.0.2.10", TOKEN.decode()) is not None


def raw_request(served: Served, method: str, path: str, body: bytes | None = None,
                headers: dict[str, bytes] | None = None) -> int:
    """The status of a request sent with header and body bytes as they are."""
    context = ssl.create_default_context(cafile=str(served.tls.ca))
    connection = http.client.HTTPSConnection(served.host, served.port, context=context,
                                             timeout=30)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        return connection.getresponse().status
    finally:
        connection.close()


def test_bytes_that_are_not_utf8_are_refused_without_an_error_logged(
        served: Served, caplog: pytest.LogCaptureFixture) -> None:
    """Before: 500, and a traceback logged at ERROR for each such request, by anyone."""
    form = {"Content-Type": b"application/x-www-form-urlencoded"}
    assert raw_request(served, "POST", "/login", b"token=\xff\xfe&next=/", form) == 400
    assert raw_request(served, "GET", "/", headers={
        "Cookie": COOKIE.encode() + b"=\xff\xfe"}) == 303  # to the sign-in page
    assert raw_request(served, "GET", "/runs/r1/heavy-hitters.csv", headers={
        "Cookie": COOKIE.encode() + b"=\xff\xfe"}) == 401
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.parametrize(("content_type", "body"), [
    (b"application/x-www-form-urlencoded; charset=x-none", b"token=t&next=/"),
    (b"multipart/form-data", b"--x\r\n"),
    (b"multipart/form-data; boundary=x", b"no boundary here"),
    (b"multipart/form-data; boundary=x", b'--x\r\nContent-Type: text/plain; charset=x-none\r\n'
     b'Content-Disposition: form-data; name="token"\r\n\r\nt\r\n--x--\r\n'),
])
def test_a_sign_in_form_that_does_not_parse_is_refused_without_an_error_logged(
        served: Served, caplog: pytest.LogCaptureFixture, content_type: bytes,
        body: bytes) -> None:
    """A charset Python has no codec for, a multipart body without its boundary: 400. Before:
    500 and a traceback logged at ERROR for each such request, by anyone who reaches the
    sign-in page (found fuzzing the coordinator's ports)."""
    assert raw_request(served, "POST", "/login", body, {"Content-Type": content_type}) == 400
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_body_left_unread_ends_its_connection_at_once(served: Served) -> None:
    """A request answered without its body read (a POST to a page) closes its connection
    with the answer, as the Connect port's do (``http_listener._runner``). Before, the
    dashboard's runner lingered: it waited up to 10 s for the rest of the body, holding one of
    its 64 connections (here the 9 s bound ran out)."""
    import socket
    import time

    context = ssl.create_default_context(cafile=str(served.tls.ca))
    with socket.create_connection((served.host, served.port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname=served.host) as tls:
        tls.sendall(b"POST /budgets HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/octet-stream\r\n"
                    b"Content-Length: 1000000\r\n\r\n" + b"x" * 10)
        answer, began = b"", time.monotonic()
        # The answer and the close take ms; lingering took 10 s: the bound is as far from the
        # ms as it can be and still tell them apart, for a busy machine's stalls.
        tls.settimeout(9.0)
        while chunk := tls.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 ") and time.monotonic() - began < 9.0


def test_cross_origin_posts_are_refused(served: Served) -> None:
    status, headers, _ = served.request("POST", "/login", {"token": TOKEN.decode()},
                                        headers={"Origin": "https://evil.example"})
    assert status == 403 and "Set-Cookie" not in headers


def test_every_response_carries_the_security_headers(served: Served) -> None:
    session = {"Cookie": served.sign_in()}
    for path in [*PAGES, "/login", "/static/app.js", "/runs/r1/heavy-hitters.csv",
                 "/runs/nothing-here", "/runs/bad%20id", "/no/such/page"]:
        _, headers, _ = served.request("GET", path, headers=session)
        assert headers["Content-Security-Policy"] == CSP, path
        assert "script-src 'self'" in CSP and "unsafe-inline" not in CSP
        assert headers["X-Frame-Options"] == "DENY", path
        assert headers["X-Content-Type-Options"] == "nosniff", path
        if not path.startswith("/static/"):
            assert headers["Cache-Control"] == "no-store", path
    assert served.request("GET", "/runs/nothing-here", headers=session)[0] == 404


def test_pages_hold_no_inline_script(served: Served) -> None:
    session = {"Cookie": served.sign_in()}
    for path in PAGES:
        _, _, body = served.request("GET", path, headers=session)
        page = body.decode()
        assert page.count("<script") == 1 and '<script src="/static/app.js"' in page, path
        assert re.search(r"<[^>]*\son[a-z]+=", page) is None, path  # no event attribute
        assert "style=" not in page, path


def test_user_data_is_escaped(served: Served) -> None:
    session = {"Cookie": served.sign_in()}
    for path in ("/fleet", "/budgets"):
        _, _, body = served.request("GET", path, headers=session)
        page = body.decode()
        assert XSS_LABEL not in page, path
        assert "&lt;script&gt;window.pwned=1&lt;/script&gt;&lt;img src=x onerror=pwned=2&gt;" \
            in page, path


def test_run_page_shows_the_rounds_spend_and_heavy_hitters(served: Served) -> None:
    session = {"Cookie": served.sign_in()}
    _, _, body = served.request("GET", "/runs/r1", headers=session)
    page = body.decode()
    assert 'data-round="1" data-attempt="1" data-state="aborted"' in page
    assert "only 12 devices checked in" in page
    assert page.count('data-state="released"') == 2
    assert "190 contributors, n_min 180" in page
    # certain: the kept deny-listed items (none); the impossible element was never kept
    assert "false positives: expected 0.40, certain 0" in page
    assert 'title="round 1, attempt 1"' in page and "Round r.a is attempt a of round r" in page
    assert "Accountant: <strong>sum</strong>" in page  # the default method
    assert '<td class="item"><bdi>apple</bdi></td>' in page
    assert '<td class="item"><bdi>berry</bdi></td>' in page


def test_a_run_damaged_in_the_store_is_named_and_spoils_only_itself(served: Served) -> None:
    """Before: one row that did not decode made the runs page and the fleet page answer 500."""
    with sqlite3.connect(served.db) as db:
        db.execute("INSERT INTO runs SELECT 'bad', config, state, eps_local, tree, 'x', "
                   "deny_codes, '', created_at, updated_at FROM runs WHERE run_id = 'r1'")
    session = {"Cookie": served.sign_in()}
    status, _, body = served.request("GET", "/", headers=session)
    assert status == 200
    page = body.decode()
    assert "/runs/r1" in page and "the stored run &#x27;bad&#x27; is damaged: ledger: " in page
    assert served.request("GET", "/fleet", headers=session)[0] == 200
    status, _, body = served.request("GET", "/runs/bad", headers=session)
    assert status == 500 and "Damaged run" in body.decode()
    status, _, body = served.request("GET", "/runs/bad/heavy-hitters.csv", headers=session)
    assert status == 500 and body.decode().startswith("the stored run 'bad' is damaged: ")


def test_downloads_are_the_heavy_hitters_filtered(served: Served) -> None:
    session = {"Cookie": served.sign_in()}
    status, headers, body = served.request("GET", "/runs/r1/heavy-hitters.json?q=ERR",
                                           headers=session)
    assert status == 200 and headers["Cache-Control"] == "no-store"
    assert "attachment" in headers["Content-Disposition"]
    data = json.loads(body)
    assert [h["item"] for h in data["heavy_hitters"]] == ["berry"]
    assert data["heavy_hitters"][0]["rank"] == 2 and data["heavy_hitters"][0]["round"] == 2
    status, _, body = served.request("GET", "/runs/r1/heavy-hitters.csv", headers=session)
    lines = body.decode().splitlines()
    assert lines[0] == ("rank,item,estimate,std,round,truncated_at_bits,prefix_bytes,cause,kind,"
                        "note,run_id,run_state")
    assert lines[1].startswith("1,apple,61.5,") and lines[2].startswith("2,berry,48.25,")
    assert all(line.endswith(",r1,done") for line in lines[1:])
    status, headers, _ = served.request("GET", "/runs/r1/heavy-hitters.csv", headers=session)
    assert headers["Content-Disposition"] == 'attachment; filename="r1-heavy-hitters.csv"'


def test_spreadsheet_formulas_and_foreign_redirects_are_neutralised() -> None:
    assert csv_cell("=cmd|' /C calc'!A0") == "'=cmd|' /C calc'!A0"
    assert csv_cell("@sum") == "'@sum" and csv_cell("apple") == "apple"
    # an item that starts with an apostrophe is told apart from a neutralised one
    assert csv_cell("-5") == "'-5" and csv_cell("'-5") == "''-5"
    for bad in ("//evil.example", "https://evil.example", "\\\\x", "/\\evil", 42):
        assert safe_next(bad) == "/"
    assert safe_next("/runs/r1") == "/runs/r1"


def test_the_live_stream_sends_regions_then_ends_with_the_session(served: Served) -> None:
    cookie = served.sign_in()
    import http.client
    import ssl

    context = ssl.create_default_context(cafile=str(served.tls.ca))
    connection = http.client.HTTPSConnection(served.host, served.port, context=context,
                                             timeout=30)
    try:
        connection.request("GET", "/live/runs/r1", headers={"Cookie": cookie})
        response = connection.getresponse()
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/event-stream")
        assert response.headers["Cache-Control"] == "no-store"
        regions = set()
        while not {"run-head", "timeline", "spend", "hits", "clock"} <= regions:
            line = response.readline().decode()
            if line.startswith("data: "):
                regions.add(json.loads(line[6:])["id"])
        served.request("POST", "/logout", headers={"Cookie": cookie})
        events = []
        while "signed-out" not in events:  # the stream notices within one tick
            line = response.readline().decode()
            assert line, "the stream closed without saying the session ended"
            if line.startswith("event: "):
                events.append(line[7:].strip())
    finally:
        connection.close()


def test_the_dashboard_never_writes_the_database(served: Served) -> None:
    def digest() -> str:
        with sqlite3.connect(served.db) as db:
            rows = [db.execute(f"SELECT * FROM {t} ORDER BY 1").fetchall()
                    for t in ("devices", "runs", "rounds", "device_spends",
                              "enrollment_tokens")]
        return hashlib.sha256(repr(rows).encode()).hexdigest()

    before = digest()
    session = {"Cookie": served.sign_in()}
    for path in [*PAGES, "/runs/r1/heavy-hitters.csv", "/runs/r1/heavy-hitters.json"]:
        assert served.request("GET", path, headers=session)[0] == 200
    assert digest() == before
    reader = Reader(served.db)
    try:
        with pytest.raises(sqlite3.OperationalError):
            reader._query("DELETE FROM runs", ())
    finally:
        reader.close()


def test_spend_matches_the_ledger(served: Served) -> None:
    detail = asyncio.run(served.views.run("r1"))
    ledger = PrivacyLedger.from_dict(served.views.store.run("r1").ledger)
    assert [c.contributors for c in detail.spend.charges] == [190, 190]
    assert detail.spend.charges[-1].cumulative == pytest.approx(ledger.spent_epsilon(),
                                                                rel=1e-12)
    assert detail.spend.charges[0].cumulative == pytest.approx(detail.spend.charges[0].epsilon)
    assert detail.line.eps_spent == pytest.approx(ledger.spent_epsilon(), rel=1e-12)


def test_a_session_keeps_at_most_four_live_streams(served: Served) -> None:
    """A fifth stream of one session closes the session's oldest (a page the browser left but
    did not close yet), so forgotten pages cannot use up the server's streams."""
    import http.client
    import ssl

    cookie = served.sign_in()
    context = ssl.create_default_context(cafile=str(served.tls.ca))
    connections, responses = [], []
    try:
        for _ in range(5):
            connection = http.client.HTTPSConnection(served.host, served.port,
                                                     context=context, timeout=30)
            connection.request("GET", "/live/fleet", headers={"Cookie": cookie})
            response = connection.getresponse()
            assert response.status == 200
            while response.readline().decode().strip() != "event: synced":
                pass
            connections.append(connection)
            responses.append(response)
        while response := responses[0].readline():  # the oldest ends (EOF)
            assert b"signed-out" not in response
        assert served.dashboard.live.open == 4
    finally:
        for connection in connections:
            connection.close()



def test_a_run_not_done_downloads_as_a_list_so_far(served: Served) -> None:
    """A run that has not finished downloads under a name saying its state, and its CSV rows
    carry it (before: `r2-heavy-hitters.csv`, as a finished run's list)."""
    import asyncio

    from networked_kit import run_config

    from fedhh.rpc.run_config import from_proto
    from fedhh_coordinator.runs import create_run
    from fedhh_coordinator.store import Store

    config = from_proto(run_config(rounds=4, max_bits=60, min_devices=180, dim_limit=1 << 16))
    asyncio.run(create_run(Store(served.db), config, "r2"))
    session = {"Cookie": served.sign_in()}
    status, headers, body = served.request("GET", "/runs/r2/heavy-hitters.csv", headers=session)
    assert status == 200
    assert body.decode().splitlines()[0].endswith(",note,run_id,run_state")
    name = headers["Content-Disposition"]
    assert name.startswith('attachment; filename="r2-heavy-hitters-')
    assert name.endswith('-so-far.csv"') and "-done-" not in name
    status, headers, body = served.request("GET", "/runs/r2/heavy-hitters.json", headers=session)
    assert headers["Content-Disposition"].endswith('-so-far.json"')
    assert json.loads(body)["state"] != "done"


def test_a_sign_in_form_declared_over_the_cap_is_refused_unread(served: Served) -> None:
    """Before, a form that declared 50 MB and sent none of it was awaited for 10 s and
    answered 408 'the sign-in form came too slowly'."""
    import socket
    import time

    context = ssl.create_default_context(cafile=str(served.tls.ca))
    with socket.create_connection((served.host, served.port), timeout=30) as raw, \
            context.wrap_socket(raw, server_hostname=served.host) as tls:
        tls.sendall(b"POST /login HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                    b"Content-Type: application/x-www-form-urlencoded\r\n"
                    b"Content-Length: 52428800\r\n\r\ntoken=")
        answer, began = b"", time.monotonic()
        tls.settimeout(9.0)  # (the old wait was 10 s: see the test above)
        while chunk := tls.recv(65536):
            answer += chunk
    assert time.monotonic() - began < 9.0
    assert answer.startswith(b"HTTP/1.1 413 "), answer[:100]
    assert answer.endswith(b"the sign-in form is at most 65536 bytes, this one 52428800")


def test_a_request_is_told_to_send_its_body_only_once_its_head_passed(served: Served) -> None:
    """``Expect: 100-continue``: before, aiohttp answered 100 Continue to every request,
    refused ones too (their body then came for nothing): a post of another origin, one signed
    out, one to no route or with a method its route does not take, one over the cap."""
    import socket

    cookie = served.sign_in()
    form = b"token=" + TOKEN
    cases = [  # (method, path, extra header lines, declared length)
        ("POST", "/login", "", len(form)),
        ("POST", "/login", "Origin: https://evil.example\r\n", len(form)),
        ("POST", "/logout", "", len(form)),
        ("POST", "/nowhere", f"Cookie: {cookie}\r\n", len(form)),
        ("PUT", "/budgets", f"Cookie: {cookie}\r\n", len(form)),
        ("POST", "/login", "", 52428800),
        ("POST", "/login", "Expect: 200-ok\r\n", len(form))]
    context = ssl.create_default_context(cafile=str(served.tls.ca))
    answers = []
    for method, path, lines, length in cases:
        expect = "" if "Expect" in lines else "Expect: 100-continue\r\n"
        with socket.create_connection((served.host, served.port), timeout=30) as raw, \
                context.wrap_socket(raw, server_hostname=served.host) as tls:
            tls.sendall(f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                        "Content-Type: application/x-www-form-urlencoded\r\n"
                        f"Content-Length: {length}\r\n{expect}{lines}\r\n".encode())
            answer = tls.makefile("rb")
            first = answer.readline().strip()
            final = first
            if first.startswith(b"HTTP/1.1 100 "):
                assert answer.readline() == b"\r\n"
                tls.sendall(form)
                final = answer.readline().strip()
            answers.append((first, final))
    refused = [b"HTTP/1.1 403 Forbidden", b"HTTP/1.1 401 Unauthorized",
               b"HTTP/1.1 404 Not Found", b"HTTP/1.1 405 Method Not Allowed",
               b"HTTP/1.1 413 Request Entity Too Large", b"HTTP/1.1 417 Expectation Failed"]
    assert answers == [(b"HTTP/1.1 100 Continue", b"HTTP/1.1 303 See Other")] + [
        (status, status) for status in refused]
