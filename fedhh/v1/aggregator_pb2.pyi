from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class SecAggStage(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SECAGG_STAGE_UNSPECIFIED: _ClassVar[SecAggStage]
    SECAGG_STAGE_ADVERTISE_KEYS: _ClassVar[SecAggStage]
    SECAGG_STAGE_SHARE_KEYS: _ClassVar[SecAggStage]
    SECAGG_STAGE_MASKED_INPUT: _ClassVar[SecAggStage]
    SECAGG_STAGE_CONSISTENCY_CHECK: _ClassVar[SecAggStage]
    SECAGG_STAGE_UNMASK: _ClassVar[SecAggStage]
    SECAGG_STAGE_DONE: _ClassVar[SecAggStage]

class AwaitStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AWAIT_STATUS_UNSPECIFIED: _ClassVar[AwaitStatus]
    AWAIT_STATUS_READY: _ClassVar[AwaitStatus]
    AWAIT_STATUS_PENDING: _ClassVar[AwaitStatus]
    AWAIT_STATUS_NOT_SELECTED: _ClassVar[AwaitStatus]
    AWAIT_STATUS_CLOSED: _ClassVar[AwaitStatus]
    AWAIT_STATUS_ABORTED: _ClassVar[AwaitStatus]

class AggregationState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AGGREGATION_STATE_UNSPECIFIED: _ClassVar[AggregationState]
    AGGREGATION_STATE_RUNNING: _ClassVar[AggregationState]
    AGGREGATION_STATE_RELEASED: _ClassVar[AggregationState]
    AGGREGATION_STATE_ABORTED: _ClassVar[AggregationState]

class OutcomeState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_STATE_UNSPECIFIED: _ClassVar[OutcomeState]
    OUTCOME_STATE_UNKNOWN: _ClassVar[OutcomeState]
    OUTCOME_STATE_RUNNING: _ClassVar[OutcomeState]
    OUTCOME_STATE_ABORTED: _ClassVar[OutcomeState]
    OUTCOME_STATE_RELEASED: _ClassVar[OutcomeState]
SECAGG_STAGE_UNSPECIFIED: SecAggStage
SECAGG_STAGE_ADVERTISE_KEYS: SecAggStage
SECAGG_STAGE_SHARE_KEYS: SecAggStage
SECAGG_STAGE_MASKED_INPUT: SecAggStage
SECAGG_STAGE_CONSISTENCY_CHECK: SecAggStage
SECAGG_STAGE_UNMASK: SecAggStage
SECAGG_STAGE_DONE: SecAggStage
AWAIT_STATUS_UNSPECIFIED: AwaitStatus
AWAIT_STATUS_READY: AwaitStatus
AWAIT_STATUS_PENDING: AwaitStatus
AWAIT_STATUS_NOT_SELECTED: AwaitStatus
AWAIT_STATUS_CLOSED: AwaitStatus
AWAIT_STATUS_ABORTED: AwaitStatus
AGGREGATION_STATE_UNSPECIFIED: AggregationState
AGGREGATION_STATE_RUNNING: AggregationState
AGGREGATION_STATE_RELEASED: AggregationState
AGGREGATION_STATE_ABORTED: AggregationState
OUTCOME_STATE_UNSPECIFIED: OutcomeState
OUTCOME_STATE_UNKNOWN: OutcomeState
OUTCOME_STATE_RUNNING: OutcomeState
OUTCOME_STATE_ABORTED: OutcomeState
OUTCOME_STATE_RELEASED: OutcomeState

class SecAggAdmission(_message.Message):
    __slots__ = ("device_id", "identity_key", "proof", "c_pk", "s_pk")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_KEY_FIELD_NUMBER: _ClassVar[int]
    PROOF_FIELD_NUMBER: _ClassVar[int]
    C_PK_FIELD_NUMBER: _ClassVar[int]
    S_PK_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    identity_key: bytes
    proof: bytes
    c_pk: bytes
    s_pk: bytes
    def __init__(self, device_id: _Optional[int] = ..., identity_key: _Optional[bytes] = ..., proof: _Optional[bytes] = ..., c_pk: _Optional[bytes] = ..., s_pk: _Optional[bytes] = ...) -> None: ...

class DeviceCredentials(_message.Message):
    __slots__ = ("admission", "signature")
    ADMISSION_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    admission: SecAggAdmission
    signature: bytes
    def __init__(self, admission: _Optional[_Union[SecAggAdmission, _Mapping]] = ..., signature: _Optional[bytes] = ...) -> None: ...

class DeviceKeys(_message.Message):
    __slots__ = ("device_id", "c_pk", "s_pk", "admission")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    C_PK_FIELD_NUMBER: _ClassVar[int]
    S_PK_FIELD_NUMBER: _ClassVar[int]
    ADMISSION_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    c_pk: bytes
    s_pk: bytes
    admission: SecAggAdmission
    def __init__(self, device_id: _Optional[int] = ..., c_pk: _Optional[bytes] = ..., s_pk: _Optional[bytes] = ..., admission: _Optional[_Union[SecAggAdmission, _Mapping]] = ...) -> None: ...

class EncryptedShare(_message.Message):
    __slots__ = ("src", "dst", "ciphertext")
    SRC_FIELD_NUMBER: _ClassVar[int]
    DST_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXT_FIELD_NUMBER: _ClassVar[int]
    src: int
    dst: int
    ciphertext: bytes
    def __init__(self, src: _Optional[int] = ..., dst: _Optional[int] = ..., ciphertext: _Optional[bytes] = ...) -> None: ...

class OwnerShare(_message.Message):
    __slots__ = ("owner", "share")
    OWNER_FIELD_NUMBER: _ClassVar[int]
    SHARE_FIELD_NUMBER: _ClassVar[int]
    owner: int
    share: bytes
    def __init__(self, owner: _Optional[int] = ..., share: _Optional[bytes] = ...) -> None: ...

class NeighbourSignature(_message.Message):
    __slots__ = ("device_id", "signature")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    signature: bytes
    def __init__(self, device_id: _Optional[int] = ..., signature: _Optional[bytes] = ...) -> None: ...

class SubmitResponse(_message.Message):
    __slots__ = ("accepted", "next")
    ACCEPTED_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    accepted: bool
    next: AwaitStageResponse
    def __init__(self, accepted: _Optional[bool] = ..., next: _Optional[_Union[AwaitStageResponse, _Mapping]] = ...) -> None: ...

class AdvertiseKeysRequest(_message.Message):
    __slots__ = ("session_id", "keys", "wait_next_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    WAIT_NEXT_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    keys: DeviceKeys
    wait_next_ms: int
    def __init__(self, session_id: _Optional[bytes] = ..., keys: _Optional[_Union[DeviceKeys, _Mapping]] = ..., wait_next_ms: _Optional[int] = ...) -> None: ...

class DeclineRequest(_message.Message):
    __slots__ = ("session_id", "credentials")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    credentials: DeviceCredentials
    def __init__(self, session_id: _Optional[bytes] = ..., credentials: _Optional[_Union[DeviceCredentials, _Mapping]] = ...) -> None: ...

class AwaitStageRequest(_message.Message):
    __slots__ = ("session_id", "credentials", "stage", "wait_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    credentials: DeviceCredentials
    stage: SecAggStage
    wait_ms: int
    def __init__(self, session_id: _Optional[bytes] = ..., credentials: _Optional[_Union[DeviceCredentials, _Mapping]] = ..., stage: _Optional[_Union[SecAggStage, str]] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ShareKeysRequest(_message.Message):
    __slots__ = ("entries", "range_proof")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    RANGE_PROOF_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[RosterEntry]
    range_proof: bytes
    def __init__(self, entries: _Optional[_Iterable[_Union[RosterEntry, _Mapping]]] = ..., range_proof: _Optional[bytes] = ...) -> None: ...

class RosterEntry(_message.Message):
    __slots__ = ("device_id", "identity_key", "c_pk", "s_pk")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_KEY_FIELD_NUMBER: _ClassVar[int]
    C_PK_FIELD_NUMBER: _ClassVar[int]
    S_PK_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    identity_key: bytes
    c_pk: bytes
    s_pk: bytes
    def __init__(self, device_id: _Optional[int] = ..., identity_key: _Optional[bytes] = ..., c_pk: _Optional[bytes] = ..., s_pk: _Optional[bytes] = ...) -> None: ...

class MaskedInputRequest(_message.Message):
    __slots__ = ("shares", "srcs", "ciphertexts")
    SHARES_FIELD_NUMBER: _ClassVar[int]
    SRCS_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    shares: _containers.RepeatedCompositeFieldContainer[EncryptedShare]
    srcs: _containers.RepeatedScalarFieldContainer[int]
    ciphertexts: bytes
    def __init__(self, shares: _Optional[_Iterable[_Union[EncryptedShare, _Mapping]]] = ..., srcs: _Optional[_Iterable[int]] = ..., ciphertexts: _Optional[bytes] = ...) -> None: ...

class ConsistencyRequest(_message.Message):
    __slots__ = ("survivors", "survivor_bits")
    SURVIVORS_FIELD_NUMBER: _ClassVar[int]
    SURVIVOR_BITS_FIELD_NUMBER: _ClassVar[int]
    survivors: _containers.RepeatedScalarFieldContainer[int]
    survivor_bits: bytes
    def __init__(self, survivors: _Optional[_Iterable[int]] = ..., survivor_bits: _Optional[bytes] = ...) -> None: ...

class UnmaskRequest(_message.Message):
    __slots__ = ("alive", "dropped", "signatures")
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    DROPPED_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    alive: _containers.RepeatedScalarFieldContainer[int]
    dropped: _containers.RepeatedScalarFieldContainer[int]
    signatures: _containers.RepeatedCompositeFieldContainer[NeighbourSignature]
    def __init__(self, alive: _Optional[_Iterable[int]] = ..., dropped: _Optional[_Iterable[int]] = ..., signatures: _Optional[_Iterable[_Union[NeighbourSignature, _Mapping]]] = ...) -> None: ...

class AwaitStageResponse(_message.Message):
    __slots__ = ("status", "share_keys", "masked_input", "consistency_check", "unmask", "abort_reason")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEYS_FIELD_NUMBER: _ClassVar[int]
    MASKED_INPUT_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_CHECK_FIELD_NUMBER: _ClassVar[int]
    UNMASK_FIELD_NUMBER: _ClassVar[int]
    ABORT_REASON_FIELD_NUMBER: _ClassVar[int]
    status: AwaitStatus
    share_keys: ShareKeysRequest
    masked_input: MaskedInputRequest
    consistency_check: ConsistencyRequest
    unmask: UnmaskRequest
    abort_reason: str
    def __init__(self, status: _Optional[_Union[AwaitStatus, str]] = ..., share_keys: _Optional[_Union[ShareKeysRequest, _Mapping]] = ..., masked_input: _Optional[_Union[MaskedInputRequest, _Mapping]] = ..., consistency_check: _Optional[_Union[ConsistencyRequest, _Mapping]] = ..., unmask: _Optional[_Union[UnmaskRequest, _Mapping]] = ..., abort_reason: _Optional[str] = ...) -> None: ...

class SubmitSharesRequest(_message.Message):
    __slots__ = ("session_id", "credentials", "shares", "b_commitment", "wait_next_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    SHARES_FIELD_NUMBER: _ClassVar[int]
    B_COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    WAIT_NEXT_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    credentials: DeviceCredentials
    shares: _containers.RepeatedCompositeFieldContainer[EncryptedShare]
    b_commitment: bytes
    wait_next_ms: int
    def __init__(self, session_id: _Optional[bytes] = ..., credentials: _Optional[_Union[DeviceCredentials, _Mapping]] = ..., shares: _Optional[_Iterable[_Union[EncryptedShare, _Mapping]]] = ..., b_commitment: _Optional[bytes] = ..., wait_next_ms: _Optional[int] = ...) -> None: ...

class MaskedInputHeader(_message.Message):
    __slots__ = ("session_id", "credentials", "total_bytes", "wait_next_ms", "vector_sha256")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    WAIT_NEXT_MS_FIELD_NUMBER: _ClassVar[int]
    VECTOR_SHA256_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    credentials: DeviceCredentials
    total_bytes: int
    wait_next_ms: int
    vector_sha256: bytes
    def __init__(self, session_id: _Optional[bytes] = ..., credentials: _Optional[_Union[DeviceCredentials, _Mapping]] = ..., total_bytes: _Optional[int] = ..., wait_next_ms: _Optional[int] = ..., vector_sha256: _Optional[bytes] = ...) -> None: ...

class MaskedInputChunk(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: MaskedInputHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[MaskedInputHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class MaskedVector(_message.Message):
    __slots__ = ("header", "data")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    header: MaskedInputHeader
    data: bytes
    def __init__(self, header: _Optional[_Union[MaskedInputHeader, _Mapping]] = ..., data: _Optional[bytes] = ...) -> None: ...

class SubmitConsistencyRequest(_message.Message):
    __slots__ = ("session_id", "credentials", "signature", "wait_next_ms")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    WAIT_NEXT_MS_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    credentials: DeviceCredentials
    signature: bytes
    wait_next_ms: int
    def __init__(self, session_id: _Optional[bytes] = ..., credentials: _Optional[_Union[DeviceCredentials, _Mapping]] = ..., signature: _Optional[bytes] = ..., wait_next_ms: _Optional[int] = ...) -> None: ...

class SubmitUnmaskRequest(_message.Message):
    __slots__ = ("session_id", "credentials", "b_shares", "s_shares")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREDENTIALS_FIELD_NUMBER: _ClassVar[int]
    B_SHARES_FIELD_NUMBER: _ClassVar[int]
    S_SHARES_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    credentials: DeviceCredentials
    b_shares: _containers.RepeatedCompositeFieldContainer[OwnerShare]
    s_shares: _containers.RepeatedCompositeFieldContainer[OwnerShare]
    def __init__(self, session_id: _Optional[bytes] = ..., credentials: _Optional[_Union[DeviceCredentials, _Mapping]] = ..., b_shares: _Optional[_Iterable[_Union[OwnerShare, _Mapping]]] = ..., s_shares: _Optional[_Iterable[_Union[OwnerShare, _Mapping]]] = ...) -> None: ...

class SessionOpen(_message.Message):
    __slots__ = ("session_id", "admission", "signature", "advertise", "unmask_in_status", "packed_requests", "survivor_bits")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    ADMISSION_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_FIELD_NUMBER: _ClassVar[int]
    UNMASK_IN_STATUS_FIELD_NUMBER: _ClassVar[int]
    PACKED_REQUESTS_FIELD_NUMBER: _ClassVar[int]
    SURVIVOR_BITS_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    admission: SecAggAdmission
    signature: bytes
    advertise: bool
    unmask_in_status: bool
    packed_requests: bool
    survivor_bits: bool
    def __init__(self, session_id: _Optional[bytes] = ..., admission: _Optional[_Union[SecAggAdmission, _Mapping]] = ..., signature: _Optional[bytes] = ..., advertise: _Optional[bool] = ..., unmask_in_status: _Optional[bool] = ..., packed_requests: _Optional[bool] = ..., survivor_bits: _Optional[bool] = ...) -> None: ...

class SessionShares(_message.Message):
    __slots__ = ("shares", "b_commitment", "dsts", "ciphertexts")
    SHARES_FIELD_NUMBER: _ClassVar[int]
    B_COMMITMENT_FIELD_NUMBER: _ClassVar[int]
    DSTS_FIELD_NUMBER: _ClassVar[int]
    CIPHERTEXTS_FIELD_NUMBER: _ClassVar[int]
    shares: _containers.RepeatedCompositeFieldContainer[EncryptedShare]
    b_commitment: bytes
    dsts: _containers.RepeatedScalarFieldContainer[int]
    ciphertexts: bytes
    def __init__(self, shares: _Optional[_Iterable[_Union[EncryptedShare, _Mapping]]] = ..., b_commitment: _Optional[bytes] = ..., dsts: _Optional[_Iterable[int]] = ..., ciphertexts: _Optional[bytes] = ...) -> None: ...

class SessionVector(_message.Message):
    __slots__ = ("total_bytes", "vector_sha256", "data")
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    VECTOR_SHA256_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    total_bytes: int
    vector_sha256: bytes
    data: bytes
    def __init__(self, total_bytes: _Optional[int] = ..., vector_sha256: _Optional[bytes] = ..., data: _Optional[bytes] = ...) -> None: ...

class SessionUnmask(_message.Message):
    __slots__ = ("b_shares", "s_shares", "b_owners", "b_values", "s_owners", "s_values")
    B_SHARES_FIELD_NUMBER: _ClassVar[int]
    S_SHARES_FIELD_NUMBER: _ClassVar[int]
    B_OWNERS_FIELD_NUMBER: _ClassVar[int]
    B_VALUES_FIELD_NUMBER: _ClassVar[int]
    S_OWNERS_FIELD_NUMBER: _ClassVar[int]
    S_VALUES_FIELD_NUMBER: _ClassVar[int]
    b_shares: _containers.RepeatedCompositeFieldContainer[OwnerShare]
    s_shares: _containers.RepeatedCompositeFieldContainer[OwnerShare]
    b_owners: _containers.RepeatedScalarFieldContainer[int]
    b_values: bytes
    s_owners: _containers.RepeatedScalarFieldContainer[int]
    s_values: bytes
    def __init__(self, b_shares: _Optional[_Iterable[_Union[OwnerShare, _Mapping]]] = ..., s_shares: _Optional[_Iterable[_Union[OwnerShare, _Mapping]]] = ..., b_owners: _Optional[_Iterable[int]] = ..., b_values: _Optional[bytes] = ..., s_owners: _Optional[_Iterable[int]] = ..., s_values: _Optional[bytes] = ...) -> None: ...

class SessionMessage(_message.Message):
    __slots__ = ("open", "keys", "shares", "masked_vector", "vector_data", "consistency_signature", "unmask", "resent")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    KEYS_FIELD_NUMBER: _ClassVar[int]
    SHARES_FIELD_NUMBER: _ClassVar[int]
    MASKED_VECTOR_FIELD_NUMBER: _ClassVar[int]
    VECTOR_DATA_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    UNMASK_FIELD_NUMBER: _ClassVar[int]
    RESENT_FIELD_NUMBER: _ClassVar[int]
    open: SessionOpen
    keys: DeviceKeys
    shares: SessionShares
    masked_vector: SessionVector
    vector_data: bytes
    consistency_signature: bytes
    unmask: SessionUnmask
    resent: bool
    def __init__(self, open: _Optional[_Union[SessionOpen, _Mapping]] = ..., keys: _Optional[_Union[DeviceKeys, _Mapping]] = ..., shares: _Optional[_Union[SessionShares, _Mapping]] = ..., masked_vector: _Optional[_Union[SessionVector, _Mapping]] = ..., vector_data: _Optional[bytes] = ..., consistency_signature: _Optional[bytes] = ..., unmask: _Optional[_Union[SessionUnmask, _Mapping]] = ..., resent: _Optional[bool] = ...) -> None: ...

class SessionEvent(_message.Message):
    __slots__ = ("challenge", "next", "unmask", "refused", "stage", "keys_in_open", "packed_shares")
    CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIELD_NUMBER: _ClassVar[int]
    UNMASK_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    KEYS_IN_OPEN_FIELD_NUMBER: _ClassVar[int]
    PACKED_SHARES_FIELD_NUMBER: _ClassVar[int]
    challenge: bytes
    next: AwaitStageResponse
    unmask: SubmitResponse
    refused: SessionRefusal
    stage: SecAggStage
    keys_in_open: bool
    packed_shares: bool
    def __init__(self, challenge: _Optional[bytes] = ..., next: _Optional[_Union[AwaitStageResponse, _Mapping]] = ..., unmask: _Optional[_Union[SubmitResponse, _Mapping]] = ..., refused: _Optional[_Union[SessionRefusal, _Mapping]] = ..., stage: _Optional[_Union[SecAggStage, str]] = ..., keys_in_open: _Optional[bool] = ..., packed_shares: _Optional[bool] = ...) -> None: ...

class SessionRefusal(_message.Message):
    __slots__ = ("code", "details")
    CODE_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    code: int
    details: str
    def __init__(self, code: _Optional[int] = ..., details: _Optional[str] = ...) -> None: ...

class OpenRoundRequest(_message.Message):
    __slots__ = ("config", "signature")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    config: bytes
    signature: bytes
    def __init__(self, config: _Optional[bytes] = ..., signature: _Optional[bytes] = ...) -> None: ...

class OpenRoundResponse(_message.Message):
    __slots__ = ("session_id", "created")
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    session_id: bytes
    created: bool
    def __init__(self, session_id: _Optional[bytes] = ..., created: _Optional[bool] = ...) -> None: ...

class GetResultRequest(_message.Message):
    __slots__ = ("round_id", "wait_ms", "hold")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    HOLD_FIELD_NUMBER: _ClassVar[int]
    round_id: bytes
    wait_ms: int
    hold: bool
    def __init__(self, round_id: _Optional[bytes] = ..., wait_ms: _Optional[int] = ..., hold: _Optional[bool] = ...) -> None: ...

class ResultHeader(_message.Message):
    __slots__ = ("state", "round_id", "session_id", "num_contributors", "dimension", "modulus_bits", "total_bytes", "abort_reason", "reached_unmask", "survivor_count", "signature_count", "shards")
    STATE_FIELD_NUMBER: _ClassVar[int]
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    NUM_CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    DIMENSION_FIELD_NUMBER: _ClassVar[int]
    MODULUS_BITS_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    ABORT_REASON_FIELD_NUMBER: _ClassVar[int]
    REACHED_UNMASK_FIELD_NUMBER: _ClassVar[int]
    SURVIVOR_COUNT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_COUNT_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    state: AggregationState
    round_id: bytes
    session_id: bytes
    num_contributors: int
    dimension: int
    modulus_bits: int
    total_bytes: int
    abort_reason: str
    reached_unmask: bool
    survivor_count: int
    signature_count: int
    shards: _containers.RepeatedCompositeFieldContainer[ShardResult]
    def __init__(self, state: _Optional[_Union[AggregationState, str]] = ..., round_id: _Optional[bytes] = ..., session_id: _Optional[bytes] = ..., num_contributors: _Optional[int] = ..., dimension: _Optional[int] = ..., modulus_bits: _Optional[int] = ..., total_bytes: _Optional[int] = ..., abort_reason: _Optional[str] = ..., reached_unmask: _Optional[bool] = ..., survivor_count: _Optional[int] = ..., signature_count: _Optional[int] = ..., shards: _Optional[_Iterable[_Union[ShardResult, _Mapping]]] = ...) -> None: ...

class ShardResult(_message.Message):
    __slots__ = ("round_id", "state", "reached_unmask", "abort_reason", "num_contributors", "survivor_count", "signature_count")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REACHED_UNMASK_FIELD_NUMBER: _ClassVar[int]
    ABORT_REASON_FIELD_NUMBER: _ClassVar[int]
    NUM_CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    SURVIVOR_COUNT_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_COUNT_FIELD_NUMBER: _ClassVar[int]
    round_id: bytes
    state: AggregationState
    reached_unmask: bool
    abort_reason: str
    num_contributors: int
    survivor_count: int
    signature_count: int
    def __init__(self, round_id: _Optional[bytes] = ..., state: _Optional[_Union[AggregationState, str]] = ..., reached_unmask: _Optional[bool] = ..., abort_reason: _Optional[str] = ..., num_contributors: _Optional[int] = ..., survivor_count: _Optional[int] = ..., signature_count: _Optional[int] = ...) -> None: ...

class ReleaseEvidencePart(_message.Message):
    __slots__ = ("survivors", "signatures", "shard")
    SURVIVORS_FIELD_NUMBER: _ClassVar[int]
    SIGNATURES_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    survivors: _containers.RepeatedScalarFieldContainer[int]
    signatures: _containers.RepeatedCompositeFieldContainer[SurvivorSignature]
    shard: int
    def __init__(self, survivors: _Optional[_Iterable[int]] = ..., signatures: _Optional[_Iterable[_Union[SurvivorSignature, _Mapping]]] = ..., shard: _Optional[int] = ...) -> None: ...

class SurvivorSignature(_message.Message):
    __slots__ = ("device_id", "signature")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    signature: bytes
    def __init__(self, device_id: _Optional[int] = ..., signature: _Optional[bytes] = ...) -> None: ...

class ResultChunk(_message.Message):
    __slots__ = ("header", "data", "evidence")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    header: ResultHeader
    data: bytes
    evidence: ReleaseEvidencePart
    def __init__(self, header: _Optional[_Union[ResultHeader, _Mapping]] = ..., data: _Optional[bytes] = ..., evidence: _Optional[_Union[ReleaseEvidencePart, _Mapping]] = ...) -> None: ...

class GetOutcomeRequest(_message.Message):
    __slots__ = ("round_id", "seen", "wait_ms")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SEEN_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    round_id: bytes
    seen: OutcomeSeen
    wait_ms: int
    def __init__(self, round_id: _Optional[bytes] = ..., seen: _Optional[_Union[OutcomeSeen, _Mapping]] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class OutcomeSeen(_message.Message):
    __slots__ = ("state", "stage", "stage_devices")
    STATE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STAGE_DEVICES_FIELD_NUMBER: _ClassVar[int]
    state: OutcomeState
    stage: SecAggStage
    stage_devices: _containers.RepeatedCompositeFieldContainer[StageCount]
    def __init__(self, state: _Optional[_Union[OutcomeState, str]] = ..., stage: _Optional[_Union[SecAggStage, str]] = ..., stage_devices: _Optional[_Iterable[_Union[StageCount, _Mapping]]] = ...) -> None: ...

class GetOutcomeResponse(_message.Message):
    __slots__ = ("state", "session_id", "stage", "reached_unmask", "abort_reason", "delivered", "sum_available", "num_contributors", "durable", "stage_devices", "shards", "declined", "watched")
    STATE_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    REACHED_UNMASK_FIELD_NUMBER: _ClassVar[int]
    ABORT_REASON_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    SUM_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    NUM_CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    DURABLE_FIELD_NUMBER: _ClassVar[int]
    STAGE_DEVICES_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    WATCHED_FIELD_NUMBER: _ClassVar[int]
    state: OutcomeState
    session_id: bytes
    stage: SecAggStage
    reached_unmask: bool
    abort_reason: str
    delivered: bool
    sum_available: bool
    num_contributors: int
    durable: bool
    stage_devices: _containers.RepeatedCompositeFieldContainer[StageCount]
    shards: _containers.RepeatedCompositeFieldContainer[ShardOutcome]
    declined: int
    watched: bool
    def __init__(self, state: _Optional[_Union[OutcomeState, str]] = ..., session_id: _Optional[bytes] = ..., stage: _Optional[_Union[SecAggStage, str]] = ..., reached_unmask: _Optional[bool] = ..., abort_reason: _Optional[str] = ..., delivered: _Optional[bool] = ..., sum_available: _Optional[bool] = ..., num_contributors: _Optional[int] = ..., durable: _Optional[bool] = ..., stage_devices: _Optional[_Iterable[_Union[StageCount, _Mapping]]] = ..., shards: _Optional[_Iterable[_Union[ShardOutcome, _Mapping]]] = ..., declined: _Optional[int] = ..., watched: _Optional[bool] = ...) -> None: ...

class ShardOutcome(_message.Message):
    __slots__ = ("round_id", "worker", "state", "stage", "reached_unmask", "abort_reason", "num_contributors", "declined")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    REACHED_UNMASK_FIELD_NUMBER: _ClassVar[int]
    ABORT_REASON_FIELD_NUMBER: _ClassVar[int]
    NUM_CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    DECLINED_FIELD_NUMBER: _ClassVar[int]
    round_id: bytes
    worker: int
    state: OutcomeState
    stage: SecAggStage
    reached_unmask: bool
    abort_reason: str
    num_contributors: int
    declined: int
    def __init__(self, round_id: _Optional[bytes] = ..., worker: _Optional[int] = ..., state: _Optional[_Union[OutcomeState, str]] = ..., stage: _Optional[_Union[SecAggStage, str]] = ..., reached_unmask: _Optional[bool] = ..., abort_reason: _Optional[str] = ..., num_contributors: _Optional[int] = ..., declined: _Optional[int] = ...) -> None: ...

class StageCount(_message.Message):
    __slots__ = ("stage", "devices")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    stage: SecAggStage
    devices: int
    def __init__(self, stage: _Optional[_Union[SecAggStage, str]] = ..., devices: _Optional[int] = ...) -> None: ...

class CancelRoundRequest(_message.Message):
    __slots__ = ("round_id", "delivered")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    DELIVERED_FIELD_NUMBER: _ClassVar[int]
    round_id: bytes
    delivered: bool
    def __init__(self, round_id: _Optional[bytes] = ..., delivered: _Optional[bool] = ...) -> None: ...

class CancelRoundResponse(_message.Message):
    __slots__ = ("state",)
    STATE_FIELD_NUMBER: _ClassVar[int]
    state: AggregationState
    def __init__(self, state: _Optional[_Union[AggregationState, str]] = ...) -> None: ...

class DescribeWorkersRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DescribeWorkersResponse(_message.Message):
    __slots__ = ("workers",)
    WORKERS_FIELD_NUMBER: _ClassVar[int]
    workers: _containers.RepeatedCompositeFieldContainer[WorkerInfo]
    def __init__(self, workers: _Optional[_Iterable[_Union[WorkerInfo, _Mapping]]] = ...) -> None: ...

class WorkerInfo(_message.Message):
    __slots__ = ("index", "public_address", "serving", "web_url", "session_address")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    PUBLIC_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    WEB_URL_FIELD_NUMBER: _ClassVar[int]
    SESSION_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    index: int
    public_address: str
    serving: bool
    web_url: str
    session_address: str
    def __init__(self, index: _Optional[int] = ..., public_address: _Optional[str] = ..., serving: _Optional[bool] = ..., web_url: _Optional[str] = ..., session_address: _Optional[str] = ...) -> None: ...

class OpenShardedRoundRequest(_message.Message):
    __slots__ = ("round_id", "shards")
    ROUND_ID_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    round_id: bytes
    shards: _containers.RepeatedCompositeFieldContainer[ShardPlacement]
    def __init__(self, round_id: _Optional[bytes] = ..., shards: _Optional[_Iterable[_Union[ShardPlacement, _Mapping]]] = ...) -> None: ...

class ShardPlacement(_message.Message):
    __slots__ = ("config", "signature", "worker")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    WORKER_FIELD_NUMBER: _ClassVar[int]
    config: bytes
    signature: bytes
    worker: int
    def __init__(self, config: _Optional[bytes] = ..., signature: _Optional[bytes] = ..., worker: _Optional[int] = ...) -> None: ...

class OpenShardedRoundResponse(_message.Message):
    __slots__ = ("created", "session_ids")
    CREATED_FIELD_NUMBER: _ClassVar[int]
    SESSION_IDS_FIELD_NUMBER: _ClassVar[int]
    created: bool
    session_ids: _containers.RepeatedScalarFieldContainer[bytes]
    def __init__(self, created: _Optional[bool] = ..., session_ids: _Optional[_Iterable[bytes]] = ...) -> None: ...
