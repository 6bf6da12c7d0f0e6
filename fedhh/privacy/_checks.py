"""Input validation shared by the privacy modules: every error names the bad value."""

from __future__ import annotations

import math

from fedhh.errors import PrivacyError


def check_eps(value: float, name: str = "epsilon") -> float:
    """A positive finite epsilon."""
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise PrivacyError(f"{name} must be a positive finite number, got {value}")
    return value


def check_delta(value: float, name: str = "delta") -> float:
    """A delta strictly between 0 and 1."""
    value = float(value)
    if not (math.isfinite(value) and 0.0 < value < 1.0):
        raise PrivacyError(f"{name} must be in (0, 1), got {value}")
    return value


def check_rounds(value: int, name: str = "rounds") -> int:
    """A positive integer number of rounds."""
    if isinstance(value, bool) or int(value) != value or int(value) < 1:
        raise PrivacyError(f"{name} must be an integer >= 1, got {value}")
    return int(value)


def check_devices(value: int, name: str = "num_devices") -> int:
    """At least two devices: shuffling one report hides nothing."""
    if isinstance(value, bool) or int(value) != value or int(value) < 2:
        raise PrivacyError(
            f"{name} must be an integer >= 2 (no amplification with fewer devices), got {value}"
        )
    return int(value)


def check_rate(value: float, name: str = "sampling_rate") -> float:
    """A sampling rate in (0, 1]."""
    value = float(value)
    if not (math.isfinite(value) and 0.0 < value <= 1.0):
        raise PrivacyError(f"{name} must be in (0, 1], got {value}")
    return value


def check_positive(name: str, value: float) -> float:
    """A positive finite real (sensitivities, scales)."""
    value = float(value)
    if not (math.isfinite(value) and value > 0):
        raise PrivacyError(f"{name} must be a positive finite number, got {value}")
    return value
