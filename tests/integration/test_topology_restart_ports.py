"""A service a local topology stopped keeps its ports until it is started again on them
(``LocalTopology.stop`` holds them, bound and not listening): no other process can take them
meanwhile, a connection to them is refused as to the stopped service, and the restart listens
on them. Before, they were free from the stop on, and on a busy machine the OS could hand one
to another test's service or a client's connection, and the restart failed to bind."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import pytest

from fedhh.rpc.topology import LocalTopology

pytestmark = pytest.mark.slow


def test_a_stopped_services_ports_are_kept_for_its_restart(tmp_path: Path) -> None:
    with LocalTopology(tmp_path / "topology", tls=False,
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        first = topo.start_aggregator()
        ports = [first.ready["port"], first.ready["session_port"]]
        topo.kill("aggregator")
        for port in ports:
            with socket.socket() as other:  # another process's server, without SO_REUSEADDR
                with pytest.raises(OSError) as taken:
                    other.bind(("127.0.0.1", port))
                assert taken.value.errno == errno.EADDRINUSE
            with socket.socket() as client, pytest.raises(ConnectionRefusedError):
                client.connect(("127.0.0.1", port))
        again = topo.start_aggregator()
        assert [again.ready["port"], again.ready["session_port"]] == ports
        for port in ports:
            with socket.create_connection(("127.0.0.1", port), timeout=30):
                pass
