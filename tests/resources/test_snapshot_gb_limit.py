"""A project's snapshot GB limit (Quota.max_snapshot_gb): the oldest unused snapshots are pruned until the
total fits, each prune audited with the words (issue 30: max_snapshot_gb had no test)."""

from __future__ import annotations

import datetime as dt

import pytest
from django.utils import timezone

from cloudpivot.accounts.models import AuditEntry, Quota
from resources.models import Snapshot
from resources.services.snapshots import GB, snapshots_prune_over_quota
from tests.builders import snapshot_row

pytestmark = pytest.mark.django_db


def test_snapshots_over_the_gb_limit_prune_the_oldest_until_the_total_fits(world):
    Quota.objects.create(project=world.alpha, max_snapshot_gb=2)
    now = timezone.now()
    sizes = {"old": 1 * GB, "middle": 1 * GB, "new": GB // 2}  # 2.5 GB in all
    rows = {}
    for age, (name, size) in enumerate(reversed(sizes.items())):
        rows[name] = snapshot_row(
            connection=world.local, project=world.alpha, owner=world.bob, name=name, size_bytes=size, image_id=""
        )
        Snapshot.objects.filter(pk=rows[name].pk).update(created_at=now - dt.timedelta(hours=age))
    pruned = snapshots_prune_over_quota(project=world.alpha, connection=world.local, keep=rows["new"])
    assert pruned == [str(rows["old"].pk)]  # 1.5 GB left: within 2 GB
    states = dict(Snapshot.objects.values_list("name", "status"))
    assert states == {"old": "deleted", "middle": "available", "new": "available"}
    entry = AuditEntry.objects.get(action="resources:snapshot-pruned")
    assert entry.object_ref == str(rows["old"].pk)
    assert entry.details["why"] == f"{int(2.5 * GB)} bytes over the limit of 2 GB (project alpha on all clouds)"
