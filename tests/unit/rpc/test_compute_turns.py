"""The devices of one process compute in turns of the event loop, the loop reading its
sockets between two turns (``fedhh.rpc.participation.ComputeTurns``): a fleet whose devices
all got a stage's request at once no longer runs every answer before it looks at a connection
(at 50,000 devices such a turn outlasted the framed port's 20 s connect timeout), and the
answers of one turn still go on together."""

from __future__ import annotations

import asyncio
import functools
import socket
from collections.abc import Callable

import pytest
import uvloop

from fedhh.rpc.participation import ROUNDS_OVER, ComputeTurns, RoundOver, computed_in_turn

DEVICES = 50
LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop, "uvloop": uvloop.new_event_loop}


async def _answers_before_a_read(turns: ComputeTurns | None) -> tuple[int, list[int]]:
    """DEVICES devices ready at once each compute an answer; the first one's answer makes a
    socket readable (a peer's bytes arriving while the devices compute). Returns how many
    answers were computed before the loop read that socket, and the order of the answers."""
    loop = asyncio.get_running_loop()
    ours, peers = socket.socketpair()
    ours.setblocking(False)
    answered: list[int] = []
    read = loop.create_future()

    def on_readable() -> None:
        ours.recv(64)
        loop.remove_reader(ours)
        read.set_result(len(answered))

    def compute(device: int) -> int:
        if not answered:
            peers.send(b"a frame")
        answered.append(device)
        return device

    loop.add_reader(ours, on_readable)
    try:
        answers = await asyncio.gather(*(computed_in_turn(turns, functools.partial(compute, d))
                                         for d in range(DEVICES)))
        assert answers == list(range(DEVICES))
        return await read, answered
    finally:
        loop.remove_reader(ours)
        ours.close()
        peers.close()


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_the_loop_reads_its_sockets_between_two_turns(loop: str) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        computed, order = runner.run(_answers_before_a_read(ComputeTurns(slice_s=0.0)))
    # A turn of no time computes one answer; the bytes that arrived during it were read
    # before the turn after next (asyncio queues the next turn before the sockets' callbacks,
    # uvloop runs them first)...
    assert computed <= 2
    # ...and the devices answered in the order they asked (first come, first served).
    assert order == list(range(DEVICES))


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_a_turn_computes_answers_until_its_slice_has_passed(loop: str) -> None:
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        computed, _ = runner.run(_answers_before_a_read(ComputeTurns(slice_s=3600.0)))
    assert computed == DEVICES


@pytest.mark.parametrize("loop", sorted(LOOPS))
def test_without_turns_every_answer_comes_first(loop: str) -> None:
    """What a device alone in its process does, and what a fleet did before."""
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        computed, _ = runner.run(_answers_before_a_read(None))
    assert computed == DEVICES


def test_the_answers_of_one_turn_go_on_in_the_same_turn() -> None:
    """So their messages leave in one write per connection (the frame writer flushes once a
    turn), as when each computed in place."""
    async def scenario() -> set[int]:
        loop = asyncio.get_running_loop()
        turns, turn, resumed = ComputeTurns(slice_s=3600.0), [0], set[int]()

        def count() -> None:
            turn[0] += 1
            if len(resumed) < DEVICES:
                loop.call_soon(count)

        async def device(d: int) -> None:
            await turns.run(lambda: d)
            resumed.add(turn[0])

        loop.call_soon(count)
        await asyncio.gather(*(device(d) for d in range(DEVICES)))
        return resumed

    assert len(asyncio.run(scenario())) == 1


def test_an_answer_that_raises_is_the_callers_and_the_turns_go_on() -> None:
    async def scenario() -> list[str]:
        turns, done = ComputeTurns(slice_s=0.0), []

        def fails() -> str:
            raise ValueError("a refused request")

        async def device(name: str, compute: Callable[[], str]) -> None:
            try:
                done.append(await turns.run(compute))
            except ValueError:
                done.append(f"{name} refused")

        await asyncio.gather(device("a", fails), device("b", lambda: "b answered"))
        return done

    assert asyncio.run(scenario()) == ["a refused", "b answered"]


def test_a_device_that_leaves_while_waiting_is_skipped() -> None:
    async def scenario() -> list[str]:
        turns, computed = ComputeTurns(slice_s=0.0), []

        def compute(name: str) -> str:
            computed.append(name)
            return name

        first = asyncio.ensure_future(turns.run(lambda: compute("first")))
        leaving = asyncio.ensure_future(turns.run(lambda: compute("leaving")))
        staying = asyncio.ensure_future(turns.run(lambda: compute("staying")))
        await asyncio.sleep(0)  # (all three queued: the first turn is yet to run)
        leaving.cancel()
        assert await first == "first" and await staying == "staying"
        with pytest.raises(asyncio.CancelledError):
            await leaving
        return computed

    assert asyncio.run(scenario()) == ["first", "staying"]


def test_answers_queued_for_a_round_known_aborted_are_not_computed() -> None:
    """Once a device of the process is told its round aborted, the answers its other devices
    queued for that round meet RoundOver uncomputed; another round's, and answers tagged with
    no round, are computed as before."""
    async def scenario() -> tuple[list[str], list[str | BaseException]]:
        turns, computed = ComputeTurns(slice_s=0.0), []

        def compute(name: str) -> str:
            computed.append(name)
            if name == "a1":  # told while the others wait in the queue
                turns.round_aborted(b"round-a", "too_few_devices")
            return name

        queued = [turns.run(functools.partial(compute, name), session)
                  for name, session in (("a1", b"round-a"), ("a2", b"round-a"),
                                        ("b1", b"round-b"), ("a3", b"round-a"), ("x", None))]
        outcomes = await asyncio.gather(*queued, return_exceptions=True)
        return computed, outcomes

    computed, outcomes = asyncio.run(scenario())
    assert computed == ["a1", "b1", "x"]
    assert outcomes[0] == "a1" and outcomes[2] == "b1" and outcomes[4] == "x"
    for over in (outcomes[1], outcomes[3]):
        assert isinstance(over, RoundOver) and over.reason == "too_few_devices"


def test_the_aborted_rounds_remembered_are_bounded() -> None:
    turns = ComputeTurns()
    for i in range(ROUNDS_OVER + 5):
        turns.round_aborted(i.to_bytes(4, "big"), f"r{i}")
    assert turns.abort_reason((0).to_bytes(4, "big")) is None  # the oldest forgotten
    assert turns.abort_reason((ROUNDS_OVER + 4).to_bytes(4, "big")) == f"r{ROUNDS_OVER + 4}"
    assert sum(turns.abort_reason(i.to_bytes(4, "big")) is not None
               for i in range(ROUNDS_OVER + 5)) == ROUNDS_OVER
