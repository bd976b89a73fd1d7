#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Several queue pairs per RDMA link (one guest, rxe loopback, host and
# client at once):
# - link_queues takes 0 (auto) or 1-8, with a log line for anything else;
#   by default (1) a link opens one connection; auto opens one per CPU up
#   to the device's completion vectors (rxe has one per CPU) and 4;
# - with link_queues=2 a link opens two connections to the server and shows
#   them (link list, link show, -j);
# - a fetch runs on the submitting CPU's queue: 100 fetches pinned to CPU 0
#   are all counted on queue 0, then 100 pinned to CPU 1 on queue 1;
# - two processes at once are exact, with per-fetch keys and kept ones;
# - a queue pair that breaks (fault_client_inv_flush on queue 1) breaks the
#   whole link: ECONNRESET, then it reconnects with both queues, exact; a
#   process fetching with kept keys meanwhile gets exact rows or clean
#   errors, and its windows are registered again on the new queues;
# - a server that refuses the second connection (rdma_max_conns_per_peer=1)
#   leaves the link on one queue, logged, exact;
# - with four queues, heartbeat_ms=500 and the host's rdma_idle_timeout_ms
#   1500, no queue is closed idle: heartbeats go on every queue;
# - link del and rmmod with both queues live are clean.
# timeout: 420
# kernels: 6.12 debug
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/queues.safetensors
ROWS=70000
P=/sys/module/engram_rdma/parameters

[ "$(nproc)" -ge 2 ] || bail "needs 2 CPUs, has $(nproc)"
make_table "$F" $ROWS --seed 71 || bail "mktable"
module_unload || bail "rmmod"

dmesg_mark
check "link_queues=9 is refused at load" sh -c "! insmod $MODULE link_queues=9 2>/dev/null"
check "and says why" sh -c "dmesg | tail -n 20 | grep -q 'link_queues=9: want 0 or 1-8'"
module_load "listen=rdma://$IP:18515" || bail "insmod with listen="
check "link_queues is 1 by default" test "$(cat $P/link_queues)" = 1
check "link_queues refuses 9 at run time" sh -c "! echo 9 2>/dev/null > $P/link_queues"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name q >/dev/null 2>&1
check "the table loads" test "$(table_state q)" = ready
WOFF=$(table_field q weight_offset)
SOFF=$(table_field q scale_offset)

