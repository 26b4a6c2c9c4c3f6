"""One FilterSet for tasks, used by the API and the pages."""

from __future__ import annotations

import django_filters
from django.contrib.auth import get_user_model

from cloudpivot.accounts.models import Project
from clusters.models import CloudConnection
from tasks.choices import TaskState
from tasks.models import Task


class TaskFilterSet(django_filters.FilterSet):
    """Names (cloud id, project slug, username) are turned into ids first, so the database filters the task
    table on a literal id and can walk an index in list order (a join on the name would sort every match)."""

    # distinct=False: a task has one state; DISTINCT would make the database sort every match on every column.
    state = django_filters.MultipleChoiceFilter(choices=TaskState.choices, distinct=False)
    cloud = django_filters.CharFilter(method="filter_cloud")
    project = django_filters.CharFilter(method="filter_project")
    owner = django_filters.CharFilter(method="filter_owner")
    q = django_filters.CharFilter(method="filter_text", label="Text")

    class Meta:
        model = Task
        fields = ["state", "cloud", "project", "owner"]

    def filter_cloud(self, queryset, name, value):
        return queryset.filter(
            connection_id__in=list(CloudConnection.objects.filter(cloud_id=value).values_list("pk", flat=True))
        )

    def filter_project(self, queryset, name, value):
        return queryset.filter(project_id__in=list(Project.objects.filter(slug=value).values_list("pk", flat=True)))

    def filter_owner(self, queryset, name, value):
        users = get_user_model().objects.filter(username=value).values_list("pk", flat=True)
        return queryset.filter(owner_id__in=list(users))

    def filter_text(self, queryset, name, value):
        return queryset.filter(name__icontains=value)
