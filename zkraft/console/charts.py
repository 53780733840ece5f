"""Server-rendered SVG line charts of the sampled rates: no chart library, no JavaScript."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

from zkraft.console.rates import Scrape, rates_between

WIDTH_PX = 640
HEIGHT_PX = 160
MARGIN_PX = 36


@dataclass(frozen=True, slots=True)
class Series:
    title: str
    unit: str
    points: list[tuple[float, float]]  # (wall-clock seconds, value per second)


def rate_series(history: Sequence[Scrape]) -> list[Series]:
    """Produce (messages/s, bytes/s in) and fetch (bytes/s out) over the sampled history, all topics."""
    pairs = list(zip(history, history[1:], strict=False))
    rates = [(new.wall_s, rates_between(old, new)) for old, new in pairs]
    return [
        Series("Produce", "messages/s", [(t, r.messages_in) for t, r in rates]),
        Series("Produce", "bytes/s", [(t, r.bytes_in) for t, r in rates]),
        Series("Fetch (consumers)", "bytes/s", [(t, r.bytes_out) for t, r in rates]),
    ]


def svg_line_chart(series: Series) -> Markup:
    """One series as an inline SVG: a polyline scaled to the largest value, the axis labelled in its unit."""
    label = escape(f"{series.title}, {series.unit}")
    if len(series.points) < 2:
        return Markup(
            f'<svg class="chart" width="{WIDTH_PX}" height="{HEIGHT_PX}" role="img" aria-label="{label}">'
            f'<text x="{MARGIN_PX}" y="{HEIGHT_PX // 2}">{label}: collecting samples…</text></svg>'
        )
    first_s = series.points[0][0]
    span_s = max(series.points[-1][0] - first_s, 1e-9)
    top = max(value for _, value in series.points) or 1.0
    inner_w = WIDTH_PX - 2 * MARGIN_PX
    inner_h = HEIGHT_PX - 2 * MARGIN_PX
    coordinates = " ".join(
        f"{MARGIN_PX + (t - first_s) / span_s * inner_w:.1f},{MARGIN_PX + inner_h - value / top * inner_h:.1f}"
        for t, value in series.points
    )
    minutes = span_s / 60.0
    return Markup(
        f'<svg class="chart" width="{WIDTH_PX}" height="{HEIGHT_PX}" role="img" aria-label="{label}">'
        f'<text x="{MARGIN_PX}" y="20">{label} (max {top:,.1f}, last {series.points[-1][1]:,.1f})</text>'
        f'<line x1="{MARGIN_PX}" y1="{MARGIN_PX + inner_h}" x2="{WIDTH_PX - MARGIN_PX}" '
        f'y2="{MARGIN_PX + inner_h}" stroke="#999"/>'
        f'<polyline fill="none" stroke="#2a6db0" stroke-width="2" points="{coordinates}"/>'
        f'<text x="{MARGIN_PX}" y="{HEIGHT_PX - 8}">{minutes:.1f} min ago</text>'
        f'<text x="{WIDTH_PX - MARGIN_PX - 30}" y="{HEIGHT_PX - 8}">now</text></svg>'
    )
