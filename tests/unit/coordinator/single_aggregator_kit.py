"""A stand-in aggregation service for tests that drive the coordinator's Runner with no round
reaching the service (not a test module)."""

from __future__ import annotations


class SingleAggregator:
    """An aggregation service that answers (a single aggregator); no round reaches it."""

    address = "aggregator:7100"

    async def workers(self) -> None:
        return None
