"""A roster's one Merkle multiproof: the cohort's leaves in ring order, so a device's own and its
neighbours' keys are one run of leaves (two at the ring's seam) proven by ~2 log2(n) hashes.

What a device accepts: exactly the proof that n and the listed entries' ring positions (derived
from their ids and the signed graph seed, never from the message) imply, leading to the signed
root. So the server cannot swap, change or add a neighbour's keys, nor drop an entry without the
proof failing; a neighbour that never advertised is simply not listed (its leaf is a proof hash).
Every case is deterministic (fixed seeds; hypothesis derandomized by the suite's profile).
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from secagg_testkit import assert_correct, drive_to, reports_for

from fedhh.secagg.config import (
    RoundConfig,
    StageDeadlines,
    issue_admission,
    verify_members,
)
from fedhh.secagg.errors import AbortReason, SecAggAbort, SecAggConfigError
from fedhh.secagg.graph import neighbours_of, ring_positions
from fedhh.secagg.merkle import HASH_BYTES, IdentityTree, Member, ProofNodes, proof_hashes
from fedhh.secagg.messages import AdvertiseKeys, ShareKeysRequest, Stage
from fedhh.secagg.simulate import DropoutPlan, make_cohort, run_round

ROUND = b"run-1/round-7/1"


def _keys(n: int, seed: int) -> list[Member]:
    """Distinct 32-byte keys (the tree only hashes them)."""
    def key(*parts: int) -> bytes:
        return hashlib.sha256(b"-".join(str(p).encode() for p in parts)).digest()
    return [(key(seed, u, 0), key(seed, u, 1), key(seed, u, 2)) for u in range(1, n + 1)]


def _config(tree: IdentityTree, n: int, k: int, graph_seed: bytes) -> RoundConfig:
    return RoundConfig(round_id=ROUND, num_devices=n, dimension=4, modulus_bits=16, n_min=1,
                       k=k, t=1, graph_seed=graph_seed, deadlines=StageDeadlines(1, 2, 3, 4, 5),
                       device_auth=True, identity_root=tree.root)


def _roster(tree: IdentityTree, keys: list[Member], n: int, k: int, graph_seed: bytes, u: int,
            absent: set[int]) -> tuple[list[tuple[int, Member]], bytes]:
    """Device u's roster entries (itself and its neighbours but ``absent``), and the proof a
    worker makes from the admissions of the devices that are not absent."""
    nodes = ProofNodes(n)
    for v in range(1, n + 1):
        if v not in absent:
            nodes.add(tree.position(v), issue_admission(tree, v).proof)
    listed = [u, *(v for v in neighbours_of(graph_seed, n, k, u) if v not in absent)]
    proof = nodes.prove(sorted(tree.position(v) for v in listed))
    assert proof == tree.prove(sorted(tree.position(v) for v in listed))  # = the tree's own
    return [(v, keys[v - 1]) for v in listed], proof


def _ks(n: int) -> list[int]:
    return sorted({*range(2, n - 1, 2), n - 1})


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_every_roster_verifies_and_no_single_byte_change_does(data: st.DataObject) -> None:
    """For any n, k, graph seed and set of devices that never advertised, each device's roster
    proof verifies; a change of any one byte of the proof, of an entry's keys, or of an id does
    not."""
    n = data.draw(st.integers(3, 70), label="n")
    k = data.draw(st.sampled_from(_ks(n)), label="k")
    graph_seed = data.draw(st.binary(min_size=32, max_size=32), label="graph_seed")
    keys = _keys(n, data.draw(st.integers(0, 1000), label="keys"))
    tree = IdentityTree(ROUND, graph_seed, keys)
    config = _config(tree, n, k, graph_seed)
    absent = set(data.draw(st.lists(st.integers(1, n), max_size=n // 3), label="absent"))
    devices = [u for u in range(1, n + 1) if u not in absent]
    u = data.draw(st.sampled_from(devices), label="device")
    members, proof = _roster(tree, keys, n, k, graph_seed, u, absent)
    assert verify_members(members, proof, config)
    assert verify_members(members[::-1], proof, config)  # the entries' order is not the proof's
    at = data.draw(st.integers(0, max(len(proof) - 1, 0)), label="proof byte")
    if proof:
        flipped = bytearray(proof)
        flipped[at] ^= 1 << data.draw(st.integers(0, 7))
        assert not verify_members(members, bytes(flipped), config)
    which = data.draw(st.integers(0, len(members) - 1), label="entry")
    field = data.draw(st.integers(0, 2), label="key")
    byte = data.draw(st.integers(0, 31), label="key byte")
    v, member = members[which]
    changed = list(member)
    changed[field] = bytes(b ^ (1 if i == byte else 0) for i, b in enumerate(member[field]))
    tampered = [*members[:which], (v, (changed[0], changed[1], changed[2])), *members[which + 1:]]
    assert not verify_members(tampered, proof, config)
    others = [w for w in range(1, n + 1) if w not in {e for e, _ in members}]
    if others:
        stranger = data.draw(st.sampled_from(others), label="another id")
        renamed = [*members[:which], (stranger, member), *members[which + 1:]]
        assert not verify_members(renamed, proof, config)


def test_a_roster_proof_is_about_two_paths_not_k() -> None:
    """With every neighbour listed, a roster of k + 1 entries needs at most two boundary paths'
    hashes: <= 2 ceil(log2 n), where k proofs of their own took k x ~log2 n."""
    for n, k in ((2500, 88), (25_000, 98), (1000, 10), (37, 6)):
        graph_seed = hashlib.sha256(str(n).encode()).digest()
        order, _ = ring_positions(graph_seed, n)
        depth = math.ceil(math.log2(n))
        for p in (0, 1, k // 2, n // 2, n - 1 - k // 2, n - 1):  # at the seam and inside
            run = sorted((p + d) % n for d in range(-(k // 2), k // 2 + 1))
            assert proof_hashes(n, run) <= 2 * depth, (n, k, p)
            assert proof_hashes(n, run) < k * (depth - 1)
            assert int(order[p]) in range(1, n + 1)


@pytest.mark.parametrize("n", [1, 2, 3, 4, 5, 6, 7, 9, 13, 17])
def test_small_cohorts_and_carried_nodes(n: int) -> None:
    """Every set of positions of a small tree (every one for n <= 9, all runs beyond), odd
    last nodes carried up included: the proof the tree gives verifies, has exactly the length
    the shape implies, and is refused one hash long or short or with two hashes swapped."""
    graph_seed = bytes([n]) * 32
    keys = _keys(n, n)
    tree = IdentityTree(ROUND, graph_seed, keys)
    if n >= 2:
        config = _config(tree, n, n - 1, graph_seed)
    order = ring_positions(graph_seed, n)[0].tolist()
    sets = ([[p for p in range(n) if mask >> p & 1] for mask in range(1, 1 << n)] if n <= 9
            else [[(a + d) % n for d in range(span)] for a in range(n) for span in (1, 3, n)])
    for positions in sets:
        positions = sorted(positions)
        proof = tree.prove(positions)
        assert len(proof) == HASH_BYTES * proof_hashes(n, positions)
        if n < 2:
            assert proof == b""  # n = 1: the leaf is the root
            continue
        members = [(order[p], keys[order[p] - 1]) for p in positions]
        assert verify_members(members, proof, config)
        assert not verify_members(members, proof + proof[:HASH_BYTES] if proof else bytes(32),
                                  config)
        if proof:
            assert not verify_members(members, proof[HASH_BYTES:], config)
        if len(proof) >= 2 * HASH_BYTES:
            swapped = proof[HASH_BYTES:2 * HASH_BYTES] + proof[:HASH_BYTES] + proof[2 * HASH_BYTES:]
            assert swapped == proof or not verify_members(members, swapped, config)


def test_the_tree_refuses_positions_out_of_order_or_range() -> None:
    tree = IdentityTree(ROUND, bytes(32), _keys(8, 1))
    for bad in ([], [3, 2], [1, 1], [-1], [8]):
        with pytest.raises(SecAggConfigError, match="positions"):
            tree.prove(bad)
    config = _config(tree, 8, 4, bytes(32))
    keys = _keys(8, 1)
    assert not verify_members([], b"", config)
    assert not verify_members([(1, keys[0]), (1, keys[0])], tree.prove([tree.position(1)]), config)
    assert not verify_members([(9, keys[0])], b"", config)
    assert not verify_members([(True, keys[0])], tree.proof(1), config)


@pytest.mark.parametrize("members", [
    [(1, None)], [(1, b"\0" * 96)], [(1, 7)], [(1,)], [None], [(1, [b"\0" * 32] * 3)],
], ids=["no keys", "keys as one string", "keys a number", "no keys in the pair", "no pair",
        "keys a list"])
def test_a_malformed_member_is_refused_not_raised(members: list[object]) -> None:
    """verify_members says False of any shape of input (a host's memoised leaf hash takes only
    a tuple of keys): it raised TypeError or ValueError on these."""
    tree = IdentityTree(ROUND, bytes(32), _keys(8, 1))
    config = _config(tree, 8, 4, bytes(32))
    assert verify_members(members, tree.proof(1), config) is False  # type: ignore[arg-type]


RING = {"n": 24, "k": 6, "t": 3, "n_min": 6, "device_auth": True}


def _request(driver_stage_requests: dict[int, object], u: int) -> ShareKeysRequest:
    request = driver_stage_requests[u]
    assert isinstance(request, ShareKeysRequest)
    return request


def _keys_of(entry: AdvertiseKeys, source: AdvertiseKeys) -> AdvertiseKeys:
    """``entry`` holding ``source``'s identity and round keys."""
    assert source.admission is not None
    admission = dataclasses.replace(source.admission, device_id=entry.device_id)
    return dataclasses.replace(entry, c_pk=source.c_pk, s_pk=source.s_pk, admission=admission)


