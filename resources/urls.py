"""Instance pages."""

from django.urls import path

from resources import views

app_name = "resources"
urlpatterns = [
    path("instances/", views.instance_list, name="instance_list"),
    path("instances/new/", views.instance_launch, name="instance_launch"),
    path("instances/new/fit/", views.instance_fit_verdict, name="instance_fit"),
    path("instances/<uuid:instance_id>/", views.instance_detail, name="instance_detail"),
    path("instances/<uuid:instance_id>/panel/", views.instance_panel, name="instance_panel"),
    path("instances/<uuid:instance_id>/act/", views.instance_act, name="instance_act"),
    path("volumes/<uuid:volume_id>/reclaim/", views.volume_reclaim, name="volume_reclaim"),
]
