"""django-q2 entry point of the orphan scan (thin: the work is in resources.orphan_scan)."""

from __future__ import annotations


def scan() -> str:
    from resources.orphan_scan import orphans_scan

    return orphans_scan()
