#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Build engram_rdma.ko for a test kernel, out of the source tree:
#   build-module.sh KVER            (KVER = 6.1 or 6.12)
# Copies Kbuild, kmod/ and uapi/ into build/<release>/ (the in-tree build is
# left alone) and runs `make -C /lib/modules/<release>/build M=... W=1 modules`.
# Fails when the build fails or prints any "warning:" line.
# Output: build/<release>/kmod/engram_rdma.ko; log: build/<release>/build.log
#
# Environment: ENGRAM_SRC (source tree, default: this repository),
#              ENGRAM_BUILD (output root, default: $ENGRAM_SRC/build).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SRC=${ENGRAM_SRC:-$(cd "$here/../.." && pwd)}
BUILD=${ENGRAM_BUILD:-$SRC/build}
KVER=${1:?usage: build-module.sh KVER}

rel=$("$here/kernels.sh" release "$KVER")
kdir=$("$here/kernels.sh" builddir "$KVER")
if [ -z "$rel" ] || [ -z "$kdir" ]; then
	echo "build-module: kernel $KVER not installed (run 'make deps')" >&2
	exit 1
fi
out=$BUILD/$rel
mkdir -p "$out"

# One build per release at a time (check.sh and a developer's vm-run may race).
exec 9>"$BUILD/.build-$rel.lock"
flock -w 900 9 || { echo "build-module: lock on $out busy for 15 min" >&2; exit 1; }

for p in Kbuild kmod uapi; do
	[ -e "$SRC/$p" ] || { echo "build-module: $SRC/$p missing" >&2; exit 1; }
done
# Mirror the sources, keeping object files of earlier builds (incremental),
# never importing in-tree build products: compat_probed.h among them, the
# probes' answers for the in-tree build's kernel (make module's KDIR), not
# this one's.
rsync -a --delete \
	--exclude='*.o' --exclude='*.ko' --exclude='*.mod' --exclude='*.mod.c' \
	--exclude='compat_probed.h' --exclude='.compat_probed.h.cmd' \
	--exclude='.*.cmd' --exclude='modules.order' --exclude='Module.symvers' \
	--exclude='*.a' --exclude='.*.d' --exclude='*.tmp' --exclude='*.gcno' \
	--filter='P *.o' --filter='P *.ko' --filter='P *.mod' --filter='P *.mod.c' \
	--filter='P *.gcno' \
	--filter='P .*.cmd' --filter='P modules.order' --filter='P Module.symvers' \
	--filter='P build.log' \
	"$SRC/Kbuild" "$SRC/kmod" "$SRC/uapi" "$out/"

echo "build-module: $KVER ($rel) -> $out" >&2
set +e
# The debug kernel's module counts its lines (gcov) and edges (KCOV).
cov=0
[ "$KVER" != debug ] || cov=1
# The cached kernels' own compiler may not be here (kheaders.sh makeflags).
read -r -a extra <<<"$("$here/kernels.sh" makeflags "$KVER")"
timeout 1200 make -C "$kdir" M="$out" W=1 ENGRAM_COVERAGE=$cov "${extra[@]}" -j"$(nproc)" modules \
	>"$out/build.log" 2>&1
rc=$?
set -e
cat "$out/build.log"
if [ $rc -ne 0 ]; then
	echo "build-module: FAILED for $rel (make exit $rc)" >&2
	exit 1
fi
warn=$(grep -i 'warning:' "$out/build.log" || true)
case " ${extra[*]} " in
*" CC="*)
	# A stand-in for the kernel's own compiler: what it says about the
	# kernel's headers is not the module's business (build-matrix.sh).
	warn=$(grep -v -e "^${kdir%/*}/" -e 'pahole version differs' <<<"$warn" || true) ;;
esac
if [ -n "$warn" ]; then
	echo "build-module: FAILED for $rel: the build printed warnings:" >&2
	echo "$warn" >&2
	# Make the next (incremental) build recompile and report them again.
	find "$out" -name '*.o' -delete
	rm -f "$out/kmod/engram_rdma.ko"
	exit 1
fi
[ -f "$out/kmod/engram_rdma.ko" ] || {
	echo "build-module: $out/kmod/engram_rdma.ko not produced" >&2; exit 1; }
echo "build-module: OK $out/kmod/engram_rdma.ko" >&2
