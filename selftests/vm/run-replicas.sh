#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Replicas across hosts, three guests: a GPU node (Spark) with two NICs,
# each joined by QEMU's socket netdev on 127.0.0.1 to one host guest
# (host1 192.0.2.1 <-> 192.0.2.2, host2 192.0.3.3 <-> 192.0.3.4: the last
# bytes differ, and so the MACs run.sh derives from them).  Both
# hosts load the same file; the Spark links to both and fetches the table
# opened on no link, while host1's module is unloaded and loaded again and
# then host1 is killed outright (sysrq b) in the middle of the fetch loop
# (selftests/guest/replicas_spark.sh, replicas_host.sh).
#
#   run-replicas.sh --kver 6.1|6.12 [--timeout SECONDS] [--logs DIR]
#                   [--scripts SPARK HOST] [--mem SIZE] [--disk-size SIZE]
#
# Prints the TAP of the three guests, then ENGRAM-SELFTESTS-COMPLETE when
# each reported what it had to (host1 ends with its kill marker, the others
# with an exit status); exits non-zero unless all passed.  --scripts runs
# other commands in the same topology (make bench's replicas case): the
# Spark's, and the hosts' with the host number appended; then no host is
# killed and all three must exit 0.  --mem and --disk-size: each guest's
# (default 2G, and run.sh's).
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/pair-lib.sh"
KVER=6.12 TMO=1200 LOGS="" MEM=2G DISK=()
SPARK_CMD=selftests/guest/replicas_spark.sh HOST_CMD=selftests/guest/replicas_host.sh KILL=1
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=${2:?}; shift 2 ;;
	--scripts) SPARK_CMD=${2:?}; HOST_CMD=${3:?}; KILL=0; shift 3 ;;
	--mem) MEM=${2:?}; shift 2 ;;
	--disk-size) DISK=(--disk-size "${2:?}"); shift 2 ;;
	*) echo "run-replicas.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/engram-replicas.XXXXXX")
pids=""
trap 'kill $pids 2>/dev/null; rm -rf "$work"' EXIT

p1=$(free_port) && p2=$(free_port) && [ "$p1" != "$p2" ] ||
	{ echo "not ok - run-replicas: no two free ports on 127.0.0.1"; exit 1; }

# Short heartbeats and backoff, so that a host going away is seen in seconds.
LINKP="heartbeat_ms=300 heartbeat_timeout_ms=2000 reconnect_max_ms=1000"
R1=rdma://192.0.2.1:18515@192.0.2.2
R2=rdma://192.0.3.3:18515@192.0.3.4

mapfile -t sl < <(logs_opt spark)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" "${sl[@]}" --mem "$MEM" "${DISK[@]}" \
	--net "listen:$p1" --ip 192.0.2.2 --net2 "listen:$p2" --ip2 192.0.3.4 \
	--params "remote=$R1,$R2 $LINKP" \
	-- "$SPARK_CMD" >"$work/spark.out" 2>&1 &
spid=$!
pids=$spid
wait_listening "$p1" $spid && wait_listening "$p2" $spid ||
	{ echo "not ok - run-replicas: the Spark guest's QEMU does not listen"; exit 1; }

for h in 1 2; do
	mapfile -t hl < <(logs_opt host$h)
	port=$p1 ip=192.0.2.1
	[ $h = 1 ] || port=$p2 ip=192.0.3.3
	"$here/run.sh" --kver "$KVER" --timeout "$TMO" "${hl[@]}" --mem "$MEM" "${DISK[@]}" \
		--net "connect:$port" --ip "$ip" --params "listen=rdma://$ip:18515" --peer $spid \
		-- "$HOST_CMD $h" >"$work/host$h.out" 2>&1 &
	eval "h${h}pid=\$!"
	pids="$pids $!"
done
# shellcheck disable=SC2154
wait "$h1pid"
h1rc=$?
# shellcheck disable=SC2154
wait "$h2pid"
h2rc=$?
wait $spid
src=$?
pids=""

for g in spark host1 host2; do
	sed "s/^\\(not \\)\\{0,1\\}ok [0-9]* - /&$g: /" "$work/$g.out"
done
echo "# replicas: spark exit $src, host1 exit $h1rc, host2 exit $h2rc"
if [ $KILL -eq 0 ]; then
	if [ $src -ne 125 ] && [ $h1rc -ne 125 ] && [ $h2rc -ne 125 ]; then
		echo ENGRAM-SELFTESTS-COMPLETE
	fi
	[ $src -eq 0 ] && [ $h1rc -eq 0 ] && [ $h2rc -eq 0 ]
	exit
fi
killed=0
grep -q '^ENGRAM-REPLICAS-KILL-HOST$' "$work/host1.out" && killed=1
echo "# replicas: host1 killed: $killed"
if [ $killed -eq 1 ] && [ $src -ne 125 ] && [ $h2rc -ne 125 ]; then
	echo ENGRAM-SELFTESTS-COMPLETE
fi
h1fail=$(grep -c '^not ok' "$work/host1.out")
[ $killed -eq 1 ] && [ "$h1fail" -eq 0 ] && [ $src -eq 0 ] && [ $h2rc -eq 0 ]
