"""The dashboard's HTTPS server: routes, sign-in, security headers, downloads and the live
stream.

It is an aiohttp application running in the coordinator's own event loop (beside the gRPC
server), so pages read the runner's live progress and the lobby directly, with no thread and
no lock between them. Every response carries a Content-Security-Policy that allows only the
dashboard's own script and style sheet (no inline script, no other origin), X-Frame-Options
DENY, nosniff and a same-origin referrer policy; every response but the static assets is
``no-store``. Nothing here writes: the routes only read, and sign-in state lives in memory
(``auth.Sessions``).
"""

from __future__ import annotations

import asyncio
import csv
import io
import json
import logging
import math
import re
import unicodedata
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any
from urllib.parse import quote

from aiohttp import HttpVersion11, web

from fedhh.codec.shown import printable_rows
from fedhh.errors import NotFoundError, RateLimited, StoreDamaged, shown
from fedhh.rpc.http_listener import HEAD_TIMEOUT_S, Served, serve_app
from fedhh.rpc.serving import listener_context
from fedhh.rpc.tls import TlsFiles
from fedhh_coordinator.dashboard import pages
from fedhh_coordinator.dashboard.auth import COOKIE, Sessions
from fedhh_coordinator.dashboard.live import LiveStreams
from fedhh_coordinator.dashboard.markup import Html
from fedhh_coordinator.dashboard.results import Hit
from fedhh_coordinator.dashboard.views import RunDetail, Views
from fedhh_coordinator.runs import RUN_ID

log = logging.getLogger(__name__)

CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
       "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}
STATIC = {"app.js": "text/javascript", "app.css": "text/css", "icon.svg": "image/svg+xml"}
MAX_FILTER = 200
# A request body's cap (aiohttp's client_max_size): the sign-in form is the one body read.
MAX_BODY_BYTES = 64 * 1024
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


# What a spreadsheet (and pandas' read_csv) takes for a value and not text: a number, amount
# or percentage (``007`` read 7, ``1e5`` 100000, ``.5``, ``(5)`` -5, ``$5``), a date or time
# (``3/4``, ``2024-01-02``, ``12:30``, ``jan 5``, ``March 2024``), a truth value, a missing
# value (pandas' defaults: ``None``, ``<NA>``, ``#N/A``, ``#NA`` read as NaN, the item lost) or
# a sheet's error value (``#DIV/0!``, ``#N/A``).
# An amount's currency is any (category Sc: the Currency Symbols block whole, for those still
# to come, and the others), with up to three letters before it and spaces around it, as
# locales write amounts (``₹500`` in India, ``€ 5`` in the Netherlands, ``R$ 5`` in Brazil,
# ``US$5``): a sheet in that locale reads them as numbers, and skips a leading space (before,
# only ``$``, ``€``, ``£``, ``¥`` right before a digit counted: ``₹500`` and ``€ 5`` stayed bare).
_CURRENCY = ("$\xa2-\xa5\u058f\u060b\u07fe\u07ff\u09f2\u09f3\u09fb\u0af1\u0bf9\u0e3f\u17db"
             "\u20a0-\u20cf\ua838\U00011fdd-\U00011fe0\U0001e2ff\U0001ecb0")
_NUMBER = rf"[(.\s]*(?:[a-z]{{0,3}}[{_CURRENCY}][(.\s]*)*\d.*"
_SHEET_VALUE = re.compile(
    _NUMBER
    + r"|(?:true|false|nan|inf|infinity|null|n/?a|none|<na>)"
    r"|#(?:n/?a|n/a n/a|div/0!|value!|ref!|name\?|num!|null!|spill!|calc!|getting_data)"
    r"|(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?[ /-]?\d.*",
    re.IGNORECASE | re.DOTALL)
_MINUS_NUMBER = re.compile("\u2212" + _NUMBER, re.DOTALL)  # (U+2212: `csv_cell`)


