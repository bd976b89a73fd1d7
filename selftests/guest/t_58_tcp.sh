#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The data path over TCP in one guest (a tcp:// link to the guest's own
# tcp:// listener): the exactness and refusal checks of t_55_fetch, with
# the rows copied into the registered buffer by the client kernel; a
# deadline that breaks the connection with nothing landing afterwards;
# link show fields.
# timeout: 600
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
PORT=18530
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/tcp.safetensors
ROWS=300000	# 79 MB of rows: enough pages, quick to load under TCG

make_table "$F" $ROWS --seed 58 --pad-before 11 --pad-after 5 || bail "mktable"
module_unload || bail "rmmod"
module_load "listen=tcp://$IP:$PORT" "remote=tcp://$IP:$PORT@$IP" heartbeat_ms=200 ||
	bail "insmod with tcp:// listen= and remote="
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name tcp >/dev/null 2>&1
check "the table loads" test "$(table_state tcp)" = ready
WOFF=$(table_field tcp weight_offset)
SOFF=$(table_field tcp scale_offset)
FC=("$CHECK" --table tcp --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 60000)
fc() { "${FC[@]}" "$@"; }
run() { local out rc; out=$(fc "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }

check "the tcp link comes up and sees the table" wait_fetchable 30
link_json() { "$ENGRAMCTL" -j link show 1; }
check "link show says transport tcp" \
	test "$(link_json | jget "d[0]['transport'] if isinstance(d, list) else d['transport']")" = tcp
check "... and has no RDMA device" \
	sh -c "! '$ENGRAMCTL' -j link show 1 | grep -q '\"device\"'"

served_mark tcp
check "300,000 rows in batches of 288 and 49,152 are exact" \
	run --count 300000 --batch 288,49152 --seed 1
served_check tcp 300000
check "no row went over RDMA" test "$(stat_global served_rdma_rows)" = 0
check "submit + poll + wait, 50,000 rows, exact" \
	run --count 50000 --batch 4096 --mode submit --seed 2
check "busy-poll, 20,000 rows, exact" run --count 20000 --batch 288 --busy-poll --seed 3
check "stride 512 with an offset, 40,000 rows, exact (gaps untouched)" \
	run --count 40000 --batch 20000 --stride 512 --offset 100 --seed 4
check "destination as 5 ranges, 98,304 rows, exact" \
	run --count 98304 --batch 49152 --ranges 5 --seed 5
check "four processes at once, all exact" run --count 30000 --batch 288,4096 --procs 4 --seed 6

check "a row past the end is refused with ERANGE, then a fetch works" \
	run --rows-list 0,5,$ROWS --expect-errno ERANGE --verify-after --count 2000
check "row 2^32-1 is refused with ERANGE" \
	run --rows-list 4294967295 --expect-errno ERANGE --verify-after --count 288
check "more rows than negotiated is refused with E2BIG" \
	run --count 70000 --batch 70000 --expect-errno E2BIG
check "a destination too small is refused with ENOSPC" \
	run --rows-list 1,2,3 --buf-bytes 600 --expect-errno ENOSPC
check "stride below a row is refused with EINVAL" \
	run --count 10 --batch 10 --stride 100 --expect-errno EINVAL
check "17 ranges are refused with E2BIG" \
	run --count 100 --batch 100 --ranges 17 --expect-errno E2BIG
check "fetches still work after the refusals" run --count 4096 --batch 4096 --seed 12
check "the refusals are counted per link" sh -c \
	"'$ENGRAMCTL' -j stats | grep -q refused_row_out_of_range"
check "the link reports a heartbeat round trip" \
	sh -c "'$ENGRAMCTL' -j link show 1 | grep -q heartbeat_us"

# A deadline: the server holds responses back; the fetch fails in time and
# nothing lands in the buffer after the call returned.
FD=/sys/module/engram_rdma/parameters/fault_delay_ms
if [ -w "$FD" ]; then
	c0=$(link_json | jget "(d[0] if isinstance(d, list) else d)['connects']")
	echo 1500 >"$FD"
	check "a fetch past its 300 ms deadline fails with ETIMEDOUT in time, nothing lands later" \
		run --rows-list 1,2,3,4,5,6,7,8 --timeout-ms 300 --expect-errno ETIMEDOUT \
		--max-ms $(slow 1300) --settle-ms 2500
	echo 0 >"$FD"
	check "the link comes back and fetches are exact again" wait_fetchable 30
	check "... on a new connection" \
		test "$(link_json | jget "(d[0] if isinstance(d, list) else d)['connects']")" -gt "$c0"
	check "after the deadline break, 20,000 rows exact" run --count 20000 --batch 4096 --seed 7
else
	ok "# SKIP no fault_delay_ms knob"
	ok "# SKIP no fault_delay_ms knob"
	ok "# SKIP no fault_delay_ms knob"
	ok "# SKIP no fault_delay_ms knob"
fi

"${FC[@]}" --count 5000000 --batch 49152 --seed 9 >/dev/null 2>&1 &
pid=$!
sleep 2
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
check "after a fetching process is killed, fetches still work" run --count 5000 --batch 288 --seed 8
check "link del of the tcp link" "$ENGRAMCTL" link del 1
check "rmmod with a tcp listener succeeds" module_unload
check "the module loads again" module_load
done_testing
