"""Property: whatever an authenticated member sends, the server accepts it, answers it as an
identical duplicate, or refuses it with a ProtocolViolation that changes nothing; an honest
round around such messages releases its exact sum (or, where a member's own odd message was
accepted, ends released or aborted, never with another error).

Before each honest message of a round, variants of it and of the earlier messages go to
``SecAggServer.handle`` (for its own stage or another) and to ``handle_decline``: one field
changed (a session id or key a byte short, long or flipped; a device id 0, n, n + 1 or
2^32 - 1; a share list emptied, cut, doubled, reversed, an entry's sender, recipient or bytes
changed; a vector a coordinate short or long, of another dtype), in the tuple forms and the
packed forms a worker takes off the session stream (``ShareBundle``, ``OwnerShares``). The
server's state is compared whole (pickled) before and after each refusal, but for caches of
what the signed config and verified proofs derive (``_admitted``, ``_masks``, ``config``)."""

from __future__ import annotations

import dataclasses
import pickle
import random
from typing import Any

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from secagg_testkit import assert_correct, reports_for

from fedhh.secagg import Decline, ProtocolViolation, SecAggAbort, Stage
from fedhh.secagg.messages import (
    EncryptedShare,
    OwnerShares,
    ShareBundle,
    ShareKeysResponse,
    UnmaskResponse,
)
from fedhh.secagg.server import SecAggServer
from fedhh.secagg.simulate import SimulatedRound, make_cohort

N = 8
CACHES = frozenset({"_admitted", "_masks", "config"})
STAGES = (Stage.ADVERTISE_KEYS, Stage.SHARE_KEYS, Stage.MASKED_INPUT, Stage.CONSISTENCY_CHECK,
          Stage.UNMASK)


def _state(server: SecAggServer) -> dict[str, bytes]:
    return {name: pickle.dumps(value) for name, value in vars(server).items()
            if name not in CACHES}


def _an_id(rng: random.Random) -> int:
    return rng.choice([0, 1, N, N + 1, 2**31, 2**32 - 1, rng.randint(1, N)])


def _bytes(rng: random.Random, value: bytes) -> bytes:
    if not value:
        return b"\x00"
    i = rng.randrange(len(value))
    return rng.choice([value[:-1], value + b"\x00", b"",
                       value[:i] + bytes([value[i] ^ 1]) + value[i + 1:]])


def _packed(message: Any) -> Any:
    """``message`` with its share lists in the packed forms (as it is, if it has none)."""
    if isinstance(message, ShareKeysResponse) and message.shares and not isinstance(
            message.shares, ShareBundle):
        shares = message.shares
        return dataclasses.replace(message, shares=ShareBundle.sent_by(
            message.device_id, tuple(s.dst for s in shares),
            b"".join(s.ciphertext for s in shares), len(shares[0].ciphertext)))
    if isinstance(message, UnmaskResponse) and not isinstance(message.b_shares, OwnerShares):
        def pack(entries: Any) -> Any:
            if not entries:
                return entries
            return OwnerShares(tuple(o for o, _ in entries), b"".join(v for _, v in entries),
                               len(entries[0][1]))
        return dataclasses.replace(message, b_shares=pack(message.b_shares),
                                   s_shares=pack(message.s_shares))
    return message


