#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Events whose message cannot be built (genlmsg_new() failed through
# fail_function on engram_inject_event_msg) are counted and told: a monitor
# that sees a listener added while the first two sends fail gets "lost 2
# events" though no other change follows, then the next change as usual.
# A count owed to a monitor that left is dropped, not told to the next one.
# timeout: 240
# kernels: debug
# needs: the debug kernel (fault injection, KCOV)
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
FF=/sys/kernel/debug/fail_function
U="rdma://$IP:18586"
OUT=$ENGRAM_TEST_TMP

if [ ! -d "$FF" ]; then
	ok "# SKIP this kernel has no fail_function"
	done_testing
fi
module_loaded || module_load || bail "insmod"

joined() { awk -v p="$1" '$2 == 16 && $3 == p && $4 != "00000000" { f = 1 } END { exit !f }' \
	/proc/net/netlink; }
start_monitor() {
	# start_monitor FILE: a monitor in the background, MPID its pid.
	"$ENGRAMCTL" monitor > "$1" 2> "$1.err" &
	MPID=$!
	wait_for 5 joined $MPID || sleep 1
}
# fail_next N: the next N event messages fail to be built (ENOMEM).
fail_next() {
	echo engram_inject_event_msg > $FF/inject || return 1
	printf '0x%x\n' $((-12)) > $FF/engram_inject_event_msg/retval &&
	echo 100 > $FF/probability && echo 1 > $FF/interval && echo 0 > $FF/verbose &&
	echo 0 > $FF/space && echo "$1" > $FF/times
}
unfail() { echo '!engram_inject_event_msg' > $FF/inject 2>/dev/null; echo 0 > $FF/times; }
has() { grep -q "$1" "$2"; }

start_monitor "$OUT/a"
APID=$MPID
fail_next 2 || bail "fail_function does not take engram_inject_event_msg"
"$ENGRAMCTL" listen add "$U" >/dev/null || nok "listen add"
# Added and active: both sends fail, and nothing changes after them.
check "the two lost events are told with no later event" wait_for 10 has "^lost 2 events$" "$OUT/a"
unfail
"$ENGRAMCTL" listen del "$U" >/dev/null || nok "listen del"
check "the next change arrives as usual" wait_for 10 has "^listen $U deleted$" "$OUT/a"
kill -INT $APID 2>/dev/null
wait $APID
sed 's/^/# a| /' "$OUT/a" "$OUT/a.err"
check "one loss line, and no event told twice" test "$(grep -c '^lost' "$OUT/a")" -eq 1 -a \
	"$(grep -c "^listen $U added" "$OUT/a")" -eq 0

# Every send fails while a monitor watches; it leaves before a retry could
# tell it: what it was owed must not reach the next monitor.
start_monitor "$OUT/b"
BPID=$MPID
fail_next 1000 || bail "fail_next"
"$ENGRAMCTL" listen add "$U" >/dev/null || nok "listen add (2)"
kill -INT $BPID 2>/dev/null
wait $BPID
sleep 1
unfail
start_monitor "$OUT/c"
CPID=$MPID
"$ENGRAMCTL" listen del "$U" >/dev/null || nok "listen del (2)"
check "a later monitor gets the next change" wait_for 10 has "^listen $U deleted$" "$OUT/c"
kill -INT $CPID 2>/dev/null
wait $CPID
sed 's/^/# c| /' "$OUT/c" "$OUT/c.err"
check "and no loss owed to the monitor that left" test -z "$(grep '^lost' "$OUT/c")"
check "the kernel log is clean" kmsg_clean
done_testing
