#!/usr/bin/env bash
# A whole-disk image for a real cloud's Glance from the image `make guest-image` built (docs/guest-image.md):
# the same ext4 root file system on a partition of an MBR disk, GRUB (the host's, Debian's grub-pc-bin) in front
# of the image's own kernel and initrd, /etc/fstab by label. Needs root and one loop device (no udev, no
# partition scanning: it runs in a container).
#   deploy/guest-image/whole-disk.sh [IMAGE_DIR] [OUT]   (defaults: the cached image, IMAGE_DIR/debian12-disk.qcow2)
set -euo pipefail
cd "$(dirname "$0")/../.."
image_dir=${1:-$(bash deploy/guest-image/build.sh | tail -1)}
out=${2:-$image_dir/debian12-disk.qcow2}
command -v grub-install >/dev/null || { apt-get update -qq && apt-get install -y -qq --no-install-recommends grub-pc-bin; }

work=$(mktemp -d "${TMPDIR:-/tmp}/cp-guest-disk.XXXXXX")
loop="" mnt="$work/mnt"
cleanup() {
  mountpoint -q "$mnt" && umount "$mnt"
  [ -n "$loop" ] && losetup -d "$loop"
  rm -rf "$work"
}
trap cleanup EXIT

qemu-img convert -O raw "$image_dir/debian12.qcow2" "$work/root.raw"
root_bytes=$(stat -c %s "$work/root.raw")
truncate -s $(( root_bytes + 1024 * 1024 )) "$work/disk.raw"
echo 'start=2048, type=83, bootable' | sfdisk -q "$work/disk.raw"
dd if="$work/root.raw" of="$work/disk.raw" bs=1M seek=1 conv=notrunc,sparse status=none
rm "$work/root.raw"
# The partition through a loop device at its offset (no partition scanning, no udev needed: works in a container).
loop=$(losetup --show -f -o $(( 2048 * 512 )) --sizelimit "$root_bytes" "$work/disk.raw")
mkdir -p "$mnt"
mount "$loop" "$mnt"
echo 'LABEL=cloudimg-rootfs / ext4 defaults,errors=remount-ro 0 1' > "$mnt/etc/fstab"
mkdir -p "$mnt/boot/grub/i386-pc"
cp /usr/lib/grub/i386-pc/*.mod /usr/lib/grub/i386-pc/*.lst "$mnt/boot/grub/i386-pc/"
# /vmlinuz and /initrd.img follow the installed kernel (Debian keeps these links current on upgrades).
cat > "$mnt/boot/grub/grub.cfg" <<'CFG'
set timeout=0
search --no-floppy --label --set=root cloudimg-rootfs
linux /vmlinuz root=LABEL=cloudimg-rootfs rw console=tty0 console=ttyS0,115200
initrd /initrd.img
boot
CFG
umount "$mnt"
losetup -d "$loop"; loop=""
# GRUB in the MBR gap, as grub-install would put it: boot.img's code in the MBR (the partition table stays),
# core.img (its defaults point boot.img at sector 1 and core.img's own blocklist at the sectors after it).
grub-mkimage -O i386-pc -o "$work/core.img" -p '(hd0,msdos1)/boot/grub' \
  biosdisk part_msdos ext2 search search_label normal linux configfile echo test
[ "$(stat -c %s "$work/core.img")" -lt $(( 2047 * 512 )) ]
dd if=/usr/lib/grub/i386-pc/boot.img of="$work/disk.raw" bs=440 count=1 conv=notrunc status=none
dd if="$work/core.img" of="$work/disk.raw" bs=512 seek=1 conv=notrunc status=none
qemu-img convert -q -c -O qcow2 "$work/disk.raw" "$out"
echo "whole-disk image: $out ($(du -h --apparent-size "$out" | cut -f1))"
