"""Metrics: the platform's figures now (figures), sampled into MetricSample (sampling), thinned out with age
(downsampling), read back as series (series), drawn as SVG (charts) and served to Prometheus (prometheus).
"""
