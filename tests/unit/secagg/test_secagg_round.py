"""Honest rounds: complete and sparse graphs, dropouts at every stage, retries, options."""

from __future__ import annotations

import dataclasses
import tracemalloc
from collections.abc import Sequence

import numpy as np
import pytest
from secagg_testkit import assert_correct, drive_to, packed_shares, reports_for, small_cohort

from fedhh.secagg import shamir
from fedhh.secagg.device import SHARE_CIPHERTEXT_BYTES
from fedhh.secagg.errors import AbortReason, ProtocolViolation, Violation
from fedhh.secagg.messages import (
    AdvertiseKeys,
    DeviceMessage,
    EncryptedShare,
    MaskedInput,
    MaskedInputRequest,
    OwnerShares,
    RingRun,
    ShareBundle,
    ShareKeysRequest,
    ShareKeysResponse,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
)
from fedhh.secagg.params import choose_parameters
from fedhh.secagg.report import indices_from_dense
from fedhh.secagg.simulate import DropoutPlan, make_cohort, run_round

STAGES = [Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK,
          Stage.UNMASK]


@pytest.mark.parametrize(("auth", "check"), [(False, False), (True, False), (True, True)])
def test_round_without_dropouts_releases_the_exact_sum(auth: bool, check: bool) -> None:
    cohort = make_cohort(40, 64, 10, 6, n_min=30, device_auth=auth, consistency_check=check)
    outcome = run_round(cohort, reports_for(40, 64))
    assert_correct(outcome)
    assert outcome.result is not None and outcome.result.num_contributors == 40
    expected = sum(np.bincount(r, minlength=64) for r in reports_for(40, 64).values())
    assert np.array_equal(outcome.result.total, expected)
    assert outcome.rejected == [] and outcome.device_aborts == {}


@pytest.mark.parametrize("stage", STAGES)
def test_dropouts_at_each_stage(stage: Stage) -> None:
    """SECAGG.md 7.6: the sum is the plaintext sum over U3, whichever stage devices drop at."""
    cohort = make_cohort(40, 32, 10, 5, n_min=20, device_auth=True, consistency_check=True)
    dropped = {3, 4, 17, 29, 40}
    outcome = run_round(cohort, reports_for(40, 32), DropoutPlan.at(stage, dropped))
    assert_correct(outcome)
    in_sum = stage > Stage.MASKED_INPUT  # dropped after sending y_u: still a contributor
    assert (outcome.contributors >= dropped) == in_sum
    assert len(outcome.contributors) == (40 if in_sum else 35)


def test_dropouts_at_every_stage_in_one_round() -> None:
    cohort = make_cohort(60, 16, 14, 7, n_min=30)
    plan = DropoutPlan({s: frozenset({10 * i + 1, 10 * i + 2}) for i, s in enumerate(STAGES)})
    assert_correct(run_round(cohort, reports_for(60, 16), plan))


def test_both_ends_of_one_edge_drop() -> None:
    """u and its neighbour v both drop before masked input: their pairwise mask is never used,
    and the masks they share with the survivors are removed through their s-shares."""
    cohort = make_cohort(30, 16, 8, 4, n_min=10)
    driver = drive_to(cohort, Stage.SHARE_KEYS)
    u = 5
    v = driver.server.graph.neighbours(u)[0]
    outcome = run_round(cohort, reports_for(30, 16), DropoutPlan.at(Stage.MASKED_INPUT, {u, v}))
    assert_correct(outcome)
    assert u not in outcome.contributors and v not in outcome.contributors
    assert outcome.revealed[u] == {"s"} and outcome.revealed[v] == {"s"}


def test_both_ends_of_one_edge_drop_at_different_stages() -> None:
    cohort = make_cohort(30, 16, 8, 4, n_min=10)
    v = drive_to(cohort, Stage.SHARE_KEYS).server.graph.neighbours(5)[0]
    plan = DropoutPlan({Stage.SHARE_KEYS: frozenset({5}), Stage.UNMASK: frozenset({v})})
    assert_correct(run_round(cohort, reports_for(30, 16), plan))


