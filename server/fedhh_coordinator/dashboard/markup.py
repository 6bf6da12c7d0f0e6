"""HTML built so that every value is escaped unless it is already markup.

``Html`` marks text that is already safe HTML; ``fmt`` fills a template whose placeholders are
escaped unless their value is ``Html``. Heavy hitters, device labels, reasons and errors are
user data: they reach a page only through ``esc`` (directly or through ``fmt``), so an item such
as ``<script>`` is shown as text. The Content-Security-Policy (no inline scripts) is the second
line of defence, not the first.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable
from typing import Any


class Html(str):
    """A string of safe HTML."""

    __slots__ = ()


def esc(value: Any) -> Html:
    """``value`` as HTML text (quotes escaped too, for attribute values); Html as it is."""
    if isinstance(value, Html):
        return value
    return Html(html.escape(str(value), quote=True))


def fmt(template: str, **values: Any) -> Html:
    """``template.format`` with every value escaped (Html values inserted as they are)."""
    return Html(template.format(**{name: esc(value) for name, value in values.items()}))


def join(parts: Iterable[Html], separator: str = "") -> Html:
    return Html(separator.join(esc(part) for part in parts))


def number(value: float, digits: int = 2) -> str:
    """A figure for people: fixed digits, a dash for what is not a finite number."""
    if value is None or not math.isfinite(value):
        return "–"
    return f"{value:,.{digits}f}"


def duration(seconds: float | None) -> str:
    if seconds is None or not math.isfinite(seconds) or seconds < 0:
        return "–"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {secs:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def percent(part: float, whole: float) -> str:
    if not whole or not math.isfinite(part) or not math.isfinite(whole):
        return "–"
    return f"{100 * part / whole:.0f}%"
