"""Enrollment: one-time tokens enroll one device once and expire; files of tokens import
idempotently; bad tokens are one-line refusals; the rate limiter refuses bursts and recovers;
lifetime budgets keep devices out of runs they cannot pay for."""

from __future__ import annotations

from pathlib import Path

import pytest

from fedhh.errors import AuthenticationError, ConfigError, ConflictError, PrivacyError, RateLimited
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator import auth
from fedhh_coordinator.budgets import LifetimeBudget, RunAdmission
from fedhh_coordinator.enrollment import (
    OneTimeTokens,
    RateLimiter,
    attestation_factory,
    import_tokens,
    load_verifier,
    mint,
    new_tokens,
    token_hash,
)
from fedhh_coordinator.store import REISSUE_WINDOW_S, Store


def enroll(store: Store, token: str, key: bytes) -> int:
    attested = OneTimeTokens().verify(pb.EnrollRequest(enrollment_token=token.encode()), "peer")
    return store.add_device(b"c" * 32, key, "", attested.token_hash)


def test_a_token_enrolls_one_device_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    token, = mint(store, 1)
    enroll(store, token, b"k" * 32)
    with pytest.raises(AuthenticationError, match="already used"):
        enroll(store, token, b"j" * 32)
    with pytest.raises(AuthenticationError, match="unknown"):
        enroll(store, new_tokens(1)[0], b"j" * 32)
    with pytest.raises(ConflictError):  # a known key is refused before the token is spent
        enroll(store, mint(store, 1)[0], b"k" * 32)


def test_the_token_and_key_that_enrolled_again_reissue_the_credential(tmp_path: Path) -> None:
    """A device retrying an enrollment whose answer it lost: same id, a new credential that
    replaces the first (which nobody received); nothing else the token or key could do
    before is allowed now."""
    store = Store(tmp_path / "c.sqlite")
    token, = mint(store, 1)
    attested = OneTimeTokens().verify(pb.EnrollRequest(enrollment_token=token.encode()), "peer")
    device_id = store.add_device(auth.credential_hash(b"first"), b"k" * 32, "",
                                 attested.token_hash)
    assert store.add_device(auth.credential_hash(b"again"), b"k" * 32, "",
                            attested.token_hash) == device_id
    record = store.device(device_id)
    assert record is not None
    auth.verify_device(record[0], b"again")
    with pytest.raises(AuthenticationError):
        auth.verify_device(record[0], b"first")
    with pytest.raises(AuthenticationError, match="already used"):  # same token, other key
        enroll(store, token, b"j" * 32)
    with pytest.raises(ConflictError, match="another token"):  # same key, other token
        enroll(store, mint(store, 1)[0], b"k" * 32)
    with pytest.raises(ConflictError):  # same key, no token (another verifier)
        store.add_device(b"c" * 32, b"k" * 32, "")
    assert store.device(device_id + 1) is None


def test_a_credential_is_reissued_only_soon_after_the_enrollment(tmp_path: Path) -> None:
    """Past REISSUE_WINDOW_S a used token is worth nothing again, so one that leaks later
    cannot take over the device's credential."""
    store = Store(tmp_path / "c.sqlite")
    token, = mint(store, 1)
    device_id = enroll(store, token, b"k" * 32)
    with store._tx() as db:  # (as though enrolled just over the window ago)
        db.execute("UPDATE enrollment_tokens SET used_at = used_at - ?", (REISSUE_WINDOW_S + 1,))
    with pytest.raises(ConflictError, match="minutes ago"):
        enroll(store, token, b"k" * 32)
    record = store.device(device_id)
    assert record is not None and record[0] == b"c" * 32


