"""Task pages."""

from django.urls import path

from tasks import views

app_name = "tasks"
urlpatterns = [
    path("tasks/", views.task_list, name="task_list"),
    path("tasks/new", views.task_create, name="task_create"),
    path("tasks/new/fit", views.task_fit_verdict, name="task_fit"),
    path("tasks/<uuid:task_id>/", views.task_detail, name="task_detail"),
    path("tasks/<uuid:task_id>/panels/", views.task_panels, name="task_panels"),
    path("tasks/<uuid:task_id>/cancel/", views.task_cancel, name="task_cancel"),
    path("tasks/<uuid:task_id>/retry/", views.task_retry, name="task_retry"),
    path("tasks/<uuid:task_id>/release-hold/", views.task_release_hold, name="task_release_hold"),
    path("tasks/<uuid:task_id>/compare/", views.task_compare, name="task_compare"),
    path("tasks/<uuid:task_id>/log/", views.task_log, name="task_log"),
    path("tasks/<uuid:task_id>/log/download/", views.task_log_download, name="task_log_download"),
]
