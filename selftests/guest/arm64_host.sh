#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The x86 host guest of the arm64 pair (selftests/vm/run-arm64-pair.sh):
# loads a table and serves it to the arm64 GPU-node guest, and does what
# that guest asks over a small TCP side channel (one command a line, "ok"
# or "fail ..." back): hold responses back (delay), stop holding them
# (nodelay), reload the module with the table (reload), end (done).
# timeout: 2400
. "$(dirname "$0")/lib.sh"

SIGNAL_PORT=18602
F=$SCRATCH/arm64.safetensors
ROWS=200000
P=/sys/module/engram_rdma/parameters

load_table() {
	"$ENGRAMCTL" load "$F" --tensor "$PREFIX" --name arm >/dev/null 2>&1 &&
		test "$(table_state arm)" = ready
}
make_table "$F" $ROWS --seed 47 --pad-before 9 || bail "mktable"
check "the table loads" load_table

# reply WORD...: one line back to the node.
reply() { echo "$*" >&"${SIDE[1]}"; }
# The program comes with -c: its stdin is the pipe bash answers on.
side_prog='
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("192.0.2.1", int(sys.argv[1])))
s.listen(1)
s.settimeout(2200)
while True:
    c, _ = s.accept()
    c.settimeout(600)
    line = c.makefile().readline().strip()
    print(line, flush=True)
    c.sendall(sys.stdin.readline().encode())
    c.close()
    if line == "done":
        break
'
coproc SIDE { timeout 2300 python3 -c "$side_prog" "$SIGNAL_PORT"; }
cmds=0
while read -r -t 2300 cmd <&"${SIDE[0]}"; do
	cmds=$((cmds + 1))
	case "$cmd" in
	delay | nodelay)
		ms=1500
		[ "$cmd" = delay ] || ms=0
		if echo $ms >"$P/fault_delay_ms"; then reply ok; else reply fail "$cmd"; fi
		check "$cmd asked by the node: fault_delay_ms $(cat "$P/fault_delay_ms")" \
			test "$(cat "$P/fault_delay_ms")" = $ms ;;
	reload)
		if bounded 60 module_unload && module_load "listen=rdma://192.0.2.1:18515" &&
		   load_table; then
			reply ok
		else
			reply fail reload
		fi
		check "reload asked by the node: module out and in, table ready again" \
			test "$(table_state arm)" = ready ;;
	done)
		reply ok
		break ;;
	*)
		reply fail "unknown command $cmd" ;;
	esac
	[ $cmds -lt 20 ] || break
done
check "the node said done" test "${cmd:-}" = "done"
# The counters start again with the reload: these are the node's fetches
# after it.
check "the node connected again after the reload ($(stat_global connects_accepted) accepted)" \
	test "$(stat_global connects_accepted)" -ge 1
check "and was served rows ($(stat_global rows))" test "$(stat_global rows)" -gt 0
check "no warning, oops or other splat in this guest's kernel log" kmsg_clean
done_testing
