"""Instance, snapshot and operation views for the API, and the shapes of the write requests."""

from __future__ import annotations

from rest_framework import serializers

from cloudpivot.json_types import JSONTypes
from resources.access import instance_ssh_command
from resources.choices import INSTANCE_ACTIONS
from resources.models import Instance, KeptVolume, Operation, Snapshot


class OperationSerializer(serializers.ModelSerializer):
    requested_by = serializers.SerializerMethodField()
    instance = serializers.UUIDField(source="instance_id", allow_null=True, read_only=True)
    snapshot = serializers.UUIDField(source="snapshot_id", allow_null=True, read_only=True)
    project = serializers.CharField(source="project.slug", read_only=True)

    class Meta:
        model = Operation
        fields = [
            "id",
            "action",
            "state",
            "instance",
            "snapshot",
            "project",
            "requested_by",
            "idempotency_key",
            "params",
            "error_kind",
            "error_message",
            "result",
            "created_at",
            "started_at",
            "finished_at",
        ]

    def get_requested_by(self, operation: Operation) -> str:
        return operation.requested_by.get_username() if operation.requested_by else "cloudpivot"


MAX_VOLUMES = 8  # extra data volumes per instance (Nova's own default limit of attachments is far above)


class InstanceVolumeSerializer(JSONTypes, serializers.Serializer):
    """One extra data volume: a blank disk made and attached with the server, kept or purged with it."""

    size_gb = serializers.IntegerField(min_value=1, max_value=65536, help_text="A blank volume of this many GB.")
    name = serializers.RegexField(
        r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,31}$",
        max_length=32,
        required=False,
        help_text="A short label of your own (shown with the instance).",
        error_messages={"invalid": "up to 32 letters, digits, '.', '_' and '-', starting with a letter or digit"},
    )


class InstanceVolumeViewSerializer(serializers.Serializer):
    """An instance's extra data volume as asked for at create."""

    name = serializers.CharField(read_only=True, help_text='Its label ("" when none was given).')
    size_gb = serializers.IntegerField(read_only=True)


class InstanceSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    cloud = serializers.CharField(source="connection.cloud_id", read_only=True)
    operation = OperationSerializer(read_only=True, allow_null=True)
    volumes = InstanceVolumeViewSerializer(
        many=True, read_only=True, help_text="Blank data volumes made and attached with it at create."
    )
    ssh_command = serializers.SerializerMethodField(
        help_text="Ready to copy once the instance has an address and keys (through the jump host, if any)."
    )
    readiness = serializers.SerializerMethodField(
        help_text="While the status is Running: `booting` until the guest answers (guest agent, cloud-init's console "
        "marker or an SSH banner), then `ready`; null in any other status."
    )
    ready = serializers.SerializerMethodField(help_text="Running and the guest answered since its last boot.")
    readiness_reason = serializers.SerializerMethodField(
        help_text="While Running: what the guest is awaited by (booting) or what showed it up (ready); else empty."
    )
    ssh_ready = serializers.SerializerMethodField(
        help_text="The ssh command should work now: it exists and the guest is ready."
    )

    class Meta:
        model = Instance
        fields = [
            "id",
            "name",
            "project",
            "owner",
            "cloud",
            "backend",
            "flavor",
            "vcpus",
            "memory_mb",
            "disk_gb",
            "image",
            "volumes",
            "desired_power_state",
            "boot_id",
            "status",
            "status_reason",
            "status_changed_at",
            "observed_at",
            "operation",
            "server_id",
            "address",
            "login_user",
            "ssh_keys",
            "ssh_command",
            "ssh_ready",
            "readiness",
            "ready",
            "readiness_reason",
            "created_at",
            "deleted_at",
        ]

    def get_ssh_command(self, instance: Instance) -> str:
        return instance_ssh_command(instance)

    def get_readiness(self, instance: Instance) -> str | None:
        return instance.readiness or None

    def get_readiness_reason(self, instance: Instance) -> str:
        return instance.readiness_reason if instance.readiness else ""

    def get_ready(self, instance: Instance) -> bool:
        return instance.readiness == "ready"

    def get_ssh_ready(self, instance: Instance) -> bool:
        return instance.readiness == "ready" and bool(instance_ssh_command(instance))


class SnapshotSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug", read_only=True)
    owner = serializers.CharField(source="owner.username", read_only=True)
    cloud = serializers.CharField(source="connection.cloud_id", read_only=True)
    instance = serializers.UUIDField(source="instance_id", allow_null=True, read_only=True)

    class Meta:
        model = Snapshot
        fields = [
            "id",
            "name",
            "project",
            "owner",
            "cloud",
            "instance",
            "image_id",
            "size_bytes",
            "status",
            "status_reason",
            "created_at",
            "deleted_at",
        ]


