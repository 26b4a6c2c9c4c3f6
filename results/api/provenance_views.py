"""Provenance API: an attempt's signed bundle, and the installation's public key to verify it by (docs/api.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cloudpivot.query_params import NoEmptyQueryParameters
from results.api.serializers import OutputsQuerySerializer
from results.provenance import task_provenance
from results.provenance_key import public_key

SignatureSerializer = inline_serializer(
    "ProvenanceSignature",
    {
        "alg": serializers.ChoiceField(choices=["Ed25519"]),
        "key_id": serializers.CharField(help_text="SHA-256 (hex) of the raw public key."),
        "value": serializers.CharField(help_text="The detached signature of the bundle's canonical bytes, base64."),
    },
)
ProvenanceSerializer = inline_serializer(
    "Provenance",
    {
        "bundle": serializers.JSONField(
            help_text="What ran: the document's SHA-256, the normalized spec, the image and its digest, the Runner "
            "and host facts, inputs, the output manifest, times and exit code (docs/data.md, Provenance)."
        ),
        "signature": SignatureSerializer,
    },
)
PublicKeySerializer = inline_serializer(
    "ProvenanceKey",
    {
        "alg": serializers.ChoiceField(choices=["Ed25519"]),
        "key_id": serializers.CharField(help_text="SHA-256 (hex) of the raw public key."),
        "public_key_pem": serializers.CharField(help_text="SubjectPublicKeyInfo PEM."),
        "public_key_raw": serializers.CharField(help_text="The 32 raw bytes, base64."),
    },
)


class TaskProvenanceApi(APIView):
    """The signed provenance bundle of a task's ended attempt (default: the latest). 409 `not_finished` while the
    attempt runs."""

    @extend_schema(parameters=[OutputsQuerySerializer], responses={200: ProvenanceSerializer})
    def get(self, request: Request, task_id: str) -> Response:
        params = OutputsQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        document = task_provenance(user=request.user, task_id=task_id, attempt_number=params.validated_data["attempt"])
        return Response(document)


class ProvenanceKeyApi(APIView):
    """The installation's public Ed25519 key that provenance bundles verify with. No login needed."""

    authentication_classes: list = []
    permission_classes = [AllowAny, NoEmptyQueryParameters]

    @extend_schema(auth=[], responses={200: PublicKeySerializer})
    def get(self, request: Request) -> Response:
        key = public_key()
        return Response({"alg": "Ed25519", "key_id": key.key_id, "public_key_pem": key.pem, "public_key_raw": key.raw})
