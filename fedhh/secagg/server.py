"""The server-side state machine of one round (the aggregator's logic, with no transport).

Use: construct with the coordinator-signed config; feed each device message to the matching
``handle_*`` method while its stage is open; call :meth:`SecAggServer.close_stage` at the
stage's deadline (or earlier, when :meth:`SecAggServer.can_close_early`); it returns the
requests to deliver for the next stage, keyed by device id. Closing the unmask stage computes
the result, available as :attr:`SecAggServer.result`.

Each ``handle_*`` either accepts the message (returns True), ignores an identical duplicate
(returns False), or raises :class:`ProtocolViolation` and changes nothing. A masked vector is
length-checked, added to the running sum on arrival and dropped. The server releases only the
sum, the number of contributors and their evidence (U3 and, with the consistency check, each
survivor's signature over it), and only if at least n_min devices survived; otherwise
:meth:`close_stage` raises :class:`SecAggAbort` and every later call raises it again.
Not thread-safe: the transport serialises calls (one asyncio loop does).
"""

from __future__ import annotations

import bisect
import collections
import itertools
import logging
from array import array
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from fedhh.secagg import shamir
from fedhh.secagg.config import (
    Admission,
    SignedConfig,
    session_id_of,
    verify_admission,
    verify_config,
)
from fedhh.secagg.device import SHARE_CIPHERTEXT_BYTES
from fedhh.secagg.errors import AbortReason, ProtocolViolation, SecAggAbort, Violation
from fedhh.secagg.graph import NeighbourGraph, ring_positions
from fedhh.secagg.merkle import ProofNodes
from fedhh.secagg.messages import (
    AdvertiseKeys,
    AggregateResult,
    ConsistencyRequest,
    ConsistencyResponse,
    Decline,
    DeviceMessage,
    EncryptedShare,
    MaskedInput,
    MaskedInputRequest,
    OwnerShares,
    RingRun,
    ServerMessage,
    ShareBundle,
    ShareKeysRequest,
    ShareKeysResponse,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
    consistency_transcript,
    survivors_digest,
)
from fedhh.secagg.prg import MaskGenerator
from fedhh.secagg.primitives import KEY_BYTES, ed25519_verify, is_valid_x25519_public, sha256
from fedhh.secagg.recovery import rebuild_mask_key, rebuild_self_mask, remove_masks

__all__ = ["SecAggServer"]

log = logging.getLogger(__name__)

_FINGERPRINT_BYTES = 4096
REBUILD_BATCH = 512  # secrets rebuilt together at the close (bounds its temporary arrays)
GATHER_BATCH = 64  # recipients whose shares are gathered together at the key sharing's close
# One list of an unmask response: its owners and their SHARE_BYTES values in that order.
_OwnerValues = tuple[tuple[int, ...], bytes]


def _fingerprint(vector: np.ndarray) -> bytes:
    """Identifies an honest retry of a masked input cheaply (length and both ends of the vector).

    A different vector with the same fingerprint is only ignored instead of rejected: a second
    masked input is never added either way, so the fingerprint needs no collision resistance.
    """
    raw = vector.view(np.uint8)
    return sha256(len(raw).to_bytes(8, "big"), raw[:_FINGERPRINT_BYTES].tobytes(),
                  raw[-_FINGERPRINT_BYTES:].tobytes())


def _shares_digest(parts: Sequence[_OwnerValues]) -> bytes:
    """Identifies an unmask response's shares (each list's owners in their order, then their
    values), packed or not: a resend matches it, other shares do not (SHA-256; a tuple's repr
    ends at its only ")" and its values' length follows from it, so the fields do not run
    into each other)."""
    return sha256(*(field for listed, values in parts
                    for field in (repr(listed).encode(), values)))


