#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The host guest of the soak (selftests/vm/run-soak.sh, `make soak`): serves
# the soak table to the Spark guest and, every ENGRAM_SOAK_FAULT_EVERY
# seconds, breaks something from the fault run's list, in turn: the module
# (rmmod with the Spark connected, modprobe, table reload), the RDMA device
# (rdma link del/add), the table (unload under fetches, reload), the
# listener (listen del/add) and the NIC (down 6 s, up).  After each one the
# Spark's link must come back and its remote fetches resume within
# ENGRAM_SOAK_RESUME_S.  Ends when the Spark says it is done (TCP inside
# the guests' network) or after ENGRAM_SOAK_MAX_S, and prints the faults
# by kind as "# soak-host: ..." lines that run-soak.sh sums up.
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/soak.safetensors
IP=192.0.2.1
SIGNAL_PORT=18602
ROWS=${ENGRAM_SOAK_TABLE_ROWS:-1000000}
EVERY=${ENGRAM_SOAK_FAULT_EVERY:-180}
RESUME_S=${ENGRAM_SOAK_RESUME_S:-150}
MAX_S=${ENGRAM_SOAK_MAX_S:-14000}
make_table "$F" "$ROWS" --seed 47 --pad-before 3 || bail "mktable"

load_table() {
	"$ENGRAMCTL" load "$F" --tensor "$PREFIX" --name soak >/dev/null 2>&1 &&
		wait_state soak ready 300
}
netdev=$(rdma link show | sed -n 's/^link rxe0\/.* netdev \([^ ]*\).*/\1/p')
[ -n "$netdev" ] || bail "no netdev under rxe0"
# Jumbo frames, as the Spark guest has them (soak_spark.sh).
MTU=${ENGRAM_SOAK_MTU:-9000}
check "MTU $MTU on $netdev" ip link set dev "$netdev" mtu "$MTU"

# The faults.  Each returns 0 when it was applied cleanly.
fault_module() {
	bounded 60 module_unload && sleep 2 &&
		bounded 60 module_load "listen=rdma://$IP:18515" && bounded 300 load_table
}
fault_device() {
	bounded 60 rdma link del rxe0 && sleep 4 &&
		bounded 60 rdma link add rxe0 type rxe netdev "$netdev"
}
fault_table() {
	bounded 60 "$ENGRAMCTL" unload soak && sleep 4 && bounded 300 load_table
}
fault_listener() {
	bounded 30 "$ENGRAMCTL" listen del "rdma://$IP:18515" && sleep 4 &&
		bounded 30 "$ENGRAMCTL" listen add "rdma://$IP:18515"
}
# Soft-RoCE sometimes leaves its GSI QP in ERR after the NIC's down and up
# (Documentation/testing.rst, the fault run): the rdma_cm then drops every
# REQ until the device is created again.  Counted apart when that was needed.
nic_healed=0
fault_nic() {
	bounded 30 ip link set dev "$netdev" down || return 1
	sleep 6
	bounded 30 ip link set dev "$netdev" up || return 1
	bounded 60 resumed 30 soak "$SCRATCH/soak-done" && return 0
	diag "after the NIC's down and up no connection in 30 s: rxe0 created again"
	nic_healed=$((nic_healed + 1))
	fault_device
}
KINDS=(module device table listener nic)
declare -A applied failed stuck

rm -f "$SCRATCH/soak-done"
# The Spark says "done" once its fetch loops have ended.
timeout "$MAX_S" python3 - "$SIGNAL_PORT" "$SCRATCH/soak-done" <<'PY' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("192.0.2.1", int(sys.argv[1])))
s.listen(1)
while True:
    c, _ = s.accept()
    c.settimeout(10)
    try:
        msg = c.recv(100).decode(errors="replace").strip()
    except OSError:
        msg = ""
    c.close()
    if msg == "done":
        open(sys.argv[2], "w").write("done\n")
        break
PY
sigpid=$!

check "the table loads" load_table
check "the Spark guest connects and fetches" resumed 900 soak "$SCRATCH/soak-done"
t_start=$SECONDS
n=0
end=$((SECONDS + MAX_S))
while [ ! -e "$SCRATCH/soak-done" ] && [ $SECONDS -lt $end ]; do
	# Wait out the interval, but stop at once when the Spark is done.
	for ((i = 0; i < EVERY; i++)); do
		[ ! -e "$SCRATCH/soak-done" ] || break 2
		sleep 1
	done
	kind=${KINDS[n % ${#KINDS[@]}]}
	n=$((n + 1))
	t0=$SECONDS
	applied[$kind]=$((${applied[$kind]:-0} + 1))
	if ! "fault_$kind"; then
		failed[$kind]=$((${failed[$kind]:-0} + 1))
		diag "fault $n ($kind) did not apply cleanly"
		# Leave the host serving, whatever state the fault left.
		module_loaded || bounded 60 module_load "listen=rdma://$IP:18515"
		[ "$(table_state soak)" = ready ] || bounded 300 load_table
		rdma link show rxe0 >/dev/null 2>&1 ||
			bounded 60 rdma link add rxe0 type rxe netdev "$netdev"
	fi
	if bounded $((RESUME_S + 30)) resumed "$RESUME_S" soak "$SCRATCH/soak-done"; then
		diag "fault $n ($kind) at $((t0 - t_start))s: fetches resumed after $((SECONDS - t0))s"
	else
		stuck[$kind]=$((${stuck[$kind]:-0} + 1))
		diag "fault $n ($kind) at $((t0 - t_start))s: no fetch resumed within ${RESUME_S}s"
	fi
done
kill $sigpid 2>/dev/null
check "the Spark guest said it was done before ${MAX_S}s" test -e "$SCRATCH/soak-done"
total=0 bad_apply=0 bad_resume=0
for k in "${KINDS[@]}"; do
	total=$((total + ${applied[$k]:-0}))
	bad_apply=$((bad_apply + ${failed[$k]:-0}))
	bad_resume=$((bad_resume + ${stuck[$k]:-0}))
	echo "# soak-host: fault $k applied ${applied[$k]:-0} failed ${failed[$k]:-0} not-resumed ${stuck[$k]:-0}"
done
echo "# soak-host: faults $total nic-needed-device-recreate $nic_healed"
# A soak that ended before its first fault proved nothing about faults.
check "$total faults applied (at least one), each cleanly" \
	test $total -ge 1 -a $bad_apply -eq 0
check "after each fault the Spark's fetches resumed within ${RESUME_S}s" test $bad_resume -eq 0
check "no warning, oops or other splat in this guest's kernel log" \
	kmsg_clean
check "rmmod at the end" bounded 60 module_unload
done_testing