def test_parameters_from_the_finder_survive_ten_percent_dropout() -> None:
    params = choose_parameters(200, 0.1, 0.05)
    cohort = make_cohort(200, 8, params.k, params.t, n_min=150)
    plan = DropoutPlan.random(200, 0.1, np.random.default_rng(5))
    assert_correct(run_round(cohort, reports_for(200, 8), plan))


def test_thirty_two_bit_modulus() -> None:
    cohort = make_cohort(12, 20, 6, 3, modulus_bits=32)
    outcome = run_round(cohort, reports_for(12, 20))
    assert_correct(outcome)
    assert outcome.result is not None and outcome.result.total.dtype == np.uint32


def test_dense_reports_are_accepted_through_indices_from_dense() -> None:
    cohort = small_cohort()
    dense = {u: (np.arange(12) % u == 0).astype(np.int8) for u in range(1, 9)}
    outcome = run_round(cohort, {u: indices_from_dense(d) for u, d in dense.items()})
    assert_correct(outcome)
    assert outcome.result is not None
    assert np.array_equal(outcome.result.total, sum(d.astype(np.int64) for d in dense.values()))


def test_retried_requests_get_the_same_answers() -> None:
    """A transport retry re-sends an identical request: the device answers identically, and the
    server ignores the identical duplicate."""
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    device, request = driver.devices[2], driver.pending[2]
    first = device.masked_input(request, driver.reports[2])  # type: ignore[arg-type]
    again = device.masked_input(request, driver.reports[2])  # type: ignore[arg-type]
    assert np.array_equal(first.vector, again.vector)
    assert driver.server.handle_masked_input(first) is True
    assert driver.server.handle_masked_input(again) is False
    assert driver.devices[3].advertise_keys() == driver.devices[3].advertise_keys()


def test_masked_input_wire_round_trip() -> None:
    driver = drive_to(small_cohort(), Stage.MASKED_INPUT)
    msg = driver.devices[1].masked_input(driver.pending[1], driver.reports[1])  # type: ignore[arg-type]
    wire = MaskedInput.from_wire(msg.session_id, 1, msg.vector_bytes(), 16)
    assert np.array_equal(wire.vector, msg.vector)
    assert driver.server.handle_masked_input(wire) is True


def test_can_close_early_when_everyone_answered() -> None:
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    server = driver.server
    assert server.expected() == frozenset(range(1, 9)) and not server.can_close_early()
    assert server.expected_count() == 8  # (the count the quiet close asks, no set built)
    for u, request in driver.pending.items():
        server.handle_share_keys(driver.devices[u].share_keys(request))  # type: ignore[arg-type]
    assert server.received() == 8 and server.can_close_early()


def test_server_abort_from_outside_releases_nothing() -> None:
    driver = drive_to(small_cohort(), Stage.UNMASK)
    driver.server.abort()
    driver.step()
    assert driver.outcome.abort is not None
    assert driver.outcome.abort.reason is AbortReason.CANCELLED
    assert driver.server.result is None


def test_unmask_can_close_as_soon_as_every_secret_has_t_shares() -> None:
    driver = drive_to(small_cohort(), Stage.UNMASK, DropoutPlan.at(Stage.MASKED_INPUT, {8}))
    server = driver.server
    assert server.expected_count() == len(server.expected()) == 7
    answered = 0
    for u, request in sorted(driver.pending.items()):
        if server.can_close_early():
            break
        server.handle_unmask(driver.devices[u].unmask(request))  # type: ignore[arg-type]
        answered += 1
    # t = 4 shares per secret: 5 of the 7 survivors suffice (nobody holds a share of itself)
    assert server.can_close_early() and answered == 5
    server.close_stage()
    assert server.result is not None and server.result.num_contributors == 7
    expected = sum(np.bincount(driver.reports[u], minlength=12) for u in range(1, 8))
    assert np.array_equal(server.result.total, expected)


