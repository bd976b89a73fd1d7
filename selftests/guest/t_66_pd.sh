#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# No late write, against a hostile peer on the same device: the module is
# host and client at once (rxe loopback), a raw peer (rdma_hostile) serves
# two of its links, learns the key of a fetch in flight on link A, and
# tries to write there from link B's connection and from connections of
# its own to the module's listener, then tries a zero-length WRITE and
# READ on such a connection.  Every try must be refused by the remote end
# and the client's buffer hold its canary, except for the 16 bytes that
# the server the fetch went to writes as a control.  "Refused" is a NAK
# (remote access or invalid request error); 5.10's rxe sends none (its
# responder's QP goes to error first), so there a try retried until the
# transport gave up counts too, and the control write, after the attacks
# on the same device, shows that the path acknowledges what the other end
# accepts.  From 6.1 on rxe NAKs, and a silent drop would be a regression.
# Then the same peer as a version 2 server answers a fetch with a RESPONSE
# that invalidates the wrong key: the fetch's second key (the peer's write
# with the first, a second after its RESPONSE, is refused) or a forged one
# (the client breaks the connection, the fetch fails); nothing lands after
# either fetch returned.
# timeout: 360
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
HOSTILE=$TOP/selftests/guest/rdma_hostile
CHECK=$TOP/selftests/guest/fetch_check
TMPD=${ENGRAM_TEST_TMP:-$SCRATCH}
# Ports nothing else in the tests uses.
HOST_PORT=18661 PORT_A=18662 PORT_B=18663

test -x "$HOSTILE" || bail "$HOSTILE is not built"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:$HOST_PORT" || bail "insmod with listen="

link_up() { test "$(link_field "$1" state)" = up; }
# wait_for SECONDS COMMAND...: until COMMAND succeeds.

timeout 120 "$HOSTILE" --addr "$IP" --port-a $PORT_A --port-b $PORT_B \
	--host-port $HOST_PORT --table evil --rows 1000 --linger-ms 30000 \
	>"$TMPD/hostile.out" 2>&1 &
hpid=$!
wait_for 20 grep -q "rdma_hostile: ready" "$TMPD/hostile.out" ||
	{ sed 's/^/# /' "$TMPD/hostile.out"; bail "the hostile peer listens"; }

a=$("$ENGRAMCTL" link add "rdma://$IP:$PORT_A@$IP" 2>&1)
b=$("$ENGRAMCTL" link add "rdma://$IP:$PORT_B@$IP" 2>&1)
check "two links to the hostile peer ($a, $b)" test "$a" -ge 1 -a "$b" -ge 1
check "link A comes up" wait_for 30 link_up "$a"
check "link B comes up" wait_for 30 link_up "$b"

# A fetch the peer never answers: it ends by its deadline, and whatever
# landed in the buffer before that is counted by fetch_check's settle.
"$CHECK" --link "$a" --table evil --rows-list 1,2,3,4 --timeout-ms 20000 \
	--expect-errno ETIMEDOUT --settle-ms 500 >"$TMPD/fetch.out" 2>&1 &
fpid=$!

wait "$hpid"
hrc=$?
sed 's/^/# /' "$TMPD/hostile.out"
wait "$fpid"
frc=$?
sed 's/^/# /' "$TMPD/fetch.out"

case "$(uname -r)" in
[1-5].*) refused='(refused \(remote|dropped \(transport retry)' ;;
*) refused='refused \(remote' ;;
esac
for name in link-b-write host-write host-write-0 host-read-0; do
	check "$name is refused by the remote end" \
		grep -Eq "^rdma_hostile: $name: $refused" "$TMPD/hostile.out"
done
check "the owner's control write goes through" \
	grep -q "^rdma_hostile: control-write-link-a: ACCEPTED" "$TMPD/hostile.out"
check "the hostile peer saw every attack refused (exit $hrc)" test $hrc -eq 0
check "the fetch timed out (exit $frc)" test $frc -eq 0
check "only the control's 16 bytes landed in the buffer" \
	grep -q "settle 500 ms: 16 bytes written before the return, 0 changed after it" \
	"$TMPD/fetch.out"

