"""Usage over the API: rows per project, user and cloud for a month (JSON or CSV), and a project's budget.

Members see their projects' usage (platform staff every project's); budgets are set by platform admins in
the admin, like quotas, and read here by the project's members.
"""

from __future__ import annotations

import csv
import io

from django.http import HttpResponse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cloudpivot.accounts.models import Project
from cloudpivot.accounts.selectors import projects_visible_to
from cloudpivot.exceptions import NotFound
from cloudpivot.json_types import JSONTypes
from usage.accounting import GROUPS, month_bounds, usage_rows
from usage.budgets import budget_status
from usage.models import ProjectBudget

MONTH_PATTERN = r"^2[0-9]{3}-(0[1-9]|1[0-2])$"  # years 2000-2999: a month CloudPivot can have run in
BY_PATTERN = r"^(project|user|cloud)(,(project|user|cloud)){0,2}$"
COLUMNS = ["project", "user", "cloud", "core_hours", "gpu_hours", "memory_gb_hours", "attempts", "instances"]


class UsageQuerySerializer(JSONTypes, serializers.Serializer):
    month = serializers.RegexField(
        MONTH_PATTERN,
        required=False,
        help_text="YYYY-MM (UTC), e.g. 2026-12; the current month if left out.",
        error_messages={"invalid": "write the month as YYYY-MM, e.g. 2026-12"},
    )
    project = serializers.SlugField(
        required=False, help_text="Only this project's rows; all of your projects' if left out."
    )
    by = serializers.RegexField(
        BY_PATTERN,
        required=False,
        error_messages={"invalid": "choose from project, user, cloud (comma-separated)"},
        default=",".join(GROUPS),
        help_text="What to sum per, comma-separated from project, user, cloud (default all three); the others "
        'read "*".',
    )

    def validate_month(self, value: str) -> str:
        try:
            month_bounds(value)
        except ValueError as exc:
            raise serializers.ValidationError(str(exc)) from None
        return value

    def validate_by(self, value: str) -> tuple[str, ...]:
        parts = tuple(part.strip() for part in value.split(",") if part.strip())
        unknown = [part for part in parts if part not in GROUPS]
        if unknown or not parts:
            raise serializers.ValidationError(f"choose from {', '.join(GROUPS)} (comma-separated)")
        return parts


class UsageRowSerializer(serializers.Serializer):
    project = serializers.CharField()
    user = serializers.CharField()
    cloud = serializers.CharField()
    core_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    gpu_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    memory_gb_hours = serializers.DecimalField(max_digits=14, decimal_places=2)
    attempts = serializers.IntegerField()
    instances = serializers.IntegerField()


class UsageSerializer(serializers.Serializer):
    month = serializers.CharField()
    start = serializers.DateTimeField()
    end = serializers.DateTimeField()
    results = UsageRowSerializer(many=True)


def _usage(request: Request) -> dict:
    params = UsageQuerySerializer(data=request.query_params)
    params.is_valid(raise_exception=True)
    start, end = month_bounds(params.validated_data.get("month"))
    projects = projects_visible_to(user=request.user)
    if slug := params.validated_data.get("project"):
        projects = projects.filter(slug=slug)  # a filter, as on the task list: none of yours, no rows
    project_ids = list(projects.values_list("pk", flat=True))
    rows = usage_rows(start=start, end=end, project_ids=project_ids, by=params.validated_data["by"])
    return {"month": start.strftime("%Y-%m"), "start": start, "end": end, "results": rows}


class UsageApi(APIView):
    """Core-hours, GPU-hours and memory-GB-hours of a month, per project, user and cloud (docs/usage.md)."""

    @extend_schema(parameters=[UsageQuerySerializer], responses={200: UsageSerializer})
    def get(self, request: Request) -> Response:
        return Response(UsageSerializer(_usage(request)).data)


class UsageExportApi(APIView):
    """The same rows as CSV, for a spreadsheet or an invoice."""

    @extend_schema(parameters=[UsageQuerySerializer], responses={(200, "text/csv"): OpenApiTypes.STR})
    def get(self, request: Request) -> HttpResponse:
        usage = _usage(request)
        text = io.StringIO()
        writer = csv.writer(text)
        writer.writerow(["month", *COLUMNS])
        for row in usage["results"]:
            writer.writerow([usage["month"], *(row[column] for column in COLUMNS)])
        response = HttpResponse(text.getvalue(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="cloudpivot-usage-{usage["month"]}.csv"'
        return response


class BurnPointSerializer(serializers.Serializer):
    day = serializers.DateField()
    used_core_hours = serializers.DecimalField(max_digits=14, decimal_places=2)


class BudgetSerializer(serializers.Serializer):
    project = serializers.SerializerMethodField()
    month = serializers.CharField()
    core_hours = serializers.DecimalField(max_digits=12, decimal_places=2, source="budget")
    used_core_hours = serializers.DecimalField(max_digits=14, decimal_places=2, source="used")
    remaining_core_hours = serializers.DecimalField(max_digits=14, decimal_places=2, source="remaining")
    percent = serializers.DecimalField(max_digits=8, decimal_places=1)
    state = serializers.ChoiceField(choices=["ok", "warning", "exhausted"])
    hard_stop = serializers.BooleanField()
    held_reason = serializers.CharField(help_text="Why new tasks wait, while the hard stop holds them; empty if not.")
    burn = serializers.SerializerMethodField(help_text="Core-hours used by the end of each day of the month so far.")

    def get_project(self, status) -> str:
        return self.context["project"]

    @extend_schema_field(BurnPointSerializer(many=True))
    def get_burn(self, status) -> list[dict]:
        return [{"day": day.isoformat(), "used_core_hours": f"{used:.2f}"} for day, used in status.burn]


class ProjectBudgetApi(APIView):
    """The project's monthly budget and how much of it is used (platform admins set budgets in the admin)."""

    @extend_schema(responses={200: BudgetSerializer})
    def get(self, request: Request, slug: str) -> Response:
        project: Project | None = projects_visible_to(user=request.user).filter(slug=slug).first()
        if project is None:
            raise NotFound(f"no project {slug}")
        budget = ProjectBudget.objects.filter(project=project).first()
        if budget is None:
            raise NotFound(f"project {slug} has no budget: platform admins set one in the admin (Project budgets)")
        return Response(BudgetSerializer(budget_status(budget), context={"project": slug}).data)
