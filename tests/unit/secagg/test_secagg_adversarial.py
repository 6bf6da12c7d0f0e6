"""The adversarial cases of SECAGG.md section 7, one test each (numbered as there).

Server-side rejections must leave the round intact (the final sum is still exact); device-side
checks must abort before anything is revealed.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from secagg_testkit import (
    assert_correct,
    assert_one_secret_each,
    drive_to,
    reports_for,
    small_cohort,
)

from fedhh.secagg import device as device_module
from fedhh.secagg import server as server_module
from fedhh.secagg import shamir
from fedhh.secagg.device import DevicePolicy, SecAggDevice
from fedhh.secagg.errors import (
    AbortReason,
    InvalidReport,
    ProtocolViolation,
    SecAggAbort,
    SecAggConfigError,
    Violation,
)
from fedhh.secagg.graph import ring_order
from fedhh.secagg.messages import (
    AdvertiseKeys,
    DeviceMessage,
    EncryptedShare,
    MaskedInput,
    MaskedInputRequest,
    ServerMessage,
    ShareKeysRequest,
    ShareKeysResponse,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
)
from fedhh.secagg.primitives import (
    aead_encrypt,
    ed25519_from_seed,
    ed25519_public_bytes,
    u32,
    x25519_from_seed,
    x25519_public_bytes,
)
from fedhh.secagg.report import indices_from_dense
from fedhh.secagg.server import SecAggServer
from fedhh.secagg.simulate import DropoutPlan, SimulatedRound, make_cohort, run_round

LOW_ORDER_POINT = (1).to_bytes(32, "little")


def abort_reason(fn: object, *args: object) -> AbortReason:
    with pytest.raises(SecAggAbort) as info:
        fn(*args)  # type: ignore[operator]
    return info.value.reason


def violation(fn: object, *args: object) -> Violation:
    with pytest.raises(ProtocolViolation) as info:
        fn(*args)  # type: ignore[operator]
    return info.value.reason


# -- 1. Replay -----------------------------------------------------------------------------------

def test_1_cross_round_replay_is_rejected_by_the_server() -> None:
    old = drive_to(small_cohort(round_id=b"round-1"), Stage.MASKED_INPUT)
    new = drive_to(small_cohort(round_id=b"round-2"), Stage.ADVERTISE_KEYS)
    replay = old.devices[1].advertise_keys()
    assert violation(new.server.handle_advertise_keys, replay) is Violation.WRONG_SESSION
    masked = old.devices[1].masked_input(old.pending[1], old.reports[1])  # type: ignore[arg-type]
    assert violation(new.server.handle_masked_input, masked) is Violation.WRONG_SESSION
    assert new.server.received() == 0


def test_1_cross_round_replayed_ciphertexts_fail_aead() -> None:
    """A server replaying last round's share ciphertexts (relabelled with this round's session)
    makes the device abort: keys are per round and the session id is in the HKDF salt and AAD."""
    old = drive_to(small_cohort(round_id=b"round-1"), Stage.MASKED_INPUT)
    new = drive_to(small_cohort(round_id=b"round-2"), Stage.MASKED_INPUT)
    fresh: MaskedInputRequest = new.pending[3]  # type: ignore[assignment]
    stale: MaskedInputRequest = old.pending[3]  # type: ignore[assignment]
    forged = dataclasses.replace(fresh, shares=stale.shares)
    assert abort_reason(new.devices[3].masked_input, forged,
                        new.reports[3]) is AbortReason.DECRYPTION_FAILED


def test_1_cross_round_replayed_keys_fail_the_commitment() -> None:
    """With device_auth, last round's committed keys do not verify in this round."""
    old = drive_to(small_cohort(round_id=b"round-1", device_auth=True), Stage.SHARE_KEYS)
    new = drive_to(small_cohort(round_id=b"round-2", device_auth=True), Stage.SHARE_KEYS)
    request: ShareKeysRequest = new.pending[1]  # type: ignore[assignment]
    stale = dataclasses.replace(old.devices[2].advertise_keys(),
                                session_id=new.server.session_id)
    roster = tuple(stale if e.device_id == 2 else e for e in request.roster)
    assert abort_reason(new.devices[1].share_keys, dataclasses.replace(
        request, roster=roster)) is AbortReason.BAD_SIGNATURE
    assert violation(new.server.handle_share_keys, ShareKeysResponse(
        new.server.session_id, 9, (), bytes(32))) is Violation.UNKNOWN_DEVICE


def test_1_same_round_duplicates_are_deduplicated() -> None:
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    server = driver.server
    advert = driver.devices[1].advertise_keys()
    assert violation(server.handle_advertise_keys, advert) is Violation.LATE
    response = driver.devices[1].share_keys(driver.pending[1])  # type: ignore[arg-type]
    assert server.handle_share_keys(response) is True
    assert server.handle_share_keys(response) is False
    assert server.handle_share_keys(dataclasses.replace(response)) is False  # an equal copy
    first = response.shares[0]
    tampered = (dataclasses.replace(first, ciphertext=bytes(len(first.ciphertext))),
                *response.shares[1:])
    for different in (dataclasses.replace(response, shares=tampered),
                      dataclasses.replace(response, shares=response.shares[::-1]),
                      dataclasses.replace(response, b_commitment=bytes(32)),
                      dataclasses.replace(response, shares=("not a share",)),  # type: ignore[arg-type]
                      dataclasses.replace(response, shares=None)):  # type: ignore[arg-type]
        assert violation(server.handle_share_keys, different) is Violation.DUPLICATE
    assert server.received() == 1


@pytest.mark.parametrize("change", ["one missing", "one extra", "a foreign id", "itself",
                                    "a repeated recipient", "negative", "above uint32", "a bool"])
