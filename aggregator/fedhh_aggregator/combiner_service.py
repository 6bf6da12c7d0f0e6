"""fedhh.v1.CombinerControl: the coordinator's calls to the combiner (bearer token on each).

Transport only: requests become :class:`~fedhh_aggregator.combiner.Placement` lists and round
ids for the :class:`~fedhh_aggregator.combiner.CombinerRegistry` and its control handler
(``fedhh_aggregator.control``), whose values ``fedhh_aggregator.control_wire`` turns into
messages; every domain error becomes a status code in ``fedhh.rpc.errors.status_errors``.
"""

from __future__ import annotations

import grpc

from fedhh.rpc.errors import status_errors
from fedhh.secagg import SignedConfig, session_id_of
from fedhh.v1 import aggregator_pb2 as pb
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.auth import ControlAuth
from fedhh_aggregator.combiner import CombinerRegistry, Placement
from fedhh_aggregator.control import ShardedRoundControl
from fedhh_aggregator.control_wire import ControlCalls


class CombinerServicer(ControlCalls, pb_grpc.CombinerControlServicer):
    def __init__(self, registry: CombinerRegistry, auth: ControlAuth) -> None:
        super().__init__(ShardedRoundControl(registry), auth)
        self._registry = registry

    @status_errors
    async def DescribeWorkers(self, request: pb.DescribeWorkersRequest,
                              context: grpc.aio.ServicerContext) -> pb.DescribeWorkersResponse:
        self._auth.check(context)
        described = await self._registry.pool.describe()
        return pb.DescribeWorkersResponse(workers=[
            pb.WorkerInfo(index=w.index, public_address=w.spec.public_address,
                         web_url=w.spec.web_url, session_address=w.spec.session_address,
                         serving=serving)
            for w, serving in described])

    @status_errors
    async def OpenShardedRound(self, request: pb.OpenShardedRoundRequest,
                               context: grpc.aio.ServicerContext) -> pb.OpenShardedRoundResponse:
        self._auth.check(context)
        placements = [Placement(SignedConfig(bytes(s.config), bytes(s.signature)), s.worker)
                      for s in request.shards]
        round_, created = await self._registry.open(bytes(request.round_id), placements)
        return pb.OpenShardedRoundResponse(
            created=created, session_ids=[session_id_of(s.config) for s in round_.shards])