class SecAggServer:
    """One round of secure aggregation, server side."""

    def __init__(self, signed_config: SignedConfig, coordinator_public: bytes, *,
                 masks: MaskGenerator | None = None) -> None:
        self.config = verify_config(signed_config, coordinator_public)
        self.session_id = session_id_of(self.config)
        self.graph = NeighbourGraph(self.config.graph_seed, self.config.num_devices,
                                    self.config.k)
        cfg = self.config
        self._masks = masks or MaskGenerator(cfg.dimension, cfg.modulus_bits)
        if (self._masks.dimension, self._masks.modulus_bits) != (cfg.dimension, cfg.modulus_bits):
            raise ValueError("the mask generator does not match the round's dimension")
        self.stage = Stage.ADVERTISE_KEYS
        self._abort: SecAggAbort | None = None
        self.result: AggregateResult | None = None
        # Stage 0
        self._admitted: dict[int, Admission] = {}  # admissions whose proof was checked
        self._adverts: dict[int, AdvertiseKeys] = {}
        self._declined: set[int] = set()  # gave up their seats (handle_decline)
        self._keys_seen: set[bytes] = set()
        # Stage 1
        self._share_requests: dict[int, ShareKeysRequest] = {}
        # each one's neighbours in its roster, increasing, as uint32: what its shares must go to
        self._share_recipients: dict[int, array[int]] = {}
        self._share_responses: dict[int, _SharesOf] = {}
        # Stage 2
        self._masked_requests: dict[int, MaskedInputRequest] = {}
        # P_v = N(v) ∩ U2 for v in U2 (ascending), each increasing: runs of one array. The
        # requests' id tuples hold the ids' objects from _id_objects (k ints a device in each
        # request, made at one close and read at the next, were half the objects a worker
        # held a device from the key sharing's close on).
        self._partner_ids = np.zeros(0, dtype=np.int64)
        self._partners: dict[int, np.ndarray] = {}  # views of _partner_ids
        # U2 ascending, and where each one's run starts and ends in _partner_ids
        self._partner_runs: tuple[np.ndarray, np.ndarray, np.ndarray] = (
            np.zeros(0, dtype=np.int64),) * 3
        self._id_objects = np.zeros(0, dtype=object)
        self._holders = _ShareHolders({}, {}, self.config.num_devices)  # the same, as a table
        self._commitments: dict[int, bytes] = {}
        self._acc: np.ndarray | None = None
        self._fingerprints: dict[int, bytes] = {}  # U3, in arrival order
        # Stage 3
        self._consistency_requests: dict[int, ConsistencyRequest] = {}
        self._consistency: dict[int, bytes] = {}
        self._survivors_digest = b""
        # Stage 4
        self._unmask_requests: dict[int, UnmaskRequest] = {}
        # each answer's digest (``_shares_digest``), to tell a resend from different shares;
        # before, the whole response was kept to the round's end, its owners' ids and values
        # (which ``_unmask_shares`` holds) with it
        self._unmask_digests: dict[int, bytes] = {}
        self._unmask_shares: _UnmaskShares | None = None
        self._missing_secrets = 0  # secrets that still have fewer than t shares
        # holders whose unmask shares were found wrong (each secret still rebuilt from others')
        self.corrupt_holders: set[int] = set()
        self.counts: dict[Stage, int] = {}  # devices accepted per closed stage (for metrics)

    # -- common --------------------------------------------------------------------------------

    @property
    def aborted(self) -> SecAggAbort | None:
        """The abort, if the round was aborted."""
        return self._abort

    def abort(self, reason: AbortReason = AbortReason.CANCELLED, detail: str = "") -> None:
        """Abort the round from outside (e.g. the coordinator cancelled it); releases nothing."""
        if self._abort is None and self.stage != Stage.DONE:
            self._set_abort(reason, detail)

    def _set_abort(self, reason: AbortReason, detail: str) -> SecAggAbort:
        self._abort = SecAggAbort(reason, detail)
        log.warning("secagg round %s aborted at %s: %s %s", self.config.round_id.hex(),
                    self.stage.name, reason.value, detail)
        if self._acc is not None:
            self._acc.fill(0)
        self._acc = None
        self._unmask_shares, self._unmask_digests = None, {}
        return self._abort

    def _check(self, message: object, kind: type, stage: Stage) -> int:
        """Checks shared by every handler; returns the sender's id."""
        if self._abort is not None:
            raise self._abort
        if not isinstance(message, kind):
            raise ProtocolViolation(Violation.MALFORMED, f"expected {kind.__name__}")
        # (every message kind has both fields; an int id is checked without a call, a
        # worker's every device message passing here)
        if message.session_id != self.session_id:  # type: ignore[attr-defined]
            raise ProtocolViolation(Violation.WRONG_SESSION, "session_id of another round")
        device_id = message.device_id  # type: ignore[attr-defined]
        if ((type(device_id) is not int and (not isinstance(device_id, int)
                                             or isinstance(device_id, bool)))
                or not 1 <= device_id <= self.config.num_devices):
            raise ProtocolViolation(Violation.UNKNOWN_DEVICE, f"device_id {device_id!r}")
        if self.stage < stage:
            raise ProtocolViolation(Violation.EARLY, f"{stage.name} has not started")
        if self.stage > stage:
            raise ProtocolViolation(Violation.LATE, f"{stage.name} has closed")
        return device_id

    def _requests(self) -> Mapping[int, object] | None:
        """The open stage's outstanding requests (None while keys are advertised: all of 1..n)."""
        stage = self.stage
        if stage == Stage.ADVERTISE_KEYS:
            return None
        if stage == Stage.SHARE_KEYS:
            return self._share_requests
        if stage == Stage.MASKED_INPUT:
            return self._masked_requests
        if stage == Stage.CONSISTENCY_CHECK:
            return self._consistency_requests
        if stage == Stage.UNMASK:
            return self._unmask_requests
        return {}

    def expected(self) -> frozenset[int]:
        """The devices the open stage waits for (for progress metrics): while keys are
        advertised, every member but those that declined."""
        if self.stage == Stage.ADVERTISE_KEYS:
            return frozenset(range(1, self.config.num_devices + 1)) - self._declined
        return frozenset(self._requests() or ())

    def expected_count(self) -> int:
        """How many devices the open stage waits for: ``len(expected())`` without building the
        set (asked on each quiet-close check)."""
        requests = self._requests()
        if requests is None:
            return self.config.num_devices - len(self._declined)
        return len(requests)

    def received(self) -> int:
        """How many devices the open stage has accepted a message from (asked after every
        accepted message: one ``len``, not one per stage)."""
        stage = self.stage
        if stage == Stage.ADVERTISE_KEYS:
            return len(self._adverts)
        if stage == Stage.SHARE_KEYS:
            return len(self._share_responses)
        if stage == Stage.MASKED_INPUT:
            return len(self._fingerprints)
        if stage == Stage.CONSISTENCY_CHECK:
            return len(self._consistency)
        if stage == Stage.UNMASK:
            return len(self._unmask_digests)
        return 0

    def can_close_early(self) -> bool:
        """True when waiting for the deadline cannot change the outcome of the open stage."""
        if self._abort is not None or self.stage == Stage.DONE:
            return False
        if self.stage == Stage.UNMASK and self._missing_secrets == 0:
            return True
        return self.received() == self.expected_count()

    def closing_keeps_round(self) -> bool:
        """Whether closing the open stage now would keep the round alive: at least n_min
        devices left after the stage's own pruning, and none of its abort conditions met. A
        close before the deadline (a quiet spell) must not cut a round that waiting could still
        save: with lying-server (k, t), pruning the devices short of t share holders cascades
        from a few missing to nothing left."""
        if self._abort is not None or self.stage == Stage.DONE:
            return False
        n_min = self.config.n_min
        if self.stage == Stage.ADVERTISE_KEYS:
            return len(self._sharers(set(self._adverts))) >= n_min
        if self.stage == Stage.SHARE_KEYS:
            return len(self._sharers(set(self._share_responses))) >= n_min
        if self.stage == Stage.MASKED_INPUT:
            return self._masked_input_problem(set(self._fingerprints)) is None
        if self.stage == Stage.CONSISTENCY_CHECK:
            u3 = set(self._fingerprints)
            return (len(self._consistency) >= n_min and self._short_secret(
                self._unmask_holders(u3, self._consistency)) is None)
        return True

    def handle(self, stage: Stage, message: DeviceMessage) -> bool:
        """Hand one device message, sent for ``stage``, to that stage's handler: True if
        accepted, False for an identical duplicate; raises ProtocolViolation (the message is
        rejected, nothing changes) or SecAggAbort (the round is aborted). (A chain of tests,
        not a table of bound methods made per call: a worker hands every device message
        here.)"""
        if stage == Stage.ADVERTISE_KEYS:
            return self.handle_advertise_keys(message)  # type: ignore[arg-type]
        if stage == Stage.SHARE_KEYS:
            return self.handle_share_keys(message)  # type: ignore[arg-type]
        if stage == Stage.MASKED_INPUT:
            return self.handle_masked_input(message)  # type: ignore[arg-type]
        if stage == Stage.CONSISTENCY_CHECK:
            return self.handle_consistency_check(message)  # type: ignore[arg-type]
        if stage == Stage.UNMASK:
            return self.handle_unmask(message)  # type: ignore[arg-type]
        raise ProtocolViolation(Violation.MALFORMED, f"no device message belongs to {stage!r}")

    # -- stage 0: advertise keys ---------------------------------------------------------------

    def handle_advertise_keys(self, message: AdvertiseKeys) -> bool:
        u = self._check(message, AdvertiseKeys, Stage.ADVERTISE_KEYS)
        if u in self._declined:
            raise ProtocolViolation(Violation.NOT_IN_ROUND, f"{u} declined its seat")
        if u in self._adverts:
            if self._adverts[u] == message:
                return False
            raise ProtocolViolation(Violation.DUPLICATE, f"second, different keys from {u}")
        for key in (message.c_pk, message.s_pk):
            if not isinstance(key, bytes) or len(key) != KEY_BYTES:
                raise ProtocolViolation(Violation.WRONG_LENGTH, f"public keys are {KEY_BYTES} B")
        if message.c_pk == message.s_pk:
            raise ProtocolViolation(Violation.BAD_KEY, "c_pk equals s_pk")
        if message.c_pk in self._keys_seen or message.s_pk in self._keys_seen:
            raise ProtocolViolation(Violation.DUPLICATE_KEY, "key advertised by another device")
        if not (is_valid_x25519_public(message.c_pk) and is_valid_x25519_public(message.s_pk)):
            raise ProtocolViolation(Violation.BAD_KEY, "low-order public key")
        if self.config.device_auth:
            admission = message.admission
            if (admission is None or admission.device_id != u or admission.c_pk != message.c_pk
                    or admission.s_pk != message.s_pk or not self.admitted(admission)):
                raise ProtocolViolation(Violation.BAD_SIGNATURE, f"keys of {u} not committed")
        elif message.admission is not None:
            raise ProtocolViolation(Violation.MALFORMED, "an admission without device_auth")
        self._adverts[u] = message
        self._keys_seen.update((message.c_pk, message.s_pk))
        return True

    def handle_decline(self, message: Decline) -> bool:
        """Device ``message.device_id`` gives up its seat (:class:`Decline`): True the first
        time, False for a repeat (a replay changes nothing). Only before it has advertised its
        keys: from then on its neighbours count on it, and it leaves as any dropout does
        (NOT_IN_ROUND). The caller authenticates the device (the aggregator: its admission and
        its identity key's signature over the call). A declined device contributes nothing,
        so nothing about it reaches the sum, the release evidence or any count of
        contributors."""
        u = self._check(message, Decline, Stage.ADVERTISE_KEYS)
        if u in self._declined:
            return False
        if u in self._adverts:
            raise ProtocolViolation(Violation.NOT_IN_ROUND,
                                    f"{u} has advertised its keys; it can no longer decline")
        self._declined.add(u)
        return True

    def admitted(self, admission: Admission) -> bool:
        """True iff ``admission`` proves its keys are the cohort member's under the signed
        config's identity root (a Merkle proof: a few hashes). An admission equal to one
        already proven is not proven again: a device shows the same one when it opens its
        session and in its stage 0 message (each proof was checked on both, 3% of a
        worker)."""
        if self._admitted.get(admission.device_id) == admission:
            return True
        if not verify_admission(admission, self.config):
            return False
        self._admitted[admission.device_id] = admission
        return True

    def _close_advertise_keys(self) -> dict[int, ServerMessage]:
        u1 = self._adverts
        self._require(len(u1) >= self.config.n_min, AbortReason.TOO_FEW_DEVICES,
                      f"|U1|={len(u1)} < n_min={self.config.n_min}")
        requests: dict[int, ServerMessage] = {}
        # Each roster is the device's run of the advertised entries in ring order: its own
        # and its live neighbours' (NeighbourGraph.ring_runs), a view of one shared tuple;
        # the shares it must send go to the rest of the same run.
        order, starts, stops = self.graph.ring_runs(u1)
        ring, ids = tuple(map(u1.__getitem__, order)), order + order
        runs = {u: (start, stop) for u, start, stop in zip(order, starts.tolist(),
                                                            stops.tolist(), strict=True)}
        prove = self._roster_prover(u1, order)
        for u in sorted(runs):
            start, stop = runs[u]
            if stop - start - 1 < self.config.t:  # it would abort; it counts as dropped
                continue
            live = sorted(ids[start:stop])
            live.remove(u)
            req = ShareKeysRequest(self.session_id, u, RingRun(ring, start, stop),
                                   prove(start, stop))
            self._share_requests[u] = req
            self._share_recipients[u] = array("I", live)
            requests[u] = req
        self._keys_seen = set()
        return requests

    def _roster_prover(self, adverts: dict[int, AdvertiseKeys], ring: Sequence[int]
                       ) -> Callable[[int, int], bytes]:
        """The multiproof of a roster, the run [start, stop) of ``ring`` (the advertised ids
        in ring order, laid twice end to end); without device_auth, none (b""). Built from
        the advertised devices' admissions, each already verified (:class:`ProofNodes`): a
        roster's proof needs only siblings on its own entries' paths. The leaves are in ring
        order, so a roster's positions are a few runs of consecutive ones, broken where a
        device did not advertise: found by bisection, not by a pass over its k entries."""
        if not self.config.device_auth:
            return lambda start, stop: b""
        n = self.config.num_devices
        positions = ring_positions(self.config.graph_seed, n)[1].tolist()
        nodes = ProofNodes(n)
        for u, advert in adverts.items():
            if advert.admission is not None:  # (always, with device_auth: stage 0 checks it)
                nodes.add(positions[u], advert.admission.proof)
        # increasing (sorted: the complete graph's ring is in id order)
        at = sorted(positions[u] for u in ring)
        m = len(at)
        breaks = [j for j in range(m - 1) if at[j + 1] != at[j] + 1]  # a run ends at j

        def runs_of(a: int, b: int) -> list[list[int]]:  # [a, b) within one lap
            out, first = [], a
            for j in breaks[bisect.bisect_left(breaks, a):bisect.bisect_left(breaks, b - 1)]:
                out.append([at[first], at[j]])
                first = j + 1
            out.append([at[first], at[b - 1]])
            return out

        def prove(start: int, stop: int) -> bytes:
            if stop <= m:
                runs = runs_of(start, stop)
            else:  # across the seam: the lap's head holds the lower positions
                runs = runs_of(0, stop - m)
                tail = runs_of(start, m)
                if runs[-1][1] + 1 == tail[0][0]:
                    runs[-1][1] = tail.pop(0)[1]
                runs += tail
            return nodes.prove_runs(runs)

        return prove

    # -- stage 1: share keys -------------------------------------------------------------------

    def handle_share_keys(self, message: ShareKeysResponse) -> bool:
        u = self._check(message, ShareKeysResponse, Stage.SHARE_KEYS)
        expected = self._share_recipients.get(u)
        if expected is None:
            raise ProtocolViolation(Violation.NOT_IN_ROUND, f"{u} got no ShareKeysRequest")
        if u in self._share_responses:
            if self._share_responses[u].holds(message):
                return False
            raise ProtocolViolation(Violation.DUPLICATE, f"second, different shares from {u}")
        commitment, shares = message.b_commitment, message.shares
        if not isinstance(commitment, bytes) or len(commitment) != 32:
            raise ProtocolViolation(Violation.WRONG_LENGTH, "b_commitment is 32 bytes")
        if isinstance(shares, ShareBundle):  # (sent packed: no object per share to check)
            senders_fit, dsts = shares.src == u, shares.recipients
            ciphertexts_fit = shares.width == SHARE_CIPHERTEXT_BYTES
        elif isinstance(shares, tuple) and all(isinstance(s, EncryptedShare) for s in shares):
            senders_fit = all(s.src == u for s in shares)
            dsts = tuple(s.dst for s in shares)
            ciphertexts_fit = all(isinstance(s.ciphertext, bytes)
                                  and len(s.ciphertext) == SHARE_CIPHERTEXT_BYTES for s in shares)
        else:
            raise ProtocolViolation(Violation.MALFORMED, "shares must be EncryptedShare")
        if not {*map(type, dsts)} <= {int}:  # (a C loop: a generator cost ~k calls)
            raise ProtocolViolation(Violation.MALFORMED, "share recipients are device ids")
        if not senders_fit or not _same_ids(sorted(dsts), expected):
            raise ProtocolViolation(Violation.MALFORMED, "need one share per roster neighbour")
        if not ciphertexts_fit:
            raise ProtocolViolation(Violation.WRONG_LENGTH,
                                    f"share ciphertexts are {SHARE_CIPHERTEXT_BYTES} bytes")
        self._share_responses[u] = _SharesOf.packed(message)
        return True

    def _close_share_keys(self) -> dict[int, ServerMessage]:
        u2 = self._sharers(set(self._share_responses))
        self._require(len(u2) >= self.config.n_min, AbortReason.TOO_FEW_DEVICES,
                      f"|U2|={len(u2)} < n_min={self.config.n_min}")
        senders = sorted(u2)
        dsts = [self._share_responses[u].dsts for u in senders]
        commitments = [self._share_responses[u].commitment for u in senders]
        # Every share of U2 to U2 at once, ordered by recipient, then sender.
        src = np.repeat(np.asarray(senders, dtype=np.int64), [len(d) for d in dsts])
        dst = np.concatenate(dsts) if dsts else src
        joined = b"".join(self._share_responses[u].blob for u in senders)
        # (a closed stage's requests and messages are not kept: each request's roster is
        # ~k references, a round's whole memory at a worker holding 50,000 devices; the
        # uploads' ciphertexts, joined above, go before the requests' copies are made)
        self._share_requests, self._share_responses, self._share_recipients = {}, {}, {}
        member = np.zeros(self.config.num_devices + 1, dtype=bool)
        member[senders] = True
        kept = np.flatnonzero(member[dst])
        # (src is ascending, so a stable sort by recipient leaves each recipient's shares in
        # sender order; lexsort compared both keys: 6.2 and 10.1 us a device at shards of 2,500
        # and 25,000, against 0.6 and 1.5 by radix, docs/benchmarks.md)
        kept = kept[_stable_id_order(dst[kept], self.config.num_devices)]
        src, dst = src[kept], dst[kept]
        starts = np.searchsorted(dst, senders, side="left").tolist()
        ends = np.searchsorted(dst, senders, side="right").tolist()
        routed = _gathered(joined, kept, starts, ends)
        del joined  # (the generator holds the last reference: freed once it is done)
        requests: dict[int, ServerMessage] = {}
        points: dict[int, np.ndarray] = {}
        self._partner_ids, self._id_objects = src, _id_objects(self.config.num_devices)
        self._partner_runs = (np.asarray(senders, dtype=np.int64),
                              np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64))
        shared = self._id_objects[src].tolist()
        for v, start, end, ciphertexts, sent_to, commitment in zip(
                senders, starts, ends, routed, dsts, commitments, strict=True):
            partners = self._partners[v] = src[start:end]
            points[v] = _share_points(sent_to, partners)
            self._commitments[v] = commitment
            req = MaskedInputRequest(self.session_id, v, ShareBundle(
                v, tuple(shared[start:end]), ciphertexts, SHARE_CIPHERTEXT_BYTES))
            self._masked_requests[v] = req
            requests[v] = req
        del routed
        self._holders = _ShareHolders(self._partners, points, self.config.num_devices)
        self._acc = self._masks.zeros()
        return requests

    def _sharers(self, u2: set[int]) -> set[int]:
        """``u2`` without the devices that can no longer have t share holders in it (their
        secrets could never be rebuilt, so they count as dropped before sharing), repeated
        until none is left to prune."""
        return self.graph.core(u2, self.config.t)

    # -- stage 2: masked input -----------------------------------------------------------------

    def handle_masked_input(self, message: MaskedInput) -> bool:
        u = self._check(message, MaskedInput, Stage.MASKED_INPUT)
        if u not in self._masked_requests:
            raise ProtocolViolation(Violation.NOT_IN_ROUND, f"{u} got no MaskedInputRequest")
        vector = message.vector
        if not isinstance(vector, np.ndarray) or vector.ndim != 1:
            raise ProtocolViolation(Violation.MALFORMED, "vector must be a 1-D numpy array")
        if vector.shape[0] != self.config.dimension:
            raise ProtocolViolation(Violation.WRONG_LENGTH,
                                    f"{vector.shape[0]} entries, expected {self.config.dimension}")
        wire = self._masks.dtype
        if vector.dtype != wire and vector.dtype != self._masks.native_dtype:
            if not np.issubdtype(vector.dtype, np.integer):
                raise ProtocolViolation(Violation.MALFORMED, f"vector dtype {vector.dtype}")
            if vector.size and (vector.min() < 0 or vector.max() >= 1 << self.config.modulus_bits):
                raise ProtocolViolation(Violation.OUT_OF_RANGE, "entries must be in [0, R)")
            vector = vector.astype(self._masks.native_dtype)
        vector = np.ascontiguousarray(vector)
        fingerprint = _fingerprint(vector)
        if u in self._fingerprints:
            if self._fingerprints[u] == fingerprint:
                return False
            raise ProtocolViolation(Violation.DUPLICATE, f"second, different vector from {u}")
        if self._acc is None:
            raise ProtocolViolation(Violation.LATE, "no running sum")
        np.add(self._acc, vector, out=self._acc)
        self._fingerprints[u] = fingerprint
        return True

    def _close_masked_input(self) -> dict[int, ServerMessage]:
        u3 = set(self._fingerprints)
        problem = self._masked_input_problem(u3)
        if problem is not None:
            raise self._set_abort(*problem)
        self._masked_requests = {}
        if self.config.consistency_check:
            survivors = tuple(sorted(u3))
            self._survivors_digest = survivors_digest(survivors)
            requests: dict[int, ServerMessage] = {}
            for v in survivors:
                req = ConsistencyRequest(self.session_id, v, survivors)
                self._consistency_requests[v] = req
                requests[v] = req
            return requests
        return self._unmask_requests_for(u3, signers={})

    def _masked_input_problem(self, u3: set[int]) -> tuple[AbortReason, str] | None:
        """Why closing the masked-input stage with survivors ``u3`` would abort, or None."""
        if len(u3) < self.config.n_min:
            return AbortReason.TOO_FEW_DEVICES, f"|U3|={len(u3)} < n_min={self.config.n_min}"
        t = self.config.t
        short = self._holders.first_short(u3, t)
        if short is not None:
            u, holders = short
            return (AbortReason.TOO_FEW_SHARE_HOLDERS,
                    f"device {u} has {holders} surviving share holders < t={t}")
        # The server would learn the sum of each part of a split survivor graph; an honest
        # server refuses, and with the consistency check every device refuses too.
        if not self.graph.connected(sorted(u3)):
            return AbortReason.SURVIVORS_DISCONNECTED, "U3 splits the neighbour graph"
        return None

    # -- stage 3: consistency check (optional) -------------------------------------------------

    def handle_consistency_check(self, message: ConsistencyResponse) -> bool:
        u = self._check(message, ConsistencyResponse, Stage.CONSISTENCY_CHECK)
        if u not in self._consistency_requests:
            raise ProtocolViolation(Violation.NOT_IN_ROUND, f"{u} is not in U3")
        if u in self._consistency:
            if self._consistency[u] == message.signature:
                return False
            raise ProtocolViolation(Violation.DUPLICATE, f"second, different signature from {u}")
        adm = self._adverts[u].admission
        transcript = consistency_transcript(self.session_id, u, self._survivors_digest)
        if adm is None or not ed25519_verify(adm.identity_key, message.signature, transcript):
            raise ProtocolViolation(Violation.BAD_SIGNATURE, f"consistency signature of {u}")
        self._consistency[u] = message.signature
        return True

    def _close_consistency_check(self) -> dict[int, ServerMessage]:
        u3 = set(self._fingerprints)
        signers = dict(self._consistency)
        # Only a signer's contribution is proven to the coordinator (its signature is the
        # release evidence), which refuses a sum proven for fewer than n_min devices: unmasking
        # such a sum would reveal it for nothing.
        self._require(len(signers) >= self.config.n_min, AbortReason.TOO_FEW_DEVICES,
                      f"|U4|={len(signers)} < n_min={self.config.n_min}")
        short = self._short_secret(self._unmask_holders(u3, signers))
        self._require(short is None, AbortReason.TOO_FEW_SHARE_HOLDERS, short or "")
        self._consistency_requests = {}
        return self._unmask_requests_for(u3, signers)

    def _unmask_holders(self, u3: set[int], signers: Mapping[int, bytes]) -> set[int]:
        """The devices of ``u3`` that will be asked to unmask: with the consistency check,
        those that signed and whose neighbours in U3 include at least t signers (a device
        with fewer refuses, so it is not asked)."""
        if not self.config.consistency_check:
            return set(u3)
        signed = u3 & signers.keys()
        return self._holders.with_at_least(signed, signed, self.config.t)

    def _short_secret(self, holders: set[int]) -> str | None:
        """Why unmasking with share ``holders`` could never finish, or None: a secret (b_u of
        a survivor, s_u^SK of a dropout) has fewer than t holders among them. Shares only
        come from holders, so waiting would end in TOO_FEW_SHARES after devices revealed
        their shares of everyone else's secrets; refusing now reveals nothing."""
        t = self.config.t
        short = self._holders.first_short(holders, t)
        if short is None:
            return None
        u, count = short
        return f"the secret of device {u} has {count} share holders to unmask < t={t}"

    def _unmask_requests_for(self, u3: set[int],
                             signers: Mapping[int, bytes]) -> dict[int, ServerMessage]:
        requests: dict[int, ServerMessage] = {}
        with_check = self.config.consistency_check
        # Every partner of U2 split into survivors and the dropped at once, each side's ids
        # gathered from _id_objects in one C loop: a holder's alive and dropped are slices of
        # those, as its partners are a run of _partner_ids. (Each signer's (id, signature)
        # pair is made once and shared by its neighbours' requests: a pair per neighbour was
        # 187,000 tuples a shard of 2,500 devices, 21 -> 12 us per device.)
        ids, survivor = self._partner_ids, np.zeros(self.config.num_devices + 1, dtype=bool)
        survivor[list(u3)] = True
        lives = survivor[ids]
        alive_ids = self._id_objects[ids[lives]].tolist()
        dropped_ids = self._id_objects[ids[~lives]].tolist()
        holders = np.asarray(sorted(self._unmask_holders(u3, signers)), dtype=np.int64)
        owners, all_starts, all_ends = self._partner_runs
        rows = np.searchsorted(owners, holders)
        run_starts, run_ends = all_starts[rows], all_ends[rows]
        alive_before = np.concatenate(([0], np.cumsum(lives)))  # survivors in ids[:i]
        alive_starts, alive_ends = alive_before[run_starts], alive_before[run_ends]
        slices = zip(alive_starts.tolist(), alive_ends.tolist(),
                     (run_starts - alive_starts).tolist(), (run_ends - alive_ends).tolist(),
                     strict=True)
        # A holder's neighbours' signatures are a run of the signers in ring order, its own
        # left out (signers are in U3 and U2, so its signing partners are its signing
        # neighbours): a view of one tuple of (id, signature) pairs shared by the round.
        order, starts, stops = self.graph.ring_runs(signers if with_check else ())
        pairs = tuple((i, signers[i]) for i in order)
        runs = {u: (at, start, stop) for at, (u, start, stop) in enumerate(zip(
            order, starts.tolist(), stops.tolist(), strict=True))}
        for v, (a0, a1, d0, d1) in zip(holders.tolist(), slices, strict=True):
            alive, dropped = tuple(alive_ids[a0:a1]), tuple(dropped_ids[d0:d1])
            sigs: tuple[tuple[int, bytes], ...] | RingRun[tuple[int, bytes]] = ()
            if with_check:
                at, start, stop = runs[v]
                sigs = RingRun(pairs, start, stop, at)
            req = UnmaskRequest(self.session_id, v, alive, dropped, sigs)
            self._unmask_requests[v] = req
            requests[v] = req
        self._unmask_shares = _UnmaskShares(self._holders, u3)
        self._missing_secrets = len(self._partners)
        return requests

    # -- stage 4: unmask -----------------------------------------------------------------------

    def handle_unmask(self, message: UnmaskResponse) -> bool:
        v = self._check(message, UnmaskResponse, Stage.UNMASK)
        request = self._unmask_requests.get(v)
        if request is None:
            raise ProtocolViolation(Violation.NOT_IN_ROUND, f"{v} got no UnmaskRequest")
        parts: list[_OwnerValues] = []
        for entries, wanted in ((message.b_shares, request.alive),
                                (message.s_shares, request.dropped)):
            if isinstance(entries, OwnerShares):  # (sent packed: one blob, checked at once)
                if entries.width != shamir.SHARE_BYTES:
                    raise ProtocolViolation(Violation.WRONG_LENGTH,
                                            f"share values are {shamir.SHARE_BYTES} bytes")
                listed = tuple(entries.owners)
            elif isinstance(entries, tuple) and all(
                    isinstance(e, tuple) and len(e) == 2 for e in entries):
                listed = tuple(e[0] for e in entries)
            else:
                raise ProtocolViolation(Violation.MALFORMED, "share lists hold (id, bytes) pairs")
            if not {*map(type, listed)} <= {int}:  # (a C loop: every owner an int)
                raise ProtocolViolation(Violation.MALFORMED, "share owners are device ids")
            # (a device answers in the request's order; any other order is sorted to compare)
            if listed != wanted and (len(listed) != len(wanted)
                                     or sorted(listed) != sorted(wanted)):
                raise ProtocolViolation(Violation.MALFORMED, "shares must match the request")
            if isinstance(entries, OwnerShares):
                values = entries.blob
            else:
                for owner, raw in entries:
                    if not isinstance(raw, bytes) or len(raw) != shamir.SHARE_BYTES:
                        raise ProtocolViolation(Violation.WRONG_LENGTH, f"share of {owner}")
                values = b"".join(raw for _, raw in entries)
            if not shamir.packed_below_prime(values):
                raise ProtocolViolation(Violation.OUT_OF_RANGE, "share value >= p")
            parts.append((listed, values))
        digest = _shares_digest(parts)
        if v in self._unmask_digests:
            if self._unmask_digests[v] == digest:
                return False
            raise ProtocolViolation(Violation.DUPLICATE, f"second, different shares from {v}")
        shares = self._unmask_shares
        if shares is None:  # (set with the stage's requests, so never here)
            raise ProtocolViolation(Violation.NOT_IN_ROUND, f"{v}: no unmask stage is open")
        self._missing_secrets -= shares.store(v, parts, self.config.t)
        self._unmask_digests[v] = digest
        return True

    def _rebuild(self, shares: _UnmaskShares) -> tuple[dict[int, bytes],
                                                        dict[int, X25519PrivateKey]]:
        """Every secret, rebuilt from its t shares at the smallest points and checked: the PRG
        keys of b_u (u in U3) and s_u^SK (u in U2 \\ U3). A failure aborts the round before
        any mask is expanded, so a corrupt share costs no PRG work.

        They are rebuilt at the close, in batches (:func:`shamir.reconstruct_many`), not each
        as its t-th share arrives: a secret's smallest points leave out only the holders that
        did not answer among roughly its first t, where the first t shares to arrive left out
        a third of them, whose products were most of a rebuild's time."""
        t, self_keys, dropped = self.config.t, {}, {}
        rebuilt: bytes | X25519PrivateKey | str
        for rows in shares.batches():
            xs, ys = shares.smallest(t, rows)
            for row, secret in zip(rows.tolist(), shamir.reconstruct_many(xs, ys), strict=True):
                owner = shares.owner(row)
                check = self._secret_check(owner, shares.is_self_mask(row))
                rebuilt = check(secret)
                if isinstance(rebuilt, str):
                    rebuilt = self._repaired(shares, row, check) or rebuilt
                if isinstance(rebuilt, str):
                    raise self._set_abort(AbortReason.CORRUPT_SHARE, rebuilt)
                if isinstance(rebuilt, bytes):
                    self_keys[owner] = rebuilt
                else:
                    dropped[owner] = rebuilt
        if self.corrupt_holders:
            log.warning("secagg round %s: unmask shares of devices %s were corrupt; their "
                        "owners' secrets were rebuilt from other holders' shares",
                        self.config.round_id.hex(), sorted(self.corrupt_holders))
        return self_keys, dropped

    def _secret_check(self, owner: int, self_mask: bool
                      ) -> Callable[[int | None], bytes | X25519PrivateKey | str]:
        """What turns a rebuilt value into ``owner``'s secret of that kind, or says why it is
        not: b_u must match its commitment, s_u^SK give its advertised public key."""
        if self_mask:
            commitment = self._commitments[owner]
            return lambda secret: rebuild_self_mask(secret, self.session_id, owner, commitment)
        s_pk = self._adverts[owner].s_pk
        return lambda secret: rebuild_mask_key(secret, owner, s_pk)

    def _repaired(self, shares: _UnmaskShares, row: int,
                  check: Callable[[int | None], bytes | X25519PrivateKey | str]
                  ) -> bytes | X25519PrivateKey | None:
        """Row ``row``'s secret rebuilt around corrupt shares, or None. Its t shares at the
        smallest points did not give the secret, so one of them is wrong; with spare shares
        (holders beyond t answered), it is rebuilt from the t smallest points without the
        holders already found corrupt, then without each of the first t in turn. A set that
        gives the secret (checked against the owner's commitment or public key, so all its
        shares are right: changing one share changes the interpolated value) and left out
        one holder names that holder as corrupt; it is left out of the later secrets too.

        Only shares of the kind the stage asked for are used, so nothing more of any device
        is learnt; one cheating holder no longer aborts the round when spares exist (it still
        can by an input out of range: docs/threat-model.md, "Malicious devices in a round")."""
        t = self.config.t
        entries = [e for e in shares.filled(row) if e[0] not in self.corrupt_holders]
        if len(entries) < t:
            return None
        left_outs: list[int | None] = [None, *(h for h, _, _ in entries[:t])]
        if len(entries) == t:
            left_outs = [None]
        for left_out in left_outs:
            points = [(x, y) for h, x, y in entries if h != left_out][:t]
            try:
                secret: int | None = shamir.reconstruct(points)
            except shamir.ShareError:
                secret = None
            rebuilt = check(secret)
            if not isinstance(rebuilt, str):
                if left_out is not None:
                    self.corrupt_holders.add(left_out)
                return rebuilt
        return None

    def _close_unmask(self) -> dict[int, ServerMessage]:
        t = self.config.t
        short = None if self._unmask_shares is None else self._unmask_shares.first_short(t)
        if short is not None:
            u, count, self_mask = short
            raise self._set_abort(AbortReason.TOO_FEW_SHARES,
                                  f"{count} {'b' if self_mask else 's'}-shares of {u} < t={t}")
        if self._acc is None or self._unmask_shares is None:
            raise self._set_abort(AbortReason.CANCELLED, "no running sum")
        self_keys, dropped = self._rebuild(self._unmask_shares)
        u3 = sorted(self._fingerprints)
        remove_masks(self._acc, self._masks, self.session_id,
                     self_keys=self_keys.values(), dropped=dropped,
                     s_public={u: self._adverts[u].s_pk for u in self._partners},
                     partners={u: self._partners[u].tolist() for u in dropped},
                     survivors=set(u3))
        total = self._acc
        self._require(int(total.max(initial=0)) <= len(u3), AbortReason.OUTPUT_OUT_OF_RANGE,
                      "a coordinate of the sum exceeds the number of contributors")
        signatures = tuple(sorted(self._consistency.items()))
        self.result = AggregateResult(self.session_id, self.config.round_id, total, len(u3),
                                      tuple(u3), signatures)
        self._acc = None
        self._unmask_shares, self._unmask_digests = None, {}
        return {}

    # -- stage transitions ---------------------------------------------------------------------

    def _require(self, condition: bool, reason: AbortReason, detail: str) -> None:
        if not condition:
            raise self._set_abort(reason, detail)

    def close_stage(self) -> dict[int, ServerMessage]:
        """Close the open stage; returns the next stage's requests by device id.

        Raises :class:`SecAggAbort` if the round cannot go on (and on every call afterwards).
        Closing the unmask stage returns ``{}`` and sets :attr:`result`.
        """
        if self._abort is not None:
            raise self._abort
        closers = {
            Stage.ADVERTISE_KEYS: (self._close_advertise_keys, len(self._adverts)),
            Stage.SHARE_KEYS: (self._close_share_keys, len(self._share_responses)),
            Stage.MASKED_INPUT: (self._close_masked_input, len(self._fingerprints)),
            Stage.CONSISTENCY_CHECK: (self._close_consistency_check, len(self._consistency)),
            Stage.UNMASK: (self._close_unmask, len(self._unmask_digests)),
        }
        if self.stage not in closers:
            return {}
        closer, accepted = closers[self.stage]
        self.counts[self.stage] = accepted
        requests = closer()
        if self.stage == Stage.MASKED_INPUT and not self.config.consistency_check:
            self.stage = Stage.UNMASK
        else:
            self.stage = Stage(self.stage + 1)
        return requests


