#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (or reuse) the tiny initramfs for one kernel release:
#   mkinitramfs.sh RELEASE OUTPUT.cpio [MODROOT]
# ENGRAM_ARCH=arm64: for the arm64 guest, with the arm64 root's busybox.
# MODROOT: the release's lib/modules/RELEASE when it is not the machine's
# (the debug kernel's, in the cache; its drivers are built in).
# Contents: busybox-static, selftests/vm/init, the chroot modprobe helper and
# the modules needed to mount the host root over virtio-9p (resolved with
# the host's `modprobe -S RELEASE --show-depends`; .ko.xz decompressed since
# busybox insmod cannot read them).  Rebuilt only when an input changes.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
rel=${1:?usage: mkinitramfs.sh RELEASE OUTPUT [MODROOT]}
out=${2:?usage: mkinitramfs.sh RELEASE OUTPUT [MODROOT]}
modroot=${3:-/lib/modules/$rel}
BUSYBOX=/bin/busybox
CACHE=${CACHE:-/var/cache/engram-rdma}
[ "${ENGRAM_ARCH:-x86_64}" != arm64 ] || BUSYBOX=$CACHE/kheaders/arm64-root/usr/bin/busybox
MODS=(9p 9pnet_virtio virtio_pci virtio_blk)

[ -x "$BUSYBOX" ] || { echo "mkinitramfs: $BUSYBOX missing (install busybox-static)" >&2; exit 1; }
file_is_static=$(LC_ALL=C file -b "$BUSYBOX" 2>/dev/null || true)
case "${file_is_static:-}" in *dynamic*) echo "mkinitramfs: $BUSYBOX is not static (install busybox-static)" >&2; exit 1;; esac
[ -e "$modroot/modules.dep" ] || { echo "mkinitramfs: $modroot/modules.dep missing" >&2; exit 1; }

# Built-in ones show as "builtin NAME" and need nothing here.
dir=()
[ -z "${3:-}" ] || dir=(-d "${modroot%/lib/modules/*}")
kos=$(modprobe "${dir[@]}" -S "$rel" -a --show-depends "${MODS[@]}" |
	awk '$1 == "insmod" && !seen[$2]++ { print $2 }')

# Cache key: every input's identity.
key=$( {
	echo "$rel${3:+ $3}"
	sha256sum "$here/init" "$here/chroot-modprobe" "$here/mkinitramfs.sh"
	stat -c '%n %s %Y' "$BUSYBOX" $kos
} | sha256sum | cut -d' ' -f1)
if [ -s "$out" ] && [ "$(cat "$out.key" 2>/dev/null)" = "$key" ]; then
	exit 0
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/engram-initramfs.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp"/{bin,sbin,dev,proc,sys,mnt,tmp,lib/modules-initrd}
cp "$BUSYBOX" "$tmp/bin/busybox"
for a in sh mount umount insmod mkdir chroot poweroff dmesg cat echo sleep sync ls uname switch_root; do
	ln -s busybox "$tmp/bin/$a"
done
install -m 0755 "$here/init" "$tmp/init"
install -m 0755 "$here/chroot-modprobe" "$tmp/sbin/chroot-modprobe"
: > "$tmp/lib/modules-initrd/order"
for ko in $kos; do
	base=$(basename "$ko")
	case "$ko" in
	*.ko.xz) base=${base%.xz}; xz -dc "$ko" > "$tmp/lib/modules-initrd/$base" ;;
	*.ko.zst) base=${base%.zst}; zstd -qdc "$ko" > "$tmp/lib/modules-initrd/$base" ;;
	*.ko.gz) base=${base%.gz}; gzip -dc "$ko" > "$tmp/lib/modules-initrd/$base" ;;
	*) cp "$ko" "$tmp/lib/modules-initrd/$base" ;;
	esac
	echo "$base" >> "$tmp/lib/modules-initrd/order"
done
mkdir -p "$(dirname "$out")"
(cd "$tmp" && find . -print0 | LC_ALL=C sort -z | cpio --quiet -o -0 -H newc -R 0:0) > "$out.tmp"
mv -f "$out.tmp" "$out"
echo "$key" > "$out.key"
echo "mkinitramfs: built $out ($(wc -c < "$out") bytes, modules: $(tr '\n' ' ' < "$tmp/lib/modules-initrd/order"))" >&2
