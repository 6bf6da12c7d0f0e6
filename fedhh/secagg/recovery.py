"""Server-side mask removal at the end of a round (SECAGG.md section 3, step 4).

For every u in U3 the server reconstructs b_u from t b-shares, checks it against u's commitment
and subtracts PRG(b_u). For every u in U2 \\ U3 (sent shares, then no masked input) it
reconstructs s_u^SK from t s-shares, checks that its public key is u's advertised s_pk, and for
each surviving partner v removes v's term Delta_vu * PRG(s_vu), where Delta_vu = +1 if v > u else
-1. Work: |U3| + sum over dropped u of |P_u ∩ U3| mask expansions.

At the close of the stage the server rebuilds every secret (Shamir, in batches:
``shamir.reconstruct_many``) and checks each (:func:`rebuild_self_mask`,
:func:`rebuild_mask_key`) before it expands any mask (:func:`remove_masks`): a corrupt share
costs no PRG work.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from fedhh.secagg import shamir
from fedhh.secagg.prg import MaskGenerator, pair_mask_key, self_mask_key
from fedhh.secagg.primitives import (
    LABELS,
    agree,
    sha256,
    u32,
    x25519_from_seed,
    x25519_public_bytes,
)

__all__ = ["rebuild_mask_key", "rebuild_self_mask", "remove_masks"]


_NO_SECRET = "the shares reconstruct a value >= 2^256: a share is corrupt"


def rebuild_self_mask(secret: int | None, session_id: bytes, owner: int,
                      commitment: bytes) -> bytes | str:
    """The key of PRG(b_owner) from what t b-shares reconstruct (None: no 32-byte value), or
    why it is not b_owner (it must match the owner's commitment)."""
    if secret is None:
        return f"b-shares of {owner}: {_NO_SECRET}"
    b = secret.to_bytes(shamir.SECRET_BYTES, "big")
    if sha256(LABELS["commit"], session_id, u32(owner), b) != commitment:
        return f"b-shares of {owner} do not match its commitment"
    return self_mask_key(b, session_id, owner)


def rebuild_mask_key(secret: int | None, owner: int,
                     s_public: bytes) -> X25519PrivateKey | str:
    """s_owner^SK from what t s-shares reconstruct (None: no 32-byte value), or why it is not
    s_owner^SK (its public key must be the owner's advertised s_pk)."""
    if secret is None:
        return f"s-shares of {owner}: {_NO_SECRET}"
    key = x25519_from_seed(secret.to_bytes(shamir.SECRET_BYTES, "big"))
    if x25519_public_bytes(key) != s_public:
        return f"s-shares of {owner} do not give its public key"
    return key


def remove_masks(acc: np.ndarray, masks: MaskGenerator, session_id: bytes, *,
                 self_keys: Iterable[bytes], dropped: Mapping[int, X25519PrivateKey],
                 s_public: Mapping[int, bytes], partners: Mapping[int, Sequence[int]],
                 survivors: set[int]) -> None:
    """Unmask ``acc`` in place with the rebuilt secrets: subtract every self mask, and remove
    every surviving partner's pairwise mask with each dropped device."""
    keys = list(self_keys)
    signs = [-1] * len(keys)
    # (a survivor's key meets each of its dropped partners: its object is made once)
    parse = functools.lru_cache(maxsize=None)(X25519PublicKey.from_public_bytes)
    for u, s_key in dropped.items():
        for v in partners[u]:
            if v in survivors:
                shared = agree(s_key, s_public[v], parse)
                # v added +PRG(s_uv) if v > u, else subtracted it; undo that.
                keys.append(pair_mask_key(shared, session_id, u, v))
                signs.append(-1 if v > u else 1)
    masks.add_many(acc, keys, signs)
