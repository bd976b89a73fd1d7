#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Link liveness in one guest.  RDMA: heartbeats flow (round trip reported)
# under load without costing fetches anything; a server that goes away
# takes the link down, a fetch then fails at once with ENOTCONN, and the
# link comes back on its own when the server returns, reconnects counted.
# TCP: a server that stops answering (its port dropped with tc) is noticed
# by the heartbeat within heartbeat_timeout_ms, the link goes down with
# ETIMEDOUT, and once traffic flows again it reconnects and is exact.
# A host that sends its catalog 1,001 times back to back: every one is
# taken, at most a quarter read (once per 10 ms), the link stays up.
# (rxe delivers RDMA between two addresses of one host internally, below
# tc, so only the TCP link can be cut off without touching the server.)
# timeout: 600
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
TPORT=18531
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/hb.safetensors
ROWS=100000
HB=100
HB_TIMEOUT=600

make_table "$F" $ROWS --seed 94 || bail "mktable"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" heartbeat_ms=$HB \
	heartbeat_timeout_ms=$HB_TIMEOUT reconnect_min_ms=100 reconnect_max_ms=400 ||
	bail "insmod with heartbeat and reconnect parameters"
P=/sys/module/engram_rdma/parameters
check "heartbeat_ms reads back" test "$(cat $P/heartbeat_ms)" = $HB
check "heartbeat_timeout_ms reads back" test "$(cat $P/heartbeat_timeout_ms)" = $HB_TIMEOUT
check "reconnect_max_ms below its range is refused" sh -c "! echo 0 > $P/reconnect_max_ms"
check "heartbeat_ms above its range is refused" sh -c "! echo 60001 > $P/heartbeat_ms"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name hb >/dev/null 2>&1
check "the table loads" test "$(table_state hb)" = ready
WOFF=$(table_field hb weight_offset)
SOFF=$(table_field hb scale_offset)
FC=("$CHECK" --table hb --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 30000)
fc() { "${FC[@]}" "$@"; }
run_fc2() { local out rc; out=$("${FC2[@]}" --count 20000 --batch 4096 --seed 5 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'; return $rc; }
run() { local out rc; out=$(fc "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
wait_link() {	# wait_link ID SECONDS: the link is up and serves the table
	local i
	for i in $(seq 1 "$2"); do
		fc --link "$1" --count 1 >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}
# lj ID EXPR: EXPR over link ID's `link show -j` object, bound to k.
lj() {
	"$ENGRAMCTL" -j link show "$1" |
		jget "(lambda k: $2)(d[0] if isinstance(d, list) else d)"
}
# wait_lost ID TENTHS: link ID is no longer up (down, or connecting again:
# a retry follows a loss within reconnect_min_ms).
wait_lost() {
	local i
	for i in $(seq 1 "$2"); do
		[ "$(lj "$1" "k['state']")" != up ] && return 0
		sleep 0.1
	done
	return 1
}

check "the rdma link comes up" wait_link 1 30
sleep 0.5
check "link show reports a heartbeat round trip over RDMA" \
	test "$(lj 1 "k.get('heartbeat_us', -1)")" -ge 0
check "link show says transport rdma and 0 reconnects" \
	test "$(lj 1 "'%s %s' % (k['transport'], k['reconnects'])")" = "rdma 0"
check "four processes fetching at once while heartbeats run every ${HB} ms: exact, no EBUSY" \
	run --count 40000 --batch 288,4096 --procs 4 --seed 1
check "no heartbeat was missed under load" test "$(link_stat 1 heartbeats_missed)" -eq 0
check "the link stayed on its first connection" test "$(lj 1 "k['connects']")" -eq 1

# A host that floods its clients with catalogs: the client copies each as it
# arrives and reads the newest at most once every 10 ms, in process context.
c0=$(link_stat 1 catalogs) k0=$(link_stat 1 catalogs_replaced)
check "the link counts the catalogs it read ($c0)" test "$c0" -ge 1
echo 1000 > $P/fault_server_catalog_repeat
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name hb2 >/dev/null 2>&1
check "a table loads while the host floods its catalog" test "$(table_state hb2)" = ready
flood_sent() { test "$(cat $P/fault_server_catalog_repeat)" = 0; }
for _ in $(seq 1 100); do flood_sent && break; sleep 0.2; done
check "the host sent its catalog 1,000 times more" flood_sent
FC2=("$CHECK" --table hb2 --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 30000 --link 1)
for _ in $(seq 1 100); do "${FC2[@]}" --count 1 >/dev/null 2>&1 && break; sleep 0.2; done
sleep 1
dc=$(( $(link_stat 1 catalogs) - c0 )) dk=$(( $(link_stat 1 catalogs_replaced) - k0 ))
diag "catalogs: $dc read, $dk replaced before being read"
check "every catalog was taken, read or replaced ($dc + $dk >= 1001)" test $((dc + dk)) -ge 1001
check "at most a quarter of them read: the newest, once per 10 ms ($dc)" \
	test $((dc * 4)) -le $((dc + dk))
check "the link stayed on its first connection through the flood" \
	test "$(lj 1 "k['connects']")" -eq 1
check "and serves the new table, exact" run_fc2

# The server goes away: the link goes down, fetches fail at once.
te0=$(link_stat 1 transport_errors)
check "listen del" "$ENGRAMCTL" listen del "rdma://$IP:18515"
check "the link goes down" wait_lost 1 50
check "link show reports the error" test "$(lj 1 "k.get('error_str', '')")" != ""
check "the broken connection is counted as a transport error" \
	test "$(link_stat 1 transport_errors)" -gt "$te0"
check "a fetch while the link is down fails at once with ENOTCONN" \
	run --rows-list 1,2,3 --expect-errno ENOTCONN --max-ms 200
check "an open table's fetch fails at once with ENOTCONN while the link is down" \
	/usr/bin/python3 - "$TOP" "$ENGRAMCTL" "$IP" <<'PY'
import os, subprocess, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "tools", "python"))
import engram_rdma as er
ctl, ip = sys.argv[2], sys.argv[3]
buf = bytearray(264 * 4)
with er.Engram() as e:
    subprocess.run([ctl, "listen", "add", "rdma://%s:18515" % ip], check=True)
    for _ in range(300):
        try:
            t = e.open_table(name="hb"); break
        except OSError:
            time.sleep(0.1)
    else:
        print("# the link did not come back"); sys.exit(1)
    e.register(buf)
    e.fetch(t, [0, 1, 2, 3], buf)
    subprocess.run([ctl, "listen", "del", "rdma://%s:18515" % ip], check=True)
    for _ in range(50):
        out = subprocess.run([ctl, "link", "show", "1"], capture_output=True, text=True).stdout
        if "down" in out or "connecting" in out:
            break
        time.sleep(0.1)
    t0 = time.monotonic()
    try:
        e.fetch(t, [0, 1, 2, 3], buf)
        print("# fetch on a down link succeeded"); sys.exit(1)
    except OSError as ex:
        dt = time.monotonic() - t0
        print("# fetch on a down link: %s after %.1f ms" % (ex, dt * 1000))
        if ex.errno != 107 or dt > 0.2:  # ENOTCONN
            sys.exit(1)
PY
r0=$(lj 1 "k['reconnects']")
check "reconnect attempts go on while the server is away" \
	sh -c "sleep 1; test \$('$ENGRAMCTL' -j link show 1 | python3 -c 'import sys, json; d = json.load(sys.stdin); d = d[0] if isinstance(d, list) else d; print(d[\"reconnects\"])') -gt $r0"
check "listen add" "$ENGRAMCTL" listen add "rdma://$IP:18515"
check "the link comes back up on its own" wait_link 1 20
check "reconnects are counted per link" test "$(link_stat 1 reconnects)" -gt 0
check "... and module-wide" test "$(stat_global reconnects)" -gt 0
check "after the reconnect, 20,000 rows exact" run --link 1 --count 20000 --batch 4096 --seed 2

# TCP: cut the server off without telling anyone.
check "listen add on tcp" "$ENGRAMCTL" listen add "tcp://$IP:$TPORT"
id2=$("$ENGRAMCTL" link add "tcp://$IP:$TPORT@$IP" 2>&1)
check "link add tcp gives an id ($id2)" test "$id2" -ge 2
check "the tcp link comes up" wait_link "$id2" 30
check "exact over the tcp link" run --link "$id2" --count 20000 --batch 4096 --seed 3
sleep 0.5
check "the tcp link reports a heartbeat round trip" \
	test "$(lj "$id2" "k.get('heartbeat_us', -1)")" -ge 0
m0=$(link_stat "$id2" heartbeats_missed)
# Kernel log time of the first line matching a pattern after the mark, in ms.
klog_ms() {
	dmesg | tail -n +"$((DMESG_MARK + 1))" | grep -m1 -E "$1" |
		sed -n 's/^\[ *\([0-9]*\)\.\([0-9]\{3\}\).*/\1\2/p'
}
dmesg_mark
if tc qdisc add dev lo root netem loss 100% 2>/dev/null; then
	echo "engram t_94: tcp traffic dropped" >/dev/kmsg
	check "with its traffic dropped, the tcp link is lost" wait_lost "$id2" 100
	t0=$(klog_ms "t_94: tcp traffic dropped")
	t1=$(klog_ms "link $id2 .*: down \(-110\)")
	dt=$((${t1:-999999} - ${t0:-0}))
	diag "down (ETIMEDOUT) ${dt} ms after the drop (heartbeat_ms $HB, heartbeat_timeout_ms $HB_TIMEOUT)"
	# Silence counts from the last frame heard, which may precede the drop
	# by up to one interval: timeout - interval .. timeout + interval + slack.
	check "... by the heartbeat, within timeout +- interval (+ 500 ms of slack) ($dt ms)" \
		test "$dt" -ge $((HB_TIMEOUT - HB)) -a "$dt" -le $((HB_TIMEOUT + HB + 500))
	check "a heartbeat miss is counted" test "$(link_stat "$id2" heartbeats_missed)" -gt "$m0"
	check "link show reports ETIMEDOUT" \
		test "$(lj "$id2" "k.get('error_str', '')")" = "Connection timed out"
	check "the rdma link was not affected" test "$(lj 1 "k['state']")" = up
	tc qdisc del dev lo root
	check "with traffic flowing again, the tcp link comes back on its own" \
		wait_link "$id2" 30
	check "its reconnects are counted" test "$(lj "$id2" "k['reconnects']")" -gt 0
	check "and fetches over it are exact again" \
		run --link "$id2" --count 20000 --batch 4096 --seed 4
else
	for i in 1 2 3 4 5 6 7 8; do ok "# SKIP no netem qdisc in this kernel"; done
fi
check "link del of the tcp link" "$ENGRAMCTL" link del "$id2"
check "rmmod" module_unload
check "the module loads again" module_load
done_testing