def _id_objects(num_devices: int) -> np.ndarray:
    """The ids 0..num_devices as one int object each: tuples of ids gathered from it
    (``table[ids].tolist()``) share them, where an int per entry each was k a device."""
    table = np.empty(num_devices + 1, dtype=object)
    table[:] = range(num_devices + 1)
    return table


@dataclass(frozen=True, eq=False)
class _SharesOf:
    """One device's accepted stage 1 message, packed: its recipients in the order sent, their
    ciphertexts as one bytes object in that order, and its commitment to b_u."""

    dsts: np.ndarray
    blob: bytes
    commitment: bytes

    @classmethod
    def packed(cls, message: ShareKeysResponse) -> _SharesOf:
        shares = message.shares
        if isinstance(shares, ShareBundle):
            return cls(np.array(shares.recipients, dtype=np.int64), shares.blob,
                       message.b_commitment)
        return cls(np.fromiter((s.dst for s in shares), dtype=np.int64, count=len(shares)),
                   b"".join(s.ciphertext for s in shares), message.b_commitment)

    def holds(self, message: ShareKeysResponse) -> bool:
        """Whether ``message`` is the one accepted (a repeat; anything malformed is not)."""
        try:
            other = _SharesOf.packed(message)
        except (AttributeError, TypeError, ValueError, OverflowError):
            return False
        return (self.commitment == other.commitment and self.blob == other.blob
                and np.array_equal(self.dsts, other.dsts))


