#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make matrix`: the module built with W=1 and checked by sparse (C=2) for
# every kernel and architecture it supports, as TAP, one line per tree:
#
#   6.1, 6.12         the guests' kernels (deps.sh: kheaders.sh --only)
#   x86-5.10          bullseye's newest 5.10     (selftests/vm/kheaders.sh:
#   x86-5.10-oldest   bullseye main's oldest      Debian's header packages
#   x86-6.1-oldest    bookworm main's oldest 6.1  unpacked into the cache,
#   x86-6.12-trixie   trixie's 6.12               nothing installed)
#   x86-6.12-rt       bookworm-backports' RT
#   x86-7.2           sid's 7.2
#   x86-7.3-rc        experimental's 7.3-rc
#   arm64-6.12        arm64, 4 KiB pages, with aarch64-linux-gnu-gcc
#   arm64-6.12-16k    arm64, 16 KiB pages
#
# A tree passes when make succeeds and nothing is reported about the
# module's own sources (kmod/, uapi/): no compiler warning under W=1, no
# sparse message.  Messages located in the kernel's headers fail the tree
# too, except where the tree's own compiler is not on this machine and a
# stand-in compiles (the 7.x trees, built by Debian with gcc-16: gcc-12
# ignores their counted_by attributes); those are counted on a diagnostic
# line.  The compat probes each tree chose are printed as diagnostics, so
# the log shows which backport every kernel got.
#
# Environment: MATRIX (tree names, default all), MATRIX_JOBS (make -j,
# default nproc).  Logs: build/logs/matrix-<tree>.log, build/matrix/<tree>/.
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
KH=$root/selftests/vm/kheaders.sh
logs=$root/build/logs
mkdir -p "$logs"
ALL="6.1 6.12 x86-5.10 x86-5.10-oldest x86-6.1-oldest x86-6.12-trixie x86-6.12-rt x86-7.2
	x86-7.3-rc arm64-6.12 arm64-6.12-16k"
MATRIX=${MATRIX:-$ALL}
jobs=${MATRIX_JOBS:-$(nproc)}

# Header trees are fetched once (a few seconds when present).
if ! "$KH" >"$logs/matrix-kheaders.log" 2>&1; then
	echo "# kheaders.sh could not provide every tree:"
	sed 's/^/#   /' "$logs/matrix-kheaders.log" | tail -n 15
fi

