from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class EnrollRequest(_message.Message):
    __slots__ = ("enrollment_token", "identity_public_key", "label", "attestation", "enrollment_signature")
    ENROLLMENT_TOKEN_FIELD_NUMBER: _ClassVar[int]
    IDENTITY_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    ATTESTATION_FIELD_NUMBER: _ClassVar[int]
    ENROLLMENT_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    enrollment_token: bytes
    identity_public_key: bytes
    label: str
    attestation: bytes
    enrollment_signature: bytes
    def __init__(self, enrollment_token: _Optional[bytes] = ..., identity_public_key: _Optional[bytes] = ..., label: _Optional[str] = ..., attestation: _Optional[bytes] = ..., enrollment_signature: _Optional[bytes] = ...) -> None: ...

class EnrollResponse(_message.Message):
    __slots__ = ("device_id", "credential", "coordinator_public_key")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    CREDENTIAL_FIELD_NUMBER: _ClassVar[int]
    COORDINATOR_PUBLIC_KEY_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    credential: bytes
    coordinator_public_key: bytes
    def __init__(self, device_id: _Optional[int] = ..., credential: _Optional[bytes] = ..., coordinator_public_key: _Optional[bytes] = ...) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("device_id", "wait_ms", "known_task", "c_pk", "s_pk")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_TASK_FIELD_NUMBER: _ClassVar[int]
    C_PK_FIELD_NUMBER: _ClassVar[int]
    S_PK_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    wait_ms: int
    known_task: bytes
    c_pk: bytes
    s_pk: bytes
    def __init__(self, device_id: _Optional[int] = ..., wait_ms: _Optional[int] = ..., known_task: _Optional[bytes] = ..., c_pk: _Optional[bytes] = ..., s_pk: _Optional[bytes] = ...) -> None: ...

class GetTaskResponse(_message.Message):
    __slots__ = ("task", "retry_after_ms")
    TASK_FIELD_NUMBER: _ClassVar[int]
    RETRY_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    task: SignedTask
    retry_after_ms: int
    def __init__(self, task: _Optional[_Union[SignedTask, _Mapping]] = ..., retry_after_ms: _Optional[int] = ...) -> None: ...

class SignedTask(_message.Message):
    __slots__ = ("task", "shared_signature", "shared_length")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SHARED_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    SHARED_LENGTH_FIELD_NUMBER: _ClassVar[int]
    task: bytes
    shared_signature: bytes
    shared_length: int
    def __init__(self, task: _Optional[bytes] = ..., shared_signature: _Optional[bytes] = ..., shared_length: _Optional[int] = ...) -> None: ...

class Task(_message.Message):
    __slots__ = ("run_id", "round", "attempt", "device_id", "prefix_bits", "prefixes", "deny_list", "segment_bits", "eps_local", "codec", "max_bits", "selection", "prefix_conditioning", "aggregator_address", "round_config", "secagg_id", "admission", "deadline_unix_ms", "round_config_signature", "aggregator_web_url", "aggregator_session_address")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    PREFIX_BITS_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    DENY_LIST_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BITS_FIELD_NUMBER: _ClassVar[int]
    EPS_LOCAL_FIELD_NUMBER: _ClassVar[int]
    CODEC_FIELD_NUMBER: _ClassVar[int]
    MAX_BITS_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CONDITIONING_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    ROUND_CONFIG_FIELD_NUMBER: _ClassVar[int]
    SECAGG_ID_FIELD_NUMBER: _ClassVar[int]
    ADMISSION_FIELD_NUMBER: _ClassVar[int]
    DEADLINE_UNIX_MS_FIELD_NUMBER: _ClassVar[int]
    ROUND_CONFIG_SIGNATURE_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_WEB_URL_FIELD_NUMBER: _ClassVar[int]
    AGGREGATOR_SESSION_ADDRESS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    round: int
    attempt: int
    device_id: int
    prefix_bits: int
    prefixes: _containers.RepeatedScalarFieldContainer[int]
    deny_list: _containers.RepeatedScalarFieldContainer[int]
    segment_bits: int
    eps_local: float
    codec: str
    max_bits: int
    selection: str
    prefix_conditioning: bool
    aggregator_address: str
    round_config: bytes
    secagg_id: int
    admission: bytes
    deadline_unix_ms: int
    round_config_signature: bytes
    aggregator_web_url: str
    aggregator_session_address: str
    def __init__(self, run_id: _Optional[str] = ..., round: _Optional[int] = ..., attempt: _Optional[int] = ..., device_id: _Optional[int] = ..., prefix_bits: _Optional[int] = ..., prefixes: _Optional[_Iterable[int]] = ..., deny_list: _Optional[_Iterable[int]] = ..., segment_bits: _Optional[int] = ..., eps_local: _Optional[float] = ..., codec: _Optional[str] = ..., max_bits: _Optional[int] = ..., selection: _Optional[str] = ..., prefix_conditioning: _Optional[bool] = ..., aggregator_address: _Optional[str] = ..., round_config: _Optional[bytes] = ..., secagg_id: _Optional[int] = ..., admission: _Optional[bytes] = ..., deadline_unix_ms: _Optional[int] = ..., round_config_signature: _Optional[bytes] = ..., aggregator_web_url: _Optional[str] = ..., aggregator_session_address: _Optional[str] = ...) -> None: ...

class GetEnrollmentRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Enrollment(_message.Message):
    __slots__ = ("devices_enrolled", "last_enrolled_at", "tokens_unused", "tokens_used", "tokens_expired")
    DEVICES_ENROLLED_FIELD_NUMBER: _ClassVar[int]
    LAST_ENROLLED_AT_FIELD_NUMBER: _ClassVar[int]
    TOKENS_UNUSED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_USED_FIELD_NUMBER: _ClassVar[int]
    TOKENS_EXPIRED_FIELD_NUMBER: _ClassVar[int]
    devices_enrolled: int
    last_enrolled_at: float
    tokens_unused: int
    tokens_used: int
    tokens_expired: int
    def __init__(self, devices_enrolled: _Optional[int] = ..., last_enrolled_at: _Optional[float] = ..., tokens_unused: _Optional[int] = ..., tokens_used: _Optional[int] = ..., tokens_expired: _Optional[int] = ...) -> None: ...

class MintEnrollmentTokensRequest(_message.Message):
    __slots__ = ("count", "ttl_s", "label", "request_id")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    TTL_S_FIELD_NUMBER: _ClassVar[int]
    LABEL_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    count: int
    ttl_s: float
    label: str
    request_id: str
    def __init__(self, count: _Optional[int] = ..., ttl_s: _Optional[float] = ..., label: _Optional[str] = ..., request_id: _Optional[str] = ...) -> None: ...

class MintEnrollmentTokensResponse(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, tokens: _Optional[_Iterable[str]] = ...) -> None: ...

