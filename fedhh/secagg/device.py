"""The device-side state machine of one round.

Call order: :meth:`SecAggDevice.advertise_keys`, :meth:`~SecAggDevice.share_keys`,
:meth:`~SecAggDevice.masked_input`, :meth:`~SecAggDevice.consistency_check` (only if the config
enables it), :meth:`~SecAggDevice.unmask`. Each takes the server's request for that stage and
returns the device's message.

The device checks everything the server sends (SECAGG.md section 3) and raises
:class:`SecAggAbort` on the first failed check, after which it answers nothing more in this round.
Every check of a stage runs before the stage reveals anything, so an abort never releases a share.
The rule that protects the report: for each mask partner the device reveals at most one of its two
secrets' shares, and it answers the unmask stage once.

A repeated, identical request (a transport retry) gets the same answer again; a different request
for a stage already answered aborts.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from typing import cast

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from fedhh.secagg import shamir
from fedhh.secagg.config import (
    MAX_DIMENSION,
    Admission,
    RoundConfig,
    SignedConfig,
    session_id_of,
    verify_admission,
    verify_config,
    verify_members,
)
from fedhh.secagg.errors import AbortReason, SecAggAbort, SecAggConfigError
from fedhh.secagg.graph import ROUNDS_REMEMBERED, neighbours_of, survivors_connected
from fedhh.secagg.merkle import Member
from fedhh.secagg.messages import (
    AdvertiseKeys,
    ConsistencyRequest,
    ConsistencyResponse,
    EncryptedShare,
    MaskedInput,
    MaskedInputRequest,
    RingRun,
    ShareBundle,
    ShareKeysRequest,
    ShareKeysResponse,
    UnmaskRequest,
    UnmaskResponse,
    consistency_transcript,
    survivors_digest,
)
from fedhh.secagg.params import DEVICES_CHECK, Threat, failure_bounds
from fedhh.secagg.prg import MaskGenerator, pair_mask_key, self_mask_key
from fedhh.secagg.primitives import (
    KEY_BYTES,
    LABELS,
    RandomSource,
    aead_decrypt,
    aead_encrypt,
    agree,
    ed25519_public_bytes,
    ed25519_verify,
    hkdf,
    sha256,
    system_random,
    u32,
    x25519_from_seed,
    x25519_public_bytes,
)
from fedhh.secagg.report import check_report

__all__ = [
    "SHARE_CIPHERTEXT_BYTES",
    "DevicePolicy",
    "DeviceState",
    "PublicChecks",
    "SecAggDevice",
]

_PLAINTEXT_BYTES = 8 + 2 * shamir.SHARE_BYTES
SHARE_CIPHERTEXT_BYTES = 12 + _PLAINTEXT_BYTES + 16  # nonce || ciphertext || GCM tag


@dataclass(frozen=True)
class DevicePolicy:
    """Floors a device enforces on any config, whoever signed it.

    With ``max_corrupt_fraction`` set, the device also computes the lying-server failure bound
    of the config's (n, k, t) itself (:func:`fedhh.secagg.failure_bounds` with
    ``Threat.LYING``: privacy n * P[H >= 2t - k] plus disconnection, under its own assumed
    corrupt fraction and dropout rate) and refuses the round unless it is at most
    2^-security_bits. The library's defaults are permissive (tests, simulations); a deployed
    device sets every field (``fedhh_device.secagg_run.Floors``).
    """

    min_threshold: int = 1
    min_n_min: int = 1
    max_dimension: int = MAX_DIMENSION
    require_device_auth: bool = False
    require_consistency_check: bool = False
    max_corrupt_fraction: float | None = None  # None: no failure-bound check
    security_bits: float = 40.0
    # The dropout rate the disconnection bound is computed at. It only enters that bound (the
    # survivors' graph splits when two runs of k/2 ring neighbours all drop or are corrupt), and
    # a higher rate is the more cautious assumption.
    assumed_dropout: float = DEVICES_CHECK.dropout

    def __post_init__(self) -> None:
        if self.max_corrupt_fraction is not None and not 0 <= self.max_corrupt_fraction < 1:
            raise SecAggConfigError(
                f"max_corrupt_fraction must be in [0, 1), got {self.max_corrupt_fraction!r}")
        if not 0 <= self.assumed_dropout < 1:
            raise SecAggConfigError(
                f"assumed_dropout must be in [0, 1), got {self.assumed_dropout!r}")
        if not 0 < self.security_bits <= 256:
            raise SecAggConfigError(
                f"security_bits must be in (0, 256], got {self.security_bits!r}")


@dataclass(frozen=True)
class PublicChecks:
    """What a device computes from public data only: Ed25519 signatures checked (public key,
    signature, message), its roster's keys checked against the signed config (one multiproof,
    :func:`~fedhh.secagg.config.verify_members`), and neighbours' X25519 keys parsed (a
    malformed one raises ValueError). All are pure functions, so a host that simulates many
    devices may pass memoised ones (every device of the host checks the same signatures,
    hashes the same neighbours' leaves and parses the same keys); a real device keeps the
    defaults."""

    signature: Callable[[bytes, bytes, bytes], bool] = ed25519_verify
    members: Callable[[Sequence[tuple[int, Member]], bytes, RoundConfig], bool] = verify_members
    peer_key: Callable[[bytes], X25519PublicKey] = X25519PublicKey.from_public_bytes


class DeviceState(IntEnum):
    NEW = 0
    ADVERTISED = 1
    SHARED = 2
    MASKED = 3
    CHECKED = 4
    DONE = 5
    ABORTED = 6


@dataclass(frozen=True)
class RoundKeys:
    """A device's X25519 key pairs for one round (c: share encryption, s: pairwise masks).

    With device_auth the device generates them before it checks in and presents the public
    halves to the coordinator, which commits to them in the round's identity tree; use a pair
    for one round attempt only."""

    c_key: X25519PrivateKey
    s_key: X25519PrivateKey

    @classmethod
    def generate(cls, rand: RandomSource) -> RoundKeys:
        return cls(x25519_from_seed(rand(KEY_BYTES)), x25519_from_seed(rand(KEY_BYTES)))

    @functools.cached_property
    def public(self) -> tuple[bytes, bytes]:
        """(c_pk, s_pk), raw (derived once: a device presents them at every check-in)."""
        return x25519_public_bytes(self.c_key), x25519_public_bytes(self.s_key)


# What a device keeps of a neighbour from the share-keys stage to the round's end (the key of
# its shares to the neighbour is used in that stage only) is two keys packed in one bytes
# object, in a table of ids to bytes, which the cycle collector does not track. It was an
# object of three fields per neighbour, k per device: in a load test's device process 38% of
# the objects the collector's youngest generation walked (375,000 of 974,000 at 5,000
# devices a process), and ~100 bytes more per neighbour.
_KEY_IN = slice(0, KEY_BYTES)  # AES-256-GCM key for its shares to me
_MASK_KEY = slice(KEY_BYTES, None)  # PRG key of our pairwise mask (the rest)
# The shares a partner sent me are kept so too, as they came once checked (one bytes object
# per partner, where a tuple of two ints was one more object for the collector to walk).
_B_SHARE = slice(0, shamir.SHARE_BYTES)
_S_SHARE = slice(shamir.SHARE_BYTES, None)


class SecAggDevice:
    """One device's side of one round (not thread-safe; one instance per device per round)."""

    def __init__(self, signed_config: SignedConfig, coordinator_public: bytes, device_id: int,
                 *, identity_key: Ed25519PrivateKey | None = None,
                 admission: Admission | None = None, round_keys: RoundKeys | None = None,
                 policy: DevicePolicy | None = None, rand: RandomSource = system_random,
                 masks: MaskGenerator | None = None,
                 checks: PublicChecks | None = None) -> None:
        policy = policy or DevicePolicy()
        try:
            config = verify_config(signed_config, coordinator_public)
        except SecAggConfigError as exc:
            raise SecAggAbort(AbortReason.BAD_CONFIG, str(exc)) from exc
        _check_policy(config, policy)
        if not isinstance(device_id, int) or not 1 <= device_id <= config.num_devices:
            raise SecAggConfigError(f"device_id must be in [1, {config.num_devices}], got "
                                    f"{device_id!r}")
        self.config = config
        self.device_id = device_id
        self.session_id = session_id_of(config)
        self._rand = rand
        if config.device_auth:
            if identity_key is None or admission is None or round_keys is None:
                raise SecAggConfigError("device_auth needs an identity_key, an admission and the "
                                        "round keys presented at check-in")
            if (admission.device_id != device_id
                    or admission.keys != (ed25519_public_bytes(identity_key), *round_keys.public)
                    or not verify_admission(admission, config)):
                raise SecAggConfigError("the admission is not the coordinator's for this device "
                                        "and its keys")
        self._identity_key = identity_key
        self._admission = admission
        self._checks = checks or PublicChecks()
        if masks is not None and (masks.dimension, masks.modulus_bits) != (config.dimension,
                                                                           config.modulus_bits):
            raise SecAggConfigError("the mask generator does not match the round's dimension")
        self._masks = masks
        self.state = DeviceState.NEW
        self._abort: SecAggAbort | None = None
        self._round_keys = round_keys
        self._c_key: X25519PrivateKey | None = None
        self._s_key: X25519PrivateKey | None = None
        self._b: bytes | None = None
        self._advert: AdvertiseKeys | None = None
        self._pair_keys: dict[int, bytes] = {}  # neighbour -> its _KEY_IN, _MASK_KEY
        self._admissions: dict[int, Admission | None] = {}  # neighbour -> its admission
        # partner -> its b-share and s-share to me, checked and encoded (_B_SHARE, _S_SHARE)
        self._received: dict[int, bytes] = {}
        self._survivor_ids = np.zeros(0, np.int64)  # U3, increasing (shared, read-only)
        self._survivors_digest = b""
        self._cache: dict[DeviceState, tuple[object, object]] = {}
        self._report_digest: bytes | None = None

    # -- helpers -------------------------------------------------------------------------------

    def _fail(self, reason: AbortReason, detail: str = "") -> SecAggAbort:
        """Enter the aborted state, forget every secret, and return the error to raise."""
        self._abort = SecAggAbort(reason, detail)
        self.state = DeviceState.ABORTED
        self._forget()
        return self._abort

    def _forget(self) -> None:
        self._round_keys = None
        self._c_key = self._s_key = None
        self._b = None
        self._pair_keys = {}
        self._admissions = {}
        self._received = {}

    def _enter(self, expected: DeviceState, request: object, kind: type) -> object | None:
        """Common entry checks; returns a cached response for an identical retried request."""
        if self._abort is not None:
            raise self._abort
        if not isinstance(request, kind):
            raise self._fail(AbortReason.MALFORMED, f"expected a {kind.__name__}")
        cached = self._cache.get(expected)
        if cached is not None:
            if cached[0] == request:
                return cached[1]
            raise self._fail(AbortReason.REPEATED_REQUEST, f"a second, different {expected.name}"
                             " request")
        if self.state != expected:
            raise self._fail(AbortReason.WRONG_STATE, f"got a request in state {self.state.name}")
        session_id = getattr(request, "session_id", None)
        device_id = getattr(request, "device_id", None)
        if session_id != self.session_id or device_id != self.device_id:
            raise self._fail(AbortReason.WRONG_SESSION, "request for another round or device")
        return None

    # -- stage 0 -------------------------------------------------------------------------------

    def advertise_keys(self) -> AdvertiseKeys:
        """This round's X25519 public keys: the committed ones (device_auth) or fresh ones."""
        if self._abort is not None:
            raise self._abort
        if self._advert is not None:
            return self._advert
        keys = self._round_keys or RoundKeys.generate(self._rand)
        self._round_keys = None
        self._c_key, self._s_key = keys.c_key, keys.s_key
        c_pk, s_pk = keys.public
        self._advert = AdvertiseKeys(self.session_id, self.device_id, c_pk, s_pk,
                                     self._admission)
        self.state = DeviceState.ADVERTISED
        return self._advert

    # -- stage 1 -------------------------------------------------------------------------------

    def share_keys(self, request: ShareKeysRequest) -> ShareKeysResponse:
        """Check the roster, then Shamir-share b_u and s_u^SK among the listed neighbours."""
        cached = self._enter(DeviceState.ADVERTISED, request, ShareKeysRequest)
        if cached is not None:
            return cached  # type: ignore[return-value]
        others = self._check_roster(request)
        pair_keys, keys_out = self._agree_all(others)
        me, sid, t = self.device_id, self.session_id, self.config.t
        if self._s_key is None:
            raise self._fail(AbortReason.WRONG_STATE, "no mask key")
        b = self._rand(KEY_BYTES)
        xs = sorted(pair_keys)
        s_raw = self._s_key.private_bytes_raw()
        # The j-th listed neighbour (ascending ids) holds f(j): small points make the server's
        # reconstruction a binomial sum (shamir.reconstruct) and the sharing cheaper.
        b_ys, s_ys = shamir.share_many([int.from_bytes(b, "big"), int.from_bytes(s_raw, "big")],
                                       t, range(1, len(xs) + 1), self._rand)
        blobs = []
        mine = u32(me)
        for v, b_y, s_y in zip(xs, b_ys, s_ys, strict=True):
            ids = mine + u32(v)
            plaintext = ids + shamir.encode_share(b_y) + shamir.encode_share(s_y)
            blobs.append(aead_encrypt(keys_out[v], plaintext, sid + ids, self._rand))
        # Packed as the session stream carries them (an EncryptedShare per neighbour was made
        # here only to be taken apart again for the wire).
        shares = ShareBundle.sent_by(me, tuple(xs), b"".join(blobs), SHARE_CIPHERTEXT_BYTES)
        commitment = sha256(LABELS["commit"], sid, u32(me), b)
        response = ShareKeysResponse(sid, me, shares, commitment)
        self._b = b
        self._pair_keys = pair_keys
        self._admissions = {e.device_id: e.admission for e in others}
        self.state = DeviceState.SHARED
        self._cache[DeviceState.ADVERTISED] = (request, response)
        return response

    def _check_roster(self, request: ShareKeysRequest) -> list[AdvertiseKeys]:
        roster = request.roster
        if not isinstance(roster, tuple | RingRun) or not all(
                isinstance(e, AdvertiseKeys) for e in roster):
            raise self._fail(AbortReason.MALFORMED, "roster must be a tuple of AdvertiseKeys")
        ids = [e.device_id for e in roster]
        if not all(isinstance(i, int) for i in ids) or len(set(ids)) != len(ids):
            raise self._fail(AbortReason.MALFORMED, "a device appears twice in the roster")
        if any(e.session_id != self.session_id for e in roster):
            raise self._fail(AbortReason.WRONG_SESSION, "roster entry of another round")
        own = [e for e in roster if e.device_id == self.device_id]
        if len(own) != 1 or not _same_keys(own[0], self._advert):
            raise self._fail(AbortReason.KEY_ALTERED, "own keys missing or altered")
        others = [e for e in roster if e.device_id != self.device_id]
        allowed = set(neighbours_of(self.config.graph_seed, self.config.num_devices,
                                    self.config.k, self.device_id))
        strangers = [e.device_id for e in others if e.device_id not in allowed]
        if strangers:
            raise self._fail(AbortReason.UNEXPECTED_NEIGHBOUR,
                             f"ids not in the committed graph: {strangers[:5]}")
        if len(others) < self.config.t:
            raise self._fail(AbortReason.TOO_FEW_NEIGHBOURS,
                             f"{len(others)} neighbours < t={self.config.t}")
        keys: list[bytes] = []
        for e in roster:
            for key in (e.c_pk, e.s_pk):
                if not isinstance(key, bytes) or len(key) != KEY_BYTES:
                    raise self._fail(AbortReason.BAD_KEY, f"malformed key of {e.device_id}")
                keys.append(key)
        if len(set(keys)) != len(keys):
            raise self._fail(AbortReason.DUPLICATE_KEY, "two roster keys are equal")
        if self.config.device_auth:
            members = []
            for e in roster:
                adm = e.admission
                if (adm is None or adm.device_id != e.device_id or adm.c_pk != e.c_pk
                        or adm.s_pk != e.s_pk):
                    raise self._fail(AbortReason.BAD_SIGNATURE, f"entry of {e.device_id}")
                members.append((e.device_id, adm.keys))
            proof = request.range_proof
            if not isinstance(proof, bytes) or not self._checks.members(members, proof,
                                                                        self.config):
                raise self._fail(AbortReason.BAD_SIGNATURE,
                                 "the roster's keys are not the committed ones")
        return others

    def _agree_all(self, others: list[AdvertiseKeys]
                   ) -> tuple[dict[int, bytes], dict[int, bytes]]:
        """Each neighbour's keys (_KEY_IN, _MASK_KEY), and the keys of this device's shares to
        them."""
        if self._c_key is None or self._s_key is None:
            raise self._fail(AbortReason.WRONG_STATE, "keys not generated")
        me, sid, parse = self.device_id, self.session_id, self._checks.peer_key
        result, keys_out = {}, {}
        for e in others:
            v = e.device_id
            try:
                enc_secret = agree(self._c_key, e.c_pk, parse)
                mask_secret = agree(self._s_key, e.s_pk, parse)
            except ValueError as exc:
                raise self._fail(AbortReason.BAD_KEY, f"low-order key of {v}") from exc
            # One HKDF call gives both directions' keys: the first 32 bytes encrypt from the
            # lower id to the higher, the last 32 the other way.
            lo, hi = (me, v) if me < v else (v, me)
            keys = hkdf(enc_secret, salt=sid, info=LABELS["enc"] + u32(lo) + u32(hi),
                        length=2 * KEY_BYTES)
            up, down = keys[:KEY_BYTES], keys[KEY_BYTES:]
            keys_out[v], key_in = (up, down) if me < v else (down, up)
            result[v] = key_in + pair_mask_key(mask_secret, sid, me, v)
        return result, keys_out

    # -- stage 2 -------------------------------------------------------------------------------

    def masked_input(self, request: MaskedInputRequest, ones: np.ndarray) -> MaskedInput:
        """Decrypt the partners' shares, then send y_u = x_u + PRG(b_u) + sum of pair masks.

        ``ones``: the strictly increasing indices of the report's one bits (see
        :func:`indices_from_dense` for a dense 0/1 vector). Raises :class:`InvalidReport` without
        changing state if the report is not a 0/1 vector of the round's dimension.
        """
        idx = check_report(ones, self.config.dimension)
        digest = sha256(idx.astype("<i8").tobytes())
        if self._abort is None and DeviceState.SHARED in self._cache:
            if self._cache[DeviceState.SHARED][0] == request and digest == self._report_digest:
                return self._mask(idx)  # a retry: the same masks give the same vector
            if self._cache[DeviceState.SHARED][0] == request:
                raise self._fail(AbortReason.REPORT_CHANGED,
                                 "a retry with a different report would reveal x - x'")
        self._enter(DeviceState.SHARED, request, MaskedInputRequest)
        me, sid = self.device_id, self.session_id
        mine = u32(me)
        received: dict[int, bytes] = {}
        for src, dst, ciphertext in self._addressed(request.shares):
            if not isinstance(src, int) or dst != me or src not in self._pair_keys:
                raise self._fail(AbortReason.UNEXPECTED_NEIGHBOUR, f"share {src}->{dst}")
            if src in received:
                raise self._fail(AbortReason.MALFORMED, f"two shares from {src}")
            ids = u32(src) + mine
            plain = aead_decrypt(self._pair_keys[src][_KEY_IN], ciphertext, sid + ids)
            if plain is None or len(plain) != _PLAINTEXT_BYTES or plain[:8] != ids:
                raise self._fail(AbortReason.DECRYPTION_FAILED, f"share from {src}")
            shares = plain[8:]
            try:
                shamir.decode_share(shares[_B_SHARE])
                shamir.decode_share(shares[_S_SHARE])
            except shamir.ShareError as exc:
                raise self._fail(AbortReason.CORRUPT_SHARE, f"share from {src}") from exc
            received[src] = shares
        if len(received) < self.config.t:
            raise self._fail(AbortReason.TOO_FEW_NEIGHBOURS,
                             f"{len(received)} mask partners < t={self.config.t}")
        self._received = received
        self._report_digest = digest
        self._cache[DeviceState.SHARED] = (request, None)
        self.state = DeviceState.MASKED
        return self._mask(idx)

    def _addressed(self, shares: object) -> Iterable[tuple[object, object, bytes]]:
        """(src, dst, ciphertext) of each share of a masked-input request; a bundle addressed
        to this device is read as it is packed (an EncryptedShare made per share, twice with
        the type check, was ~1.5% of a load-test device)."""
        if isinstance(shares, ShareBundle) and shares.dst is not None:
            dst = shares.dst
            return ((src, dst, ciphertext) for src, ciphertext in shares.entries())
        if not isinstance(shares, tuple | ShareBundle) or not all(
                isinstance(s, EncryptedShare) for s in shares):
            raise self._fail(AbortReason.MALFORMED, "shares must be a tuple of EncryptedShare")
        return ((s.src, s.dst, s.ciphertext) for s in shares)

    def _mask(self, idx: np.ndarray) -> MaskedInput:
        if self._b is None:
            raise self._fail(AbortReason.WRONG_STATE, "no self-mask seed")
        # (without a generator of the caller's, one for this vector only: its two buffers of a
        # chunk each, held for the whole session, were 16 KiB per device at D = 4096 with
        # 16-bit masks in a load test's fleet)
        masks = self._masks if self._masks is not None else MaskGenerator(
            self.config.dimension, self.config.modulus_bits)
        me = self.device_id
        partners = sorted(self._received)
        y = masks.zeros()
        masks.add_many(y, [self_mask_key(self._b, self.session_id, me),
                           *(self._pair_keys[v][_MASK_KEY] for v in partners)],
                       [1, *(1 if me > v else -1 for v in partners)])
        y[idx] += 1  # indices are distinct, so this adds exactly x_u
        return MaskedInput(self.session_id, me, y)

    # -- stage 3 (optional) --------------------------------------------------------------------

    def consistency_check(self, request: ConsistencyRequest) -> ConsistencyResponse:
        """Sign the survivor set U3 with the identity key, after checking it."""
        if not self.config.consistency_check:
            if self._abort is not None:
                raise self._abort
            raise self._fail(AbortReason.WRONG_STATE, "this round has no consistency check")
        cached = self._enter(DeviceState.MASKED, request, ConsistencyRequest)
        if cached is not None:
            return cached  # type: ignore[return-value]
        survivors = request.survivors
        cfg = self.config
        u3 = _survivor_facts(survivors, cfg.num_devices, cfg.k, cfg.graph_seed) \
            if isinstance(survivors, tuple) else None
        if u3 is None:
            raise self._fail(AbortReason.MALFORMED, "survivors must be increasing ids")
        ids = u3.ids
        if not _contains(ids, [self.device_id]):
            raise self._fail(AbortReason.LISTED_AS_DROPPED, "own id not in the survivor set")
        if ids.size < cfg.n_min:
            raise self._fail(AbortReason.TOO_FEW_NEIGHBOURS,
                             f"{ids.size} survivors < n_min={cfg.n_min}")
        if np.count_nonzero(_contains(ids, list(self._received))) < cfg.t:
            raise self._fail(AbortReason.TOO_FEW_NEIGHBOURS, "fewer than t surviving partners")
        if not u3.connected:
            # Unmasking would give the server the sum of each part (graph.py).
            raise self._fail(AbortReason.SURVIVORS_DISCONNECTED, "U3 splits the neighbour graph")
        if self._identity_key is None:
            raise self._fail(AbortReason.WRONG_STATE, "no identity key")
        digest = u3.digest
        signature = self._identity_key.sign(
            consistency_transcript(self.session_id, self.device_id, digest))
        response = ConsistencyResponse(self.session_id, self.device_id, signature)
        self._survivor_ids = ids
        self._survivors_digest = digest
        self._cache[DeviceState.MASKED] = (request, response)
        self.state = DeviceState.CHECKED
        return response

    # -- stage 4 -------------------------------------------------------------------------------

    def unmask(self, request: UnmaskRequest) -> UnmaskResponse:
        """Reveal b-shares of alive partners and s-shares of dropped ones, once."""
        expected = DeviceState.CHECKED if self.config.consistency_check else DeviceState.MASKED
        cached = self._enter(expected, request, UnmaskRequest)
        if cached is not None:
            return cached  # type: ignore[return-value]
        alive, dropped = self._check_lists(request)
        if self.config.consistency_check:
            self._check_consistency(request, alive, dropped)
        # (kept as they came, checked: encode_share(decode_share(x)) is x)
        b_shares = tuple((v, self._received[v][_B_SHARE]) for v in alive)
        s_shares = tuple((v, self._received[v][_S_SHARE]) for v in dropped)
        response = UnmaskResponse(self.session_id, self.device_id, b_shares, s_shares)
        self._cache[expected] = (request, response)
        self.state = DeviceState.DONE
        self._forget()
        return response

    def _check_lists(self, request: UnmaskRequest) -> tuple[tuple[int, ...], tuple[int, ...]]:
        alive, dropped = request.alive, request.dropped
        for name, ids in (("alive", alive), ("dropped", dropped)):
            if not isinstance(ids, tuple) or not all(isinstance(i, int) for i in ids):
                raise self._fail(AbortReason.MALFORMED, f"{name} must be a tuple of ids")
            if len(set(ids)) != len(ids):
                raise self._fail(AbortReason.MALFORMED, f"an id repeats in {name}")
        if self.device_id in dropped:
            raise self._fail(AbortReason.LISTED_AS_DROPPED, "own id in the dropped list")
        if self.device_id in alive:
            raise self._fail(AbortReason.INCONSISTENT_LISTS, "own id in the alive list")
        if set(alive) & set(dropped):
            raise self._fail(AbortReason.INCONSISTENT_LISTS, "a partner is both alive and dropped")
        foreign = [i for i in alive + dropped if i not in self._received]
        if foreign:
            raise self._fail(AbortReason.FOREIGN_ID, f"not mask partners: {foreign[:5]}")
        if len(alive) < self.config.t:
            raise self._fail(AbortReason.TOO_FEW_NEIGHBOURS,
                             f"{len(alive)} alive partners < t={self.config.t}")
        return alive, dropped

    def _check_consistency(self, request: UnmaskRequest, alive: tuple[int, ...],
                           dropped: tuple[int, ...]) -> None:
        partners = np.array(sorted(self._received), dtype=np.int64)
        survived = _contains(self._survivor_ids, partners)
        if (sorted(alive) != partners[survived].tolist()
                or sorted(dropped) != partners[~survived].tolist()):
            raise self._fail(AbortReason.INCONSISTENT_LISTS, "lists disagree with the signed U3")
        signatures = request.signatures
        if not isinstance(signatures, tuple | RingRun):
            raise self._fail(AbortReason.MALFORMED, "signatures must be a tuple")
        signers: set[int] = set()
        alive_set = set(alive)
        for item in signatures:
            if len(signers) >= self.config.t:
                break  # t valid signatures suffice; the rest need not be checked
            if not isinstance(item, tuple) or len(item) != 2:
                raise self._fail(AbortReason.MALFORMED, "signature entries are (id, bytes)")
            w, sig = item
            if not isinstance(w, int) or not isinstance(sig, bytes):
                raise self._fail(AbortReason.MALFORMED, "signature entries are (id, bytes)")
            if w not in alive_set or w in signers:
                raise self._fail(AbortReason.FOREIGN_ID, f"signature from {w}")
            adm = self._admissions[w]
            if adm is None or not self._checks.signature(
                    adm.identity_key, sig,
                    consistency_transcript(self.session_id, w, self._survivors_digest)):
                raise self._fail(AbortReason.BAD_SIGNATURE, f"consistency signature of {w}")
            signers.add(w)
        if len(signers) < self.config.t:
            raise self._fail(AbortReason.TOO_FEW_NEIGHBOURS,
                             f"{len(signers)} consistency signatures < t={self.config.t}")


def _same_keys(entry: AdvertiseKeys, advert: AdvertiseKeys | None) -> bool:
    """True iff a roster entry holds ``advert``'s id and keys (its admission's proof aside: a
    roster's entries carry none, the roster's one proof covers them)."""
    if advert is None or (entry.session_id, entry.device_id, entry.c_pk, entry.s_pk) != (
            advert.session_id, advert.device_id, advert.c_pk, advert.s_pk):
        return False
    if advert.admission is None:
        return entry.admission is None
    return (entry.admission is not None and entry.admission.device_id == advert.device_id
            and entry.admission.keys == advert.admission.keys)


@dataclass(frozen=True)
class _SurvivorSet:
    """What a device checks of a survivor set U3 that depends only on U3 and the round."""

    ids: np.ndarray  # int64, strictly increasing, read-only
    connected: bool  # U3 induces a connected subgraph of the neighbour graph (graph.py)
    digest: bytes  # survivors_digest(U3), what the device signs


def _survivor_set(survivors: tuple[int, ...], n: int, k: int, graph_seed: bytes
                  ) -> _SurvivorSet | None:
    """U3's round-wide facts, or None unless its ints (the caller checks they are ints) are
    strictly increasing in [1, n]. Each device still makes its own checks against these facts
    (its id, n_min, its partners, connectivity)."""
    try:
        ids = np.array(survivors, dtype=np.int64) if survivors else np.zeros(0, np.int64)
    except OverflowError:
        return None
    # Strictly increasing from >= 1 up to <= n: so every id is in [1, n].
    if ids.size and (ids[0] < 1 or ids[-1] > n or np.any(ids[1:] <= ids[:-1])):
        return None
    ids.flags.writeable = False
    return _SurvivorSet(ids, survivors_connected(graph_seed, n, k, survivors),
                        survivors_digest(survivors))


def _survivor_facts(survivors: tuple[object, ...], n: int, k: int, graph_seed: bytes
                    ) -> _SurvivorSet | None:
    """:func:`_survivor_set` of ``survivors`` if they are all ints (bool excluded), else None;
    remembered for the last ``ROUNDS_REMEMBERED`` tuples by identity. Every device of a
    process gets the same tuple object (the server's requests share one, and
    ``aggregator_wire`` one per encoded list), and U3 holds thousands of ids: checking their
    types and hashing them for a cache keyed by value walked U3 once per device (~0.4 ms at a
    shard of 5,000 on a 2.1 GHz core), and its connectivity more than the device's signature
    over it."""
    known = _FACTS.get(id(survivors))
    if known is not None and known[0] is survivors and known[1] == (n, k, graph_seed):
        return known[2]
    # (Keyed by identity, not value: 1.0 and True equal 1 as keys, and are refused here.)
    facts = _survivor_set(cast("tuple[int, ...]", survivors), n, k, graph_seed) \
        if set(map(type, survivors)) <= {int} else None
    if len(_FACTS) >= ROUNDS_REMEMBERED:
        _FACTS.pop(next(iter(_FACTS)))
    _FACTS[id(survivors)] = (survivors, (n, k, graph_seed), facts)
    return facts


# id -> (the tuple, kept so that its id is not reused while remembered; the round's n, k and
# graph seed; its facts), one per round open at once
_FACTS: dict[int, tuple[tuple[object, ...], tuple[int, int, bytes], _SurvivorSet | None]] = {}


def _contains(sorted_ids: np.ndarray, values: list[int] | np.ndarray) -> np.ndarray:
    """bool per value: is it in ``sorted_ids`` (increasing)?"""
    if not sorted_ids.size:
        return np.zeros(len(values), dtype=bool)
    wanted = np.asarray(values, dtype=np.int64)
    at = np.minimum(np.searchsorted(sorted_ids, wanted), sorted_ids.size - 1)
    return sorted_ids[at] == wanted


@functools.lru_cache(maxsize=64)
def _lying_server_bound(n: int, k: int, t: int, dropout: float, corrupt: float) -> float:
    """Privacy plus disconnection bound of (n, k, t) against a lying server (params.py;
    cached: every simulated device of a process checks the same config)."""
    bounds = failure_bounds(n, k, t, dropout, corrupt, Threat.LYING)
    return bounds.privacy + bounds.disconnection


def _check_policy(config: RoundConfig, policy: DevicePolicy) -> None:
    problems = []
    if config.t < policy.min_threshold:
        problems.append(f"t={config.t} < floor {policy.min_threshold}")
    if config.n_min < policy.min_n_min:
        problems.append(f"n_min={config.n_min} < floor {policy.min_n_min}")
    if config.dimension > policy.max_dimension:
        problems.append(f"dimension={config.dimension} > cap {policy.max_dimension}")
    if policy.require_device_auth and not config.device_auth:
        problems.append("device_auth off")
    if policy.require_consistency_check and not config.consistency_check:
        problems.append("consistency_check off")
    if policy.max_corrupt_fraction is not None:
        bound = _lying_server_bound(config.num_devices, config.k, config.t,
                                    policy.assumed_dropout, policy.max_corrupt_fraction)
        # The same target as choose_parameters, so the coordinator's choice passes exactly.
        if bound > 2.0 ** -policy.security_bits:
            problems.append(
                f"(n, k, t) = ({config.num_devices}, {config.k}, {config.t}) fails the "
                f"lying-server bound: {bound:.2g} > 2^-{policy.security_bits:g} with "
                f"{policy.max_corrupt_fraction:g} corrupt and {policy.assumed_dropout:g} dropout")
    if problems:
        raise SecAggAbort(AbortReason.BAD_CONFIG, "; ".join(problems))
