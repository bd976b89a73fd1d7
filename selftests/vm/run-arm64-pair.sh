#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The arm64 pair: an x86 host guest (Debian's 6.12, 192.0.2.1) that loads a
# table and serves it, and an arm64 GPU-node guest (192.0.2.2) with
# Debian's 16K-page 6.12 kernel under qemu-system-aarch64 -M virt (TCG),
# whose root is Debian's arm64 packages unpacked by kheaders.sh and whose
# module, tools and test programs are cross-built (build-module.sh,
# cross-arm64.sh).  Joined by run-pair.sh: QEMU's socket netdev on
# 127.0.0.1, rxe0 on each virtio NIC.
#
#   run-arm64-pair.sh [--kver 6.12] [--timeout SECONDS] [--logs DIR]
#
# --kver: the host guest's kernel (x86); the arm64 guest's is always
# arm64-16k.
#
# Runs selftests/guest/arm64_host.sh in the host guest and arm64_spark.sh
# in the arm64 guest; prints both TAP streams (the arm64 guest's first) and
# then ENGRAM-SELFTESTS-COMPLETE if both guests reported an exit status;
# exits non-zero unless both passed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
KVER=6.12 TMO=2400 LOGS=()
# The arm64 guest runs under TCG at a third of the x86 guest's pace or less.
SCALE=${ENGRAM_ARM64_SCALE:-3}
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=(--logs "${2:?}"); shift 2 ;;
	*) echo "run-arm64-pair.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

out=$(mktemp "${TMPDIR:-/tmp}/engram-cross-arm64.XXXXXX")
if ! "$top/selftests/cross-arm64.sh" >"$out" 2>&1; then
	sed 's/^/# cross-arm64: /' "$out"
	rm -f "$out"
	echo "not ok - run-arm64-pair: the arm64 tools did not build"
	exit 1
fi
rm -f "$out"

exec "$here/run-pair.sh" --kver "$KVER" --spark-kver arm64-16k --timeout "$TMO" "${LOGS[@]}" \
	--name arm64 --scripts selftests/guest/arm64_host.sh selftests/guest/arm64_spark.sh \
	--spark-mem 2G --scale "$SCALE"
