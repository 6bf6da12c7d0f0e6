"""The signed round config and admissions."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from fedhh.errors import ConfigError, FedhhError
from fedhh.secagg.config import (
    Admission,
    IdentityTree,
    RoundConfig,
    SignedConfig,
    StageDeadlines,
    issue_admission,
    session_id_of,
    sign_config,
    verify_admission,
    verify_config,
)
from fedhh.secagg.errors import SecAggConfigError
from fedhh.secagg.merkle import Member
from fedhh.secagg.primitives import (
    ed25519_from_seed,
    ed25519_public_bytes,
    x25519_from_seed,
    x25519_public_bytes,
)

COORD = ed25519_from_seed(bytes(32))
COORD_PUB = ed25519_public_bytes(COORD)
DEADLINES = StageDeadlines(1_000, 2_000, 3_000, 4_000, 5_000)
ROOT = bytes(range(100, 132))


def config(**changes: object) -> RoundConfig:
    base = dict(round_id=b"run-7/round-3", num_devices=100, dimension=1 << 10, modulus_bits=16,
                n_min=50, k=10, t=6, graph_seed=bytes(range(32)), deadlines=DEADLINES,
                device_auth=True, consistency_check=True, identity_root=ROOT)
    base.update(changes)
    return RoundConfig(**base)  # type: ignore[arg-type]


def test_round_trip_and_signature() -> None:
    cfg = config()
    assert RoundConfig.from_bytes(cfg.to_bytes()) == cfg
    signed = sign_config(cfg, COORD)
    assert verify_config(signed, COORD_PUB) == cfg


def test_tampered_or_foreign_config_is_rejected() -> None:
    signed = sign_config(config(), COORD)
    forged = sign_config(config(t=2), COORD)
    with pytest.raises(SecAggConfigError, match="signature"):
        verify_config(SignedConfig(forged.payload, signed.signature), COORD_PUB)
    other = ed25519_public_bytes(ed25519_from_seed(b"\x01" * 32))
    with pytest.raises(SecAggConfigError, match="signature"):
        verify_config(signed, other)
    with pytest.raises(SecAggConfigError):
        RoundConfig.from_bytes(signed.payload + b"x")
    with pytest.raises(SecAggConfigError):
        RoundConfig.from_bytes(b"garbage")


def test_session_id_depends_on_every_field() -> None:
    base = config()
    sids = {session_id_of(base)}
    changes: list[dict[str, Any]] = [
        dict(round_id=b"run-7/round-4"), dict(t=7), dict(n_min=51), dict(k=12),
        dict(dimension=1 << 11), dict(graph_seed=bytes(32)),
        dict(device_auth=True, consistency_check=False),
        dict(deadlines=StageDeadlines(1_000, 2_000, 3_000, 4_000, 5_001)),
        dict(identity_root=bytes(32)),
        dict(device_auth=False, consistency_check=False, identity_root=None)]
    for change in changes:
        sids.add(session_id_of(dataclasses.replace(base, **change)))
    assert len(sids) == 11


def test_modulus_must_exceed_the_cohort() -> None:
    """SECAGG.md 7.11: R <= N would let n ones wrap to a small number; the config is refused."""
    with pytest.raises(SecAggConfigError, match="exceed num_devices"):
        config(num_devices=65536, modulus_bits=16, k=10)
    with pytest.raises(SecAggConfigError, match="exceed num_devices"):
        config(num_devices=1 << 16, modulus_bits=16)
    assert config(num_devices=65535, modulus_bits=16).modulus_bits == 16
    assert config(num_devices=65536, modulus_bits=32).modulus_bits == 32


@pytest.mark.parametrize(("field", "value", "match"), [
    ("round_id", b"", "round_id"),
    ("num_devices", 1, "num_devices"),
    ("dimension", 0, "dimension"),
    ("dimension", (1 << 24) + 1, "dimension"),
    ("modulus_bits", 24, "modulus_bits"),
    ("n_min", 0, "n_min"),
    ("n_min", 101, "n_min"),
    ("k", 9, "even"),
    ("k", 100, "k must"),
    ("t", 0, "t must"),
    ("t", 11, "t must"),
    ("t", True, "t must"),
    ("graph_seed", b"x", "graph_seed"),
    ("consistency_check", "yes", "bools"),
    ("identity_root", None, "identity_root"),
    ("identity_root", bytes(31), "identity_root"),
])
def test_invalid_values_are_named(field: str, value: object, match: str) -> None:
    with pytest.raises(SecAggConfigError, match=match) as info:
        config(**{field: value})
    assert isinstance(info.value, ConfigError) and isinstance(info.value, FedhhError)


def test_consistency_check_needs_device_auth() -> None:
    with pytest.raises(SecAggConfigError, match="device_auth"):
        config(device_auth=False, consistency_check=True)


def test_deadlines_must_not_decrease() -> None:
    with pytest.raises(SecAggConfigError, match="non-decreasing"):
        StageDeadlines(2, 1, 3, 4, 5)
    with pytest.raises(SecAggConfigError, match="deadline"):
        StageDeadlines(-1, 1, 3, 4, 5)


def test_identity_root_only_with_device_auth() -> None:
    with pytest.raises(SecAggConfigError, match="only used with device_auth"):
        config(device_auth=False, consistency_check=False)
    plain = config(device_auth=False, consistency_check=False, identity_root=None)
    assert RoundConfig.from_bytes(plain.to_bytes()) == plain
    # A payload that carries a root but no device_auth flag is not a canonical encoding.
    forged = plain.to_bytes()[:-32] + ROOT
    with pytest.raises(SecAggConfigError, match="identity_root"):
        RoundConfig.from_bytes(forged)


@pytest.mark.parametrize(("version", "older"), [(1, "the coordinator"), (4, "the coordinator"),
                                                 (6, "this process")])
def test_configs_of_another_version_are_refused_with_the_remedy(version: int, older: str) -> None:
    """Version 1 configs carried no identity root (admissions were per-device signatures);
    version 2 roots committed to identity keys only (round keys were signed by devices); up to
    version 4 the tree's leaves were in id order (one proof per roster entry). The refusal
    says which side is older and what to run, not the number alone."""
    data = bytearray(config().to_bytes())
    offset = len(b"fedhh/secagg/v1/round-config")
    data[offset:offset + 2] = version.to_bytes(2, "big")
    with pytest.raises(SecAggConfigError, match=(
            f"^unsupported RoundConfig version {version} \\(this process reads version 5\\): "
            f"{older} runs an older fedhh than the other side; run the same fedhh version on "
            "the coordinator, the aggregation services and the devices$")):
        RoundConfig.from_bytes(bytes(data))


def _member(i: int) -> Member:
    """Device i's (identity key, c_pk, s_pk), from fixed seeds."""
    def seed(j: int) -> bytes:
        return j.to_bytes(32, "big")

    return (ed25519_public_bytes(ed25519_from_seed(seed(i))),
            x25519_public_bytes(x25519_from_seed(seed(1000 + 2 * i))),
            x25519_public_bytes(x25519_from_seed(seed(1001 + 2 * i))))


