"""Selectors attach with a token of their own, never the control token (outside probe,
thirty-sixth stop).

Before, a selector attached to the leader coordinator (``SelectorControl.Attach``) with the
control token, the one the coordinator calls the aggregator and the combiner with. The
aggregation workers are not trusted for privacy (docs/threat-model.md), yet a holder of that
token could attach as a selector and present check-ins for any enrolled device with round keys
it picked: the devices filled cohorts and dropped out, each charged the run's budget without
taking part. Now the coordinator takes selectors only with --selector-token-file
($FEDHH_SELECTOR_TOKEN), refuses one that is its control or admin token, and without one
refuses every selector naming the setting; the selector presents the selector token, and
refuses the control token's option. Real processes on 127.0.0.1."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from fedhh.rpc.tls import ca_credentials
from fedhh.rpc.topology import LocalTopology
from fedhh.v1 import coordinator_pb2 as pb

pytestmark = pytest.mark.slow

EXIT_BOUND_S = 120
NO_TOKEN = ("this coordinator takes no selectors: it was started without a selector token "
            "(--selector-token-file PATH or $FEDHH_SELECTOR_TOKEN)")


def fedhh(*args: str) -> list[str]:
    return [sys.executable, "-m", "fedhh.cli.main", *args]


def environment() -> dict[str, str]:
    return {k: v for k, v in os.environ.items()
            if k not in ("FEDHH_CONTROL_TOKEN", "FEDHH_ADMIN_TOKEN", "FEDHH_SELECTOR_TOKEN")}


def one_line_error(done: subprocess.CompletedProcess[str], command: str) -> str:
    """The reason a refused command gives: exit 2, its last line, no traceback."""
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"fedhh {command}: error: "), done.stderr[-2000:]
    return last.removeprefix(f"fedhh {command}: error: ")


def attach(topo: LocalTopology, token: bytes) -> grpc.RpcError | None:
    """Attach as a selector with ``token``: the refusal, or None if the leader answered the
    hello (its key proof)."""
    credentials = ca_credentials(str(topo.workdir / "tls" / "ca.pem"))
    with grpc.secure_channel(topo.address("coordinator"), credentials) as channel:
        call = channel.stream_stream("/fedhh.v1.SelectorControl/Attach")(
            iter([pb.SelectorBatch(name="probe", challenge=b"c" * 32).SerializeToString()]),
            metadata=(("authorization", f"Bearer {token.decode()}"),), timeout=30)
        try:
            for answer in call:
                if pb.LeaderMessage.FromString(answer).key_proof:
                    call.cancel()
                    return None
        except grpc.RpcError as error:
            return error
    raise AssertionError("the leader ended the stream without a word")


def selector_args(topo: LocalTopology, name: str, *token: str) -> list[str]:
    return fedhh("selector", "--leader", topo.address("coordinator"), "--listen",
                 "127.0.0.1:0", "--tls-dir", str(topo.workdir / "tls"), "--db", topo.database,
                 "--coordinator-key", f"{topo.signing_key}.pub", "--name", name, *token)


@pytest.fixture(scope="module")
def topo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalTopology]:
    root = tmp_path_factory.mktemp("probe36-selector-token")
    with LocalTopology(root / "topology", env={"FEDHH_CACHE": str(root / "cache")}) as t:
        t.start_aggregator()
        t.start_coordinator()
        yield t


def test_the_control_token_does_not_attach_a_selector_and_the_selector_token_does(
        topo: LocalTopology) -> None:
    assert topo.token("selector") != topo.token("control")
    refused = attach(topo, topo.token("control"))
    assert refused is not None and refused.code() == grpc.StatusCode.UNAUTHENTICATED
    assert "invalid selector token" in (refused.details() or "")
    assert attach(topo, topo.token("selector")) is None
    assert '"selectors": true' in topo.services["coordinator"].log.read_text()


def test_a_selector_process_given_the_control_token_is_refused_and_never_serves(
        topo: LocalTopology, tmp_path: Path) -> None:
    """As a selector's token file: the leader refuses it (UNAUTHENTICATED) and the selector
    stops, naming the token to give, without ever becoming ready (before, it asked again
    every few seconds for ever, an error logged each time); as --control-token-file: refused
    before anything starts, naming the option to give. A selector given the selector token
    attaches (the same leader)."""
    ready = tmp_path / "intruder.ready.json"
    done = subprocess.run(
        selector_args(topo, "intruder", "--selector-token-file",
                      str(topo.workdir / "control.token"), "--ready-file", str(ready)),
        capture_output=True, text=True, timeout=EXIT_BOUND_S, env=environment())
    line = one_line_error(done, "selector")
    assert line.startswith(f"the leader {topo.address('coordinator')} refused this selector "
                           "(UNAUTHENTICATED: invalid selector token"), line
    assert line.endswith("): give the coordinator's selector token (--selector-token-file or "
                         "$FEDHH_SELECTOR_TOKEN, the selector.token `fedhh certs --secrets` "
                         "writes; the coordinator needs it too)"), line
    assert done.stderr.count('"message": "the leader refused this selector"') == 1
    assert not ready.exists()
    done = subprocess.run(selector_args(topo, "old", "--control-token-file",
                                        str(topo.workdir / "control.token")),
                          capture_output=True, text=True, timeout=EXIT_BOUND_S,
                          env=environment())
    assert one_line_error(done, "selector").startswith(
        "--control-token-file: a selector attaches with the selector token, not the control "
        "token")
    done = subprocess.run(selector_args(topo, "none"), capture_output=True, text=True,
                          timeout=EXIT_BOUND_S, env=environment())
    assert one_line_error(done, "selector") == (
        "no selector token was given: pass --selector-token-file PATH or set "
        "$FEDHH_SELECTOR_TOKEN")
    selector = topo.start_selector("selector-0")
    assert selector.ready["port"] > 0


def test_a_coordinator_without_a_selector_token_refuses_every_selector_naming_the_setting(
        tmp_path: Path) -> None:
    with LocalTopology(tmp_path / "topology",
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        topo.start_aggregator()
        topo.start_coordinator(selectors=False)
        for token in ("selector", "control"):
            refused = attach(topo, topo.token(token))
            assert refused is not None and refused.code() == grpc.StatusCode.UNAUTHENTICATED
            assert refused.details() == NO_TOKEN
        coordinator_log = topo.services["coordinator"].log.read_text()
    assert coordinator_log.count("a selector tried to attach; " + NO_TOKEN) == 1
    assert '"selectors": false' in coordinator_log


@pytest.mark.parametrize("same", ["control", "admin"])
def test_a_coordinator_given_the_control_or_admin_token_as_selector_token_does_not_start(
        tmp_path: Path, same: str) -> None:
    with LocalTopology(tmp_path / "topology",
                       env={"FEDHH_CACHE": str(tmp_path / "cache")}) as topo:
        workdir = topo.workdir
        store = tmp_path / "fresh.sqlite"
        done = subprocess.run(fedhh(
            "coordinator", "--listen", "127.0.0.1:0", "--insecure", "--db", str(store),
            "--signing-key", str(tmp_path / "fresh-signing.pem"),
            "--aggregator", "127.0.0.1:1",
            "--control-token-file", str(workdir / "control.token"),
            "--admin-token-file", str(workdir / "admin.token"),
            "--selector-token-file", str(workdir / f"{same}.token")),
            capture_output=True, text=True, timeout=EXIT_BOUND_S, env=environment())
    assert one_line_error(done, "coordinator").startswith(
        f"the selector token (from {workdir / f'{same}.token'}) is the {same} token: give "
        "selectors a token of their own")
    assert not store.exists() and not (tmp_path / "fresh-signing.pem").exists()


def test_certs_writes_a_selector_token_of_its_own_and_refuses_one_that_is_the_control_token(
        tmp_path: Path) -> None:
    secrets = tmp_path / "secrets"
    certs = fedhh("certs", "--out", str(tmp_path / "tls"), "--secrets", str(secrets),
                  "--device-tokens", "8")
    done = subprocess.run(certs, capture_output=True, text=True, timeout=EXIT_BOUND_S,
                          env=environment())
    assert done.returncode == 0, done.stderr[-2000:]
    assert f"wrote {secrets / 'selector.token'}" in done.stdout
    selector, control = (secrets / "selector.token", secrets / "control.token")
    assert selector.read_text().strip() != control.read_text().strip()
    assert selector.stat().st_mode & 0o777 == 0o600
    # A secrets folder whose selector token is the control token (copied by hand), then one
    # whose admin token is (the coordinator refuses both at start, since the aggregators hold
    # the control token): refused, nothing changed.
    for name in ("selector", "admin"):
        copied = secrets / f"{name}.token"
        copied.write_text(control.read_text())
        before = {p.name: p.read_bytes() for p in secrets.iterdir()}
        done = subprocess.run(certs, capture_output=True, text=True, timeout=EXIT_BOUND_S,
                              env=environment())
        assert one_line_error(done, "certs") == (
            f"{copied} is the control token; certs keeps existing tokens: remove it to have a "
            f"new {name} token of its own written")
        assert {p.name: p.read_bytes() for p in secrets.iterdir()} == before
        copied.unlink()