class KeptVolumeSerializer(serializers.ModelSerializer):
    project = serializers.CharField(source="project.slug", read_only=True)
    cloud = serializers.CharField(source="connection.cloud_id", read_only=True)
    instance = serializers.UUIDField(source="instance_id", read_only=True)
    instance_name = serializers.CharField(source="instance.name", read_only=True)
    kept_at = serializers.DateTimeField(source="created_at", read_only=True)
    state = serializers.SerializerMethodField(help_text="kept, reclaiming (an Operation in flight) or reclaimed")
    operation = serializers.SerializerMethodField(help_text="The reclaim in flight, if any.")

    class Meta:
        model = KeptVolume
        fields = ["id", "ref", "size_gb", "project", "cloud", "instance", "instance_name", "state", "operation"]
        fields += ["kept_at", "reclaimed_at"]

    def _in_flight(self, volume: KeptVolume):
        from resources.services.volumes import reclaim_in_flight

        if not hasattr(volume, "_reclaim"):
            volume._reclaim = None if volume.reclaimed_at else reclaim_in_flight(volume)
        return volume._reclaim

    def get_state(self, volume: KeptVolume) -> str:
        if volume.reclaimed_at:
            return "reclaimed"
        return "reclaiming" if self._in_flight(volume) else "kept"

    def get_operation(self, volume: KeptVolume) -> str | None:
        operation = self._in_flight(volume)
        return str(operation.pk) if operation else None


class InstanceCreateSerializer(JSONTypes, serializers.Serializer):
    name = serializers.RegexField(
        r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$",
        max_length=63,
        error_messages={"invalid": "letters, digits, '.', '_' and '-', starting with a letter or digit"},
    )
    cloud = serializers.CharField(max_length=64)
    project = serializers.SlugField(max_length=64, required=False)
    flavor = serializers.CharField(max_length=100, required=False, help_text="A flavor name or id …")
    vcpus = serializers.IntegerField(min_value=1, required=False, help_text="… or vCPU and memory_mb")
    memory_mb = serializers.IntegerField(min_value=1, required=False)
    image = serializers.CharField(max_length=255)
    ssh_keys = serializers.ListField(
        child=serializers.CharField(max_length=64),
        required=False,
        max_length=50,
        help_text="Names of your SSH keys the instance gets (omitted: all your keys; [] for none).",
    )
    volumes = InstanceVolumeSerializer(
        many=True,
        required=False,
        max_length=MAX_VOLUMES,
        help_text=f"Blank data volumes made and attached with the instance (at most {MAX_VOLUMES}); "
        "their GB count against max_volume_gb with the root disk.",
    )

    def validate_volumes(self, volumes):
        seen: set[str] = set()
        errors: list[dict] = []
        for volume in volumes:
            name = volume.get("name") or ""
            errors.append({"name": [f"{name!r} is given twice"]} if name and name in seen else {})
            seen.add(name)
        if any(errors):
            raise serializers.ValidationError(errors)
        return [{"name": v.get("name") or "", "size_gb": v["size_gb"]} for v in volumes]

    def validate(self, attrs):
        if attrs.get("flavor") and (attrs.get("vcpus") or attrs.get("memory_mb")):
            raise serializers.ValidationError({"flavor": "give a flavor or vcpus and memory_mb, not both"})
        if not attrs.get("flavor"):
            for field in ("vcpus", "memory_mb"):
                if not attrs.get(field):
                    raise serializers.ValidationError({field: "required without a flavor"})
        return attrs


class InstanceActionSerializer(JSONTypes, serializers.Serializer):
    action = serializers.ChoiceField(choices=INSTANCE_ACTIONS)
    type = serializers.ChoiceField(choices=["soft", "hard"], required=False, help_text="reboot")
    boot_id = serializers.IntegerField(
        min_value=1, max_value=2**31 - 1, required=False, help_text="start: a retry repeats the id"
    )
    name = serializers.CharField(max_length=100, required=False, help_text="snapshot")
    snapshot = serializers.UUIDField(required=False, help_text="restore: rebuild from this snapshot")
    flavor = serializers.CharField(max_length=100, required=False, help_text="resize")
    volumes = serializers.ChoiceField(choices=["keep", "purge"], required=False, help_text="delete (required)")


class SnapshotRestoreSerializer(JSONTypes, serializers.Serializer):
    instance = serializers.UUIDField(required=False, help_text="Rebuild this instance from the snapshot …")
    name = serializers.RegexField(
        r"^[a-zA-Z0-9][a-zA-Z0-9._-]{0,62}$", max_length=63, required=False, help_text="… or create a new instance"
    )
    flavor = serializers.CharField(max_length=100, required=False)
    project = serializers.SlugField(max_length=64, required=False)

    def validate(self, attrs):
        if bool(attrs.get("instance")) == bool(attrs.get("name")):
            raise serializers.ValidationError(
                {"instance": "give either `instance` (rebuild it) or `name` and `flavor` (a new instance)"}
            )
        if attrs.get("name") and not attrs.get("flavor"):
            raise serializers.ValidationError({"flavor": "a new instance needs a flavor"})
        return attrs


class ConsoleSerializer(serializers.Serializer):
    lines = serializers.IntegerField(min_value=1, max_value=10000, required=False, default=100)
