"""The accounting methods (the ``method`` argument everywhere) and their names.

``"sum"`` (default)
    What is released: each round's per-coordinate sums over its contributors, accounted exactly
    by the privacy loss distribution of one-hot + asymmetric randomized response, worst case
    over the other devices' data (``sum_pld``). Holds while secure aggregation releases only
    sums over at least n_min devices.
``"clones"``
    Amplification by shuffling of any eps_local-LDP reports (Feldman, McMillan, Talwar 2021,
    "Hiding Among the Clones"), computed numerically (``clones``). Holds for shuffled reports
    even if the sums' secrecy fails; looser than ``"sum"``.
``"paper"``
    The heavy-hitters paper's accounting (FMT23 stronger clones; not proven for our randomizer):
    a reproduction, flagged ``conditions_verified = false``.
``"closed-form"``
    FMT21's closed form with advanced composition: conservative and cheap.

``"exact"`` is the name ``"clones"`` had before the sum accountant existed; it is still
accepted (persisted ledgers and run settings use it) and means ``"clones"``.
"""

from __future__ import annotations

from fedhh.errors import PrivacyError

METHODS: tuple[str, ...] = ("sum", "clones", "paper", "closed-form")
DEFAULT_METHOD = "sum"
SHUFFLE_METHODS: tuple[str, ...] = ("clones", "paper", "closed-form")
LEGACY_NAMES = {"exact": "clones"}


def check_method(method: str) -> str:
    """The canonical name of a known method (legacy names are translated)."""
    if not isinstance(method, str):
        raise PrivacyError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    method = LEGACY_NAMES.get(method, method)
    if method not in METHODS:
        raise PrivacyError(f"method must be one of {', '.join(METHODS)}, got {method!r}")
    return method
