#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build (once) the test guests' debug kernel: Debian's linux-source-6.12
# with selftests/vm/debug-kernel.config on top of allnoconfig, in the way
# WireGuard's QEMU harness builds its own small kernel: everything the
# guests use built in, KASAN, lockdep, kmemleak, UBSAN, object debugging,
# fault injection, KCOV and gcov on.
#
#   debug-kernel.sh            build unless the cache has it; print its env file
#
# Cached under $CACHE/debug-kernel/KEY, KEY a hash of the source package,
# the configuration and the recipe's version (RECIPE below), so that a
# change to either builds a new one and the old one is removed.  Records, for kernels.sh (KVER "debug"):
#   $CACHE/debug-kernel.env    KREL_DEBUG, VMLINUZ_DEBUG, KDIR_DEBUG,
#                              MODROOT_DEBUG (lib/modules/KREL with
#                              modules.builtin, for modprobe in the guest)
# The machine's /boot and /lib/modules are not touched.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
CACHE=${CACHE:-/var/cache/engram-rdma}
PKG=linux-source-6.12
FRAG=$here/debug-kernel.config
ENVF=$CACHE/debug-kernel.env

log() { echo "debug-kernel: $*" >&2; }

deb=$("$here/deps.sh" --deb "$PKG") || exit 1
# Bump RECIPE when a change below alters what gets built.
RECIPE=1
key=$( { basename "$deb"; echo "recipe $RECIPE"; sha256sum "$FRAG" | cut -d' ' -f1; } |
	sha256sum | cut -c1-16)
top=$CACHE/debug-kernel/$key
src=$top/src
obj=$top/build
stage=$top/stage

# cached: record the cached kernel as the one to use, and say where.
cached() {
	cp "$top/done" "$ENVF"
	echo "$ENVF"
	exit 0
}
[ -s "$top/done" ] && cached

exec 9>"$CACHE/.debug-kernel.lock"
flock -w 3600 9 || { log "another build holds the lock"; exit 1; }
# Whoever held the lock may have just built this very kernel.
[ -s "$top/done" ] && cached
start=$(date +%s)
rm -rf "$top"
mkdir -p "$src" "$obj" "$stage"
log "unpacking $(basename "$deb")"
dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
	xz -dc -T0 | tar -x -C "$src" --strip-components=1
log "configuring (allnoconfig + $(basename "$FRAG"))"
make -s -C "$src" O="$obj" KCONFIG_ALLCONFIG="$FRAG" allnoconfig >/dev/null

# Every option of the fragment must have landed as written.
bad=0
while IFS= read -r line; do
	case "$line" in
	CONFIG_*=n) want="# ${line%=n} is not set" ;;
	CONFIG_*=*) want=$line ;;
	*) continue ;;
	esac
	grep -qxF "$want" "$obj/.config" || {
		log "not in .config as asked: $line ($(grep -E "^(# )?${line%%=*}[= ]" "$obj/.config" || echo absent))"
		bad=1
	}
done < "$FRAG"
[ $bad -eq 0 ] || { log "fix $FRAG (a dependency is missing)"; exit 1; }

log "building with $(nproc) jobs"
make -s -C "$src" O="$obj" -j"$(nproc)" bzImage modules >"$top/build.log" 2>&1 || {
	tail -n 40 "$top/build.log" >&2
	log "build failed (log: $top/build.log)"
	exit 1
}
make -s -C "$src" O="$obj" INSTALL_MOD_PATH="$stage" modules_install >>"$top/build.log" 2>&1
rel=$(make -s -C "$src" O="$obj" kernelrelease)
[ -s "$stage/lib/modules/$rel/modules.builtin" ] ||
	{ log "no modules.builtin for $rel"; exit 1; }
secs=$(($(date +%s) - start))
{
	echo "KREL_DEBUG=$rel"
	echo "VMLINUZ_DEBUG=$obj/arch/x86/boot/bzImage"
	echo "KDIR_DEBUG=$obj"
	echo "MODROOT_DEBUG=$stage/lib/modules/$rel"
	echo "BUILD_SECONDS_DEBUG=$secs"
} > "$top/done"
cp "$top/done" "$ENVF"
# Kernels of earlier configurations (about 2 GiB each) are not used again.
find "$CACHE/debug-kernel" -mindepth 1 -maxdepth 1 -type d ! -name "$key" -exec rm -rf {} +
log "built $rel in $secs s"
echo "$ENVF"
