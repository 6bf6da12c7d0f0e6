"""A cancel on the dashboard: a running run the operator cancelled, which stops once its round
under way ends, is shown "cancelling", and a cancelled run "cancelled", each with its note as
what it is. Before, both showed the note as a red "Error" (the store keeps a pending cancel
as the running run's error, so that a restarted coordinator still cancels it) and the first
was badged "running"."""

from __future__ import annotations

import asyncio
import re

from dashboard_kit import Served
from networked_kit import run_config

from fedhh.rpc.run_config import from_proto
from fedhh_coordinator.progress import Progress
from fedhh_coordinator.runs import create_run


def add_run(served: Served, run_id: str, state: str, error: str = "") -> None:
    store = served.views.store
    config = from_proto(run_config(rounds=4, max_bits=60, min_devices=180,
                                   dim_limit=1 << 16))
    asyncio.run(create_run(store, config, run_id))
    store.set_run_state(run_id, state, error)


def badges(html: str) -> dict[str, str]:
    """Run id -> its state badge, on the runs page."""
    return dict(re.findall(r'<a href="/runs/([^"]+)">[^<]*</a></td><td><span class="badge '
                           r'state-([a-z]+)">', html))


def test_a_pending_cancel_shows_cancelling_and_a_cancelled_run_no_error(served: Served
                                                                       ) -> None:
    add_run(served, "r-cancelling", "running")
    served.views.runner.cancel("r-cancelling")  # what CancelRun does to a running run
    add_run(served, "r-cancelled", "cancelled", "cancelled by the operator")
    add_run(served, "r-failed", "failed", "round 1 released nothing in 5 attempts")
    session = {"Cookie": served.sign_in()}

    status, _, body = served.request("GET", "/", headers=session)
    assert status == 200
    assert badges(body.decode()) == {"r1": "done", "r-cancelling": "cancelling",
                                     "r-cancelled": "cancelled", "r-failed": "failed"}

    for run_id, badge, note in (
            ("r-cancelling", "cancelling", "the run stops once the round under way ends"),
            ("r-cancelled", "cancelled", "cancelled by the operator")):
        status, _, body = served.request("GET", f"/runs/{run_id}", headers=session)
        page = body.decode()
        assert status == 200
        assert f'<span class="badge state-{badge}">{badge}</span>' in page
        assert "<dt>Error</dt>" not in page and 'class="error"' not in page, run_id
        assert re.search(r"<dt>Cancel</dt><dd>[^<]*" + re.escape(note), page), run_id

    # the fleet page's activity says the running run is stopping
    served.views.runner.progress["r-cancelling"] = Progress(2, 1, "check-in")
    status, _, body = served.request("GET", "/fleet", headers=session)
    assert status == 200
    assert re.search(r"<dt>Activity</dt><dd>r-cancelling, round 2\.1: check-in, 0 devices "
                     r"so far \(cancelling: the run stops once this round ends\)</dd>",
                     body.decode())

    # (a failed run's error stays one)
    status, _, body = served.request("GET", "/runs/r-failed", headers=session)
    assert status == 200
    assert re.search(r'<dt>Error</dt><dd><span class="error">round 1 released nothing',
                     body.decode())