n=0 failed=0
echo "1..$(($(wc -w <<<"$MATRIX") + 1))"
for t in $MATRIX; do
	n=$((n + 1))
	case "$t" in
	6.1 | 6.12)
		kdir=$(selftests/vm/kernels.sh builddir "$t")
		rel=$(selftests/vm/kernels.sh release "$t")
		flags="" ;;
	*)
		kdir=$("$KH" kdir "$t" 2>/dev/null)
		rel=$(basename "${kdir:-none}")
		rel=${rel#linux-headers-}
		flags=$("$KH" makeflags "$t" 2>/dev/null) ;;
	esac
	if [ -z "$kdir" ] || [ ! -d "$kdir" ]; then
		echo "not ok $n - $t: no kernel build tree (make deps; selftests/vm/kheaders.sh)"
		failed=$((failed + 1))
		continue
	fi
	out=$root/build/matrix/$t
	log=$logs/matrix-$t.log
	mkdir -p "$out"
	# Nothing of an in-tree build: its modules.order names the in-tree .ko.
	rsync -a --delete --exclude='*.o' --exclude='*.ko' --exclude='*.mod' \
		--exclude='*.mod.c' --exclude='.*.cmd' --exclude='compat_probed.h' \
		--exclude='modules.order' --exclude='Module.symvers' \
		Kbuild kmod uapi "$out/"
	# One copied by an older run is not deleted by --delete: excluded.
	rm -f "$out/modules.order" "$out/kmod/modules.order"
	t0=$SECONDS
	# C=2 checks every file, built or not; CF as style.sh has it.
	# shellcheck disable=SC2086
	timeout 900 make -C "$kdir" M="$out" W=1 C=2 CF="-D__CHECK_ENDIAN__" $flags \
		-j"$jobs" modules >"$log" 2>&1
	rc=$?
	dt=$((SECONDS - t0))
	# Every diagnostic carries file:line:col; split ours from the kernel's.
	diags=$(grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error)' "$log" | sed "s|^$out/||")
	ours=$(grep -E '^(kmod|uapi)/' <<<"$diags")
	theirs=$(grep -Ev '^(kmod|uapi)/' <<<"$diags" | grep -v '^$')
	# Unlocated warnings: only the one about pahole, for a tree whose
	# module BTF makeflags turned off, is expected.
	loose=$(grep -E '^(warning|error):' "$log" | grep -v 'pahole version differs' || true)
	stand_in=0
	case "$flags" in *CC=*) stand_in=1 ;; esac
	why=""
	[ $rc -eq 0 ] || why="make exit $rc"
	[ -z "$ours" ] || why="${why:+$why; }$(wc -l <<<"$ours") messages on the module's sources"
	[ -z "$loose" ] || why="${why:+$why; }$(wc -l <<<"$loose") unlocated warnings"
	if [ -n "$theirs" ] && [ $stand_in -eq 0 ]; then
		why="${why:+$why; }$(wc -l <<<"$theirs") messages in the kernel's headers"
	fi
	if [ ! -f "$out/kmod/engram_rdma.ko" ] && [ -z "$why" ]; then
		why="no engram_rdma.ko"
	fi
	arch=x86_64
	case "$t" in arm64*) arch=arm64 ;; esac
	if [ -z "$why" ]; then
		echo "ok $n - $t ($rel, $arch): W=1 and sparse clean (${dt}s)"
	else
		echo "not ok $n - $t ($rel, $arch): $why"
		failed=$((failed + 1))
		{ echo "$ours"; echo "$loose"; [ $stand_in -eq 1 ] || echo "$theirs"; } |
			grep -v '^$' | head -n 15 | sed 's/^/#   /'
		[ $rc -eq 0 ] || tail -n 10 "$log" | sed 's/^/#   /'
	fi
	if [ -n "$theirs" ] && [ $stand_in -eq 1 ]; then
		echo "#   $t: $(wc -l <<<"$theirs") warnings in the kernel's own headers from the stand-in compiler ($(sed -n 's/.*CC=\([^ ]*\).*/\1/p' <<<"$flags" | xargs basename)), not the module's: $(sed -E 's/.*\[(-W[^]]*)\].*/\1/' <<<"$theirs" | sort | uniq -c | sort -rn | head -n 3 | xargs)"
	fi
	if [ -f "$out/kmod/compat_probed.h" ]; then
		have=$(sed -n 's/^#define ENGRAM_HAVE_\([A-Z0-9_]*\) 1$/\1/p' "$out/kmod/compat_probed.h" | tr 'A-Z\n' 'a-z ')
		lack=$(sed -n 's|^/\* ENGRAM_HAVE_\([A-Z0-9_]*\): .*|\1|p' "$out/kmod/compat_probed.h" | tr 'A-Z\n' 'a-z ')
		echo "#   $t probes: has ${have:-nothing}; without (compat.h supplies or skips): ${lack:-nothing}"
	fi
done

# A kernel older than compat.h knows is refused by Kbuild at once, in
# words (DKMS refuses it before that: dkms-check.sh).  Posed as 5.4 to the
# 6.12 tree: the refusal comes before anything is compiled.
n=$((n + 1))
kdir=$(selftests/vm/kernels.sh builddir 6.12)
out=$root/build/matrix/too-old
mkdir -p "$out"
# Sources only: an in-tree build (make module) leaves objects beside them.
rsync -a --delete --exclude='*.o' --exclude='*.ko' --exclude='*.mod' --exclude='*.mod.c' \
	--exclude='.*.cmd' --exclude='compat_probed.h' --exclude='modules.order' \
	--exclude='Module.symvers' Kbuild kmod uapi "$out/"
rm -f "$out/modules.order" "$out/kmod/modules.order"
msg=$(timeout 300 make -C "${kdir:-/nonexistent}" M="$out" VERSION=5 PATCHLEVEL=4 modules 2>&1)
rc=$?
if [ $rc -ne 0 ] && grep -q 'engram-rdma builds for Linux 5.10 and newer; this kernel is 5.4' <<<"$msg" &&
   [ -z "$(find "$out" -name '*.o')" ]; then
	echo "ok $n - Linux 5.4 refused by Kbuild before compiling, saying why"
else
	echo "not ok $n - Linux 5.4 refused by Kbuild before compiling, saying why (exit $rc)"
	tail -n 5 <<<"$msg" | sed 's/^/#   /'
	failed=$((failed + 1))
fi
exit $((failed > 0))
