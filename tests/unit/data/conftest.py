"""Fixtures for the dataset tests."""

from __future__ import annotations

import pytest
from _data_helpers import TINY_USERS

from fedhh.data.dataset import FederatedDataset, from_user_counts


@pytest.fixture
def tiny() -> FederatedDataset:
    """Five users, one with no items, one with a count above uint16."""
    return from_user_counts(TINY_USERS, name="tiny", provenance="test")
