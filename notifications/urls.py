"""Portal pages for webhook endpoints (the API's twin: same services, same permission rule)."""

from django.urls import path

from notifications import views

app_name = "notifications"
urlpatterns = [
    path("webhooks/", views.webhook_list, name="webhook_list"),
    path("webhooks/new", views.webhook_create, name="webhook_create"),
    path("webhooks/<uuid:endpoint_id>/", views.webhook_detail, name="webhook_detail"),
    path("webhooks/<uuid:endpoint_id>/act/", views.webhook_act, name="webhook_act"),
]
