"""The web device's waits (clients/web/test/pause.test.ts, in Node with the test's own timers,
so nothing sleeps): a wait longer than a timer holds (2^31 - 1 ms) is kept by chaining timers,
where one such timer fired at once; a check-in answered with nothing to do is sent again after
a floor and a bounded, jittered backoff, where "retry after 0 ms" was a hot loop of check-ins
and a huge wait one too. `npm test` runs the same file among the others."""

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


def test_long_waits_and_check_ins_with_nothing_to_do(built: Path) -> None:
    assert webkit.NODE is not None
    try:
        done = webkit.run(webkit.NODE, "--test", str(built / "test" / "pause.test.js"),
                          timeout=120)
    except webkit.BuildError as error:  # (a failing node test exits non-zero)
        pytest.fail(str(error))
    assert "# fail 0" in done.stdout and "# pass 4" in done.stdout, done.stdout[-2000:]
