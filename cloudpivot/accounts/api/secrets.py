"""Project secrets over the API: names and dates for members; create, replace, delete for project admins.

A value goes in (POST, PUT) and never comes out: no answer of these endpoints holds it.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cloudpivot.accounts.models import Project, ProjectSecret, secret_name_validator
from cloudpivot.accounts.project_secrets import (
    MAX_VALUE_BYTES,
    project_secrets,
    secret_create,
    secret_delete,
    secret_for_update,
    secret_update,
)
from cloudpivot.accounts.selectors import projects_visible_to
from cloudpivot.exceptions import NotFound
from cloudpivot.json_types import JSONTypes


class ProjectSecretSerializer(serializers.ModelSerializer):
    created_by = serializers.CharField(source="created_by.username", default=None)
    updated_by = serializers.CharField(source="updated_by.username", default=None)

    class Meta:
        model = ProjectSecret
        fields = ["name", "created_at", "updated_at", "created_by", "updated_by"]
        read_only_fields = fields


VALUE_HELP = f"The secret's value (at most {MAX_VALUE_BYTES} bytes). Write-only: never shown again."


class SecretCreateInputSerializer(JSONTypes, serializers.Serializer):
    name = serializers.CharField(
        max_length=63,
        validators=[secret_name_validator],
        help_text="Lowercase letters, digits and '-', e.g. db-password.",
    )
    value = serializers.CharField(write_only=True, trim_whitespace=False, help_text=VALUE_HELP)


class SecretValueInputSerializer(JSONTypes, serializers.Serializer):
    value = serializers.CharField(write_only=True, trim_whitespace=False, help_text=VALUE_HELP)


def _project(request: Request, slug: str) -> Project:
    project = projects_visible_to(user=request.user).filter(slug=slug).first()
    if project is None:
        raise NotFound(f"no project {slug}")
    return project


class ProjectSecretListApi(APIView):
    """The project's secrets (names, dates, who saved them); project admins add one with POST."""

    @extend_schema(responses={200: ProjectSecretSerializer(many=True)})
    def get(self, request: Request, slug: str) -> Response:
        return Response(ProjectSecretSerializer(project_secrets(project=_project(request, slug)), many=True).data)

    @extend_schema(request=SecretCreateInputSerializer, responses={201: ProjectSecretSerializer})
    def post(self, request: Request, slug: str) -> Response:
        project = _project(request, slug)
        data = SecretCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        secret = secret_create(user=request.user, project=project, **data.validated_data)
        return Response(ProjectSecretSerializer(secret).data, status=status.HTTP_201_CREATED)


class ProjectSecretDetailApi(APIView):
    """One secret: its name and dates; PUT replaces its value, DELETE removes it (project admins)."""

    @extend_schema(responses={200: ProjectSecretSerializer})
    def get(self, request: Request, slug: str, name: str) -> Response:
        secret = secret_for_update(project=_project(request, slug), name=name)
        return Response(ProjectSecretSerializer(secret).data)

    @extend_schema(request=SecretValueInputSerializer, responses={200: ProjectSecretSerializer})
    def put(self, request: Request, slug: str, name: str) -> Response:
        project = _project(request, slug)
        data = SecretValueInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        secret = secret_update(user=request.user, project=project, name=name, value=data.validated_data["value"])
        return Response(ProjectSecretSerializer(secret).data)

    @extend_schema(responses={204: None})
    def delete(self, request: Request, slug: str, name: str) -> Response:
        secret_delete(user=request.user, project=_project(request, slug), name=name)
        return Response(status=status.HTTP_204_NO_CONTENT)
