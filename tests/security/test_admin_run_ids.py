"""A run id someone sends (GetRun, CancelRun, GetResults, StartRun) is named in a refusal by a
short prefix and its length, not quoted whole: a 500,000-character id came back in a
1,000-character NOT_FOUND of 'x's (the status details' cut), the length never said."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fedhh.config import RunConfig
from fedhh.errors import ConfigError, NotFoundError
from fedhh_coordinator.runs import create_run
from fedhh_coordinator.store import Store

HUGE = "x" * 500_000


def test_an_unknown_huge_run_id_is_named_by_its_prefix_and_length(tmp_path: Path) -> None:
    store = Store(tmp_path / "store.sqlite")
    try:
        with pytest.raises(NotFoundError) as error:
            store.run(HUGE)
        with pytest.raises(ConfigError) as refused:
            asyncio.run(create_run(store, RunConfig(), HUGE))
    finally:
        store.close()
    for message in (str(error.value), str(refused.value)):
        assert "(500000 characters)" in message and len(message) < 200, message[:300]