@pytest.mark.parametrize("packed", [False, True])
def test_the_server_routes_each_share_to_its_recipient_in_sender_order(packed: bool) -> None:
    """The masked-input requests (ShareBundles, packed by the server) hold exactly the shares
    of U2 addressed to each recipient, ordered by sender, as a tuple of EncryptedShare reads
    (device 1 sent none: the shares addressed to it go nowhere), whether the devices' shares
    came one object each or packed (``packed``: every other device's); a ShareBundle is a
    sequence of EncryptedShare that equals that tuple."""
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    sent: list[EncryptedShare] = []
    for u, request in sorted(driver.pending.items())[1:]:
        response = driver.devices[u].share_keys(request)  # type: ignore[arg-type]
        sent.extend(response.shares)
        if packed and u % 2:
            response = packed_shares(response)
            assert tuple(response.shares) == tuple(s for s in sent if s.src == u)
        assert driver.server.handle_share_keys(response)
    requests = driver.server.close_stage()
    assert sorted(requests) == sorted(driver.pending)[1:]
    for v, request in requests.items():
        assert isinstance(request, MaskedInputRequest)
        bundle = request.shares
        assert isinstance(bundle, ShareBundle)
        expected = tuple(sorted((s for s in sent if s.dst == v), key=lambda s: s.src))
        assert bundle == expected and tuple(bundle) == expected and len(bundle) == len(expected)
        assert bundle.senders == tuple(s.src for s in expected)
        assert bundle[0] == expected[0] and bundle[-1] == expected[-1]
        assert bundle[1:3] == expected[1:3]
        assert bundle == ShareBundle(v, bundle.senders, b"".join(s.ciphertext for s in expected),
                                     len(expected[0].ciphertext))
        assert hash(bundle) == hash(expected)
    with pytest.raises(ValueError, match="need 6 bytes"):
        ShareBundle(1, (2, 3), bytes(5), 3)


def test_packed_shares_are_checked_as_shares_one_by_one_are() -> None:
    """Shares sent packed are refused, changing nothing, where they are not the device's own
    (another sender), miss a neighbour or name a non-id, or hold ciphertexts of another
    width; once accepted, the same shares again, packed or one by one, are a duplicate."""
    driver = drive_to(small_cohort(), Stage.SHARE_KEYS)
    server = driver.server
    response = driver.devices[2].share_keys(driver.pending[2])  # type: ignore[arg-type]
    packed = packed_shares(response)
    bundle = packed.shares
    assert isinstance(bundle, ShareBundle)
    dsts, blob, width = bundle.recipients, bundle.blob, SHARE_CIPHERTEXT_BYTES
    forged = {
        "another sender": ShareBundle.sent_by(3, dsts, blob, width),
        "a neighbour missed": ShareBundle.sent_by(2, dsts[1:], blob[width:], width),
        "a neighbour twice": ShareBundle.sent_by(2, (dsts[1], *dsts[1:]), blob, width),
        "a recipient that is no id": ShareBundle.sent_by(2, (str(dsts[0]), *dsts[1:]), blob,
                                                         width),
        "addressed to the device": ShareBundle(2, dsts, blob, width),
        "another width": ShareBundle.sent_by(2, dsts, blob + bytes(len(dsts)), width + 1),
    }
    for what, shares in forged.items():
        with pytest.raises(ProtocolViolation) as info:
            server.handle_share_keys(dataclasses.replace(packed, shares=shares))
        expected = Violation.WRONG_LENGTH if what == "another width" else Violation.MALFORMED
        assert info.value.reason == expected, what
    assert server.received() == 0
    assert server.handle_share_keys(packed)
    assert not server.handle_share_keys(packed) and not server.handle_share_keys(response)
    with pytest.raises(ProtocolViolation) as info:
        server.handle_share_keys(dataclasses.replace(packed, shares=ShareBundle.sent_by(
            2, dsts, bytes(len(blob)), width)))
    assert info.value.reason == Violation.DUPLICATE


