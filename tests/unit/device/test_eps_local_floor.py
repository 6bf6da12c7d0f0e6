"""A device refuses a task's eps_local before it computes a report: above its limit (a weaker
local guarantee), or not a positive number, which is no guarantee at all and was refused as
"above this device's limit". The web device words both the same (clients/web/test/
eps_limit_message.test.ts)."""

from __future__ import annotations

import math

import pytest

from fedhh.errors import ConfigError
from fedhh_device.secagg_run import Floors


@pytest.mark.parametrize(("eps", "message"), [
    (0.0, "task asks for eps_local 0.0, not a positive number"),
    (-1.0, "task asks for eps_local -1.0, not a positive number"),
    (math.nan, "task asks for eps_local nan, not a positive number"),
    (12.0, "task asks for eps_local 12.0, above this device's limit 10.0"),
    (math.inf, "task asks for eps_local inf, above this device's limit 10.0"),
])
def test_an_eps_local_out_of_range_is_refused_saying_which_way(eps: float, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        Floors().check_eps_local(eps)
    assert str(refused.value) == message


@pytest.mark.parametrize("eps", [5e-324, 1.0, 10.0])
def test_an_eps_local_in_range_passes(eps: float) -> None:
    Floors().check_eps_local(eps)
