"""One FilterSet for tasks, used by the API and the pages."""

from __future__ import annotations

import django_filters

from tasks.choices import TaskState
from tasks.models import Task


class TaskFilterSet(django_filters.FilterSet):
    state = django_filters.MultipleChoiceFilter(choices=TaskState.choices)
    cloud = django_filters.CharFilter(field_name="connection__cloud_id")
    project = django_filters.CharFilter(field_name="project__slug")
    owner = django_filters.CharFilter(field_name="owner__username")
    q = django_filters.CharFilter(method="filter_text", label="Text")

    class Meta:
        model = Task
        fields = ["state", "cloud", "project", "owner"]

    def filter_text(self, queryset, name, value):
        return queryset.filter(name__icontains=value)