def _gathered(joined: bytes, rows: np.ndarray, starts: list[int], ends: list[int]
              ) -> Iterator[bytes]:
    """Each recipient's ciphertexts as one bytes object, in turn: rows ``rows[starts[i]:
    ends[i]]`` of ``joined`` (the stage's uploads one after another, ``SHARE_CIPHERTEXT_BYTES``
    a row), gathered :data:`GATHER_BATCH` recipients at a time. Gathering every row in
    recipient order at once copied the stage's ciphertexts a third time (beside the uploads
    and their join), a worker's largest allocation of the round: with 5,000 devices a worker,
    its heap peaked at ~50 KB a device at the key sharing's close, of which ~16 KB stay
    (docs/benchmarks.md, "What a worker holds per device")."""
    ciphertexts = np.frombuffer(joined, dtype=np.uint8).reshape(-1, SHARE_CIPHERTEXT_BYTES)
    for first in range(0, len(starts), GATHER_BATCH):
        last = min(first + GATHER_BATCH, len(starts))
        base = starts[first]
        batch = ciphertexts[rows[base:ends[last - 1]]]
        for start, end in zip(starts[first:last], ends[first:last], strict=True):
            yield batch[start - base:end - base].tobytes()


def _stable_id_order(ids: np.ndarray, num_devices: int, axis: int | None = -1) -> np.ndarray:
    """``np.argsort(ids, axis, kind="stable")`` of device ids (1..``num_devices``, 0 for
    none), taken as 16-bit keys where every id fits: NumPy sorts those by radix, in time linear
    in the ids, where its stable sort of wider keys compares (1.6 ms for a table of 2,500 x 88
    ids, against 12 for 64-bit keys)."""
    keys = ids.astype(np.uint16) if num_devices < 1 << 16 else ids
    return np.argsort(keys, axis=axis, kind="stable")


