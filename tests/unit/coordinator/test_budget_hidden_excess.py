"""A lifetime budget's refusal in words when only the exact sum exceeds it, and none where the
float sum does too: even a float sum past the largest double, which fsum refuses to round."""

from __future__ import annotations

import sys

from fedhh_coordinator.budgets import LifetimeBudget


def test_ten_tenths_under_one_exceed_only_exactly_and_say_so() -> None:
    words = LifetimeBudget(eps=1.0).hidden_excess([(0.1, 0.0, 9)], 0.1, 0.0)
    assert words is not None and words.startswith("eps: ")


def test_a_sum_past_the_largest_double_is_no_hidden_excess() -> None:
    """Before, fsum's OverflowError escaped the check-in's refusal."""
    most = sys.float_info.max
    assert LifetimeBudget(eps=most).hidden_excess([(most, 0.0, 1)], most, 0.0) is None
