#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Replicas in one guest (rxe loopback): the host role listens on two
# addresses and the client links to both, so a table opened on no link has
# two replicas.  Fetches are exact, spread and split over both; a part
# whose request cannot be posted, and every fetch in flight on a replica
# whose listener goes away, are sent to the other one, and no fetch fails
# while one replica is up; with every response dropped a fetch still fails
# with ETIMEDOUT inside its one deadline (half of it tried on each), with
# nothing written after the return; with no replica up the open fails with
# ENOTCONN, and the replicas come back by themselves.
# timeout: 900
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/replicas.safetensors
ROWS=120000
P=/sys/module/engram_rdma/parameters
LA=rdma://$IP:18721
LB=rdma://$IP:18722
MARGIN=$(slow 2000)

make_table "$F" $ROWS --seed 72 --pad-before 7 || bail "mktable"
module_unload || bail "rmmod"
# No log line until the test asks for one (statlog_s), whatever the pace.
module_load "listen=$LA,$LB" "remote=$LA@$IP,$LB@$IP" heartbeat_ms=300 \
	heartbeat_timeout_ms=2000 reconnect_max_ms=1000 statlog_s=86400 ||
	bail "insmod with two listeners and a link to each"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name rep >/dev/null 2>&1
check "the table loads" test "$(table_state rep)" = ready
WOFF=$(table_field rep weight_offset)
SOFF=$(table_field rep scale_offset)
FC=("$CHECK" --table rep --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
# lt_stat LINK KEY: the table's counter KEY on link LINK (0 when absent).
lt_stat() {
	"$ENGRAMCTL" -j stats | jget "sum(t.get('$2', 0) for l in d['links'] if l.get('id') == $1 for t in l.get('tables', []) if t['name'] == 'rep')"
}
both_up() { wait_fetchable 30 --link 1 --timeout-ms 10000 && wait_fetchable 30 --link 2 --timeout-ms 10000; }
check "both links come up and see the table" both_up
out=$("$ENGRAMCTL" link tables 2>&1)
diag "link tables: $out"
check "link tables: the table, served by links 1 and 2" \
	grep -Eq "^rep sha256 [0-9a-f]{16} rows $ROWS weight@[0-9]+ scale@[0-9]+: link 1 \(up, ready\) link 2 \(up, ready\)$" <<<"$out"
check "link tables -j: one table, two links" test "$("$ENGRAMCTL" -j link tables |
	jget "[(t['rows'], [l['link'] for l in t['links']]) for t in d]")" = "[($ROWS, [1, 2])]"
check "link show names what each host serves" \
	sh -c "'$ENGRAMCTL' link show 2 | grep -q '^  serves  *rep (ready)$'"

# --- spreading and splitting
f1=$(link_stat 1 fetches) f2=$(link_stat 2 fetches)
check "200,000 rows in batches of 288 and 49,152, two processes, opened on no link: exact" \
	run --count 200000 --batch 288,49152 --procs 2 --timeout-ms 60000 --seed 1
check "both replicas answered fetches ($(($(link_stat 1 fetches) - f1)) and $(($(link_stat 2 fetches) - f2)))" \
	test "$(link_stat 1 fetches)" -gt "$f1" -a "$(link_stat 2 fetches)" -gt "$f2"
check "fetches of 49,152 rows were split over both (splits $(link_stat 1 splits) and $(link_stat 2 splits))" \
	test "$(link_stat 1 splits)" -gt 0 -a "$(link_stat 2 splits)" -gt 0
check "splits are counted per table on each link too" \
	test "$(lt_stat 1 splits)" -gt 0 -a "$(lt_stat 2 splits)" -gt 0
check "and module-wide" test "$(stat_global splits)" -ge $(($(link_stat 1 splits) + $(link_stat 2 splits)))
dmesg_mark
echo 1 >$P/statlog_s
sleep 2
echo 86400 >$P/statlog_s
check "the log line of the table on each link counts its splits" \
	sh -c "test \$(dmesg | tail -n +$((DMESG_MARK + 1)) | grep -Ec 'table rep via link [12]: .* failovers [0-9]+ splits [1-9]') -ge 2"