def _same_ids(ids: list[int], expected: array[int]) -> bool:
    """Whether ``ids`` (ints) are ``expected``'s, in order. The expected recipients of a
    device's shares are kept as one array at the keys close: taking them from its roster
    read the device id of ~k entries (~1.3 KB each) scattered over a worker's heap: 86 us a
    share message in a worker holding 25,000 devices, 32 us with the array
    (docs/benchmarks.md, twenty-third stop)."""
    try:
        return array("I", ids) == expected
    except OverflowError:  # (an id that is no uint32 is no neighbour)
        return False


def _share_points(roster: np.ndarray, holders: np.ndarray) -> np.ndarray:
    """The Shamir points of ``holders``' shares of one owner's secrets: 1 + each holder's
    position in the owner's roster in ascending id order (``roster``: the recipients of its
    shares), where the owner's sharing put them (``SecAggDevice.share_keys``)."""
    listed = np.sort(roster)
    positions = np.searchsorted(listed, holders)
    # (the server builds every roster from the graph, so they are symmetric: a holder of v's
    # shares sent v one, and is in v's roster)
    if holders.size and (positions.max() >= listed.size
                         or not np.array_equal(listed[positions], holders)):
        raise AssertionError("a share holder is not in its owner's roster")
    return positions + 1


class _ShareHolders:
    """Every secret's share holders P_v (v in U2, ascending) as one zero-padded table of ids,
    so counting each secret's holders within a set is one gather: the stage checks count them
    after accepted messages, and walking n x k ids in Python took seconds per check for
    shards of 6,000 devices. Beside it, the Shamir point of each holder's share
    (``points``, by owner: :func:`_share_points`)."""

    def __init__(self, partners: Mapping[int, Sequence[int] | np.ndarray],
                 points: Mapping[int, np.ndarray], num_devices: int) -> None:
        self._num_devices = num_devices
        self._ids = np.fromiter(partners, dtype=np.int64, count=len(partners))
        width = max((len(p) for p in partners.values()), default=0)
        self._table = np.zeros((len(partners), width), dtype=np.int64)  # 0: no device
        for row, holders in zip(self._table, partners.values(), strict=True):
            row[:len(holders)] = holders
        self._points = np.zeros_like(self._table)
        for row, owner in zip(self._points, partners, strict=True):
            row[:len(points[owner])] = points[owner]
        self._row_of = np.full(num_devices + 1, -1, dtype=np.int64)  # device id -> its row
        self._row_of[self._ids] = np.arange(len(self._ids))
        # The table's cells by holder, each holder's in ascending row order, keyed
        # holder * (rows + 1) + row (ascending), so the slots of every (holder, owner) pair of
        # a stage are found by one search.
        cells = _stable_id_order(self._table, num_devices, axis=None)
        held_rows, self._held_columns = np.divmod(cells, max(width, 1))
        self._cell_keys = self._table.ravel()[cells] * (len(self._ids) + 1) + held_rows

    @property
    def ids(self) -> np.ndarray:
        """The secrets' owners, one per row."""
        return self._ids

    @property
    def shape(self) -> tuple[int, int]:
        """(secrets, the most holders a secret has)."""
        rows, width = self._table.shape
        return rows, width

    def holders_of(self, row: int) -> np.ndarray:
        """Row ``row``'s holders' ids, one per column (0: no holder)."""
        return self._table[row]

    def points_of(self, rows: np.ndarray) -> np.ndarray:
        """The Shamir points of the shares of each row's secret, by holder (0: no holder)."""
        return self._points[rows]

    def slots(self, holders: np.ndarray, owners: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(row, column) of ``holders[i]`` among ``owners[i]``'s holders, for each i (two
        integer arrays of one length; ValueError where a holder is none of them)."""
        if holders.size and (holders.min() < 1 or holders.max() > self._num_devices
                             or owners.min() < 1 or owners.max() > self._num_devices):
            raise ValueError("an owner or the holder is no device of the round")
        rows = self._row_of[owners]  # (-1 for an owner that shared no secret: no cell's key)
        wanted = holders * (len(self._ids) + 1) + rows
        at = self._cell_keys.searchsorted(wanted)
        if at.size and (at.max() >= self._cell_keys.size
                        or not (self._cell_keys[at] == wanted).all()):
            raise ValueError("a holder holds no share of an owner's secret")
        return rows, self._held_columns[at]

    def owned_by(self, devices: Collection[int]) -> np.ndarray:
        """bool per row: is its secret's owner one of ``devices``?"""
        return self._member(devices)[self._ids]

    def _member(self, devices: Collection[int]) -> np.ndarray:
        member = np.zeros(self._num_devices + 1, dtype=bool)
        member[np.fromiter(devices, dtype=np.int64, count=len(devices))] = True
        member[0] = False
        return member

    def _counts(self, holders: Collection[int]) -> np.ndarray:
        return np.count_nonzero(self._member(holders)[self._table], axis=1)

    def first_short(self, holders: Collection[int], t: int) -> tuple[int, int] | None:
        """(v, its count) for the first v whose secret has fewer than ``t`` holders in
        ``holders``, or None."""
        return _first_below(self._ids, self._counts(holders), t)

    def with_at_least(self, candidates: Collection[int], holders: Collection[int], t: int
                      ) -> set[int]:
        """The devices of ``candidates`` (all in U2) with at least ``t`` holders in
        ``holders``."""
        ids = np.fromiter(candidates, dtype=np.int64, count=len(candidates))
        return set(ids[self._counts(holders)[self._row_of[ids]] >= t].tolist())


