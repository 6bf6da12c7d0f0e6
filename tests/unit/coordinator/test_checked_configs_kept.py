"""The stored configs kept checked (``runs._valid_config``) are bounded by their JSON's bytes,
not by count alone: a config holds its deny list (~12 MB of JSON at 1,000,000 items), and an
``lru_cache`` of 64 keyed by that text held up to 64 of them, text and RunConfig both. A config
read again while kept is not checked again."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

import pytest

from fedhh.config import RunConfig
from fedhh_coordinator import runs

CONFIGS = 30
ITEMS = 5_000


def _texts(first: int, count: int) -> list[str]:
    """The JSON of ``count`` stored configs, each with its own ITEMS deny-list items."""
    base: dict[str, Any] = RunConfig(eps_agg=4.0, delta=1e-6, target_devices=400,
                                     min_devices=300).to_dict()
    return [json.dumps({**base, "deny_list": [f"run{n:03d}-item{k:05d}" for k in range(ITEMS)]},
                       sort_keys=True) for n in range(first, first + count)]


def _kept(weight: int) -> runs.Latest[bytes, tuple[RunConfig, int]]:
    """An empty store of checked configs of at most ``weight`` bytes of JSON."""
    return runs.Latest(runs.CHECKED_CONFIGS, weight, lambda kept: kept[1])


def test_the_configs_kept_are_bounded_by_their_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    warm, *texts = _texts(0, CONFIGS + 1)
    bound = 3 * len(warm)  # (three such configs' JSON)
    monkeypatch.setattr(runs, "_checked", _kept(bound))
    runs._valid_config(warm)  # (what a first check loads once, not counted)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for text in texts:
            runs._valid_config(text)
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # at most three configs kept, each a RunConfig of a few times its JSON's bytes (1.1 MB
    # measured); the 30 kept with their JSON as the key held 11.0 MB
    assert held < 10 * bound, (held, bound)


def _counted_checks(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The first deny item of each config ``RunConfig.validate`` checks from now on."""
    checks: list[str] = []
    validate = RunConfig.validate

    def counted(self: RunConfig, *args: Any, **kwargs: Any) -> RunConfig:
        checks.append(self.deny_list[0])
        return validate(self, *args, **kwargs)

    monkeypatch.setattr(RunConfig, "validate", counted)
    return checks


def test_a_config_kept_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    checks = _counted_checks(monkeypatch)
    text = _texts(100, 1)[0]
    configs = {id(runs._valid_config(text)) for _ in range(5)}
    assert len(checks) == 1 and len(configs) == 1


def test_a_config_over_the_bound_is_kept_while_it_is_the_latest(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A config whose JSON alone is over the bytes kept (16 MiB: a deny list of ~1,000,000
    long items) is kept until another is read. Before, it was dropped as soon as kept, and
    checked again at every read (~1 s and more each: GetResults, ListRuns, the runner)."""
    first, second = _texts(200, 2)
    monkeypatch.setattr(runs, "_checked", _kept(len(first) // 2))
    checks = _counted_checks(monkeypatch)
    configs = {id(runs._valid_config(first)) for _ in range(5)}
    assert len(checks) == 1 and len(configs) == 1
    runs._valid_config(second)  # (the latest now: the first one goes)
    runs._valid_config(first)
    assert checks == ["run200-item00000", "run201-item00000", "run200-item00000"]
