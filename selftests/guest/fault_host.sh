#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The host guest of the fault test (selftests/vm/run-faults.sh).
#   fault_host.sh 1: serve the table while the Spark guest fetches in a
#	loop, and break things one after the other: the network link, the
#	module, the RDMA device, the table.  After each fault the Spark's link
#	must come back on its own and its remote fetches resume (seen here as
#	a connection and the table's lookups counter moving again).  Then kill
#	this guest outright.
#   fault_host.sh 2: the guest booted again: serve again until the Spark
#	has seen remote fetches resume, load the "faults-done" table to tell
#	it so, and wait for it to go.
. "$(dirname "$0")/lib.sh"

PHASE=${1:?phase}
F=$SCRATCH/faults.safetensors
IP=192.0.2.1
make_table "$F" 300000 --seed 43 --pad-before 5 || bail "mktable"

load_table() {
	"$ENGRAMCTL" load "$F" --tensor $PREFIX --name faults >/dev/null 2>&1 &&
		wait_state faults ready 120
}
# nic_cycle: the host's NIC down for 6 s, then up (bounded).
nic_cycle() {
	bounded 30 ip link set dev "$netdev" down || return 1
	sleep 6
	bounded 30 ip link set dev "$netdev" up
}
# gsi_state: the state of rxe0's GSI QP (QP1), which carries every rdma_cm
# message of the device.
gsi_state() { rdma resource show qp | sed -n 's/.* lqpn 1 type GSI state \([A-Z]*\).*/\1/p'; }
netdev=$(rdma link show | sed -n 's/^link rxe0\/.* netdev \([^ ]*\).*/\1/p')
[ -n "$netdev" ] || bail "no netdev under rxe0"
diag "rxe0 is on $netdev"

check "the table loads" load_table
check "the Spark guest connects and fetches" resumed 600 faults

if [ "$PHASE" = 1 ]; then
	check "rmmod with the Spark connected" bounded 60 module_unload
	sleep 2
	check "modprobe again" bounded 60 module_load "listen=rdma://$IP:18515"
	check "the table loads again" bounded 150 load_table
	check "after rmmod/modprobe the Spark's link comes back, fetches resume" \
		bounded 150 resumed 120 faults

	check "rdma link del" bounded 60 rdma link del rxe0
	sleep 4
	check "rdma link add" bounded 60 rdma link add rxe0 type rxe netdev "$netdev"
	check "after rdma link del/add the Spark's link comes back, fetches resume" \
		bounded 150 resumed 120 faults

	check "table unload under the Spark's fetches" bounded 60 "$ENGRAMCTL" unload faults
	sleep 4
	check "the table loads again" bounded 150 load_table
	check "after the table reload the Spark reopens it, fetches resume" \
		bounded 150 resumed 120 faults

	# Last before the kill, as it may leave the device unusable: the NIC
	# down for 6 s and up.  Known failure of Soft-RoCE, not of this
	# module: in about half the runs the Spark's reconnects keep timing out
	# afterwards, and where it was traced the host's GSI QP (QP1, which
	# carries every rdma_cm message) was in the ERR state: REQs arrive and
	# are dropped, the first MAD sent after the down completed with a flush
	# error, and a loopback ib_send_lat -R fails too, until the device is
	# re-created.  A 6 s netem outage with the NIC up did the same.
	# Reported as TODO with the QP's state on both guests.
	check "NIC down for 6 s, then up" nic_cycle
	if bounded 100 resumed 30 faults; then
		ok "NIC down 6 s and up: the Spark's link comes back, fetches resume"
	else
		diag "rxe0 GSI QP state here: $(gsi_state)"
		diag "listen: $("$ENGRAMCTL" listen show 2>&1 | tr '\n' ' ')"
		diag "rdma: $(rdma link show | tr '\n' ' ')"
		T_NO=$((T_NO + 1))
		echo "not ok $T_NO - NIC down 6 s and up: the Spark's link comes back, fetches resume # TODO known Soft-RoCE failure, see Documentation/testing.rst (GSI QP state: $(gsi_state))"
	fi

	check "no warning, oops or other splat in this guest's kernel log" \
		kmsg_clean
	echo "1..$T_NO"
	# Killed outright: no FIN, no rdma_cm DREQ, nothing cleaned up.
	echo ENGRAM-FAULT-KILL-HOST
	sync
	sleep 1
	echo 1 >/proc/sys/kernel/sysrq
	echo b >/proc/sysrq-trigger
	sleep 30
	exit 1
fi

# Phase 2: this guest was killed and booted again.
"$ENGRAMCTL" mktable "$SCRATCH/done.safetensors" --rows 16 --seed 1 >/dev/null &&
	"$ENGRAMCTL" load "$SCRATCH/done.safetensors" --tensor $PREFIX --name faults-done \
	>/dev/null 2>&1
check "the marker table for the Spark loads" wait_state faults-done ready 60
# The Spark fetches from faults-done once it is through, then unloads its
# module: only then is this guest done.
wait_done() {
	local i
	for i in $(seq 1 "$1"); do
		[ "$(lookups faults-done)" -ge 1 ] && [ "$(stat_global connections)" -eq 0 ] && return 0
		sleep 1
	done
	return 1
}
check "the Spark finishes (a fetch from faults-done) and disconnects" wait_done 900
check "no warning, oops or other splat in this guest's kernel log" \
	kmsg_clean
done_testing
