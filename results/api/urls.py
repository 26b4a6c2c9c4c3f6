from django.urls import path

from results.api.views import TaskOutputsApi

app_name = "results-api"
urlpatterns = [
    path("tasks/<uuid:task_id>/outputs", TaskOutputsApi.as_view(), name="task_outputs"),
]
