"""Which privacy accounting covers PI-RAPPOR, and why the summed-report accountant does not.

What is released. One-hot + randomized response reports are added up by secure aggregation:
the coordinator sees only each round's per-coordinate sums, and an accountant of that sum
(issue 12's ``"sum"`` method, the accountant's default: the privacy loss distribution of the
two coordinates a replacement changes) bounds exactly what is released. PI-RAPPOR reports are
vectors over GF(q); the counts C_w come from testing every report on its own (``decoders``),
which the sum of reports does not allow (the sum of affine functions is one affine function: it
says nothing about how many of them put w in S). So the server needs the reports themselves,
unlinked from their senders: the shuffle model (an anonymizing shuffler, docs/pi-rappor.md).
What is released is then the multiset of reports, and the bound that covers it is
amplification by shuffling of n reports of an eps_local-LDP randomizer, the accountant's
shuffle methods (Feldman, McMillan and Talwar 2021, "Hiding Among the Clones": any eps0-DP
local randomizer under replacement, adaptive rounds included). PI-RAPPOR's replacement variant
is eps_local-DP for every pair of inputs, "nothing to report" included (``params``,
``layout``), so those bounds apply unchanged.

The sum accountant's argument is specific to one-hot + randomized response's coordinates and
to sums; using it here would claim a guarantee for a release that does not happen. A run with
PI-RAPPOR therefore accounts with a shuffle method (``fedhh.privacy.methods.SHUFFLE_METHODS``):
the configured one if it is one, the clones bound by default; the sum method is refused.
"""

from __future__ import annotations

from fedhh.errors import ConfigError
from fedhh.privacy.methods import SHUFFLE_METHODS, check_method

# Feldman-McMillan-Talwar 2021 ("Hiding Among the Clones"), computed numerically.
DEFAULT_METHOD = "clones"


def accounting_method(requested: str | None) -> str:
    """The accountant method of a PI-RAPPOR run (module docstring)."""
    if requested is None:
        return DEFAULT_METHOD
    method = check_method(requested)
    if method not in SHUFFLE_METHODS:
        raise ConfigError(
            f"privacy method {requested!r} accounts for the sum of one-hot reports that secure "
            "aggregation releases; PI-RAPPOR reports are decoded one by one, which needs a "
            "shuffler, and shuffled reports are covered by the shuffle bounds: use one of "
            f"{', '.join(SHUFFLE_METHODS)} (the default for PI-RAPPOR is {DEFAULT_METHOD})")
    return method
