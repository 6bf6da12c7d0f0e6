"""Who owns each round key: the device that presented it first (issue 28).

A device makes fresh X25519 round keys (c_pk, s_pk) and presents them at every task request
until a task uses them, so the first device to present a key is the one that made it: anyone
else presenting it copied it and is refused, whatever check-in is open. Keys a device no longer
presents (it presented new ones) are forgotten.

One registry per process that hears of keys: the coordinator's device service, each selector's,
and the leader's over every selector (``fedhh_coordinator.selectors``), so a copier is refused
whichever selector it asks.
"""

from __future__ import annotations

from fedhh.errors import ConfigError
from fedhh.secagg.primitives import KEY_BYTES, is_valid_x25519_public

COPIED = ("these round keys were presented by another device first: make your own (fresh X25519 "
          "keys for each round)")


class KeyOwners:
    def __init__(self) -> None:
        self._keys: dict[int, tuple[bytes, bytes]] = {}  # each device's last claimed keys
        self._owner: dict[bytes, int] = {}

    def current(self, device_id: int) -> tuple[bytes, bytes] | None:
        """The keys ``device_id`` last claimed (None if none)."""
        return self._keys.get(device_id)

    def claim(self, device_id: int, round_keys: tuple[bytes, bytes]) -> None:
        """Make ``device_id`` the owner of ``round_keys`` (forgetting its previous ones), or
        raise ConfigError, changing nothing, if another device presented one of them first."""
        for key in round_keys:
            owner = self._owner.get(key)
            if owner is not None and owner != device_id:
                raise ConfigError(COPIED)
        for key in self._keys.get(device_id, ()):
            if self._owner.get(key) == device_id:
                del self._owner[key]
        self._owner.update(dict.fromkeys(round_keys, device_id))
        self._keys[device_id] = round_keys

    def __len__(self) -> int:
        return len(self._keys)


def check_round_keys(c_pk: bytes, s_pk: bytes) -> None:
    """The round public keys a check-in presents, checked as the aggregator will check them."""
    if len(c_pk) != KEY_BYTES or len(s_pk) != KEY_BYTES:
        raise ConfigError(f"GetTask needs the device's round keys c_pk and s_pk, {KEY_BYTES} "
                          "bytes each")
    if c_pk == s_pk or not (is_valid_x25519_public(c_pk) and is_valid_x25519_public(s_pk)):
        raise ConfigError("the round keys must be two distinct X25519 keys, not of low order")
