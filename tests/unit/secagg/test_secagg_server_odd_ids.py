"""SecAggServer's verdicts on ids of odd types: a bool, an int subclass, a numpy integer, a
float, text. cdc31ac took the id's type test and the recipients' out of their calls; these
pin the verdicts the checks gave before (each case passes on cdc31ac's parent too)."""

from __future__ import annotations

import dataclasses
import enum

import numpy as np
import pytest
from secagg_testkit import drive_to, small_cohort

from fedhh.secagg.errors import ProtocolViolation, Violation
from fedhh.secagg.messages import EncryptedShare, ShareKeysResponse, Stage
from fedhh.secagg.simulate import SimulatedRound


class _Sub(int):
    pass


class _Named(enum.IntEnum):
    TWO = 2


def _at_share_keys() -> tuple[SimulatedRound, ShareKeysResponse]:
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    return driver, driver.devices[2].share_keys(driver.pending[2])  # type: ignore[arg-type]


def _verdict(driver: SimulatedRound, stage: object, message: object) -> object:
    try:
        return driver.server.handle(stage, message)  # type: ignore[arg-type]
    except ProtocolViolation as violation:
        return violation.reason


# The sender's id: an int of any subclass but bool is an id (as isinstance said before).
@pytest.mark.parametrize(("device_id", "expected"), [
    (2, True), (_Sub(2), True), (_Named.TWO, True),
    (True, Violation.UNKNOWN_DEVICE), (False, Violation.UNKNOWN_DEVICE),
    (np.int64(2), Violation.UNKNOWN_DEVICE), (2.0, Violation.UNKNOWN_DEVICE),
    ("2", Violation.UNKNOWN_DEVICE), (None, Violation.UNKNOWN_DEVICE),
    (0, Violation.UNKNOWN_DEVICE), (9, Violation.UNKNOWN_DEVICE),
    (_Sub(9), Violation.UNKNOWN_DEVICE)], ids=repr)
def test_a_senders_id_of_any_type_gets_the_verdict_it_got_before(device_id: object,
                                                                 expected: object) -> None:
    driver, response = _at_share_keys()
    assert _verdict(driver, Stage.SHARE_KEYS,
                    dataclasses.replace(response, device_id=device_id)) == expected


def test_another_sessions_message_is_refused_as_such_before_its_id_is_read() -> None:
    driver, response = _at_share_keys()
    assert _verdict(driver, Stage.SHARE_KEYS, dataclasses.replace(
        response, session_id=bytes(32), device_id=True)) is Violation.WRONG_SESSION


# A share's recipient: exactly an int (a subclass is refused, as ``type(d) is int`` did).
@pytest.mark.parametrize("odd", [True, _Sub(3), _Named.TWO, np.int64(3), 3.0], ids=repr)
def test_a_share_whose_recipient_is_not_exactly_an_int_is_malformed(odd: object) -> None:
    driver, response = _at_share_keys()
    shares = tuple(dataclasses.replace(s, dst=odd) if i == 0 else s
                   for i, s in enumerate(response.shares))
    assert all(isinstance(s, EncryptedShare) for s in shares)
    assert _verdict(driver, Stage.SHARE_KEYS, dataclasses.replace(
        response, shares=shares)) is Violation.MALFORMED


def test_the_stage_is_matched_by_its_value_and_an_unknown_one_is_malformed() -> None:
    driver, response = _at_share_keys()
    assert _verdict(driver, 7, response) is Violation.MALFORMED
    assert _verdict(driver, int(Stage.SHARE_KEYS), response) is True
    assert _verdict(driver, Stage.SHARE_KEYS, response) is False  # (its identical repeat)
    assert _verdict(driver, Stage.ADVERTISE_KEYS, response) is Violation.MALFORMED
