"""The errors of the secure-aggregation protocol, all under :class:`fedhh.errors.FedhhError`.

Three kinds, so a transport can map them to status codes in one place:

* :class:`SecAggConfigError` - a parameter or round config is invalid (never a network event).
* :class:`ProtocolViolation` - one incoming message was rejected by the server state machine
  (wrong length, replay, late, unknown device, bad signature, ...). The message changed no state;
  the round goes on without it. Maps to INVALID_ARGUMENT (or UNAUTHENTICATED for
  :attr:`Violation.BAD_SIGNATURE`).
* :class:`SecAggAbort` - the round (server side) or this device's participation (device side) is
  over. The server releases nothing; a device reveals nothing more. Carries a reason code.
* :class:`ReleaseEvidenceError` - the proof of contributors that travels with a released sum is
  malformed (the coordinator refuses to trust its count).
"""

from __future__ import annotations

from enum import StrEnum

from fedhh.errors import ConfigError, FedhhError

__all__ = [
    "AbortReason",
    "InvalidReport",
    "ProtocolViolation",
    "ReleaseEvidenceError",
    "SecAggAbort",
    "SecAggConfigError",
    "SecAggError",
    "Violation",
]


class SecAggError(FedhhError):
    """Base class of every secure-aggregation error."""


class SecAggConfigError(SecAggError, ConfigError):
    """A protocol parameter or round config is out of range; the message names the value."""


class InvalidReport(SecAggError, ValueError):
    """A device was handed a report that is not a 0/1 vector of the round's dimension.

    Raised before anything is computed or sent; the device's state is unchanged.
    """


class AbortReason(StrEnum):
    """Why a round (server) or a device's participation (device) was aborted."""

    # Server side.
    TOO_FEW_DEVICES = "too_few_devices"  # a stage ended with fewer than n_min devices
    TOO_FEW_SHARE_HOLDERS = "too_few_share_holders"  # some secret can no longer reach t shares
    TOO_FEW_SHARES = "too_few_shares"  # unmasking ended with < t shares of a needed secret
    CORRUPT_SHARE = "corrupt_share"  # a reconstructed secret fails its key or commitment check
    OUTPUT_OUT_OF_RANGE = "output_out_of_range"  # a coordinate of the sum exceeds |U3|
    # U3 splits the neighbour graph: unmasking would reveal the sum of each part.
    SURVIVORS_DISCONNECTED = "survivors_disconnected"
    CANCELLED = "cancelled"  # the service aborted the round (e.g. coordinator cancel)
    # Device side (the server misbehaved, or the config is unacceptable).
    BAD_CONFIG = "bad_config"  # bad coordinator signature, or below this device's policy floors
    WRONG_SESSION = "wrong_session"  # a request for another round or another device
    WRONG_STATE = "wrong_state"  # a request out of order (e.g. unmask before masked input)
    REPEATED_REQUEST = "repeated_request"  # a second, different request for the same stage
    KEY_ALTERED = "key_altered"  # the server changed this device's own advertised keys
    BAD_KEY = "bad_key"  # malformed or low-order public key
    DUPLICATE_KEY = "duplicate_key"  # two roster entries share a public key
    BAD_SIGNATURE = "bad_signature"  # an admission (key commitment) or a signature does not verify
    UNEXPECTED_NEIGHBOUR = "unexpected_neighbour"  # an id that the committed graph does not allow
    TOO_FEW_NEIGHBOURS = "too_few_neighbours"  # fewer than t neighbours / partners / alive
    DECRYPTION_FAILED = "decryption_failed"  # a share ciphertext fails AEAD or has wrong ids
    MALFORMED = "malformed"  # a field of a server message has the wrong type or length
    INCONSISTENT_LISTS = "inconsistent_lists"  # alive/dropped overlap, or disagree with U3
    LISTED_AS_DROPPED = "listed_as_dropped"  # this device appears in its own unmask lists
    FOREIGN_ID = "foreign_id"  # an unmask list names a device that is not a mask partner
    REPORT_CHANGED = "report_changed"  # a retried masked-input call with a different report


class SecAggAbort(SecAggError):
    """The round, or this device's part in it, is aborted; nothing further is released."""

    def __init__(self, reason: AbortReason, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"secagg aborted ({reason.value}){': ' + detail if detail else ''}")


class Violation(StrEnum):
    """Why the server rejected one message."""

    WRONG_SESSION = "wrong_session"  # session_id of another round (cross-round replay)
    UNKNOWN_DEVICE = "unknown_device"  # device_id outside the round's cohort
    NOT_IN_ROUND = "not_in_round"  # the device dropped out of (or never reached) this stage
    EARLY = "early"  # the stage this message belongs to has not started
    LATE = "late"  # the stage this message belongs to has closed
    DUPLICATE = "duplicate"  # a different second message for the same (device, stage)
    WRONG_LENGTH = "wrong_length"  # a field or vector of the wrong length
    OUT_OF_RANGE = "out_of_range"  # a value outside its range (vector entry >= R, share >= p)
    MALFORMED = "malformed"  # wrong types, wrong recipients, missing or extra entries
    BAD_KEY = "bad_key"  # low-order public key, or both keys equal
    DUPLICATE_KEY = "duplicate_key"  # public key already advertised by another device
    BAD_SIGNATURE = "bad_signature"  # admission (key commitment) or signature missing or invalid


class ProtocolViolation(SecAggError, ValueError):
    """The server rejected one message; no state changed."""

    def __init__(self, reason: Violation, detail: str = "") -> None:
        self.reason = reason
        self.detail = detail
        super().__init__(f"message rejected ({reason.value}){': ' + detail if detail else ''}")


class ReleaseEvidenceError(SecAggError, ValueError):
    """The evidence of a release (survivors, their signatures, the claimed count) is malformed:
    ids out of range or repeated, more survivors than the cohort, a signer outside the survivors,
    or a claimed count that is not the number of survivors. The message names the value."""