FC=("$CHECK" --table q --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 20000)
run() { local out rc; out=$("$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
# qf ID Q: fetches done on queue Q of link ID
qf() { "$ENGRAMCTL" -j link show "$1" | jget "(d[0].get('queue_fetches', []) + [0] * 8)[$2]"; }
conns_are() { test "$(stat_global connections)" = "$1"; }
wait_for() {	# wait_for SECONDS COMMAND...: until COMMAND succeeds
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.2
	done
	"$@"
}

# --- by default one queue; auto: one per CPU ------------------------------------
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "with one queue" test "$(link_field "$ID" queues)" = 1
check "the server holds one connection" conns_are 1
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
check "link del closes it" wait_for 20 conns_are 0
echo 0 > $P/link_queues
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "with link_queues=0 (auto) the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
want=$(( $(nproc) < 4 ? $(nproc) : 4 ))
check "with one queue per CPU, up to 4 ($want)" test "$(link_field "$ID" queues)" = $want
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
check "link del closes both connections" wait_for 20 conns_are 0

# --- two queues -----------------------------------------------------------------
echo 2 > $P/link_queues
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "with link_queues=2 the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "it has two queues" test "$(link_field "$ID" queues)" = 2
check "link list shows them" sh -c "'$ENGRAMCTL' link list | grep -q '^link $ID: .* queues 2'"
check "and link show" sh -c "'$ENGRAMCTL' link show $ID | grep -Eq '^ +queues +2$'"
check "the server holds two connections" conns_are 2
a0=$(qf "$ID" 0) b0=$(qf "$ID" 1)
check "100 fetches pinned to CPU 0 are exact" \
	run taskset -c 0 "${FC[@]}" --link "$ID" --count 28800 --batch 288 --seed 1
a1=$(qf "$ID" 0) b1=$(qf "$ID" 1)
check "all of them ran on queue 0 (+$((a1 - a0)) +$((b1 - b0)))" \
	test $((a1 - a0)) -eq 100 -a $((b1 - b0)) -eq 0
check "100 fetches pinned to CPU 1 are exact" \
	run taskset -c 1 "${FC[@]}" --link "$ID" --count 28800 --batch 288 --seed 2
a2=$(qf "$ID" 0) b2=$(qf "$ID" 1)
check "all of them ran on queue 1 (+$((a2 - a1)) +$((b2 - b1)))" \
	test $((a2 - a1)) -eq 0 -a $((b2 - b1)) -eq 100
check "link show lists the fetches per queue" \
	sh -c "'$ENGRAMCTL' link show $ID | grep -Eq '^ +queue fetches +$a2 $b2$'"
check "two processes at once, 3 ranges a fetch, are exact" \
	run "${FC[@]}" --link "$ID" --procs 2 --count 24000 --batch 3000 --ranges 3 --stride 300 \
	--seed 3
check "kept keys: two processes, 3 ranges a fetch, are exact" \
	run env ENGRAM_RDMA_KEEP_KEYS=1 "${FC[@]}" --link "$ID" --procs 2 --count 24000 \
	--batch 3000 --ranges 3 --stride 300 --seed 6
c0=$(link_field "$ID" connects)
# A process whose buffer keeps its keys goes on through the break: its
# windows die with the queues and are registered again on the new ones.
ENGRAM_RDMA_KEEP_KEYS=1 "${FC[@]}" --link "$ID" --tolerate --duration-s 8 --count 100000000 \
	--batch 288,4096 --seed 7 >"$ENGRAM_TEST_TMP/kept" 2>&1 &
kept=$!
sleep 1
echo 1 > $P/fault_client_inv_flush
check "a queue pair of queue 1 put in error: the fetch fails with ECONNRESET" \
	run taskset -c 1 "${FC[@]}" --link "$ID" --count 288 --batch 288 --ranges 2 \
	--expect-errno ECONNRESET
check "the knob was used" test "$(cat $P/fault_client_inv_flush)" = 0
check "the link comes back" wait_fetchable 30 --link "$ID" --timeout-ms 10000
wait $kept
rc=$?
sed 's/^/# kept keys: /' "$ENGRAM_TEST_TMP/kept"
check "kept keys through the break: every fetch exact or a clean error, none late (exit $rc)" \
	test $rc -eq 0
check "as one more connect, with both queues again" \
	test "$(link_field "$ID" connects)" = $((c0 + 1)) -a "$(link_field "$ID" queues)" = 2
check "the server holds two connections again" wait_for 20 conns_are 2
check "fetches on both CPUs are exact again" \
	run "${FC[@]}" --link "$ID" --procs 2 --count 5760 --batch 288 --seed 4
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
check "link del closes both connections" wait_for 20 conns_are 0

# --- the server allows one connection from us ----------------------------------
echo 1 > $P/rdma_max_conns_per_peer
dmesg_mark
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "with the second connection refused the link comes up" \
	wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "on one queue" test "$(link_field "$ID" queues)" = 1
line=$(dmesg_since | grep -m1 "queue 2 of 2 not connected")
check "which is logged ($line)" test -n "$line"
check "its fetches are exact" run "${FC[@]}" --link "$ID" --procs 2 --count 5760 --batch 288 --seed 5
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
echo 16 > $P/rdma_max_conns_per_peer
check "link del closes it" wait_for 20 conns_are 0

# --- the worker finds the second queue unfit once it connected ------------------
# It closes it itself: the DISCONNECTED that follows is not a break of the
# link, which stays up on one queue (and does not reconnect).
echo 1 > $P/fault_client_queue_unfit
dmesg_mark
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "with the second queue found unfit the link comes up" \
	wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "the knob was used" test "$(cat $P/fault_client_queue_unfit)" = 0
line=$(dmesg_since | grep -m1 "queue 2 of 2 not connected (-71)")
check "which is logged ($line)" test -n "$line"
check "the host holds one connection" wait_for 20 conns_are 1
sleep 2
check "on one queue, connected once: closing the unfit queue broke nothing" \
	test "$(link_field "$ID" queues)" = 1 -a "$(link_field "$ID" connects)" = 1
check "its fetches are exact" run "${FC[@]}" --link "$ID" --procs 2 --count 5760 --batch 288 --seed 6
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
check "link del closes it" wait_for 20 conns_are 0

# --- every queue is heard within the host's idle timeout -----------------------
# Heartbeats go on every queue: in turn, four queues with heartbeat_ms=500
# would each be heard every 2 s, past rdma_idle_timeout_ms=1500.
echo 4 > $P/link_queues
echo 1500 > $P/rdma_idle_timeout_ms
echo 500 > $P/heartbeat_ms
ic0=$(stat_global idle_closes)
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "with link_queues=4 the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "on four queues" test "$(link_field "$ID" queues)" = 4
c0=$(link_field "$ID" connects)
sleep 6
check "6 s idle, heartbeat_ms=500, rdma_idle_timeout_ms=1500: no queue closed idle ($(stat_global idle_closes) from $ic0)" \
	test "$(stat_global idle_closes)" = "$ic0"
check "the link stayed on its connection" test "$(link_field "$ID" connects)" = "$c0"
check "the host holds four connections" conns_are 4
check "its fetches are exact" run "${FC[@]}" --link "$ID" --procs 2 --count 5760 --batch 288 --seed 7
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
check "link del closes them" wait_for 20 conns_are 0
echo 2 > $P/link_queues
echo 30000 > $P/rdma_idle_timeout_ms
echo 1000 > $P/heartbeat_ms

# --- unload with both queues live ---------------------------------------------
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
check "a last link comes up with two queues" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "rmmod with its queues live is clean" sh -c "'$ENGRAMCTL' unload q && rmmod engram_rdma"
check "the module loads again" module_load
done_testing
