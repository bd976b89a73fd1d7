#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# libengram's local fallback in one guest (rxe loopback): with the remote
# broken by a held-back response (fault_delay_ms), a deleted link, a link
# nobody serves, and the table unloaded on the server, every fetch still
# returns the exact rows (compared with the file read independently), each
# within its deadline plus a margin, filled from the local copy; the
# fallbacks are counted for the right link and table in `engramctl -j
# stats`.  Required mode returns the remote error unchanged and leaves the
# buffer untouched.  The local copy's identity (size, SHA-256), malformed
# ENGRAM_RDMA_* variables, configuration by environment only
# (ENGRAM_RDMA_LOCAL_<NAME>, ENGRAM_RDMA_LOCAL_DIR, ENGRAM_RDMA_TIMEOUT_MS),
# the per-table log line (statlog_s) and the Python binding.
# Bounds: a fetch that fails returns within its deadline plus MARGIN; one
# that falls back may take LOCAL_READ more to read its rows from the copy.
# kernels: 6.12
# timeout: 900
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
EXAMPLE=$TOP/tools/python/example.py
P=/sys/module/engram_rdma/parameters
ROWS=60000
F=$SCRATCH/fb.safetensors		# table fb, and its local copy
FIDLE=$SCRATCH/fbidle.safetensors	# table idle: loaded, never fetched
FSHORT=$SCRATCH/fbshort.safetensors	# fb's tensors, one row short
FOTHER=$SCRATCH/fbother.safetensors	# fb's tensors, same size, other bytes
DELAY=1500	# ms the server holds each response back
DEADLINE=300	# ms a fetch waits
# How late a fetch may return past its deadline, whether it failed or fell
# back: the break of the link (disconnect, drain) runs through rxe's
# tasklets in a TCG guest, then the rows are read from the file.
MARGIN=$(slow 2000)
BOUND=$((DEADLINE + MARGIN))
# Reading 288 random rows from the copy is 576 O_DIRECT preads through an
# emulated disk: about 0.8 s here, and up to 2 s while the other kernel's
# guest shares the machine's two cores (as in selftests/guest/fault_spark.sh).
LOCAL_READ=$(slow 2000)
FB_BOUND=$((BOUND + LOCAL_READ))
# (a) bounds the two parts of a fallback apart (engram_result.local_ns):
# the remote attempt by BOUND, the local read by LOCAL_MAX, which only
# catches a hang.
LOCAL_MAX=$(slow 10000)
SPLIT=(--max-ms $BOUND --max-local-ms $LOCAL_MAX)
# Running fetchers in (b) and (c) use a 1 s deadline.  A fetch in flight
# when its link is deleted ends when the teardown has drained the link (no
# write may land after it returns), which in a TCG guest on a loaded host
# took up to 2.5 s: it may take that long past its deadline.
RUN_DEADLINE=1000
RUN_BOUND=$((RUN_DEADLINE + 2 * MARGIN + LOCAL_READ))
LAST=$ENGRAM_TEST_TMP/last

make_table "$F" $ROWS --seed 56 --prefix fb --pad-before 3 || bail "mktable fb"
make_table "$FIDLE" 1000 --seed 56 --prefix idle || bail "mktable idle"
make_table "$FSHORT" $((ROWS - 1)) --seed 56 --prefix fb --pad-before 3 || bail "mktable short"
make_table "$FOTHER" $ROWS --seed 57 --prefix fb --pad-before 3 || bail "mktable other"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" ||
	bail "insmod with listen= and remote="