def test_expired_tokens_enroll_nobody(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    token, = mint(store, 1, ttl_s=-1)
    with pytest.raises(AuthenticationError, match="expired"):
        enroll(store, token, b"k" * 32)


@pytest.mark.parametrize("bad", [b"", b"00" * 31, b"zz" * 32, b"00" * 33])
def test_malformed_tokens_are_refused(bad: bytes) -> None:
    with pytest.raises(AuthenticationError, match="enrollment token"):
        OneTimeTokens().verify(pb.EnrollRequest(enrollment_token=bad), "peer")


def test_token_files_import_once(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    path = tmp_path / "tokens.txt"
    tokens = new_tokens(3)
    path.write_text("\n".join(tokens) + "\n\n")
    assert import_tokens(store, str(path)) == 3
    assert import_tokens(store, str(path)) == 0
    enroll(store, tokens[1], b"k" * 32)
    path.write_text("not-a-token\n")
    with pytest.raises(ConfigError, match=r"tokens\.txt"):
        import_tokens(store, str(path))
    assert token_hash(bytes.fromhex(tokens[0])) != token_hash(bytes.fromhex(tokens[1]))


def test_a_device_share_given_to_the_coordinator_is_named_so(tmp_path: Path) -> None:
    """Before: "device-tokens-0-of-1.txt: an enrollment token is 64 hex digits" (of the user
    number "0" of its first line), for the device replica's share that `fedhh certs` writes
    beside the coordinator's device-tokens.txt. Nothing is imported."""
    store = Store(tmp_path / "c.sqlite")
    path = tmp_path / "device-tokens-0-of-1.txt"
    tokens = new_tokens(2)
    path.write_text(f"0 {tokens[0]}\n1 {tokens[1]}\n")
    with pytest.raises(ConfigError) as refused:
        import_tokens(store, str(path))
    assert str(refused.value) == (
        f"{path}:1: USER TOKEN lines are a device process's share of the tokens (for `fedhh "
        "device --enrollment-tokens-file`); the coordinator takes every token, one a line: "
        "`fedhh certs` writes them to device-tokens.txt")
    path.write_text("\n".join(tokens) + "\n")
    assert import_tokens(store, str(path)) == 2  # (none was imported before)


def test_the_rate_limiter_refuses_a_burst_and_recovers() -> None:
    # (its own clock: at 1000 per second, a real one refilled a token whenever the machine
    # paused the test for a millisecond between two calls)
    now = [100.0]
    limiter = RateLimiter(rate=1000.0, burst=5, clock=lambda: now[0])
    for _ in range(5):
        limiter.check("a")
    with pytest.raises(RateLimited):
        limiter.check("a")
    now[0] += 0.0009  # refills at 1000 per second: not a whole token yet
    with pytest.raises(RateLimited):
        limiter.check("a")
    now[0] += 0.0002  # 1.1 tokens
    limiter.check("a")
    with pytest.raises(RateLimited):
        limiter.check("a")


@pytest.mark.parametrize("value", ["0." + "00" * 32, "99999999999999999999." + "00" * 32,
                                   "-1." + "00" * 32, "1." + "00" * 31, "1.zz" + "00" * 31,
                                   "١." + "00" * 32, "x" * 600])
def test_malformed_bearers_are_refused_before_parsing(value: str) -> None:
    with pytest.raises(AuthenticationError):
        auth.parse_device_bearer((("authorization", f"Bearer {value}"),))


def test_lifetime_budgets_keep_spent_devices_out(tmp_path: Path) -> None:
    store = Store(tmp_path / "c.sqlite")
    ids = [store.add_device(b"c" * 32, bytes([i]) * 32, "") for i in range(3)]
    for run_id in ("a", "b", "c"):
        store.create_run(run_id, {}, 1.0, {}, {}, [])
    budget = LifetimeBudget(eps=2.0, delta=1e-5, period_s=3600)
    first = RunAdmission(store, budget, "a", 1.0, 1e-6)
    first.charge(ids[:2])
    first.charge(ids[:2])  # once per run
    second = RunAdmission(store, budget, "b", 1.0, 1e-6)
    assert all(second.eligible(d) for d in ids)  # 1 + 1 <= 2
    second.charge(ids[:1])
    third = RunAdmission(store, budget, "c", 1.0, 1e-6)
    assert [third.eligible(d) for d in ids] == [False, True, True]
    # A check-in that gathers too few says why devices that checked in did not count.
    assert second.shortfall() == ""
    assert third.shortfall() == (
        "; 1 enrolled devices have too little of their lifetime budget left for this run's "
        "(eps 1.0, delta 1e-06): each may spend eps 2.0, delta 1e-05 per 0.0416667 days "
        "(--lifetime-eps, --lifetime-delta)")
    again = RunAdmission(store, budget, "b", 1.0, 1e-6)  # a restart of run b
    assert again.eligible(ids[0])
    with pytest.raises(PrivacyError, match="lifetime budget"):
        RunAdmission(store, budget, "d", 3.0, 1e-6)


@pytest.mark.parametrize(("spec", "says"), [
    ("os:path", "path is a module, not a factory to call with the store"),
    ("json", "expected MODULE:FACTORY"),
    ("json:", "expected MODULE:FACTORY"),
    (":loads", "expected MODULE:FACTORY"),
    ("json:no_such_factory", "no attribute 'no_such_factory'"),
])
def test_load_verifier_refuses_what_the_start_check_refuses(tmp_path: Path, spec: str,
                                                            says: str) -> None:
    """The selector's and the coordinator's ``load_verifier`` parse --attestation with the
    start check's parser (before, its own: ``os:path`` was called, a TypeError, and ``json``
    was "module 'json' has no attribute ''")."""
    store = Store(tmp_path / "c.sqlite")
    for check in (lambda: attestation_factory(spec), lambda: load_verifier(spec, store)):
        with pytest.raises(ConfigError) as refused:
            check()
        assert str(refused.value).startswith(f"--attestation {spec!r}: ")
        assert says in str(refused.value)
