"""Plaintext only to loopback, on the dialling side as on the listening side, for every client:
one rule (fedhh.rpc.serving.check_plaintext_peer). Before, a device, a command and the framed
and Connect clients refused plaintext to another host, but the services dialled their peers in
plaintext wherever they were: `fedhh coordinator --insecure --aggregator 10.0.0.5:7100` sent the
control token in clear to another machine, and a selector its selector token to the leader, a
combiner the control token to each worker (192.0.2.1 is TEST-NET-1: nothing is dialled)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest

from fedhh.cli.main import build_parser, main
from fedhh.errors import ConfigError
from fedhh.rpc import serving
from fedhh.rpc.control_client import open_channel

REMOTE = "192.0.2.1:7100"


def test_the_rule() -> None:
    for address in ("127.0.0.1:7100", "localhost:1", "[::1]:7100"):
        serving.check_plaintext_peer(address)
    for address in (REMOTE, "aggregator:7100", "[2001:db8::1]:7100"):
        with pytest.raises(ConfigError, match="plaintext is allowed to loopback addresses "
                                              "only") as refused:
            serving.check_plaintext_peer(address, "--x", "--tls-dir")
        assert str(refused.value).startswith(f"--x {address}: ")
        assert str(refused.value).endswith("it needs --tls-dir")


def test_a_plaintext_channel_to_another_host_is_refused() -> None:
    async def both() -> None:
        with pytest.raises(ConfigError, match=REMOTE):
            open_channel(REMOTE)
        await open_channel("127.0.0.1:7100").close()
    asyncio.run(both())


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = int(exit_.code or 0)
    return code, capsys.readouterr().err


def test_the_commands_refuse_it_naming_the_option(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    key = tmp_path / "key.pub"
    for argv, option in (
            (["coordinator", "--insecure", "--listen", "127.0.0.1:0", "--aggregator", REMOTE,
              "--db", str(tmp_path / "c.sqlite")], "--aggregator"),
            (["selector", "--insecure", "--listen", "127.0.0.1:0", "--leader", REMOTE,
              "--db", str(tmp_path / "s.sqlite"), "--coordinator-key", str(key)], "--leader")):
        code, err = _run(argv, capsys)
        assert code == 2, err
        assert f"error: {option} {REMOTE}: plaintext is allowed to loopback addresses only" \
            in err and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == []


def _args(argv: list[str]) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def test_the_services_refuse_it_before_anything_is_written(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from fedhh.rpc.credentials import load_or_create_signing_key, public_key_path
    from fedhh_aggregator.combiner_main import CombinerSettings
    from fedhh_coordinator import selector_main
    from fedhh_coordinator.main import check_startup

    for name in ("CONTROL", "ADMIN", "SELECTOR"):
        monkeypatch.setenv(f"FEDHH_{name}_TOKEN", name.lower() * 4 + "-0123456789abcdef")
    signing = tmp_path / "keys" / "signing.pem"
    signing.parent.mkdir()
    load_or_create_signing_key(signing)
    key = str(public_key_path(signing))
    store = tmp_path / "store.sqlite"
    with pytest.raises(ConfigError, match=f"--aggregator {REMOTE}: plaintext"):
        check_startup(_args(["coordinator", "--insecure", "--listen", "127.0.0.1:0",
                             "--aggregator", REMOTE, "--db", str(store),
                             "--signing-key", str(tmp_path / "new.pem")]))
    with pytest.raises(ConfigError, match=f"--leader {REMOTE}: plaintext"):
        selector_main.check_startup(_args(
            ["selector", "--insecure", "--listen", "127.0.0.1:0", "--leader", REMOTE,
             "--db", str(store), "--coordinator-key", key]))
    with pytest.raises(ConfigError, match=f"--worker {REMOTE}: plaintext"):
        CombinerSettings.from_args(_args(
            ["combiner", "--insecure", "--listen", "127.0.0.1:0", "--worker", "127.0.0.1:7101",
             "--worker", REMOTE, "--coordinator-key", key]))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keys"]


def test_the_commands_channel_is_one_and_keeps_the_rule() -> None:
    # fedhh admin, fedhh health and a start's preflight share serving.command_channel; the
    # admin client built its own and dialled plaintext to any host it was given.
    from fedhh.rpc.admin_client import AdminClient

    with pytest.raises(ConfigError, match=f"{REMOTE}: plaintext .* it needs --ca"):
        AdminClient(REMOTE, b"a" * 32)
    with AdminClient("127.0.0.1:7000", b"a" * 32) as client:
        assert client.channel is not None


def test_the_clients_given_a_ca_refuse_alike() -> None:
    # A device's framed and Connect channels, and the commands', are told the one remedy
    # (before, the framed channel's read "it needs TLS (--ca)", the others' "it needs --ca").
    from fedhh.rpc.connect_client import ConnectChannel
    from fedhh.rpc.framed.client import FramedChannel

    said = []
    for dial in (lambda: FramedChannel(REMOTE, None),
                 lambda: ConnectChannel(REMOTE, insecure=True),
                 lambda: serving.command_channel(REMOTE, None)):
        with pytest.raises(ConfigError) as refused:
            dial()
        said.append(str(refused.value))
    assert said == [f"{REMOTE}: plaintext is allowed to loopback addresses only (the calls "
                    "carry tokens); it needs --ca"] * 3


@pytest.mark.parametrize("service", ["coordinator", "selector", "aggregator", "combiner"])
def test_every_service_takes_tls_or_plaintext_not_both(
        service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # One definition of --listen/--tls-dir/--insecure (options.add_listen_options); before,
    # the coordinator and a selector took both and served TLS, the other two refused both.
    code, err = _run([service, "--tls-dir", str(tmp_path), "--insecure"], capsys)
    assert code == 2
    assert "argument --insecure: not allowed with argument --tls-dir" in err, err
    args = _args([service, "--insecure", *{"selector": ["--leader", "127.0.0.1:1", "--db", "x",
                                                        "--coordinator-key", "k"],
                                           "coordinator": ["--aggregator", "127.0.0.1:1"],
                                           "aggregator": ["--coordinator-key", "k"],
                                           "combiner": ["--coordinator-key", "k", "--worker",
                                                        "127.0.0.1:1"]}[service]])
    assert (args.insecure, args.tls_dir, args.listen.endswith(":7000") or service not in
            ("coordinator", "selector")) == (True, None, True)


def test_a_device_takes_a_ca_or_plaintext_not_both(capsys: pytest.CaptureFixture[str]) -> None:
    # Before, both: its calls went in plaintext while its start's preflight used TLS.
    code, err = _run(["device", "--coordinator", "127.0.0.1:7000", "--ca", "ca.pem",
                      "--insecure"], capsys)
    assert code == 2
    assert "argument --insecure: not allowed with argument --ca" in err, err


def test_a_device_dials_through_the_one_channel_opener(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # The device process's gRPC channels are serving.open_channel's, with the device's own
    # options and --ca as the remedy (before, fedhh_device.main kept a copy of the opener).
    from fedhh_device import main as device_main

    opened: list[tuple[str, object, object, str]] = []

    def open_channel(address: str, credentials: object = None, options: object = None,
                     remedy: str = "TLS") -> str:
        opened.append((address, credentials, options, remedy))
        return "channel"

    monkeypatch.setattr(serving, "open_channel", open_channel)
    make = device_main.channel_factory(argparse.Namespace(insecure=True, ca=None))
    assert make("127.0.0.1:7100") == "channel"
    assert opened == [("127.0.0.1:7100", None, device_main.OPTIONS, "--ca")]
    monkeypatch.undo()

    async def remote() -> None:
        with pytest.raises(ConfigError, match=f"{REMOTE}: plaintext .* it needs --ca$"):
            make(REMOTE)
        await make("127.0.0.1:7100").close()
    asyncio.run(remote())
    with pytest.raises(ConfigError, match="give --ca"):
        device_main.channel_factory(argparse.Namespace(insecure=False, ca=None))("x:1")


def test_a_device_without_credentials_is_told_the_options_on_every_transport() -> None:
    # (before, with --connect: "give the CA that signed the services' certificates, or ask
    # for plaintext on loopback", naming neither option; gRPC and framed named them)
    from fedhh_device import main as device_main

    args = argparse.Namespace(insecure=False, ca=None, connect_aggregator=[],
                              coordinator="127.0.0.1:7000")
    for opening in (lambda: device_main.channel_factory(args)("127.0.0.1:7100"),
                    lambda: device_main.framed_context(args),
                    lambda: device_main.connect_stubs(args)):
        with pytest.raises(ConfigError) as refused:
            opening()
        assert str(refused.value) == ("give --ca (the CA that signed the services' "
                                      "certificates) or --insecure on loopback")
