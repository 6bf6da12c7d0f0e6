"""Who may enroll a device: attestation verifiers and enrollment rate limits.

Software alone cannot tell one person's phone from a script that pretends to be a thousand
phones; what it can do is make every enrolled identity cost the operator something it controls.
Enrollment therefore asks an ``AttestationVerifier``:

- ``OneTimeTokens`` (the default): the request carries an enrollment token that the operator
  minted for one device (``fedhh admin mint-tokens``, or a tokens file given to the coordinator
  at start, e.g. from ``fedhh certs --device-tokens N``). Only the token's SHA-256 is stored; a
  token enrolls one device, once, before it expires.
- Any other verifier (a platform attestation service, say) plugs in with ``--attestation
  MODULE:FACTORY``: ``FACTORY(store)`` returns an object with the ``verify`` method below.

Whatever the verifier, the request must be signed with the identity key it enrolls
(``check_enrollment_signature``, checked before the token is spent or a credential re-issued):
a token enrolls a key only for whoever holds its private half. Without that, a leaked token and
the device's public key (no secret: the aggregator and the cohort see it) re-issued the
device's credential within the store's retry window and locked the device out.

On top of it, ``RateLimiter`` caps enrollments per second, overall and per peer address, so a
leaked batch of tokens cannot be turned into a flood. What remains (docs/threat-model.md): an
operator who mints tokens for Sybils defeats n_min; each device's local epsilon floor still holds.
"""

from __future__ import annotations

import hashlib
import importlib
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar, cast

from fedhh.backoff import Backoff
from fedhh.errors import AuthenticationError, ConfigError, RateLimited
from fedhh.rpc.device_users import enrollment_proof, tokens_file_text
from fedhh.secagg.primitives import SIGNATURE_BYTES, ed25519_verify
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.db.interface import StoreUnavailable
from fedhh_coordinator.store import Store

TOKEN_BYTES = 32
# The tokens a mint stores in one transaction. A transaction holds the store's write lock, which
# the enrollments of selectors sharing its SQLite file wait for at most 1 s
# (``db.sqlite.BUSY_TIMEOUT_S``): 50,000 tokens in one took 0.4 to 2.1 s at a load of 11 on 2
# cores, and such an enrollment failed "database is locked".
TOKENS_PER_TRANSACTION = 2_000
# How long a mint waits, in all, for a store another process keeps busy. SQLite hands its lock
# to no writer in turn: against a stream of a selector's enrollments, each taking the lock
# again at once, a mint's single 1 s wait ran out ("database is locked") and minted nothing.
MINT_PATIENCE_S = 10.0
_T = TypeVar("_T")


@dataclass(frozen=True)
class Attested:
    """What a verifier vouches for: the enrollment token to consume (its hash), if any."""

    token_hash: bytes | None = None


class AttestationVerifier(Protocol):
    def verify(self, request: pb.EnrollRequest, peer: str) -> Attested:
        """Vouch for the request or raise AuthenticationError (with a one-line reason). Called
        before the request's signature is checked: consume nothing here (the store consumes a
        token in the transaction that enrolls the device)."""
        ...


def check_enrollment_signature(request: pb.EnrollRequest) -> None:
    """The request's ``enrollment_signature`` must be its identity key's Ed25519 signature of
    ``enrollment_proof`` (token, key, label, attestation): proof that the caller holds the key
    it enrolls. AuthenticationError if it is missing or does not verify, ConfigError if it is
    not 64 bytes. The identity key is checked (32 bytes, a valid point) before this."""
    signature = request.enrollment_signature
    if not signature:
        raise AuthenticationError(
            "enrollment_signature is missing: an enrollment request must be signed with the "
            "identity key it enrolls (proof that the caller holds it; a device older than "
            "this check must be updated)")
    if len(signature) != SIGNATURE_BYTES:
        raise ConfigError(f"enrollment_signature must be a {SIGNATURE_BYTES}-byte Ed25519 "
                          f"signature, got {len(signature)} bytes")
    message = enrollment_proof(request.enrollment_token, request.identity_public_key,
                               request.label, request.attestation)
    if not ed25519_verify(request.identity_public_key, signature, message):
        raise AuthenticationError(
            "enrollment_signature does not verify under identity_public_key: the request was "
            "not signed by the holder of that key (or token, label or attestation differ "
            "from what was signed)")


def token_hash(token: bytes) -> bytes:
    return hashlib.sha256(b"fedhh/v1/enrollment-token" + token).digest()


def new_tokens(count: int) -> list[str]:
    """``count`` fresh one-time enrollment tokens (hex of 32 bytes from the OS)."""
    if count < 1:
        raise ConfigError(f"count must be >= 1, got {count}")
    return [os.urandom(TOKEN_BYTES).hex() for _ in range(count)]


