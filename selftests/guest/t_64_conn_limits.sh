#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The RDMA server's bounds, against a raw rdma_cm peer (rdma_peer.py, with
# pyverbs) in one guest.  Connect storms far past rdma_max_conns_per_peer,
# rdma_max_conns and rdma_max_conns_total: only that many are accepted, each
# other one is refused and counted in its own counter, memory stays bounded,
# and a well-behaved link (from the guest's other address) keeps fetching
# exact rows throughout.  A peer that connects and then stays silent is
# closed after rdma_idle_timeout_ms (idle_closes), the heartbeating link is
# not, nor is one whose answer takes longer than that timeout (it used to
# be: the client sends nothing while it waits).  rdma_max_request_rows
# lowers what a new connection negotiates.  rdma_stall_timeout_ms reads
# back and refuses values out of range.
# kernels: 6.1
# timeout: 600
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
IP6=${ENGRAM_IP6:-2001:db8::1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/limits.safetensors
ROWS=50000
# A port nothing else in the tests uses.
PORT=18964
P=/sys/module/engram_rdma/parameters
HOLD=$ENGRAM_TEST_TMP/release

peer() { timeout 200 /usr/bin/python3 "$TOP/selftests/guest/rdma_peer.py" "$@"; }
/usr/bin/python3 -c 'import pyverbs.cmid' 2>/dev/null || bail "python3-pyverbs is not installed"

make_table "$F" $ROWS --seed 64 || bail "mktable"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:$PORT,rdma://[$IP6]:$PORT" rdma_max_conns_per_peer=4 \
	rdma_max_conns=6 rdma_max_conns_total=8 rdma_idle_timeout_ms=0 ||
	bail "insmod with the connection limits"
for p in "rdma_max_conns_per_peer 4" "rdma_max_conns 6" "rdma_max_conns_total 8" \
	"rdma_idle_timeout_ms 0" "rdma_max_request_rows 65536" \
	"rdma_stall_timeout_ms $(slow 10000)"; do
	set -- $p
	check "$1 reads back $2" test "$(cat $P/$1)" = "$2"
done
for p in "rdma_max_conns 0" "rdma_max_conns_per_peer 4097" "rdma_max_conns_total x" \
	"rdma_max_request_rows 0" "rdma_max_request_rows 65537" "rdma_idle_timeout_ms 99" \
	"rdma_stall_timeout_ms 999" "rdma_stall_timeout_ms 600001"; do
	set -- $p
	dmesg_mark
	check "$1=$2 is refused" sh -c "! echo $2 > $P/$1 2>/dev/null"
	check "and logged" sh -c "dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q '$1=$2: want'"
done
check "the refusals changed nothing" test "$(cat $P/rdma_max_conns)" = 6

"$ENGRAMCTL" load "$F" --tensor $PREFIX --name limits >/dev/null 2>&1
check "the table loads" test "$(table_state limits)" = ready
WOFF=$(table_field limits weight_offset)
SOFF=$(table_field limits scale_offset)
fc() {
	"$CHECK" --table limits --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF" \
		--rows-total $ROWS --timeout-ms 60000 "$@"
}
run() { local out rc; out=$(fc "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
wait_for() {	# wait_for SECONDS COMMAND...: until COMMAND succeeds
	local end=$((SECONDS + $1))
	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.2
	done
	"$@"
}
fetchable() { fc --link "$1" --count 1 >/dev/null 2>&1; }
conns_are() { test "$(stat_global connections)" = "$1"; }

# The well-behaved client: from the guest's IPv6 address, another peer.
id6=$("$ENGRAMCTL" link add "rdma://[$IP6]:$PORT@[$IP6]")
check "the IPv6 link comes up" wait_for 60 fetchable "$id6"
check "it fetches 10,000 rows, exact" run --link "$id6" --count 10000 --batch 288,4096 --seed 1
# Python and its modules in the page cache before any memory is measured.
peer --src $IP --dst $IP --port 1 --count 0 >/dev/null

# storm NAME COUNT EXPECT_ACCEPTED COUNTER: COUNT connects from $IP while
# the IPv6 link fetches; the accepted ones are held while memory is read.
storm() {
	local name=$1 count=$2 want=$3 counter=$4 c0 free0 free1 slab0 vm0 bound out used pid ppid rc line
	# The refusal line is pr_info_ratelimited (10 lines in 5 s): the last
	# storm may have spent them all, and this one's would go unlogged.
	while [ $SECONDS -lt $((STORM_END + 7)) ]; do sleep 0.5; done
	rm -f "$HOLD"
	c0=$(stat_global "$counter")
	sync
	free0=$(meminfo MemFree)
	slab0=$(meminfo Slab)
	vm0=$(meminfo VmallocUsed)
	fc --link "$id6" --count 20000 --batch 288,4096 --seed 2 >"$ENGRAM_TEST_TMP/fc.out" 2>&1 &
	pid=$!
	dmesg_mark
	# Gone before the peer starts: the wait below must not read an old one.
	rm -f "$ENGRAM_TEST_TMP/peer.out"
	peer --src $IP --dst $IP --port $PORT --count "$count" --hold-file "$HOLD" \
		--hold-max 150 >"$ENGRAM_TEST_TMP/peer.out" &
	ppid=$!
	wait_for 150 test -s "$ENGRAM_TEST_TMP/peer.out"
	out=$(head -n 1 "$ENGRAM_TEST_TMP/peer.out")
	check "$name: $count connects from one peer: $want accepted, the rest refused ($out)" \
		test "$out" = "accepted=$want refused=$((count - want)) failed=0"
	check "$name: the refusals are counted in $counter" \
		test "$(stat_global "$counter")" -eq $((c0 + count - want))
	check "$name: the server holds $((want + 1)) connections" conns_are $((want + 1))
	free1=$(meminfo MemFree)
	used=$(( (free0 - free1) / 1048576 ))
	diag "$name: MemFree $((free0 >> 20)) -> $((free1 >> 20)) MiB, Slab $((slab0 >> 20)) -> $(($(meminfo Slab) >> 20)) MiB, VmallocUsed $((vm0 >> 20)) -> $(($(meminfo VmallocUsed) >> 20)) MiB with the peers connected"
	# About 16 MiB a connection here, both ends and rxe's queues included
	# (a 4,097-entry send queue alone is 4 MiB in rxe): the bound is the
	# limit's, not the storm's.
	bound=$((20 + 20 * want))
	check "$name: memory bounded (${used} MiB < $bound MiB)" test "$used" -lt $bound
	wait "$pid"
	rc=$?
	sed 's/^/# /' "$ENGRAM_TEST_TMP/fc.out"
	check "$name: the IPv6 link's fetch during the storm is exact" test $rc -eq 0
	line=$(dmesg_since | grep -m1 "refused: rdma_max_conns")
	check "$name: the refusal is logged ($line)" test -n "$line"
	touch "$HOLD"
	wait "$ppid"
	check "$name: the peers' connections go when they close" wait_for 60 conns_are 1
	STORM_END=$SECONDS
}
STORM_END=-7
storm "per peer" 40 4 connects_over_peer
echo 4096 > $P/rdma_max_conns_per_peer
storm "per listener" 16 6 connects_over_listener
echo 4096 > $P/rdma_max_conns
storm "module-wide" 16 7 connects_over_total
check "the IPv6 link stayed on its first connection" test "$(link_field "$id6" connects)" = 1
check "and fetches 10,000 rows, exact" run --link "$id6" --count 10000 --batch 288,4096 --seed 3
echo 256 > $P/rdma_max_conns_total

# --- a silent peer ----------------------------------------------------------------
echo 4000 > $P/rdma_idle_timeout_ms
i0=$(stat_global idle_closes)
rm -f "$HOLD"
dmesg_mark
peer --src $IP --dst $IP --port $PORT --count 1 --hold-file "$HOLD" --hold-max 60 \
	>"$ENGRAM_TEST_TMP/peer.out" &
ppid=$!
check "a silent peer connects" wait_for 30 conns_are 2
idle_closed() { test "$(stat_global idle_closes)" -gt "$i0"; }
check "it is closed after rdma_idle_timeout_ms" wait_for 20 idle_closed
check "once (idle_closes +1)" test "$(stat_global idle_closes)" -eq $((i0 + 1))
check "its connection is gone" wait_for 20 conns_are 1
line=$(dmesg_since | grep -m1 "nothing received for")
check "the close is logged ($line)" grep -q "connection from $IP:[0-9]*: nothing received for [0-9]* ms, closing" <<<"$line"
ms=$(sed -n 's/.*nothing received for \([0-9]*\) ms.*/\1/p' <<<"$line")
check "not before the timeout (${ms:-?} ms)" test "${ms:-0}" -ge 4000
sleep 3
check "the heartbeating IPv6 link was never closed" test "$(link_field "$id6" connects)" = 1
check "and still fetches exact" run --link "$id6" --count 5000 --batch 288 --seed 4
touch "$HOLD"
wait "$ppid"

# --- a long answer is not idleness ----------------------------------------------------
# The server holds the answer for 6 s; the client's one heartbeat waits
# behind it, so nothing arrives for longer than the 4 s idle timeout while
# the request is being served.  The connection must stay.
i0=$(stat_global idle_closes)
echo 6000 > $P/fault_delay_ms
check "a fetch answered after 6 s, past the 4 s idle timeout, is exact" \
	run --link "$id6" --count 288 --batch 288 --timeout-ms 30000 --seed 7
echo 0 > $P/fault_delay_ms
# Past another idle timeout: the connection must not be closed just after
# the answer either (the heartbeat resumes once its echo went out).
sleep 5
check "its connection was not closed as idle (idle_closes unchanged)" \
	test "$(stat_global idle_closes)" -eq "$i0"
check "the IPv6 link is still on its first connection" test "$(link_field "$id6" connects)" = 1
echo 0 > $P/rdma_idle_timeout_ms

# --- the server's receive size -------------------------------------------------------
echo 1000 > $P/rdma_max_request_rows
dmesg_mark
id4=$("$ENGRAMCTL" link add "rdma://$IP:$PORT@$IP")
check "a new IPv4 link comes up" wait_for 60 fetchable "$id4"
check "it offered 65,536 rows and got the server's 1,000" test "$(link_field "$id4" max_rows)" = 1000
check "the server's log says 1000 rows" sh -c "dmesg | tail -n +$((DMESG_MARK + 1)) | grep -Eq 'v[0-9]+, 1000 rows'"
check "the older IPv6 link keeps its 65,536" test "$(link_field "$id6" max_rows)" = 65536
check "1,000 rows per fetch are exact" run --link "$id4" --count 5000 --batch 1000 --seed 5
check "1,001 rows are refused with E2BIG" run --link "$id4" --count 1001 --batch 1001 --expect-errno E2BIG
"$ENGRAMCTL" link del "$id4" >/dev/null
"$ENGRAMCTL" link del "$id6" >/dev/null
check "rmmod" module_unload
check "the module loads again" module_load
done_testing
