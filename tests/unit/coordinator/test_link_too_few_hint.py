"""What an abort for too few devices says: refusals, and devices that fell short later."""

from __future__ import annotations

from fedhh_coordinator.link import too_few_hint


def test_devices_that_fell_short_after_taking_part_are_called_late_not_refusing() -> None:
    """A new operator's run on a loaded machine: 400 devices advertised keys, 104 made the
    10 s key-sharing window. The reason pointed only at refusals ("refused the round"),
    which their logs never said; they said "late"."""
    hint = too_few_hint({"ADVERTISE_KEYS": 400, "SHARE_KEYS": 104}, 400, 300)
    assert "accepted per stage: advertise_keys 400, share_keys 104; 400 devices in the cohort" \
        in hint
    assert "n_min 300" in hint
    assert "outcome late" in hint and "--stage-ms" in hint
    # every device of the cohort advertised keys: none refused (a device refuses before it
    # contacts the aggregator), so the refusals are not named (before, they were, three
    # quarters of the reason)
    assert "refuse" not in hint
    # (as the devices log them since 511c7db: a late one no longer says "secure aggregation
    # failed", which only a timed-out one does)
    assert 'their logs say "late for the round" (outcome late)' in hint
    assert '"secure aggregation failed" (outcome timed_out)' in hint


def test_a_round_no_device_reached_names_the_refusals_alone() -> None:
    for stages in ({"ADVERTISE_KEYS": 0}, {}, {"ADVERTISE_KEYS": 250, "SHARE_KEYS": 250}):
        hint = too_few_hint(stages, 400, 300)
        assert '"refused the round" and why)' in hint
        assert "late" not in hint and "--stage-ms" not in hint
    assert "accepted per stage" not in too_few_hint({}, 400, 300)


def test_the_refusals_name_the_devices_privacy_budget_and_epsilon_cap() -> None:
    """A device refuses a report that would take its local epsilons' sum past its lifetime
    cap, or a task above its --max-eps-local: the list of refusals left both out, the usual
    reasons once the devices have taken part in earlier runs."""
    hint = too_few_hint({}, 400, 300)
    assert "privacy budget spent" in hint and "--lifetime-eps-local" in hint
    assert "--max-eps-local" in hint


def test_a_first_stage_that_missed_devices_names_its_window() -> None:
    """`--stage-ms 5` (meant as seconds) on 100 devices: the round opened, and every task
    came after its 5 ms advertisement window; the reason named refusals alone."""
    for stages in ({"ADVERTISE_KEYS": 0}, {}):
        hint = too_few_hint(stages, 100, 90, advertise_ms=5)
        assert ("a device whose task reached it after the key-advertisement window closed, "
                "5 ms after the round opened (--advertise-ms, or --stage-ms for every stage: "
                "milliseconds), was late") in hint
    assert "key-advertisement" not in too_few_hint({"ADVERTISE_KEYS": 100}, 100, 90,
                                                   advertise_ms=5)


def test_refusals_are_named_only_where_the_first_stage_missed_devices() -> None:
    """`fedhh up --dataset` with 3,000 devices on a loaded machine: all 3,000 advertised keys,
    2,153 sent masked input in time. The reason was 1,000 characters, most of them the
    refusals no device had made."""
    full = too_few_hint({"ADVERTISE_KEYS": 3000, "SHARE_KEYS": 3000, "MASKED_INPUT": 2153},
                        3000, 2700)
    assert "refuse" not in full and "outcome late" in full
    assert full.startswith(" (accepted per stage: advertise_keys 3000, share_keys 3000, "
                           "masked_input 2153; 3000 devices in the cohort, n_min 2700; devices "
                           "that took part and then missed a stage's window were late")
    assert len(full) < 450
    short = too_few_hint({"ADVERTISE_KEYS": 2990, "SHARE_KEYS": 2000}, 3000, 2700)
    assert '"refused the round" and why' in short and "outcome late" in short


def test_the_refusals_say_the_devices_gave_up_their_seats() -> None:
    """A device that refuses a round sends its aggregator its Decline (no keys, no report):
    the hint said such devices "never contact the aggregator", which an operator reading the
    aggregator's declined count would find untrue."""
    hint = too_few_hint({"ADVERTISE_KEYS": 0}, 25, 15)
    assert "only give up their seats" in hint
    assert "never contact the aggregator" not in hint


def test_the_members_that_declined_are_named_beside_the_stages_counts() -> None:
    """The aggregator counts the members that gave up their seats (GetOutcome's declined): an
    operator reading a too-few abort sees how many of the missing refused. Where the service
    does not say (an aggregator before the count), nothing is claimed: not "0 declined"."""
    hint = too_few_hint({"ADVERTISE_KEYS": 12}, 25, 15, declined=9)
    assert "accepted per stage: advertise_keys 12; 9 declined; 25 devices in the cohort" in hint
    assert "; 0 declined; " in too_few_hint({"ADVERTISE_KEYS": 12}, 25, 15, declined=0)
    assert "(3 declined; 25 devices in the cohort" in too_few_hint({}, 25, 15, declined=3)
    assert "declined" not in too_few_hint({"ADVERTISE_KEYS": 12}, 25, 15)
    # The first stage's window is named only where the declines leave members unaccounted for.
    window = "key-advertisement window closed, 1000 ms"
    assert window in too_few_hint({"ADVERTISE_KEYS": 12}, 25, 15, 1000, declined=9)
    assert window not in too_few_hint({"ADVERTISE_KEYS": 12}, 25, 15, 1000, declined=13)
    assert window in too_few_hint({"ADVERTISE_KEYS": 12}, 25, 15, 1000)
