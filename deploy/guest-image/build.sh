#!/usr/bin/env bash
# The guest image of the real-guest tests (issue 31 item 2): a small Debian 12 root file system made by mmdebstrap
# from Debian's packages only (the host's apt mirror), written into an ext4 file system without a partition table
# or bootloader (QEMU boots its kernel and initrd directly, extracted beside it) and stored as a compressed qcow2.
#
# Cached by a content hash of the build inputs (image.sh: the packages and the root file system steps; suite, mirrors):
#   var/guest/<hash>/{debian12.qcow2,vmlinuz,initrd.img,build.json}
# A second run with the same inputs prints the cached image and returns at once. Prints the image's directory last.
# docs/guest-image.md says how to build the same image for a real cloud's Glance (with a bootloader).
set -euo pipefail
cd "$(dirname "$0")/../.."

SUITE=${GUEST_SUITE:-bookworm}
MIRROR=${GUEST_MIRROR:-http://deb.debian.org/debian}
SECURITY_MIRROR=${GUEST_SECURITY_MIRROR:-http://deb.debian.org/debian-security}
OUT_ROOT=${GUEST_IMAGE_DIR:-var/guest}
source "$(dirname "$0")/image.sh"

inputs() {
  cat deploy/guest-image/image.sh
  printf '%s\n' "$SUITE" "$MIRROR" "$SECURITY_MIRROR" "${PACKAGES[@]}"
}
hash=$(inputs | sha256sum | cut -c1-16)
out="$OUT_ROOT/$hash"
# One build at a time (CI's two test runs may both ask): the second waits, then finds the first one's image.
mkdir -p "$OUT_ROOT"
exec 9>"$OUT_ROOT/.build.lock"
flock 9
if [ -f "$out/build.json" ]; then
  echo "guest image cached: $out/debian12.qcow2 ($(du -h --apparent-size "$out/debian12.qcow2" | cut -f1)," \
    "built in $(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["build_seconds"])' "$out/build.json") s)"
  echo "$out"
  exit 0
fi

missing=()
for tool in mmdebstrap:mmdebstrap qemu-img:qemu-utils qemu-system-x86_64:qemu-system-x86 genisoimage:genisoimage socat:socat \
    mkfs.ext4:e2fsprogs; do
  command -v "${tool%%:*}" >/dev/null || missing+=("${tool##*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian's packages)"
  apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

started=$(date +%s)
work=$(mktemp -d "${TMPDIR:-/tmp}/cp-guest-build.XXXXXX")
trap 'rm -rf "$work"' EXIT
root="$work/root"
mkdir -p "$root"

make_rootfs "$root"

mkdir -p "$out.tmp"
make_disk "$root" "$work" "$out.tmp"
kernel=$(basename "$(readlink -f "$root/vmlinuz")")
seconds=$(( $(date +%s) - started ))
python3 - "$out.tmp/build.json" "$seconds" "$kernel" "$SUITE" "${PACKAGES[@]}" <<'PY'
import json, os, sys
path, seconds, kernel, suite, *packages = sys.argv[1:]
size = os.path.getsize(os.path.join(os.path.dirname(path), "debian12.qcow2"))
json.dump({"build_seconds": int(seconds), "kernel": kernel, "suite": suite, "packages": packages,
           "qcow2_bytes": size}, open(path, "w"), indent=1)
PY
rm -rf "$out" && mv "$out.tmp" "$out"
echo "guest image built: $out/debian12.qcow2 ($(du -h --apparent-size "$out/debian12.qcow2" | cut -f1)," \
  "kernel $kernel) in $seconds s"
echo "$out"
