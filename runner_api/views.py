"""The Runner's endpoints: parse, call one service, answer (DESIGN §5)."""

from __future__ import annotations

from rest_framework.exceptions import AuthenticationFailed, ParseError, ValidationError
from rest_framework.parsers import JSONParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cloudpivot.api import flatten_errors
from cloudpivot.exceptions import InvalidSpec
from runner_api import bootstrap, protocol_v1
from runner_api.authentication import BootstrapSecretAuthentication, RunnerCredentialAuthentication
from runner_api.limits import request_size_refusal
from runner_api.serializers import EventsInputSerializer, HeartbeatInputSerializer, LogsInputSerializer
from tasks.services import runner_reports
from tasks.services.logs import log_append


class BoundedJSONParser(JSONParser):
    """JSON whose nesting Python cannot follow is a 400 (parse_error), not a RecursionError and a 500."""

    def parse(self, stream, media_type=None, parser_context=None):
        try:
            return super().parse(stream, media_type, parser_context)
        except RecursionError:
            raise ParseError("JSON parse error - nested too deeply") from None


class RunnerView(APIView):
    protocol = 1  # the v1 endpoints answer only attempts started before v1 was retired (runner_api/protocol_v1.py)
    authentication_classes = [RunnerCredentialAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [BoundedJSONParser]
    throttle_classes: list = []
    schema = None  # machine protocol, documented in docs/runner.md, not part of the user API schema

    def dispatch(self, request, *args, **kwargs):
        """Too large a body is refused (413) before authentication or parsing read any of it."""
        return request_size_refusal(request) or super().dispatch(request, *args, **kwargs)

    def initial(self, request, *args, **kwargs):
        super().initial(request, *args, **kwargs)
        if self.protocol == 1:
            protocol_v1.refuse_if_retired(request.user.attempt)

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
        try:
            data = self.validated(EventsInputSerializer, request)
        except ValidationError as exc:
            # The Runner needs to know which event will never be taken, to record it once and move on.
            errors = flatten_errors(exc.detail)
            raise InvalidSpec(
                f"{errors[0]['field']}: {errors[0]['message']}",
                errors=errors,
                extra={"rejected_seq": first_rejected_seq(request.data, exc.detail)},
            ) from None
        acked = runner_reports.runner_events_apply(attempt=request.auth, events=data["events"])
        return Response(
            {"acked_seq": acked, "stop_requested": runner_reports.runner_stop_requested(attempt=request.auth)}
        )


def first_rejected_seq(body, detail) -> int | None:
    """The seq of the first event the serializer refused, when it has a usable one."""
    failures = detail.get("events") if isinstance(detail, dict) else None
    sent = body.get("events") if isinstance(body, dict) else None
    if isinstance(failures, list):  # DRF lists per-item errors, or maps them by index
        failures = dict(enumerate(failures))
    if not isinstance(failures, dict) or not isinstance(sent, list):
        return None
    for index in sorted(key for key, failure in failures.items() if failure and isinstance(key, int)):
        seq = sent[index].get("seq") if index < len(sent) and isinstance(sent[index], dict) else None
        if isinstance(seq, int) and not isinstance(seq, bool):
            return seq
    return None


class LogsView(RunnerView):
    def post(self, request: Request) -> Response:
        data = self.validated(LogsInputSerializer, request)
        next_offset = log_append(attempt=request.auth, stream=data["stream"], offset=data["offset"], data=data["data"])
        return Response(
            {"next_offset": next_offset, "stop_requested": runner_reports.runner_stop_requested(attempt=request.auth)}
        )


class BootstrapView(RunnerView):
    """Exchange a VM's one-time bootstrap secret for its attempt credential; the secret then stops working.
    POST /runner/v2/bootstrap (the host program's); /runner/v1/bootstrap for VMs booted before v1 was retired."""

    authentication_classes = [BootstrapSecretAuthentication]

    def post(self, request: Request) -> Response:
        try:
            attempt = bootstrap.bootstrap_exchange(secret=request.auth, peer=request.META.get("REMOTE_ADDR") or "")
        except bootstrap.BootstrapRefused as exc:
            raise AuthenticationFailed(f"Bootstrap refused: {exc}.") from None
        return Response({"credential": bootstrap.attempt_credential(attempt), "attempt": attempt.external_name})
