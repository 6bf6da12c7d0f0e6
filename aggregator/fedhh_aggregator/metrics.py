"""The aggregator's Prometheus metrics (exported by ``--metrics-port``).

Labels are bounded enums only (stage names, reason codes, RPC names); never a round id, a device
id, or anything derived from a report.
"""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

from fedhh.rpc.tally import CountFamily, LevelFamily
from fedhh.secagg import AbortReason, Stage

SERVER_REASONS = frozenset({
    AbortReason.TOO_FEW_DEVICES, AbortReason.TOO_FEW_SHARE_HOLDERS, AbortReason.TOO_FEW_SHARES,
    AbortReason.CORRUPT_SHARE, AbortReason.OUTPUT_OUT_OF_RANGE,
    AbortReason.SURVIVORS_DISCONNECTED, AbortReason.CANCELLED})

_DEVICE_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 50000)
_SECOND_BUCKETS = (0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300)

ROUNDS_OPEN = Gauge("fedhh_aggregator_rounds_open",
                    "Rounds held by the aggregator (running, or finished and not yet fetched)")
ROUNDS_OPENED = Counter("fedhh_aggregator_rounds_opened_total", "Rounds opened")
ROUNDS_RELEASED = Counter("fedhh_aggregator_rounds_released_total",
                          "Rounds whose sum was released")
ROUNDS_DELIVERED = Counter("fedhh_aggregator_rounds_delivered_total",
                           "Released sums streamed completely to the coordinator")
ROUNDS_ABORT_REPORTED = Counter("fedhh_aggregator_rounds_abort_reported_total",
                                "Aborted rounds whose abort was reported to the coordinator")
ROUNDS_EXPIRED = Counter("fedhh_aggregator_rounds_expired_total",
                         "Finished rounds dropped because nobody fetched their outcome")
ABORTS = Counter("fedhh_aggregator_round_aborts_total", "Aborted rounds, by reason", ["reason"])
# Each reason a server can abort for starts at 0, so a dashboard's query finds the series before
# the first abort (label values known in advance are initialised, as Prometheus advises).
for _reason in SERVER_REASONS:
    ABORTS.labels(_reason.value)
STAGE_DEVICES = Histogram("fedhh_aggregator_stage_devices",
                          "Devices whose message a stage accepted, observed when it closes",
                          ["stage"], buckets=_DEVICE_BUCKETS)
STAGE_SECONDS = Histogram("fedhh_aggregator_stage_seconds",
                          "Wall time from a stage's opening to its closing", ["stage"],
                          buckets=_SECOND_BUCKETS)
CLOSE_SECONDS = Histogram("fedhh_aggregator_stage_close_seconds",
                          "Server work to close a stage (unmasking is the close of UNMASK)",
                          ["stage"], buckets=_SECOND_BUCKETS)
EARLY_CLOSES = Counter("fedhh_aggregator_stage_early_closes_total",
                       "Stages closed before their deadline (every expected device answered)",
                       ["stage"])
# The metrics a worker counts for every device's every message or stream are tallies
# (``fedhh.rpc.tally``: one call, no lock), exported as prometheus_client's own would be.
MESSAGES = CountFamily("fedhh_aggregator_device_messages_total",
                       "Device submissions, by stage and outcome (accepted, duplicate, or the "
                       "rejection reason)", ["stage", "outcome"])
# Bound once (every stage's series then starts at 0): a worker counts each device's every
# message, and ``labels()`` (a lookup) costs more than the count.
MESSAGES_ACCEPTED = {stage: MESSAGES.labels(stage.name, "accepted") for stage in Stage}
MESSAGES_DUPLICATE = {stage: MESSAGES.labels(stage.name, "duplicate") for stage in Stage}
# Devices that gave up their seats before advertising keys (SecureAggregation.Decline), and
# repeats of a decline (a replay: nothing changes).
DECLINED = MESSAGES.labels(Stage.ADVERTISE_KEYS.name, "declined")
DECLINE_REPEATED = MESSAGES.labels(Stage.ADVERTISE_KEYS.name, "decline_repeated")
BYTES_RECEIVED = CountFamily("fedhh_aggregator_received_bytes_total",
                             "Request payload bytes received, by RPC", ["rpc"])
SESSION_STREAMS = LevelFamily("fedhh_aggregator_session_streams",
                              "Devices' session streams open (authenticated)")
SESSIONS_OPENED = CountFamily("fedhh_aggregator_session_opens_total",
                              "Session streams opened (before authentication), by port: grpc, or "
                              "framed (the framed session port)", ["port"])
UPLOADS_ACTIVE = LevelFamily("fedhh_aggregator_uploads_active",
                             "Masked vectors being received (each holds one vector's buffer)")

# The combiner (fedhh combiner): sharded rounds, by how they ended for the coordinator.
COMBINED_ROUNDS = Counter("fedhh_combiner_rounds_total",
                          "Sharded rounds whose outcome reached the coordinator, by outcome",
                          ["outcome"])