def test_1_shares_must_go_to_exactly_the_roster_neighbours(change: str) -> None:
    """Shares to any other set of recipients than the device's roster neighbours (one each)
    are MALFORMED, whatever the ids (ints out of uint32's range included), and change
    nothing: the device's correct shares are taken afterwards."""
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    server = driver.server
    response = driver.devices[1].share_keys(driver.pending[1])  # type: ignore[arg-type]
    shares = response.shares
    first = shares[0]
    foreign = max(s.dst for s in shares) + 1000
    changed = {
        "one missing": shares[1:],
        "one extra": (*shares, dataclasses.replace(first, dst=foreign)),
        "a foreign id": (dataclasses.replace(first, dst=foreign), *shares[1:]),
        "itself": (dataclasses.replace(first, dst=1), *shares[1:]),
        "a repeated recipient": (dataclasses.replace(first, dst=shares[1].dst), *shares[1:]),
        "negative": (dataclasses.replace(first, dst=-first.dst), *shares[1:]),
        "above uint32": (dataclasses.replace(first, dst=first.dst + 2**32), *shares[1:]),
        "a bool": (dataclasses.replace(first, dst=True), *shares[1:]),
    }[change]
    assert violation(server.handle_share_keys, dataclasses.replace(
        response, shares=changed)) is Violation.MALFORMED
    assert server.received() == 0
    assert server.handle_share_keys(response) is True


def test_1_swapped_src_and_dst_fails_the_aad() -> None:
    """Device 2's ciphertext for device 1, presented to device 2 as if it came from 1."""
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    to_1: MaskedInputRequest = driver.pending[1]  # type: ignore[assignment]
    from_2 = next(s for s in to_1.shares if s.src == 2)
    request: MaskedInputRequest = driver.pending[2]  # type: ignore[assignment]
    swapped = EncryptedShare(src=1, dst=2, ciphertext=from_2.ciphertext)
    shares = tuple(swapped if s.src == 1 else s for s in request.shares)
    assert abort_reason(driver.devices[2].masked_input,
                        dataclasses.replace(request, shares=shares),
                        driver.reports[2]) is AbortReason.DECRYPTION_FAILED


# -- 2. Wrong length -----------------------------------------------------------------------------

@pytest.mark.parametrize("length", [0, 11, 13])
def test_2_wrong_length_is_rejected_and_the_device_counts_as_dropped(length: int) -> None:
    cohort = small_cohort()

    def truncate(stage: Stage, u: int, msg: DeviceMessage) -> DeviceMessage:
        if isinstance(msg, MaskedInput) and u == 4:
            vector = np.resize(msg.vector, length).astype(msg.vector.dtype)
            return MaskedInput(msg.session_id, u, vector)
        return msg

    outcome = run_round(cohort, reports_for(8, 12), to_server=truncate)
    assert outcome.rejected == [(Stage.MASKED_INPUT, 4, Violation.WRONG_LENGTH)]
    assert_correct(outcome)
    assert 4 not in outcome.contributors and outcome.revealed[4] == {"s"}


def test_2_ragged_byte_length_is_rejected_on_the_wire() -> None:
    sid = small_cohort().session_id
    with pytest.raises(ProtocolViolation) as info:
        MaskedInput.from_wire(sid, 1, bytes(2 * 12 - 1), 16)
    assert info.value.reason is Violation.WRONG_LENGTH
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    too_long = MaskedInput.from_wire(sid, 1, bytes(2 * 12 + 4), 16)
    assert violation(driver.server.handle_masked_input, too_long) is Violation.WRONG_LENGTH


# -- 3. Out of range -----------------------------------------------------------------------------

def test_3_entries_at_or_above_the_modulus_are_rejected() -> None:
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    sid = driver.server.session_id
    wide = np.zeros(12, dtype=np.uint32)
    wide[3] = 1 << 16
    assert violation(driver.server.handle_masked_input,
                     MaskedInput(sid, 1, wide)) is Violation.OUT_OF_RANGE
    negative = np.zeros(12, dtype=np.int64)
    negative[0] = -1
    assert violation(driver.server.handle_masked_input,
                     MaskedInput(sid, 1, negative)) is Violation.OUT_OF_RANGE
    floats = np.zeros(12, dtype=np.float64)
    assert violation(driver.server.handle_masked_input,
                     MaskedInput(sid, 1, floats)) is Violation.MALFORMED
    assert driver.server.received() == 0
    honest = driver.devices[1].masked_input(driver.pending[1],  # type: ignore[arg-type]
                                            driver.reports[1])
    assert driver.server.handle_masked_input(  # a wider dtype with in-range values is fine
        MaskedInput(sid, 1, honest.vector.astype(np.uint32))) is True


@pytest.mark.parametrize("bad", [np.array([0, 0]), np.array([3, 2]), np.array([-1]),
                                 np.array([12]), np.array([0.0, 1.0]), np.zeros((2, 2), int)])
def test_3_honest_device_refuses_anything_but_a_0_1_vector(bad: np.ndarray) -> None:
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    device, request = driver.devices[1], driver.pending[1]
    with pytest.raises(InvalidReport):
        device.masked_input(request, bad)  # type: ignore[arg-type]
    # Nothing changed: the same device still answers with a valid report.
    assert device.masked_input(request, np.array([0, 5])).vector.shape == (12,)  # type: ignore[arg-type]


def test_3_dense_reports_must_hold_only_0_and_1() -> None:
    with pytest.raises(InvalidReport):
        indices_from_dense(np.array([0, 1, 2]))
    with pytest.raises(InvalidReport):
        indices_from_dense(np.array([0.5, 1.0]))
    assert indices_from_dense(np.array([True, False, True])).tolist() == [0, 2]