def _tampered(request: ShareKeysRequest) -> list[tuple[str, ShareKeysRequest, AbortReason]]:
    roster = list(request.roster)
    me = request.device_id
    others = [i for i, e in enumerate(roster) if e.device_id != me]
    a, b = roster[others[0]], roster[others[1]]
    swapped = list(roster)
    swapped[others[0]], swapped[others[1]] = _keys_of(a, b), _keys_of(b, a)
    removed = [e for i, e in enumerate(roster) if i != others[0]]
    proof = request.range_proof
    return [
        ("two neighbours' keys swapped", dataclasses.replace(request, roster=tuple(swapped)),
         AbortReason.BAD_SIGNATURE),
        ("an entry removed, the proof kept", dataclasses.replace(request, roster=tuple(removed)),
         AbortReason.BAD_SIGNATURE),
        ("the proof's hashes reordered", dataclasses.replace(
            request, range_proof=proof[HASH_BYTES:2 * HASH_BYTES] + proof[:HASH_BYTES]
            + proof[2 * HASH_BYTES:]), AbortReason.BAD_SIGNATURE),
        ("a hash flipped", dataclasses.replace(
            request, range_proof=proof[:-1] + bytes([proof[-1] ^ 0x80])),
         AbortReason.BAD_SIGNATURE),
        ("one hash long", dataclasses.replace(request, range_proof=proof + proof[:HASH_BYTES]),
         AbortReason.BAD_SIGNATURE),
        ("one hash short", dataclasses.replace(request, range_proof=proof[:-HASH_BYTES]),
         AbortReason.BAD_SIGNATURE),
    ]


