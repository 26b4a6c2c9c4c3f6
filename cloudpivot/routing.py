"""Websocket routes of all apps."""

from tasks.routing import websocket_urlpatterns as task_routes

websocket_urlpatterns: list = [*task_routes]
