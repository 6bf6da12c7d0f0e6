"""A device process refuses a malformed enrollment answer instead of keeping it.

Before, an answer without a 32-byte credential and a 32-byte coordinator key (a service that is
not a fedhh coordinator's device port, a broken proxy answering an empty message) was kept in
devices.json as the device's identity: every check-in was then refused, every task's signature
failed, and the process told the operator to mint new tokens. The web device refuses such an
answer (src/wire.ts); the Python device now does too, and keeps nothing for that user.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from fedhh.errors import ConfigError
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_device.fleet import Fleet
from fedhh_device.report import DeviceData


class Answers:
    """Enroll answers ``answers[user]`` (by the request's label)."""

    def __init__(self, answers: dict[int, pb.EnrollResponse]) -> None:
        self.answers = answers

    async def Enroll(self, request: pb.EnrollRequest, metadata: Any = None) -> pb.EnrollResponse:
        return self.answers[int(request.label.removeprefix("user-"))]


@pytest.mark.parametrize("bad", [
    pb.EnrollResponse(),
    pb.EnrollResponse(device_id=3, credential=b"c" * 32),
    pb.EnrollResponse(device_id=3, credential=b"c" * 16, coordinator_public_key=b"k" * 32),
    pb.EnrollResponse(device_id=3, credential=b"c" * 32, coordinator_public_key=b"k" * 33),
])
def test_a_malformed_enrollment_answer_is_refused_and_nothing_kept_for_it(
        tmp_path: Path, bad: pb.EnrollResponse) -> None:
    good = pb.EnrollResponse(device_id=4, credential=b"c" * 32, coordinator_public_key=b"k" * 32)
    data = DeviceData(("東京",), np.ones(1, dtype=np.int64))
    fleet = Fleet([(1, data), (2, data)], Answers({1: bad, 2: good}), {1: "t1", 2: "t2"},
                  lambda address: None, state_dir=tmp_path)
    with pytest.raises(ConfigError, match=r"enrollment answer for user 1 is malformed .*"
                                          r"not 32 and 32\): is --coordinator the device port"):
        asyncio.run(fleet.enroll_all())
    # The well-formed enrolment beside it is kept; nothing is kept for user 1.
    saved = json.loads((tmp_path / "devices.json").read_text())
    assert sorted(saved) == ["2"] and saved["2"]["device_id"] == 4
