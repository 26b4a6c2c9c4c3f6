"""Project pages of the accounts app: the project's secrets."""

from django.urls import path

from cloudpivot.accounts import views

app_name = "accounts"
urlpatterns = [
    path("projects/<slug:slug>/secrets/", views.secret_list, name="secret_list"),
    path("projects/<slug:slug>/secrets/new", views.secret_add, name="secret_add"),
    path("projects/<slug:slug>/secrets/<slug:name>/delete", views.secret_remove, name="secret_remove"),
]
