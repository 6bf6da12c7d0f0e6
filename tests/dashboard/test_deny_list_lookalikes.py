"""The run page's deny list reads its items against each other (``printable_rows``), as the
heavy-hitter lists do: ``сосоа``, all Cyrillic letters that look Latin, beside ``cocoa``
showed as a second ``cocoa`` (before, each item was shown alone, ``printable``)."""

from __future__ import annotations

import re
from types import SimpleNamespace

from fedhh.config import RunConfig
from fedhh_coordinator.dashboard.pages import run_head
from fedhh_coordinator.dashboard.views import RunLine


def _listed(deny: tuple[str, ...]) -> list[str]:
    run = RunLine("r1", "done", 4, 4, "", 0.5, 1.0, 1e-6, 0.0, 1.0, "")
    detail = SimpleNamespace(line=run, config=RunConfig(), eps_local=1.0, deny=deny)
    page = str(run_head(detail))  # type: ignore[arg-type]
    return re.findall(r'<code class="listed" dir="auto">([^<]*)</code>', page)


def test_a_lookalike_of_another_deny_list_item_is_shown_apart() -> None:
    cyrillic = "\u0441\u043e\u0441\u043e\u0430"
    assert _listed(("cocoa", cyrillic)) == ["cocoa", r"\u0441\u043e\u0441\u043e\u0430"]
    assert _listed((cyrillic, "tea")) == [cyrillic, "tea"]  # (alone, it reads as itself)