def test_3_a_malicious_plus_5_goes_undetected() -> None:
    """Documented limitation: input validity is not covered. A device adding 5 instead of 1 shifts
    the sum by 4 without detection, as long as the coordinate stays <= |U3|."""
    def cheat(stage: Stage, u: int, msg: DeviceMessage) -> DeviceMessage:
        if isinstance(msg, MaskedInput) and u == 2:
            vector = msg.vector.copy()
            vector[7] += 4
            return MaskedInput(msg.session_id, u, vector)
        return msg

    reports = {1: np.array([7]), 2: np.array([7])}
    outcome = run_round(small_cohort(), reports, to_server=cheat)
    assert outcome.result is not None
    assert int(outcome.result.total[7]) == 2 + 4  # released, wrong, and not flagged


def test_3_a_sum_above_the_contributor_count_aborts() -> None:
    """The cheap output check: a coordinate larger than |U3| cannot come from 0/1 reports."""
    def cheat(stage: Stage, u: int, msg: DeviceMessage) -> DeviceMessage:
        if isinstance(msg, MaskedInput) and u == 2:
            vector = msg.vector.copy()
            vector[7] -= 1  # wraps to 2^16 - 1 where nobody else has a one
            return MaskedInput(msg.session_id, u, vector)
        return msg

    outcome = run_round(small_cohort(), {}, to_server=cheat)
    assert outcome.result is None and outcome.abort is not None
    assert outcome.abort.reason is AbortReason.OUTPUT_OUT_OF_RANGE


# -- 4. Double submission ------------------------------------------------------------------------

def test_4_double_submission_is_never_added_twice() -> None:
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    server = driver.server
    msg = driver.devices[5].masked_input(driver.pending[5], driver.reports[5])  # type: ignore[arg-type]
    assert server.handle_masked_input(msg) is True
    copy = MaskedInput(msg.session_id, 5, msg.vector.copy())
    assert server.handle_masked_input(copy) is False  # identical: ignored
    different = msg.vector.copy()
    different[0] += 1
    assert violation(server.handle_masked_input,
                     MaskedInput(msg.session_id, 5, different)) is Violation.DUPLICATE
    driver.outcome.expected_total[driver.reports[5]] += 1
    driver.outcome.contributors = frozenset({5})
    driver.pending.pop(5)
    assert_correct(driver.run())


def test_4_a_second_different_key_advert_is_rejected() -> None:
    driver = drive_to(small_cohort(), Stage.ADVERTISE_KEYS)
    advert = driver.devices[1].advertise_keys()
    assert driver.server.handle_advertise_keys(advert) is True
    other = dataclasses.replace(driver.devices[2].advertise_keys(), device_id=1)
    assert violation(driver.server.handle_advertise_keys, other) is Violation.DUPLICATE


# -- 5. Late submission --------------------------------------------------------------------------

def test_5_late_masked_input_is_rejected_and_its_b_never_requested() -> None:
    held: dict[int, DeviceMessage] = {}

    def hold(stage: Stage, u: int, msg: DeviceMessage) -> DeviceMessage | None:
        if isinstance(msg, MaskedInput) and u == 6:
            held[u] = msg
            return None
        return msg

    driver = SimulatedRound(small_cohort(), reports_for(8, 12), to_server=hold)
    while driver.server.stage <= Stage.MASKED_INPUT:
        driver.step()
    assert driver.server.stage == Stage.UNMASK
    assert violation(driver.server.handle_masked_input, held[6]) is Violation.LATE
    for request in driver.pending.values():
        assert isinstance(request, UnmaskRequest)
        assert 6 not in request.alive and 6 in request.dropped
    outcome = driver.run()
    assert_correct(outcome)
    assert 6 not in outcome.contributors and outcome.revealed[6] == {"s"}


def test_5_messages_for_a_stage_not_yet_open_are_rejected() -> None:
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    msg = MaskedInput(driver.server.session_id, 1, np.zeros(12, np.uint16))
    assert violation(driver.server.handle_masked_input, msg) is Violation.EARLY


# -- 6. Dropouts: see test_secagg_round.py (every stage, both ends of an edge) ------------------

def test_6_device_that_never_got_a_request_is_not_in_the_round() -> None:
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT,
                      DropoutPlan.at(Stage.SHARE_KEYS, {3}))
    msg = MaskedInput(driver.server.session_id, 3, np.zeros(12, np.uint16))
    assert violation(driver.server.handle_masked_input, msg) is Violation.NOT_IN_ROUND
    assert_correct(driver.run())


# -- 7. Fewer than t anywhere --------------------------------------------------------------------

@pytest.mark.parametrize(("stage", "dropped", "reason"), [
    (Stage.ADVERTISE_KEYS, {1, 2, 3, 4, 5}, AbortReason.TOO_FEW_DEVICES),
    (Stage.SHARE_KEYS, {1, 2, 3, 4, 5}, AbortReason.TOO_FEW_DEVICES),
    (Stage.MASKED_INPUT, {1, 2, 3, 4, 5}, AbortReason.TOO_FEW_DEVICES),
    (Stage.UNMASK, {1, 2, 3, 4, 5}, AbortReason.TOO_FEW_SHARES),
])
def test_7_too_few_survivors_abort_and_release_nothing(stage: Stage, dropped: set[int],
                                                       reason: AbortReason) -> None:
    outcome = run_round(small_cohort(n_min=4), reports_for(8, 12), DropoutPlan.at(stage, dropped))
    assert outcome.result is None
    assert outcome.abort is not None and outcome.abort.reason is reason
    assert_one_secret_each(outcome)


