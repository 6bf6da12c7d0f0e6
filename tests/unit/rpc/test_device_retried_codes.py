"""Which refusals a device asks again, alike on the Python device (``RETRIED_CODES``) and the
web device (clients/web/src/round.ts's ``RETRIED``); a message over the receive cap
(RESOURCE_EXHAUSTED) is given up at once, with the aggregator's reason."""

from __future__ import annotations

import asyncio
import random
import re
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from aggregator_testkit import make_cohort

from fedhh.rpc.device_client import DeviceSession, RetryPolicy
from fedhh.rpc.participation import RETRIED_CODES
from fedhh.secagg import Stage

ROUND_TS = Path(__file__).parents[3] / "clients" / "web" / "src" / "round.ts"
# connect-web's Code names as gRPC spells them (the one that differs beyond case: Canceled).
_GRPC_NAME = {"Canceled": "CANCELLED"}


def _web_retried() -> set[str]:
    found = re.search(r"const RETRIED\b[^=]*= new Set\(\[([^\]]*)\]\)", ROUND_TS.read_text())
    assert found is not None, "round.ts defines RETRIED no longer as a Set of Codes"
    names = re.findall(r"Code\.(\w+)", found.group(1))
    return {_GRPC_NAME.get(name, re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper())
            for name in names}


def test_the_web_device_retries_the_codes_the_python_device_does() -> None:
    assert _web_retried() == {code.name for code in RETRIED_CODES}
    assert grpc.StatusCode.RESOURCE_EXHAUSTED not in RETRIED_CODES


class _OverTheCap(grpc.aio.AioRpcError):
    def __init__(self) -> None:
        super().__init__(grpc.StatusCode.RESOURCE_EXHAUSTED, grpc.aio.Metadata(),
                         grpc.aio.Metadata(), "a request above the 1048576-byte receive cap")


class _Stub:
    def __init__(self) -> None:
        self.calls = 0

    async def AwaitStage(self, request: Any, **kwargs: Any) -> Any:
        self.calls += 1
        raise _OverTheCap()


def test_a_call_over_the_receive_cap_is_made_once_even_while_its_stage_is_open() -> None:
    cohort = make_cohort(3, 8, 2, 2, n_min=2)
    stub = _Stub()
    session = DeviceSession(stub, cohort.device(1), cohort.identity_keys[1],
                            cohort.admissions[1], retry=RetryPolicy(initial_backoff_s=0.0),
                            patient_until=time.time() + 600, rng=random.Random(1))
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        asyncio.run(session.await_request(Stage.SHARE_KEYS, 0))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert stub.calls == 1
