"""{% metric_chart chart %}: one sampled series as inline SVG (clusters.metrics.charts)."""

from django import template
from django.utils.safestring import SafeString

from clusters.metrics.charts import Chart, svg

register = template.Library()


@register.simple_tag
def metric_chart(chart: Chart) -> SafeString:
    return svg(chart)
