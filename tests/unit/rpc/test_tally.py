"""The services' per-message metrics (``fedhh.rpc.tally``): one call a count, exported as
prometheus_client's own counters and gauges are."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from call_count_kit import calls
from prometheus_client import CollectorRegistry, Counter, Gauge, generate_latest

from fedhh.rpc.framed.server import CALLS
from fedhh.rpc.tally import CountFamily, LevelFamily
from fedhh.secagg import Stage
from fedhh_aggregator import metrics
from fedhh_aggregator.session_stream import _BYTES_RECEIVED
from fedhh_coordinator import metrics as coordinator_metrics

# Each is made for every device, on every message or stream, at a worker or a selector (the
# labelled ones on children bound once, as the services count them).
COUNTS: dict[str, Callable[[], None]] = {
    "received bytes": _BYTES_RECEIVED.inc,
    "accepted message": metrics.MESSAGES_ACCEPTED[Stage.SHARE_KEYS].inc,
    "duplicate message": metrics.MESSAGES_DUPLICATE[Stage.UNMASK].inc,
    "stream up": metrics.SESSION_STREAMS.inc,
    "stream down": metrics.SESSION_STREAMS.dec,
    "upload up": metrics.UPLOADS_ACTIVE.inc,
    "upload down": metrics.UPLOADS_ACTIVE.dec,
    "framed call": CALLS.labels("/fedhh.v1.DeviceService/GetTask").inc,
    "enrolled": coordinator_metrics.ENROLLED.inc,
    "task given": coordinator_metrics.TASKS_GIVEN.inc,
    "told to wait": coordinator_metrics.TASKS_WAIT.inc,
}


@pytest.mark.parametrize("what", sorted(COUNTS))
def test_a_count_on_every_message_costs_a_few_calls(what: str) -> None:
    """Before, each was a prometheus_client child's ``inc`` or ``dec``: five calls, a lock
    taken and released among them, where a worker makes ~15 a device."""
    assert calls(COUNTS[what]) <= 2


def _exposed(registry: CollectorRegistry) -> str:
    """The registry's page, each ``_created`` time replaced by T."""
    return re.sub(r"^(\w+_created(\{[^}]*\})?) \S+$", r"\1 T",
                  generate_latest(registry).decode(), flags=re.MULTILINE)


def test_a_tally_is_exported_as_prometheus_clients_own_metric() -> None:
    """Counters (labelled or not) and a gauge: the same page, sample for sample."""
    theirs, ours = CollectorRegistry(), CollectorRegistry()
    for registry, counter, gauge in ((theirs, Counter, Gauge),
                                     (ours, CountFamily, LevelFamily)):
        labelled = counter("t_bytes_total", "Bytes, by RPC", ["rpc"], registry=registry)
        labelled.labels("Session").inc(5)
        labelled.labels(3).inc()  # (a label value is its text)
        labelled.labels("Session").inc(0.5)
        counter("t_plain_total", "Plain", registry=registry).inc(2)
        level = gauge("t_level", "A level", registry=registry)
        level.inc(3)
        level.dec()
        counter("t_unused_total", "Never counted", ["stage"], registry=registry)
    assert _exposed(ours) == _exposed(theirs)
    assert 't_bytes_total{rpc="Session"} 5.5' in _exposed(ours)


def test_a_tally_refuses_what_prometheus_client_refuses() -> None:
    registry = CollectorRegistry()
    family = CountFamily("t_total", "T", ["a", "b"], registry=registry)
    with pytest.raises(ValueError, match=r"takes the labels \['a', 'b'\], got 1 values"):
        family.labels("x")
    with pytest.raises(ValueError, match="take a child with labels"):
        family.inc()
    with pytest.raises(ValueError, match="only grows, got an increment of -1"):
        family.labels("x", "y").inc(-1)
    assert registry.get_sample_value("t_total", {"a": "x", "b": "y"}) == 0.0
    with pytest.raises(ValueError, match="Duplicated timeseries"):
        CountFamily("t_total", "again", registry=registry)
