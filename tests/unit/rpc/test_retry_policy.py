"""The devices' retry schedule: full-jitter exponential backoff, patient beyond its tries."""

from __future__ import annotations

import random

from fedhh.rpc.device_client import RetryPolicy


def test_backoff_is_full_jitter_under_a_growing_cap() -> None:
    policy = RetryPolicy(attempts=5, initial_backoff_s=0.1, max_backoff_s=2.0,
                         patient_max_backoff_s=30.0)
    rng = random.Random(7)
    for attempt, cap in [(0, 0.1), (1, 0.2), (3, 0.8), (4, 1.6)]:
        waits = [policy.backoff(attempt, rng) for _ in range(2000)]
        assert min(waits) >= 0 and max(waits) <= cap
        # Uniform on [0, cap]: 2000 draws all below 0.9 cap has probability 0.9^2000 < 1e-90.
        assert max(waits) > 0.9 * cap
    # Past its tries a patient call keeps backing off further, up to patient_max_backoff_s.
    for attempt, cap in [(5, 3.2), (7, 12.8), (9, 30.0), (10_000, 30.0)]:
        waits = [policy.backoff(attempt, rng) for _ in range(2000)]
        assert max(waits) <= cap and max(waits) > 0.9 * cap


def test_a_patient_cap_below_the_cap_never_shortens_the_wait() -> None:
    policy = RetryPolicy(attempts=1, initial_backoff_s=1.0, max_backoff_s=4.0,
                         patient_max_backoff_s=0.5)
    rng = random.Random(1)
    assert max(policy.backoff(6, rng) for _ in range(2000)) > 3.6
