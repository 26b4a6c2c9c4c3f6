"""Websocket routes of the tasks app."""

from django.urls import path

from tasks import consumers

websocket_urlpatterns = [
    path("ws/tasks/<uuid:task_id>/", consumers.TaskConsumer.as_asgi()),
    path("ws/dashboard/", consumers.DashboardConsumer.as_asgi()),
]
