"""Start and stop the combiner (the aggregation service's leader); the entry point of
``fedhh combiner`` (fedhh/cli/combiner.py).

In-process use (tests)::

    combiner = await start(CombinerSettings(coordinator_public=raw_key, control_token=token,
                                            workers=[parse_worker("127.0.0.1:7101")],
                                            insecure=True))
    ...  # combiner.port is the bound port
    await combiner.stop()
"""

from __future__ import annotations

import argparse
import logging
from dataclasses import dataclass, field
from pathlib import Path

from fedhh.rpc import serving
from fedhh.rpc.credentials import load_public_key, read_secret
from fedhh.rpc.observability import configure_logging
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import aggregator_pb2_grpc as pb_grpc
from fedhh_aggregator.auth import TOKEN_ENV, ControlAuth
from fedhh_aggregator.combined import CombinerLimits
from fedhh_aggregator.combiner import CombinerRegistry
from fedhh_aggregator.combiner_service import CombinerServicer
from fedhh_aggregator.journal import Journal
from fedhh_aggregator.rounds import check_tombstone_ttl
from fedhh_aggregator.service import RunningService, serve_until_signalled, start_service
from fedhh_aggregator.workers import WorkerPool, WorkerSpec, parse_worker

log = logging.getLogger(__name__)

COMBINER_SERVICE = "fedhh.v1.CombinerControl"
# Control messages only: a plan of MAX_SHARDS configs is well under this.
MAX_RECEIVE_BYTES = 4 << 20


@dataclass(frozen=True)
class CombinerSettings:
    coordinator_public: bytes
    control_token: bytes
    workers: list[WorkerSpec]
    listen: str = "127.0.0.1:0"
    tls: TlsFiles | None = None
    insecure: bool = False
    limits: CombinerLimits = field(default_factory=CombinerLimits)
    metrics_port: int | None = None
    metrics_host: str = "127.0.0.1"
    ready_file: Path | None = None
    grace_s: float = 5.0
    state_dir: Path | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> CombinerSettings:
        tls = TlsFiles.from_dir(args.tls_dir) if args.tls_dir else None
        serving.check_start(tls, args.ready_file,
                            [("--listen", args.listen), serving.metrics_listener(args)])
        workers = [parse_worker(w) for w in args.worker]
        if not args.tls_dir:  # the control token would go to each worker in clear
            for worker in workers:
                serving.check_plaintext_peer(worker.control_address, "--worker", "--tls-dir")
        check_tombstone_ttl(args.tombstone_ttl, args.max_round_seconds,
                            ("argument --tombstone-ttl:", "--max-round-seconds"))
        limits = CombinerLimits(max_rounds=args.max_rounds, result_ttl_s=args.result_ttl,
                                slack_s=args.slack_seconds, patience_s=args.patience_seconds,
                                max_round_s=args.max_round_seconds,
                                max_tombstones=args.max_tombstones,
                                tombstone_ttl_s=args.tombstone_ttl)
        return cls(
            coordinator_public=load_public_key(args.coordinator_key),
            control_token=read_secret(args.control_token_file, TOKEN_ENV, "control token"),
            workers=workers,
            listen=args.listen, tls=tls,
            insecure=args.insecure, limits=limits, metrics_port=args.metrics_port,
            metrics_host=args.metrics_host,
            ready_file=Path(args.ready_file) if args.ready_file else None,
            state_dir=Path(args.state_dir) if args.state_dir else None)


Combiner = RunningService[CombinerRegistry]


async def start(settings: CombinerSettings) -> Combiner:
    """Build and start the combiner (``start_service``: a failure closes what had started,
    its channels to the workers with the rest). With a state directory, its journal's rounds
    are restored first: the finished as tombstones, the running taken over."""
    limits = settings.limits
    pool = WorkerPool(settings.workers, settings.tls, settings.control_token)
    journal = None
    if settings.state_dir is not None:
        try:
            journal = Journal.sized(settings.state_dir, limits.max_tombstones, limits.max_rounds)
        except BaseException:
            await pool.close()
            raise
    registry = CombinerRegistry(settings.coordinator_public, pool, limits, journal)
    control_auth = ControlAuth(settings.control_token)
    # Every method is the coordinator's: its token is checked from the metadata before the
    # request is read (a caller without it costs its metadata, not a 4 MiB message).
    server = serving.new_server(
        max_receive_bytes=MAX_RECEIVE_BYTES,
        credential_checks={f"/{COMBINER_SERVICE}/": control_auth.check_metadata})
    service = Combiner(server, registry, release=pool.close)

    async def parts() -> None:
        registry.restore()
        pb_grpc.add_CombinerControlServicer_to_server(
            CombinerServicer(registry, control_auth), server)

    return await start_service(service, settings, (COMBINER_SERVICE,), parts)


async def serve(settings: CombinerSettings) -> None:
    await serve_until_signalled(await start(settings), "combiner", settings,
                                workers=len(settings.workers))


def run(args: argparse.Namespace) -> int:
    configure_logging(args.log_level, "combiner")
    settings = CombinerSettings.from_args(args)
    serving.run_service(serve(settings))
    return 0
