"""A cloud's own quota refusal, said the way CloudPivot says its own: "quota exceeded: <resource> <asked>/<left>".

Nova words it "Quota exceeded for instances: Requested 1, but already used 0 of 0 instances"
(several resources at once: "for cores, instances: Requested 2, 1, but already used 19, 0 of
20, 0 cores, instances"). Anything else is passed on in the cloud's own words.
"""

from __future__ import annotations

import re

NOVA_QUOTA = re.compile(
    r"Quota exceeded for (?P<resources>[\w, -]+?): Requested (?P<asked>[\d, ]+), "
    r"but already used (?P<used>[\d, ]+) of (?P<limits>[\d, ]+)"
)


def quota_message(cloud_message: str) -> str:
    found = NOVA_QUOTA.search(cloud_message)
    if found is None:
        return f"quota exceeded: the cloud refused: {cloud_message}"
    columns = [[item.strip() for item in found[name].split(",")] for name in ("resources", "asked", "used", "limits")]
    if len({len(column) for column in columns}) != 1:
        return f"quota exceeded: the cloud refused: {cloud_message}"
    parts = [
        f"{resource} {asked}/{max(int(limit) - int(used), 0)} left"
        for resource, asked, used, limit in zip(*columns, strict=True)
    ]
    return f"quota exceeded: {', '.join(parts)} (the cloud's own quota: {cloud_message})"
