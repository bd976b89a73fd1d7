#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Faults in the two-guest topology: the Spark guest (192.0.2.2) keeps
# fetch loops running while the host guest (192.0.2.1) takes its network
# link down and up, reloads the module, deletes and re-adds its RDMA device,
# unloads and reloads the table, and at last is killed outright (sysrq b:
# no FIN, no disconnect) and booted again.  The guests are joined by QEMU's
# socket netdev on 127.0.0.1; the Spark's QEMU listens, so the host's
# second boot connects to it again.
#
#   run-faults.sh --kver 6.1|6.12 [--timeout SECONDS] [--logs DIR]
#
# A host boot whose Spark guest died stops 90 s later (run.sh --peer), and
# no second host boot follows a Spark that is gone.
#
# Prints the TAP of the Spark and of both host boots, then
# ENGRAM-SELFTESTS-COMPLETE when every guest reported what it had to (the
# first host boot ends with its kill marker, the others with an exit
# status); exits non-zero unless all passed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/pair-lib.sh"
. "$here/peer-lib.sh"
KVER=6.1 TMO=1200 LOGS=""
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=${2:?}; shift 2 ;;
	*) echo "run-faults.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done

work=$(mktemp -d "${TMPDIR:-/tmp}/engram-faults.XXXXXX")
spid=""
trap 'kill $spid 2>/dev/null; rm -rf "$work"' EXIT

port=$(free_port) || { echo "not ok - run-faults: no free port on 127.0.0.1"; exit 1; }

# Short heartbeats and reconnect backoff, so each fault heals in seconds.
LINKP="heartbeat_ms=500 heartbeat_timeout_ms=4000 reconnect_max_ms=1000"

mapfile -t sl < <(logs_opt spark)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" --tcg-thread single "${sl[@]}" --net "listen:$port" \
	--ip 192.0.2.2 --params "remote=rdma://192.0.2.1:18515@192.0.2.2 $LINKP" \
	-- selftests/guest/fault_spark.sh >"$work/spark.out" 2>&1 &
spid=$!
wait_listening "$port" $spid

mapfile -t h1 < <(logs_opt host1)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" --tcg-thread single "${h1[@]}" --net "connect:$port" --peer $spid \
	--ip 192.0.2.1 --params "listen=rdma://192.0.2.1:18515" \
	-- selftests/guest/fault_host.sh 1 >"$work/host1.out" 2>&1
h1rc=$?
# The first boot must have got as far as its own killing.
killed=0
grep -q '^ENGRAM-FAULT-KILL-HOST$' "$work/host1.out" && killed=1

mapfile -t h2 < <(logs_opt host2)
if peer_alive $spid; then
	"$here/run.sh" --kver "$KVER" --timeout "$TMO" --tcg-thread single "${h2[@]}" --net "connect:$port" --peer $spid \
		--ip 192.0.2.1 --params "listen=rdma://192.0.2.1:18515" \
		-- selftests/guest/fault_host.sh 2 >"$work/host2.out" 2>&1
	h2rc=$?
else
	echo "# the Spark guest is gone: no second host boot" >"$work/host2.out"
	h2rc=125
fi
wait $spid
src=$?
spid=""

sed 's/^\(not \)\{0,1\}ok [0-9]* - /&spark: /' "$work/spark.out"
sed 's/^\(not \)\{0,1\}ok [0-9]* - /&host boot 1: /' "$work/host1.out"
sed 's/^\(not \)\{0,1\}ok [0-9]* - /&host boot 2: /' "$work/host2.out"
echo "# faults: spark exit $src, host boot 1 exit $h1rc (killed: $killed), host boot 2 exit $h2rc"
h1fail=$(grep '^not ok' "$work/host1.out" | grep -vc '# TODO')
if [ $killed -eq 1 ] && [ $src -ne 125 ] && [ $h2rc -ne 125 ]; then
	echo ENGRAM-SELFTESTS-COMPLETE
fi
[ $killed -eq 1 ] && [ "$h1fail" -eq 0 ] && [ $src -eq 0 ] && [ $h2rc -eq 0 ]
