#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Deadlines in one guest (rxe loopback): with the server's fault knob
# holding responses back, a fetch fails with ETIMEDOUT within its deadline
# plus a margin, nothing lands in the buffer after the call returned (the
# whole buffer is compared with a copy taken at the return, well after the
# held-back rows would have been sent), the link comes back on its own and
# the next fetch is exact.  The same for a dropped response, for SUBMIT +
# WAIT, for a destination in ranges, and for a fetch on another fd while
# one fd's deadline breaks the shared link.  A held-back response and a
# storm also with the buffer's keys kept per connection.
# timeout: 900
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/deadline.safetensors
ROWS=200000
P=/sys/module/engram_rdma/parameters
DELAY=1500	# ms the server holds each response back
DEADLINE=300	# ms the fetch waits
# How late the failing call may return past its deadline: the break
# (disconnect, drain, destroy) runs through rxe's tasklets in a TCG guest.
MARGIN=$(slow 2000)
SETTLE=$((DELAY * 2))	# well past the moment the held rows would go out

make_table "$F" $ROWS --seed 54 --pad-before 3 || bail "mktable"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" ||
	bail "insmod with listen= and remote="
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name dl >/dev/null 2>&1
check "the table loads" test "$(table_state dl)" = ready
WOFF=$(table_field dl weight_offset)
SOFF=$(table_field dl scale_offset)
FC=("$CHECK" --table dl --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
# The same with the buffer's keys kept per connection (ENGRAM_REG_F_KEEP_KEYS).
run_kept() { local out rc; out=$(ENGRAM_RDMA_KEEP_KEYS=1 "${FC[@]}" "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'; return $rc; }
link_json() { "$ENGRAMCTL" -j link show 1 | jget "str(d[0].get('$1', ''))"; }
check "the link comes up and sees the table" wait_fetchable 30 --timeout-ms 10000
check "a fetch is exact before any fault" run --count 20000 --batch 288,4096 --timeout-ms 60000

set_knob() { echo "$2" >"$P/$1"; }
check "fault_delay_ms refuses 60001" sh -c "! echo 60001 2>/dev/null > $P/fault_delay_ms"
check "fault_drop_pct refuses 101" sh -c "! echo 101 2>/dev/null > $P/fault_drop_pct"
check "fault_delay_ms refuses junk" sh -c "! echo 12x 2>/dev/null > $P/fault_delay_ms"
check "the knobs are still off" test "$(cat $P/fault_delay_ms):$(cat $P/fault_drop_pct)" = 0:0

timeouts0=$(stat_global fetch_timeouts)
set_knob fault_delay_ms $DELAY
BOUND=$((DEADLINE + MARGIN))
check "a held-back response: ETIMEDOUT within $DEADLINE+$MARGIN ms, no write after the return" \
	run --count 288 --batch 288 --timeout-ms $DEADLINE --expect-errno ETIMEDOUT \
	--max-ms $BOUND --settle-ms $SETTLE
check "the timeout is counted" test "$(stat_global fetch_timeouts)" -gt "$timeouts0"
check "the server counted the injected fault" test "$(stat_global faults_injected)" -ge 1
check "link show names the timeout as the last error" \
	sh -c "'$ENGRAMCTL' link show 1 | grep -qi 'timed out'"
check "SUBMIT + WAIT: ETIMEDOUT in bound, no late write" \
	run --count 4096 --batch 4096 --mode submit --timeout-ms $DEADLINE \
	--expect-errno ETIMEDOUT --max-ms $BOUND --settle-ms $SETTLE
check "five ranges and a stride: ETIMEDOUT in bound, no late write" \
	run --count 3000 --batch 3000 --ranges 5 --stride 300 --timeout-ms $DEADLINE \
	--expect-errno ETIMEDOUT --max-ms $BOUND --settle-ms $SETTLE
# Kept keys are not invalidated per fetch: it is the break that ends them.
check "kept keys: a held-back response: ETIMEDOUT in bound, no late write" \
	run_kept --count 4096 --batch 4096 --ranges 3 --timeout-ms $DEADLINE \
	--expect-errno ETIMEDOUT --max-ms $BOUND --settle-ms $SETTLE

set_knob fault_delay_ms 0
check "with the knob off the link comes back on its own" wait_fetchable 30 --timeout-ms 10000
check "and the next fetches are exact" run --count 20000 --batch 288,4096 --timeout-ms 60000

# A long fetch on one fd while another fd's deadline breaks the link: it
# fails cleanly (ECONNRESET) or completes exactly, never hangs or lands late.
# The server holds the first request 2.5 s (below the heartbeat timeout),
# long enough for the second fd to start and miss its deadline meanwhile.
set_knob fault_delay_ms 2500
"${FC[@]}" --count 288 --batch 288 --timeout-ms 20000 --expect-errno ECONNRESET \
	--settle-ms $SETTLE >"$ENGRAM_TEST_TMP/other" 2>&1 &
other=$!
sleep 0.5
check "one fd's deadline breaks the shared link" \
	run --count 288 --batch 288 --timeout-ms $DEADLINE --expect-errno ETIMEDOUT \
	--max-ms $BOUND --settle-ms $SETTLE
wait $other
rc=$?
sed 's/^/# other fd: /' "$ENGRAM_TEST_TMP/other"
check "the other fd's fetch failed with ECONNRESET, promptly, no late write" test $rc -eq 0
set_knob fault_delay_ms 0
check "the link comes back after the break" wait_fetchable 30 --timeout-ms 10000

set_knob fault_drop_pct 100
check "a dropped response: ETIMEDOUT in bound, buffer untouched after the return" \
	run --count 288 --batch 288 --timeout-ms $DEADLINE --expect-errno ETIMEDOUT \
	--max-ms $BOUND --settle-ms 1000
set_knob fault_drop_pct 0
check "after drops the link comes back" wait_fetchable 30 --timeout-ms 10000
check "and fetches are exact" run --count 10000 --batch 4096 --timeout-ms 60000 --seed 5

# The storm: 1,000 fetches with every response held back.  Each one is
# exact or fails with a transport error within its deadline plus the
# margin, and nothing lands after any call returned.
set_knob fault_delay_ms $DELAY
tmo0=$(stat_global fetch_timeouts)
check "timeout storm: 1,000 fetches, each exact or a clean error in bound, no late write" \
	run --tolerate --count 288000 --batch 288 --timeout-ms $DEADLINE --max-ms $BOUND \
	--settle-ms $SETTLE --seed 6
diag "fetch timeouts during the storm: $(($(stat_global fetch_timeouts) - tmo0))"
check "the storm timed out fetches" test "$(stat_global fetch_timeouts)" -gt "$tmo0"
# Each break deregisters the windows; the next connection registers them again.
kept0=$(stat_global kept_registrations)
check "kept keys: a storm of 100 fetches, each exact or a clean error in bound, no late write" \
	run_kept --tolerate --count 28800 --batch 288 --timeout-ms $DEADLINE --max-ms $BOUND \
	--settle-ms $SETTLE --seed 8
check "kept keys: windows were registered again after breaks ($(($(stat_global kept_registrations) - kept0)))" \
	test $(($(stat_global kept_registrations) - kept0)) -ge 2
set_knob fault_delay_ms 0
check "after the storm the link comes back" wait_fetchable 30 --timeout-ms 10000
check "and fetches are exact" run --count 20000 --batch 288,4096 --timeout-ms 60000 --seed 7
check "and with kept keys" run_kept --count 20000 --batch 288,4096 --timeout-ms 60000 --seed 9

check "unload and rmmod are clean after the faults" \
	sh -c "'$ENGRAMCTL' unload dl && rmmod engram_rdma"
check "the module loads again" module_load
done_testing
