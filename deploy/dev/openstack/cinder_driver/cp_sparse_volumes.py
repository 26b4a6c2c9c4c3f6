"""A Cinder volume driver that keeps each volume as a sparse file: block storage without block devices.

CloudPivot's development OpenStack runs on a kernel without device-mapper, SCSI or network filesystems, so
none of Cinder's in-tree drivers can store a volume here (deploy/dev/openstack/README.md). This one keeps
volume `<id>` as `<sparse_volumes_dir>/volume-<id>`, a sparse file of the volume's size: create, delete,
extend, clone, snapshots (sparse copies), an image copied into a volume (qemu-img, as Cinder does for every
file-like target) and a volume uploaded to an image. A connection is a local path (os-brick's `local`
connector), which Nova's fake virt driver accepts without opening it. Around it run the real cinder-api,
cinder-scheduler and cinder-volume, so a volume goes through Cinder's own state machine.

For development and tests only: no export, no multi-host access, no QoS.
"""

from __future__ import annotations

import os

from cinder import exception, interface
from cinder.image import image_utils
from cinder.volume import configuration, driver, volume_utils
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import units

LOG = logging.getLogger(__name__)
OPTS = [
    cfg.StrOpt("sparse_volumes_dir", default="$state_path/volumes", help="Where the volume files are kept."),
]
cfg.CONF.register_opts(OPTS, group=configuration.SHARED_CONF_GROUP)


@interface.volumedriver
class SparseFileVolumeDriver(driver.VolumeDriver):
    """Volumes (and snapshots) as sparse files in one directory."""

    VERSION = "1.0.0"
    CI_WIKI_NAME = "CloudPivot_dev_OpenStack"  # out of tree: no third-party CI

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.configuration.append_config_values(OPTS)
        self.backend_name = self.configuration.safe_get("volume_backend_name") or "sparse"
        self.protocol = "local"

    # ------------------------------------------------------------------ set-up
    @property
    def _dir(self) -> str:
        return self.configuration.sparse_volumes_dir

    def do_setup(self, context):
        os.makedirs(self._dir, exist_ok=True)

    def check_for_setup_error(self):
        if not os.access(self._dir, os.W_OK):
            raise exception.VolumeBackendAPIException(data=f"{self._dir} is not writable")

    def local_path(self, volume):
        return os.path.join(self._dir, f"volume-{volume.id}")

    def _snapshot_path(self, snapshot):
        return os.path.join(self._dir, f"snapshot-{snapshot.id}")

    @staticmethod
    def _resize(path: str, size_gb: int) -> None:
        with open(path, "ab") as f:
            f.truncate(size_gb * units.Gi)

    @staticmethod
    def _copy(source: str, target: str) -> None:
        """A sparse copy (holes stay holes: a 1 GB volume with 4 KiB written costs 4 KiB)."""
        partial = target + ".part"
        with open(source, "rb") as src, open(partial, "wb") as dst:
            size = os.fstat(src.fileno()).st_size
            offset = 0
            while offset < size:
                try:
                    data_at = os.lseek(src.fileno(), offset, os.SEEK_DATA)
                except OSError:  # ENXIO: only a hole is left
                    break
                hole_at = os.lseek(src.fileno(), data_at, os.SEEK_HOLE)
                src.seek(data_at)
                dst.seek(data_at)
                remaining = hole_at - data_at
                while remaining:
                    chunk = src.read(min(remaining, 4 * units.Mi))
                    dst.write(chunk)
                    remaining -= len(chunk)
                offset = hole_at
            dst.truncate(size)
        os.replace(partial, target)

    # ------------------------------------------------------------------ volumes
    def create_volume(self, volume):
        path = self.local_path(volume)
        with open(path, "wb"):
            pass
        self._resize(path, volume.size)
        LOG.info("created sparse volume %s (%s GB)", path, volume.size)

    def delete_volume(self, volume):
        try:
            os.remove(self.local_path(volume))
        except FileNotFoundError:
            pass

    def extend_volume(self, volume, new_size):
        self._resize(self.local_path(volume), new_size)

    def create_cloned_volume(self, volume, src_vref):
        self._copy(self.local_path(src_vref), self.local_path(volume))
        self._resize(self.local_path(volume), max(volume.size, src_vref.size))

    # ------------------------------------------------------------------ snapshots
    def create_snapshot(self, snapshot):
        self._copy(self.local_path(snapshot.volume), self._snapshot_path(snapshot))

    def delete_snapshot(self, snapshot):
        try:
            os.remove(self._snapshot_path(snapshot))
        except FileNotFoundError:
            pass

    def create_volume_from_snapshot(self, volume, snapshot):
        self._copy(self._snapshot_path(snapshot), self.local_path(volume))
        self._resize(self.local_path(volume), volume.size)

    # ------------------------------------------------------------------ images
    def copy_image_to_volume(self, context, volume, image_service, image_id):
        path = self.local_path(volume)
        image_utils.fetch_to_raw(
            context, image_service, image_id, path, self.configuration.volume_dd_blocksize, size=volume.size
        )
        self._resize(path, volume.size)  # qemu-img wrote the image's size

    def copy_volume_to_image(self, context, volume, image_service, image_meta):
        volume_utils.upload_volume(context, image_service, image_meta, self.local_path(volume), volume)

    # ------------------------------------------------------------------ connections: a local path
    def create_export(self, context, volume, connector):
        return None

    def ensure_export(self, context, volume):
        return None

    def remove_export(self, context, volume):
        return None

    def initialize_connection(self, volume, connector):
        return {"driver_volume_type": "local", "data": {"device_path": self.local_path(volume)}}

    def terminate_connection(self, volume, connector, **kwargs):
        return None

    # ------------------------------------------------------------------ what the scheduler sees
    def _update_volume_stats(self):
        fs = os.statvfs(self._dir)
        used = sum(os.stat(os.path.join(self._dir, n)).st_size for n in os.listdir(self._dir)) / units.Gi
        self._stats = {
            "volume_backend_name": self.backend_name,
            "vendor_name": "CloudPivot (development)",
            "driver_version": self.VERSION,
            "storage_protocol": "local",
            "total_capacity_gb": round(fs.f_blocks * fs.f_frsize / units.Gi, 2),
            "free_capacity_gb": round(fs.f_bavail * fs.f_frsize / units.Gi, 2),
            "provisioned_capacity_gb": round(used, 2),
            "thin_provisioning_support": True,
            "thick_provisioning_support": False,
            "max_over_subscription_ratio": 100.0,
            "reserved_percentage": 0,
            "multiattach": False,
            "QoS_support": False,
        }