"$ENGRAMCTL" link del "$a" >/dev/null 2>&1
"$ENGRAMCTL" link del "$b" >/dev/null 2>&1

# A version 2 server whose RESPONSE invalidates a key that is not the
# fetch's first (failures.rst: only the first key's invalidation by the
# RESPONSE spares the client its own).  hostile_v2 MODE PORT FETCH-ARGS...
# runs the peer in --answer-inv MODE on PORT (and PORT+1, unused), links
# to it, and runs one fetch_check with FETCH-ARGS; sets frc, hrc, link.
hostile_v2() {
	local mode=$1 port=$2 hpid proto=2 keep=
	shift 2
	case $mode in kept*) proto=5 keep=1 ;; esac
	timeout 120 "$HOSTILE" --addr "$IP" --port-a "$port" --port-b $((port + 1)) \
		--host-port $HOST_PORT --table evil --rows 1000 --linger-ms 30000 \
		--answer-inv "$mode" >"$TMPD/inv-$mode.out" 2>&1 &
	hpid=$!
	wait_for 20 grep -q "rdma_hostile: ready" "$TMPD/inv-$mode.out" ||
		{ sed 's/^/# /' "$TMPD/inv-$mode.out"; bail "the $mode peer listens"; }
	link=$("$ENGRAMCTL" link add "rdma://$IP:$port@$IP" 2>&1)
	check "$mode: a link to the version $proto peer comes up ($link)" wait_for 30 link_up "$link"
	check "$mode: ... speaking protocol $proto" test "$(link_field "$link" protocol)" = $proto
	ENGRAM_RDMA_KEEP_KEYS=$keep "$CHECK" --link "$link" --table evil --timeout-ms 20000 "$@" \
		>"$TMPD/fetch-$mode.out" 2>&1
	frc=$?
	wait "$hpid"
	hrc=$?
	sed 's/^/# /' "$TMPD/inv-$mode.out" "$TMPD/fetch-$mode.out"
}
# The second range's key: a real key of the same fetch.  The client must
# still invalidate the first itself, so the peer's write with it a second
# after the RESPONSE is refused.
hostile_v2 second 18664 --rows-list 1,2,3,4 --ranges 2 --expect-errno OK --settle-ms 3000
check "second: the fetch returns what the server said, ok (exit $frc)" test $frc -eq 0
check "second: the peer's RESPONSE was delivered" \
	grep -q "^rdma_hostile: answer-inv-second: .*: delivered" "$TMPD/inv-second.out"
check "second: its write with the first key after the RESPONSE is refused" \
	grep -Eq "^rdma_hostile: late-write: $refused" "$TMPD/inv-second.out"
check "second: the peer saw it refused (exit $hrc)" test $hrc -eq 0
check "second: only the control's 16 bytes landed, nothing after the return" \
	grep -q "settle 3000 ms: 16 bytes written before the return, 0 changed after it" \
	"$TMPD/fetch-second.out"
check "second: not counted as a remote invalidation" \
	test "$(link_stat "$link" remote_invalidations)" = 0
"$ENGRAMCTL" link del "$link" >/dev/null 2>&1
# A key the first range's MR never had: the client's device refuses the
# invalidation, which breaks the connection and ends the fetch.
hostile_v2 forged 18666 --rows-list 1,2,3,4 --expect-errno ECONNRESET --settle-ms 1000
check "forged: the fetch fails with ECONNRESET (exit $frc)" test $frc -eq 0
check "forged: the client closed the connection, not the peer" \
	grep -q "^rdma_hostile: answer-inv-forged: the client closed the connection" \
	"$TMPD/inv-forged.out"
check "forged: only the control's 16 bytes landed, nothing after the return" \
	grep -q "settle 1000 ms: 16 bytes written before the return, 0 changed after it" \
	"$TMPD/fetch-forged.out"
check "forged: the link counts a transport error" \
	test "$(link_stat "$link" transport_errors)" -ge 1
