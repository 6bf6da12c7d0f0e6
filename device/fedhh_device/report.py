"""One device's report for a task: the same core functions the simulator uses.

Selection (``fedhh.device.selection.select_domain_index`` over the device's own items, the
simulator's per-device draw) then the local randomizer
(``fedhh.device.randomizer.RandomizedResponse``), drawing from one random source in that order.
A deployed device's source is ``SecureSource`` (OS entropy, AES-CTR); in test mode it is
``fedhh.device.streams.device_stream(seed, round, user)``, the very stream the per-device
simulation gives the same user, so a networked run reproduces the simulation exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fedhh.codec import MAX_SUPPORTED_BITS, Codec
from fedhh.codec import codes as cw
from fedhh.device import (
    Eligibility,
    RandomizedResponse,
    RandomSource,
    RoundQuery,
    Selection,
    SelectionRule,
    select_domain_index,
)
from fedhh.errors import ConfigError
from fedhh.secagg import RoundConfig
from fedhh.v1 import coordinator_pb2 as pb


@dataclass
class DeviceData:
    """A device's items and their counts."""

    words: tuple[str, ...]
    counts: np.ndarray
    _codes: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def codes(self, codec: Codec) -> np.ndarray:
        if codec.key not in self._codes:
            self._codes[codec.key] = codec.encode_many(list(self.words)).codes
        return self._codes[codec.key]


def query_of(task: pb.Task) -> RoundQuery:
    """The round query a task carries, validated.

    ``prefixes`` and ``deny_list`` hold each value as its 64-bit words, most significant first
    (one word per value up to 64 bits): see ``fedhh.codec.codes.to_wire``.
    """
    if not 1 <= task.max_bits <= MAX_SUPPORTED_BITS:
        raise ConfigError(f"task max_bits {task.max_bits} is outside [1, {MAX_SUPPORTED_BITS}]")
    if task.prefix_bits + task.segment_bits > task.max_bits or task.segment_bits < 1:
        raise ConfigError(f"task has prefix_bits {task.prefix_bits} + segment_bits "
                          f"{task.segment_bits} outside [1, max_bits {task.max_bits}]")
    prefixes = cw.from_wire(list(task.prefixes), task.prefix_bits, "task prefix list")
    deny = cw.from_wire(list(task.deny_list), task.max_bits, "task deny list")
    if prefixes.size == 0 or np.any(prefixes[1:] <= prefixes[:-1]) or np.any(deny[1:] <= deny[:-1]):
        raise ConfigError("task prefix or deny list is empty or not strictly ascending")
    return RoundQuery(round=task.round, prefix_bits=task.prefix_bits, prefixes=prefixes,
                      segment_bits=task.segment_bits, deny=deny, max_bits=task.max_bits)


def make_report(data: DeviceData, task: pb.Task, rng: RandomSource | np.random.Generator
                ) -> np.ndarray:
    """Sorted positions of the 1 bits of the device's randomized one-hot report."""
    query = query_of(task)
    codec = Codec.from_spec(task.codec, task.max_bits)
    dimension = RoundConfig.from_bytes(task.round_config).dimension
    if dimension != query.domain_size:
        raise ConfigError(f"the round's vectors have {dimension} entries but the task's domain "
                          f"has {query.domain_size}")
    try:
        rule = SelectionRule(task.selection)
    except ValueError:
        # (a ValueError escaped the fleet's refusals, which catch FedhhError, and ended the
        # whole device process: a coordinator naming a rule this device does not know, say a
        # newer one, stopped all its devices)
        known = ", ".join(r.value for r in SelectionRule)
        raise ConfigError(f"task selection {task.selection!r} is not one this device knows "
                          f"({known})") from None
    selection = Selection(rule, task.prefix_conditioning)
    codes = data.codes(codec)
    eligibility = Eligibility.of(codes, query.round_filter())
    index = select_domain_index(query, np.arange(codes.size), data.counts, codes, eligibility,
                                selection, rng)
    return RandomizedResponse(task.eps_local).randomize(None if index < 0 else index,
                                                        query.domain_size, rng)
