"""The privacy-spend chart, drawn on the server as SVG (no script, no external asset). Colours
and fonts come from the page's style sheet through class names; every text is escaped."""

from __future__ import annotations

import math

from fedhh_coordinator.dashboard.markup import Html, fmt, join, number
from fedhh_coordinator.dashboard.results import RunSpend

WIDTH, HEIGHT = 640, 260
LEFT, RIGHT, TOP, BOTTOM = 52, 16, 14, 36


def _ticks(top: float, count: int = 4) -> list[float]:
    """Round tick values from 0 to at least ``top``."""
    raw = top / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 2.5, 5, 10) if m * magnitude >= raw)
    return [step * i for i in range(count + 2) if step * (i - 1) < top]


def spend_chart(spend: RunSpend) -> Html:
    """Per-round epsilon (bars), the composed total after each round (line) and the target
    (dashed), over the run's declared rounds."""
    slots = max(spend.rounds, len(spend.charges), 1)
    finite = [v for c in spend.charges for v in (c.epsilon, c.cumulative) if math.isfinite(v)]
    ticks = _ticks(max([spend.eps_agg, *finite]) * 1.05)
    top = ticks[-1]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    slot_w = plot_w / slots

    def y(value: float) -> float:
        return TOP + plot_h * (1 - min(value, top) / top)

    parts = [fmt('<line class="grid" x1="{x1}" x2="{x2}" y1="{y}" y2="{y}"/>'
                 '<text class="tick" x="{tx}" y="{ty}" text-anchor="end">{label}</text>',
                 x1=LEFT, x2=WIDTH - RIGHT, y=f"{y(t):.1f}", tx=LEFT - 6,
                 ty=f"{y(t) + 4:.1f}", label=f"{t:g}") for t in ticks]
    points = []
    for i, charge in enumerate(spend.charges):
        x = LEFT + slot_w * i
        title = (f"{charge.label}: eps {number(charge.epsilon, 3)} alone, "
                 f"{number(charge.cumulative, 3)} in total, {charge.contributors} contributors")
        if math.isfinite(charge.epsilon):
            parts.append(fmt('<rect class="bar" x="{x}" y="{y}" width="{w}" height="{h}">'
                             '<title>{title}</title></rect>',
                             x=f"{x + slot_w * 0.2:.1f}", y=f"{y(charge.epsilon):.1f}",
                             w=f"{slot_w * 0.6:.1f}",
                             h=f"{TOP + plot_h - y(charge.epsilon):.1f}", title=title))
        if math.isfinite(charge.cumulative):
            points.append((x + slot_w / 2, y(charge.cumulative), title))
    for i in range(slots):
        parts.append(fmt('<text class="tick" x="{x}" y="{y}" text-anchor="middle">R{n}</text>',
                         x=f"{LEFT + slot_w * (i + 0.5):.1f}", y=HEIGHT - BOTTOM + 16, n=i + 1))
    if points:
        path = " ".join(f"{px:.1f},{py:.1f}" for px, py, _ in points)
        parts.append(fmt('<polyline class="total" points="{p}"/>', p=path))
        parts += [fmt('<circle class="total-dot" cx="{x}" cy="{y}" r="4"><title>{t}</title>'
                       '</circle>', x=f"{px:.1f}", y=f"{py:.1f}", t=title)
                  for px, py, title in points]
    target = y(spend.eps_agg)
    parts.append(fmt('<line class="target" x1="{x1}" x2="{x2}" y1="{y}" y2="{y}"/>'
                     '<text class="target-label" x="{x2}" y="{ty}" text-anchor="end">'
                     'target eps {eps}</text>',
                     x1=LEFT, x2=WIDTH - RIGHT, y=f"{target:.1f}", ty=f"{target - 5:.1f}",
                     eps=f"{spend.eps_agg:g}"))
    parts.append(fmt('<text class="axis-label" x="{x}" y="{y}" text-anchor="middle">'
                     'rounds</text>', x=LEFT + plot_w / 2, y=HEIGHT - 4))
    label = (f"Privacy spent: {number(spend.spent, 3)} of eps {spend.eps_agg:g} after "
             f"{len(spend.charges)} of {spend.rounds} rounds")
    return fmt('<svg class="chart" viewBox="0 0 {w} {h}" role="img" aria-label="{label}">'
               '{body}</svg>', w=WIDTH, h=HEIGHT, label=label, body=join(parts))

