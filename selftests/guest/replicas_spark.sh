#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The GPU node of selftests/vm/run-replicas.sh: links to host1 (link 1)
# and host2 (link 2), which load the same file, and opens the table on no
# link.  Fetches are exact and both hosts answer them; then a fetch loop
# runs, with the same file as libengram's local copy, while host1's module
# is unloaded and loaded again and host1 is killed outright: every fetch
# must be exact and answered by a host (none falls back to the local copy
# while host2 is up, none fails), and nothing may land in the buffer after
# a fetch returned.  The loop's latencies say what the failovers cost.
. "$(dirname "$0")/lib.sh"

CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/replicas.safetensors
ROWS=200000
DEADLINE=1000
MARGIN=$(slow 2000)
make_table "$F" $ROWS --seed 17 --pad-before 3 || bail "mktable"
read -r WOFF SOFF < <(tensor_offsets "$F")
FC=("$CHECK" --table rep --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
up() { test "$(link_field "$1" state)" = up; }
down() { ! up "$1"; }
both_up() { wait_fetchable 5 --link 1 --timeout-ms 5000 && wait_fetchable 5 --link 2 --timeout-ms 5000; }

if wait_for 300 both_up; then
	ok "both hosts' links come up with the table"
else
	nok "both hosts' links come up with the table"
	"$ENGRAMCTL" link show 2>&1 | sed 's/^/# /'
	ip -br address 2>&1 | sed 's/^/# /'
	rdma link show 2>&1 | sed 's/^/# /'
	dmesg | tail -n 30 | sed 's/^/# /'
	done_testing
fi
out=$("$ENGRAMCTL" link tables 2>&1)
diag "link tables: $out"
check "link tables: one file, served by both hosts" \
	grep -Eq "^rep sha256 [0-9a-f]{16} rows $ROWS: link 1 \(up, ready\) link 2 \(up, ready\)$" <<<"$out"

f1=$(link_stat 1 fetches) f2=$(link_stat 2 fetches)
check "100,000 rows on no link, two processes: exact" \
	run --count 100000 --batch 288,49152 --procs 2 --timeout-ms 20000 --seed 1
check "both hosts answered ($(($(link_stat 1 fetches) - f1)) and $(($(link_stat 2 fetches) - f2)) fetches)" \
	test "$(link_stat 1 fetches)" -gt "$f1" -a "$(link_stat 2 fetches)" -gt "$f2"

# The loop: host1 goes away twice under it.
TMPD=$SCRATCH/replicas-spark
mkdir -p "$TMPD"
STOP=$TMPD/stop
fo0=$(stat_global failovers)
"${FC[@]}" --tolerate --count 1000000000 --batch 288,4096 --timeout-ms $DEADLINE \
	--max-ms $((DEADLINE + MARGIN)) --settle-ms 1500 --local "$F" --local-tensor $PREFIX \
	--expect-no-fallbacks --stop-file "$STOP" --duration-s 1200 --seed 5 \
	>"$TMPD/loop" 2>&1 &
loop=$!
check "host1's module unloaded: link 1 goes down" wait_for 900 down 1
check "host1 serves again: link 1 comes back" wait_for 300 up 1
check "host1 killed: link 1 goes down" wait_for 600 down 1
t_down=$SECONDS
sleep 5
touch "$STOP"
wait $loop
rc=$?
sed 's/^/# loop: /' "$TMPD/loop"
check "every fetch of the loop exact, from a host, nothing late: none failed or fell back" \
	test $rc -eq 0
check "... none even tolerated" grep -q ' tolerated 0 slow 0 late 0' "$TMPD/loop"
check "parts were sent again to host2 when host1 went away ($(($(stat_global failovers) - fo0)))" \
	test "$(stat_global failovers)" -gt "$fo0"
diag "failovers $(($(stat_global failovers) - fo0)), fetch timeouts on link 1 $(link_stat 1 fetch_timeouts), $((SECONDS - t_down)) s since host1 died"
check "host2 alone: exact" run --count 20000 --batch 288,4096 --timeout-ms 10000 --seed 6

check "link del of both links" sh -c "'$ENGRAMCTL' link del 2 && '$ENGRAMCTL' link del 1"
check "no warning, oops or other splat in the kernel log" kmsg_clean
done_testing