def test_7_a_device_with_fewer_than_t_surviving_share_holders_aborts_the_round() -> None:
    """Sparse graph: device 1 keeps its shares with only its k = 4 neighbours; if 2 of them
    drop before masked input (t = 3 needed), its secret cannot be rebuilt."""
    cohort = make_cohort(12, 8, 4, 3, n_min=2, seed=3)
    nbrs = drive_to(cohort, Stage.SHARE_KEYS).server.graph.neighbours(1)
    outcome = run_round(cohort, reports_for(12, 8),
                        DropoutPlan.at(Stage.MASKED_INPUT, set(nbrs[:2])))
    assert outcome.result is None and outcome.abort is not None
    assert outcome.abort.reason is AbortReason.TOO_FEW_SHARE_HOLDERS
    assert outcome.revealed == {}  # aborted before any unmask request went out


def test_7_signers_short_of_t_holders_abort_before_any_unmask_request() -> None:
    """With the consistency check only signers are asked to unmask; if the devices that drop
    before signing leave a secret with fewer than t holders to ask, waiting for the unmask
    deadline could only end in TOO_FEW_SHARES after the others revealed their shares, so the
    round aborts at the close of the check with no unmask request sent."""
    cohort = make_cohort(12, 8, 4, 3, n_min=2, device_auth=True, consistency_check=True, seed=3)
    nbrs = drive_to(cohort, Stage.SHARE_KEYS).server.graph.neighbours(1)
    driver = SimulatedRound(cohort, reports_for(12, 8),
                         DropoutPlan.at(Stage.CONSISTENCY_CHECK, set(nbrs[:2])))
    while driver.server.stage <= Stage.MASKED_INPUT:
        driver.step()
    assert driver.server.stage == Stage.CONSISTENCY_CHECK
    outcome = driver.run()
    assert outcome.result is None and outcome.abort is not None
    assert outcome.abort.reason is AbortReason.TOO_FEW_SHARE_HOLDERS
    assert "share holders to unmask" in outcome.abort.detail
    assert outcome.revealed == {}


def test_7_signers_with_t_holders_for_every_secret_unmask() -> None:
    """The same round with one neighbour of device 1 gone before signing: every secret keeps
    t holders among the signers, and the round releases without the dropout."""
    cohort = make_cohort(12, 8, 4, 3, n_min=2, device_auth=True, consistency_check=True, seed=3)
    nbrs = drive_to(cohort, Stage.SHARE_KEYS).server.graph.neighbours(1)
    outcome = run_round(cohort, reports_for(12, 8),
                        DropoutPlan.at(Stage.CONSISTENCY_CHECK, {nbrs[0]}))
    assert outcome.result is not None


def test_7_weak_devices_are_pruned_before_masking() -> None:
    """If a device's neighbours drop before sharing keys so it has < t live neighbours, the
    server treats it as dropped instead of aborting the round later."""
    cohort = make_cohort(12, 8, 6, 3, n_min=2, seed=3)
    ring = ring_order(cohort.config.graph_seed, 12).tolist()
    at = ring.index(1)
    # Device 1 keeps only the neighbours 2 and 3 places before it: 2 < t. The others keep >= t.
    dropped = {ring[(at + d) % 12] for d in (-1, 1, 2, 3)}
    outcome = run_round(cohort, reports_for(12, 8), DropoutPlan.at(Stage.SHARE_KEYS, dropped))
    assert_correct(outcome)
    assert outcome.contributors == frozenset(range(1, 13)) - dropped - {1}


# -- 8. Lying server ----------------------------------------------------------------------------

def _unmask_setup(**kw: object) -> tuple[SimulatedRound, SecAggDevice, UnmaskRequest]:
    driver = drive_to(small_cohort(**kw), Stage.UNMASK, DropoutPlan.at(Stage.MASKED_INPUT, {8}))
    request = driver.pending[1]
    assert isinstance(request, UnmaskRequest) and request.dropped == (8,)
    return driver, driver.devices[1], request


def test_8_partner_in_both_lists() -> None:
    _, device, req = _unmask_setup()
    forged = dataclasses.replace(req, alive=(*req.alive, 8))
    assert abort_reason(device.unmask, forged) is AbortReason.INCONSISTENT_LISTS


def test_8_self_listed_as_dropped() -> None:
    _, device, req = _unmask_setup()
    forged = dataclasses.replace(req, dropped=(*req.dropped, 1))
    assert abort_reason(device.unmask, forged) is AbortReason.LISTED_AS_DROPPED


def test_8_foreign_ids() -> None:
    cohort = make_cohort(12, 8, 4, 2, n_min=2, seed=3)
    driver = drive_to(cohort, Stage.UNMASK)
    req: UnmaskRequest = driver.pending[1]  # type: ignore[assignment]
    stranger = next(v for v in range(2, 13) if v not in driver.server.graph.neighbours(1))
    forged = dataclasses.replace(req, dropped=(stranger,))
    assert abort_reason(driver.devices[1].unmask, forged) is AbortReason.FOREIGN_ID


def test_8_second_unmask_request() -> None:
    _, device, req = _unmask_setup()
    response = device.unmask(req)
    assert device.unmask(req) == response  # an identical retry reveals nothing new
    second = dataclasses.replace(req, alive=req.alive[1:], dropped=(*req.dropped, req.alive[0]))
    assert abort_reason(device.unmask, second) is AbortReason.REPEATED_REQUEST


def test_8_too_few_alive_partners() -> None:
    _, device, req = _unmask_setup()
    forged = dataclasses.replace(req, alive=req.alive[:3])  # t = 4
    assert abort_reason(device.unmask, forged) is AbortReason.TOO_FEW_NEIGHBOURS


def test_8_unmask_before_masked_input() -> None:
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    req = UnmaskRequest(driver.server.session_id, 1, (2, 3, 4, 5), ())
    assert abort_reason(driver.devices[1].unmask, req) is AbortReason.WRONG_STATE


