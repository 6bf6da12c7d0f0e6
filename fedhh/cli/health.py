"""`fedhh health`: ask a service's gRPC health endpoint; exit 0 when it is SERVING.

Used by the compose health checks: `fedhh health --address localhost:7000 --ca /tls/ca.pem`.
A service that cannot be reached is named with the cause where it is known: a certificate
not signed by --ca or not valid for the address (with the names it holds), a port that is
not the service's gRPC port, nothing listening, a name that does not resolve.
"""

from __future__ import annotations

import argparse
from typing import Any

from fedhh.cli import options


def register(subparsers: Any) -> None:
    p = subparsers.add_parser("health", help="check a service's gRPC health",
                              description=__doc__)
    p.add_argument("--address", required=True, type=options.remote_address, help="HOST:PORT")
    p.add_argument("--ca", help="CA certificate for TLS (default: plaintext, loopback only)")
    p.add_argument("--tls-name", help="expected name in the server certificate")
    p.add_argument("--service", default="", help="service name (default: the server overall)")
    p.add_argument("--timeout", type=timeout_s, default=5.0,
                   help=f"seconds to wait for the answer (default 5, at most {MAX_TIMEOUT_S:g})")
    p.set_defaults(handler=run)


# A day: gRPC turns a deadline it cannot represent (1e308 s) into one already past, and a
# healthy service then read as DEADLINE_EXCEEDED.
MAX_TIMEOUT_S = 86_400.0


def timeout_s(text: str) -> float:
    value = options.positive_float(text)
    if value > MAX_TIMEOUT_S:
        raise argparse.ArgumentTypeError(f"at most {MAX_TIMEOUT_S:g} s, got {text!r}")
    return value


def run(args: argparse.Namespace) -> int:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from fedhh.cli.options import connection_problem
    from fedhh.errors import ConfigError
    from fedhh.rpc import serving
    from fedhh.rpc.tls import ca_credentials

    if args.ca:
        opts = [("grpc.ssl_target_name_override", args.tls_name)] if args.tls_name else []
        channel = grpc.secure_channel(args.address, ca_credentials(args.ca), options=opts)
    elif serving.is_loopback(args.address):
        channel = grpc.insecure_channel(args.address)
    else:
        raise ConfigError("--ca is required for a non-loopback address")
    with channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=args.service), timeout=args.timeout)
        except grpc.RpcError as error:
            # The status alone ("UNAVAILABLE") told a wrong CA from a stopped service or a
            # port that is not gRPC by nothing: the cause and what to do follow it.
            why = ""
            if error.code() == grpc.StatusCode.UNAVAILABLE:
                why = connection_problem(error.details() or "", args.address, args.ca,
                                         args.tls_name)[0]
            elif error.code() == grpc.StatusCode.DEADLINE_EXCEEDED:
                why = (f"no answer within {args.timeout:g} s: a firewall that drops the "
                       "connection, an address that does not route here, or a service too "
                       "busy to answer (--timeout)")
            print(f"{args.address}: {error.code().name}" + (f" ({why})" if why else ""))
            return 1
    status = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)
    print(f"{args.address}: {status}")
    return 0 if reply.status == health_pb2.HealthCheckResponse.SERVING else 1
