"""A device process's memoised public checks: one memo per round, computed once per value
whatever the number of devices and rounds the process hosts, dropped with the round's last
device."""

from __future__ import annotations

import dataclasses

from fedhh.secagg import PublicChecks, Stage
from fedhh.secagg.simulate import Cohort, make_cohort
from fedhh_device.secagg_run import RoundChecks, memoised_checks


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
        # n devices hashed the k + 1 leaves of their rosters and parsed 2k keys each (each
        # device its own copy of the config): n leaves and 2n keys, each computed once.
        leaves = checks.members.keywords["leaf"].cache_info()  # type: ignore[attr-defined]
        assert (leaves.misses, leaves.hits) == (n, n * (k + 1) - n)
        keys = checks.peer_key.cache_info()  # type: ignore[attr-defined]
        assert (keys.misses, keys.hits) == (2 * n, 2 * n * k - 2 * n)


def test_a_remembered_leaf_is_that_of_the_config_s_identity_tree() -> None:
    """The memo is of leaf hashes, keyed by the round's salt, id and keys: a roster proof is
    checked against each config's own root, and keys swapped for another device's or an
    admission of another round are refused however many leaves are remembered."""
    cohort = make_cohort(12, 16, 4, 3, n_min=3, device_auth=True, seed=1)
    other = make_cohort(12, 16, 4, 3, n_min=3, device_auth=True, seed=2)
    admission, config = cohort.admissions[3], cohort.config
    members = memoised_checks().members
    assert members([(3, admission.keys)], admission.proof, config)
    assert members([(3, admission.keys)], admission.proof, dataclasses.replace(config))
    assert not members([(3, admission.keys)], admission.proof, other.config)
    assert not members([(3, admission.keys)], admission.proof, dataclasses.replace(
        config, device_auth=False, identity_root=None))
    forged = dataclasses.replace(admission, s_pk=cohort.admissions[4].s_pk)
    assert not members([(3, forged.keys)], admission.proof, config)
    assert not members([(3, other.admissions[3].keys)], other.admissions[3].proof, config)


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
