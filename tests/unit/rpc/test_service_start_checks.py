"""Every service refuses what it could only fail on once serving, before its event loop starts
(``fedhh.rpc.serving.check_start``): a --ready-file it cannot write, a --listen it cannot
bind. Before, the selector and the combiner checked neither: a ready file in a missing folder
failed after the port served ("No such file or directory: x.ready.tmp"), and the combiner's
gRPC server, never stopped, printed "Exception ignored ... Event loop is closed" at exit."""

from __future__ import annotations

import argparse
import asyncio
import importlib
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ed25519

from fedhh.cli.main import build_parser
from fedhh.errors import ConfigError
from fedhh.rpc import serving

SERVICES = {
    "coordinator": "fedhh_coordinator.main",
    "selector": "fedhh_coordinator.selector_main",
    "aggregator": "fedhh_aggregator.main",
    "combiner": "fedhh_aggregator.combiner_main",
}


def _args(service: str, tmp_path: Path, *extra: str) -> argparse.Namespace:
    key = tmp_path / "coordinator.pub"
    if not key.exists():
        key.write_bytes(ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    if service == "selector" and not (tmp_path / "s.sqlite").exists():
        # (a selector reads the coordinator's store and refuses a --db with none there)
        from fedhh_coordinator.store import Store

        Store(tmp_path / "s.sqlite").db.close()
    common = ["--insecure", "--listen", "127.0.0.1:0"]
    own = {
        "coordinator": ["--aggregator", "127.0.0.1:7100", "--db", str(tmp_path / "c.sqlite"),
                        "--signing-key", str(tmp_path / "signing.pem")],
        "selector": ["--leader", "127.0.0.1:7000", "--db", str(tmp_path / "s.sqlite"),
                     "--coordinator-key", str(key)],
        "aggregator": ["--coordinator-key", str(key)],
        "combiner": ["--coordinator-key", str(key), "--worker", "127.0.0.1:7101"],
    }[service]
    return build_parser(service).parse_args([service, *common, *own, *extra])


@pytest.fixture
def no_loop(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The services' runs with logging left alone and no event loop: a run that gets past its
    checks is recorded (and its coroutine closed) instead of serving."""
    reached: list[str] = []
    monkeypatch.setenv("FEDHH_CONTROL_TOKEN", "c" * 32)
    monkeypatch.setenv("FEDHH_ADMIN_TOKEN", "a" * 32)
    monkeypatch.setenv("FEDHH_SELECTOR_TOKEN", "s" * 32)

    def run_service(main: Any) -> int:
        main.close()
        reached.append("served")
        return 0

    monkeypatch.setattr(serving, "run_service", run_service)
    for module in SERVICES.values():
        monkeypatch.setattr(importlib.import_module(module), "configure_logging",
                            lambda *_: None)
    yield reached


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_ready_file_in_a_missing_folder_is_refused_before_serving(
        service: str, tmp_path: Path, no_loop: list[str]) -> None:
    ready = tmp_path / "missing" / "x.ready"
    with pytest.raises(ConfigError, match=r"--ready-file .*the folder .* does not exist"):
        importlib.import_module(SERVICES[service]).run(
            _args(service, tmp_path, "--ready-file", str(ready)))
    assert no_loop == []
    assert not (tmp_path / "c.sqlite").exists()


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_listen_address_in_use_is_refused_before_serving(
        service: str, tmp_path: Path, no_loop: list[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        args = _args(service, tmp_path)
        args.listen = f"127.0.0.1:{port}"
        with pytest.raises(ConfigError, match=rf"--listen: cannot listen on 127.0.0.1:{port}"):
            importlib.import_module(SERVICES[service]).run(args)
    assert no_loop == []


@pytest.mark.parametrize("service", ["selector", "aggregator", "combiner"])
@pytest.mark.parametrize("mistake", ["missing", "private", "garbage"])
def test_a_bad_coordinator_key_is_refused_naming_the_flag(
        service: str, mistake: str, tmp_path: Path, no_loop: list[str]) -> None:
    """Before, "cannot read the public key PATH: No such file or directory" named no flag: an
    operator of three services that each take a key file had to guess which one meant it."""
    args = _args(service, tmp_path)
    if mistake == "missing":
        args.coordinator_key = str(tmp_path / "typo.pub")
    elif mistake == "private":
        args.coordinator_key = str(tmp_path / "signing.pem")
        Path(args.coordinator_key).write_bytes(
            ed25519.Ed25519PrivateKey.generate().private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption()))
    else:
        args.coordinator_key = str(tmp_path / "ca.pem")
        Path(args.coordinator_key).write_text("not a key\n")
    with pytest.raises(ConfigError) as refused:
        importlib.import_module(SERVICES[service]).run(args)
    assert str(refused.value).startswith(f"--coordinator-key: {args.coordinator_key} "
                                         if mistake != "missing" else
                                         f"--coordinator-key: cannot read the public key "
                                         f"{args.coordinator_key}: "), str(refused.value)
    assert no_loop == []


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_what_passes_the_checks_serves(service: str, tmp_path: Path,
                                       no_loop: list[str]) -> None:
    # (the checks refuse only what they name: the same arguments with a writable ready file)
    importlib.import_module(SERVICES[service]).run(
        _args(service, tmp_path, "--ready-file", str(tmp_path / "x.ready")))
    assert no_loop == ["served"]


@pytest.mark.parametrize("service", ["coordinator", "selector"])
def test_an_attestation_that_is_no_factory_is_refused_before_serving(
        service: str, tmp_path: Path, no_loop: list[str]) -> None:
    # (before, the selector opened its store and started its loop, and refused it there)
    with pytest.raises(ConfigError, match=r"--attestation 'os:path': path is a module"):
        importlib.import_module(SERVICES[service]).run(
            _args(service, tmp_path, "--attestation", "os:path"))
    assert no_loop == []
    assert not (tmp_path / "c.sqlite").exists()


def _refused(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("service", ["aggregator", "combiner"])
def test_a_failure_after_serving_began_stops_the_server(service: str, tmp_path: Path) -> None:
    # The ready file's folder gone between the check and the write (the settings are built
    # past the check): the error reaches the caller, and the port no longer listens (before,
    # the gRPC server was left running to the closing loop).
    from fedhh_aggregator.combiner_main import CombinerSettings
    from fedhh_aggregator.combiner_main import start as start_combiner
    from fedhh_aggregator.main import AggregatorSettings
    from fedhh_aggregator.main import start as start_aggregator
    from fedhh_aggregator.service import serve_until_signalled
    from fedhh_aggregator.workers import parse_worker

    public = ed25519.Ed25519PrivateKey.generate().public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    ready = tmp_path / "gone" / "x.ready"

    async def main() -> bool:
        if service == "aggregator":
            settings: Any = AggregatorSettings(coordinator_public=public,
                                               control_token=b"c" * 32, insecure=True,
                                               ready_file=ready)
            running: Any = await start_aggregator(settings)
        else:
            settings = CombinerSettings(coordinator_public=public, control_token=b"c" * 32,
                                        insecure=True, ready_file=ready,
                                        workers=[parse_worker("127.0.0.1:9")])
            running = await start_combiner(settings)
        assert not _refused(running.port)
        with pytest.raises(FileNotFoundError):
            await serve_until_signalled(running, service, settings)
        return _refused(running.port)  # (while the loop and the server object live)

    assert asyncio.run(main())


@pytest.mark.parametrize("service", sorted(SERVICES))
def test_a_ca_file_with_no_certificate_is_refused_before_serving(
        service: str, tmp_path: Path, no_loop: list[str]) -> None:
    # A --tls-dir whose ca.pem is a key (a copy gone wrong): the services' channels to their
    # peers trust it, so every handshake would fail. Before, every service started with it,
    # and the combiner (which has no preflight of its workers) served, its workers
    # unreachable for good (UNAVAILABLE).
    from fedhh.rpc.tls import make_dev_pki

    pki = make_dev_pki(tmp_path / "tls", ["localhost"])
    pki.ca.write_bytes(pki.key.read_bytes())
    args = _args(service, tmp_path)
    args.insecure, args.tls_dir = False, str(tmp_path / "tls")
    with pytest.raises(ConfigError, match=rf"CA file {pki.ca} holds no PEM certificate"):
        importlib.import_module(SERVICES[service]).run(args)
    assert no_loop == []
