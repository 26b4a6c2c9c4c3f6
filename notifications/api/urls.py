from django.urls import re_path
from rest_framework.routers import SimpleRouter

from notifications.api.views import EmailPreferenceView, FeedView, WebhookEndpointViewSet

app_name = "notifications-api"
router = SimpleRouter()
router.trailing_slash = "/?"
router.register("webhooks", WebhookEndpointViewSet, basename="webhook")
urlpatterns = [
    re_path(r"^events/?$", FeedView.as_view(), name="feed"),  # like the routers: with or without a slash
    re_path(r"^email-preferences/?$", EmailPreferenceView.as_view(), name="email-preferences"),
    *router.urls,
]
