"""Tokens, projects and quotas for the signed-in user."""

from __future__ import annotations

import datetime as dt

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from cloudpivot.accounts import quotas
from cloudpivot.accounts.models import ApiToken, Project, Quota
from cloudpivot.accounts.selectors import project_role, projects_visible_to
from cloudpivot.accounts.services import api_token_create, api_token_revoke
from cloudpivot.json_types import JSONTypes
from tasks.selectors import task_quota_usage


class ApiTokenSerializer(serializers.ModelSerializer):
    class Meta:
        model = ApiToken
        fields = ["id", "name", "hint", "created_at", "expires_at", "last_used_at", "revoked_at", "is_active"]
        read_only_fields = fields


class ApiTokenCreatedSerializer(ApiTokenSerializer):
    """The new token, with its secret: shown this once, stored only hashed."""

    token = serializers.CharField(read_only=True, help_text="Send as `Authorization: Bearer <token>`.")

    class Meta(ApiTokenSerializer.Meta):
        fields = [*ApiTokenSerializer.Meta.fields, "token"]
        read_only_fields = fields


class ApiTokenCreateInputSerializer(JSONTypes, serializers.Serializer):
    name = serializers.CharField(max_length=100)
    expires_in_days = serializers.IntegerField(min_value=1, max_value=3650, required=False, allow_null=True)


class ApiTokenViewSet(mixins.ListModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet):
    """Your own tokens. Creating answers the token once; DELETE revokes (the record stays, for the audit)."""

    serializer_class = ApiTokenSerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return ApiToken.objects.none()
        return ApiToken.objects.filter(user=self.request.user)

    @extend_schema(request=ApiTokenCreateInputSerializer, responses={201: ApiTokenCreatedSerializer})
    def create(self, request: Request) -> Response:
        data = ApiTokenCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        days = data.validated_data.get("expires_in_days")
        token, plain = api_token_create(
            user=request.user,
            name=data.validated_data["name"],
            expires_in=dt.timedelta(days=days) if days else None,
            minted_with=request.auth if isinstance(request.auth, ApiToken) else None,
        )
        return Response(ApiTokenSerializer(token).data | {"token": plain}, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: ApiToken) -> None:
        api_token_revoke(token=instance)


def _footprint(footprint: quotas.Footprint) -> dict:
    return {
        "tasks": footprint.tasks,
        "vcpu": float(footprint.vcpu),
        "memory_mb": footprint.memory_mb,
        "gpus": footprint.gpus,
    }


class QuotaSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug")
    cloud = serializers.CharField(source="connection.cloud_id", default=None)
    used = serializers.SerializerMethodField()

    class Meta:
        model = Quota
        fields = ["project", "cloud", "max_tasks", "max_vcpu", "max_memory_mb", "max_gpus", "max_instances", "used"]
        read_only_fields = fields

    def get_used(self, quota: Quota) -> dict:
        # vCPU and memory limits hold tasks and instances together: `used` counts both (accounts.quotas).
        where = {"project_id": quota.project_id, "connection_id": quota.connection_id}
        return _footprint(task_quota_usage(**where) + quotas.shared_usage(**where, besides="tasks"))


class ProjectSerializer(serializers.ModelSerializer):
    role = serializers.SerializerMethodField()
    members = serializers.IntegerField(source="memberships.count", read_only=True)
    quotas = QuotaSerializer(many=True, read_only=True)

    class Meta:
        model = Project
        fields = ["slug", "name", "role", "members", "quotas"]
        read_only_fields = fields

    def get_role(self, project: Project) -> str | None:
        return project_role(user=self.context["request"].user, project=project)


class ProjectViewSet(viewsets.ReadOnlyModelViewSet):
    """Your projects, your role in each, and their quotas with what is in use."""

    serializer_class = ProjectSerializer
    lookup_field = "slug"
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Project.objects.none()
        return projects_visible_to(user=self.request.user).prefetch_related("quotas__connection")


class QuotaViewSet(viewsets.ReadOnlyModelViewSet):
    """Quotas of your projects with what is in use now. Admins change them in the admin."""

    serializer_class = QuotaSerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return Quota.objects.none()
        return Quota.objects.filter(project__in=projects_visible_to(user=self.request.user)).select_related(
            "project", "connection"
        )
