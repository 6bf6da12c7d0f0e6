"""A web device's identity survives a real page reload (clients/web/src/identity.ts, run.ts):
a headless Chromium page served from the origin the coordinator allows runs `runDevice` with a
minted one-time token (test/identity_browser.ts), which enrols and keeps the identity in the
device's IndexedDB database. Reloaded, the page runs it again with the same, now spent, token:
the device must be the one it enrolled (no second enrolment, which the coordinator would
refuse), with the local epsilon the first load spent, and its stored credential must still
serve a check-in."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

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
        with webkit.identity_page(tmp_path_factory.mktemp("identity-page")) as served:
            yield served
    except webkit.BuildError as error:
        pytest.fail(str(error))


def test_a_reloaded_page_goes_on_as_the_same_device(
        tmp_path: Path, page: tuple[Path, str]) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    root, origin = page
    web = ["--web-listen", "127.0.0.1:0", "--web-origin", origin]
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
            out = WebDriverWait(browser, webkit.PATIENCE_S, poll_frequency=0.2).until(
                lambda driver: driver.execute_script("return window.fedhhIdentity || null"))
            assert "error" not in out, out
            return out

        # The services' certificate is signed by the test's own CA; the connection is TLS.
        with webkit.chromium("--ignore-certificate-errors") as browser:
            browser.get(f"{origin}/index.html")
            first = loaded(browser)
            browser.refresh()
            again = loaded(browser)
    assert first["fresh"] is True and first["spent"] == 0 and first["checkIn"] == "wait", first
    # The same device, its budget kept, and the spent token not presented again (the
    # coordinator would have refused it: the page would show the error).
    assert again == {**first, "fresh": False, "spent": 1.5}, (first, again)
