#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make soak`: many rows fetched over RDMA between two guests and compared
# byte for byte with the file, with a fault every few minutes.  The Spark
# guest (192.0.2.2, selftests/guest/soak_spark.sh) fetches; the host guest
# (192.0.2.1, soak_host.sh) serves and breaks things in turn (the module,
# the RDMA device, the table, the listener, the NIC); the Spark also kills
# a fetcher mid-fetch now and then.  Joined by QEMU's socket netdev on
# 127.0.0.1, as in run-faults.sh.
#
#   run-soak.sh [--kver 6.12] [--rows 100000000] [--fault-every 180]
#               [--procs 2] [--batch 16384,4096,288] [--mtu 9000]
#               [--timeout SECONDS] [--logs DIR]
#
# Prints both guests' TAP, then a summary (rows, fetches, faults, errors by
# kind, bad rows, time) and ENGRAM-SELFTESTS-COMPLETE when both guests
# reported an exit status; exits non-zero unless both passed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/pair-lib.sh"
KVER=6.12 ROWS=100000000 EVERY=180 PROCS=2 BATCH=16384,4096,288 MTU=9000 TMO="" LOGS=""
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--rows) ROWS=${2:?}; shift 2 ;;
	--fault-every) EVERY=${2:?}; shift 2 ;;
	--procs) PROCS=${2:?}; shift 2 ;;
	--batch) BATCH=${2:?}; shift 2 ;;
	--mtu) MTU=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=${2:?}; shift 2 ;;
	*) echo "run-soak.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
for v in "$ROWS" "$EVERY" "$PROCS" "$MTU" ${TMO:+"$TMO"}; do
	case "$v" in ''|*[!0-9]*) echo "run-soak.sh: '$v' is not a number" >&2; exit 2 ;; esac
done
# The time it may take: 10,000 rows/s at the least between two TCG guests
# (26,000 to 30,000 were measured, with jumbo frames), plus the boots; the
# guests' own bound is the host's ENGRAM_SOAK_MAX_S.
[ -n "$TMO" ] || TMO=$((ROWS / 10000 + 1800))
MAX_S=$((TMO - 600))

work=$(mktemp -d "${TMPDIR:-/tmp}/engram-soak.XXXXXX")
spid=""
trap 'kill $spid 2>/dev/null; rm -rf "$work"' EXIT
port=$(free_port) || { echo "not ok - run-soak: no free port on 127.0.0.1"; exit 1; }

# Short heartbeats and reconnect backoff, so each fault heals in seconds.
LINKP="heartbeat_ms=500 heartbeat_timeout_ms=4000 reconnect_max_ms=1000"
t0=$SECONDS
mapfile -t sl < <(logs_opt spark)
# The Spark's output is shown as it comes (its progress), and kept.
(
	"$here/run.sh" --kver "$KVER" --timeout "$TMO" --tcg-thread single "${sl[@]}" --net "listen:$port" \
		--ip 192.0.2.2 --params "$LINKP" \
		-- env ENGRAM_SOAK_ROWS="$ROWS" ENGRAM_SOAK_PROCS="$PROCS" ENGRAM_SOAK_BATCH="$BATCH" \
		ENGRAM_SOAK_MTU="$MTU" \
		selftests/guest/soak_spark.sh 2>&1 | tee "$work/spark.out" | sed -u 's/^/# spark| /'
	echo "${PIPESTATUS[0]}" >"$work/spark.rc"
) &
spid=$!
wait_listening "$port" $spid

mapfile -t hl < <(logs_opt host)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" --tcg-thread single "${hl[@]}" --net "connect:$port" \
	--ip 192.0.2.1 --params "listen=rdma://192.0.2.1:18515" \
	-- env ENGRAM_SOAK_FAULT_EVERY="$EVERY" ENGRAM_SOAK_MAX_S="$MAX_S" ENGRAM_SOAK_MTU="$MTU" \
	selftests/guest/soak_host.sh >"$work/host.out" 2>&1
hrc=$?
wait $spid
spid=""
read -r src <"$work/spark.rc" 2>/dev/null || src=125
secs=$((SECONDS - t0))

sed 's/^\(not \)\{0,1\}ok [0-9]* - /&spark: /' "$work/spark.out"
sed 's/^\(not \)\{0,1\}ok [0-9]* - /&host: /' "$work/host.out"
sed -n 's/^# soak-spark: /# soak summary: /p; s/^# soak-host: /# soak summary: /p' \
	"$work/spark.out" "$work/host.out"
echo "# soak: $ROWS rows asked, $PROCS processes, a fault every ${EVERY}s, kernel $KVER," \
	"${secs}s in all (boots included); spark exit $src, host exit $hrc"
if [ "$src" -ne 125 ] && [ $hrc -ne 125 ]; then
	echo ENGRAM-SELFTESTS-COMPLETE
fi
[ "$src" -eq 0 ] && [ $hrc -eq 0 ]