s0=$(stat_global splits)
echo 0 >$P/replica_split_rows
check "replica_split_rows=0: 49,152 rows exact" \
	run --count 98304 --batch 49152 --timeout-ms 60000 --seed 2
check "... and nothing was split" test "$(stat_global splits)" = "$s0"
echo 16384 >$P/replica_split_rows
f1=$(link_stat 1 fetches)
check "a table opened on link 2 is fetched there: exact" \
	run --link 2 --count 20000 --batch 4096 --timeout-ms 60000 --seed 8
check "... and link 1 took none of it" test "$(link_stat 1 fetches)" = "$f1"

# --- a post that fails: the part goes to the other replica at once
fo0=$(stat_global failovers)
echo 1 >$P/fault_client_req_fail
check "a request whose post fails (EIO) is answered by the other replica, exact" \
	run --count 288 --batch 288 --timeout-ms 10000 --seed 3
check "one failover is counted ($(stat_global failovers) from $fo0)" \
	test "$(stat_global failovers)" -gt "$fo0"
check "the knob was used up" test "$(cat $P/fault_client_req_fail)" = 0
check "both replicas are back" both_up

# --- a replica goes away under load: nothing fails, nothing falls back
fo0=$(stat_global failovers)
"${FC[@]}" --count 400000 --batch 288,4096 --timeout-ms 10000 --seed 4 \
	>"$ENGRAM_TEST_TMP/loop" 2>&1 &
loop=$!
sleep "$(slow 2)"
check "listen del of the first replica's listener while fetches run" "$ENGRAMCTL" listen del "$LA"
# fetch_check bounds itself: 10 s a fetch at most.
wait $loop
rc=$?
sed 's/^/# loop: /' "$ENGRAM_TEST_TMP/loop"
check "every fetch of the loop was exact: none failed while a replica was up" test $rc -eq 0
check "the link to the first replica is down ($(link_field 1 state))" \
	test "$(link_field 1 state)" != up
diag "failovers while the replica went away: $(($(stat_global failovers) - fo0))"
check "one replica left: exact" run --count 20000 --batch 288,4096 --timeout-ms 10000 --seed 5

# --- the deadline is shared: every response dropped, two replicas tried
check "listen add of the first listener again" "$ENGRAMCTL" listen add "$LA"
check "both replicas are back" both_up
fo0=$(stat_global failovers)
echo 100 >$P/fault_drop_pct
check "every response dropped: ETIMEDOUT within 1000+$MARGIN ms, no write after the return" \
	run --count 288 --batch 288 --timeout-ms 1000 --expect-errno ETIMEDOUT \
	--max-ms $((1000 + MARGIN)) --settle-ms 1500
echo 0 >$P/fault_drop_pct
check "the rows were tried on the second replica after the first's share ran out" \
	test "$(stat_global failovers)" -gt "$fo0"
check "both replicas come back" both_up
check "and fetches are exact" run --count 20000 --batch 288,4096 --timeout-ms 10000 --seed 6

# --- no replica up
"$ENGRAMCTL" listen del "$LA"
"$ENGRAMCTL" listen del "$LB"
both_down() { test "$(link_field 1 state)" != up -a "$(link_field 2 state)" != up; }
check "both links go down" wait_for 15 both_down
check "no replica up: the open fails with ENOTCONN" run --count 1 --timeout-ms 1000 --expect-errno ENOTCONN
"$ENGRAMCTL" listen add "$LA"
"$ENGRAMCTL" listen add "$LB"
check "the replicas come back by themselves" both_up
check "fetches on no link are exact again" run --count 98304 --batch 49152 --timeout-ms 60000 --seed 7

check "unload and rmmod are clean" sh -c "'$ENGRAMCTL' unload rep && rmmod engram_rdma"
check "no warning in the kernel log" kmsg_clean
check "the module loads again" module_load
done_testing
