"""The cohort commitment: Merkle inclusion proofs of (device id, identity key, c_pk, s_pk) leaves.

Every case is deterministic (keys from fixed seeds). A proof is accepted only if it has exactly
the shape the signed n implies and hashes to the signed root from the claimed (id, keys) leaf.
"""

from __future__ import annotations

import dataclasses
import hashlib
import math

import pytest

from fedhh.secagg.config import (
    Admission,
    IdentityTree,
    RoundConfig,
    StageDeadlines,
    issue_admission,
    verify_admission,
)
from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.graph import ring_order
from fedhh.secagg.merkle import (
    HASH_BYTES,
    Member,
    cohort_salt,
    leaf_hash,
    proof_hashes,
    root_from_leaves,
    root_from_proof,
)
from fedhh.secagg.primitives import (
    LABELS,
    ed25519_from_seed,
    ed25519_public_bytes,
    x25519_from_seed,
    x25519_public_bytes,
)

ROUND = b"run-1/round-2/1"
SEED = bytes(range(32))


def keys_for(n: int, offset: int = 0) -> list[Member]:
    def x25519(seed: int) -> bytes:
        return x25519_public_bytes(x25519_from_seed(seed.to_bytes(32, "big")))

    return [(ed25519_public_bytes(ed25519_from_seed((i + offset).to_bytes(32, "big"))),
             x25519(2 * (i + offset)), x25519(2 * (i + offset) + 1))
            for i in range(1, n + 1)]


def config_for(tree: IdentityTree, round_id: bytes = ROUND, graph_seed: bytes = SEED
               ) -> RoundConfig:
    n = tree.n
    return RoundConfig(round_id=round_id, num_devices=n, dimension=16, modulus_bits=16,
                       n_min=2, k=n - 1 if n <= 12 else 12, t=2, graph_seed=graph_seed,
                       deadlines=StageDeadlines(1, 2, 3, 4, 5), device_auth=True,
                       identity_root=tree.root)


@pytest.mark.parametrize("n", [*range(1, 34), 100, 1000])
def test_every_member_verifies_and_proofs_are_short(n: int) -> None:
    keys = keys_for(n)
    tree = IdentityTree(ROUND, SEED, keys)
    depth = math.ceil(math.log2(n)) if n > 1 else 0
    for i in range(1, n + 1):
        proof, position = tree.proof(i), tree.position(i)
        assert len(proof) == HASH_BYTES * proof_hashes(n, [position]) <= HASH_BYTES * depth
        assert root_from_proof(tree.salt, n, position, i, keys[i - 1], proof) == tree.root


def test_an_admissions_verifier_agrees_with_the_multiproofs_on_any_proof_length() -> None:
    """root_from_proof (one leaf's path, the admissions' loop) and root_from_leaves (the
    rosters') are two verifiers of one shape: for every position of trees of 1 to 33 leaves
    (powers of two and their neighbours among them), the right proof, one hash short, one
    long, its hashes reversed, a byte short and a byte long get the same verdict from both."""
    keys = keys_for(33)
    for n in range(1, 34):
        tree = IdentityTree(ROUND, SEED, keys[:n])
        for i in range(1, n + 1):
            proof, position = tree.proof(i), tree.position(i)
            leaf = leaf_hash(tree.salt, i, keys[i - 1])
            hashes = [proof[j:j + HASH_BYTES] for j in range(0, len(proof), HASH_BYTES)]
            for shape in (proof, proof[HASH_BYTES:], proof + bytes(HASH_BYTES),
                          b"".join(reversed(hashes)), proof[:-1], proof + b"\0"):
                one = root_from_proof(tree.salt, n, position, i, keys[i - 1], shape)
                assert one == root_from_leaves(n, [(position, leaf)], shape), (n, i, len(shape))
                assert (one == tree.root) == (shape == proof)


def test_leaves_are_in_ring_order() -> None:
    """Position p holds the leaf of the device at ring position p, so that a device's
    neighbours are one run of leaves."""
    n = 9
    tree = IdentityTree(ROUND, SEED, keys_for(n))
    order = ring_order(SEED, n).tolist()
    assert sorted(order) == list(range(1, n + 1))
    assert [tree.position(i) for i in order] == list(range(n))


def test_shape_carries_an_odd_node_up() -> None:
    """n = 5: positions 0-3 pair up twice; position 4 has no sibling until the top level."""
    assert [proof_hashes(5, [p]) for p in range(5)] == [3, 3, 3, 3, 1]
    keys = keys_for(5)
    tree = IdentityTree(ROUND, SEED, keys)
    salt = cohort_salt(ROUND, SEED, 5)

    def node(a: bytes, b: bytes) -> bytes:
        return hashlib.sha256(LABELS["merkle-node"] + a + b).digest()

    leaves = [leaf_hash(salt, i, keys[i - 1]) for i in ring_order(SEED, 5).tolist()]
    expected = node(node(node(leaves[0], leaves[1]), node(leaves[2], leaves[3])), leaves[4])
    assert tree.root == expected
    last = int(ring_order(SEED, 5)[4])
    assert tree.proof(last) == node(node(leaves[0], leaves[1]), node(leaves[2], leaves[3]))