class RunConfig(_message.Message):
    __slots__ = ("eps_agg", "delta", "rounds", "dim_limit", "target_devices", "min_devices", "codec", "max_bits", "selection", "prefix_conditioning", "deny_list", "fp_ratio", "tau0", "eta", "tail", "segment_bits", "eps_local", "privacy_method", "checkin_ms", "stage_ms", "expected_dropout", "corrupt_fraction", "max_attempts", "fp_ratio_of", "advertise_ms", "share_keys_ms", "masked_input_ms", "unmask_ms", "consistency_ms", "warm_start", "algorithm", "checkin_quiet_ms", "oversubscription", "max_eps_local", "shard_size", "completion_rounds", "completion_weight", "fp_ratio_finished")
    EPS_AGG_FIELD_NUMBER: _ClassVar[int]
    DELTA_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    DIM_LIMIT_FIELD_NUMBER: _ClassVar[int]
    TARGET_DEVICES_FIELD_NUMBER: _ClassVar[int]
    MIN_DEVICES_FIELD_NUMBER: _ClassVar[int]
    CODEC_FIELD_NUMBER: _ClassVar[int]
    MAX_BITS_FIELD_NUMBER: _ClassVar[int]
    SELECTION_FIELD_NUMBER: _ClassVar[int]
    PREFIX_CONDITIONING_FIELD_NUMBER: _ClassVar[int]
    DENY_LIST_FIELD_NUMBER: _ClassVar[int]
    FP_RATIO_FIELD_NUMBER: _ClassVar[int]
    TAU0_FIELD_NUMBER: _ClassVar[int]
    ETA_FIELD_NUMBER: _ClassVar[int]
    TAIL_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BITS_FIELD_NUMBER: _ClassVar[int]
    EPS_LOCAL_FIELD_NUMBER: _ClassVar[int]
    PRIVACY_METHOD_FIELD_NUMBER: _ClassVar[int]
    CHECKIN_MS_FIELD_NUMBER: _ClassVar[int]
    STAGE_MS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_DROPOUT_FIELD_NUMBER: _ClassVar[int]
    CORRUPT_FRACTION_FIELD_NUMBER: _ClassVar[int]
    MAX_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    FP_RATIO_OF_FIELD_NUMBER: _ClassVar[int]
    ADVERTISE_MS_FIELD_NUMBER: _ClassVar[int]
    SHARE_KEYS_MS_FIELD_NUMBER: _ClassVar[int]
    MASKED_INPUT_MS_FIELD_NUMBER: _ClassVar[int]
    UNMASK_MS_FIELD_NUMBER: _ClassVar[int]
    CONSISTENCY_MS_FIELD_NUMBER: _ClassVar[int]
    WARM_START_FIELD_NUMBER: _ClassVar[int]
    ALGORITHM_FIELD_NUMBER: _ClassVar[int]
    CHECKIN_QUIET_MS_FIELD_NUMBER: _ClassVar[int]
    OVERSUBSCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MAX_EPS_LOCAL_FIELD_NUMBER: _ClassVar[int]
    SHARD_SIZE_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_ROUNDS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    FP_RATIO_FINISHED_FIELD_NUMBER: _ClassVar[int]
    eps_agg: float
    delta: float
    rounds: int
    dim_limit: int
    target_devices: int
    min_devices: int
    codec: str
    max_bits: int
    selection: str
    prefix_conditioning: bool
    deny_list: _containers.RepeatedScalarFieldContainer[str]
    fp_ratio: float
    tau0: float
    eta: float
    tail: str
    segment_bits: int
    eps_local: float
    privacy_method: str
    checkin_ms: int
    stage_ms: int
    expected_dropout: float
    corrupt_fraction: float
    max_attempts: int
    fp_ratio_of: str
    advertise_ms: int
    share_keys_ms: int
    masked_input_ms: int
    unmask_ms: int
    consistency_ms: int
    warm_start: bool
    algorithm: str
    checkin_quiet_ms: int
    oversubscription: float
    max_eps_local: float
    shard_size: int
    completion_rounds: int
    completion_weight: float
    fp_ratio_finished: float
    def __init__(self, eps_agg: _Optional[float] = ..., delta: _Optional[float] = ..., rounds: _Optional[int] = ..., dim_limit: _Optional[int] = ..., target_devices: _Optional[int] = ..., min_devices: _Optional[int] = ..., codec: _Optional[str] = ..., max_bits: _Optional[int] = ..., selection: _Optional[str] = ..., prefix_conditioning: _Optional[bool] = ..., deny_list: _Optional[_Iterable[str]] = ..., fp_ratio: _Optional[float] = ..., tau0: _Optional[float] = ..., eta: _Optional[float] = ..., tail: _Optional[str] = ..., segment_bits: _Optional[int] = ..., eps_local: _Optional[float] = ..., privacy_method: _Optional[str] = ..., checkin_ms: _Optional[int] = ..., stage_ms: _Optional[int] = ..., expected_dropout: _Optional[float] = ..., corrupt_fraction: _Optional[float] = ..., max_attempts: _Optional[int] = ..., fp_ratio_of: _Optional[str] = ..., advertise_ms: _Optional[int] = ..., share_keys_ms: _Optional[int] = ..., masked_input_ms: _Optional[int] = ..., unmask_ms: _Optional[int] = ..., consistency_ms: _Optional[int] = ..., warm_start: _Optional[bool] = ..., algorithm: _Optional[str] = ..., checkin_quiet_ms: _Optional[int] = ..., oversubscription: _Optional[float] = ..., max_eps_local: _Optional[float] = ..., shard_size: _Optional[int] = ..., completion_rounds: _Optional[int] = ..., completion_weight: _Optional[float] = ..., fp_ratio_finished: _Optional[float] = ...) -> None: ...