def parse_token(text: str | bytes) -> bytes:
    """A token's bytes; AuthenticationError for anything that is not 64 hex digits."""
    raw = text.decode(errors="replace") if isinstance(text, bytes) else text
    raw = raw.strip()
    if len(raw) != 2 * TOKEN_BYTES:
        raise AuthenticationError(f"an enrollment token is {2 * TOKEN_BYTES} hex digits")
    try:
        return bytes.fromhex(raw)
    except ValueError:
        raise AuthenticationError("an enrollment token is hex digits only") from None


def mint(store: Store, count: int, ttl_s: float | None = None, label: str = "", *,
         request_id: str = "", clock: Callable[[], float] = time.monotonic,
         pause: Callable[[float], None] = time.sleep) -> list[str]:
    """Mint and register ``count`` tokens (valid ``ttl_s`` seconds, or until used), all or
    none (``_store_all``). Blocking: callers on an event loop run it in a thread.

    ``request_id``: the caller's name of this mint. A mint repeating one (the same count,
    ttl_s and label; another is ConflictError) first takes out the unused tokens the id's
    earlier mints stored, which nobody received: a call whose answer was lost, or whose mint
    failed where its tokens could not be taken out (the store away), is made again as it was
    and leaves one mint's tokens, all in its answer. Before, a retried mint minted twice."""
    tokens = new_tokens(count)
    expires = None if ttl_s is None else time.time() + ttl_s
    hashes = [token_hash(bytes.fromhex(t)) for t in tokens]
    patience = _Patience(clock, pause)
    if request_id:
        asked = {"count": count, "ttl_s": ttl_s, "label": label}
        earlier = patience.run("minted no token", store.record_mint, request_id, asked,
                               hashes)
        for start in range(0, len(earlier), TOKENS_PER_TRANSACTION):
            patience.run(f"minted no token (some of the tokens mint {request_id!r} stored "
                         "before are left to take out, which a mint made again with its id "
                         "does first)", store.remove_enrollment_tokens,
                         earlier[start:start + TOKENS_PER_TRANSACTION])
    _store_all(store, hashes, label, expires, patience, "minted",
               "a mint made again with its request id takes them out")
    return tokens


class _Patience:
    """How long a mint or import waits, in all, for a store another process keeps busy
    (``MINT_PATIENCE_S``): each step is tried again while the store is unavailable."""

    def __init__(self, clock: Callable[[], float], pause: Callable[[float], None]) -> None:
        self.clock, self.pause = clock, pause
        self.give_up = clock() + MINT_PATIENCE_S
        self.backoff = Backoff(0.02, 1.0)

    def run(self, failed: str, step: Callable[..., _T], *args: Any) -> _T:
        """``step(*args)``, tried again while the store is unavailable; past the patience,
        StoreUnavailable saying ``failed``."""
        while True:
            try:
                done = step(*args)
            except StoreUnavailable as error:
                if self.clock() >= self.give_up:
                    raise StoreUnavailable(
                        f"{failed}: the store stayed unavailable for {MINT_PATIENCE_S:g} s "
                        f"({error}); retry") from None
                self.pause(self.backoff.pause())
                continue
            self.backoff.reset()
            return done


def _store_all(store: Store, hashes: list[bytes], label: str, expires: float | None,
               patience: _Patience, done: str, remedy: str) -> int:
    """Register the tokens of ``hashes`` ``TOKENS_PER_TRANSACTION`` a transaction, all or
    none: a failure takes out the ones this call added (those known before are left as they
    were); returns how many were new. A transaction holds the store's write lock, which the
    runner's charges and other processes' enrollments wait for. ``done``: what the caller
    does to tokens ("minted"), and ``remedy`` for tokens left, for its failure's words."""
    added: list[bytes] = []
    try:
        for start in range(0, len(hashes), TOKENS_PER_TRANSACTION):
            added += patience.run(f"{done} no token", store.add_new_enrollment_tokens,
                                  hashes[start:start + TOKENS_PER_TRANSACTION], label, expires)
    except BaseException as error:
        left = _take_out(store, added)
        if left and isinstance(error, Exception):
            raise StoreUnavailable(
                f"{error} -- except that {left:,} of the tokens stored before the failure "
                f"could not be taken out again (the store failed): they count as unused; "
                f"{remedy}") from error
        raise
    return len(added)


def _take_out(store: Store, hashes: list[bytes]) -> int:
    """Remove the unused tokens of ``hashes`` a transaction of ``TOKENS_PER_TRANSACTION`` at a
    time, as far as the store lets it; returns how many it could not."""
    for start in range(0, len(hashes), TOKENS_PER_TRANSACTION):
        try:
            store.remove_enrollment_tokens(hashes[start:start + TOKENS_PER_TRANSACTION])
        except Exception:
            return len(hashes) - start
    return 0


