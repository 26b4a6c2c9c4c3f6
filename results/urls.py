from django.urls import path

from results import views

app_name = "results"
urlpatterns = [
    path("outputs/<str:token>/<path:name>", views.output_download, name="output_download"),
]
