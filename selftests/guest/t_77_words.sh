#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Completion words (ENGRAM_FETCH_DONE_WORD) in one guest: the host role
# listens on two RDMA addresses and on TCP, the client links to each.  A
# fetch that names a word is watched by a spinner that never WAITs: the
# rows are exact the moment the word takes the fetch's value, for 1 to
# 49,152 rows, over RDMA and TCP, into ranges with a stride, and on no
# link with fetches split into parts over both RDMA replicas (the word
# follows the last part).  A refused fetch and a deadline storm set the
# failure value with the errno WAIT reports, and nothing lands after it;
# the library's fallback to the local copy sets the value after the rows
# it read.  A process killed with words in flight leaves the module and
# its links usable.  The Python package watches words the same way.
# ioctl_bad (t_57) checks the arguments and the reaping.
# timeout: 900
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/words.safetensors
ROWS=200000
P=/sys/module/engram_rdma/parameters
LA=rdma://$IP:18771
LB=rdma://$IP:18772
LT=tcp://$IP:18773
DELAY=1500	# ms the server holds each response back
DEADLINE=300	# ms the fetch waits
MARGIN=$(slow 2000)
SETTLE=$((DELAY * 2))

make_table "$F" $ROWS --seed 77 --pad-before 5 || bail "mktable"
module_unload || bail "rmmod"
module_load "listen=$LA,$LB,$LT" "remote=$LA@$IP,$LB@$IP,$LT@$IP" ||
	bail "insmod with three listeners and a link to each"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name words >/dev/null 2>&1
check "the table loads" test "$(table_state words)" = ready
WOFF=$(table_field words weight_offset)
SOFF=$(table_field words scale_offset)
FC=("$CHECK" --table words --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --mode word)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
all_up() {
	wait_fetchable 30 --link 1 --timeout-ms 10000 &&
		wait_fetchable 30 --link 2 --timeout-ms 10000 &&
		wait_fetchable 30 --link 3 --timeout-ms 10000
}
check "the three links come up and see the table" all_up

check "RDMA: 1, 288, 4,096 and 49,152 rows, exact when the word changes, no WAIT" \
	run --link 1 --count 60000 --batch 1,288,4096,49152 --timeout-ms 60000 --seed 1
check "RDMA: three ranges and a stride of 300" \
	run --link 1 --count 20000 --batch 4096 --ranges 3 --stride 300 --timeout-ms 60000 --seed 2
check "TCP: 1, 288, 4,096 and 49,152 rows" \
	run --link 3 --count 60000 --batch 1,288,4096,49152 --timeout-ms 60000 --seed 3
s1=$(link_stat 1 splits) s2=$(link_stat 2 splits)
check "no link: 288 and 49,152 rows, two processes" \
	run --count 200000 --batch 288,49152 --procs 2 --timeout-ms 60000 --seed 4
check "... fetches were split into parts on both RDMA links ($(($(link_stat 1 splits) - s1)), $(($(link_stat 2 splits) - s2)))" \
	test "$(link_stat 1 splits)" -gt "$s1" -a "$(link_stat 2 splits)" -gt "$s2"

py() {
	/usr/bin/python3 "$TOP/tools/python/example.py" --table words --file "$F" \
		--weight-offset "$WOFF" --scale-offset "$SOFF" --timeout-ms 60000 "$@"
}
check "Python: submit(word=...) watched alone, no wait: 100,000 rows exact" \
	py --link 1 --count 100000 --word --seed 9

check "a row past the end: the word says ERANGE, as WAIT does; the buffer untouched" \
	run --link 1 --rows-list 0,$ROWS --expect-errno ERANGE --verify-after --timeout-ms 60000

echo $DELAY >$P/fault_delay_ms
BOUND=$((DEADLINE + MARGIN))
check "held-back responses: the word says ETIMEDOUT in bound, nothing lands after" \
	run --link 1 --count 4096 --batch 4096 --timeout-ms $DEADLINE --expect-errno ETIMEDOUT \
	--max-ms $BOUND --settle-ms $SETTLE
check "... on no link too, with the parts tried on both replicas" \
	run --count 4096 --batch 4096 --timeout-ms $DEADLINE --expect-errno ETIMEDOUT \
	--max-ms $((DEADLINE + 2 * MARGIN)) --settle-ms $SETTLE
check "... over TCP too" \
	run --link 3 --count 288 --batch 288 --timeout-ms $DEADLINE --expect-errno ETIMEDOUT \
	--max-ms $BOUND --settle-ms $SETTLE
check "a storm with the local copy: each failed word WAITed for, read locally, then set" \
	run --link 1 --count 1440 --batch 288 --timeout-ms $DEADLINE --local "$F" \
	--local-tensor $PREFIX --expect-fallbacks 5 --max-ms $BOUND --max-local-ms $(slow 30000)

# Killed with a word in flight: the fd's close ends the fetch (setting the
# word in pages it still holds), and the module goes on.
"${FC[@]}" --link 1 --count 100000 --batch 4096 --timeout-ms 60000 --seed 5 >/dev/null 2>&1 &
victim=$!
sleep 1
kill -9 $victim
wait $victim 2>/dev/null
echo 0 >$P/fault_delay_ms
check "killed with a word in flight: every link fetchable again" all_up
each_exact() {
	run --link 1 --count 8192 --batch 4096 --seed 6 --timeout-ms 60000 &&
		run --link 3 --count 8192 --batch 4096 --seed 7 --timeout-ms 60000 &&
		run --count 8192 --batch 4096 --seed 8 --timeout-ms 60000
}
check "... and words exact on each" each_exact
# The next test of the guest starts from a module of its own.
check "unload and rmmod are clean" sh -c "'$ENGRAMCTL' unload words && rmmod engram_rdma"
check "no warning, oops or other splat in the kernel log" kmsg_clean
check "the module loads again" module_load
done_testing