def csv_cell(text: str) -> str:
    """A cell a spreadsheet shows as text: a leading = + - @ tab or CR would make it a formula
    (CSV injection), so such a cell gets a leading apostrophe; so does one that a sheet would
    read as a number, date or truth value (``_SHEET_VALUE``: the item ``007`` showed as 7 and
    ``1e5`` as 100000), and one that starts with an apostrophe, so that ``-5`` and ``'-5``
    stay two cells (``'-5`` and ``''-5``): a reader drops one leading apostrophe, if any, and
    has the text back.

    Both tests read the cell's NFKC form, as sheets do: Apple Numbers normalizes a cell so,
    and so runs ``＝2+2`` (fullwidth ``＝``, U+FF1D) as a formula, Japanese Excel runs ``＝``,
    ``＋``, ``－`` and ``＠`` as their ASCII forms (OWASP www-community issue 1088, whose CSV
    Injection page now lists them), and a Japanese sheet reads ``１２３`` as the number 123;
    the small forms (``﹦``) fold the same way, and ``⁼`` and ``₊``. A digit of any
    script (``٧``) counts as a digit: a sheet in that script's locale may read it as a number,
    and the apostrophe costs a reader nothing.

    The minus sign U+2212 (``−5``; ``⁻5`` and ``₋5`` fold to it) is a sign before a number:
    LibreOffice's number scanner takes it for ``-`` (tdf#117037), so ``−5`` read as the number
    -5 (before, it reached the file bare). It starts no formula: a sheet reads ``−A1`` as text,
    as it reads the other dashes (``–5``, ``‐5``, ``ー1``, U+30FC, which OWASP's page does not
    list beside ``－``), and those are left as they are.

    Both read the cell after its leading whitespace and format characters (category Cf:
    U+200B, U+FEFF, U+2060, the bidi marks), which draw as space or as nothing:
    LibreOffice's import with "Trim spaces" and a sheet that trims what it is pasted read
    `` =1+1`` as the formula ``=1+1``, and a zero-width space or a byte-order mark before the
    ``=`` draws as nothing (before, both reached the file bare)."""
    folded = unicodedata.normalize("NFKC", text)
    start = next((i for i, char in enumerate(folded)
                  if not char.isspace() and unicodedata.category(char) != "Cf"), len(folded))
    shown = folded[start:]
    if (folded[:1] in ("\t", "\r") or shown[:1] in ("=", "+", "-", "@", "'")
            or _SHEET_VALUE.fullmatch(shown) or _MINUS_NUMBER.fullmatch(shown)):
        return "'" + text
    return text


def safe_next(path: object) -> str:
    """Where to go after signing in: a path on this site, never another origin."""
    if (isinstance(path, str) and path.startswith("/") and not path.startswith("//")
            and "\\" not in path and path.isprintable() and len(path) <= 512):
        return path
    return "/"


def html_response(page: Html, status: int = 200) -> web.Response:
    return web.Response(text=page, status=status, content_type="text/html", charset="utf-8")


