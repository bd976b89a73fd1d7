#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Barriers of the character device, over RDMA (rxe loopback) and TCP (a
# link through a relay in front of the guest's own TCP listener), with the
# server holding responses back (fault_delay_ms): after UNREG_BUF or
# close() returns with a fetch in flight, a canary written into the buffer
# survives well past the moment the held-back rows would have landed, and
# UNREG_BUF waits at most about 2 s (then breaks the connection);
# engram_fetch() interrupted by signals returns only once its fetch ended.
# Then the relay stops reading (a server that no longer reads): a fetch
# that fills the socket does not hold up a second thread on the same fd,
# whose short deadline gives ETIMEDOUT in time, never in D state, nor a
# WAIT meanwhile.
# kernels: 6.12
# timeout: 300
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
TPORT=18563	# the module's TCP listener
RPORT=18564	# the relay the TCP link goes through
BC=$TOP/selftests/guest/barrier_check
F=$SCRATCH/barrier.safetensors
ROWS=100000
P=/sys/module/engram_rdma/parameters
STALL=$ENGRAM_TEST_TMP/stall	# while it exists the relay reads nothing from clients

[ -x "$BC" ] || bail "selftests/guest/barrier_check is not built (make -C selftests/guest)"
make_table "$F" $ROWS --seed 63 --pad-before 5 || bail "mktable"

# A TCP relay: forwards both ways; while $STALL exists it stops reading
# what clients send (their requests pile up in the socket buffers).
cat >"$ENGRAM_TEST_TMP/relay.py" <<'EOF'
import os, select, socket, sys
ip, lport, tport, stall = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
ls = socket.socket()
ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
ls.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited: a small window
ls.bind((ip, lport))
ls.listen(8)
peer = {}
while True:
    stalled = os.path.exists(stall)
    rd = [ls] + [s for s in peer if not (stalled and s.getsockname()[1] == lport)]
    r, _, _ = select.select(rd, [], [], 0.05)
    for s in r:
        if s is ls:
            c, _ = ls.accept()
            u = socket.create_connection((ip, tport))
            peer[c], peer[u] = u, c
            continue
        try:
            d = s.recv(65536)
        except OSError:
            d = b''
        o = peer.get(s)
        if not d or o is None:
            for x in (s, o):
                if x is not None:
                    peer.pop(x, None)
                    x.close()
            continue
        try:
            o.sendall(d)
        except OSError:
            pass
EOF
rm -f "$STALL"
python3 "$ENGRAM_TEST_TMP/relay.py" "$IP" $RPORT $TPORT "$STALL" &
RELAY=$!
trap 'kill $RELAY 2>/dev/null; sysctl -qw net.ipv4.tcp_wmem="$WMEM"' EXIT
# Small socket buffers, so that one request of max_rows rows fills them.
WMEM=$(sysctl -n net.ipv4.tcp_wmem)
sysctl -qw net.ipv4.tcp_wmem="4096 16384 16384" || bail "sysctl tcp_wmem"

module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515,tcp://$IP:$TPORT" \
	"remote=rdma://$IP:18515@$IP,tcp://$IP:$RPORT@$IP" ||
	bail "insmod with listen= and remote="
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name barrier >/dev/null 2>&1
check "the table loads" test "$(table_state barrier)" = ready
dmesg_mark

run() { local out rc; out=$("$BC" --table barrier "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
run_kept() { local out rc; out=$(ENGRAM_RDMA_KEEP_KEYS=1 "$BC" --table barrier "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'; return $rc; }
# wait_link_fetchable LINK SECONDS: the link is up and a fetch works.
wait_link_fetchable() {
	local i
	for i in $(seq 1 "$2"); do
		"$BC" --table barrier --link "$1" --rows 16 --long-ms 10000 fetch \
			>/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}
check "the rdma link (1) comes up and sees the table" wait_link_fetchable 1 30
check "the tcp link (2), through the relay, comes up and sees the table" wait_link_fetchable 2 30

for link in 1 2; do
	t=$([ $link = 1 ] && echo rdma || echo tcp)
	echo 500 >$P/fault_delay_ms
	check "$t: UNREG_BUF with a fetch held 0.5 s: waits for it, canary intact 3 s later" \
		run --link $link --rows 1024 --max-ms 2500 --settle-ms 3000 --fetch-ok unreg
	echo 4000 >$P/fault_delay_ms
	check "$t: UNREG_BUF with a fetch held 4 s: breaks it within 3.5 s, canary intact 5 s later" \
		run --link $link --rows 4096 --max-ms 3500 --settle-ms 5000 unreg
	check "$t: the link comes back" wait_link_fetchable $link 30
	echo 500 >$P/fault_delay_ms
	check "$t: close() with a fetch held 0.5 s: canary intact 3 s later" \
		run --link $link --rows 1024 --max-ms 2500 --settle-ms 3000 close
	echo 1500 >$P/fault_delay_ms
	check "$t: engram_fetch() under SIGALRM every 50 ms: returns 0 once the fetch ended, canary intact" \
		run --link $link --rows 4096 --min-ms 1400 --settle-ms 3000 eintr
	echo 0 >$P/fault_delay_ms
	check "$t: the link works after" wait_link_fetchable $link 30
done

# Kept keys (ENGRAM_REG_F_KEEP_KEYS): UNREG_BUF and close() also
# deregister the buffer's windows on the connection before they return.
echo 500 >$P/fault_delay_ms
check "rdma, kept keys: UNREG_BUF with a fetch held 0.5 s: waits for it, canary intact 3 s later" \
	run_kept --link 1 --rows 1024 --max-ms 2500 --settle-ms 3000 --fetch-ok unreg
check "rdma, kept keys: close() with a fetch held 0.5 s: canary intact 3 s later" \
	run_kept --link 1 --rows 1024 --max-ms 2500 --settle-ms 3000 close
echo 4000 >$P/fault_delay_ms
check "rdma, kept keys: UNREG_BUF with a fetch held 4 s: breaks it within 3.5 s, canary intact 5 s later" \
	run_kept --link 1 --rows 4096 --max-ms 3500 --settle-ms 5000 unreg
echo 0 >$P/fault_delay_ms
check "rdma, kept keys: the link comes back" wait_link_fetchable 1 30

touch "$STALL"
sleep 0.2
check "tcp, server not reading: a second thread's fetch times out in time, no D state, WAIT answers" \
	run --link 2 --short-ms 1000 --long-ms 20000 --max-ms 2500 stall
rm -f "$STALL"
check "tcp: the link comes back once the server reads again" wait_link_fetchable 2 30
check "no warning in the kernel log" \
	sh -c "! dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'WARNING:\|BUG:\|INFO: task'"
done_testing
