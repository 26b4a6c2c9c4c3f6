# What goes into the guest image: the only part of the build its cache key hashes (with suite and mirrors),
# sourced by build.sh. Change anything here and `make guest-image` builds a new image.

# What cloud-init, the host agent (python3, standard library only) and an SSH login need; networking by
# systemd-networkd (part of systemd), which cloud-init renders to when ifupdown and netplan are absent.
PACKAGES=(
  linux-image-cloud-amd64 systemd systemd-sysv udev dbus cloud-init python3 openssh-server
  ca-certificates iproute2 procps e2fsprogs util-linux
)

# cloud-init in the image: Nova's config drive first (no network probing for other data sources), one host key
# type (an RSA key takes half a minute under TCG), and a locale the image has (no locales package).
CLOUD_CFG='datasource_list: [ConfigDrive, NoCloud, None]
ssh_genkeytypes: [ed25519]
locale: C.UTF-8'
export CLOUD_CFG

# make_rootfs ROOT: the root file system, by mmdebstrap from the given apt sources.
make_rootfs() {
  local root=$1
  # Documentation, man pages and locales are left out by dpkg itself (the image stays small).
  mmdebstrap --mode=root --variant=apt --include="$(IFS=,; echo "${PACKAGES[*]}")" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --customize-hook='chroot "$1" systemctl enable systemd-networkd.service' \
    --customize-hook='chroot "$1" systemctl enable serial-getty@ttyS0.service' \
    --customize-hook='printf "%s\n" "[Match]" "Name=en* eth*" "" "[Network]" "DHCP=yes" > "$1/etc/systemd/network/80-dhcp.network"' \
    --customize-hook='printf "%s\n" "/dev/vda / ext4 defaults,errors=remount-ro 0 1" > "$1/etc/fstab"' \
    --customize-hook='echo debian > "$1/etc/hostname"' \
    --customize-hook='printf "%s\n" "$CLOUD_CFG" > "$1/etc/cloud/cloud.cfg.d/90-cloudpivot.cfg"' \
    --customize-hook='rm -f "$1"/etc/ssh/ssh_host_*; : > "$1/etc/machine-id"; rm -f "$1/var/lib/dbus/machine-id"' \
    --customize-hook='rm -rf "$1"/var/lib/apt/lists/* "$1"/var/cache/apt/*.bin "$1"/var/log/*.log' \
    "$SUITE" "$root" \
    "deb $MIRROR $SUITE main" "deb $MIRROR $SUITE-updates main" "deb $SECURITY_MIRROR $SUITE-security main"
}

# make_disk ROOT WORK OUT: the kernel and initrd beside the image (QEMU boots them directly), and the root file
# system as an ext4 file system without a partition table, in a compressed qcow2.
make_disk() {
  local root=$1 work=$2 out=$3
  mkdir -p "$out"
  cp "$(readlink -f "$root/vmlinuz")" "$out/vmlinuz"
  cp "$(readlink -f "$root/initrd.img")" "$out/initrd.img"
  # 2 GiB file system (the tests' runs need little room); unused blocks take no room in the qcow2.
  truncate -s 2G "$work/root.raw"
  mkfs.ext4 -q -L cloudimg-rootfs -d "$root" "$work/root.raw"
  qemu-img convert -q -c -O qcow2 "$work/root.raw" "$out/debian12.qcow2"
}
