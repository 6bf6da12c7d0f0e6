"""One reader of a call's bearer token for every port (fedhh.rpc.credentials): the aggregator's
and the combiner's control token, the coordinator's admin and selector tokens and the devices'
credentials. Before, the aggregator read the control token with a copy of its own that drifted:
it took only the first authorization entry and had no length bound, so metadata of any length
holding the token with trailing spaces was accepted there and refused by the coordinator."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from fedhh.errors import AuthenticationError
from fedhh.rpc.credentials import MAX_AUTHORIZATION, bearer, bearer_metadata, presents
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
    assert aggregator is coordinator is accepted


def test_a_refusal_says_what_is_wrong() -> None:
    with pytest.raises(AuthenticationError, match="missing 'authorization: Bearer"):
        bearer(())
    with pytest.raises(AuthenticationError, match="too long"):
        bearer((("authorization", "Bearer " + "x" * MAX_AUTHORIZATION),))
    with pytest.raises(AuthenticationError, match="invalid admin token"):
        auth.check_admin(bearer_metadata(b"w" * 32), TOKEN)
    assert bearer(bearer_metadata("7.abc")) == "7.abc"


def test_no_other_module_reads_or_writes_authorization_metadata() -> None:
    # The metadata key appears in the code of fedhh.rpc.credentials only.
    found = []
    for folder in ("fedhh", "server", "aggregator", "device"):
        for path in (ROOT / folder).rglob("*.py"):
            if "_pb2" in path.name:
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if (isinstance(node, ast.Constant) and isinstance(node.value, str)
                        and node.value.lower() == "authorization"):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert found and all(f.startswith("fedhh/rpc/credentials.py:") for f in found), found
