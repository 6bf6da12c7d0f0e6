"""The declared length and digest of a masked vector are checked once for both transports
(fedhh_aggregator.device_messages.declared_upload: the unary upload's header and the session
stream's vector; before, each kept a copy of the two checks)."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

from fedhh.secagg import ProtocolViolation, Violation
from fedhh_aggregator import servicers, session_stream
from fedhh_aggregator.device_messages import declared_upload

ROUND: Any = SimpleNamespace(config=SimpleNamespace(dimension=100, modulus_bits=32))
VECTOR_BYTES = 100 * 4  # 32-bit masks


def test_the_declared_length_and_digest_are_checked() -> None:
    assert declared_upload(ROUND, VECTOR_BYTES, b"d" * 32) == b"d" * 32
    for total, digest, says in ((VECTOR_BYTES - 1, b"d" * 32, "declared 399 bytes, the "
                                 "round's vectors have 400"),
                                (VECTOR_BYTES, b"d" * 31, "vector_sha256 must be 32 bytes"),
                                (VECTOR_BYTES, b"", "vector_sha256 must be 32 bytes")):
        with pytest.raises(ProtocolViolation, match=says) as refused:
            declared_upload(ROUND, total, digest)
        assert refused.value.reason == Violation.WRONG_LENGTH


def test_both_transports_use_the_one_check() -> None:
    for module in (servicers, session_stream):
        source = inspect.getsource(module)
        assert "declared_upload(" in source
        assert "vector_sha256 must be" not in source
