"""The server's work per device message, counted in Python calls (deterministic, unlike time):
a worker hands every device's every message to ``SecAggServer.handle`` and then asks
``can_close_early``, so neither may cost a call per share or per stage (issue 30)."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable

from secagg_testkit import drive_to, small_cohort

from fedhh.secagg.device import SHARE_CIPHERTEXT_BYTES
from fedhh.secagg.messages import ShareBundle, ShareKeysResponse, Stage
from fedhh.secagg.server import SecAggServer


def _calls(fn: Callable[[], object]) -> int:
    """The calls ``fn()`` makes, Python functions and builtins alike, as cProfile counts them
    (a generator's every resumption is one)."""
    count = 0

    def profile(frame: object, event: str, arg: object) -> None:
        nonlocal count
        if event in ("call", "c_call"):
            count += 1

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return count


def _packed(response: ShareKeysResponse) -> ShareKeysResponse:
    """``response`` with its shares as the ShareBundle a worker takes off the session stream."""
    shares = response.shares
    return dataclasses.replace(response, shares=ShareBundle.sent_by(
        response.device_id, tuple(s.dst for s in shares),
        b"".join(s.ciphertext for s in shares), SHARE_CIPHERTEXT_BYTES))


def _share_keys_calls(n: int) -> int:
    """Calls to accept device 1's packed shares to its n - 1 neighbours (a complete graph)."""
    driver = drive_to(small_cohort(n=n, k=n - 1, t=n // 2 + 1, n_min=n // 2 + 1),
                      Stage.SHARE_KEYS)
    server: SecAggServer = driver.server
    response = _packed(driver.devices[1].share_keys(driver.pending[1]))  # type: ignore[arg-type]
    accepted: list[bool] = []
    calls = _calls(lambda: accepted.append(server.handle(Stage.SHARE_KEYS, response)))
    assert accepted == [True]
    return calls


def test_packed_shares_cost_the_same_calls_whatever_their_number() -> None:
    """A device's packed shares are checked in C loops: 7 and 31 neighbours' shares cost the
    same calls (22). Before, each recipient's type was checked by a generator, a call per share
    (36 and 60; ~88 a device at the load test's k)."""
    assert _share_keys_calls(8) == _share_keys_calls(32)


def test_a_message_and_the_close_check_after_it_cost_a_few_calls() -> None:
    """``handle`` and ``can_close_early`` for a consistency signature, the smallest message:
    before, ``handle`` built a table of five bound methods, ``_check`` read both ids through
    ``getattr`` and the type through two ``isinstance``, and ``received`` counted every
    stage's messages to keep one: 36 calls, 25 now (10 of them the signature's check in
    PyNaCl)."""
    driver = drive_to(small_cohort(device_auth=True, consistency_check=True),
                      Stage.CONSISTENCY_CHECK)
    server: SecAggServer = driver.server
    message = driver.devices[1].consistency_check(driver.pending[1])  # type: ignore[arg-type]

    def both() -> None:
        assert server.handle(Stage.CONSISTENCY_CHECK, message)
        assert not server.can_close_early()

    assert _calls(both) <= 28