def import_tokens(store: Store, path: str, *, clock: Callable[[], float] = time.monotonic,
                  pause: Callable[[float], None] = time.sleep) -> int:
    """Register the tokens of a file (one per line; blank lines ignored), all or none, as a
    mint stores its own (``_store_all``: before, one transaction, which for 10^6 tokens held
    the store's write lock for seconds); returns how many were new."""
    text = tokens_file_text(path)
    for number, line in enumerate(text.splitlines(), start=1):
        fields = line.split()
        if len(fields) == 2 and fields[0].isdigit():
            # A device process's share (`fedhh certs` writes device-tokens-i-of-N.txt beside
            # device-tokens.txt): before, "an enrollment token is 64 hex digits", of the "0".
            raise ConfigError(
                f"{path}:{number}: USER TOKEN lines are a device process's share of the tokens "
                "(for `fedhh device --enrollment-tokens-file`); the coordinator takes every "
                "token, one a line: `fedhh certs` writes them to device-tokens.txt")
    try:
        hashes = [token_hash(parse_token(line)) for line in text.split()]
    except AuthenticationError as error:
        raise ConfigError(f"{path}: {error}") from None
    return _store_all(store, hashes, f"file {os.path.basename(path)}", None,
                      _Patience(clock, pause), "imported",
                      "they are the file's first, and importing it again adds the rest")


class OneTimeTokens:
    """The default verifier: an unused, unexpired operator-minted token (consumed by the
    store in the transaction that enrolls the device)."""

    def verify(self, request: pb.EnrollRequest, peer: str) -> Attested:
        return Attested(token_hash(parse_token(request.enrollment_token)))


def attestation_factory(spec: str) -> Callable[..., Any]:
    """The callable ``--attestation MODULE:FACTORY`` names (``load_verifier`` calls it with the
    store); ConfigError for a spec that names none (``os:path`` named a module). The one parser
    of the option: the coordinator checks it at start with this, and ``load_verifier`` (the
    coordinator's and the selector's) uses it too (before, ``load_verifier`` parsed it again
    without these checks, so the selector called a module, ``os:path``, and crashed with a
    TypeError, and a spec without its colon was "module 'x' has no attribute ''")."""
    module_name, sep, factory_name = spec.partition(":")
    if not sep or not module_name or not factory_name:
        raise ConfigError(f"--attestation {spec!r}: expected MODULE:FACTORY")
    try:
        factory = getattr(importlib.import_module(module_name), factory_name)
    except (ImportError, AttributeError, ValueError) as error:
        raise ConfigError(f"--attestation {spec!r}: {error}") from None
    if not callable(factory):
        raise ConfigError(f"--attestation {spec!r}: {factory_name} is a "
                          f"{type(factory).__name__}, not a factory to call with the store")
    return cast(Callable[..., Any], factory)


def load_verifier(spec: str | None, store: Store) -> AttestationVerifier:
    """``MODULE:FACTORY`` -> ``FACTORY(store)``; the one-time token verifier for None."""
    if not spec:
        return OneTimeTokens()
    verifier = attestation_factory(spec)(store)
    if not callable(getattr(verifier, "verify", None)):
        raise ConfigError(f"--attestation {spec!r} made an object without verify()")
    return verifier


class RateLimiter:
    """Token buckets: ``rate`` calls per second with bursts of ``burst`` overall, and per key
    ``key_share`` of both (at most ``max_keys`` keys remembered, least recently seen forgotten
    first): with a share under 1, one key cannot take all the calls everyone may make.
    ``clock``: seconds, monotonic (a test's own, so a refill never depends on how fast a
    machine runs)."""

    def __init__(self, rate: float, burst: float, max_keys: int = 10_000,
                 clock: Callable[[], float] = time.monotonic, key_share: float = 1.0) -> None:
        if not rate > 0 or not burst >= 1 or not 0 < key_share <= 1 or burst * key_share < 1:
            raise ConfigError(f"need rate > 0, burst >= 1 and a share of them in (0, 1] with "
                              f"a burst of 1 or more, got {rate}, {burst} and {key_share}")
        self.rate, self.burst, self.max_keys = rate, burst, max_keys
        self._key_rate, self._key_burst = rate * key_share, burst * key_share
        self._clock = clock
        self._overall = (burst, clock())
        self._keys: OrderedDict[str, tuple[float, float]] = OrderedDict()

    @staticmethod
    def _take(state: tuple[float, float], now: float, rate: float, burst: float
              ) -> tuple[float, float] | None:
        level, at = state
        level = min(burst, level + (now - at) * rate)
        return None if level < 1 else (level - 1, now)

    def check(self, key: str) -> None:
        """Take one call for ``key``, or raise RateLimited (nothing is taken then)."""
        now = self._clock()
        overall = self._take(self._overall, now, self.rate, self.burst)
        mine = self._take(self._keys.get(key, (self._key_burst, now)), now, self._key_rate,
                          self._key_burst)
        if overall is None or mine is None:
            raise RateLimited("too many enrollments; retry later")
        self._overall = overall
        self._keys[key] = mine
        self._keys.move_to_end(key)
        while len(self._keys) > self.max_keys:
            self._keys.popitem(last=False)
