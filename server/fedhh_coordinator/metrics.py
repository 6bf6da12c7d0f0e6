"""The coordinator's Prometheus metrics."""

from prometheus_client import Counter, Gauge, Histogram

from fedhh.rpc.tally import CountFamily

ROUNDS = Counter("fedhh_coordinator_rounds_total", "Round attempts by outcome", ["outcome"])
for _outcome in ("released", "aborted"):  # at 0 from the start, for dashboards' queries
    ROUNDS.labels(_outcome)
ROUND_DEVICES = Gauge("fedhh_coordinator_round_devices", "Devices in the latest round's cohort")
ROUND_SECONDS = Histogram("fedhh_coordinator_round_seconds", "Wall time of released rounds",
                          buckets=(0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300))
EPS_SPENT = Gauge("fedhh_coordinator_eps_spent", "Aggregate epsilon spent so far", ["run_id"])
STORE_OUTAGES = Counter("fedhh_coordinator_store_outages_total",
                        "Times the runner found the store unavailable and waited for it")
AGGREGATOR_WAITS = Counter("fedhh_coordinator_aggregator_waits_total",
                           "Times an attempt found the aggregation service unreachable and "
                           "waited for it")
# Counted for every device (each enrollment, each GetTask answer): tallies (``fedhh.rpc.tally``:
# one call, no lock), the answers' children bound once.
ENROLLED = CountFamily("fedhh_coordinator_enrolled_total", "Devices enrolled")
TASKS = CountFamily("fedhh_coordinator_tasks_total", "GetTask answers", ["outcome"])
TASKS_WAIT, TASKS_GIVEN = TASKS.labels("wait"), TASKS.labels("task")