def _seam_device() -> int:
    """The device at ring position 0 of RING's cohort: its run of leaves wraps."""
    cohort = make_cohort(**RING, dimension=8)  # type: ignore[arg-type]
    return int(ring_positions(cohort.config.graph_seed, RING["n"])[0][0])


@pytest.mark.parametrize("where", ["seam", "inside"])
def test_a_tampered_roster_makes_the_device_abort_before_it_shares(where: str) -> None:
    u = _seam_device() if where == "seam" else 1
    cohort = make_cohort(**RING, dimension=8)  # type: ignore[arg-type]
    driver = drive_to(cohort, Stage.SHARE_KEYS)
    request = _request(driver.pending, u)  # type: ignore[arg-type]
    assert len(request.range_proof) <= 2 * HASH_BYTES * math.ceil(math.log2(RING["n"]))
    for name, forged, reason in _tampered(request):
        device = drive_to(cohort, Stage.SHARE_KEYS).devices[u]
        with pytest.raises(SecAggAbort) as info:
            device.share_keys(forged)
        assert info.value.reason is reason, name
        assert device._b is None, name  # nothing drawn, nothing shared
    # the untouched request, its entries in another order, is taken
    device = drive_to(cohort, Stage.SHARE_KEYS).devices[u]
    device.share_keys(dataclasses.replace(request, roster=tuple(request.roster)[::-1]))


def test_an_absent_neighbour_added_back_is_refused() -> None:
    """A neighbour that never advertised is not in the roster; listing it (with its true keys)
    under the proof made without it fails: the proof has its leaf as a hash."""
    cohort = make_cohort(**RING, dimension=8)  # type: ignore[arg-type]
    neighbours = neighbours_of(cohort.config.graph_seed, RING["n"], RING["k"], 1)
    absent = neighbours[0]
    driver = drive_to(cohort, Stage.SHARE_KEYS, DropoutPlan.at(Stage.ADVERTISE_KEYS, {absent}))
    request = _request(driver.pending, 1)  # type: ignore[arg-type]
    assert absent not in {e.device_id for e in request.roster}
    adm = cohort.admissions[absent]
    entry = dataclasses.replace(request.roster[0], device_id=absent, c_pk=adm.c_pk, s_pk=adm.s_pk,
                                admission=dataclasses.replace(adm, proof=b""))
    added = dataclasses.replace(request, roster=(*request.roster, entry))
    device = driver.devices[1]
    with pytest.raises(SecAggAbort) as info:
        device.share_keys(added)
    assert info.value.reason is AbortReason.BAD_SIGNATURE


@pytest.mark.parametrize("n,k,dropped", [(24, 6, {3, 4, 11}), (13, 12, {2}), (31, 8, set())])
def test_a_round_with_roster_proofs_releases(n: int, k: int, dropped: set[int]) -> None:
    """Rounds whose rosters are proven by one multiproof each release the exact sum: a ring
    graph, the complete graph, devices that never advertised (their leaves are proof hashes)."""
    cohort = make_cohort(n, 8, k, 3, n_min=n // 2, device_auth=True, consistency_check=True,
                         seed=5)
    reports = reports_for(n, 8)
    outcome = run_round(cohort, reports, DropoutPlan.at(Stage.ADVERTISE_KEYS, dropped))
    assert_correct(outcome)
    assert not outcome.device_aborts
    assert outcome.contributors == frozenset(set(range(1, n + 1)) - dropped)
