"""TypeScript devices (clients/web/src/device.ts, in a node process) in simulated SecAgg+ rounds
beside Python devices, with the Python server: the released sum is the sum of the reports, with
and without device_auth and the consistency check, and with dropouts; a request the server
tampers with makes a TypeScript device abort for the same reason as a Python device; the floors
and retries behave as in Python."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest
import webkit
from tsdevice import NodeDevices, TypeScriptDevice

from fedhh.secagg.config import SignedConfig
from fedhh.secagg.device import DevicePolicy, RoundKeys, SecAggDevice
from fedhh.secagg.errors import AbortReason, SecAggAbort
from fedhh.secagg.graph import neighbours_of
from fedhh.secagg.messages import (
    EncryptedShare,
    MaskedInputRequest,
    ShareKeysRequest,
    Stage,
    UnmaskRequest,
)
from fedhh.secagg.simulate import Cohort, DropoutPlan, SimulatedOutcome, SimulatedRound, make_cohort

REASON = webkit.skip_reason()
if REASON is not None:
    pytest.skip(REASON, allow_module_level=True)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bridge() -> Iterator[NodeDevices]:
    try:
        dist = webkit.build()
    except webkit.BuildError as error:
        pytest.fail(str(error))
    assert webkit.NODE is not None
    devices = NodeDevices(webkit.NODE, dist)
    try:
        yield devices
    finally:
        devices.close()


def _reports(n: int, dimension: int, seed: int) -> dict[int, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {u: np.flatnonzero(rng.random(dimension) < 0.3) for u in range(1, n + 1)}


def _round(bridge: NodeDevices, cohort: Cohort, ts_ids: set[int], *,
           dropouts: DropoutPlan | None = None,
           to_device: Callable[[Stage, int, Any], Any] | None = None) -> SimulatedOutcome:
    cfg = cohort.config
    driver = SimulatedRound(cohort, _reports(cfg.num_devices, cfg.dimension, 5), dropouts,
                            to_device=to_device)
    for u in ts_ids:
        identity = cohort.identity_keys.get(u)
        driver.devices[u] = TypeScriptDevice(  # type: ignore[assignment]
            bridge, cohort.signed, cohort.coordinator_public, u, cfg.modulus_bits,
            identity_seed=None if identity is None else identity.private_bytes_raw(),
            admission=cohort.admissions.get(u), round_keys=cohort.round_keys.get(u))
    return driver.run()


def _assert_released_sum(outcome: SimulatedOutcome) -> None:
    assert outcome.abort is None, outcome.abort
    assert not outcome.device_aborts, outcome.device_aborts
    assert outcome.result is not None
    np.testing.assert_array_equal(outcome.result.total.astype(np.int64), outcome.expected_total)
    assert outcome.result.num_contributors == len(outcome.contributors)
    assert all(len(kinds) == 1 for kinds in outcome.revealed.values()), outcome.revealed


def test_typescript_and_python_devices_release_the_sum(bridge: NodeDevices) -> None:
    cohort = make_cohort(n=10, dimension=50, k=4, t=3, seed=b"web-mixed")
    outcome = _round(bridge, cohort, {2, 5, 9})
    _assert_released_sum(outcome)
    assert outcome.contributors == frozenset(range(1, 11))


def test_with_device_auth_and_the_consistency_check(bridge: NodeDevices) -> None:
    """TypeScript admissions and consistency signatures verify in Python, and back."""
    cohort = make_cohort(n=8, dimension=30, k=4, t=3, device_auth=True, consistency_check=True,
                         seed=b"web-auth")
    outcome = _round(bridge, cohort, {1, 4, 6})
    _assert_released_sum(outcome)
    assert outcome.result is not None and len(outcome.result.signatures) >= 3


def test_round_keys_other_than_the_admitted_ones_are_refused_naming_the_likely_cause(
        bridge: NodeDevices) -> None:
    """A page reloaded mid-round takes its task again with new round keys (its task memory was
    in memory only), but the cohort admitted the keys of its first check-in: the device must
    not join, and the refusal names that benign cause instead of only a coordinator that is
    not the real one."""
    cohort = make_cohort(n=8, dimension=30, k=4, t=3, device_auth=True, seed=b"web-reload")
    identity = cohort.identity_keys[4]
    with pytest.raises(RuntimeError, match=r"admission is not the coordinator's for this device "
                       r"and its keys: likely this device took this task before with other "
                       r"round keys \(e\.g\. before the page was reloaded\)"):
        TypeScriptDevice(bridge, cohort.signed, cohort.coordinator_public, 4,
                         cohort.config.modulus_bits, identity_seed=identity.private_bytes_raw(),
                         admission=cohort.admissions[4], round_keys=RoundKeys.generate(os.urandom))


def test_dropouts_of_either_kind(bridge: NodeDevices) -> None:
    """TypeScript device 5 drops before its masked input (its s-shares rebuild its mask key),
    TypeScript device 2 before unmasking, Python device 7 before its masked input."""
    cohort = make_cohort(n=10, dimension=40, k=6, t=3, seed=b"web-drops")
    dropouts = DropoutPlan({Stage.MASKED_INPUT: frozenset({5, 7}), Stage.UNMASK: frozenset({2})})
    outcome = _round(bridge, cohort, {2, 5, 9}, dropouts=dropouts)
    _assert_released_sum(outcome)
    assert outcome.contributors == frozenset(range(1, 11)) - {5, 7}
    assert outcome.revealed[5] == {"s"} and outcome.revealed[2] == {"b"}


def test_a_device_lost_at_each_stage(bridge: NodeDevices) -> None:
    """A TypeScript device falls silent before each of the five stages (a tab closed there),
    and Python devices before their masked input and before unmasking: the round is released
    over those that sent a masked input, the lost ones' reports are not in the sum, and each
    device's seeds are revealed as the protocol allows (s for those lost after sharing keys but
    before their masked input, b for every contributor, nothing for the rest)."""
    cohort = make_cohort(n=16, dimension=40, k=15, t=4, device_auth=True,
                         consistency_check=True, seed=b"web-drop-every-stage")
    lost = {Stage.ADVERTISE_KEYS: {1}, Stage.SHARE_KEYS: {2}, Stage.MASKED_INPUT: {3, 10},
            Stage.CONSISTENCY_CHECK: {4}, Stage.UNMASK: {5, 12}}
    dropouts = DropoutPlan({stage: frozenset(ids) for stage, ids in lost.items()})
    outcome = _round(bridge, cohort, {1, 2, 3, 4, 5, 6, 7}, dropouts=dropouts)
    _assert_released_sum(outcome)
    assert outcome.contributors == frozenset(range(1, 17)) - {1, 2, 3, 10}
    assert {u for u, kinds in outcome.revealed.items() if kinds == {"s"}} == {3, 10}
    assert {u for u, kinds in outcome.revealed.items() if kinds == {"b"}} == outcome.contributors


TARGET = 3  # the device whose requests are tampered with
N, K, T = 8, 4, 3


def _stranger(cohort: Cohort) -> int:
    cfg = cohort.config
    allowed = set(neighbours_of(cfg.graph_seed, N, K, TARGET)) | {TARGET}
    return min(set(range(1, N + 1)) - allowed)


def _flip(data: bytes, at: int) -> bytes:
    out = bytearray(data)
    out[at] ^= 1
    return bytes(out)


def _roster(request: ShareKeysRequest, change: Callable[[list[Any]], None]) -> ShareKeysRequest:
    roster = list(request.roster)
    change(roster)
    return dataclasses.replace(request, roster=tuple(roster))


def _own_altered(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:
        i = next(i for i, e in enumerate(roster) if e.device_id == TARGET)
        roster[i] = dataclasses.replace(roster[i], c_pk=_flip(roster[i].c_pk, 0))
    return _roster(r, change)


def _stranger_id(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:
        i = next(i for i, e in enumerate(roster) if e.device_id != TARGET)
        roster[i] = dataclasses.replace(roster[i], device_id=_stranger(cohort))
    return _roster(r, change)


def _duplicate_key(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:
        others = [i for i, e in enumerate(roster) if e.device_id != TARGET]
        roster[others[0]] = dataclasses.replace(roster[others[0]], s_pk=roster[others[1]].c_pk)
    return _roster(r, change)


def _low_order_key(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:
        i = next(i for i, e in enumerate(roster) if e.device_id != TARGET)
        roster[i] = dataclasses.replace(roster[i], c_pk=bytes(32))
    return _roster(r, change)


def _too_few_neighbours(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:
        keep = [e for e in roster if e.device_id == TARGET]
        keep += [e for e in roster if e.device_id != TARGET][:T - 1]
        roster[:] = keep
    return _roster(r, change)


def _flipped_share(cohort: Cohort, r: MaskedInputRequest) -> Any:
    first = r.shares[0]
    bad = EncryptedShare(first.src, first.dst, _flip(first.ciphertext, 40))
    return dataclasses.replace(r, shares=(bad, *r.shares[1:]))


def _swapped_senders(cohort: Cohort, r: MaskedInputRequest) -> Any:
    a, b, *rest = r.shares
    return dataclasses.replace(r, shares=(EncryptedShare(b.src, a.dst, a.ciphertext),
                                          EncryptedShare(a.src, b.dst, b.ciphertext), *rest))


def _own_id_dropped(cohort: Cohort, r: UnmaskRequest) -> Any:
    return dataclasses.replace(r, dropped=(*r.dropped, TARGET))


def _alive_and_dropped(cohort: Cohort, r: UnmaskRequest) -> Any:
    return dataclasses.replace(r, dropped=(*r.dropped, r.alive[0]))


def _foreign_id(cohort: Cohort, r: UnmaskRequest) -> Any:
    return dataclasses.replace(r, dropped=(*r.dropped, _stranger(cohort)))


def _too_few_alive(cohort: Cohort, r: UnmaskRequest) -> Any:
    return dataclasses.replace(r, alive=r.alive[:T - 1], dropped=(*r.dropped, *r.alive[T - 1:]))


def _other_session(cohort: Cohort, r: UnmaskRequest) -> Any:
    return dataclasses.replace(r, session_id=_flip(r.session_id, 0))


TAMPERING: dict[str, tuple[Stage, Callable[[Cohort, Any], Any], AbortReason]] = {
    "own keys altered": (Stage.SHARE_KEYS, _own_altered, AbortReason.KEY_ALTERED),
    "a stranger in the roster": (Stage.SHARE_KEYS, _stranger_id,
                                 AbortReason.UNEXPECTED_NEIGHBOUR),
    "a duplicate key": (Stage.SHARE_KEYS, _duplicate_key, AbortReason.DUPLICATE_KEY),
    "a low-order key": (Stage.SHARE_KEYS, _low_order_key, AbortReason.BAD_KEY),
    "too few neighbours": (Stage.SHARE_KEYS, _too_few_neighbours,
                           AbortReason.TOO_FEW_NEIGHBOURS),
    "a flipped share": (Stage.MASKED_INPUT, _flipped_share, AbortReason.DECRYPTION_FAILED),
    "swapped senders": (Stage.MASKED_INPUT, _swapped_senders, AbortReason.DECRYPTION_FAILED),
    "own id dropped": (Stage.UNMASK, _own_id_dropped, AbortReason.LISTED_AS_DROPPED),
    "alive and dropped": (Stage.UNMASK, _alive_and_dropped, AbortReason.INCONSISTENT_LISTS),
    "a foreign id": (Stage.UNMASK, _foreign_id, AbortReason.FOREIGN_ID),
    "too few alive": (Stage.UNMASK, _too_few_alive, AbortReason.TOO_FEW_NEIGHBOURS),
    "another session": (Stage.UNMASK, _other_session, AbortReason.WRONG_SESSION),
}


def _neighbours(roster: list[Any]) -> list[int]:
    return [i for i, e in enumerate(roster) if e.device_id != TARGET]


def _keys_substituted(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:  # the server's own key, in the entry and admission
        i = _neighbours(roster)[0]
        key = _flip(roster[i].c_pk, 0)
        roster[i] = dataclasses.replace(roster[i], c_pk=key, admission=dataclasses.replace(
            roster[i].admission, c_pk=key))
    return _roster(r, change)


def _keys_swapped(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:  # two neighbours' keys, each under the other's id
        i, j = _neighbours(roster)[:2]
        a, b = roster[i], roster[j]
        roster[i] = dataclasses.replace(b, device_id=a.device_id, admission=dataclasses.replace(
            b.admission, device_id=a.device_id))
        roster[j] = dataclasses.replace(a, device_id=b.device_id, admission=dataclasses.replace(
            a.admission, device_id=b.device_id))
    return _roster(r, change)


def _entry_left_out(cohort: Cohort, r: Any) -> Any:
    def change(roster: list[Any]) -> None:  # still t neighbours, the proof of all of them
        del roster[_neighbours(roster)[0]]
    return _roster(r, change)


ROSTER_PROOF_TAMPERING: dict[str, Callable[[Cohort, Any], Any]] = {
    "a neighbour's keys substituted": _keys_substituted,
    "two neighbours' keys swapped": _keys_swapped,
    "an entry left out under the whole roster's proof": _entry_left_out,
    "a flipped proof byte": lambda cohort, r: dataclasses.replace(
        r, range_proof=_flip(r.range_proof, 0)),
    "a proof one hash long": lambda cohort, r: dataclasses.replace(
        r, range_proof=r.range_proof + bytes(32)),
    "a proof one hash short": lambda cohort, r: dataclasses.replace(
        r, range_proof=r.range_proof[32:]),
}


@pytest.mark.parametrize("name", sorted(ROSTER_PROOF_TAMPERING))
def test_a_roster_not_under_its_proof_aborts_as_in_python(bridge: NodeDevices,
                                                          name: str) -> None:
    """With device_auth, a roster the server changed against its one multiproof (keys,
    entries, or the proof itself) makes a TypeScript device abort as a Python device does,
    before it shares anything."""
    tamper = ROSTER_PROOF_TAMPERING[name]
    cohort = make_cohort(n=N, dimension=20, k=K, t=T, device_auth=True, seed=b"web-roster-proof")

    def to_device(at: Stage, u: int, request: Any) -> Any:
        return tamper(cohort, request) if (at, u) == (Stage.SHARE_KEYS, TARGET) else request

    reasons = []
    for ts_ids in (set(), {TARGET, 6}):  # all Python, then the target in TypeScript
        outcome = _round(bridge, cohort, ts_ids, to_device=to_device)
        assert set(outcome.device_aborts) == {TARGET}, outcome.device_aborts
        reasons.append(outcome.device_aborts[TARGET].reason)
    assert reasons == [AbortReason.BAD_SIGNATURE] * 2


@pytest.mark.parametrize("name", sorted(TAMPERING))
def test_tampered_requests_abort_as_in_python(bridge: NodeDevices, name: str) -> None:
    stage, tamper, reason = TAMPERING[name]
    cohort = make_cohort(n=N, dimension=20, k=K, t=T, seed=b"web-tamper")

    def to_device(at: Stage, u: int, request: Any) -> Any:
        return tamper(cohort, request) if (at, u) == (stage, TARGET) else request

    reasons = []
    for ts_ids in (set(), {TARGET, 6}):  # all Python, then the target in TypeScript
        outcome = _round(bridge, cohort, ts_ids, to_device=to_device)
        assert set(outcome.device_aborts) == {TARGET}, outcome.device_aborts
        reasons.append(outcome.device_aborts[TARGET].reason)
    assert reasons == [reason, reason]


def test_floors_and_bad_signatures_refuse_the_config(bridge: NodeDevices) -> None:
    cohort = make_cohort(n=N, dimension=20, k=K, t=T, seed=b"web-floors")
    cfg = cohort.config
    refusals = {
        "t below the floor": (cohort.signed, DevicePolicy(min_threshold=T + 1)),
        "n_min below the floor": (cohort.signed, DevicePolicy(min_n_min=cfg.n_min + 1)),
        "dimension above the cap": (cohort.signed, DevicePolicy(max_dimension=cfg.dimension - 1)),
        "device_auth required": (cohort.signed, DevicePolicy(require_device_auth=True)),
        "the lying-server bound": (cohort.signed, DevicePolicy(max_corrupt_fraction=0.05)),
        "a forged signature": (SignedConfig(cohort.signed.payload,
                                            _flip(cohort.signed.signature, 3)), None),
    }
    for name, (signed, policy) in refusals.items():
        for make in (
            lambda s=signed, p=policy: SecAggDevice(s, cohort.coordinator_public, 1, policy=p),
            lambda s=signed, p=policy: TypeScriptDevice(bridge, s, cohort.coordinator_public, 1,
                                                        cfg.modulus_bits, policy=p),
        ):
            with pytest.raises(SecAggAbort) as refused:
                make()
            assert refused.value.reason == AbortReason.BAD_CONFIG, name
    TypeScriptDevice(bridge, cohort.signed, cohort.coordinator_public, 1, cfg.modulus_bits,
                     policy=DevicePolicy(min_threshold=T, min_n_min=cfg.n_min,
                                         max_dimension=cfg.dimension))
    # The bound a cohort of this size can meet (a weak target, no corrupt devices): both accept.
    weak = DevicePolicy(max_corrupt_fraction=0.0, security_bits=1.0, assumed_dropout=0.0)
    SecAggDevice(cohort.signed, cohort.coordinator_public, 1, policy=weak)
    TypeScriptDevice(bridge, cohort.signed, cohort.coordinator_public, 1, cfg.modulus_bits,
                     policy=weak)


def _typescript_at(bridge: NodeDevices, stage: Stage, seed: bytes
                   ) -> tuple[SimulatedRound, TypeScriptDevice]:
    """A round whose server has just opened ``stage``, with device TARGET in TypeScript."""
    cohort = make_cohort(n=N, dimension=20, k=K, t=T, seed=seed)
    driver = SimulatedRound(cohort, _reports(N, 20, 1))
    device = TypeScriptDevice(bridge, cohort.signed, cohort.coordinator_public, TARGET,
                              cohort.config.modulus_bits)
    driver.devices[TARGET] = device  # type: ignore[assignment]
    while driver.server.stage < stage:
        driver.step()
    return driver, device


def test_a_retried_roster_gets_the_same_answer_and_a_different_one_aborts(
        bridge: NodeDevices) -> None:
    driver, device = _typescript_at(bridge, Stage.SHARE_KEYS, b"web-retry-1")
    request = driver.pending[TARGET]
    assert isinstance(request, ShareKeysRequest)
    assert device.share_keys(request) == device.share_keys(request)
    with pytest.raises(SecAggAbort) as second:
        device.share_keys(_too_few_neighbours(driver.cohort, request))
    assert second.value.reason == AbortReason.REPEATED_REQUEST


def test_a_retried_masked_input_must_carry_the_same_report(bridge: NodeDevices) -> None:
    driver, device = _typescript_at(bridge, Stage.MASKED_INPUT, b"web-retry-2")
    request = driver.pending[TARGET]
    assert isinstance(request, MaskedInputRequest)
    ones = np.array([1, 4, 7])
    first = device.masked_input(request, ones)
    np.testing.assert_array_equal(first.vector, device.masked_input(request, ones).vector)
    with pytest.raises(SecAggAbort) as changed:
        device.masked_input(request, np.array([1, 4, 8]))
    assert changed.value.reason == AbortReason.REPORT_CHANGED
    with pytest.raises(SecAggAbort) as after:  # aborted for good, secrets forgotten
        device.masked_input(request, ones)
    assert after.value.reason == AbortReason.REPORT_CHANGED
