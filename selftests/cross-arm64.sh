#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The user-space side for arm64 GPU nodes, cross-built on this machine:
# engramctl, libengram (shared and static), the in-guest test programs and
# engram_bench, with aarch64-linux-gnu-gcc and each Makefile's own -Wall
# -Wextra -Werror, against bookworm's arm64 libraries that kheaders.sh
# unpacked into $CACHE/kheaders/arm64-sysroot (libnl-3, jansson, OpenSSL,
# rdma-core).  A copy of the sources is built under build/arm64/, so the
# native build in the tree is left alone.  TAP: one line per program set,
# each checked to be aarch64 ELF.  The arm64 guest (issue 14) runs what
# lands in build/arm64/.
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
CACHE=${CACHE:-/var/cache/engram-rdma}
SR=$CACHE/kheaders/arm64-sysroot
out=$root/build/arm64
logs=$root/build/logs
mkdir -p "$logs"
X=aarch64-linux-gnu-

echo "1..4"
if ! command -v "${X}gcc" >/dev/null || [ ! -f "$SR/.kheaders" ] ||
   [ ! -e /usr/aarch64-linux-gnu/include/stdio.h ]; then
	for i in 1 2 3 4; do
		echo "not ok $i - arm64 cross-build: ${X}gcc, libc6-dev-arm64-cross and $SR needed (make deps; selftests/vm/kheaders.sh)"
	done
	exit 1
fi

mkdir -p "$out/selftests"
rsync -a --delete --exclude='*.o' --exclude='*.d' --exclude='*.a' --exclude='*.so*' \
	--exclude='engramctl/engramctl' --exclude='__pycache__' tools uapi kmod "$out/"
for d in guest lib bench; do
	rsync -a --delete --exclude='*.o' --exclude='*.d' "selftests/$d" "$out/selftests/"
done
# Native binaries of the copied directories must not survive as targets.
make -s -C "$out/selftests/guest" clean >/dev/null 2>&1
make -s -C "$out/selftests/bench" clean >/dev/null 2>&1

# pkg-config answers from the sysroot; the sysroot's headers come after the
# cross compiler's own C library, its libraries are found at link time.
export PKG_CONFIG_LIBDIR=$SR/usr/lib/aarch64-linux-gnu/pkgconfig:$SR/usr/share/pkgconfig
export PKG_CONFIG_SYSROOT_DIR=$SR
export CFLAGS="-O2 -g -isystem $SR/usr/include -isystem $SR/usr/include/aarch64-linux-gnu"
export LDFLAGS="-L$SR/usr/lib/aarch64-linux-gnu -Wl,-rpath-link,$SR/usr/lib/aarch64-linux-gnu"

n=0 failed=0
step() {
	# step DESCRIPTION DIR FILE...: build DIR, then every FILE must be aarch64.
	local desc=$1 dir=$2 log f bad="" t0=$SECONDS
	shift 2
	n=$((n + 1))
	log=$logs/cross-arm64-${dir//\//-}.log
	if ! make -C "$out/$dir" CC="${X}gcc" LD="${X}ld" AR="${X}ar" OBJCOPY="${X}objcopy" \
		-j"$(nproc)" >"$log" 2>&1; then
		echo "not ok $n - $desc: build failed"
		grep -E -m 10 '(error|warning):' "$log" | sed 's/^/#   /'
		failed=$((failed + 1))
		return
	fi
	for f in "$@"; do
		file -bL "$out/$dir/$f" 2>/dev/null | grep -q 'ELF 64-bit LSB .*ARM aarch64' ||
			bad="$bad $f"
	done
	if [ -n "$bad" ]; then
		echo "not ok $n - $desc: not aarch64:$bad"
		failed=$((failed + 1))
	else
		echo "ok $n - $desc: aarch64, -Werror ($((SECONDS - t0))s)"
	fi
}
step "arm64 cross-build: libengram (shared and static)" tools/libengram libengram.so libengram-all.o
step "arm64 cross-build: engramctl" tools/engramctl engramctl
# shellcheck disable=SC2046
step "arm64 cross-build: in-guest test programs" selftests/guest \
	$(sed -n 's/^all: *//p' selftests/guest/Makefile)
step "arm64 cross-build: engram_bench" selftests/bench engram_bench
exit $((failed > 0))