"$ENGRAMCTL" load "$F" --tensor fb >/dev/null 2>&1
"$ENGRAMCTL" load "$FIDLE" --tensor idle >/dev/null 2>&1
check "tables fb and idle load" test "$(table_state fb):$(table_state idle)" = ready:ready
WOFF=$(table_field fb weight_offset)
SOFF=$(table_field fb scale_offset)
FC=("$CHECK" --table fb --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS)
# What wait_fetchable asks: a remote fetch, not a fallback.
NOFB=(--timeout-ms 10000 --expect-no-fallbacks)
# rune [VAR=VALUE]... -- ARGS: fetch_check with that environment; output
# shown as diagnostics and kept in $LAST.
rune() {
	local envs=() out rc
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	out=$(env "${envs[@]}" "${FC[@]}" "$@" 2>&1)
	rc=$?
	echo "$out" >"$LAST"
	echo "$out" | sed 's/^/# /'
	return $rc
}
run() { rune -- "$@"; }
# From the last run: successful fetches that fell back, and that did not.
fallbacks() { sed -n 's/^fetch_check: fallbacks \([0-9]*\) .*/\1/p' "$LAST"; }
remotes() { sed -n 's/^fetch_check: fallbacks [0-9]* remote \([0-9]*\) .*/\1/p' "$LAST"; }
# lt LINK FIELD: counter FIELD of table fb as opened through LINK (0 if absent).
lt() {
	"$ENGRAMCTL" -j stats | jget "next((t['$2'] for l in d['links'] if l['id'] == $1
		for t in l.get('tables', []) if t['name'] == 'fb'), 0)"
}
lt_deleted() {
	"$ENGRAMCTL" -j stats | jget "next((l.get('deleted', False) for l in d['links']
		if l['id'] == $1), 'absent')"
}
set_knob() { echo "$2" >"$P/$1"; }
# wait_up LINK SECONDS: the link is up (with the fault knob on, no fetch works).
wait_up() {
	local i
	for i in $(seq 1 $(($2 * 5))); do
		[ "$("$ENGRAMCTL" -j link show "$1" 2>/dev/null | jget "d[0]['state']")" = up ] &&
			return 0
		sleep 0.2
	done
	return 1
}
LINK=1
check "the link comes up and sees the table" wait_fetchable 30 "${NOFB[@]}"
check "fetches without a fault are remote and exact" \
	run --local "$F" --count 2880 --batch 288 --timeout-ms 60000 --expect-no-fallbacks

# (a) Timeout: the server holds every response back 1.5 s, the fetch waits
# 300 ms.  Each fetch times out (or finds the link still reconnecting after
# the previous break) and is filled from the local copy.
set_knob fault_delay_ms $DELAY
fb0=$(lt $LINK fallbacks); fr0=$(lt $LINK fallback_rows); g0=$(stat_global fallbacks)
tmo0=$(lt $LINK fetch_timeouts)
check "(a) sync fetch: all 10 fetches fall back, rows exact, each given up within $BOUND ms" \
	run --local "$F" --local-tensor fb --count 2880 --batch 288 --timeout-ms $DEADLINE \
	"${SPLIT[@]}" --expect-fallbacks 10 --seed 1
sed -n 's/^fetch_check: fallback max/# (a) fallback max/p' "$LAST"
n=$(fallbacks)
check "(a) counted for link $LINK table fb: +$n fallbacks, +2880 fallback rows" \
	test "$(lt $LINK fallbacks):$(lt $LINK fallback_rows)" = "$((fb0 + n)):$((fr0 + 2880))"
check "(a) and module-wide" test "$(stat_global fallbacks)" -eq $((g0 + n))
check "(a) the table's timeouts are counted next to them" \
	test "$(lt $LINK fetch_timeouts)" -gt "$tmo0"
fb0=$(lt $LINK fallbacks)
check "(a) submit + wait: all fall back, exact, in bound" \
	run --local "$F" --mode submit --count 2880 --batch 288 --timeout-ms $DEADLINE \
	"${SPLIT[@]}" --expect-fallbacks 10 --seed 2
check "(a) submit fallbacks counted" test "$(lt $LINK fallbacks)" -eq $((fb0 + $(fallbacks)))
check "(a) 3 ranges, stride 300: rows land where the server would put them" \
	run --local "$F" --ranges 3 --stride 300 --count 1728 --batch 576 \
	--timeout-ms $DEADLINE --max-ms $FB_BOUND --expect-fallbacks 3 --seed 3

# (d) Required mode: the remote error comes back unchanged, nothing is
# written into the buffer before or after the return.
untouched() {
	grep -q "settle 3000 ms: 0 bytes written before the return, 0 changed after it" "$LAST"
}
fb0=$(lt $LINK fallbacks)
check "(d) the link is up again" wait_up $LINK 30
check "(d) --required: ETIMEDOUT unchanged, in bound" \
	run --local "$F" --required --count 288 --batch 288 --timeout-ms $DEADLINE \
	--expect-errno ETIMEDOUT --max-ms $BOUND --settle-ms 3000
check "(d) --required: the buffer is untouched" untouched
check "(d) the link is up again" wait_up $LINK 30
check "(d) ENGRAM_RDMA_REQUIRED=1: ETIMEDOUT unchanged, in bound" \
	rune ENGRAM_RDMA_REQUIRED=1 -- --local "$F" --count 288 --batch 288 \
	--timeout-ms $DEADLINE --expect-errno ETIMEDOUT --max-ms $BOUND --settle-ms 3000
