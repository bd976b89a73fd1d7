#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The host guest of the two-guest test (selftests/vm/run-pair.sh): first
# puts an allow-list in place that leaves the Spark guest (192.0.2.2) out
# and sees its connects denied, then lets it in; loads a table and serves
# it until the Spark guest has connected, fetched and gone.
. "$(dirname "$0")/lib.sh"

SPARK=192.0.2.2
# The Spark tells us over plain TCP, inside the guests' network, once it has
# seen its link refused: it cannot tell us over the link it is denied.
SIGNAL_PORT=18601

# --- the allow-list, with the Spark not on it
dmesg_mark
check "allow add 192.0.2.128/25 (not the Spark)" "$ENGRAMCTL" listen allow add 192.0.2.128/25
# The Spark may have connected before the list existed: existing connections
# are kept, so drop them by restarting the listener.
if [ "$(stat_global connections)" -gt 0 ]; then
	diag "the Spark connected before the allow-list: restarting the listener"
	"$ENGRAMCTL" listen del rdma://192.0.2.1:18515
	"$ENGRAMCTL" listen add rdma://192.0.2.1:18515
fi
timeout 400 python3 - "$SIGNAL_PORT" >"$SCRATCH/spark-signal" 2>&1 <<'PY' &
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("192.0.2.1", int(sys.argv[1])))
s.listen(1)
s.settimeout(380)
c, _ = s.accept()
c.settimeout(10)
print(c.recv(100).decode(errors="replace").strip())
PY
sigpid=$!
denied() { [ "$(stat_global connects_denied)" -ge 1 ]; }
# wait_until SECONDS COMMAND...
wait_until() {
	local i
	for i in $(seq 1 "$1"); do
		"${@:2}" && return 0
		sleep 1
	done
	return 1
}
wait_until 300 denied
check "the Spark's connects are denied (CONNECTS_DENIED $(stat_global connects_denied))" denied
check "no connection was let in" test "$(stat_global connections)" = 0
line=$(dmesg_since | grep -m1 "denied: not on the allow-list")
check "the log names the Spark and the listener ($line)" grep -qF \
	"connection from $SPARK to rdma://192.0.2.1:18515 denied: not on the allow-list" <<<"$line"
wait $sigpid
msg=$(cat "$SCRATCH/spark-signal")
check "the Spark saw its link refused (it says '$msg')" test "$msg" = refused
check "allow add $SPARK" "$ENGRAMCTL" listen allow add $SPARK
"$ENGRAMCTL" listen show | sed 's/^/# /'

F=$SCRATCH/pair.safetensors
make_table "$F" 400000 --seed 41 --pad-before 7 --pad-after 3 || bail "mktable"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name pair >/dev/null 2>&1
check "the table loads" test "$(table_state pair)" = ready

# wait_conns CMP N SECONDS: the live connection count compares with N.
wait_conns() {
	local i
	for i in $(seq 1 "$3"); do
		[ "$(stat_global connections)" -"$1" "$2" ] && return 0
		sleep 1
	done
	return 1
}
check "the Spark guest connects" wait_conns ge 1 300
check "and disconnects when it is done" wait_conns eq 0 900
rows=$("$ENGRAMCTL" -j stats | jget "d['tables'][0]['rows']")
diag "rows served: $rows"
check "rows were served" test "$rows" -ge 100000
check "a refusal was counted" test "$(stat_global refused_row_out_of_range)" -ge 1
done_testing
