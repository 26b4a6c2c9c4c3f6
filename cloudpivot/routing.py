"""Websocket routes of all apps (the task and dashboard streams arrive with the portal)."""

websocket_urlpatterns: list = []
