#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Two guests, the faithful topology: a host guest (192.0.2.1) that loads a
# table and serves it, and a Spark guest (192.0.2.2) that fetches from it,
# joined by QEMU's socket netdev on 127.0.0.1 (the only address used on
# the machine), each with its own kernel and rxe0 on its virtio NIC.
#
#   run-pair.sh --kver 6.1|6.12 [--timeout SECONDS] [--logs DIR]
#
# Runs selftests/guest/pair_host.sh in the host guest and pair_spark.sh in
# the Spark guest, prints both TAP streams (the Spark's first) and then
# ENGRAM-SELFTESTS-COMPLETE if both guests reported an exit status; exits
# non-zero unless both passed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/pair-lib.sh"
top=$(cd "$here/../.." && pwd)
KVER=6.1 TMO=900 LOGS=""
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=${2:?}; shift 2 ;;
	*) echo "run-pair.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/engram-pair.XXXXXX")
trap 'kill $hpid 2>/dev/null; rm -rf "$work"' EXIT

# A free port on 127.0.0.1, chosen at random so that parallel runs differ.
port=$(free_port) || { echo "not ok - run-pair: no free port on 127.0.0.1"; exit 1; }


mapfile -t hl < <(logs_opt host)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" "${hl[@]}" --net "listen:$port" \
	--ip 192.0.2.1 --params "listen=rdma://192.0.2.1:18515" \
	-- selftests/guest/pair_host.sh >"$work/host.out" 2>&1 &
hpid=$!
# QEMU must be listening before the other one connects.
wait_listening "$port" $hpid
mapfile -t sl < <(logs_opt spark)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" "${sl[@]}" --net "connect:$port" \
	--ip 192.0.2.2 --params "remote=rdma://192.0.2.1:18515@192.0.2.2 heartbeat_timeout_ms=10000" \
	-- selftests/guest/pair_spark.sh >"$work/spark.out" 2>&1
src=$?
wait $hpid
hrc=$?
hpid=""

sed 's/^\(not \)\{0,1\}ok [0-9]* - /&spark: /' "$work/spark.out"
sed 's/^\(not \)\{0,1\}ok [0-9]* - /&host: /' "$work/host.out"
echo "# pair: spark guest exit $src, host guest exit $hrc"
# 125: that guest never reported an exit status (timeout, panic).
if [ $src -ne 125 ] && [ $hrc -ne 125 ]; then
	echo ENGRAM-SELFTESTS-COMPLETE
fi
[ $src -eq 0 ] && [ $hrc -eq 0 ]