def test_leaves_and_nodes_are_domain_separated() -> None:
    assert len(LABELS["merkle-leaf"]) == len(LABELS["merkle-node"])
    assert LABELS["merkle-leaf"] != LABELS["merkle-node"]
    salt = cohort_salt(ROUND, SEED, 2)
    key = keys_for(1)[0]
    leaf = leaf_hash(salt, 1, key)
    assert leaf == hashlib.sha256(LABELS["merkle-leaf"] + salt + (1).to_bytes(4, "big")
                                  + b"".join(key)).digest()
    # The id is in the leaf: the same key at another position is another leaf.
    assert leaf_hash(salt, 2, key) != leaf


class TestRejections:
    n = 100
    keys = keys_for(100)
    tree = IdentityTree(ROUND, SEED, keys)
    config = config_for(tree)

    def admission(self, device_id: int = 37) -> Admission:
        return issue_admission(self.tree, device_id)

    def test_the_honest_admission_verifies(self) -> None:
        assert verify_admission(self.admission(), self.config)

    def test_forged_proofs(self) -> None:
        adm = self.admission()
        for byte in range(0, len(adm.proof), 7):  # flip a bit anywhere in the proof
            proof = bytearray(adm.proof)
            proof[byte] ^= 1 << (byte % 8)
            assert not verify_admission(dataclasses.replace(adm, proof=bytes(proof)),
                                        self.config)
        swapped = adm.proof[HASH_BYTES:2 * HASH_BYTES] + adm.proof[:HASH_BYTES] \
            + adm.proof[2 * HASH_BYTES:]
        assert not verify_admission(dataclasses.replace(adm, proof=swapped), self.config)
        zeros = bytes(len(adm.proof))
        assert not verify_admission(dataclasses.replace(adm, proof=zeros), self.config)

    def test_short_and_long_proofs(self) -> None:
        adm = self.admission()
        for proof in (b"", adm.proof[:-1], adm.proof[:-HASH_BYTES], adm.proof[HASH_BYTES:],
                      adm.proof + b"\x00", adm.proof + bytes(HASH_BYTES),
                      adm.proof + adm.proof[-HASH_BYTES:]):
            assert not verify_admission(dataclasses.replace(adm, proof=proof), self.config)

    def test_proof_for_another_id_or_key(self) -> None:
        adm = self.admission(37)
        other = self.admission(38)
        assert not verify_admission(dataclasses.replace(adm, device_id=38), self.config)
        assert not verify_admission(dataclasses.replace(adm, identity_key=other.identity_key),
                                    self.config)
        assert not verify_admission(dataclasses.replace(other, identity_key=adm.identity_key),
                                    self.config)
        assert not verify_admission(Admission(38, *other.keys, adm.proof), self.config)
        stranger = keys_for(1, offset=10_000)[0]
        for i, name in enumerate(("identity_key", "c_pk", "s_pk")):
            assert not verify_admission(dataclasses.replace(adm, **{name: stranger[i]}),
                                        self.config)
            assert not verify_admission(dataclasses.replace(adm, **{name: getattr(other, name)}),
                                        self.config)

    def test_ids_outside_the_cohort_and_malformed_fields(self) -> None:
        adm = self.admission(self.n)
        for device_id in (0, self.n + 1, -1, 1 << 32):
            assert not verify_admission(dataclasses.replace(adm, device_id=device_id),
                                        self.config)
        assert not verify_admission(dataclasses.replace(adm, device_id=True), self.config)
        assert not verify_admission(dataclasses.replace(adm, identity_key=adm.identity_key[:31]),
                                    self.config)
        assert not verify_admission(dataclasses.replace(adm, proof=bytearray(adm.proof)),
                                    self.config)  # type: ignore[arg-type]
        assert not verify_admission(("not", "an", "admission"), self.config)  # type: ignore[arg-type]

    def test_proof_from_another_round(self) -> None:
        """Same cohort, same keys, same ids: the salt (round id, graph seed, n) differs, so the
        roots differ and no proof of one round verifies under the other's config."""
        adm = self.admission()
        for round_id, seed in ((b"run-1/round-2/2", SEED), (ROUND, bytes(32))):
            other_tree = IdentityTree(round_id, seed, self.keys)
            other = config_for(other_tree, round_id, seed)
            assert other_tree.root != self.tree.root
            assert not verify_admission(adm, other)
            assert not verify_admission(issue_admission(other_tree, 37), self.config)
            assert verify_admission(issue_admission(other_tree, 37), other)

    def test_proof_from_a_cohort_of_another_size(self) -> None:
        bigger = IdentityTree(ROUND, SEED, [*self.keys, *keys_for(28, offset=500)])
        assert not verify_admission(issue_admission(bigger, 37), self.config)


def test_tree_input_validation() -> None:
    with pytest.raises(SecAggConfigError, match="empty"):
        IdentityTree(ROUND, SEED, [])
    with pytest.raises(SecAggConfigError, match="device 2"):
        IdentityTree(ROUND, SEED, [(bytes(32),) * 3, (bytes(32), bytes(31), bytes(32))])
    with pytest.raises(SecAggConfigError, match="device 1"):
        IdentityTree(ROUND, SEED, [(bytes(32),) * 2])  # type: ignore[list-item]
    tree = IdentityTree(ROUND, SEED, keys_for(3))
    for bad in (0, 4):
        with pytest.raises(SecAggConfigError, match="device_id"):
            tree.proof(bad)


def test_known_root() -> None:
    """Pins the leaf/node encoding (a change must bump the config version)."""
    tree = IdentityTree(ROUND, SEED, keys_for(3))
    assert tree.root.hex() == KNOWN_ROOT


KNOWN_ROOT = "2f3b11fa9a649e6064f0091d051cb4e0c0b8f22dd9368ad7895d63206da7e687"
