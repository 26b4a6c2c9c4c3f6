from django.urls import path

from results.api.provenance_views import ProvenanceKeyApi, TaskProvenanceApi
from results.api.views import TaskOutputsApi

app_name = "results-api"
urlpatterns = [
    path("tasks/<uuid:task_id>/outputs", TaskOutputsApi.as_view(), name="task_outputs"),
    path("tasks/<uuid:task_id>/provenance", TaskProvenanceApi.as_view(), name="task_provenance"),
    path("provenance/key", ProvenanceKeyApi.as_view(), name="provenance_key"),
]
