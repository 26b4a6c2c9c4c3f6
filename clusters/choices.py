from django.db import models


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local host"
    KUBERNETES = "kubernetes", "Kubernetes"
    OPENSTACK = "openstack", "OpenStack"


class HealthStatus(models.TextChoices):
    """The last check's verdict (clusters/health.py); unknown until a connection is first checked."""

    UNKNOWN = "unknown", "Unknown"
    OK = "ok", "OK"
    FAILING = "failing", "Failing"


class SubjectKind(models.TextChoices):
    """What a metric sample describes; the subject key names the one meant (node name, instance id, project slug)."""

    NODE = "node", "Node"
    INSTANCE = "instance", "Instance"
    PROJECT = "project", "Project"
    CONNECTION = "connection", "Connection"
    PLATFORM = "platform", "Platform"


# Sample resolutions in seconds: raw samples, 15-minute and hourly averages.
RAW = 0
QUARTER_HOUR = 900
HOUR = 3600
RESOLUTIONS = (RAW, QUARTER_HOUR, HOUR)
