from django.urls import path

from runner_api import views

app_name = "runner-api"
urlpatterns = [
    path("assignment", views.AssignmentView.as_view(), name="assignment"),
    path("heartbeat", views.HeartbeatView.as_view(), name="heartbeat"),
    path("events", views.EventsView.as_view(), name="events"),
    path("bootstrap", views.BootstrapView.as_view(), name="bootstrap"),
    path("logs", views.LogsView.as_view(), name="logs"),
]
