"""A web device the coordinator will not know says why (clients/web/test/refused_identity.test.ts,
in Node): its token refused while the browser holds no identity for it (the site's data cleared
after it enrolled: `fedhh up --web-devices`'s page, storage cleared and reloaded, showed only
"ConnectError: [unauthenticated] unknown or already used enrollment token"), or its credential
refused (the coordinator's data reset). `npm test` runs the same file among the others."""

from __future__ import annotations

from pathlib import Path

import pytest
import webkit

REASON = webkit.skip_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def built() -> Path:
    """clients/web installed from its lock file (once per lock file) and compiled."""
    try:
        return webkit.build()
    except webkit.BuildError as error:
        pytest.fail(str(error))


def test_a_refused_token_or_credential_says_what_the_user_must_do(built: Path) -> None:
    assert webkit.NODE is not None
    try:
        done = webkit.run(webkit.NODE, "--test",
                          str(built / "test" / "refused_identity.test.js"), timeout=120)
    except webkit.BuildError as error:  # (a failing node test exits non-zero)
        pytest.fail(str(error))
    assert "# fail 0" in done.stdout and "# pass 2" in done.stdout, done.stdout[-2000:]
