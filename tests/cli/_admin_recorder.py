"""A stand-in for the admin client (the ``recorder`` fixture, conftest.py)."""

from __future__ import annotations

from typing import Any, ClassVar


class Recorder:
    """Stands in for AdminClient: mints predictable tokens and remembers its calls."""

    calls: ClassVar[list[tuple[str, Any]]] = []
    enrolled: ClassVar[int] = 1_000_000  # (enrollment()'s count: more than any run needs)

    def __init__(self, address: str, token: bytes, ca: str | None) -> None:
        Recorder.calls.append(("connect", address))

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *_: object) -> None:
        return None

    def mint_tokens(self, count: int, ttl_s: float = 0.0, label: str = "",
                    mint_id: str = "") -> list[str]:
        Recorder.calls.append(("mint", count))
        return [f"{i:064x}" for i in range(count)]

    def enrollment(self) -> Any:
        from fedhh.v1 import coordinator_pb2 as pb

        Recorder.calls.append(("enrollment", None))
        return pb.Enrollment(devices_enrolled=Recorder.enrolled)

    def run(self, run_id: str) -> Any:
        """A run with a round that kept nothing (every figure of it 0)."""
        from fedhh.v1 import coordinator_pb2 as pb

        Recorder.calls.append(("run", run_id))
        return pb.Run(run_id=run_id, state="done", rounds=[
            pb.RoundSummary(round=1, attempt=1, state="released", participants=300)])

    def start_run(self, config: Any, run_id: str = "", timeout_s: float = 0.0) -> Any:
        """Stores the run as a coordinator with too few devices for completion rounds does:
        without them."""
        from fedhh.v1 import coordinator_pb2 as pb

        Recorder.calls.append(("start", run_id))
        stored = pb.RunConfig()
        stored.CopyFrom(config)
        stored.completion_rounds = 0
        return pb.Run(run_id=run_id, state="pending", config=stored)
