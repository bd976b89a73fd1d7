#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Slow and silent TCP peers are closed in time, and only they: peers that
# finish the hello and then send nothing are closed after
# tcp_idle_timeout_ms; peers that send part of a hello or of a frame (or
# trickle it) after tcp_hello_timeout_ms / tcp_frame_timeout_ms.  All of
# them at once, while a tcp:// link of the same guest fetches exact rows
# (fetch_check) and then sits idle past the idle time on its default
# heartbeats: it is never closed.  The new counters move by exactly the
# number of peers of each kind.
# kernels: 6.12
# timeout: 300
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
PORT=18565
L=tcp://$IP:$PORT
BAD=$TOP/selftests/guest/tcp_bad
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/tcpslow.safetensors
ROWS=20000
IDLE_MS=3000
FRAME_MS=1500
P=/sys/module/engram_rdma/parameters

[ -x "$BAD" ] || bail "selftests/guest/tcp_bad is not built (make -C selftests/guest)"
make_table "$F" $ROWS --seed 65 || bail "mktable"
module_unload || bail "rmmod"
module_load "listen=$L" "remote=$L@$IP" tcp_idle_timeout_ms=$IDLE_MS \
	tcp_frame_timeout_ms=$FRAME_MS tcp_hello_timeout_ms=$FRAME_MS ||
	bail "insmod with listen=$L"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name slow >/dev/null 2>&1
check "the table loads" test "$(table_state slow)" = ready
WOFF=$(table_field slow weight_offset)
SOFF=$(table_field slow scale_offset)
FC=("$CHECK" --table slow --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 20000)
TB=("$BAD" --addr "$IP" --port $PORT --table slow --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --frame-ms $FRAME_MS --idle-ms $IDLE_MS --wait-ms 5000)

# --- the parameter
check "tcp_idle_timeout_ms reads back $IDLE_MS" test "$(cat $P/tcp_idle_timeout_ms)" = $IDLE_MS
check "999 is refused" sh -c "! printf 999 >$P/tcp_idle_timeout_ms 2>/dev/null"
check "3600001 is refused" sh -c "! printf 3600001 >$P/tcp_idle_timeout_ms 2>/dev/null"
check "and the value is unchanged" test "$(cat $P/tcp_idle_timeout_ms)" = $IDLE_MS
check "the refusal names the range" sh -c \
	"dmesg | tail -n 5 | grep -q 'tcp_idle_timeout_ms=3600001: want milliseconds in 1000-3600000'"

check "the tcp link comes up and sees the table" wait_fetchable 30
connects() { "$ENGRAMCTL" -j link show 1 | jget "(d[0] if isinstance(d, list) else d)['connects']"; }
c0=$(connects)
conns0=$(stat_global connections)
"$ENGRAMCTL" -j stats >"$ENGRAM_TEST_TMP/before"

# --- silent and slow peers, all at once, while the link fetches
dmesg_mark
"${FC[@]}" --count 100000000 --batch 288,4096 --seed 65 --duration-s 10 \
	>"$ENGRAM_TEST_TMP/fc" 2>&1 &
fcpid=$!
"${TB[@]}" --n 12 idle >"$ENGRAM_TEST_TMP/idle" 2>&1 &
idlepid=$!
"${TB[@]}" --n 20 --seed 65 slow >"$ENGRAM_TEST_TMP/slow" 2>&1
slowrc=$?
wait $idlepid
idlerc=$?
wait $fcpid
fcrc=$?
sed 's/^/# /' "$ENGRAM_TEST_TMP/idle" | grep -v '^# expect '
sed 's/^/# /' "$ENGRAM_TEST_TMP/slow" | grep -v '^# expect '
sed 's/^/# /' "$ENGRAM_TEST_TMP/fc"
check "12 silent peers closed after the idle time, not before (exit $idlerc)" test $idlerc -eq 0
check "20 stalled peers closed after the hello or frame time, not before (exit $slowrc)" \
	test $slowrc -eq 0
check "meanwhile the link's fetches were all exact (exit $fcrc)" test $fcrc -eq 0

# --- the live client idles past the idle time: its heartbeats keep it
sleep $((IDLE_MS * 2 / 1000 + 1))
check "after $((IDLE_MS * 2 / 1000 + 1)) s without a fetch, 20,000 rows exact" \
	"${FC[@]}" --count 20000 --batch 4096 --seed 66
check "on the same connection (connects $c0 -> $(connects))" test "$(connects)" = "$c0"
conns_back() { [ "$(stat_global connections)" -eq "$conns0" ]; }
check "only the link's connection is left" conns_back

# --- the counters moved by exactly the peers of each kind
"$ENGRAMCTL" -j stats >"$ENGRAM_TEST_TMP/after"
bad=0
want_sum() { cat "$ENGRAM_TEST_TMP/idle" "$ENGRAM_TEST_TMP/slow" |
	awk -v c="$1" '$1 == "expect" && $2 == c { n += $3 } END { print n + 0 }'; }
for ctr in tcp_idle_closes tcp_hello_timeouts tcp_frame_timeouts peer_timeouts \
	connects_accepted connects_rejected transport_errors; do
	want=$(want_sum $ctr)
	got=$(python3 -c "import json,sys; a=json.load(open(sys.argv[1]))['global']; b=json.load(open(sys.argv[2]))['global']; print(b.get(sys.argv[3], 0) - a.get(sys.argv[3], 0))" \
		"$ENGRAM_TEST_TMP/before" "$ENGRAM_TEST_TMP/after" $ctr)
	diag "$ctr moved by $got, expected $want"
	[ "$got" = "$want" ] || bad=1
done
check "the counters moved by exactly the silent and stalled peers" test $bad -eq 0
check "tcp_idle_closes is 12" test "$(want_sum tcp_idle_closes)" -eq 12
check "engramctl stats shows tcp_idle_closes" sh -c "'$ENGRAMCTL' stats | grep -q tcp_idle_closes"
check "the log names an idle close" sh -c \
	"dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'tcp connection from $IP:[0-9]*: no frame for $IDLE_MS ms, closed'"

check "rmmod" module_unload
check "the module loads again" module_load
done_testing