def test_8_consistency_check_catches_lists_that_disagree_with_the_signed_survivors() -> None:
    _, device, req = _unmask_setup(device_auth=True, consistency_check=True)
    moved = dataclasses.replace(req, alive=req.alive[1:], dropped=(*req.dropped, req.alive[0]))
    assert abort_reason(device.unmask, moved) is AbortReason.INCONSISTENT_LISTS


def test_8_consistency_check_needs_t_valid_signatures() -> None:
    _, device, req = _unmask_setup(device_auth=True, consistency_check=True)
    assert abort_reason(device.unmask, dataclasses.replace(
        req, signatures=req.signatures[:3])) is AbortReason.TOO_FEW_NEIGHBOURS
    _, device, req = _unmask_setup(device_auth=True, consistency_check=True)
    w, sig = req.signatures[0]
    forged = ((w, sig[:-1] + bytes([sig[-1] ^ 1])), *req.signatures[1:])
    assert abort_reason(device.unmask, dataclasses.replace(
        req, signatures=forged)) is AbortReason.BAD_SIGNATURE


@pytest.mark.parametrize("bad", [
    lambda u3: tuple(float(i) for i in u3),  # equal to U3 as a key, but not ids
    lambda u3: (*u3[:-1], True) if u3[-1] == 1 else (True, *u3[1:]),
    lambda u3: (u3[1], u3[0], *u3[2:]),
    lambda u3: (*u3, u3[-1]),
    lambda u3: (0, *u3),
    lambda u3: (*u3, 2**70),
    lambda u3: list(u3),
    lambda u3: ([1], *u3),
])
def test_8_a_malformed_survivor_set_is_refused_even_after_a_good_one(
        bad: Callable[[tuple[int, ...]], Any]) -> None:
    """Devices of one process share what they derive from a survivor set U3 (a cache keyed by
    U3): a malformed U3, even one equal to a cached U3 as a key, is still refused."""
    driver = drive_to(small_cohort(device_auth=True, consistency_check=True),
                      Stage.CONSISTENCY_CHECK)
    first, second = sorted(driver.pending)[:2]
    good = driver.pending[first]
    driver.devices[first].consistency_check(good)  # the well-formed U3 is now cached
    request = dataclasses.replace(driver.pending[second], survivors=bad(good.survivors))
    assert abort_reason(driver.devices[second].consistency_check,
                        request) is AbortReason.MALFORMED


def test_8_splitting_the_neighbours_yields_fewer_than_t_of_each_secret() -> None:
    """The server tells some of u's neighbours that u survived and the others that it dropped,
    to collect both b_u and s_u. With 2t > k + c (here k = 7, c = 0, t = 5) neither group of
    honest neighbours reaches t shares."""
    cohort = small_cohort(t=5, n_min=2)
    victim = 8

    def split(stage: Stage, v: int, req: ServerMessage) -> ServerMessage:
        if isinstance(req, UnmaskRequest) and v != victim:
            if v % 2:  # odd ids: victim "alive"; even ids: victim "dropped"
                return req
            return dataclasses.replace(req, alive=tuple(a for a in req.alive if a != victim),
                                       dropped=(*req.dropped, victim))
        return req

    driver = drive_to(cohort, Stage.UNMASK, to_device=split)
    b_shares = s_shares = 0
    for v, req in driver.pending.items():
        response = driver.devices[v].unmask(split(Stage.UNMASK, v, req))  # type: ignore[arg-type]
        b_shares += sum(owner == victim for owner, _ in response.b_shares)
        s_shares += sum(owner == victim for owner, _ in response.s_shares)
    assert b_shares < 5 and s_shares < 5 and b_shares + s_shares == 7


# -- 9. Bad keys or parameters ------------------------------------------------------------------

def _share_setup(**kw: object) -> tuple[SimulatedRound, SecAggDevice, ShareKeysRequest]:
    driver = drive_to(small_cohort(**kw), Stage.SHARE_KEYS)
    request = driver.pending[1]
    assert isinstance(request, ShareKeysRequest)
    return driver, driver.devices[1], request


def _with_entry(request: ShareKeysRequest, device_id: int, **changes: Any) -> ShareKeysRequest:
    roster = tuple(dataclasses.replace(e, **changes) if e.device_id == device_id else e
                   for e in request.roster)
    return dataclasses.replace(request, roster=roster)


def test_9_low_order_key_in_the_roster() -> None:
    _, device, req = _share_setup()
    assert abort_reason(device.share_keys, _with_entry(
        req, 2, c_pk=LOW_ORDER_POINT)) is AbortReason.BAD_KEY


def test_9_low_order_key_rejected_by_the_server() -> None:
    driver = drive_to(small_cohort(), Stage.ADVERTISE_KEYS)
    advert = driver.devices[1].advertise_keys()
    bad = dataclasses.replace(advert, s_pk=LOW_ORDER_POINT)
    assert violation(driver.server.handle_advertise_keys, bad) is Violation.BAD_KEY
    same = dataclasses.replace(advert, s_pk=advert.c_pk)
    assert violation(driver.server.handle_advertise_keys, same) is Violation.BAD_KEY
    short = dataclasses.replace(advert, c_pk=advert.c_pk[:31])
    assert violation(driver.server.handle_advertise_keys, short) is Violation.WRONG_LENGTH
    assert driver.server.handle_advertise_keys(advert) is True
    copycat = dataclasses.replace(driver.devices[2].advertise_keys(), c_pk=advert.c_pk)
    assert violation(driver.server.handle_advertise_keys, copycat) is Violation.DUPLICATE_KEY


