"""Series as server-rendered inline SVG: a polyline with its axes labelled. No JavaScript, no chart library."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from django.utils import timezone
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString

WIDTH, HEIGHT = 480, 170
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 26  # room for the axis labels
MAX_POINTS = 288  # more points than pixels help nobody: average them down


@dataclass(frozen=True)
class Chart:
    title: str
    unit: str
    points: list[tuple[dt.datetime, float]]
    scale: float = 1.0  # shown value = value / scale (bytes → GiB)


def thin(points: list[tuple[dt.datetime, float]], most: int = MAX_POINTS) -> list[tuple[dt.datetime, float]]:
    """Average neighbouring points so that at most `most` remain (keeps the shape, drops the noise)."""
    if len(points) <= most:
        return points
    size = len(points) / most
    out = []
    for i in range(most):
        chunk = points[int(i * size) : int((i + 1) * size)] or [points[-1]]
        out.append((chunk[len(chunk) // 2][0], sum(v for _, v in chunk) / len(chunk)))
    return out


def _number(value: float) -> str:
    return (
        f"{value:.0f}" if abs(value) >= 100 or value == int(value) else f"{value:.2g}" if value < 1 else f"{value:.1f}"
    )


def _time(moment: dt.datetime) -> str:
    return timezone.localtime(moment).strftime("%H:%M")


def svg(chart: Chart) -> SafeString:
    """The chart as an <svg> element: y from 0 (or the minimum, if negative) to the maximum, x over time."""
    points = [(t, v / chart.scale) for t, v in thin(chart.points)]
    if not points:
        return format_html('<p class="empty">No samples yet.</p>')
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    t0, t1 = points[0][0], points[-1][0]
    span = max((t1 - t0).total_seconds(), 1.0)
    low = min(0.0, min(v for _, v in points))
    high = max(v for _, v in points)
    if high == low:
        high = low + 1
    coords = [
        (LEFT + plot_w * (t - t0).total_seconds() / span, TOP + plot_h * (1 - (v - low) / (high - low)))
        for t, v in points
    ]
    if len(coords) == 1:  # one sample: a dot at the right edge
        coords = [(LEFT + plot_w, coords[0][1])]
    polyline = " ".join(f"{x:.1f},{y:.1f}" for x, y in coords)
    last = points[-1][1]
    label = f"{chart.title}: {_number(last)} {chart.unit} now, {len(points)} points from {_time(t0)} to {_time(t1)}"
    dots = format_html_join(
        "", '<circle cx="{}" cy="{}" r="2"></circle>', [(f"{x:.1f}", f"{y:.1f}") for x, y in coords[-1:]]
    )
    return format_html(
        '<figure class="chart" data-metric-chart="{title}" data-points="{n}">'
        '<figcaption>{title} <span class="muted">({unit}; now {last})</span></figcaption>'
        '<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{label}" xmlns="http://www.w3.org/2000/svg">'
        '<g class="axes" stroke="currentColor" stroke-opacity="0.4" fill="none">'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}"></line><line x1="{l}" y1="{b}" x2="{r}" y2="{b}"></line></g>'
        '<g class="labels" fill="currentColor" font-size="11">'
        '<text x="{lx}" y="{ty}" text-anchor="end">{high}</text>'
        '<text x="{lx}" y="{b}" text-anchor="end">{low}</text>'
        '<text x="{l}" y="{tx}" text-anchor="start">{start}</text>'
        '<text x="{r}" y="{tx}" text-anchor="end">{end}</text></g>'
        '<polyline points="{polyline}" fill="none" stroke="currentColor" stroke-width="1.5"></polyline>'
        '<g class="last" fill="currentColor">{dots}</g>'
        "</svg></figure>",
        title=chart.title,
        n=len(points),
        unit=chart.unit,
        last=_number(last),
        w=WIDTH,
        h=HEIGHT,
        label=label,
        l=LEFT,
        r=WIDTH - RIGHT,
        t=TOP,
        b=TOP + plot_h,
        lx=LEFT - 6,
        ty=TOP + 10,
        tx=HEIGHT - 8,
        high=_number(high),
        low=_number(low),
        start=_time(t0),
        end=_time(t1),
        polyline=polyline,
        dots=dots,
    )
