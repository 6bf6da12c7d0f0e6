"""The server's work per device message, counted in Python calls (deterministic, unlike time):
a worker hands every device's every message to ``SecAggServer.handle`` and then asks
``can_close_early``, so neither may cost a call per share or per stage (issue 30)."""

from __future__ import annotations

from call_count_kit import calls
from secagg_testkit import drive_to, packed_shares, small_cohort

from fedhh.secagg.messages import Stage
from fedhh.secagg.server import SecAggServer


def _share_keys_calls(n: int) -> int:
    """Calls to accept device 1's packed shares to its n - 1 neighbours (a complete graph)."""
    driver = drive_to(small_cohort(n=n, k=n - 1, t=n // 2 + 1, n_min=n // 2 + 1),
                      Stage.SHARE_KEYS)
    server: SecAggServer = driver.server
    request = driver.pending[1]
    response = packed_shares(driver.devices[1].share_keys(request))  # type: ignore[arg-type]
    accepted: list[bool] = []
    made = calls(lambda: accepted.append(server.handle(Stage.SHARE_KEYS, response)))
    assert accepted == [True]
    return made


def test_packed_shares_cost_the_same_calls_whatever_their_number() -> None:
    """A device's packed shares are checked in C loops: 7 and 31 neighbours' shares cost the
    same calls (21). Before, each recipient's type was checked by a generator, a call per share
    (35 and 59; ~88 a device at the load test's k)."""
    assert _share_keys_calls(8) == _share_keys_calls(32)


def test_a_message_and_the_close_check_after_it_cost_a_few_calls() -> None:
    """``handle`` and ``can_close_early`` for a consistency signature, the smallest message:
    before, ``handle`` built a table of five bound methods, ``_check`` read both ids through
    ``getattr`` and the type through two ``isinstance``, and ``received`` counted every
    stage's messages to keep one: 35 calls, 24 now (10 of them the signature's check in
    PyNaCl)."""
    driver = drive_to(small_cohort(device_auth=True, consistency_check=True),
                      Stage.CONSISTENCY_CHECK)
    server: SecAggServer = driver.server
    message = driver.devices[1].consistency_check(driver.pending[1])  # type: ignore[arg-type]

    def both() -> None:
        assert server.handle(Stage.CONSISTENCY_CHECK, message)
        assert not server.can_close_early()

    assert calls(both) <= 27
