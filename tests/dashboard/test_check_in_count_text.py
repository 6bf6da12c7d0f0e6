"""The dashboard's line for a check-in under way counts its pool in words that agree with the
count (``views.progress_text``), as ``fedhh admin wait`` and ``fedhh up`` do (a8fb20b)."""

from __future__ import annotations

from fedhh_coordinator.dashboard.views import progress_text
from fedhh_coordinator.progress import Progress


def test_a_check_in_of_one_device_says_device() -> None:
    """Before, the pool of one read '1 devices so far'."""
    progress = Progress(round=4, attempt=1, phase="check-in")
    assert progress_text(progress, 1) == "round 4.1: check-in, 1 device so far"
    assert progress_text(progress, 0) == "round 4.1: check-in, 0 devices so far"
    assert progress_text(progress, 12) == "round 4.1: check-in, 12 devices so far"
