"""The device-facing servers queue a fleet's bursts instead of letting gRPC core shed them:
past its default backlog of 1000 not yet started calls, core answers new calls CANCELLED
before any handler runs, and every device retries (20,000 devices at two selectors: 30,409
GetTask calls shed and made again)."""

from __future__ import annotations

import pytest

from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh_aggregator.main import server_options
from fedhh_aggregator.rounds import Limits
from fedhh_coordinator import main as coordinator_main
from fedhh_coordinator import selector_main


def test_the_backlog_is_soft_and_hard_limits_of_pending_calls() -> None:
    assert serving.backlog_options(5000) == [("grpc.server.max_pending_requests", 5000),
                                             ("grpc.server.max_pending_requests_hard_limit",
                                              10000)]
    for wrong in (0, -1, (1 << 30) + 1):
        with pytest.raises(ConfigError, match="max_pending_calls"):
            serving.backlog_options(wrong)


def test_every_device_facing_server_takes_the_backlog() -> None:
    backlog = dict(serving.backlog_options())
    assert backlog["grpc.server.max_pending_requests"] >= 16_384
    # The coordinator and the selectors build their servers with these options.
    options = dict(coordinator_main.SERVER_OPTIONS)
    assert {k: options[k] for k in backlog} == backlog
    assert options["grpc.http2.bdp_probe"] == 0  # and still a fixed receive window
    assert selector_main.SERVER_OPTIONS is coordinator_main.SERVER_OPTIONS
    assert dict(server_options(Limits(max_pending_calls=123))) == dict(
        serving.backlog_options(123))
