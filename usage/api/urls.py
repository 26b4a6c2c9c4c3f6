from django.urls import re_path

from usage.api.views import ProjectBudgetApi, UsageApi, UsageExportApi

app_name = "usage-api"
urlpatterns = [
    re_path(r"^usage/?$", UsageApi.as_view(), name="usage"),
    re_path(r"^usage/export/?$", UsageExportApi.as_view(), name="usage-export"),
    re_path(r"^projects/(?P<slug>[-a-zA-Z0-9_]+)/budget/?$", ProjectBudgetApi.as_view(), name="budget"),
]
