"""django-q2 entry point of the orphan scan (thin: the work is in orphans.scan)."""

from __future__ import annotations


def scan() -> str:
    from orphans.scan import orphans_scan

    return orphans_scan()
