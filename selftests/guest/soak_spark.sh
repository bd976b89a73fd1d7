#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The Spark guest of the soak (selftests/vm/run-soak.sh, `make soak`):
# fetches ENGRAM_SOAK_ROWS random rows of the host guest's table over RDMA
# in ENGRAM_SOAK_PROCS processes (failed fetches do not count towards them)
# and compares every byte with its own copy of the file, while the host
# guest breaks things (soak_host.sh).  Every
# fetch must return exact rows or fail with a transport error within its
# deadline plus a margin, and nothing may land after a call returned
# (fetch_check --tolerate).  Here, every ENGRAM_SOAK_KILL_EVERY seconds a
# further fetcher is killed mid-fetch, and a fetch after it must work.
# Prints "# soak-spark: ..." lines that run-soak.sh sums up.
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/soak.safetensors
SIGNAL_PORT=18602
TROWS=${ENGRAM_SOAK_TABLE_ROWS:-1000000}
ROWS=${ENGRAM_SOAK_ROWS:-100000000}
PROCS=${ENGRAM_SOAK_PROCS:-2}
BATCH=${ENGRAM_SOAK_BATCH:-16384,4096,288}
KILL_EVERY=${ENGRAM_SOAK_KILL_EVERY:-300}
make_table "$F" "$TROWS" --seed 47 --pad-before 3 || bail "mktable"
sha=$(sha256sum "$F" | cut -d' ' -f1)
read -r WOFF SOFF < <(tensor_offsets "$F")
# A 16,384-row fetch between two TCG guests takes a few hundred ms; the
# deadline leaves room for the other processes' fetches on the same link.
DEADLINE=$(slow 5000)
MARGIN=$(slow 3000)
FC=("$TOP/selftests/guest/fetch_check" --sha256 "$sha" --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --rows-total "$TROWS")
fetchable() {

	for _ in $(seq 1 "$1"); do
		"${FC[@]}" --count 1 --timeout-ms 10000 >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}

# Jumbo frames, as RoCE is deployed: rxe's RDMA MTU goes from 1024 to 4096,
# a quarter of the packets (and of TCG's work per row).  The link is added
# only now, so that its connection takes the new MTU.
MTU=${ENGRAM_SOAK_MTU:-9000}
netdev=$(rdma link show | sed -n 's/^link rxe0\/.* netdev \([^ ]*\).*/\1/p')
check "MTU $MTU on $netdev" ip link set dev "$netdev" mtu "$MTU"
check "link add rdma://192.0.2.1:18515@192.0.2.2" \
	"$ENGRAMCTL" link add rdma://192.0.2.1:18515@192.0.2.2
check "the link to the host guest comes up with the table" fetchable 900
"$ENGRAMCTL" link show | sed 's/^/# /'
STOP=$SCRATCH/soak-stop
rm -f "$STOP"
t0=$SECONDS
"${FC[@]}" --tolerate --procs "$PROCS" --count $((ROWS / PROCS)) --count-exact --batch "$BATCH" \
	--timeout-ms "$DEADLINE" --max-ms $((DEADLINE + MARGIN)) --settle-ms 3000 --seed 11 \
	--progress-s 120 >"$SCRATCH/soak.out" 2>"$SCRATCH/soak.err" &
loop=$!
# Show progress as it comes, and kill a further fetcher mid-fetch now and then.
kills=0 kill_fail=0 shown=0
next_kill=$((SECONDS + KILL_EVERY))
while kill -0 $loop 2>/dev/null; do
	sleep 5
	lines=$(wc -l <"$SCRATCH/soak.err")
	if [ "$lines" -gt "$shown" ]; then
		sed -n "$((shown + 1)),${lines}p" "$SCRATCH/soak.err" | sed 's/^/# /'
		shown=$lines
	fi
	[ $SECONDS -ge $next_kill ] || continue
	next_kill=$((SECONDS + KILL_EVERY))
	"${FC[@]}" --count 100000000 --batch 4096 --timeout-ms 60000 --seed $((100 + kills)) \
		>/dev/null 2>&1 &
	victim=$!
	sleep 3
	kill -9 $victim 2>/dev/null
	wait $victim 2>/dev/null
	kills=$((kills + 1))
	if ! fetchable 120; then
		kill_fail=$((kill_fail + 1))
		diag "after fetcher kill $kills no fetch worked within 120 tries"
	fi
done
wait $loop
rc=$?
secs=$((SECONDS - t0))
sed -n "$((shown + 1)),\$p" "$SCRATCH/soak.err" | tail -n 40 | sed 's/^/# /'
sed 's/^/# /' "$SCRATCH/soak.out"
# The host guest may stop breaking things now.
check "tell the host guest the soak is done" timeout 120 python3 - "$SIGNAL_PORT" <<'PY'
import socket, sys, time
for _ in range(100):
    try:
        c = socket.create_connection(("192.0.2.1", int(sys.argv[1])), timeout=5)
        c.sendall(b"done\n")
        c.close()
        sys.exit(0)
    except OSError:
        time.sleep(1)
sys.exit(1)
PY
field() { sed -n "s/^fetch_check: .*\\b$1 \\([0-9][0-9]*\\).*/\\1/p" "$SCRATCH/soak.out" | head -n 1; }
rows=$(field rows) fetches=$(field batches) bad=$(field bad) errors=$(field errors)
tol=$(field tolerated) slowf=$(field slow) late=$(field late)
kinds=$(sed -n 's/^fetch_check: tolerated by kind: //p' "$SCRATCH/soak.out")
echo "# soak-spark: rows ${rows:-?} fetches ${fetches:-?} bad ${bad:-?} errors ${errors:-?}" \
	"tolerated ${tol:-?} slow ${slowf:-?} late ${late:-?} seconds $secs" \
	"fetcher-kills $kills kill-no-recovery $kill_fail"
echo "# soak-spark: tolerated by kind: ${kinds:-?}"
check "every fetch exact or a clean transport error in bound, nothing late (exit $rc)" \
	test $rc -eq 0
check "$ROWS rows tried, ${rows:-0} exact, 0 bad rows" test "${bad:-1}" -eq 0
check "$kills fetchers killed mid-fetch, a fetch worked after each" test $kill_fail -eq 0
check "no warning, oops or other splat in this guest's kernel log" \
	kmsg_clean
check "rmmod with the link up" module_unload
done_testing
