"""`fedhh device` and `fedhh selector` check their own inputs before they ask the service they
depend on (the coordinator, the leader) for its health: a refused input is the one line they
print. Before, the health was asked first, so a "cannot reach the coordinator at ... yet" (or
"the leader") warning came above the real error: a missing --dataset, a --state-dir in a
missing folder, users without enrollment tokens, a missing --coordinator-key or --db, no
selector token. With good inputs the health is still asked, once, before the service runs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_kit import run_cli
from networked_kit import refused_port

from fedhh.rpc import serving


@pytest.fixture(autouse=True)
def _environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A cache of the test's own and no selector token (the root logger the commands
    configure is put back by tests/conftest.py)."""
    monkeypatch.setenv("FEDHH_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("FEDHH_SELECTOR_TOKEN", raising=False)


@pytest.fixture
def coordinator() -> Iterator[str]:
    with refused_port() as port:
        yield f"127.0.0.1:{port}"


def _device(root: Path, coordinator: str, **given: str) -> list[str]:
    (root / "users.txt").write_text("apple pear\nfig\n")
    (root / "tokens.txt").write_text(f"0 {'a' * 64}\n1 {'b' * 64}\n")
    flags = {"--dataset": str(root / "users.txt"), "--state-dir": str(root / "state"),
             "--enrollment-tokens-file": str(root / "tokens.txt"), **given}
    return ["device", "--coordinator", coordinator, "--insecure",
            *(part for flag, value in flags.items() if value for part in (flag, value))]


@pytest.mark.parametrize(("given", "refusal"), [
    ({"--dataset": "{root}/nope.txt"}, "--dataset: {root}/nope.txt does not exist"),
    ({"--state-dir": "{root}/typo/state"},
     "--state-dir {root}/typo/state: the folder {root}/typo does not exist"),
    ({"--enrollment-tokens-file": ""},
     "no enrollment token for user 0: it has no identity in {root}/state"),
], ids=["dataset", "state-dir", "no tokens"])
def test_a_device_says_its_refused_input_alone(
        given: dict[str, str], refusal: str, tmp_path: Path, coordinator: str,
        capsys: pytest.CaptureFixture[str]) -> None:
    argv = _device(tmp_path, coordinator,
                   **{flag: value.format(root=tmp_path) for flag, value in given.items()})
    code, out, err = run_cli(argv, capsys)
    assert (code, out) == (2, ""), err
    *logged, line = err.splitlines()
    assert line.startswith(f"fedhh device: error: {refusal.format(root=tmp_path)}"), line
    # (the dataset's import logs what it wrote: information, no warning)
    assert all('"level": "INFO"' in each for each in logged), logged
    assert not (tmp_path / "state").exists()


def _selector(root: Path, leader: str, key: bool = True, store: bool = True) -> list[str]:
    from fedhh_coordinator.store import Store

    if store:
        Store(root / "store.sqlite").db.close()
    if key:
        from fedhh.rpc.credentials import load_or_create_signing_key

        load_or_create_signing_key(root / "signing.pem")
    return ["selector", "--leader", leader, "--insecure", "--listen", "127.0.0.1:0",
            "--db", str(root / "store.sqlite"), "--coordinator-key",
            str(root / "signing.pem.pub")]


@pytest.mark.parametrize(("case", "refusal"), [
    ("key", "--coordinator-key: cannot read the public key {root}/signing.pem.pub: "
            "No such file or directory"),
    ("store", "--db {root}/store.sqlite: no coordinator store there"),
    ("token", "no selector token"),
])
def test_a_selector_says_its_refused_input_alone(
        case: str, refusal: str, tmp_path: Path, coordinator: str,
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    if case != "token":
        monkeypatch.setenv("FEDHH_SELECTOR_TOKEN", "s" * 32)
    argv = _selector(tmp_path, coordinator, key=case != "key", store=case != "store")
    code, out, err = run_cli(argv, capsys)
    assert (code, out) == (2, ""), err
    (line,) = err.splitlines()
    assert line.startswith(f"fedhh selector: error: {refusal.format(root=tmp_path)}"), line


@pytest.mark.parametrize("command", ["device", "selector"])
def test_good_inputs_still_ask_the_health_once_before_serving(
        command: str, tmp_path: Path, coordinator: str, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    served: list[str] = []

    def run_service(main: Any) -> None:
        main.close()
        served.append(capsys.readouterr().err)

    monkeypatch.setattr(serving, "run_service", run_service)
    monkeypatch.setenv("FEDHH_SELECTOR_TOKEN", "s" * 32)
    argv = (_device(tmp_path, coordinator) if command == "device"
            else _selector(tmp_path, coordinator))
    code, _, _ = run_cli(argv, capsys)
    assert code == 0
    (said,) = served
    peer = "the coordinator" if command == "device" else "the leader"
    assert said.count(f"cannot reach {peer} at {coordinator} yet") == 1, said
