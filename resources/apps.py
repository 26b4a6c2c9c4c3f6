from django.apps import AppConfig


class ResourcesConfig(AppConfig):
    name = "resources"
    verbose_name = "Resources"

    def ready(self) -> None:
        from cloudpivot.accounts.quotas import Footprint, register_usage
        from clusters.ownership import register_snapshot_lookup
        from resources.quotas import instance_usage
        from resources.selectors import snapshot_owners_of_image

        def instance_vcpu_and_memory(*, project_id: int, connection_id: int | None) -> Footprint:
            held = instance_usage(project_id=project_id, connection_id=connection_id)
            return Footprint(vcpu=held.vcpus, memory_mb=held.memory_mb)

        # Tasks and instances share a project's vCPU and memory limits (accounts.quotas.shared_usage).
        register_usage("instances", instance_vcpu_and_memory)

        # Instances and tasks share one rule about booting another project's snapshot (clusters/ownership.py).
        register_snapshot_lookup(snapshot_owners_of_image)
