"""Cloud pages."""

from django.urls import path

from clusters import views

app_name = "clusters"
urlpatterns = [
    path("", views.cloud_list, name="cloud_list"),
    path("<slug:cloud_id>/", views.cloud_detail, name="cloud_detail"),
    path("<slug:cloud_id>/inventory", views.cloud_inventory, name="cloud_inventory"),
    path("<slug:cloud_id>/check", views.cloud_check, name="cloud_check"),
]
