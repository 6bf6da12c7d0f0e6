"""Input validation shared by the privacy modules: every error names the bad value."""

from __future__ import annotations

import math
import numbers

from fedhh.errors import PrivacyError


def _real(value: object, name: str) -> float:
    """``value`` as a float if it is a real number: a bool, a string or None is refused (before,
    ``float(True)`` made True an epsilon of 1.0 and ``float("2")`` one of 2.0)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise PrivacyError(f"{name} must be a real number, not {type(value).__name__}: "
                           f"got {value!r}")
    return float(value)


def check_eps(value: float, name: str = "epsilon") -> float:
    """A positive finite epsilon."""
    value = _real(value, name)
    if not (math.isfinite(value) and value > 0):
        raise PrivacyError(f"{name} must be a positive finite number, got {value}")
    return value


def check_delta(value: float, name: str = "delta") -> float:
    """A delta strictly between 0 and 1."""
    value = _real(value, name)
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise PrivacyError(f"{name} must be in (0, 1), got {value}")
    return value


# The most rounds an accountant composes: far above a run's (fedhh.config.MAX_ROUNDS main and as
# many completion rounds, each possibly charged once per item), low enough that the per-round
# lists stay small (2^20 rounds take ~4 s and 0.4 GB with the sum method; 10^9 exhausted memory).
MAX_ACCOUNTED_ROUNDS = 1 << 20

# The largest local epsilon the accountants take: e^eps must be a finite double (ln of the largest
# is 709.78); above ~710 the shuffle bounds raised OverflowError and the sum bound
# decimal.Overflow. No randomizer resolves more than ln(2^32 - 1) = 22.18 anyway.
EPS_LOCAL_LIMIT = 700.0


def check_rounds(value: int, name: str = "rounds") -> int:
    """A positive integer number of rounds, at most ``MAX_ACCOUNTED_ROUNDS``."""
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise PrivacyError(f"{name} must be an integer >= 1, got {value}")
    if int(value) > MAX_ACCOUNTED_ROUNDS:
        raise PrivacyError(f"{name} must be at most {MAX_ACCOUNTED_ROUNDS:,} (the most rounds "
                           f"the accountants compose), got {int(value):,}")
    return int(value)


def check_eps_local(value: float, name: str = "eps_local") -> float:
    """A positive finite local epsilon of at most ``EPS_LOCAL_LIMIT``."""
    value = check_eps(value, name)
    if value > EPS_LOCAL_LIMIT:
        raise PrivacyError(f"{name} must be at most {EPS_LOCAL_LIMIT:g} (e^{name} must be a "
                           f"finite number), got {value:g}")
    return value


def check_devices(value: int, name: str = "num_devices") -> int:
    """At least two devices: shuffling one report hides nothing."""
    if isinstance(value, bool) or int(value) != value or int(value) < 2:
        raise PrivacyError(
            f"{name} must be an integer >= 2 (no amplification with fewer devices), got {value}"
        )
    return int(value)


def check_rate(value: float, name: str = "sampling_rate") -> float:
    """A sampling rate in (0, 1]."""
    value = _real(value, name)
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise PrivacyError(f"{name} must be in (0, 1], got {value}")
    return value


def check_positive(name: str, value: float) -> float:
    """A positive finite real (sensitivities, scales)."""
    value = _real(value, name)
    if not (math.isfinite(value) and value > 0):
        raise PrivacyError(f"{name} must be a positive finite number, got {value}")
    return value
