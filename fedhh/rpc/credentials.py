"""Reading the services' shared secrets (tokens) from files or the environment."""

from __future__ import annotations

import os
from pathlib import Path

from fedhh.errors import ConfigError


def read_secret(path: str | Path | None, env: str) -> bytes:
    """A token from a file (stripped) or, without a file, from an environment variable."""
    if path:
        try:
            value = Path(path).read_bytes().strip()
        except OSError as error:
            raise ConfigError(f"cannot read secret file {path}: {error.strerror}") from None
    else:
        value = os.environ.get(env, "").encode()
    if len(value) < 16:
        raise ConfigError(f"the secret from {path or '$' + env} must be at least 16 bytes")
    return value
