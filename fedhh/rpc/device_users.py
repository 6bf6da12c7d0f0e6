"""Which of a dataset's users a device process hosts (`fedhh device --users`), and their tokens.

``START:END`` hosts a range, ``i/N`` shard i of N (N near-equal, disjoint ranges), and
``tokens`` the users that the enrollment tokens file names. A tokens file holds either one token
per line, line u for dataset user u (``fedhh admin mint-tokens --count``), or ``USER TOKEN``
lines for the users it names only (``fedhh admin mint-tokens --users``, ``fedhh certs
--device-replicas``): a process given only its own users' tokens cannot enroll anyone else's
devices, which is how each device replica of a deployment gets its own share (issue 28).
"""

from __future__ import annotations

from pathlib import Path

from fedhh.errors import ConfigError
from fedhh.input_files import LIST_FILE_BYTES, read_whole

TOKENS = "tokens"


def shard_range(index: int, count: int, num_users: int) -> range:
    """Users of shard ``index`` of ``count``: the shards are disjoint, cover every user, and
    differ in size by at most one (so none is empty)."""
    if count > num_users:
        raise ConfigError(f"{count} shards of {num_users} users: more shards than users")
    return range(index * num_users // count, (index + 1) * num_users // count)


def user_range(text: str, num_users: int) -> range:
    """``START:END`` (END exclusive, either may be empty) or ``i/N``."""
    try:
        if "/" in text:
            index, count = (int(x) for x in text.split("/"))
            if not 0 <= index < count:
                raise ValueError
            return shard_range(index, count, num_users)
        start_text, _, end_text = text.partition(":")
        start = int(start_text) if start_text else 0
        end = int(end_text) if end_text else num_users
    except ValueError:
        raise ConfigError(f"--users must be START:END, i/N or tokens, got {text!r}") from None
    if not 0 <= start <= end <= num_users:
        raise ConfigError(f"--users {text!r} is outside the dataset's 0..{num_users}")
    return range(start, end)


def read_tokens(path: str | Path) -> dict[int, str]:
    """Every token of a tokens file (module docstring), by dataset user; blank lines name no
    user in a keyed file and stand for a user without a token in a positional one."""
    try:
        lines = read_whole(path, LIST_FILE_BYTES, "enrollment tokens file").decode(
            "ascii").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"cannot read the enrollment tokens file {path}: {error}") from None
    fields = [line.split() for line in lines]
    keyed = {len(f) for f in fields if f} == {2}
    if not keyed:
        bad = next((i for i, f in enumerate(fields) if len(f) > 1), None)
        if bad is not None:
            raise ConfigError(f"{path}:{bad + 1}: expected one token per line (line u for user "
                              "u) or USER TOKEN on every line, not both")
        return {u: f[0] for u, f in enumerate(fields) if f}
    tokens: dict[int, str] = {}
    for number, f in enumerate(fields, start=1):
        if not f:
            continue
        if not f[0].isdigit():
            raise ConfigError(f"{path}:{number}: expected USER TOKEN with USER a dataset user "
                              f"number, got {f[0][:20]!r}")
        user = int(f[0])
        if user in tokens:
            raise ConfigError(f"{path}:{number}: a second token for user {user}")
        tokens[user] = f[1]
    return tokens


def tokens_for(path: str | None, users: list[int]) -> dict[int, str]:
    """The enrollment token of each of ``users`` from the file at ``path`` (none without one)."""
    if not path:
        return {}
    tokens = read_tokens(path)
    missing = [u for u in users if u not in tokens]
    if missing:
        raise ConfigError(f"{path} has no token for users {missing[:5]} (a device process "
                          "needs the token of every user it hosts)")
    return {u: tokens[u] for u in users}
