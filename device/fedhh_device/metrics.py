"""The device process's Prometheus metrics (``--metrics-port``): the devices it hosts and what
became of their tasks, read from the fleet's own counters when scraped. Counts only: nothing
about a device's data or report."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

from fedhh_device.fleet import Fleet


class FleetCollector(Collector):
    def __init__(self, fleet: Fleet, devices: int) -> None:
        self.fleet = fleet
        self.devices = devices

    def collect(self) -> Iterator[Metric]:
        stats = self.fleet.stats
        yield GaugeMetricFamily("fedhh_device_devices", "Devices hosted by this process",
                                value=self.devices)
        for name, text, value in (
                ("tasks", "Tasks received", stats.tasks),
                ("completed", "Tasks whose unmask shares were accepted", stats.completed),
                ("dropped", "Tasks on which a device dropped out (--drop-rate)", stats.dropped),
                ("late", "Tasks on which a stage closed before the device's message, its "
                         "masked input not in (the round went on without it)", stats.late),
                ("failed", "Tasks that ended otherwise (aborted, refused, unreachable)",
                 stats.failed)):
            yield CounterMetricFamily(f"fedhh_device_{name}", text, value=value)


def register(fleet: Fleet, devices: int) -> None:
    REGISTRY.register(FleetCollector(fleet, devices))
