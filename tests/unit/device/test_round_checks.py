"""A device process's memoised public checks: one memo per round, computed once per value
whatever the number of devices and rounds the process hosts, dropped with the round's last
device."""

from __future__ import annotations

from fedhh.secagg import PublicChecks, Stage
from fedhh.secagg.simulate import Cohort, make_cohort
from fedhh_device.secagg_run import RoundChecks


def _share_keys_of_every_device(cohort: Cohort, checks: PublicChecks) -> None:
    """Every device of ``cohort`` through the key-sharing stage with ``checks``."""
    server = cohort.server()
    devices = {u: cohort.device(u, checks=checks) for u in range(1, cohort.config.num_devices + 1)}
    for device in devices.values():
        server.handle(Stage.ADVERTISE_KEYS, device.advertise_keys())
    for u, request in server.close_stage().items():
        devices[u].share_keys(request)  # type: ignore[arg-type]


def test_a_round_s_checks_are_computed_once_per_value_for_all_its_devices() -> None:
    n, k = 30, 8
    cohort = make_cohort(n, 16, k, 5, n_min=5, device_auth=True, consistency_check=True)
    rounds = RoundChecks()
    with rounds.of(cohort.signed.payload) as checks:
        _share_keys_of_every_device(cohort, checks)
        # n devices checked k admissions and parsed 2k keys each: n admissions and 2n keys,
        # each computed once.
        admission = checks.admission.cache_info()  # type: ignore[attr-defined]
        keys = checks.peer_key.cache_info()  # type: ignore[attr-defined]
        assert (admission.misses, admission.hits) == (n, n * k - n)
        assert (keys.misses, keys.hits) == (2 * n, 2 * n * k - 2 * n)


def test_each_round_has_its_memo_and_it_ends_with_the_round_s_last_device() -> None:
    rounds = RoundChecks()
    with rounds.of(b"round a") as a, rounds.of(b"round b") as b:
        assert a is not b and len(rounds) == 2
        with rounds.of(b"round a") as again:
            assert again is a  # a second device of round a shares its memo
        assert len(rounds) == 2  # round a still has a device here
    assert len(rounds) == 0
    with rounds.of(b"round a") as later:
        assert later is not a  # a round taken up again starts afresh
