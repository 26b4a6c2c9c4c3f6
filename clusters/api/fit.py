"""The "Will it fit?" answer of the dry runs (`?dry_run=true` on POST /api/v1/tasks and /api/v1/instances)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiParameter
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request

DRY_RUN = OpenApiParameter(
    "dry_run",
    bool,
    OpenApiParameter.QUERY,
    description="true: check the request and answer 200 with its fit verdict; nothing is created. "
    "A bad request is still a 400 naming the field.",
)


class FitLimitSerializer(serializers.Serializer):
    resource = serializers.CharField(help_text="cpu (cores), memory_mb, gpu, disk_gb, tasks, instances, pods, jobs …")
    requested = serializers.FloatField()
    available = serializers.FloatField(allow_null=True, help_text="Free now; null for a fixed ceiling (a node).")
    limit = serializers.FloatField(allow_null=True)
    source = serializers.CharField(
        help_text='"project alpha\'s quota on k3s-lab", "ResourceQuota tasks/compute", "LimitRange …", '
        '"node allocatable …", "OpenStack quota", "flavor … vs the largest compute host"'
    )


class FitVerdictSerializer(serializers.Serializer):
    outcome = serializers.ChoiceField(choices=["starts_now", "waits", "never_fits", "refused_now"])
    message = serializers.CharField(help_text='In words: "Waits: 3 ahead, held by …"')
    limit = FitLimitSerializer(allow_null=True, help_text="The limiting resource and its numbers; null: none.")
    queued_ahead = serializers.IntegerField(help_text="PENDING tasks ahead on the cloud (tasks only).")
    notes = serializers.ListField(child=serializers.CharField(), help_text="Limits that could not be read.")


def dry_run(request: Request) -> bool:
    """`?dry_run=true` (or 1); absent, false or 0: a real request. Anything else is a 400 on the parameter, never
    a real create by mistake."""
    values = request.query_params.getlist("dry_run")
    if not values:
        return False
    answers = {value.lower(): value.lower() in ("true", "1") for value in values}
    if any(value not in ("true", "1", "false", "0") for value in answers) or len(set(answers.values())) > 1:
        raise ValidationError({"dry_run": ["write true or false (once)"]})
    return next(iter(answers.values()))
