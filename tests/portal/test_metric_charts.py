"""Charts on the cloud page: server-rendered SVG from sampled data, and a "no samples yet" state."""

from __future__ import annotations

import datetime as dt
import re

from django.utils import timezone

from clusters.metrics.charts import Chart, svg, thin
from clusters.metrics.sampling import sample_all
from tests.builders import submit


def test_no_samples_yet(pages, world):
    page = pages("bob").get("/clouds/local/").content.decode()
    assert "No samples yet" in page and "<svg" not in page


def test_sampled_figures_become_charts(pages, world):
    submit(world.bob)
    for minutes_ago in (20, 10, 0):
        sample_all(now=timezone.now() - dt.timedelta(minutes=minutes_ago))
    page = pages("bob").get("/clouds/local/").content.decode()
    charts = dict(re.findall(r'data-metric-chart="([^"]+)" data-points="(\d+)"', page))
    assert charts["Waiting tasks"] == "3" and charts["Active tasks"] == "3"
    polyline = re.search(r'<polyline points="([^"]+)"', page).group(1)
    assert len(polyline.split()) == 3
    assert "No samples yet" not in page
    # node figures are cloud-wide: charted for administrators only (docs/security.md)
    assert not any(title.startswith("Memory in use on ") for title in charts)
    world.alice.is_staff = True
    world.alice.save(update_fields=["is_staff"])
    admin_page = pages("alice").get("/clouds/local/").content.decode()
    admin_charts = dict(re.findall(r'data-metric-chart="([^"]+)" data-points="(\d+)"', admin_page))
    assert any(title.startswith("Memory in use on ") for title in admin_charts)


def test_the_svg_scales_time_and_value_onto_its_axes():
    t0 = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)
    points = [(t0, 0.0), (t0 + dt.timedelta(minutes=30), 2.0), (t0 + dt.timedelta(minutes=60), 4.0)]
    html = str(svg(Chart("Queue <wait>", "s", points)))
    coords = [tuple(map(float, p.split(","))) for p in re.search(r'<polyline points="([^"]+)"', html).group(1).split()]
    xs, ys = [x for x, _ in coords], [y for _, y in coords]
    assert xs == sorted(xs) and xs[1] - xs[0] == xs[2] - xs[1]  # even in time
    assert ys[0] > ys[1] > ys[2] and ys[0] - ys[1] == ys[1] - ys[2]  # higher value, higher on the page
    assert "Queue &lt;wait&gt;" in html and "<wait>" not in html  # titles are escaped
    assert ">4<" in html and ">0<" in html  # the y axis runs from 0 to the maximum


def test_long_series_are_averaged_down():
    t0 = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    points = [(t0 + dt.timedelta(minutes=i), float(i % 2)) for i in range(1440)]
    thinned = thin(points, 288)
    assert len(thinned) == 288 and all(0.3 < v < 0.7 for _, v in thinned)
