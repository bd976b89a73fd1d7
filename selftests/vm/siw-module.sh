#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build siw.ko (Soft-iWARP) for a test kernel, out of tree:
#   siw-module.sh KVER            (KVER = 6.12)
# Debian's kernels leave CONFIG_RDMA_SIW out, and make check runs the fetch
# test over a second provider (an iWARP one: its own connection manager,
# limits and no RoCE GIDs), so nothing depends on one provider's quirks.
# The sources are drivers/infiniband/sw/siw of linux-source-6.12 (the
# package debug-kernel.sh builds from), built against the kernel's headers.
# Output: build/<release>/siw/siw.ko, kept while the package is the same.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SRC=${ENGRAM_SRC:-$(cd "$here/../.." && pwd)}
BUILD=${ENGRAM_BUILD:-$SRC/build}
CACHE=${CACHE:-/var/cache/engram-rdma}
KVER=${1:?usage: siw-module.sh KVER}

log() { echo "siw-module: $*" >&2; }

case "$KVER" in
6.12) PKG=linux-source-6.12 ;;
*) log "no source package for $KVER's siw"; exit 1 ;;
esac
rel=$("$here/kernels.sh" release "$KVER")
kdir=$("$here/kernels.sh" builddir "$KVER")
if [ -z "$rel" ] || [ -z "$kdir" ]; then
	log "kernel $KVER not installed (run 'make deps')"
	exit 1
fi
deb=$("$here/deps.sh" --deb "$PKG") || exit 1
out=$BUILD/$rel/siw
mkdir -p "$BUILD"
exec 9>"$BUILD/.siw-$rel.lock"
flock -w 900 9 || { log "lock on $out busy for 15 min"; exit 1; }
if [ -s "$out/siw.ko" ] && [ "$(cat "$out/.from" 2>/dev/null)" = "$(basename "$deb")" ]; then
	log "cached: $out/siw.ko (from $(basename "$deb"))"
	exit 0
fi
rm -rf "$out"
mkdir -p "$out"
log "unpacking drivers/infiniband/sw/siw of $(basename "$deb")"
dpkg-deb --fsys-tarfile "$deb" | tar -xO --wildcards './usr/src/linux-source-*.tar.xz' |
	xz -dc -T0 | tar -x -C "$out" --strip-components=5 --wildcards \
	'linux-source-*/drivers/infiniband/sw/siw/*'
[ -s "$out/Makefile" ] && [ -s "$out/siw_main.c" ] ||
	{ log "no siw sources in $(basename "$deb")"; exit 1; }
read -r -a extra <<<"$("$here/kernels.sh" makeflags "$KVER")"
if ! timeout 600 make -C "$kdir" M="$out" CONFIG_RDMA_SIW=m "${extra[@]}" -j"$(nproc)" \
	modules >"$out/build.log" 2>&1; then
	tail -n 20 "$out/build.log" >&2
	log "build failed"
	exit 1
fi
magic=$(modinfo -F vermagic "$out/siw.ko" | cut -d' ' -f1)
[ "$magic" = "$rel" ] || { log "siw.ko is for $magic, not $rel"; exit 1; }
basename "$deb" >"$out/.from"
log "built $out/siw.ko"
