"""A run's configuration: defaults, validation, and its proto and JSON forms."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from fedhh.codec import DEFAULT_CODEBOOK, Codec
from fedhh.errors import ConfigError
from fedhh.mechanisms import TailKind
from fedhh.prefixtree import TreeConfig
from fedhh.selection import SelectionRule
from fedhh.v1 import coordinator_pb2 as pb

WINDOW_FIELDS = ("advertise_ms", "share_keys_ms", "masked_input_ms", "unmask_ms")


@dataclass(frozen=True)
class RunSettings:
    eps_agg: float = 1.0
    delta: float = 1e-6
    rounds: int = 4
    dim_limit: int = 1 << 16
    target_devices: int = 1000
    min_devices: int = 100
    codec: str = DEFAULT_CODEBOOK  # a built-in codebook name or a codebook's JSON
    max_bits: int = 60
    selection: str = "uniform"
    prefix_conditioning: bool = True
    deny_list: tuple[str, ...] = field(default=())
    fp_ratio: float = 0.5
    tau0: float = 1.0
    eta: float = 0.5
    tail: str = "binomial"
    segment_bits: int | None = None
    eps_local: float | None = None
    privacy_method: str | None = None
    checkin_ms: int = 10_000
    stage_ms: int = 10_000
    expected_dropout: float = 0.1
    corrupt_fraction: float = 0.05
    max_attempts: int = 5
    fp_ratio_of: str = "kept"
    # Per-stage windows of a secure-aggregation round (None: stage_ms): see stage_windows().
    advertise_ms: int | None = None
    share_keys_ms: int | None = None
    masked_input_ms: int | None = None
    unmask_ms: int | None = None

    def validate(self) -> None:
        Codec.from_spec(self.codec, self.max_bits)  # a built-in name or a codebook's JSON
        if self.selection not in {r.value for r in SelectionRule}:
            raise ConfigError(f"selection must be uniform or weighted, got {self.selection!r}")
        if self.tail not in {t.value for t in TailKind}:
            raise ConfigError(f"tail must be binomial or gaussian, got {self.tail!r}")
        self.tree().validate(self.max_bits)
        if not 3 <= self.min_devices <= self.target_devices:
            raise ConfigError(
                f"need 3 <= min_devices <= target_devices, got {self.min_devices} and "
                f"{self.target_devices}")
        if self.dim_limit > 1 << 24:
            raise ConfigError(f"dim_limit must be at most 2^24, got {self.dim_limit}")
        for name in ("checkin_ms", "stage_ms", "max_attempts"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in WINDOW_FIELDS:
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ConfigError(f"{name} must be >= 1, got {value}")
        if not 0 <= self.expected_dropout < 1 or not 0 <= self.corrupt_fraction < 1:
            raise ConfigError("expected_dropout and corrupt_fraction must be in [0, 1)")
        if self.eps_local is not None and not self.eps_local > 0:
            raise ConfigError(f"eps_local must be > 0, got {self.eps_local}")
        if not self.eps_agg > 0 or not 0 < self.delta < 1:
            raise ConfigError(f"need eps_agg > 0 and 0 < delta < 1, got {self.eps_agg}, "
                              f"{self.delta}")
        for item in self.deny_list:
            if not item or any(c.isspace() for c in item):
                raise ConfigError(f"deny-list item {item!r} is empty or contains whitespace")

    def stage_windows(self) -> tuple[int, int, int, int]:
        """(advertise, share keys, masked input, unmask) windows in ms; each defaults to
        stage_ms. Every stage that lost a device waits for its deadline, so a window must fit
        the work of the stage's live devices (share keys is the heaviest: k key agreements and
        k signature checks per device)."""
        return tuple(self.stage_ms if (value := getattr(self, name)) is None else value
                     for name in WINDOW_FIELDS)  # type: ignore[return-value]

    def tree(self) -> TreeConfig:
        return TreeConfig(rounds=self.rounds, dim_limit=self.dim_limit, fp_ratio=self.fp_ratio,
                          tau0=self.tau0, eta=self.eta, segment_bits=self.segment_bits,
                          fp_ratio_of=self.fp_ratio_of)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["deny_list"] = list(self.deny_list)
        return data

    @staticmethod
    def from_dict(data: dict[str, Any]) -> RunSettings:
        known = {f.name for f in fields(RunSettings)}
        unknown = set(data) - known
        if unknown:
            raise ConfigError(f"unknown run settings: {', '.join(sorted(unknown))}")
        values = dict(data)
        if "deny_list" in values:
            values["deny_list"] = tuple(values["deny_list"])
        return RunSettings(**values)

    # ---- wire form ----------------------------------------------------------------------
    @staticmethod
    def from_proto(message: pb.RunConfig) -> RunSettings:
        """Zero and empty proto fields mean "the default"."""
        defaults = RunSettings()
        values: dict[str, Any] = {}
        for f in fields(RunSettings):
            if f.name == "deny_list":
                values["deny_list"] = tuple(message.deny_list)
                continue
            if f.name == "prefix_conditioning":
                continue
            value = getattr(message, f.name)
            values[f.name] = value if value else getattr(defaults, f.name)
        # proto3 bools cannot say "unset": conditioning is on unless the selection string says
        # otherwise ("uniform-unconditioned" / "weighted-unconditioned").
        selection = values["selection"]
        values["prefix_conditioning"] = not selection.endswith("-unconditioned")
        values["selection"] = selection.removesuffix("-unconditioned")
        return RunSettings(**values)

    def to_proto(self) -> pb.RunConfig:
        message = pb.RunConfig()
        for f in fields(RunSettings):
            value = getattr(self, f.name)
            if f.name == "deny_list":
                message.deny_list.extend(value)
            elif f.name == "selection":
                message.selection = value + ("" if self.prefix_conditioning else "-unconditioned")
            elif f.name == "prefix_conditioning":
                message.prefix_conditioning = value
            elif value is not None:
                setattr(message, f.name, value)
        return message
