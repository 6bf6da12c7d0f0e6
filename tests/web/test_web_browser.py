"""The web device's vector checks (clients/web/test/checks.ts, the same ones `npm test` runs in
Node) in headless Chromium, the browser the device is for: WebCrypto's SHA-256, HKDF, AES-GCM
and AES-CTR there, and the bundle a page loads, must give Python's bytes.

The page is served from 127.0.0.1 (a secure context, so crypto.subtle exists) by a plain HTTP
server in this process; Chromium and chromedriver are Debian's, as in tests/dashboard.
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import webkit

REASON = webkit.skip_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.browser]
PAGE = """<!doctype html>
<html><head><meta charset="utf-8"><title>fedhh web device vectors</title></head>
<body>running<script type="module" src="checks.js"></script></body></html>
"""


# The policy docs/web-devices.md asks an operator to serve the page with: the library runs
# under it (no inline script, eval or WebAssembly), and the page's check of a call it refuses
# (another port) needs it.
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
          "base-uri 'none'; form-action 'none'; frame-ancestors 'none'; "
          "require-trusted-types-for 'script'; trusted-types 'none'")


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def end_headers(self) -> None:
        self.send_header("Content-Security-Policy", POLICY)
        super().end_headers()

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture(scope="module")
def page_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The bundle, python.json and a page, served on an OS-chosen port."""
    try:
        dist = webkit.build()
    except webkit.BuildError as error:
        pytest.fail(str(error))
    root = tmp_path_factory.mktemp("web-page")
    shutil.copy(dist / "browser" / "checks.js", root / "checks.js")
    shutil.copy(webkit.WEB / "vectors" / "python.json", root / "python.json")
    # The trained codebooks, as an operator serves them to its pages.
    shutil.copytree(webkit.ROOT / "fedhh" / "codec" / "books", root / "books")
    (root / "index.html").write_text(PAGE)
    handler = functools.partial(_Quiet, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/index.html"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with webkit.chromium() as driver:
        yield driver


def test_python_vectors_pass_in_chromium(page_url: str, browser: Any) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(page_url)
    results = WebDriverWait(browser, 60, poll_frequency=0.2).until(
        lambda driver: driver.execute_script("return window.fedhhResults || null"))
    assert isinstance(results, list), results  # {"error": ...} when the page itself failed
    failed = [(r["name"], r["error"]) for r in results if not r["ok"]]
    assert not failed, failed
    names = [r["name"] for r in results]
    assert len(names) == 20 and any("device 6" in n for n in names), names
    assert any("over the device's cap" in n for n in names), names
    assert any("Content-Security-Policy" in n for n in names), names
    version = browser.capabilities.get("browserVersion", "?")
    print(f"Chromium {version}: {len(results)} checks in "
          f"{sum(r['ms'] for r in results):.0f} ms")