check "(d) ENGRAM_RDMA_REQUIRED=1: the buffer is untouched" untouched
check "(d) no fallback counted in required mode" test "$(lt $LINK fallbacks)" -eq "$fb0"

# (f) Configuration by environment only.
check "(f) the link is up again" wait_up $LINK 30
check "(f) ENGRAM_RDMA_TIMEOUT_MS=5000 outlasts the 1.5 s hold (the module's 1 s would not)" \
	rune ENGRAM_RDMA_TIMEOUT_MS=5000 -- --count 576 --batch 288 --expect-no-fallbacks
tmo_ms=$(cat $P/timeout_ms)
set_knob timeout_ms 5000
check "(f) the link is up again" wait_up $LINK 30
check "(f) ENGRAM_RDMA_TIMEOUT_MS=300 beats the module's timeout_ms=5000" \
	rune ENGRAM_RDMA_TIMEOUT_MS=$DEADLINE ENGRAM_RDMA_REQUIRED=1 -- --count 288 \
	--batch 288 --expect-errno ETIMEDOUT --max-ms $BOUND
set_knob timeout_ms "$tmo_ms"
wait_up $LINK 30
check "(f) ENGRAM_RDMA_LOCAL_FB + ENGRAM_RDMA_TIMEOUT_MS: every fetch falls back, exact" \
	rune ENGRAM_RDMA_LOCAL_FB="$F" ENGRAM_RDMA_TIMEOUT_MS=$DEADLINE -- --count 1440 \
	--batch 288 --max-ms $FB_BOUND --expect-fallbacks 5 --seed 4
D=$ENGRAM_TEST_TMP/copies
mkdir -p "$D"
ln -s "$FIDLE" "$D/a-first.safetensors"		# holds no fb tensors: skipped
ln -s "$F" "$D/model-00002-of-00002.safetensors"
wait_up $LINK 30
check "(f) ENGRAM_RDMA_LOCAL_DIR finds fb's shard by its tensors, every fetch falls back" \
	rune ENGRAM_RDMA_LOCAL_DIR="$D" -- --count 1440 --batch 288 --timeout-ms $DEADLINE \
	--max-ms $FB_BOUND --expect-fallbacks 5 --seed 5
set_knob fault_delay_ms 0
check "with the knob off the link comes back" wait_fetchable 30 "${NOFB[@]}"

# (e) Identity of the local copy, and malformed settings.
check "(e) a copy one row short is refused (EBADMSG)" \
	run --local "$FSHORT" --count 288 --batch 288 --expect-errno EBADMSG
check "(e) ... also when configured by ENGRAM_RDMA_LOCAL_FB" \
	rune ENGRAM_RDMA_LOCAL_FB="$FSHORT" -- --count 288 --batch 288 --expect-errno EBADMSG
check "(e) the size check alone takes a same-size copy" \
	run --local "$FOTHER" --count 288 --batch 288 --timeout-ms 60000 --expect-no-fallbacks
check "(e) ENGRAM_RDMA_LOCAL_CHECK=sha256 refuses it (EBADMSG)" \
	rune ENGRAM_RDMA_LOCAL_CHECK=sha256 -- --local "$FOTHER" --count 288 --batch 288 \
	--expect-errno EBADMSG
check "(e) ENGRAM_RDMA_LOCAL_CHECK=sha256 takes the right copy" \
	rune ENGRAM_RDMA_LOCAL_CHECK=sha256 -- --local "$F" --count 288 --batch 288 \
	--timeout-ms 60000 --expect-no-fallbacks
for bad in ENGRAM_RDMA_TIMEOUT_MS=abc ENGRAM_RDMA_TIMEOUT_MS=0 ENGRAM_RDMA_TIMEOUT_MS=600001 \
	ENGRAM_RDMA_REQUIRED=2 ENGRAM_RDMA_LOCAL_CHECK=md5; do
	check "(e) $bad: engram_open fails with EINVAL" \
		rune "$bad" -- --count 288 --batch 288 --expect-errno EINVAL
	check "(e) $bad: named in the message" grep -q "EINVAL with $bad set" "$LAST"
done
check "(e) an empty ENGRAM_RDMA_TIMEOUT_MS counts as unset" \
	rune ENGRAM_RDMA_TIMEOUT_MS= -- --count 288 --batch 288 --timeout-ms 60000
