"""Your SSH public keys: list, add (checked: never a private key), delete. Instances get them at create."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from cloudpivot.accounts.models import SshKey
from cloudpivot.accounts.ssh_keys import MAX_LENGTH, ssh_key_create, ssh_key_delete
from cloudpivot.json_types import JSONTypes


class SshKeySerializer(serializers.ModelSerializer):
    class Meta:
        model = SshKey
        fields = ["id", "name", "key_type", "fingerprint", "public_key", "created_at"]
        read_only_fields = fields


class SshKeyCreateInputSerializer(JSONTypes, serializers.Serializer):
    name = serializers.CharField(max_length=64, help_text="Unique among your keys; instance creates name it.")
    public_key = serializers.CharField(
        max_length=MAX_LENGTH,  # the parser's own limit, so the schema states it
        allow_blank=True,
        trim_whitespace=False,
        help_text="One OpenSSH public key line (a .pub file's contents).",
    )


class SshKeyViewSet(
    mixins.ListModelMixin, mixins.RetrieveModelMixin, mixins.DestroyModelMixin, viewsets.GenericViewSet
):
    """Your own keys only: another user's key is a 404. Deleting a key leaves instances that have it alone."""

    serializer_class = SshKeySerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):  # schema generation has no user
            return SshKey.objects.none()
        return SshKey.objects.filter(user=self.request.user)

    @extend_schema(request=SshKeyCreateInputSerializer, responses={201: SshKeySerializer})
    def create(self, request: Request) -> Response:
        data = SshKeyCreateInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        key = ssh_key_create(user=request.user, **data.validated_data)
        return Response(SshKeySerializer(key).data, status=status.HTTP_201_CREATED)

    def perform_destroy(self, instance: SshKey) -> None:
        ssh_key_delete(key=instance)