def test_9_duplicate_keys_in_the_roster() -> None:
    _, device, req = _share_setup()
    other = next(e for e in req.roster if e.device_id == 3)
    assert abort_reason(device.share_keys, _with_entry(
        req, 2, s_pk=other.s_pk)) is AbortReason.DUPLICATE_KEY


def test_9_own_key_altered() -> None:
    _, device, req = _share_setup()
    other = next(e for e in req.roster if e.device_id == 3)
    assert abort_reason(device.share_keys, _with_entry(
        req, 1, c_pk=other.c_pk)) is AbortReason.KEY_ALTERED


def test_9_roster_smaller_than_t() -> None:
    _, device, req = _share_setup()
    own = next(e for e in req.roster if e.device_id == 1)
    others = [e for e in req.roster if e.device_id != 1]
    short = dataclasses.replace(req, roster=(own, *others[:3]))  # self + 3 < t = 4
    assert abort_reason(device.share_keys, short) is AbortReason.TOO_FEW_NEIGHBOURS


def test_9_neighbour_outside_the_committed_graph() -> None:
    cohort = make_cohort(12, 8, 4, 2, seed=3)
    driver = drive_to(cohort, Stage.SHARE_KEYS)
    req: ShareKeysRequest = driver.pending[1]  # type: ignore[assignment]
    stranger = next(v for v in range(2, 13) if v not in driver.server.graph.neighbours(1))
    advert = driver.devices[stranger].advertise_keys()
    forged = dataclasses.replace(req, roster=(*req.roster, advert))
    assert abort_reason(driver.devices[1].share_keys, forged) is AbortReason.UNEXPECTED_NEIGHBOUR


def test_9_substituted_round_key() -> None:
    """A neighbour's key replaced in the entry (the admission still carries the committed one),
    or in both the entry and the admission: either way the keys are not the committed ones."""
    fresh_key = x25519_public_bytes(x25519_from_seed(b"\x05" * 32))
    for field in ("c_pk", "s_pk"):
        _driver, device, req = _share_setup(device_auth=True)
        assert abort_reason(device.share_keys, _with_entry(
            req, 2, **{field: fresh_key})) is AbortReason.BAD_SIGNATURE
        _driver, device, req = _share_setup(device_auth=True)
        entry = next(e for e in req.roster if e.device_id == 2)
        assert entry.admission is not None
        admission = dataclasses.replace(entry.admission, **{field: fresh_key})
        assert abort_reason(device.share_keys, _with_entry(
            req, 2, admission=admission, **{field: fresh_key})) is AbortReason.BAD_SIGNATURE


def test_9_bad_admission_rejected_by_the_server() -> None:
    driver = drive_to(small_cohort(device_auth=True), Stage.ADVERTISE_KEYS)
    advert = driver.devices[1].advertise_keys()
    assert violation(driver.server.handle_advertise_keys, dataclasses.replace(
        advert, admission=None)) is Violation.BAD_SIGNATURE
    assert violation(driver.server.handle_advertise_keys, dataclasses.replace(
        advert, admission=driver.devices[2].advertise_keys().admission)) is Violation.BAD_SIGNATURE
    assert driver.server.received() == 0


def test_9_an_admission_is_proven_once_and_a_forged_one_never(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The server proves a device's admission once (a device shows it when it opens its
    session and again in its stage 0 message); any other admission for that device, forged
    or another device's, is proven anew and refused, and changes nothing."""
    driver = drive_to(small_cohort(device_auth=True), Stage.ADVERTISE_KEYS)
    server, advert = driver.server, driver.devices[1].advertise_keys()
    assert advert.admission is not None
    proofs = []
    real = server_module.verify_admission
    monkeypatch.setattr(server_module, "verify_admission",
                        lambda admission, config: proofs.append(admission) or real(admission,
                                                                                config))
    assert server.admitted(advert.admission)
    for name, forged in _forged_admissions(advert):
        if forged is not None:  # ("another id" is device 3's own: it proves device 3's keys)
            assert server.admitted(forged) == (name == "another id"), name
    assert len(proofs) == 1 + sum(f is not None for _, f in _forged_admissions(advert))
    proofs.clear()
    assert server.handle_advertise_keys(advert)
    assert server.admitted(advert.admission) and proofs == []
    assert server.received() == 1


def _forged_admissions(entry: AdvertiseKeys) -> list[tuple[str, Any]]:
    adm = entry.admission
    assert adm is not None
    other_round = small_cohort(round_id=b"round-2", device_auth=True)  # same keys, other salt
    flipped = bytes([adm.proof[0] ^ 1]) + adm.proof[1:]
    return [
        ("forged proof", dataclasses.replace(adm, proof=flipped)),
        ("short proof", dataclasses.replace(adm, proof=adm.proof[:-32])),
        ("long proof", dataclasses.replace(adm, proof=adm.proof + bytes(32))),
        ("no proof", dataclasses.replace(adm, proof=b"")),
        ("another id's proof", dataclasses.replace(adm, proof=small_cohort(
            device_auth=True).admissions[3].proof)),
        ("another id", small_cohort(device_auth=True).admissions[3]),
        ("another key", dataclasses.replace(adm, identity_key=small_cohort(
            device_auth=True).admissions[3].identity_key)),
        ("another round's proof", other_round.admissions[entry.device_id]),
        ("no admission", None),
    ]