pyerr=$(ENGRAM_RDMA_TIMEOUT_MS=abc python3 -c "
import sys
sys.path.insert(0, '$TOP/tools/python')
from engram_rdma import Engram
try:
    Engram()
except OSError as e:
    print(e.errno, e)
" 2>&1)
diag "python: $pyerr"
check "(e) Python: OSError EINVAL naming ENGRAM_RDMA_TIMEOUT_MS" \
	sh -c "echo \"\$1\" | grep -q \"^22 .*ENGRAM_RDMA_TIMEOUT_MS='abc'\"" - "$pyerr"
check "(e) the module is still usable" wait_fetchable 10 "${NOFB[@]}"

# (c) The server's table unloaded under a running fetcher (ESTALE, ENOENT),
# then loaded again: fallbacks meanwhile, a new opener is remote again.
STOP=$ENGRAM_TEST_TMP/stop-c
"${FC[@]}" --local "$F" --count 100000000 --batch 288 --timeout-ms $RUN_DEADLINE \
	--max-ms $RUN_BOUND \
	--duration-s 60 --stop-file "$STOP" --expect-fallbacks 1 >"$ENGRAM_TEST_TMP/c" 2>&1 &
bg=$!
sleep 2
fb0=$(lt $LINK fallbacks)
check "(c) unload fb under the fetcher" "$ENGRAMCTL" unload fb
sleep 3
check "(c) fallbacks counted for link $LINK table fb while unloaded" \
	test "$(lt $LINK fallbacks)" -gt "$fb0"
"$ENGRAMCTL" load "$F" --tensor fb >/dev/null 2>&1
check "(c) fb loads again" test "$(table_state fb)" = ready
sleep 1
touch "$STOP"
wait $bg
rc=$?
sed 's/^/# (c): /' "$ENGRAM_TEST_TMP/c"
cp "$ENGRAM_TEST_TMP/c" "$LAST"
check "(c) every fetch exact and in bound, remote before, fallback after" \
	test "$rc:$([ "$(remotes)" -gt 0 ] && echo r):$([ "$(fallbacks)" -gt 0 ] && echo f)" = 0:r:f
check "(c) a new opener sees the table again" wait_fetchable 30 "${NOFB[@]}"
fb0=$(lt $LINK fallbacks)
check "(c) after the reload every fetch is remote" \
	run --local "$F" --count 2880 --batch 288 --timeout-ms 60000 --expect-no-fallbacks
check "(c) fallbacks stop growing" test "$(lt $LINK fallbacks)" -eq "$fb0"

# (b) Link down: deleted under a running fetcher; then no link at all, and
# a link to an address nobody serves: a local-only handle.
STOP=$ENGRAM_TEST_TMP/stop-b
"${FC[@]}" --local "$F" --count 100000000 --batch 288 --timeout-ms $RUN_DEADLINE \
	--max-ms $RUN_BOUND \
	--duration-s 60 --stop-file "$STOP" --expect-fallbacks 1 >"$ENGRAM_TEST_TMP/b" 2>&1 &
bg=$!
sleep 2
t0=$(date +%s%N)
check "(b) link del $LINK under the fetcher" "$ENGRAMCTL" link del $LINK
diag "link del took $((($(date +%s%N) - t0) / 1000000)) ms"
sleep 3
check "(b) stats list link $LINK as deleted while fb is open through it" \
	test "$(lt_deleted $LINK)" = True
check "(b) and count its fallbacks there" test "$(lt $LINK fallbacks)" -gt 0
touch "$STOP"
wait $bg
rc=$?
sed 's/^/# (b): /' "$ENGRAM_TEST_TMP/b"
cp "$ENGRAM_TEST_TMP/b" "$LAST"
check "(b) every fetch exact and in bound, remote before, fallback after" \
	test "$rc:$([ "$(remotes)" -gt 0 ] && echo r):$([ "$(fallbacks)" -gt 0 ] && echo f)" = 0:r:f
g0=$(stat_global fallbacks)
check "(b) no link: ENGRAM_RDMA_LOCAL_FB gives a local-only handle, all exact" \
	rune ENGRAM_RDMA_LOCAL_FB="$F" -- --count 2880 --batch 288 --expect-fallbacks 10 \
	--seed 8
check "(b) local-only, submit + wait" \
	rune ENGRAM_RDMA_LOCAL_FB="$F" -- --mode submit --count 2880 --batch 288 \
	--expect-fallbacks 10 --seed 9
check "(b) local-only fetches are not reported to the module" \
	test "$(stat_global fallbacks)" -eq "$g0"
check "(b) without a local copy, the open fails" \
	run --count 288 --batch 288 --expect-errno ENOTCONN
dead=$("$ENGRAMCTL" link add "rdma://$IP:18599@$IP" 2>&1)
check "(b) a link to a port nobody serves ($dead)" test "$dead" -ge 1
check "(b) through it: a local-only handle, exact" \
	rune ENGRAM_RDMA_LOCAL_FB="$F" -- --link "$dead" --count 1440 --batch 288 \
	--expect-fallbacks 5 --seed 10
"$ENGRAMCTL" link del "$dead" >/dev/null 2>&1
LINK=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
check "(b) the link is added back ($LINK)" test "$LINK" -ge 1
check "(b) the module is usable: remote fetches again" wait_fetchable 30 "${NOFB[@]}"

# (g) The per-table log line, every statlog_s seconds, deltas since the
# last one: quiet tables log nothing.
set_knob statlog_s 1
sleep 3			# flush what moved before
dmesg_mark
check "(g) remote fetches for 2 s" run --count 100000000 --batch 288 --timeout-ms 60000 \
	--duration-s 2 --expect-no-fallbacks
set_knob fault_delay_ms $DELAY
check "(g) fallbacks for 2 s" run --local "$F" --count 100000000 --batch 288 \
	--timeout-ms $DEADLINE --max-ms $FB_BOUND --duration-s 2 --expect-fallbacks 1
nfb=$(fallbacks)
set_knob fault_delay_ms 0
sleep 3
dmesg_since >"$ENGRAM_TEST_TMP/g"
sed 's/^/# (g): /' "$ENGRAM_TEST_TMP/g" | grep -F 'table ' | head -20
L="engram_rdma: table fb via link $LINK: lookups [0-9]+ rows [0-9]+ p50 [0-9]+us"
L="$L p99 [0-9]+us fallbacks [0-9]+ transport_errors [0-9]+ failovers [0-9]+ splits [0-9]+\$"
check "(g) link $LINK table fb logs lookups rows p50 p99 fallbacks transport_errors" \
	grep -Eq "$L" "$ENGRAM_TEST_TMP/g"
sumfb=$(grep -E "$L" "$ENGRAM_TEST_TMP/g" | sed 's/.* fallbacks \([0-9]*\) .*/\1/' |
	awk '{ s += $1 } END { print s + 0 }')
check "(g) the lines' fallbacks add up to the run's ($sumfb = $nfb)" test "$sumfb" -eq "$nfb"
check "(g) the served table fb logs too" \
	grep -Eq 'engram_rdma: table fb: lookups [1-9][0-9]* rows [0-9]+ p50 ' "$ENGRAM_TEST_TMP/g"
check "(g) no more than one line per table per second" test \
	"$(grep -Ec "$L" "$ENGRAM_TEST_TMP/g")" -le 12
check "(g) the idle table logs nothing" sh -c "! grep -q 'table idle' '$ENGRAM_TEST_TMP/g'"
dmesg_mark
sleep 3
check "(g) once quiet, nothing is logged" sh -c "! dmesg | tail -n +$((DMESG_MARK + 1)) |
	grep -q 'engram_rdma: table '"
set_knob statlog_s 60

# (h) The Python binding: fallback through set_local() and local_dir.
set_knob fault_delay_ms $DELAY
check "(h) the link is up" wait_up $LINK 30
py() {
	local out rc
	out=$(/usr/bin/python3 "$EXAMPLE" --table fb --file "$F" --weight-offset "$WOFF" \
		--scale-offset "$SOFF" "$@" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# /'
	return $rc
}
check "(h) Python set_local(): every fetch falls back (Result.fallback), rows exact" \
	py --local "$F" --count 2000 --timeout-ms $DEADLINE --expect-fallback
check "(h) Python Engram(local_dir=...): the same" \
	py --local-dir "$D" --count 2000 --timeout-ms $DEADLINE --expect-fallback --seed 2
set_knob fault_delay_ms 0
check "after the faults the link comes back" wait_fetchable 30 "${NOFB[@]}"

check "unload and rmmod are clean" \
	sh -c "'$ENGRAMCTL' unload fb && '$ENGRAMCTL' unload idle && rmmod engram_rdma"
check "the module loads again" module_load
done_testing
