"""One reader of a call's bearer token for every port (fedhh.rpc.credentials): the aggregator's
and the combiner's control token, the coordinator's admin and selector tokens and the devices'
credentials. Before, the aggregator read the control token with a copy of its own that drifted:
it took only the first authorization entry and had no length bound, so metadata of any length
holding the token with trailing spaces was accepted there and refused by the coordinator."""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from fedhh.errors import AuthenticationError
from fedhh.rpc.credentials import (
    MAX_AUTHORIZATION,
    bearer,
    bearer_metadata,
    check_bearer,
    presents,
)
from fedhh_aggregator.auth import ControlAuth
from fedhh_coordinator import auth

ROOT = Path(__file__).resolve().parents[3]
TOKEN = b"0123456789abcdef0123456789abcdef"
CASES = [
    ((), False),
    (bearer_metadata(TOKEN), True),
    (bearer_metadata(TOKEN.decode()), True),
    ((("Authorization", "bearer " + TOKEN.decode()),), True),
    ((("authorization", b"Bearer " + TOKEN),), True),
    ((("authorization", "Bearer  " + TOKEN.decode() + "  "),), True),
    (bearer_metadata(TOKEN[:-1]), False),
    (bearer_metadata(TOKEN + b"0"), False),
    ((("authorization", "Bearer "),), False),
    ((("authorization", TOKEN.decode()),), False),
    ((("authorization", "Basic x"), ("authorization", "Bearer " + TOKEN.decode())), True),
    ((("authorization", "Bearer " + TOKEN.decode() + " " * MAX_AUTHORIZATION),), False),
    ((("authorization", "Bearer " + "é" * 40),), False),
]


@pytest.mark.parametrize(("metadata", "accepted"), CASES)
def test_every_port_reads_a_bearer_alike(metadata: tuple, accepted: bool) -> None:
    assert presents(metadata, TOKEN) is accepted
    try:
        ControlAuth(TOKEN).check_metadata(metadata)
        aggregator = True
    except AuthenticationError as error:
        assert str(error) == "missing or invalid control token"  # one answer for both
        aggregator = False
    try:
        auth.check_admin(metadata, TOKEN)
        coordinator = True
    except AuthenticationError:
        coordinator = False
    try:
        check_bearer(metadata, TOKEN, "refused")
        checked = True
    except AuthenticationError:
        checked = False
    assert aggregator is coordinator is checked is accepted


def test_a_refusal_says_what_is_wrong() -> None:
    with pytest.raises(AuthenticationError, match="missing 'authorization: Bearer"):
        bearer(())
    with pytest.raises(AuthenticationError, match="too long"):
        bearer((("authorization", "Bearer " + "x" * MAX_AUTHORIZATION),))
    with pytest.raises(AuthenticationError, match="invalid admin token"):
        auth.check_admin(bearer_metadata(b"w" * 32), TOKEN)
    with pytest.raises(AuthenticationError, match=r"^not this one$"):
        check_bearer(bearer_metadata(b"w" * 32), TOKEN, "not this one")
    with pytest.raises(AuthenticationError, match="missing 'authorization: Bearer"):
        check_bearer((), TOKEN, "not this one")
    assert bearer(bearer_metadata("7.abc")) == "7.abc"


@functools.cache
def _nodes() -> tuple[tuple[str, tuple[ast.AST, ...]], ...]:
    """(path, every node of its syntax tree) for the packages' modules that name the metadata
    key or a constant-time comparison (the checks below look for nothing else), parsed once
    (before, every module was parsed: 13 s on a busy machine, against 0.3 s)."""
    found = []
    for folder in ("fedhh", "server", "aggregator", "device"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            text = path.read_text()
            if "_pb2" not in path.name and ("authoriz" in text.lower()
                                            or "compare_digest" in text):
                found.append((str(path.relative_to(ROOT)), tuple(ast.walk(ast.parse(text)))))
    return tuple(found)


def test_no_other_module_reads_or_writes_authorization_metadata() -> None:
    # The metadata key appears in the code of fedhh.rpc.credentials only.
    found = [f"{path}:{node.lineno}" for path, nodes in _nodes() for node in nodes
             if isinstance(node, ast.Constant) and isinstance(node.value, str)
             and node.value.lower() == "authorization"]
    assert found and all(f.startswith("fedhh/rpc/credentials.py:") for f in found), found



def _called(node: ast.AST) -> str:
    """The name a call calls (``f(...)``: f, ``m.f(...)``: f), else ""."""
    if not isinstance(node, ast.Call):
        return ""
    return getattr(node.func, "id", getattr(node.func, "attr", ""))


def test_only_the_credentials_module_compares_a_presented_bearer() -> None:
    # (before, the coordinator's admin and selector token checks compared bearer(...) with
    # hmac.compare_digest themselves, beside credentials.presents: a copy of the rule)
    found = [f"{path}:{node.lineno}" for path, nodes in _nodes() for node in nodes
             if isinstance(node, ast.Call) and _called(node) == "compare_digest"
             and any(_called(inner) == "bearer" for arg in node.args for inner in ast.walk(arg))]
    assert len(found) == 1 and found[0].startswith("fedhh/rpc/credentials.py:"), found
