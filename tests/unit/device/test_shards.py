"""`fedhh device --users`: ranges, shards i/N, and auto/N shards claimed with lock files."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from fedhh.errors import ConfigError
from fedhh_device.shards import ShardClaim, auto_count, shard_range, user_range


@pytest.mark.parametrize(("users", "count"), [(200, 3), (1387, 4), (7, 7), (10, 6), (1, 1)])
def test_shards_are_disjoint_cover_every_user_and_are_never_empty(users: int,
                                                                  count: int) -> None:
    shards = [shard_range(i, count, users) for i in range(count)]
    assert [u for shard in shards for u in shard] == list(range(users))
    sizes = {len(shard) for shard in shards}
    assert min(sizes) >= 1 and max(sizes) - min(sizes) <= 1


def test_user_specs() -> None:
    assert user_range("10:20", 100) == range(10, 20)
    assert user_range(":", 100) == range(100)
    assert user_range("1/2", 100) == range(50, 100)
    assert auto_count("auto/4") == 4
    assert auto_count("0:4") is None


@pytest.mark.parametrize("text", ["2/2", "-1/2", "a:b", "5:200", "20:10", "3/101", "1/0",
                                  "random:5"])
def test_bad_user_specs_are_refused_by_name(text: str) -> None:
    with pytest.raises(ConfigError, match=r"--users|shards"):
        user_range(text, 100)


@pytest.mark.parametrize("text", ["auto/0", "auto/x", "auto/"])
def test_bad_auto_counts_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="auto/N"):
        auto_count(text)


def test_claims_take_distinct_shards_and_a_released_shard_is_taken_again(tmp_path: Path) -> None:
    claims = [ShardClaim(tmp_path, 3) for _ in range(4)]
    assert [c.try_claim() for c in claims] == [0, 1, 2, None]
    assert claims[1].state_dir == tmp_path / "shard-1-of-3"
    claims[1].release()
    assert claims[3].try_claim() == 1
    for claim in claims:
        claim.release()


def test_a_spare_process_stands_by_until_a_shard_is_released(tmp_path: Path) -> None:
    holder = ShardClaim(tmp_path, 1)
    assert holder.try_claim() == 0

    async def scenario() -> tuple[int | None, int | None]:
        stop = asyncio.Event()
        spare = ShardClaim(tmp_path, 1)
        waiting = asyncio.create_task(spare.claim(stop, poll_s=0.01))
        await asyncio.sleep(0)  # let the spare find the shard held
        assert not waiting.done()
        holder.release()
        taken = await asyncio.wait_for(waiting, 10)
        spare.release()
        stop.set()  # a stop while standing by ends the wait without a shard
        holder.try_claim()
        stopped = await asyncio.wait_for(ShardClaim(tmp_path, 1).claim(stop, poll_s=0.01), 10)
        return taken, stopped

    assert asyncio.run(scenario()) == (0, None)
    holder.release()