def _packed_unmask(response: UnmaskResponse) -> UnmaskResponse:
    """``response`` with both lists as the OwnerShares a worker takes off the session stream."""
    def packed(entries: Sequence[tuple[int, bytes]]) -> OwnerShares:
        return OwnerShares(tuple(o for o, _ in entries), b"".join(v for _, v in entries),
                           shamir.SHARE_BYTES)
    return dataclasses.replace(response, b_shares=packed(response.b_shares),
                               s_shares=packed(response.s_shares))


def test_a_round_whose_devices_send_everything_packed_releases_the_sum() -> None:
    """Every other device's shares and unmask shares go packed (the rest one object each), with
    dropouts at every stage: the release is exactly the sum of the survivors' reports."""
    def pack(stage: Stage, u: int, message: DeviceMessage) -> DeviceMessage:
        if u % 2 and isinstance(message, ShareKeysResponse):
            return packed_shares(message)
        if u % 2 and isinstance(message, UnmaskResponse):
            return _packed_unmask(message)
        return message

    cohort = make_cohort(n=12, dimension=16, k=11, t=6, n_min=6, seed=5)
    plan = DropoutPlan({Stage.SHARE_KEYS: frozenset({2}), Stage.MASKED_INPUT: frozenset({3}),
                        Stage.UNMASK: frozenset({4})})
    outcome = run_round(cohort, reports_for(12, 16), plan, to_server=pack)
    assert outcome.abort is None and not outcome.rejected, outcome.rejected
    assert_correct(outcome)


def test_packed_unmask_shares_are_checked_as_pairs_are() -> None:
    """Unmask shares sent packed are refused, changing nothing, where their values are not 33
    bytes, an owner is no id, the owners do not match the request, or a value is >= p; once
    accepted, the same shares again, packed or as pairs, are a duplicate."""
    driver = drive_to(small_cohort(), Stage.UNMASK, DropoutPlan.at(Stage.MASKED_INPUT, {8}))
    server = driver.server
    response = driver.devices[2].unmask(driver.pending[2])  # type: ignore[arg-type]
    packed = _packed_unmask(response)
    b = packed.b_shares
    assert isinstance(b, OwnerShares) and tuple(b) == response.b_shares
    owners, values = b.owners, b.blob
    too_big = (1 << 264) - 1
    forged = {
        "values of 32 bytes": (OwnerShares(owners, values[:-len(owners)], 32),
                               Violation.WRONG_LENGTH),
        "an owner that is no id": (OwnerShares((str(owners[0]), *owners[1:]), values,
                                               shamir.SHARE_BYTES), Violation.MALFORMED),
        "an owner missed": (OwnerShares(owners[1:], values[shamir.SHARE_BYTES:],
                                        shamir.SHARE_BYTES), Violation.MALFORMED),
        "a value >= p": (OwnerShares(owners, too_big.to_bytes(33, "big")
                                     + values[shamir.SHARE_BYTES:], shamir.SHARE_BYTES),
                         Violation.OUT_OF_RANGE),
    }
    for what, (shares, reason) in forged.items():
        with pytest.raises(ProtocolViolation) as info:
            server.handle_unmask(dataclasses.replace(packed, b_shares=shares))
        assert info.value.reason == reason, what
    assert server.received() == 0
    assert server.handle_unmask(packed)
    assert not server.handle_unmask(packed) and not server.handle_unmask(response)


def test_the_server_keeps_no_requests_of_a_closed_stage() -> None:
    """Once a stage closes, its requests are dropped (a share-keys request holds its roster:
    ~k references per device, kept for the whole round before); the open stage's stay."""
    cohort = make_cohort(n=8, dimension=12, k=7, t=4, n_min=4, seed=11, device_auth=True,
                         consistency_check=True)
    driver = drive_to(cohort, Stage.UNMASK)
    server = driver.server
    assert server._share_requests == {} and server._masked_requests == {}
    assert server._consistency_requests == {}
    assert sorted(server._unmask_requests) == sorted(driver.pending)
    driver.step()
    assert_correct(driver.outcome)


