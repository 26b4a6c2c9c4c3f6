"""Will it fit? An instance create's verdict before it is made (`POST /api/v1/instances?dry_run=true`, the
launch form): it starts now, is refused now (instances are not queued: a request over what is left is
refused until something is freed) or never fits, naming the limit and its numbers.

The request goes through the create's own checks (a bad one is the same 400), then CloudPivot's instance
quotas (resources.quotas, with what the project's tasks hold of vCPU and memory) and the cloud's own limits
(clusters.fit.cloud_limits: the OpenStack project quota, the flavor against the largest compute host, a
Kubernetes ResourceQuota for a KubeVirt VM). Nothing is written.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.models import AbstractBaseUser

from cloudpivot.accounts.quotas import quota_scope, quotas_for, shared_usage
from clusters import fit
from clusters.backends.base import FitLimit
from resources import quotas
from resources.services.requests import instance_create_check

# InstanceFootprint fields → the verdict's resource names
RESOURCES = {"instances": "instances", "vcpus": "cpu", "memory_mb": "memory_mb", "volume_gb": "disk_gb"}


def instance_fit(*, user: AbstractBaseUser, data: dict[str, Any], image_needed: bool = True) -> fit.Verdict:
    connection, project, flavor, _image, asked, _keys = instance_create_check(
        user=user, data=data, image_needed=image_needed
    )
    held = None
    for quota in quotas_for(project_id=project.pk, connection_id=connection.pk):
        used = quotas.instance_usage(project_id=project.pk, connection_id=quota.connection_id)
        tasks = shared_usage(project_id=project.pk, connection_id=quota.connection_id, besides="instances")
        used.vcpus, used.memory_mb = used.vcpus + tasks.vcpu, used.memory_mb + tasks.memory_mb
        for limit_field, amount_field, _, _ in quotas.LIMITS:
            most, want = getattr(quota, limit_field), getattr(asked, amount_field)
            if most is None or want <= 0:
                continue
            source = f"project {project.slug}'s quota {quota_scope(quota)}"
            left = max(float(most) - float(getattr(used, amount_field)), 0.0)
            limit = FitLimit(RESOURCES[amount_field], float(want), left, float(most), source)
            if limit.never:
                return fit.never_fits(limit)
            held = held or (limit if limit.not_now else None)
    cloud_asked = {
        "instances": 1,
        "cpu": flavor.vcpus,
        "memory_mb": flavor.memory_mb,
        "disk_gb": flavor.disk_gb,
        "flavor": flavor.name,
        "jobs": 0,
    }
    cloud, notes = fit.cloud_limits(connection, cloud_asked)
    never = fit.first_never(cloud)
    if never:
        return fit.never_fits(never, notes=notes)
    held = held or fit.first_not_now(cloud)
    if held:
        return fit.refused_now(held, notes=notes)
    return fit.starts_now(notes=notes)
