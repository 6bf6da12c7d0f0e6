"""SecAgg+ secure aggregation of 0/1 report vectors: primitives and pure state machines.

No network stack and no event loop: the aggregator service and the device process are thin
transports over :class:`SecAggServer` and :class:`SecAggDevice`, which exchange the frozen
dataclasses of :mod:`fedhh.secagg.messages`. See docs/secagg.md for the protocol as built.

``SecAggServer`` is imported on first use (PEP 562): a device process, which imports this
package for its own state machine, loads none of the server's (``tests/unit/test_layers.py``).
"""

from typing import TYPE_CHECKING

from fedhh.lazy import lazy_names
from fedhh.secagg.config import (
    Admission,
    IdentityTree,
    RoundConfig,
    SignedConfig,
    StageDeadlines,
    issue_admission,
    session_id_of,
    sign_config,
    verify_admission,
    verify_config,
)
from fedhh.secagg.device import (
    DevicePolicy,
    DeviceState,
    PublicChecks,
    RoundKeys,
    SecAggDevice,
)
from fedhh.secagg.errors import (
    AbortReason,
    InvalidReport,
    ProtocolViolation,
    ReleaseEvidenceError,
    SecAggAbort,
    SecAggConfigError,
    SecAggError,
    Violation,
)
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
    ReleaseEvidence,
    RingRun,
    ServerMessage,
    ShareBundle,
    ShareKeysRequest,
    ShareKeysResponse,
    Stage,
    UnmaskRequest,
    UnmaskResponse,
)
from fedhh.secagg.params import (
    DEVICES_CHECK,
    DevicesCheck,
    FailureBounds,
    SecAggParameters,
    Threat,
    choose_parameters,
    failure_bounds,
    modulus_bits_for,
)
from fedhh.secagg.prg import MaskGenerator
from fedhh.secagg.release import verify_release
from fedhh.secagg.report import check_report, indices_from_dense

__all__ = [
    "DEVICES_CHECK",
    "AbortReason",
    "Admission",
    "AdvertiseKeys",
    "AggregateResult",
    "ConsistencyRequest",
    "ConsistencyResponse",
    "Decline",
    "DeviceMessage",
    "DevicePolicy",
    "DeviceState",
    "DevicesCheck",
    "EncryptedShare",
    "FailureBounds",
    "IdentityTree",
    "InvalidReport",
    "MaskGenerator",
    "MaskedInput",
    "MaskedInputRequest",
    "OwnerShares",
    "ProtocolViolation",
    "PublicChecks",
    "ReleaseEvidence",
    "ReleaseEvidenceError",
    "RingRun",
    "RoundConfig",
    "RoundKeys",
    "SecAggAbort",
    "SecAggConfigError",
    "SecAggDevice",
    "SecAggError",
    "SecAggParameters",
    "SecAggServer",
    "ServerMessage",
    "ShareBundle",
    "ShareKeysRequest",
    "ShareKeysResponse",
    "SignedConfig",
    "Stage",
    "StageDeadlines",
    "Threat",
    "UnmaskRequest",
    "UnmaskResponse",
    "Violation",
    "check_report",
    "choose_parameters",
    "failure_bounds",
    "indices_from_dense",
    "issue_admission",
    "modulus_bits_for",
    "session_id_of",
    "sign_config",
    "verify_admission",
    "verify_config",
    "verify_release",
]

if TYPE_CHECKING:
    from fedhh.secagg.server import SecAggServer

__getattr__, __dir__ = lazy_names(__name__, {"SecAggServer": "server"}, globals())
