"""Prometheus counters and gauges for the paths every device's every message takes: counted as
plain numbers, read by the exporter when it is scraped.

A prometheus_client child's ``inc`` is five calls (the method, its label check in two, the
value's own method, the release of a lock taken around the add): ~80 of a worker's ~1,160
calls a device, ~25 of a selector's (issue 30; docs/benchmarks.md, "Calls per device at the
fifty-third stop"). Here a count is one call and no lock. That is sound only where every
count of a family is made on one thread: the services count on their event loop's (the gRPC
ports parse and serve there, as does the framed port). A family exports as prometheus_client's
own metric of that kind and name would: the same samples (``_total`` and ``_created`` for a
counter), labels and help, in the default registry.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any, Generic, TypeVar

from prometheus_client import REGISTRY, CollectorRegistry
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

__all__ = ["Count", "CountFamily", "Level", "LevelFamily"]


class Count:
    """One counter's value (a family's child)."""

    __slots__ = ("created", "value")

    def __init__(self) -> None:
        self.value = 0.0
        self.created = time.time()

    def inc(self, amount: float = 1) -> None:
        if amount < 0:
            raise ValueError(f"a counter only grows, got an increment of {amount}")
        self.value += amount


class Level:
    """One gauge's value (a family's child)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1) -> None:
        self.value += amount

    def dec(self, amount: float = 1) -> None:
        self.value -= amount


C = TypeVar("C", "Count", "Level")


class _Family(Collector, Generic[C]):
    """Children by label values (one child, the family's own value, without labels)."""

    _kind: type[C]
    _metric: type[CounterMetricFamily] | type[GaugeMetricFamily]

    def __init__(self, name: str, documentation: str, labelnames: Iterable[str] = (),
                 registry: CollectorRegistry | None = REGISTRY) -> None:
        self.name, self.documentation = name, documentation
        self.labelnames = tuple(labelnames)
        self._children: dict[tuple[str, ...], C] = {}
        self._only: C | None = None  # (the family's own value, without labels)
        if not self.labelnames:
            self._only = self._children[()] = self._kind()
        if registry is not None:
            registry.register(self)

    def labels(self, *values: object) -> C:
        """The child of these label values, made at 0 on first use."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} takes the labels {list(self.labelnames)}, got "
                             f"{len(values)} values")
        key = tuple(map(str, values))
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._kind()
        return child

    def _own(self) -> C:
        if self._only is None:
            raise ValueError(f"{self.name} is counted by its labels {list(self.labelnames)}: "
                             "take a child with labels() first")
        return self._only

    def inc(self, amount: float = 1) -> None:
        """Count the family without labels."""
        if self._only is None:
            self._own()
        self._only.inc(amount)  # type: ignore[union-attr]

    def describe(self) -> list[Metric]:
        return [self._metric(self.name, self.documentation, labels=self.labelnames)]

    def collect(self) -> list[Metric]:
        family = self._metric(self.name, self.documentation, labels=self.labelnames)
        for key, child in list(self._children.items()):
            self._sample(family, key, child)
        return [family]

    def _sample(self, family: Any, key: tuple[str, ...], child: C) -> None:
        family.add_metric(key, child.value)


class CountFamily(_Family[Count]):
    """A counter (``name`` may end ``_total``, as prometheus_client's ``Counter`` takes it)."""

    _kind = Count
    _metric = CounterMetricFamily

    def _sample(self, family: Any, key: tuple[str, ...], child: Count) -> None:
        family.add_metric(key, child.value, created=child.created)


class LevelFamily(_Family[Level]):
    """A gauge."""

    _kind = Level
    _metric = GaugeMetricFamily

    def dec(self, amount: float = 1) -> None:
        """Lower the family without labels."""
        if self._only is None:
            self._own()
        self._only.dec(amount)  # type: ignore[union-attr]
