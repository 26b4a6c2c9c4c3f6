from django.db import models


class BackendKind(models.TextChoices):
    LOCAL = "local", "Local host"
    KUBERNETES = "kubernetes", "Kubernetes"
    OPENSTACK = "openstack", "OpenStack"


class HealthStatus(models.TextChoices):
    UNKNOWN = "unknown", "Unknown"
    OK = "ok", "OK"
    DEGRADED = "degraded", "Degraded"
    DOWN = "down", "Down"