def _first_below(ids: np.ndarray, counts: np.ndarray, t: int) -> tuple[int, int] | None:
    """(ids[i], counts[i]) for the first i with counts[i] < t, or None."""
    short = np.flatnonzero(counts < t)
    if short.size == 0:
        return None
    return int(ids[short[0]]), int(counts[short[0]])


class _UnmaskShares:
    """The unmask stage's shares: each accepted response kept as it came (its lists' owners
    and values, the response's own objects) and counted per owner; at the close, one table of
    ``SHARE_BYTES`` values, row r for the secret of :class:`_ShareHolders`' r-th owner,
    column j for its j-th holder's share, filled for all responses a batch at a time. Only
    the t shares of each secret that are rebuilt are read as integers.

    A response costs a count in C loops and no NumPy call: finding its ~k slots and writing
    them into the table as it arrived took a dozen NumPy calls on arrays of ~k items, which
    cost several times as much among a worker's other work as in a loop. In the load test's
    workers (2,500 devices a shard, k = 88) the handler went from 58 to 24-28 us a response
    and the close took 10-20 us a device more (docs/benchmarks.md, twenty-second stop)."""

    def __init__(self, holders: _ShareHolders, survivors: Collection[int]) -> None:
        self._holders = holders
        self._received: list[tuple[int, Sequence[_OwnerValues]]] = []
        self._per_owner: collections.Counter[int] = collections.Counter()
        self._table: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._self_mask = holders.owned_by(survivors)  # b_u for u in U3, s_u^SK for the others

    def store(self, holder: int, parts: Sequence[_OwnerValues], t: int) -> int:
        """Keep ``holder``'s share of each owner's secret (``parts``: the response's lists, the
        owners distinct and each checked against the request; a packed list's own objects,
        kept as they are); returns how many secrets have just got their t-th share."""
        if self._table is not None:
            raise ProtocolViolation(Violation.LATE, "the unmask shares are already tabled")
        per_owner, reached = self._per_owner, 0
        for owners, _ in parts:
            per_owner.update(owners)
            reached += list(map(per_owner.__getitem__, owners)).count(t)
        self._received.append((holder, parts))
        return reached

    def _tabled(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(values, filled, counts): every kept response written into the table, at the
        first call (the stage has closed: nothing is stored afterwards)."""
        if self._table is not None:
            return self._table
        rows, width = self._holders.shape
        values = np.zeros((rows, width, shamir.SHARE_BYTES), dtype=np.uint8)
        filled = np.zeros((rows, width), dtype=bool)
        received, self._received = self._received, []
        for start in range(0, len(received), REBUILD_BATCH):
            batch = [(holder, owners, blob)
                     for holder, parts in received[start:start + REBUILD_BATCH]
                     for owners, blob in parts]
            sizes = [len(owners) for _, owners, _ in batch]
            holders = np.repeat(np.fromiter((h for h, _, _ in batch), dtype=np.int64,
                                            count=len(batch)), sizes)
            owners = np.fromiter(itertools.chain.from_iterable(o for _, o, _ in batch),
                                 dtype=np.int64, count=sum(sizes))
            try:
                at = self._holders.slots(holders, owners)
            except ValueError as exc:  # (each response matched its request, made from P_v)
                raise AssertionError(f"a response's owners are not its holder's: {exc}") from exc
            values[at] = np.frombuffer(b"".join(blob for _, _, blob in batch),
                                       dtype=np.uint8).reshape(-1, shamir.SHARE_BYTES)
            filled[at] = True
        self._table = values, filled, np.count_nonzero(filled, axis=1)
        return self._table

    def owner(self, row: int) -> int:
        """The owner of row ``row``'s secret."""
        return int(self._holders.ids[row])

    def batches(self) -> list[np.ndarray]:
        """Every row, in runs of at most :data:`REBUILD_BATCH`."""
        rows = np.arange(self._holders.shape[0])
        return [rows[i:i + REBUILD_BATCH] for i in range(0, rows.size, REBUILD_BATCH)]

    def smallest(self, t: int, rows: np.ndarray) -> tuple[np.ndarray, list[list[int]]]:
        """For each of ``rows`` (each with at least t shares stored): the points of its t
        stored shares at the smallest points, ascending, and their values (as
        :func:`shamir.reconstruct_many` takes them)."""
        table, filled, _ = self._tabled()
        points = self._holders.points_of(rows)
        unfilled = np.iinfo(np.int64).max
        order = np.argsort(np.where(filled[rows], points, unfilled), axis=1,
                           kind="stable")[:, :t]
        xs = np.take_along_axis(points, order, axis=1)
        # (each share's bytes as one void item: tolist makes the bytes objects in C, a third
        # of the time of slicing them out of one bytes object)
        chosen = table[rows[:, np.newaxis], order].view(f"V{shamir.SHARE_BYTES}")
        big: Literal["big"] = "big"
        values = list(map(int.from_bytes, chosen.ravel().tolist(), itertools.repeat(big)))
        return xs, [values[i:i + t] for i in range(0, len(values), t)]

    def filled(self, row: int) -> list[tuple[int, int, int]]:
        """Every share stored for row ``row``'s secret as (holder, point, value), in
        ascending point order (the failure path of the rebuild: a few rows at most)."""
        table, filled, _ = self._tabled()
        holders = self._holders.holders_of(row)
        points = self._holders.points_of(np.array([row]))[0]
        big: Literal["big"] = "big"
        found = [(int(points[j]), int(holders[j]), int.from_bytes(table[row, j].tobytes(), big))
                 for j in np.flatnonzero(filled[row]).tolist()]
        return [(h, x, y) for x, h, y in sorted(found)]

    def is_self_mask(self, row: int) -> bool:
        """Whether row ``row``'s secret is b_u (a survivor's) rather than s_u^SK."""
        return bool(self._self_mask[row])

    def first_short(self, t: int) -> tuple[int, int, bool] | None:
        """(owner, its share count, whether it is b_u) of the first secret with fewer than t
        shares, or None."""
        counts = self._tabled()[2]
        short = _first_below(np.arange(counts.size), counts, t)
        if short is None:
            return None
        row, count = short
        return self.owner(row), count, self.is_self_mask(row)
