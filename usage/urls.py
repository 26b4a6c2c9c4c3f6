from django.urls import path

from usage import views

app_name = "usage"
urlpatterns = [
    path("projects/<slug:slug>/usage/", views.project_usage, name="project_usage"),
]
