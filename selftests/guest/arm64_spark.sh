#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The arm64 GPU-node guest of the arm64 pair (selftests/vm/run-arm64-pair.sh):
# Debian's 16K-page 6.12 kernel under qemu-system-aarch64, the module and
# every tool cross-built.  It builds the host guest's table file itself (the
# generator is deterministic), opens the table by SHA-256 over remote=, and
# compares every fetched byte with its own copy; the host guest holds its
# responses back, or reloads its module, when asked (arm64_host.sh).
# timeout: 2400
. "$(dirname "$0")/lib.sh"

SIGNAL_PORT=18602
F=$SCRATCH/arm64.safetensors
ROWS=200000
DEADLINE=$(slow 300)
MARGIN=$(slow 2000)	# the break (disconnect, drain, destroy) under TCG
SETTLE=3000		# past the moment the held-back rows (1.5 s) would go out

# ask CMD: the host guest does CMD and says ok (bounded: 10 minutes).
ask() {
	timeout 660 python3 - "$SIGNAL_PORT" "$1" <<'PY'
import socket, sys, time
for _ in range(60):
    try:
        c = socket.create_connection(("192.0.2.1", int(sys.argv[1])), timeout=10)
        break
    except OSError:
        time.sleep(1)
else:
    sys.exit(1)
c.settimeout(600)
c.sendall((sys.argv[2] + "\n").encode())
answer = c.makefile().readline().strip()
print("# host guest: " + (answer or "(no answer)"))
sys.exit(0 if answer == "ok" else 1)
PY
}

check "16 KiB pages ($(getconf PAGESIZE)) on $(uname -m)" \
	test "$(getconf PAGESIZE):$(uname -m)" = 16384:aarch64
make_table "$F" $ROWS --seed 47 --pad-before 9 || bail "mktable (arm64 engramctl)"
sha=$(sha256sum "$F" | cut -d' ' -f1)
read -r WOFF SOFF < <(tensor_offsets "$F")
FC=("$TOP/selftests/guest/fetch_check" --sha256 "$sha" --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --rows-total $ROWS)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }

check "the module was loaded with remote= naming the host guest" \
	sh -c "'$ENGRAMCTL' link show 1 | grep -q 'rdma://192.0.2.1:18515@192.0.2.2'"
check "the link to the x86 host guest comes up with the table (by SHA-256)" \
	wait_fetchable 600 --timeout-ms 10000
"$ENGRAMCTL" link show | sed 's/^/# /'
check "100,000 random rows in batches of 288 and 49,152 are exact" \
	run --count 100000 --batch 288,49152 --seed 1 --timeout-ms 120000
check "stride 300 over five ranges from offset 100: exact, gaps keep the canary" \
	run --count 20000 --batch 288,4096 --stride 300 --ranges 5 --offset 100 --seed 2 \
	--timeout-ms 60000
check "a row past the end is refused with ERANGE, buffer untouched, then a fetch works" \
	run --rows-list 1,$ROWS --expect-errno ERANGE --verify-after --count 2000 --timeout-ms 60000

timeouts0=$(stat_global fetch_timeouts)
check "the host guest holds its responses back" ask delay
check "a held-back response: ETIMEDOUT within $DEADLINE+$MARGIN ms, no write after the return" \
	run --count 288 --batch 288 --timeout-ms "$DEADLINE" --expect-errno ETIMEDOUT \
	--max-ms $((DEADLINE + MARGIN)) --settle-ms $SETTLE
check "the timeout is counted" test "$(stat_global fetch_timeouts)" -gt "$timeouts0"
check "the host guest stops holding back" ask nodelay
check "the broken link comes back and fetches are exact" wait_fetchable 300 --timeout-ms 10000

reconnects0=$("$ENGRAMCTL" -j stats | jget "d['global']['reconnects']")
check "the host guest reloads its module and the table" ask reload
check "the link reconnects to the reloaded host" wait_fetchable 600 --timeout-ms 10000
check "... and counts the reconnect" \
	test "$("$ENGRAMCTL" -j stats | jget "d['global']['reconnects']")" -gt "$reconnects0"
check "20,000 rows exact after the reconnect" \
	run --count 20000 --batch 288,49152 --seed 3 --timeout-ms 120000
# Teardown on the 16K-page node: a fetcher killed while rows are being
# written into its registered buffer, then the RDMA device removed under
# another (what nvme-rdma calls device removal), and the link back.
"${FC[@]}" --count 5000000 --batch 49152 --seed 4 --timeout-ms 60000 >/dev/null 2>&1 &
pid=$!
sleep "$(slow 2)"
check "a fetcher is running" kill -0 $pid
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
check "after it is killed mid-fetch, 20,000 rows are exact" \
	run --count 20000 --batch 288,4096 --seed 5 --timeout-ms 120000
NETDEV=$(rdma link show rxe0/1 | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
[ -n "$NETDEV" ] || bail "rxe0 has no netdev"
"${FC[@]}" --count 5000000 --batch 49152 --seed 6 --timeout-ms 60000 >/dev/null 2>&1 &
pid=$!
sleep "$(slow 2)"
check "another fetcher is running" kill -0 $pid
check "rdma link del rxe0 (on $NETDEV) under it" bounded "$(slow 60)" rdma link del rxe0
check "the fetcher stops when the device goes" \
	sh -c "timeout $(slow 60) tail --pid=$pid -f /dev/null"
kill -9 $pid 2>/dev/null
wait $pid
rc=$?
check "... and reports failure (exit $rc)" test $rc -ne 0 -a $rc -ne 137
check "rxe0 is added again" rdma link add rxe0 type rxe netdev "$NETDEV"
check "the link reconnects on the new device" wait_fetchable 300 --timeout-ms 10000
check "20,000 rows exact on it" \
	run --count 20000 --batch 288,49152 --seed 7 --timeout-ms 120000

check "the host guest is told we are done" ask done
check "rmmod with the link up" bounded 120 module_unload
check "no warning, oops or other splat in this guest's kernel log" kmsg_clean
done_testing