def _cohort_config(n: int, round_id: bytes = b"run-7/round-3",
                   graph_seed: bytes = bytes(range(32))) -> tuple[RoundConfig, IdentityTree,
                                                                  list[Member]]:
    keys = [_member(i) for i in range(1, n + 1)]
    tree = IdentityTree(round_id, graph_seed, keys)
    cfg = config(num_devices=n, n_min=2, k=n - 1 if n < 12 else 10, t=2, round_id=round_id,
                 graph_seed=graph_seed, identity_root=tree.root)
    return cfg, tree, keys


def test_admissions() -> None:
    cfg, tree, keys = _cohort_config(100)
    adm = issue_admission(tree, 5)
    assert adm == Admission(5, *keys[4], tree.proof(5))
    assert verify_admission(adm, cfg)
    assert not verify_admission(adm, dataclasses.replace(cfg, identity_root=bytes(32)))
    assert not verify_admission(dataclasses.replace(adm, device_id=6), cfg)
    for name in ("identity_key", "c_pk", "s_pk"):
        assert not verify_admission(dataclasses.replace(adm, **{name: bytes(32)}), cfg)
    assert not verify_admission(dataclasses.replace(adm, proof=b""), cfg)
    plain = config(device_auth=False, consistency_check=False, identity_root=None)
    assert not verify_admission(adm, plain)  # no root to check against
