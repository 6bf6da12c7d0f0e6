"""A page that is not a secure context cannot run a web device, and says so before it sends
anything (clients/web/src/run.ts, `checkBrowser`).

Browsers give a page served over plain http from a host other than localhost neither
WebCrypto's crypto.subtle nor Web Locks. Before, `runDevice` on such a page spent its one-time
token, took a task (a seat in a cohort) and only then failed at its first hash, as a dropout of
the round; without Web Locks two tabs ran the same device. Here the page of
test_web_identity.py is loaded from http://app.test (mapped to 127.0.0.1, so the browser treats
it as any remote plain-http host) against the real coordinator, which allows that origin: the
page must report that it is not a secure context, and its token must still enrol the device
once the same page is loaded from a secure origin (http://127.0.0.1).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import webkit
from networked_kit import COORDINATOR_FLAGS

from fedhh.rpc.admin_client import AdminClient
from fedhh.rpc.topology import LocalTopology

REASON = webkit.skip_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = [pytest.mark.slow, pytest.mark.browser]


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    try:
        with webkit.identity_page(tmp_path_factory.mktemp("insecure-page")) as served:
            yield served
    except webkit.BuildError as error:
        pytest.fail(str(error))


def test_a_page_that_is_not_a_secure_context_is_refused_before_it_spends_its_token(
        tmp_path: Path, page: tuple[Path, str]) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    root, secure = page
    insecure = f"http://app.test:{urlsplit(secure).port}"
    web = ["--web-listen", "127.0.0.1:0", "--web-origin", f"{secure},{insecure}"]
    with LocalTopology(tmp_path / "topology",
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        topo.start_aggregator()
        topo.start_coordinator([*COORDINATOR_FLAGS, *web])
        with AdminClient(topo.address("coordinator"), topo.token("admin"),
                         topo.workdir / "tls" / "ca.pem") as admin:
            token = admin.mint_tokens(1)[0]
        (root / "identity.json").write_text(json.dumps({
            "coordinator": f"https://{topo.web_address('coordinator')}", "token": token}))

        def loaded(browser: object) -> dict[str, object]:
            return WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(
                lambda driver: driver.execute_script("return window.fedhhIdentity || null"))

        with webkit.chromium("--ignore-certificate-errors",
                             "--host-resolver-rules=MAP app.test 127.0.0.1") as browser:
            browser.get(f"{insecure}/index.html")
            assert browser.execute_script("return window.isSecureContext") is False
            refused = loaded(browser)
            browser.get(f"{secure}/index.html")
            enrolled = loaded(browser)
    error = str(refused.get("error", ""))
    assert error.startswith("UnsupportedBrowserError: this page is not a secure context"), refused
    assert "serve the page over https" in error, refused
    # The token was never presented: the secure page enrols with it as a fresh device.
    assert enrolled.get("fresh") is True and enrolled.get("checkIn") == "wait", enrolled