def test_devices_lent_no_generator_hold_none_until_their_masked_vector() -> None:
    """A device lent no mask generator makes one for its masked vector only: a load test's fleet
    holds tens of thousands of devices through a round, and a generator's two buffers of a
    chunk each (8 KiB at D = 4096 with 16-bit masks) were held by every one."""
    cohort = make_cohort(20, 4096, 6, 4, n_min=15)
    cohort.device(1)  # (imports and caches before the measurement)
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        devices = [cohort.device(u) for u in range(1, 21)]
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert held < len(devices) * 8 * 1024, held


def test_devices_lent_no_generator_mask_exactly_and_answer_retries_alike() -> None:
    """The generator a device makes per masked vector gives the masks a lent one gives: the
    round releases the exact sum, and a retried request gets the identical vector."""
    cohort = small_cohort()
    driver = drive_to(cohort, Stage.ADVERTISE_KEYS)
    driver.devices = {u: cohort.device(u) for u in driver.devices}  # none lent
    while driver.server.stage < Stage.MASKED_INPUT:
        driver.step()
    device, request = driver.devices[2], driver.pending[2]
    first = device.masked_input(request, driver.reports[2])  # type: ignore[arg-type]
    again = device.masked_input(request, driver.reports[2])  # type: ignore[arg-type]
    assert np.array_equal(first.vector, again.vector)
    assert_correct(driver.run())


def test_a_devices_jth_roster_neighbour_holds_its_shares_at_the_point_j() -> None:
    """The share points are positions in the owner's roster (ascending ids, from 1), not ids;
    with a neighbour that got the roster but never shared, a holder's position in the roster
    and its column among the server's share holders differ, and the server reads the former."""
    cohort = make_cohort(30, 16, 10, 5, n_min=10)
    gone = 7
    driver = drive_to(cohort, Stage.UNMASK, DropoutPlan.at(Stage.SHARE_KEYS, {gone}))
    owner = next(u for u in driver.server.graph.neighbours(gone)
                 if max(driver.devices[u]._pair_keys) != gone)
    roster = sorted(driver.devices[owner]._pair_keys)
    assert gone in roster
    holders = [v for v in roster if v != gone]
    points = [(roster.index(v) + 1,
               shamir.decode_share(driver.devices[v]._received[owner][:shamir.SHARE_BYTES]))
              for v in holders]
    secret = int.from_bytes(driver.devices[owner]._b, "big")
    t = cohort.config.t
    assert shamir.reconstruct(points[-t:]) == secret
    at_ids = [(v, y) for v, (_, y) in zip(holders, points, strict=True)]
    assert shamir.reconstruct(at_ids[-t:]) != secret
    assert_correct(driver.run())


@pytest.mark.parametrize(("n", "k"), [(30, 8), (12, 11)])
def test_each_roster_is_a_run_of_one_ring_holding_the_device_and_its_advertised_neighbours(
        n: int, k: int) -> None:
    """Sparse and complete graphs, with devices that never advertised: every request's roster
    is a view of one ring shared by the round, the device's own entry and those of its
    neighbours that advertised, each once."""
    gone = {3, 4, 17}
    driver = drive_to(make_cohort(n, 16, k, 4, n_min=5), Stage.SHARE_KEYS,
                      DropoutPlan.at(Stage.ADVERTISE_KEYS, gone))
    rings = set()
    for u, request in driver.pending.items():
        assert isinstance(request, ShareKeysRequest) and isinstance(request.roster, RingRun)
        rings.add(id(request.roster.ring))
        ids = [e.device_id for e in request.roster]
        assert len(ids) == len(set(ids))
        assert set(ids) == {u} | (set(driver.server.graph.neighbours(u)) - gone)
        assert all(e == driver.devices[e.device_id].advertise_keys() for e in request.roster)
    assert len(rings) == 1
    assert_correct(driver.run())


