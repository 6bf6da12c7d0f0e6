"""``SecAggServer.handle_decline``: a member that refuses its task gives up its seat before it
advertises its keys, so the first stage stops waiting for it (``can_close_early`` once every
other member has advertised) instead of running to its deadline; a repeat changes nothing; a
member that advertised, or a stage past the first, cannot decline; and the round releases the
others' sum as after a dropout, the declined member counted nowhere."""

from __future__ import annotations

import numpy as np
import pytest
from secagg_testkit import assert_correct, small_cohort

from fedhh.secagg import AbortReason, Decline, ProtocolViolation, SecAggAbort, Stage, Violation
from fedhh.secagg.simulate import DropoutPlan, SimulatedRound

DECLINING = 3


def _round() -> SimulatedRound:
    cohort = small_cohort()
    reports = {u: np.array([u % cohort.config.dimension]) for u in range(1, 9)}
    return SimulatedRound(cohort, reports, DropoutPlan.at(Stage.ADVERTISE_KEYS, {DECLINING}))


def test_a_declined_seat_lets_the_first_stage_close_once_the_others_advertised() -> None:
    driver = _round()
    server, session = driver.server, driver.cohort.session_id
    assert server.handle_decline(Decline(session, DECLINING)) is True
    assert server.expected_count() == 7
    assert DECLINING not in server.expected()
    driver.answer()  # every member but the declining one advertises
    assert server.received() == 7
    # Before, the stage waited for all 8 members: only its deadline closed it.
    assert server.can_close_early()
    driver.close()
    outcome = driver.run()
    assert_correct(outcome)
    assert DECLINING not in outcome.contributors
    assert outcome.result is not None and outcome.result.num_contributors == 7


def test_a_repeated_decline_changes_nothing() -> None:
    driver = _round()
    server, session = driver.server, driver.cohort.session_id
    assert server.handle_decline(Decline(session, DECLINING)) is True
    assert server.handle_decline(Decline(session, DECLINING)) is False
    assert server.expected_count() == 7


def test_a_declined_member_cannot_advertise_nor_an_advertised_one_decline() -> None:
    cohort = small_cohort()
    server = cohort.server()
    server.handle_decline(Decline(cohort.session_id, DECLINING))
    with pytest.raises(ProtocolViolation) as refused:
        server.handle(Stage.ADVERTISE_KEYS, cohort.device(DECLINING).advertise_keys())
    assert refused.value.reason == Violation.NOT_IN_ROUND
    assert server.received() == 0
    server.handle(Stage.ADVERTISE_KEYS, cohort.device(1).advertise_keys())
    with pytest.raises(ProtocolViolation) as refused:
        server.handle_decline(Decline(cohort.session_id, 1))
    assert refused.value.reason == Violation.NOT_IN_ROUND
    assert server.expected_count() == 7  # (8 members, one declined; the advertiser stays)


@pytest.mark.parametrize(("session", "device", "reason"), [
    (b"\0" * 32, DECLINING, Violation.WRONG_SESSION),
    (None, 0, Violation.UNKNOWN_DEVICE),
    (None, 9, Violation.UNKNOWN_DEVICE),
])
def test_a_decline_for_another_round_or_no_member_is_refused(session: bytes | None, device: int,
                                                             reason: Violation) -> None:
    cohort = small_cohort()
    server = cohort.server()
    with pytest.raises(ProtocolViolation) as refused:
        server.handle_decline(Decline(session or cohort.session_id, device))
    assert refused.value.reason == reason
    assert server.expected_count() == 8


def test_a_decline_after_the_first_stage_is_late() -> None:
    driver = _round()
    driver.step()
    assert driver.server.stage == Stage.SHARE_KEYS
    with pytest.raises(ProtocolViolation) as refused:
        driver.server.handle_decline(Decline(driver.cohort.session_id, 1))
    assert refused.value.reason == Violation.LATE


def test_every_member_declining_closes_the_stage_at_once_and_aborts() -> None:
    cohort = small_cohort()
    server = cohort.server()
    for u in range(1, 9):
        server.handle_decline(Decline(cohort.session_id, u))
    assert server.can_close_early()
    with pytest.raises(SecAggAbort) as aborted:
        server.close_stage()
    assert aborted.value.reason == AbortReason.TOO_FEW_DEVICES