"$ENGRAMCTL" link del "$link" >/dev/null 2>&1
# A refusal whose bad_index is no position of the fetch (0xffffffff):
# callers index their rows with it, so it is a protocol error (issue 37).
hostile_v2 bad-index 18668 --rows-list 1,2,3,4 --expect-errno EPROTO
check "bad-index: the fetch fails with EPROTO, not ERANGE (exit $frc)" test $frc -eq 0
check "bad-index: the peer's RESPONSE was delivered" \
	grep -q "^rdma_hostile: answer-inv-bad-index: RESPONSE row_out_of_range.*: delivered" \
	"$TMPD/inv-bad-index.out"
check "bad-index: the caller is never given the position" \
	grep -q "expected EPROTO, got EPROTO (wire_status malformed, bad_index 0)" \
	"$TMPD/fetch-bad-index.out"
"$ENGRAMCTL" link del "$link" >/dev/null 2>&1

# A version 5 server to a buffer whose keys are kept (ENGRAM_REG_F_KEEP_KEYS):
# its RESPONSE invalidates nothing, and the key works until the buffer
# goes.  The peer writes with it 5 s after answering, after fetch_check
# has closed its fd: that write must be refused.
hostile_v2 kept 18670 --rows-list 1,2,3,4 --expect-errno OK --settle-ms 1000
check "kept: the fetch returns ok (exit $frc)" test $frc -eq 0
check "kept: its REQUEST said the keys are kept" \
	grep -q "^rdma_hostile: answer-kept: the request keeps its keys" "$TMPD/inv-kept.out"
check "kept: only the control's 16 bytes landed, nothing after the return" \
	grep -q "settle 1000 ms: 16 bytes written before the return, 0 changed after it" \
	"$TMPD/fetch-kept.out"
check "kept: a write with the kept key once the fd closed is refused" \
	grep -Eq "^rdma_hostile: late-write: $refused" "$TMPD/inv-kept.out"
check "kept: the peer saw it refused (exit $hrc)" test $hrc -eq 0
check "kept: the link registered a window and was sent no invalidation" \
	test "$(link_stat "$link" kept_registrations)" -ge 1 -a \
	"$(link_stat "$link" remote_invalidations)" = 0
"$ENGRAMCTL" link del "$link" >/dev/null 2>&1
# A RESPONSE that invalidates the kept key: a protocol error, the link breaks.
hostile_v2 kept-inv 18672 --rows-list 1,2,3,4 --expect-errno EPROTO --settle-ms 1000
check "kept-inv: the fetch fails with EPROTO (exit $frc)" test $frc -eq 0
check "kept-inv: the client closed the connection" \
	grep -q "^rdma_hostile: answer-kept-inv: the client closed the connection" \
	"$TMPD/inv-kept-inv.out"
check "kept-inv: only the control's 16 bytes landed, nothing after the return" \
	grep -q "settle 1000 ms: 16 bytes written before the return, 0 changed after it" \
	"$TMPD/fetch-kept-inv.out"
"$ENGRAMCTL" link del "$link" >/dev/null 2>&1

# The host still serves its own clients, with a PD per connection.
F=$SCRATCH/pd.safetensors
make_table "$F" 2000 --seed 66 || bail "mktable"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name pd >/dev/null 2>&1
check "the table loads" wait_state pd ready 30
c=$("$ENGRAMCTL" link add "rdma://$IP:$HOST_PORT@$IP" 2>&1)
check "a link to the module's own listener comes up ($c)" wait_for 30 link_up "$c"
out=$("$CHECK" --link "$c" --table pd --file "$F" --weight-offset "$(table_field pd weight_offset)" \
	--scale-offset "$(table_field pd scale_offset)" --count 2000 --batch 288 --timeout-ms 30000 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
check "2,000 rows fetched from it are exact" test $rc -eq 0
"$ENGRAMCTL" link del "$c" >/dev/null 2>&1
"$ENGRAMCTL" unload pd >/dev/null 2>&1
module_unload
check "rmmod" test ! -d /sys/module/engram_rdma
# The next test expects the module loaded, as the harness left it.
check "the module loads again" module_load
done_testing
