"""Server-side mask removal at the end of a round (SECAGG.md section 3, step 4).

For every u in U3 the server reconstructs b_u from t b-shares, checks it against u's commitment
and subtracts PRG(b_u). For every u in U2 \\ U3 (sent shares, then no masked input) it
reconstructs s_u^SK from t s-shares, checks that its public key is u's advertised s_pk, and for
each surviving partner v removes v's term Delta_vu * PRG(s_vu), where Delta_vu = +1 if v > u else
-1. Every reconstruction is checked before any mask is expanded, so a corrupt share costs no PRG
work. Work: |U3| + sum over dropped u of |P_u ∩ U3| mask expansions.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from fedhh.secagg import shamir
from fedhh.secagg.prg import MaskGenerator, pair_mask_key, self_mask_key
from fedhh.secagg.primitives import LABELS, agree, sha256, u32, x25519_from_seed

__all__ = ["remove_masks"]


def remove_masks(acc: np.ndarray, masks: MaskGenerator, session_id: bytes, t: int, *,
                 b_points: Mapping[int, Sequence[tuple[int, int]]],
                 s_points: Mapping[int, Sequence[tuple[int, int]]],
                 commitments: Mapping[int, bytes], s_public: Mapping[int, bytes],
                 partners: Mapping[int, Sequence[int]], survivors: set[int]) -> str | None:
    """Unmask ``acc`` in place; returns a description of the first failed check, or None.

    On failure ``acc`` is untouched.
    """
    self_keys = []
    for u in sorted(b_points):
        try:
            b = shamir.reconstruct(sorted(b_points[u])[:t]).to_bytes(32, "big")
        except shamir.ShareError as exc:
            return f"b-shares of {u}: {exc}"
        if sha256(LABELS["commit"], session_id, u32(u), b) != commitments[u]:
            return f"b-shares of {u} do not match its commitment"
        self_keys.append(self_mask_key(b, session_id, u))
    pair_keys = []
    for u in sorted(s_points):
        try:
            raw = shamir.reconstruct(sorted(s_points[u])[:t]).to_bytes(32, "big")
        except shamir.ShareError as exc:
            return f"s-shares of {u}: {exc}"
        s_key = x25519_from_seed(raw)
        if s_key.public_key().public_bytes_raw() != s_public[u]:
            return f"s-shares of {u} do not give its public key"
        for v in partners[u]:
            if v in survivors:
                shared = agree(s_key, s_public[v])
                # v added +PRG(s_uv) if v > u, else subtracted it; undo that.
                pair_keys.append((pair_mask_key(shared, session_id, u, v), -1 if v > u else 1))
    for key in self_keys:
        masks.subtract(acc, key)
    for key, sign in pair_keys:
        masks.add(acc, key, sign)
    return None
