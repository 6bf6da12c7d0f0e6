"""The device service's ports beside gRPC's, the same at the coordinator and at each selector:
the Connect port (``--web-listen``: browsers, ``fedhh.rpc.connect``) and the framed port
(``--session-listen``: device processes' task calls for about half of gRPC's CPU,
``fedhh.rpc.framed``). Both serve the unary device calls with the gRPC port's receive cap and
credential checks."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from fedhh.rpc.framed.server import FramedLimits, FramedServer
from fedhh.rpc.http_listener import split_listen
from fedhh.rpc.procedures import procedures
from fedhh.rpc.serving import CredentialCheck
from fedhh.rpc.tls import TlsFiles
from fedhh.v1 import coordinator_pb2 as pb
from fedhh_coordinator.service import DeviceService

if TYPE_CHECKING:
    from fedhh.rpc.connect import ConnectServer

# A device process holds one connection to each selector, and on it a GetTask long-poll of
# each of its devices at once (tens of thousands in a load test).
MAX_CALLS_PER_CONNECTION = 1 << 16


@dataclass
class DevicePorts:
    web: ConnectServer | None = None
    framed: FramedServer | None = None

    @property
    def web_port(self) -> int | None:
        return self.web.port if self.web is not None else None

    @property
    def framed_port(self) -> int | None:
        return self.framed.port if self.framed is not None else None

    async def close(self) -> None:
        if self.web is not None:
            await self.web.close()
        if self.framed is not None:
            await self.framed.close()


async def start_device_ports(args: argparse.Namespace, name: str, devices: DeviceService,
                             checks: Mapping[str, CredentialCheck], max_receive_bytes: int,
                             tls: TlsFiles | None) -> DevicePorts:
    """The ports ``args`` asks for (``name``: the service, for messages), serving."""
    served = procedures(pb.DESCRIPTOR.services_by_name["DeviceService"], devices, checks)
    ports = DevicePorts()
    try:
        if args.web_listen:
            from fedhh.rpc.connect import ConnectServer  # aiohttp: imported only when served

            ports.web = ConnectServer(f"{name}'s Connect port", served, max_receive_bytes, tls,
                                      args.web_origin, args.web_max_connections)
            await ports.web.start(*split_listen(args.web_listen), args.insecure)
        if args.session_listen:
            ports.framed = FramedServer(
                f"{name}'s framed port", {procedure.path: procedure for procedure in served},
                FramedLimits(max_receive_bytes, MAX_CALLS_PER_CONNECTION,
                             args.session_max_connections), tls)
            await ports.framed.start(*split_listen(args.session_listen), args.insecure)
    except BaseException:
        await ports.close()
        raise
    return ports