def test_a_ring_run_is_the_tuple_of_its_run() -> None:
    ring = tuple(AdvertiseKeys(b"s" * 32, i, bytes([i]) * 32, bytes([i + 1]) * 32)
                 for i in range(1, 6))
    for start, stop, skip, items in [
            (0, 5, None, ring), (3, 7, None, ring[3:] + ring[:2]), (5, 5, None, ()),
            (5, 10, None, ring), (1, 3, None, ring[1:3]), (3, 7, 0, ring[3:] + ring[1:2]),
            (3, 7, 3, ring[4:] + ring[:2]), (3, 7, 1, ring[3:] + ring[:1]),
            (4, 8, 1, (ring[4], ring[0], ring[2])), (0, 1, 0, ()), (5, 10, 4, ring[:4])]:
        span = RingRun(ring, start, stop, skip)
        assert span == items and items == span and tuple(span) == items
        assert hash(span) == hash(items) and len(span) == len(items)
        assert [span[i] for i in range(-len(items), len(items))] == list(items) * 2
        assert span[1:] == items[1:]
    assert RingRun(ring, 3, 7) != RingRun(ring, 3, 6)
    for start, stop in [(-1, 2), (2, 1), (0, 6), (6, 6), (3, 9)]:
        with pytest.raises(ValueError, match="is not a run"):
            RingRun(ring, start, stop)
    for skip in (2, 5, 6, -1):
        with pytest.raises(ValueError, match="is not in the run"):
            RingRun(ring, 3, 7, skip)
    with pytest.raises(AttributeError):
        span.ring = ()  # type: ignore[misc]


@pytest.mark.parametrize(("n", "k", "seed"), [(40, 10, 0), (40, 10, 1), (40, 10, 2), (14, 13, 0)])
def test_each_holders_signatures_are_its_signing_partners_but_itself(n: int, k: int,
                                                                    seed: int) -> None:
    """With dropouts at every stage, sparse graph or complete, each unmask request lists, as a
    run of one ring shared by the round, the consistency signatures of exactly the alive
    partners that signed."""
    cohort = make_cohort(n, 16, k, 5, n_min=8, device_auth=True, consistency_check=True)
    dropouts = DropoutPlan.random(n, 0.15, np.random.default_rng(seed), tuple(STAGES[:4]))
    driver = drive_to(cohort, Stage.UNMASK, dropouts)
    signers = driver.server._consistency
    rings = set()
    for v, request in driver.pending.items():
        assert isinstance(request, UnmaskRequest) and isinstance(request.signatures, RingRun)
        rings.add(id(request.signatures.ring))
        assert v not in dict(request.signatures)
        assert sorted(request.signatures) == [(i, signers[i]) for i in request.alive
                                              if i in signers]
    assert len(rings) == 1
    assert_correct(driver.run())


def test_the_share_keys_close_copies_the_ciphertexts_twice_at_most() -> None:
    """Closing the key sharing copies the stage's ciphertexts into one buffer and into the
    masked-input requests, and gathers them in recipient order a batch at a time: it also
    gathered them all at once, a third copy, a worker's largest allocation of the round (~50
    KB a device at its peak with k ~ 90: docs/benchmarks.md, "What a worker holds per
    device"; here the peak was 4.2 times the ciphertexts, now 2.8). The round still releases
    the exact sum."""
    cohort = make_cohort(300, 16, 40, 24, n_min=200, seed=3)
    driver = drive_to(cohort, Stage.SHARE_KEYS)
    driver.answer()
    shares = sum(len(r.dsts) for r in driver.server._share_responses.values())
    copied = shares * SHARE_CIPHERTEXT_BYTES
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        driver.close()
        peak = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert driver.server.stage == Stage.MASKED_INPUT
    # (two copies, a batch, and per share the ids' integer arrays, 8 bytes each, and the
    # partners' ids as Python ints, ~40 bytes; all deterministic sizes)
    assert peak < 3.3 * copied, (peak, copied)
    driver.run()
    assert_correct(driver.outcome)
