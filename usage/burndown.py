"""A month's budget burn-down as inline SVG: the budget left at the end of each day so far (solid) beside an
even spend to zero at the month's end (dashed). Server-rendered in the metric charts' frame (axes and labels:
clusters.metrics.charts.frame); no JavaScript."""

from __future__ import annotations

import calendar
from decimal import Decimal

from django.utils.html import format_html
from django.utils.safestring import SafeString

from clusters.metrics.charts import LEFT, TOP, frame, plot_size
from usage.budgets import BudgetStatus

HEIGHT = 180  # the metric charts' frame (clusters.metrics.charts), a little taller


def burndown_svg(status: BudgetStatus) -> SafeString:
    year, month = (int(part) for part in status.month.split("-"))
    days = calendar.monthrange(year, month)[1]
    budget = status.budget or Decimal(1)
    low = min(Decimal(0), *(budget - used for _, used in status.burn)) if status.burn else Decimal(0)
    plot_w, plot_h = plot_size(HEIGHT)

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
        "{svg}</figure>",
        n=len(status.burn),
        month=status.month,
        budget=status.budget,
        left=f"{left_now:.2f}",
        svg=frame(
            height=HEIGHT,
            label=label,
            base=point(0, Decimal(0)).split(",")[1],
            y_labels=(status.budget, 0),
            x_labels=(1, days),
            body=format_html(
                '<polyline class="even" points="{}" fill="none" stroke="currentColor" stroke-opacity="0.4" '
                'stroke-dasharray="4 3"></polyline>'
                '<polyline class="actual" points="{}" fill="none" stroke="currentColor" stroke-width="1.8"></polyline>',
                f"{point(0, budget)} {point(days, Decimal(0))}",
                actual,
            ),
        ),
    )
