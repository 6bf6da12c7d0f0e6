"""Reading the services' shared secrets (tokens) from files or the environment."""

from __future__ import annotations

import os
from pathlib import Path

from fedhh.errors import ConfigError


def read_secret(path: str | Path | None, env: str, what: str = "secret") -> bytes:
    """A token from a file (stripped) or, without a file, from an environment variable;
    ``what`` names it in errors ("the control token ...")."""
    if path:
        try:
            value = Path(path).read_bytes().strip()
        except OSError as error:
            raise ConfigError(f"cannot read the {what} file {path}: {error.strerror}") from None
    else:
        value = os.environ.get(env, "").encode()
    if len(value) < 16:
        raise ConfigError(f"the {what} (from {path or '$' + env}) must be at least 16 bytes")
    return value