def test_9_a_bad_roster_proof_makes_the_device_abort() -> None:
    """The roster's one Merkle multiproof must lead from every entry's (id, identity key, round
    keys) to this round's signed root: a forged, short or long proof, another round's proof
    (same cohort and keys), an entry's key or identity key changed, or an entry without its
    identity key makes the device abort before it reveals anything. (An entry's own admission
    proof is not read: the roster's proof covers it.)"""
    ring = {"n": 16, "k": 6, "t": 3, "device_auth": True}  # a roster of 7 of the 16 leaves
    _driver, _device, req = _share_setup(**ring)
    proof = req.range_proof
    assert proof and len(proof) % 32 == 0
    other = drive_to(small_cohort(round_id=b"round-2", **ring), Stage.SHARE_KEYS).pending[1]
    assert isinstance(other, ShareKeysRequest)
    other_proof = other.range_proof
    entry = next(e for e in req.roster if e.device_id != 1)
    stranger = small_cohort(seed=12, **ring).admissions[entry.device_id]
    assert entry.admission is not None
    cases: list[tuple[str, ShareKeysRequest]] = [
        ("forged proof", dataclasses.replace(req, range_proof=bytes([proof[0] ^ 1]) + proof[1:])),
        ("short proof", dataclasses.replace(req, range_proof=proof[:-32])),
        ("long proof", dataclasses.replace(req, range_proof=proof + bytes(32))),
        ("no proof", dataclasses.replace(req, range_proof=b"")),
        ("another round's proof", dataclasses.replace(req, range_proof=other_proof)),
        ("another identity key", _with_entry(req, entry.device_id, admission=dataclasses.replace(
            entry.admission, identity_key=stranger.identity_key))),
        ("no admission", _with_entry(req, entry.device_id, admission=None)),
    ]
    for name, forged in cases:
        _driver, device, _req = _share_setup(**ring)
        with pytest.raises(SecAggAbort) as info:
            device.share_keys(forged)
        assert info.value.reason is AbortReason.BAD_SIGNATURE, name
        assert device._b is None  # nothing drawn, nothing shared


def test_9_substituted_keys_are_caught_by_the_proof() -> None:
    """A server that replaces all of a neighbour's keys (identity and round keys, consistently
    in the entry and the admission) cannot prove they are the neighbour's."""
    _driver, device, req = _share_setup(device_auth=True)
    entry = next(e for e in req.roster if e.device_id == 2)
    assert entry.admission is not None
    mallory = ed25519_from_seed(b"\x66" * 32)
    c_pk = x25519_public_bytes(x25519_from_seed(b"\x07" * 32))
    s_pk = x25519_public_bytes(x25519_from_seed(b"\x08" * 32))
    admission = dataclasses.replace(entry.admission, identity_key=ed25519_public_bytes(mallory),
                                    c_pk=c_pk, s_pk=s_pk)
    forged = _with_entry(req, 2, c_pk=c_pk, s_pk=s_pk, admission=admission)
    assert abort_reason(device.share_keys, forged) is AbortReason.BAD_SIGNATURE


def test_9_bad_admission_proof_rejected_by_the_server() -> None:
    driver = drive_to(small_cohort(device_auth=True), Stage.ADVERTISE_KEYS)
    advert = driver.devices[2].advertise_keys()
    for name, admission in _forged_admissions(advert):
        assert violation(driver.server.handle_advertise_keys, dataclasses.replace(
            advert, admission=admission)) is Violation.BAD_SIGNATURE, name
    assert driver.server.received() == 0
    assert driver.server.handle_advertise_keys(advert) is True


@pytest.mark.parametrize(("policy", "match"), [
    (DevicePolicy(min_threshold=5), "t=4"),
    (DevicePolicy(min_n_min=5), "n_min=4"),
    (DevicePolicy(require_device_auth=True), "device_auth"),
    (DevicePolicy(max_dimension=8), "dimension"),
])
def test_9_config_below_the_device_policy_floor(policy: DevicePolicy, match: str) -> None:
    cohort = small_cohort()
    with pytest.raises(SecAggAbort, match=match) as info:
        cohort.device(1, policy=policy)
    assert info.value.reason is AbortReason.BAD_CONFIG


def test_9_config_signed_by_someone_else() -> None:
    a, b = small_cohort(seed=1), small_cohort(seed=2)
    with pytest.raises(SecAggAbort) as info:
        SecAggDevice(a.signed, b.coordinator_public, 1)
    assert info.value.reason is AbortReason.BAD_CONFIG
    with pytest.raises(SecAggConfigError):
        SecAggServer(a.signed, b.coordinator_public)


# -- 10. Corrupted shares ------------------------------------------------------------------------

def _corrupt(kind: str, victim: int) -> Callable[[Stage, int, DeviceMessage], DeviceMessage]:
    def hook(stage: Stage, v: int, msg: DeviceMessage) -> DeviceMessage:
        if isinstance(msg, UnmaskResponse):
            field = "s_shares" if kind == "s" else "b_shares"
            entries = tuple((o, shamir.encode_share((shamir.decode_share(y) + 1) % shamir.PRIME))
                            if o == victim else (o, y) for o, y in getattr(msg, field))
            changes: dict[str, Any] = {field: entries}
            return dataclasses.replace(msg, **changes)
        return msg
    return hook


def test_10_corrupted_s_shares_do_not_match_the_public_key() -> None:
    outcome = run_round(small_cohort(), reports_for(8, 12),
                        DropoutPlan.at(Stage.MASKED_INPUT, {8}), to_server=_corrupt("s", 8))
    assert outcome.result is None and outcome.abort is not None
    assert outcome.abort.reason is AbortReason.CORRUPT_SHARE


def test_10_corrupted_b_shares_do_not_match_the_commitment() -> None:
    outcome = run_round(small_cohort(), reports_for(8, 12), to_server=_corrupt("b", 3))
    assert outcome.result is None and outcome.abort is not None
    assert outcome.abort.reason is AbortReason.CORRUPT_SHARE