class Dashboard:
    """``await Dashboard(...).start(host, port)``; ``await close()`` stops it."""

    def __init__(self, views: Views, sessions: Sessions, tls: TlsFiles | None,
                 interval_s: float = 1.0, demo_url: str = "") -> None:
        self.views = views
        self.demo_url = demo_url  # the browser devices' page the runs page links to, if any
        self.sessions = sessions
        self.tls = tls
        self.interval_s = interval_s
        self.live = LiveStreams(sessions, interval_s)
        self.port = 0
        self._static = {name: (resources.files(__package__) / "static" / name).read_bytes()
                        for name in STATIC}
        self._served: Served | None = None
        self._on_close: list[Callable[[], None]] = []
        self.app = web.Application(middlewares=[self._headers, self._signed_in],
                                   client_max_size=MAX_BODY_BYTES)
        r = self.app.router
        routes: list[tuple[str, str, Handler]] = [
            ("GET", "/", self.runs), ("GET", "/runs/{run_id}", self.run),
            ("GET", "/runs/{run_id}/heavy-hitters.{kind:csv|json}", self.download),
            ("GET", "/budgets", self.budgets), ("GET", "/fleet", self.fleet),
            ("GET", "/live/runs", self.live_runs), ("GET", "/live/runs/{run_id}", self.live_run),
            ("GET", "/live/fleet", self.live_fleet), ("GET", "/login", self.login_form),
            ("POST", "/login", self.login), ("POST", "/logout", self.logout),
            ("GET", "/static/{name}", self.static)]
        # (every route's Expect answered by ``_expect``: aiohttp's own says 100 Continue first)
        for method, path, handler in routes:
            (r.add_get if method == "GET" else r.add_post)(path, handler,
                                                           expect_handler=self._expect)
        # The refusals aiohttp's router would answer (405, 404), as routes of the dashboard's
        # own, so that a request with an Expect reaches ``_expect`` on every path.
        for resource in list(r.resources()):
            if isinstance(resource, web.Resource):  # (all here: no static files, no sub-app)
                resource.add_route("*", self._not_allowed, expect_handler=self._expect)
        r.add_route("*", "/{path:.*}", self._not_found, expect_handler=self._expect)

    # ---- lifecycle -------------------------------------------------------------------------
    async def start(self, host: str, port: int, insecure: bool = False) -> int:
        """Serve on host:port (0: OS-chosen) with the TLS files, or in plaintext on loopback
        when ``insecure``; returns the bound port."""
        context = listener_context(self.tls, f"{host}:{port}", insecure, "the dashboard")
        # Keep-alive bounds how long a connection may wait for its next request head; the
        # listener bounds the first one and how many connections are held (http_listener.py).
        answers: dict[str, str] = {}  # (every answer's, aiohttp's own 400s included)
        self._secure(answers)
        self._served = await serve_app(self.app, "dashboard", context, host, port, answers)
        self.port = self._served.port
        return self.port

    def on_close(self, callback: Callable[[], None]) -> None:
        self._on_close.append(callback)

    async def close(self) -> None:
        if self._served is not None:
            await self._served.close()
            self._served = None
        for callback in self._on_close:
            callback()
        self._on_close.clear()

    # ---- middlewares -----------------------------------------------------------------------
    @web.middleware
    async def _headers(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            response = await handler(request)
        except web.HTTPException as error:
            self._secure(error.headers)
            raise
        except Exception:  # a bug: a generic page, the traceback in the log
            log.exception("dashboard error", extra={"path": shown(request.path)})
            response = web.Response(text="internal error", status=500)
        if not response.prepared:
            self._secure(response.headers)
        return response

    def _secure(self, headers: Any) -> None:
        headers.update(HEADERS)
        if self.tls is not None:
            headers["Strict-Transport-Security"] = "max-age=31536000"
        headers.setdefault("Cache-Control", "no-store")

    @web.middleware
    async def _signed_in(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        self._admitted(request)
        return await handler(request)

    def _admitted(self, request: web.Request) -> None:
        """Nothing for a request signed in or to a page anyone may see; else the refusal
        (raised): a form post of another origin, then sign-in first."""
        if request.path == "/login" or request.path.startswith("/static/"):
            return
        if request.method == "POST":
            self._same_origin(request)
        if self.sessions.valid(request.cookies.get(COOKIE)):
            return
        if request.method == "GET" and not request.path.startswith("/live/") and \
                "/heavy-hitters." not in request.path:
            raise web.HTTPSeeOther(f"/login?next={quote(request.path_qs, safe='/')}")
        raise web.HTTPUnauthorized(text="sign in first")

    async def _expect(self, request: web.Request) -> web.StreamResponse | None:
        """A request's ``Expect``: ``100-continue`` is answered only once its head passed every
        check made before its body is read (route, method, origin, session, declared length
        against the cap), else the refusal is the answer and the connection closes; another
        expectation is 417. Before, aiohttp's handler sent 100 Continue to any request,
        refused ones too (the body then came for nothing). (HTTP/1.0 has no Expect.)"""
        if request.version != HttpVersion11:
            return None
        expect = request.headers.get("Expect", "")
        try:
            if expect.strip().lower() != "100-continue":
                raise web.HTTPExpectationFailed(
                    text=f"the one expectation this server meets is 100-continue, got "
                         f"{shown(expect[:100])!r}")
            self._admitted(request)
            handler = request.match_info.handler
            if handler in (self._not_allowed, self._not_found):
                await handler(request)  # (raises its refusal)
            elif handler == self.login:
                self._login_head(request)
            self._declared_length(request)
        except web.HTTPException as error:
            response = web.Response(status=error.status, reason=error.reason,
                                    text=error.text, headers=error.headers)
            response.force_close()
            self._secure(response.headers)
            return response
        await request.writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")
        request.writer.output_size = 0  # (the answer's own size counts from here)
        return None

    async def _not_allowed(self, request: web.Request) -> web.StreamResponse:
        resource = request.match_info.route.resource
        allowed = {route.method for route in resource or ()} - {"*"}
        raise web.HTTPMethodNotAllowed(request.method, allowed)

    async def _not_found(self, request: web.Request) -> web.StreamResponse:
        raise web.HTTPNotFound()

    def _same_origin(self, request: web.Request) -> None:
        """A form post comes from the dashboard's own pages (SameSite=Strict already keeps
        the session cookie off other sites' requests; this also covers signing in)."""
        origin = request.headers.get("Origin")
        if origin is not None and origin != f"{request.scheme}://{request.host}":
            raise web.HTTPForbidden(text="cross-origin form posts are refused")

    # ---- sign-in ---------------------------------------------------------------------------
    async def login_form(self, request: web.Request) -> web.Response:
        return html_response(pages.login(next_path=safe_next(request.query.get("next"))))

    async def login(self, request: web.Request) -> web.Response:
        self._login_head(request)
        try:  # a body trickled in byte by byte would hold the connection
            form = await asyncio.wait_for(request.post(), HEAD_TIMEOUT_S)
        except TimeoutError:
            raise web.HTTPRequestTimeout(text="the sign-in form came too slowly") from None
        except (UnicodeDecodeError, LookupError):  # (a charset it names that Python lacks)
            raise web.HTTPBadRequest(text="the sign-in form is not UTF-8") from None
        except ValueError:  # (aiohttp's words for a multipart body without its boundary)
            raise web.HTTPBadRequest(text="the sign-in form does not parse: send it as the "
                                          "sign-in page does (URL-encoded)") from None
        token, next_path = form.get("token"), safe_next(form.get("next"))
        if not isinstance(token, str) or len(token) > 4096:
            return html_response(pages.login("Enter the admin token.", next_path), 400)
        try:
            session = self.sessions.login(request.remote or "", token.strip())
        except RateLimited as error:
            response = html_response(pages.login(str(error), next_path), 429)
            response.headers["Retry-After"] = "60"
            return response
        if session is None:
            log.warning("dashboard sign-in refused", extra={"client": request.remote})
            # (a path pasted for the file's line: "secrets/admin.token", "/run/secrets/...")
            path = "/" in token or token.strip().endswith(".token")
            return html_response(pages.login(
                "That is not the admin token" + (
                    ": it reads as a file's path; paste the one line that file holds "
                    "(cat it), not its name." if path else "."), next_path), 401)
        response = web.Response(status=303, headers={"Location": next_path})
        response.set_cookie(COOKIE, session, path="/", secure=True, httponly=True,
                            samesite="Strict", max_age=int(self.sessions.ttl_s))
        return response

    def _login_head(self, request: web.Request) -> None:
        """A sign-in's refusal before its form is read (raised): another origin's, or one
        declared over the cap."""
        self._same_origin(request)
        self._declared_length(request)

    @staticmethod
    def _declared_length(request: web.Request) -> None:
        """A body declared over the cap refused unread: before, a sign-in form declared 50 MB
        and sent slowly was awaited and answered 408 'came too slowly' after 10 s (aiohttp's
        own cap acts only on the bytes as they arrive)."""
        declared = request.content_length or 0
        if declared > MAX_BODY_BYTES:
            what = "the sign-in form" if request.path == "/login" else "a request's body"
            raise web.HTTPRequestEntityTooLarge(
                MAX_BODY_BYTES, declared,
                text=f"{what} is at most {MAX_BODY_BYTES} bytes, this one {declared}")

    async def logout(self, request: web.Request) -> web.Response:
        self.sessions.logout(request.cookies.get(COOKIE))
        response = web.Response(status=303, headers={"Location": "/login"})
        response.del_cookie(COOKIE, path="/", secure=True, httponly=True, samesite="Strict")
        return response

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in STATIC:
            raise web.HTTPNotFound(text="no such file")
        return web.Response(body=self._static[name], content_type=STATIC[name],
                            headers={"Cache-Control": "no-cache"})

    # ---- pages -----------------------------------------------------------------------------
    def _run_id(self, request: web.Request) -> str:
        run_id = request.match_info["run_id"]
        if not RUN_ID.fullmatch(run_id):
            raise web.HTTPNotFound(text="no such run")
        return run_id

    async def runs(self, request: web.Request) -> web.Response:
        return html_response(pages.runs_page(await self.views.runs(), self.demo_url))

    async def _detail(self, run_id: str) -> RunDetail:
        """``Views.run`` of the run as its page, its downloads and each render of its live page
        show it: the planner asked once, its deny list displayed once and the run read and
        built, each in a thread (NotFoundError or StoreDamaged as ``Views.run``)."""
        await self.views.ask_planner(run_id)
        deny = await self.views.show_deny(run_id)
        return await self.views.run(run_id, deny)

    async def run(self, request: web.Request) -> web.Response:
        run_id = self._run_id(request)
        try:
            detail = await self._detail(run_id)
        except NotFoundError:
            return html_response(pages.not_found(f"There is no run {run_id!r}."), 404)
        except StoreDamaged as damage:
            return html_response(pages.not_found(str(damage), "Damaged run"), 500)
        return html_response(pages.run_page(detail))

    async def budgets(self, request: web.Request) -> web.Response:
        return html_response(pages.budgets_page(await self.views.budgets()))

    async def fleet(self, request: web.Request) -> web.Response:
        return html_response(pages.fleet_page(await self.views.fleet()))

    async def download(self, request: web.Request) -> web.Response:
        run_id = self._run_id(request)
        try:
            detail = await self._detail(run_id)
        except NotFoundError:
            raise web.HTTPNotFound(text="no such run") from None
        except StoreDamaged as damage:
            raise web.HTTPInternalServerError(text=str(damage)) from None
        # (lowered as the page's filter lowers them, JavaScript's toLowerCase: the same Unicode
        # mapping as str.lower; casefold also folds ß to ss and ﬁ to fi, so that a download
        # filtered "ss" held the row "straße" the page had hidden)
        needle = request.query.get("q", "")[:MAX_FILTER].lower()
        hits = [h for h in detail.hits if needle in h.text.lower()]
        cut = [h for h in detail.cut if needle in h.text.lower()]
        kind = request.match_info["kind"]
        state = detail.line.state
        # (a run not done: its list is its released rounds' so far, which the file's name says,
        # as the CSV's run_state column and the JSON's state do; before, a running or failed
        # run's CSV read as a finished run's list)
        so_far = "" if state == "done" else f"-{state}-so-far"
        headers = {"Content-Disposition":
                   f'attachment; filename="{run_id}-heavy-hitters{so_far}.{kind}"'}
        if kind == "json":  # every item exact
            # (completion_note: the whole run's, whatever the filter; before, only the consoles
            # of fedhh simulate and fedhh up said it)
            body = json.dumps({"run_id": run_id, "state": detail.line.state, "filter": needle,
                               "heavy_hitters": [_hit_json(h) for h in hits],
                               "cut_prefixes": [_hit_json(h) for h in cut],
                               "completion_note": detail.completion_note},
                              indent=2)
            return web.Response(text=body, content_type="application/json", headers=headers)
        return web.Response(text=hits_csv(hits, cut, state, run_id), content_type="text/csv",
                            headers=headers)

    # ---- live ------------------------------------------------------------------------------
    async def live_runs(self, request: web.Request) -> web.StreamResponse:
        async def regions() -> dict[str, Html]:
            return {"runs": pages.runs_table(await self.views.runs())}
        return await self.live.serve(request, regions, HEADERS)

    async def live_run(self, request: web.Request) -> web.StreamResponse:
        run_id = self._run_id(request)
        await self.views.ask_planner(run_id)
        # (held for the stream: other pages viewed meanwhile may push it out of the views'
        # few, and each render would then display it again on the loop)
        deny = await self.views.show_deny(run_id)

        async def regions() -> dict[str, Html]:
            detail = await self.views.run(run_id, deny)
            return {"run-head": pages.run_head(detail), "timeline": pages.timeline(detail),
                    "spend": pages.spend_section(detail),
                    "hits": pages.hits_table(run_id, detail.hits, detail.cut,
                                             detail.line.state, detail.line.released,
                                             detail.completion_note)}
        return await self.live.serve(request, regions, HEADERS)

    async def live_fleet(self, request: web.Request) -> web.StreamResponse:
        async def regions() -> dict[str, Html]:
            view = await self.views.fleet()
            return {"fleet-counts": pages.fleet_counts(view),
                    "dropout": pages.fleet_dropout(view),
                    "enrollments": pages.fleet_enrollments(view)}
        return await self.live.serve(request, regions, HEADERS)


def hits_csv(hits: list[Hit], cut: list[Hit], state: str = "done", run_id: str = "") -> str:
    """The CSV download: heavy hitters, then cut prefixes (``kind``), items shown as on the
    page (``printable``: a terminal that prints the file, or a sheet, draws what it gets;
    every escape reads back one way, and the JSON download is exact) and kept from becoming
    formulas (``csv_cell``); ``prefix_bytes``, beside ``truncated_at_bits``, how many of its
    items' first bytes a truncated row holds (what follows, their end too, was never found:
    the row is a prefix, not an item); ``cause``, why a truncated row was
    not completed, as the JSON download and the consoles say it (before, the CSV did not);
    ``note`` says when a row stands for several cut prefixes that
    show one text, its estimate their sum (before, the sum read as one prefix's);
    ``run_id``, the run's id on every row, so that rows of two runs' files put together
    (``cat``, one sheet) still say which run found them, as each says its round (before, only
    the file's name said it); ``run_state``, last, the run's state (``state``) on every row: a
    run not ``done`` lists what its released rounds found so far, not a finished run's list
    (before, nothing in the file said so, where the JSON download has ``state``)."""
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(["rank", "item", "estimate", "std", "round", "truncated_at_bits",
                     "prefix_bytes", "cause", "kind", "note", "run_id", "run_state"])
    # (every row read against the others: a cut prefix сос… beside cocoa)
    cells = iter(printable_rows([(h.item, h.truncated) for h in [*hits, *cut]]))
    for label, rows in (("heavy hitter", hits), ("cut prefix", cut)):
        for h, item in zip(rows, cells, strict=False):
            writer.writerow([h.rank, csv_cell(item), repr(h.estimate),
                             "" if math.isnan(h.std) else repr(h.std), h.round,
                             h.bits if h.truncated else "",
                             h.prefix_bytes if h.truncated else "",
                             h.cause if h.truncated else "",
                             label, h.note, csv_cell(run_id), state])
    return out.getvalue()


def _hit_json(hit: Hit) -> dict[str, Any]:
    return {"rank": hit.rank, "item": hit.item, "estimate": hit.estimate,
            "std": None if math.isnan(hit.std) else hit.std, "round": hit.round,
            "code": hit.code, "truncated": hit.truncated,
            **({"bits": hit.bits, "prefix_bytes": hit.prefix_bytes, "cause": hit.cause}
               if hit.truncated else {}),
            **({"note": hit.note} if hit.note else {})}
