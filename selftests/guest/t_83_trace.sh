#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The module's tracepoints, read through tracefs (one guest, rxe loopback,
# host and GPU node at once): with events/engram_rdma enabled, a link's
# state changes (connecting -> up, up -> down when deleted), each fetch's
# submit and done with the same ticket and rows, the host's admitted
# requests (status 0) and a refused one (row_out_of_range, 5) both as a
# request and a refusal, and a missed deadline as a timeout with the
# fetch's done carrying -ETIMEDOUT.
# timeout: 240
# kernels: 6.12 debug
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/trace.safetensors
ROWS=20000
P=/sys/module/engram_rdma/parameters
T=/sys/kernel/tracing

make_table "$F" $ROWS --seed 83 || bail "mktable"
if [ ! -d $T/events ] && ! mount -t tracefs tracefs $T 2>/dev/null; then
	mount -t debugfs debugfs /sys/kernel/debug 2>/dev/null
	T=/sys/kernel/debug/tracing
fi
[ -d $T/events ] || bail "no tracefs"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" || bail "insmod with listen="
check "the module's events are in tracefs" test -d $T/events/engram_rdma/engram_fetch_submit
for e in fetch_submit fetch_done fetch_timeout link_state serve_request serve_refuse; do
	check "event engram_$e exists" test -f $T/events/engram_rdma/engram_$e/format
done
echo > $T/trace
echo 1 > $T/events/engram_rdma/enable
echo 1 > $T/tracing_on

"$ENGRAMCTL" load "$F" --tensor $PREFIX --name tr >/dev/null 2>&1
check "the table loads" test "$(table_state tr)" = ready
WOFF=$(table_field tr weight_offset)
SOFF=$(table_field tr scale_offset)
FC=("$CHECK" --table tr --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 20000)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }

ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "20 fetches of 288 rows are exact" run --link "$ID" --count 5760 --batch 288 --seed 1
check "a fetch with a row past the end fails with ERANGE" \
	run --link "$ID" --rows-list 0,5,$ROWS --expect-errno ERANGE
echo 3000 > $P/fault_delay_ms
check "a fetch held past its 500 ms deadline fails with ETIMEDOUT" \
	run --link "$ID" --count 10 --batch 10 --timeout-ms 500 --expect-errno ETIMEDOUT
echo 0 > $P/fault_delay_ms
check "the link comes back" wait_fetchable 30 --link "$ID" --timeout-ms 10000
"$ENGRAMCTL" link del "$ID" >/dev/null
sleep 1
echo 0 > $T/events/engram_rdma/enable
cp $T/trace "$SCRATCH/trace.txt"
echo > $T/trace
diag "$(grep -c engram_ "$SCRATCH/trace.txt") events traced"
tr_lines() { grep -E "$1" "$SCRATCH/trace.txt"; }

check "link $ID: connecting -> up" test -n "$(tr_lines "engram_link_state: link $ID connecting -> up error 0")"
check "and up -> down when deleted" test -n "$(tr_lines "engram_link_state: link $ID up -> down")"
n_sub=$(tr_lines "engram_fetch_submit: link $ID ticket [0-9]+ rows 288 " | wc -l)
n_done=$(tr_lines "engram_fetch_done: link $ID ticket [0-9]+ rows 288 error 0 " | wc -l)
check "20 or more submits of 288 rows, each done without error ($n_sub, $n_done)" \
	test "$n_sub" -ge 20 -a "$n_sub" -eq "$n_done"
tickets() { grep -oE "engram_fetch_$1: link $ID ticket [0-9]+ rows 288" "$SCRATCH/trace.txt" |
	awk '{print $5}' | sort; }
check "every such ticket was submitted and done" test "$(tickets submit)" = "$(tickets done)"
to=$(grep -oE "engram_fetch_submit: link $ID ticket [0-9]+ rows 288 timeout_ns [0-9]+" \
	"$SCRATCH/trace.txt" | awk '{print $9}' | head -n1)
check "a submit's timeout_ns is the deadline from then: under 20 s, over 19 ($to)" \
	test "${to:-0}" -le 20000000000 -a "${to:-0}" -gt 19000000000
check "the host traced requests of 288 rows admitted (status 0)" \
	test "$(tr_lines 'engram_serve_request: ticket [0-9]+ generation [0-9]+ rows 288 status 0' | wc -l)" -ge 20
check "the refused request: status 5 (row_out_of_range) as a request" \
	test -n "$(tr_lines 'engram_serve_request: ticket [0-9]+ generation [0-9]+ rows 3 status 5')"
check "and as a refusal of table tr" test -n "$(tr_lines 'engram_serve_refuse: table tr status 5')"
check "the late fetch: a timeout of 10 rows" \
	test -n "$(tr_lines "engram_fetch_timeout: link $ID ticket [0-9]+ rows 10 late_ns [0-9]+")"
check "and its done carries -ETIMEDOUT (-110)" \
	test -n "$(tr_lines "engram_fetch_done: link $ID ticket [0-9]+ rows 10 error -110 ")"
t1=$(grep -oE "engram_fetch_timeout: link $ID ticket [0-9]+" "$SCRATCH/trace.txt" |
	awk '{print $5}' | head -n1)
check "the timeout's ticket ($t1) is the one done with -110" \
	test -n "$t1" -a -n "$(tr_lines "engram_fetch_done: link $ID ticket $t1 rows 10 error -110 ")"
"$ENGRAMCTL" unload tr >/dev/null 2>&1
done_testing
