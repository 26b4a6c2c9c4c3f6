"""The event feed API (one ordered stream of what happened in the caller's projects) and webhook endpoints."""

from __future__ import annotations

import uuid

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from cloudpivot.exceptions import NotFound
from notifications import webhooks
from notifications.api.long_poll import Hold, async_view, page_document
from notifications.api.serializers import (
    DeliveryQuerySerializer,
    EmailPreferenceSerializer,
    FeedPageSerializer,
    FeedQuerySerializer,
    WebhookDeliverySerializer,
    WebhookEndpointCreatedSerializer,
    WebhookEndpointInputSerializer,
    WebhookEndpointSerializer,
    WebhookEndpointUpdateSerializer,
)
from notifications.feed import FeedFilter, feed_page
from notifications.models import EmailPreference, WebhookEndpoint


class FeedView(APIView):
    """An async view on the outside (long_poll.async_view): a long-poll waits without a thread or a connection."""

    @classmethod
    def as_view(cls, **initkwargs):
        return async_view(super().as_view(**initkwargs))

    @extend_schema(
        operation_id="events_feed",
        parameters=[FeedQuerySerializer],
        responses={200: FeedPageSerializer},
        examples=[
            OpenApiExample(
                "a state change",
                value={
                    "events": [
                        {
                            "id": 42,
                            "type": "task.state",
                            "time": "2026-12-01T19:00:00Z",
                            "project": "alpha",
                            "task": "3f8e0c1e-0000-4000-8000-000000000000",
                            "instance": None,
                            "operation": None,
                            "message": "exit code 0",
                            "data": {"task_seq": 7, "task_state": "SUCCEEDED", "from": "RUNNING", "to": "SUCCEEDED"},
                        }
                    ],
                    "next_after": 42,
                    "has_more": False,
                },
                response_only=True,
            )
        ],
    )
    def get(self, request: Request) -> Response:
        """Task events, operation states and set events of your projects, in one order; page or follow with `after`."""
        query = FeedQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        params = query.validated_data
        where = FeedFilter(
            types=tuple(params["type"]),
            projects=tuple(params["project"]),
            task=str(params["task"]) if params.get("task") else None,
            instance=str(params["instance"]) if params.get("instance") else None,
        )
        rows, next_after, more = feed_page(user=request.user, where=where, after=params["after"], limit=params["limit"])
        response = Response(page_document(rows, next_after, more))
        if not rows and params["wait"] > 0:
            # the wait itself is not here: the async wrapper holds it on the event loop (long_poll.py)
            hold = Hold(
                user=request.user, where=where, after=params["after"], limit=params["limit"], wait=params["wait"]
            )
            hold.claim()  # 429 when the caller holds their long-polls' share already
            response.hold = hold
        return response


class WebhookEndpointViewSet(viewsets.GenericViewSet):
    """Webhook endpoints of the projects you administer. The secret is shown once: at creation and rotation."""

    serializer_class = WebhookEndpointSerializer
    pagination_class = None

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return WebhookEndpoint.objects.none()
        return webhooks.endpoints_visible_to(user=self.request.user)

    def get_object(self) -> WebhookEndpoint:
        return webhooks.endpoint_get_for_admin(user=self.request.user, endpoint_id=self.kwargs["pk"])

    def list(self, request: Request) -> Response:
        return Response(WebhookEndpointSerializer(self.get_queryset(), many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        return Response(WebhookEndpointSerializer(self.get_object()).data)

    @extend_schema(request=WebhookEndpointInputSerializer, responses={201: WebhookEndpointCreatedSerializer})
    def create(self, request: Request) -> Response:
        """Subscribe a URL to the project's events from now on; the answer carries the signing secret, once."""
        data = WebhookEndpointInputSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        endpoint, secret = webhooks.webhook_endpoint_create(user=request.user, **data.validated_data)
        return Response(WebhookEndpointSerializer(endpoint).data | {"secret": secret}, status=status.HTTP_201_CREATED)

    @extend_schema(request=WebhookEndpointUpdateSerializer, responses={200: WebhookEndpointSerializer})
    def partial_update(self, request: Request, pk: str) -> Response:
        """Pause or resume (`is_active`), or change the event types."""
        endpoint = self.get_object()
        data = WebhookEndpointUpdateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        webhooks.webhook_endpoint_update(endpoint=endpoint, **data.validated_data)
        return Response(WebhookEndpointSerializer(endpoint).data)

    def destroy(self, request: Request, pk: str) -> Response:
        self.get_object().delete()
        return Response(status=status.HTTP_204_NO_CONTENT)

    @extend_schema(request=None, responses={200: WebhookEndpointCreatedSerializer})
    @action(detail=True, methods=["post"], url_path="rotate-secret")
    def rotate_secret(self, request: Request, pk: str) -> Response:
        """A new signing secret (shown this once); the old one stops signing at once."""
        endpoint = self.get_object()
        secret = webhooks.webhook_secret_rotate(endpoint=endpoint)
        return Response(WebhookEndpointSerializer(endpoint).data | {"secret": secret})

    @extend_schema(parameters=[DeliveryQuerySerializer], responses={200: WebhookDeliverySerializer(many=True)})
    @action(detail=True, methods=["get"])
    def deliveries(self, request: Request, pk: str) -> Response:
        """The latest deliveries, newest first: state, attempts, last answer and error."""
        endpoint = self.get_object()
        query = DeliveryQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        rows = endpoint.deliveries.select_related("event").order_by("-created_at")
        if query.validated_data.get("state"):
            rows = rows.filter(state=query.validated_data["state"])
        return Response(WebhookDeliverySerializer(rows[: query.validated_data["limit"]], many=True).data)

    @extend_schema(request=None, responses={202: WebhookDeliverySerializer})
    @action(detail=True, methods=["post"], url_path=r"deliveries/(?P<delivery_id>[0-9a-f-]{36})/redeliver")
    def redeliver(self, request: Request, pk: str, delivery_id: str) -> Response:
        """Send one delivery again soon (same webhook-id), e.g. after fixing the receiver."""
        try:
            uuid.UUID(delivery_id)  # the path's pattern lets 36 hex digits or dashes through, not only UUIDs
        except ValueError:
            raise NotFound(f"delivery {delivery_id} not found") from None
        delivery = self.get_object().deliveries.select_related("event").filter(pk=delivery_id).first()
        if delivery is None:
            raise NotFound(f"delivery {delivery_id} not found")
        delivery = webhooks.delivery_redeliver(delivery=delivery)
        return Response(WebhookDeliverySerializer(delivery).data, status=status.HTTP_202_ACCEPTED)


class EmailPreferenceView(APIView):
    """Your email notifications: `task_end` none|all|failures, `operation_failed` true|false."""

    def preference(self, request: Request) -> EmailPreference:
        return EmailPreference.objects.filter(user=request.user).first() or EmailPreference(user=request.user)

    @extend_schema(responses={200: EmailPreferenceSerializer})
    def get(self, request: Request) -> Response:
        return Response(EmailPreferenceSerializer(self.preference(request)).data)

    @extend_schema(request=EmailPreferenceSerializer, responses={200: EmailPreferenceSerializer})
    def put(self, request: Request) -> Response:
        data = EmailPreferenceSerializer(self.preference(request), data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        data.save()
        return Response(data.data)
