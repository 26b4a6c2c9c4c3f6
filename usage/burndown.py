"""A month's budget burn-down as inline SVG: the budget left at the end of each day so far (solid) beside an
even spend to zero at the month's end (dashed). Server-rendered like the metric charts; no JavaScript."""

from __future__ import annotations

import calendar
from decimal import Decimal

from django.utils.html import format_html
from django.utils.safestring import SafeString

from usage.budgets import BudgetStatus

WIDTH, HEIGHT = 480, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 12, 26


def burndown_svg(status: BudgetStatus) -> SafeString:
    year, month = (int(part) for part in status.month.split("-"))
    days = calendar.monthrange(year, month)[1]
    budget = status.budget or Decimal(1)
    low = min(Decimal(0), *(budget - used for _, used in status.burn)) if status.burn else Decimal(0)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def point(day: int, left: Decimal) -> str:
        x = LEFT + plot_w * day / days
        y = TOP + plot_h * float((budget - left) / (budget - low))
        return f"{x:.1f},{y:.1f}"

    actual = " ".join([point(0, budget)] + [point(d.day, budget - used) for d, used in status.burn])
    left_now = budget - status.used
    label = (
        f"Budget burn-down for {status.month}: {status.used} of {status.budget} core-hours used, "
        f"{status.remaining} left, {len(status.burn)} of {days} days"
    )
    return format_html(
        '<figure class="chart" data-burndown data-days="{n}">'
        '<figcaption>Core-hours left in {month} <span class="muted">(budget {budget}; now {left})</span></figcaption>'
        '<svg viewBox="0 0 {w} {h}" width="100%" role="img" aria-label="{label}" xmlns="http://www.w3.org/2000/svg">'
        '<g class="axes" stroke="currentColor" stroke-opacity="0.4" fill="none">'
        '<line x1="{l}" y1="{t}" x2="{l}" y2="{b}"></line><line x1="{l}" y1="{zero}" x2="{r}" y2="{zero}"></line></g>'
        '<g class="labels" fill="currentColor" font-size="11">'
        '<text x="{lx}" y="{ty}" text-anchor="end">{budget}</text>'
        '<text x="{lx}" y="{zero}" text-anchor="end">0</text>'
        '<text x="{l}" y="{tx}" text-anchor="start">1</text>'
        '<text x="{r}" y="{tx}" text-anchor="end">{days}</text></g>'
        '<polyline class="even" points="{even}" fill="none" stroke="currentColor" stroke-opacity="0.4" '
        'stroke-dasharray="4 3"></polyline>'
        '<polyline class="actual" points="{actual}" fill="none" stroke="currentColor" stroke-width="1.8"></polyline>'
        "</svg></figure>",
        n=len(status.burn),
        month=status.month,
        budget=status.budget,
        left=f"{left_now:.2f}",
        w=WIDTH,
        h=HEIGHT,
        label=label,
        l=LEFT,
        r=WIDTH - RIGHT,
        t=TOP,
        b=TOP + plot_h,
        zero=point(0, Decimal(0)).split(",")[1],
        lx=LEFT - 6,
        ty=TOP + 10,
        tx=HEIGHT - 8,
        days=days,
        even=f"{point(0, budget)} {point(days, Decimal(0))}",
        actual=actual,
    )
