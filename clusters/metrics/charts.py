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
    plot_w, plot_h = plot_size(HEIGHT)
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
    body = format_html(
        '<polyline points="{}" fill="none" stroke="currentColor" stroke-width="1.5"></polyline>'
        '<g class="last" fill="currentColor">{}</g>',
        polyline,
        dots,
    )
    return format_html(
        '<figure class="chart" data-metric-chart="{title}" data-points="{n}">'
        '<figcaption>{title} <span class="muted">({unit}; now {last})</span></figcaption>{svg}</figure>',
        title=chart.title,
        n=len(points),
        unit=chart.unit,
        last=_number(last),
        svg=frame(
            height=HEIGHT,
            label=label,
            base=TOP + plot_h,
            y_labels=(_number(high), _number(low)),
            x_labels=(_time(t0), _time(t1)),
            body=body,
        ),
    )


def plot_size(height: int) -> tuple[int, int]:
    """The plot's width and height inside a chart `height` high, the room for the labels taken off."""
    return WIDTH - LEFT - RIGHT, height - TOP - BOTTOM


def frame(
    *,
    height: int,
    label: str,
    base: object,
    y_labels: tuple[object, object],
    x_labels: tuple[object, object],
    body: SafeString,
) -> SafeString:
    """The <svg> every chart of ours shares (the metric charts, the budget burn-down): the y axis, the x axis
    along `base` (the bottom, or the zero line), the y axis's top and `base` labels, the x axis's first and
    last labels, and `body`, the chart's own lines. `label` is read out to screen readers."""
    plot_h = plot_size(height)[1]
    return format_html(
        '<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{label}" xmlns="http://www.w3.org/2000/svg">'
        '<g class="axes" stroke="currentColor" stroke-opacity="0.4" fill="none">'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}"></line><line x1="{l}" y1="{base}" x2="{r}" y2="{base}"></line></g>'
        '<g class="labels" fill="currentColor" font-size="11">'
        '<text x="{lx}" y="{ty}" text-anchor="end">{top}</text>'
        '<text x="{lx}" y="{base}" text-anchor="end">{bottom}</text>'
        '<text x="{l}" y="{tx}" text-anchor="start">{first}</text>'
        '<text x="{r}" y="{tx}" text-anchor="end">{last}</text></g>'
        "{body}</svg>",
        w=WIDTH,
        h=height,
        label=label,
        l=LEFT,
        r=WIDTH - RIGHT,
        t=TOP,
        b=TOP + plot_h,
        base=base,
        lx=LEFT - 6,
        ty=TOP + 10,
        tx=height - 8,
        top=y_labels[0],
        bottom=y_labels[1],
        first=x_labels[0],
        last=x_labels[1],
        body=body,
    )
