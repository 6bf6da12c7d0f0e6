"""The secure-aggregation service: thin grpc.aio servicers over ``fedhh.secagg.SecAggServer``.

- :mod:`fedhh_aggregator.rounds`: one open round (its protocol server, deadlines on the event
  loop, long-polls, the released sum until it is fetched);
- :mod:`fedhh_aggregator.registry`: the open rounds, their limits, expiry and tombstones;
- :mod:`fedhh_aggregator.servicers`: the device-facing and coordinator-facing gRPC services;
- :mod:`fedhh_aggregator.auth`: the control token and the device call credentials;
- :mod:`fedhh_aggregator.main`: settings, start/stop, the ``fedhh aggregator`` entry point.

The wire contract is ``proto/fedhh/v1/aggregator.proto``; docs/secagg.md, section 9 ("Service"),
describes it.
"""
