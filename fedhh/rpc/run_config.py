"""The one converter between ``fedhh.config.RunConfig`` and its wire form ``fedhh.v1.RunConfig``.

Field names are identical on both sides. Only the knobs of a networked run travel (``knobs``
of the network mode); a proto field that is not set takes the dataclass default, so a value
of zero is sent and received as zero.
"""

from __future__ import annotations

from typing import Any

from fedhh.config import Mode, RunConfig, knobs
from fedhh.errors import ConfigError
from fedhh.v1 import coordinator_pb2 as pb


def to_proto(config: RunConfig) -> pb.RunConfig:
    message = pb.RunConfig()
    for f in knobs(Mode.NETWORK):
        value = getattr(config, f.name)
        if f.name == "deny_list":
            message.deny_list.extend(value)
        elif value is not None:
            setattr(message, f.name, value)
    return message


def from_proto(message: pb.RunConfig) -> RunConfig:
    """The config a message describes (unset fields: defaults); not yet validated."""
    values: dict[str, Any] = {}
    for f in knobs(Mode.NETWORK):
        if f.name == "deny_list":
            values["deny_list"] = tuple(message.deny_list)
        elif message.HasField(f.name):
            values[f.name] = getattr(message, f.name)
    try:
        return RunConfig.from_dict(values)
    except TypeError as error:  # pragma: no cover - the field lists are the same
        raise ConfigError(f"malformed run config: {error}") from None
