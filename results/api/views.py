"""Outputs API: a task's manifest with fresh download links (docs/api.md)."""

from __future__ import annotations

from drf_spectacular.utils import extend_schema
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from results.api.serializers import OutputsQuerySerializer, TaskOutputsSerializer
from results.selectors import task_outputs


class TaskOutputsApi(APIView):
    """The declared outputs of a task's attempt: the manifest, checksums and freshly minted download links."""

    @extend_schema(parameters=[OutputsQuerySerializer], responses={200: TaskOutputsSerializer})
    def get(self, request: Request, task_id: str) -> Response:
        params = OutputsQuerySerializer(data=request.query_params)
        params.is_valid(raise_exception=True)
        outputs = task_outputs(user=request.user, task_id=task_id, attempt_number=params.validated_data["attempt"])
        for item in outputs["files"]:
            if "url" in item:
                item["url"] = request.build_absolute_uri(item["url"])
        return Response(TaskOutputsSerializer(outputs).data)
