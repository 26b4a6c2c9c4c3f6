"""Task set pages."""

from django.urls import path

from tasksets import views

app_name = "tasksets"
urlpatterns = [
    path("sets/", views.set_list, name="set_list"),
    path("sets/<uuid:set_id>/", views.set_detail, name="set_detail"),
    path("sets/<uuid:set_id>/panels/", views.set_panels, name="set_panels"),
    path("sets/<uuid:set_id>/cancel/", views.set_cancel, name="set_cancel"),
    path("sets/<uuid:set_id>/retry-failed/", views.set_retry_failed, name="set_retry_failed"),
]
