"""A released round's ``trimmed`` prefixes (kept, never queried: the next round's segment left
them out) on the run page: the round's card counts them, with a short explanation, and a note
above the rounds says what it means and what to change (as ``fedhh admin status`` does).
Before, the dashboard showed nothing of them, though the API's RoundSummary carries them."""

from __future__ import annotations

from types import SimpleNamespace

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard.pages import attempt_card, timeline
from fedhh_coordinator.dashboard.timeline import attempt_view
from fedhh_coordinator.dashboard.views import _trim_note
from fedhh_coordinator.store import RoundRow

T0 = 1_800_000_000.0


def _rounds() -> list[RoundRow]:
    # (a released round's stored report holds its list, its trimmed prefixes, how many the
    # next round queries and at what segment; an attempt's summary holds none of it before)
    released = {"prefixes": 1, "segment_bits": 16, "kept": 25, "finished": 0, "trimmed": 24,
                "continuing": 1, "next_segment_bits": 16}
    return [RoundRow("r", 1, 1, "released", "", 900, released, T0, T0 + 10),
            RoundRow("r", 2, 1, "aborted", "too few", 0, {"steps": []}, T0 + 11, T0 + 12),
            RoundRow("r", 2, 2, "open", "", 0, {"steps": []}, T0 + 13, None)]


CONFIG = RunConfig(rounds=4, max_bits=48)


def test_the_round_card_counts_the_prefixes_it_could_not_have_queried() -> None:
    rows = _rounds()
    views = [attempt_view(r, 800, None, 0, T0 + 20) for r in rows]
    assert [v.trimmed for v in views] == [24, None, None]
    card = attempt_card(views[0])
    assert "24 kept not queried next round" in card
    assert "heavy items under the others are not found" in card  # (its title)
    assert "not queried" not in attempt_card(views[1])


def test_the_rounds_carry_a_note_that_says_what_to_change() -> None:
    rows = _rounds()
    note = _trim_note(rows, CONFIG)
    assert note.startswith("24 kept prefixes could not be queried: round 1 kept 25 prefixes "
                           "to extend and the next round queried 1 (16-bit segments")
    assert "more --rounds" in note
    done2 = RoundRow("r", 2, 3, "released", "", 900, {"prefixes": 1, "segment_bits": 16,
                                                      "trimmed": 0}, T0 + 14, T0 + 20)
    assert _trim_note([*rows, done2], CONFIG) == note
    attempts = tuple(attempt_view(r, 800, None, 0, T0 + 20) for r in rows)
    page = timeline(SimpleNamespace(attempts=attempts, trim_note=note))  # type: ignore[arg-type]
    assert "Note: 24 kept prefixes could not be queried" in page
    # A run whose rounds queried every kept prefix (or a summary from before): no note.
    quiet = [RoundRow("r", 1, 1, "released", "", 900, {"prefixes": 1, "kept": 2}, T0, T0 + 1)]
    assert _trim_note(quiet, CONFIG) == ""
    assert attempt_view(quiet[0], 800, None, 0, T0).trimmed == 0