def _entries(rng: random.Random, value: Any) -> Any:
    """A share list (a tuple or a packed form) with one change."""
    if isinstance(value, (ShareBundle, OwnerShares)):
        ids, blob, width = list(value.recipients if isinstance(value, ShareBundle)
                                else value.owners), value.blob, value.width
        change = rng.randrange(4)
        if change == 0 and ids:
            ids[rng.randrange(len(ids))] = _an_id(rng)
        elif change == 1 and ids:
            ids, blob = [*ids, ids[0]], blob + blob[:width]
        elif change == 2:
            ids.reverse()
            blob = b"".join(blob[i:i + width] for i in range(len(blob) - width, -1, -width))
        else:
            blob = _bytes(rng, blob)
        try:
            if isinstance(value, ShareBundle):
                assert value.src is not None
                return ShareBundle.sent_by(value.src, tuple(ids), blob, width)
            return OwnerShares(tuple(ids), blob, width)
        except ValueError:  # (the blob no longer fits the ids: the wire form refuses it so)
            return value
    items = list(value)
    change = rng.randrange(5)
    if change == 0:
        return ()
    if change == 1 and items:
        return tuple(items[:-1])
    if change == 2:
        return tuple(items * 2)
    if change == 3:
        return tuple(reversed(items))
    if items:
        i = rng.randrange(len(items))
        item = items[i]
        if isinstance(item, EncryptedShare):
            field = rng.choice(["src", "dst", "ciphertext"])
            changes: dict[str, Any] = {field: _bytes(rng, item.ciphertext)
                                       if field == "ciphertext" else _an_id(rng)}
            items[i] = dataclasses.replace(item, **changes)
        else:
            items[i] = (_an_id(rng), item[1]) if rng.random() < 0.5 else (item[0],
                                                                         _bytes(rng, item[1]))
    return tuple(items)


def _variant(rng: random.Random, message: Any) -> Any:
    """``message`` with one field changed."""
    field = rng.choice([f.name for f in dataclasses.fields(message)])
    value = getattr(message, field)
    if field == "device_id":
        changed: Any = _an_id(rng)
    elif isinstance(value, bytes):
        changed = _bytes(rng, value)
    elif isinstance(value, np.ndarray):
        changed = rng.choice([value[:-1], np.concatenate([value, value[:1]]),
                              value.astype(np.int64 if value.dtype != np.int64 else np.uint16)])
    elif isinstance(value, (tuple, ShareBundle, OwnerShares)):
        changed = _entries(rng, value)
    else:  # (an admission or None: the admission's own checks are the Merkle tests')
        return message
    return dataclasses.replace(message, **{field: changed})


@settings(max_examples=30, derandomize=True, database=None, deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.randoms(use_true_random=False), st.booleans(), st.integers(1, 6))
def test_a_refused_message_changes_nothing_and_the_round_goes_on(
        rng: random.Random, consistency_check: bool, per_message: int) -> None:
    cohort = make_cohort(N, 12, 7, 4, n_min=4, device_auth=True,
                         consistency_check=consistency_check, seed=rng.randrange(2**16))
    sent: list[Any] = []
    accepted_variants = 0
    refused = 0

    def alongside(stage: Stage, u: int, message: Any) -> Any:
        nonlocal accepted_variants, refused
        server = driver.server
        for _ in range(per_message):
            variant = _variant(rng, _packed(rng.choice([message, *sent])) if rng.random() < 0.5
                               else rng.choice([message, *sent]))
            before = _state(server)
            try:
                if rng.random() < 0.1:
                    result = server.handle_decline(Decline(variant.session_id,
                                                           variant.device_id))
                else:
                    result = server.handle(rng.choice([stage, stage, *STAGES]), variant)
            except ProtocolViolation:
                refused += 1
                after = _state(server)
                assert after == before, (variant, [k for k in before if before[k] != after[k]])
                continue
            except SecAggAbort:  # (a member's own odd message may abort the round)
                accepted_variants += 1
                continue
            if result:
                accepted_variants += 1
            else:
                assert _state(server) == before, variant  # an identical duplicate
        sent.append(message)
        return _packed(message) if rng.random() < 0.5 else message

    driver = SimulatedRound(cohort, reports_for(N, 12, seed=rng.randrange(2**16)),
                            to_server=alongside)
    outcome = driver.run()
    assert refused > 0
    if accepted_variants == 0:
        assert_correct(outcome)
        assert outcome.result is not None and outcome.result.num_contributors == N
    else:
        assert (outcome.result is None) != (outcome.abort is None), outcome