class StartRunRequest(_message.Message):
    __slots__ = ("config", "run_id")
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    config: RunConfig
    run_id: str
    def __init__(self, config: _Optional[_Union[RunConfig, _Mapping]] = ..., run_id: _Optional[str] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id", "seen", "wait_ms")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SEEN_FIELD_NUMBER: _ClassVar[int]
    WAIT_MS_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    seen: str
    wait_ms: int
    def __init__(self, run_id: _Optional[str] = ..., seen: _Optional[str] = ..., wait_ms: _Optional[int] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListRunsResponse(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ...) -> None: ...

class GetResultsRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class RoundSummary(_message.Message):
    __slots__ = ("round", "attempt", "state", "reason", "participants", "prefixes", "segment_bits", "domain_size", "kept", "finished", "threshold", "expected_false_positives", "seconds", "cut", "trimmed", "contributors")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    PARTICIPANTS_FIELD_NUMBER: _ClassVar[int]
    PREFIXES_FIELD_NUMBER: _ClassVar[int]
    SEGMENT_BITS_FIELD_NUMBER: _ClassVar[int]
    DOMAIN_SIZE_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    THRESHOLD_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_FALSE_POSITIVES_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    CUT_FIELD_NUMBER: _ClassVar[int]
    TRIMMED_FIELD_NUMBER: _ClassVar[int]
    CONTRIBUTORS_FIELD_NUMBER: _ClassVar[int]
    round: int
    attempt: int
    state: str
    reason: str
    participants: int
    prefixes: int
    segment_bits: int
    domain_size: int
    kept: int
    finished: int
    threshold: float
    expected_false_positives: float
    seconds: float
    cut: int
    trimmed: int
    contributors: int
    def __init__(self, round: _Optional[int] = ..., attempt: _Optional[int] = ..., state: _Optional[str] = ..., reason: _Optional[str] = ..., participants: _Optional[int] = ..., prefixes: _Optional[int] = ..., segment_bits: _Optional[int] = ..., domain_size: _Optional[int] = ..., kept: _Optional[int] = ..., finished: _Optional[int] = ..., threshold: _Optional[float] = ..., expected_false_positives: _Optional[float] = ..., seconds: _Optional[float] = ..., cut: _Optional[int] = ..., trimmed: _Optional[int] = ..., contributors: _Optional[int] = ...) -> None: ...

class Progress(_message.Message):
    __slots__ = ("round", "attempt", "phase", "devices", "stage", "seconds")
    ROUND_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    PHASE_FIELD_NUMBER: _ClassVar[int]
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    round: int
    attempt: int
    phase: str
    devices: int
    stage: str
    seconds: float
    def __init__(self, round: _Optional[int] = ..., attempt: _Optional[int] = ..., phase: _Optional[str] = ..., devices: _Optional[int] = ..., stage: _Optional[str] = ..., seconds: _Optional[float] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "state", "config", "eps_local", "eps_spent", "rounds_released", "error", "rounds", "progress", "version")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CONFIG_FIELD_NUMBER: _ClassVar[int]
    EPS_LOCAL_FIELD_NUMBER: _ClassVar[int]
    EPS_SPENT_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_RELEASED_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    PROGRESS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    state: str
    config: RunConfig
    eps_local: float
    eps_spent: float
    rounds_released: int
    error: str
    rounds: _containers.RepeatedCompositeFieldContainer[RoundSummary]
    progress: Progress
    version: str
    def __init__(self, run_id: _Optional[str] = ..., state: _Optional[str] = ..., config: _Optional[_Union[RunConfig, _Mapping]] = ..., eps_local: _Optional[float] = ..., eps_spent: _Optional[float] = ..., rounds_released: _Optional[int] = ..., error: _Optional[str] = ..., rounds: _Optional[_Iterable[_Union[RoundSummary, _Mapping]]] = ..., progress: _Optional[_Union[Progress, _Mapping]] = ..., version: _Optional[str] = ...) -> None: ...

class HeavyHitter(_message.Message):
    __slots__ = ("item", "estimate", "round", "code", "code_bytes", "ended", "truncated", "note", "bits")
    ITEM_FIELD_NUMBER: _ClassVar[int]
    ESTIMATE_FIELD_NUMBER: _ClassVar[int]
    ROUND_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    CODE_BYTES_FIELD_NUMBER: _ClassVar[int]
    ENDED_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    BITS_FIELD_NUMBER: _ClassVar[int]
    item: str
    estimate: float
    round: int
    code: int
    code_bytes: bytes
    ended: bool
    truncated: bool
    note: str
    bits: int
    def __init__(self, item: _Optional[str] = ..., estimate: _Optional[float] = ..., round: _Optional[int] = ..., code: _Optional[int] = ..., code_bytes: _Optional[bytes] = ..., ended: _Optional[bool] = ..., truncated: _Optional[bool] = ..., note: _Optional[str] = ..., bits: _Optional[int] = ...) -> None: ...

class Results(_message.Message):
    __slots__ = ("run_id", "state", "heavy_hitters", "deny_list", "ledger_json", "rounds", "cut_prefixes")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    HEAVY_HITTERS_FIELD_NUMBER: _ClassVar[int]
    DENY_LIST_FIELD_NUMBER: _ClassVar[int]
    LEDGER_JSON_FIELD_NUMBER: _ClassVar[int]
    ROUNDS_FIELD_NUMBER: _ClassVar[int]
    CUT_PREFIXES_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    state: str
    heavy_hitters: _containers.RepeatedCompositeFieldContainer[HeavyHitter]
    deny_list: _containers.RepeatedScalarFieldContainer[str]
    ledger_json: str
    rounds: _containers.RepeatedCompositeFieldContainer[RoundSummary]
    cut_prefixes: _containers.RepeatedCompositeFieldContainer[HeavyHitter]
    def __init__(self, run_id: _Optional[str] = ..., state: _Optional[str] = ..., heavy_hitters: _Optional[_Iterable[_Union[HeavyHitter, _Mapping]]] = ..., deny_list: _Optional[_Iterable[str]] = ..., ledger_json: _Optional[str] = ..., rounds: _Optional[_Iterable[_Union[RoundSummary, _Mapping]]] = ..., cut_prefixes: _Optional[_Iterable[_Union[HeavyHitter, _Mapping]]] = ...) -> None: ...

class CheckIn(_message.Message):
    __slots__ = ("device_id", "c_pk", "s_pk")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    C_PK_FIELD_NUMBER: _ClassVar[int]
    S_PK_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    c_pk: bytes
    s_pk: bytes
    def __init__(self, device_id: _Optional[int] = ..., c_pk: _Optional[bytes] = ..., s_pk: _Optional[bytes] = ...) -> None: ...

class SelectorBatch(_message.Message):
    __slots__ = ("name", "checkin", "presented", "joined", "challenge")
    NAME_FIELD_NUMBER: _ClassVar[int]
    CHECKIN_FIELD_NUMBER: _ClassVar[int]
    PRESENTED_FIELD_NUMBER: _ClassVar[int]
    JOINED_FIELD_NUMBER: _ClassVar[int]
    CHALLENGE_FIELD_NUMBER: _ClassVar[int]
    name: str
    checkin: int
    presented: _containers.RepeatedCompositeFieldContainer[CheckIn]
    joined: _containers.RepeatedCompositeFieldContainer[CheckIn]
    challenge: bytes
    def __init__(self, name: _Optional[str] = ..., checkin: _Optional[int] = ..., presented: _Optional[_Iterable[_Union[CheckIn, _Mapping]]] = ..., joined: _Optional[_Iterable[_Union[CheckIn, _Mapping]]] = ..., challenge: _Optional[bytes] = ...) -> None: ...

class LeaderMessage(_message.Message):
    __slots__ = ("opened", "closed", "tasks", "refused", "cleared", "key_proof")
    OPENED_FIELD_NUMBER: _ClassVar[int]
    CLOSED_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    CLEARED_FIELD_NUMBER: _ClassVar[int]
    KEY_PROOF_FIELD_NUMBER: _ClassVar[int]
    opened: int
    closed: int
    tasks: SelectorTasks
    refused: DeviceRefusal
    cleared: int
    key_proof: bytes
    def __init__(self, opened: _Optional[int] = ..., closed: _Optional[int] = ..., tasks: _Optional[_Union[SelectorTasks, _Mapping]] = ..., refused: _Optional[_Union[DeviceRefusal, _Mapping]] = ..., cleared: _Optional[int] = ..., key_proof: _Optional[bytes] = ...) -> None: ...

class SelectorTasks(_message.Message):
    __slots__ = ("checkin", "tasks", "last")
    class TasksEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: SignedTask
        def __init__(self, key: _Optional[int] = ..., value: _Optional[_Union[SignedTask, _Mapping]] = ...) -> None: ...
    CHECKIN_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    LAST_FIELD_NUMBER: _ClassVar[int]
    checkin: int
    tasks: _containers.MessageMap[int, SignedTask]
    last: bool
    def __init__(self, checkin: _Optional[int] = ..., tasks: _Optional[_Mapping[int, SignedTask]] = ..., last: _Optional[bool] = ...) -> None: ...

class DeviceRefusal(_message.Message):
    __slots__ = ("device_id", "reason")
    DEVICE_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    device_id: int
    reason: str
    def __init__(self, device_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...