def test_10_share_value_at_or_above_p_is_rejected_by_the_server() -> None:
    driver = drive_to(small_cohort(), Stage.UNMASK)
    response = driver.devices[1].unmask(driver.pending[1])  # type: ignore[arg-type]
    owner = response.b_shares[0][0]
    bad = dataclasses.replace(response, b_shares=(
        (owner, shamir.PRIME.to_bytes(33, "big")), *response.b_shares[1:]))
    assert violation(driver.server.handle_unmask, bad) is Violation.OUT_OF_RANGE
    short = dataclasses.replace(response, s_shares=((owner, b"\x00"),))
    assert violation(driver.server.handle_unmask, short) is Violation.MALFORMED
    assert driver.server.handle_unmask(response) is True


def test_10_share_value_at_or_above_p_inside_a_ciphertext_aborts_the_device() -> None:
    """A malicious neighbour (here device 2, using its real channel key) encrypts a share >= p."""
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    request: MaskedInputRequest = driver.pending[1]  # type: ignore[assignment]
    sid = driver.server.session_id
    key = driver.devices[1]._pair_keys[2][device_module._KEY_IN]  # the 2 -> 1 key, as 1 holds it
    plain = u32(2) + u32(1) + shamir.PRIME.to_bytes(33, "big") + bytes(33)
    blob = aead_encrypt(key, plain, sid + u32(2) + u32(1), lambda n: bytes(n))
    shares = tuple(EncryptedShare(2, 1, blob) if s.src == 2 else s for s in request.shares)
    assert abort_reason(driver.devices[1].masked_input, dataclasses.replace(
        request, shares=shares), driver.reports[1]) is AbortReason.CORRUPT_SHARE


# -- 11. Wraparound ------------------------------------------------------------------------------

def test_11_every_device_sets_the_same_index() -> None:
    """All n devices set index 0: the sum is exactly n, because the config guarantees R > n
    (a config with R <= n is refused: see test_secagg_config.py)."""
    outcome = run_round(small_cohort(), {u: np.array([0]) for u in range(1, 9)})
    assert_correct(outcome)
    assert outcome.result is not None and int(outcome.result.total[0]) == 8


# -- 12. Freshness -------------------------------------------------------------------------------

def test_12_identical_inputs_in_two_rounds_give_different_masked_vectors() -> None:
    vectors = []
    for round_id in (b"round-1", b"round-2"):
        driver = drive_to(small_cohort(round_id=round_id), Stage.MASKED_INPUT)
        msg = driver.devices[1].masked_input(driver.pending[1], np.array([2]))  # type: ignore[arg-type]
        vectors.append(msg.vector)
    assert not np.array_equal(vectors[0], vectors[1])


def test_12_a_retry_with_a_different_report_is_refused() -> None:
    """Sending y for x and then y' for x' under the same masks would reveal x - x'."""
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    device, request = driver.devices[1], driver.pending[1]
    device.masked_input(request, np.array([2]))  # type: ignore[arg-type]
    assert abort_reason(device.masked_input, request,
                        np.array([3])) is AbortReason.REPORT_CHANGED


def test_12_messages_to_another_device_are_refused() -> None:
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    assert abort_reason(driver.devices[1].share_keys,
                        driver.pending[2]) is AbortReason.WRONG_SESSION
    advert: AdvertiseKeys = driver.devices[3].advertise_keys()
    assert advert.session_id == driver.server.session_id


# -- Every rejection leaves the round intact -----------------------------------------------------

def test_rejected_messages_change_no_state() -> None:
    """A battery of bad messages at every stage; the round still releases the exact sum."""
    cohort = small_cohort(device_auth=True, consistency_check=True)
    sid = cohort.session_id

    def junk(stage: Stage, u: int, msg: DeviceMessage) -> DeviceMessage:
        server = driver.server
        before = (server.received(), server.stage)
        bad: list[object] = [
            dataclasses.replace(msg, session_id=bytes(32)),
            dataclasses.replace(msg, device_id=99),
            dataclasses.replace(msg, device_id=0),
            "not a message",
        ]
        if isinstance(msg, MaskedInput):
            bad.append(MaskedInput(sid, u, msg.vector[:-1]))
            bad.append(MaskedInput(sid, u, msg.vector.reshape(2, -1)))
        if isinstance(msg, ShareKeysResponse):
            bad.append(dataclasses.replace(msg, shares=msg.shares[1:]))
            bad.append(dataclasses.replace(msg, b_commitment=b"short"))
            first = msg.shares[0]
            bad.append(dataclasses.replace(msg, shares=(
                dataclasses.replace(first, ciphertext=first.ciphertext[:-1]), *msg.shares[1:])))
        if isinstance(msg, UnmaskResponse):
            bad.append(dataclasses.replace(msg, b_shares=msg.b_shares[1:]))
            bad.append(dataclasses.replace(msg, s_shares=msg.b_shares))
        handlers: dict[Stage, Callable[[Any], bool]] = {
            Stage.ADVERTISE_KEYS: server.handle_advertise_keys,
            Stage.SHARE_KEYS: server.handle_share_keys,
            Stage.MASKED_INPUT: server.handle_masked_input,
            Stage.CONSISTENCY_CHECK: server.handle_consistency_check,
            Stage.UNMASK: server.handle_unmask}
        handler = handlers[stage]
        for item in bad:
            with pytest.raises(ProtocolViolation):
                handler(item)
            assert (server.received(), server.stage) == before
        return msg

    driver = SimulatedRound(cohort, reports_for(8, 12), to_server=junk)
    outcome = driver.run()
    assert_correct(outcome)
    assert len(outcome.contributors) == 8


def test_device_refuses_a_request_of_the_wrong_type() -> None:
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    assert abort_reason(driver.devices[1].unmask, driver.pending[1]) is AbortReason.MALFORMED
