"""The privacy inputs' checks refuse what is not a real number, naming it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from fedhh.errors import PrivacyError
from fedhh.privacy._checks import check_delta, check_eps, check_positive, check_rate
from fedhh.privacy.ledger import PrivacyLedger


@pytest.mark.parametrize("value", [True, False, np.bool_(True), "1.0", None, b"1"])
def test_a_bool_or_a_string_is_not_an_epsilon(value: object) -> None:
    # (before, float(True) made True an epsilon of 1.0, and "1.0" one of 1.0)
    for check in (check_eps, check_rate, check_delta):
        with pytest.raises(PrivacyError, match=rf"x must be a real number, not "
                                               rf"{type(value).__name__}: got "):
            check(value, "x")  # type: ignore[arg-type]
    with pytest.raises(PrivacyError, match="x must be a real number"):
        check_positive("x", value)  # type: ignore[arg-type]


def test_numbers_of_every_kind_still_pass_and_nan_and_inf_do_not() -> None:
    assert check_eps(np.float32(0.5)) == 0.5 and check_eps(np.int64(2)) == 2.0
    assert check_eps(3) == 3.0 and check_rate(1) == 1.0 and check_delta(np.float64(1e-6)) == 1e-6
    for bad in (math.nan, math.inf, -1.0, 0.0):
        with pytest.raises(PrivacyError, match="eps_agg must be a positive finite number"):
            check_eps(bad, "eps_agg")


def test_a_ledger_declared_or_stored_with_a_bool_epsilon_is_refused() -> None:
    with pytest.raises(PrivacyError, match="eps_agg must be a real number, not bool"):
        PrivacyLedger.open(True, 1e-6, 4, 100, eps_local=0.5)  # type: ignore[arg-type]
    stored = PrivacyLedger.open(8.0, 1e-6, 4, 100, eps_local=0.5).to_dict()
    with pytest.raises(PrivacyError, match="malformed ledger: eps_local must be a real number"):
        PrivacyLedger.from_dict({**stored, "eps_local": True})
