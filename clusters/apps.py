from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "clusters"
    verbose_name = "Cloud connections"

    def ready(self) -> None:
        from django.db.models.signals import m2m_changed, post_delete, post_save

        from cloudpivot.recent import recent_clear
        from clusters.models import CloudConnection

        # A connection or its grants changed: a submit's kept lookups (cloudpivot/recent.py) are forgotten.
        post_save.connect(recent_clear, sender=CloudConnection, dispatch_uid="recent-connection")
        post_delete.connect(recent_clear, sender=CloudConnection, dispatch_uid="recent-connection-del")
        m2m_changed.connect(recent_clear, sender=CloudConnection.projects.through, dispatch_uid="recent-grants")
