"""The Runner's endpoints: parse, call one service, answer (DESIGN §5)."""

from __future__ import annotations

from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from runner_api import bootstrap
from runner_api.authentication import BootstrapSecretAuthentication, RunnerCredentialAuthentication
from runner_api.serializers import EventsInputSerializer, HeartbeatInputSerializer, LogsInputSerializer
from tasks.services import runner_reports
from tasks.services.logs import log_append


class RunnerView(APIView):
    authentication_classes = [RunnerCredentialAuthentication]
    permission_classes = [IsAuthenticated]
    throttle_classes: list = []
    schema = None  # machine protocol, documented in docs/runner.md, not part of the user API schema

    def validated(self, serializer_class, request: Request) -> dict:
        serializer = serializer_class(data=request.data)
        serializer.is_valid(raise_exception=True)
        return serializer.validated_data


class AssignmentView(RunnerView):
    def get(self, request: Request) -> Response:
        return Response(runner_reports.runner_assignment(attempt=request.auth))


class HeartbeatView(RunnerView):
    def post(self, request: Request) -> Response:
        data = self.validated(HeartbeatInputSerializer, request)
        return Response(
            runner_reports.runner_heartbeat(
                attempt=request.auth, boot_id=data["boot_id"], pid=data["pid"], usage=data["usage"]
            )
        )


class EventsView(RunnerView):
    def post(self, request: Request) -> Response:
        data = self.validated(EventsInputSerializer, request)
        acked = runner_reports.runner_events_apply(attempt=request.auth, events=data["events"])
        return Response(
            {"acked_seq": acked, "stop_requested": runner_reports.runner_stop_requested(attempt=request.auth)}
        )


class LogsView(RunnerView):
    def post(self, request: Request) -> Response:
        data = self.validated(LogsInputSerializer, request)
        next_offset = log_append(attempt=request.auth, stream=data["stream"], offset=data["offset"], data=data["data"])
        return Response(
            {"next_offset": next_offset, "stop_requested": runner_reports.runner_stop_requested(attempt=request.auth)}
        )


class BootstrapView(RunnerView):
    """Exchange a VM's one-time bootstrap secret for its attempt credential; the secret then stops working."""

    authentication_classes = [BootstrapSecretAuthentication]

    def post(self, request: Request) -> Response:
        try:
            attempt = bootstrap.bootstrap_exchange(secret=request.auth, peer=request.META.get("REMOTE_ADDR") or "")
        except bootstrap.BootstrapRefused as exc:
            raise AuthenticationFailed(f"Bootstrap refused: {exc}.") from None
        return Response({"credential": bootstrap.attempt_credential(attempt), "attempt": attempt.external_name})
