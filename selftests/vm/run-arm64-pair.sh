#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The arm64 pair: an x86 host guest (Debian's 6.12, 192.0.2.1) that loads a
# table and serves it, and an arm64 GPU-node guest (192.0.2.2) with
# Debian's 16K-page 6.12 kernel under qemu-system-aarch64 -M virt (TCG),
# whose root is Debian's arm64 packages unpacked by kheaders.sh and whose
# module, tools and test programs are cross-built (build-module.sh,
# cross-arm64.sh).  Joined as in run-pair.sh: QEMU's socket netdev on
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
. "$here/pair-lib.sh"
top=$(cd "$here/../.." && pwd)
KVER=6.12 TMO=2400
LOGS=""	# read by pair-lib.sh's logs_opt
# The arm64 guest runs under TCG at a third of the x86 guest's pace or less.
SCALE=${ENGRAM_ARM64_SCALE:-3}
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=${2:?}; shift 2 ;;
	*) echo "run-arm64-pair.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

"$top/selftests/cross-arm64.sh" >"${TMPDIR:-/tmp}/engram-cross-arm64.$$" 2>&1 || {
	sed 's/^/# cross-arm64: /' "${TMPDIR:-/tmp}/engram-cross-arm64.$$"
	rm -f "${TMPDIR:-/tmp}/engram-cross-arm64.$$"
	echo "not ok - run-arm64-pair: the arm64 tools did not build"
	exit 1
}
rm -f "${TMPDIR:-/tmp}/engram-cross-arm64.$$"

work=$(mktemp -d "${TMPDIR:-/tmp}/engram-arm64-pair.XXXXXX")
trap 'kill $hpid 2>/dev/null; rm -rf "$work"' EXIT

port=$(free_port) || { echo "not ok - run-arm64-pair: no free port on 127.0.0.1"; exit 1; }

mapfile -t hl < <(logs_opt host)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" "${hl[@]}" --net "listen:$port" \
	--ip 192.0.2.1 --params "listen=rdma://192.0.2.1:18515" \
	-- selftests/guest/arm64_host.sh >"$work/host.out" 2>&1 &
hpid=$!
wait_listening "$port" $hpid
mapfile -t sl < <(logs_opt arm64)
"$here/run.sh" --kver arm64-16k --timeout "$TMO" "${sl[@]}" --net "connect:$port" \
	--ip 192.0.2.2 --mem 2G \
	--params "remote=rdma://192.0.2.1:18515@192.0.2.2 heartbeat_timeout_ms=$((10000 * SCALE)) timeout_ms=$((1000 * SCALE))" \
	-- ENGRAM_TIMEOUT_SCALE="$SCALE" selftests/guest/arm64_spark.sh >"$work/arm64.out" 2>&1
src=$?
wait $hpid
hrc=$?
hpid=""

sed 's/^\(not \)\{0,1\}ok [0-9]* - /&arm64: /' "$work/arm64.out"
sed 's/^\(not \)\{0,1\}ok [0-9]* - /&host: /' "$work/host.out"
echo "# arm64 pair: arm64 guest exit $src, host guest exit $hrc"
if [ $src -ne 125 ] && [ $hrc -ne 125 ]; then
	echo ENGRAM-SELFTESTS-COMPLETE
fi
[ $src -eq 0 ] && [ $hrc -eq 0 ]
