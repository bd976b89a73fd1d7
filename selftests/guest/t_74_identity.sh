#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A table's identity (issue 37): one safetensors file holds several Engram
# tables, so its SHA-256 names a file, not a table.  A table is its file's
# digest, its geometry and where its tensors are in the file (protocol
# version 4 lists the offsets in the catalog).  In one guest the host role
# listens on RDMA and TCP and the client links to both, so a table opened
# on no link (the default of libengram, Python and fetch_check) is fetched
# over both transports:
# - layer1 and layer14 of one file opened by name on link 0: every row is
#   its own table's, both ways (before, half were the sibling's rows); the
#   RDMA link takes them all (replica_prefer_rdma), both links with the
#   preference off;
# - by digest alone the open is refused with ENOTUNIQ, on link 0 and on a
#   named link; by name and digest it works;
# - the same tensor under two names is one table (replicas);
# - a name reloaded with the other tensor under an open link-0 handle
#   fails that handle's fetches, never returns the other tensor's rows;
# - a row past a table's end is ERANGE, not served by a larger sibling;
# - with protocol_version=3 (a host that cannot say where tensors are) a
#   link-0 open that cannot tell the tables apart is ENOTUNIQ, and one that
#   can (one table of the file) is exact;
# - a verify that finds the pinned bytes changed (fault_verify_mismatch)
#   stops that table serving: link-0 fetches go on from its healthy
#   replica, a named link's fall back to libengram's exact local read;
# - generations do not come from the clock, so a module reload cannot
#   reissue one.
# In make check on the debug kernel only, for the lines of link_admin.c,
# replica.c and table.c only it reaches.
# timeout: 600
# kernels: debug
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/identity.safetensors
G=$SCRATCH/siblings.safetensors
ROWS=60000
P=/sys/module/engram_rdma/parameters
LA=rdma://$IP:18741
LT=tcp://$IP:18742

make_table "$F" $ROWS --seed 74 --prefix layers.1.engram.embed \
	--prefix layers.14.engram.embed --pad-before 4093 --pad-after 17 || bail "mktable"
SUM=$(sha256sum "$F" | cut -d' ' -f1)
module_unload || bail "rmmod"
module_load "listen=$LA,$LT" "remote=$LA@$IP,$LT@$IP" heartbeat_ms=300 \
	reconnect_max_ms=1000 || bail "insmod with an RDMA and a TCP listener and a link to each"
"$ENGRAMCTL" load "$F" --tensor layers.1.engram.embed --name layer1 --sha256 "$SUM" >/dev/null
"$ENGRAMCTL" load "$F" --tensor layers.14.engram.embed --name layer14 >/dev/null
check "layer1 and layer14 load from one file" \
	test "$(table_state layer1) $(table_state layer14)" = "ready ready"
G1=$(table_field layer1 generation)
NOW=$(date +%s)
# The old scheme: the wall clock's seconds << 20, plus the loads since.
check "generations do not come from the clock ($G1 against $NOW << 20)" \
	test $((G1 >> 20)) -lt $((NOW - 86400)) -o $((G1 >> 20)) -gt $((NOW + 86400))
W1=$(table_field layer1 weight_offset) S1=$(table_field layer1 scale_offset)
W14=$(table_field layer14 weight_offset) S14=$(table_field layer14 scale_offset)
fc1=("$CHECK" --file "$F" --weight-offset "$W1" --scale-offset "$S1" --rows-total $ROWS)
fc14=("$CHECK" --file "$F" --weight-offset "$W14" --scale-offset "$S14" --rows-total $ROWS)
FC=("${fc1[@]}" --table layer1)
run() { local out rc; out=$("$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
both_up() { wait_fetchable 30 --link 1 --timeout-ms 10000 && wait_fetchable 30 --link 2 --timeout-ms 10000; }
check "both links come up" both_up

out=$("$ENGRAMCTL" link tables 2>&1)
diag "link tables: $out"
check "link tables: layer1 and layer14 are two tables, each served by both links" \
	test "$(grep -Ec "^layer1(4)? sha256 ${SUM:0:16} rows $ROWS weight@[0-9]+ scale@[0-9]+: link 1 \(up, ready\) link 2 \(up, ready\)$" <<<"$out")" = 2

# --- link 0, by name: each table's own rows, over RDMA first to a host
# that both links reach, then over both transports
r1=$(link_stat 1 fetches) r2=$(link_stat 2 fetches)
check "layer1 on link 0 by name: $(rows 100000) rows exact" \
	run "${fc1[@]}" --table layer1 --count "$(rows 100000)" --batch 288,4096 --timeout-ms 30000 --seed 1
check "the RDMA link answered them, the TCP link to the same host none ($(($(link_stat 1 fetches) - r1)) and $(($(link_stat 2 fetches) - r2)): replica_prefer_rdma)" \
	test "$(link_stat 1 fetches)" -gt "$r1" -a "$(link_stat 2 fetches)" = "$r2"
echo 0 >$P/replica_prefer_rdma
r1=$(link_stat 1 fetches) r2=$(link_stat 2 fetches)
check "layer14 on link 0 by name, replica_prefer_rdma=0: $(rows 100000) rows exact" \
	run "${fc14[@]}" --table layer14 --count "$(rows 100000)" --batch 4096,288 --timeout-ms 30000 --seed 2
check "both transports answered ($(($(link_stat 1 fetches) - r1)) by RDMA, $(($(link_stat 2 fetches) - r2)) by TCP)" \
	test "$(link_stat 1 fetches)" -gt "$r1" -a "$(link_stat 2 fetches)" -gt "$r2"
echo 1 >$P/replica_prefer_rdma
check "layer14 on the RDMA link by name: exact" \
	run "${fc14[@]}" --table layer14 --link 1 --count "$(rows 20000)" --batch 4096 --seed 3
check "layer14 on the TCP link by name: exact" \
	run "${fc14[@]}" --table layer14 --link 2 --count "$(rows 20000)" --batch 4096 --seed 4

# --- by digest alone the file names two tables
dmesg_mark
check "by digest alone on link 0: ENOTUNIQ" \
	run "${fc1[@]}" --sha256 "$SUM" --rows-list 0 --expect-errno ENOTUNIQ
check "... and the log names both tables" \
	sh -c "dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q \"'layer1' and .*'layer14'\\|'layer14' and .*'layer1'\""
check "by digest alone on link 1: ENOTUNIQ" \
	run "${fc1[@]}" --sha256 "$SUM" --link 1 --rows-list 0 --expect-errno ENOTUNIQ
check "by name and digest on link 0: exact" \
	run "${fc14[@]}" --table layer14 --sha256 "$SUM" --count 20000 --batch 288 --seed 5
check "a local copy whose tensors under that name are the other table's: EBADMSG" \
	env ENGRAM_RDMA_LOCAL_CHECK=sha256 "${fc1[@]}" --table layer1 --local "$F" \
	--local-tensor layers.14.engram.embed --rows-list 0 --expect-errno EBADMSG
check "... and with its own tensors it is taken" \
	env ENGRAM_RDMA_LOCAL_CHECK=sha256 "${fc1[@]}" --table layer1 --local "$F" \
	--local-tensor layers.1.engram.embed --count 2000 --batch 288 --seed 11

# --- one tensor under two names: replicas of one table
"$ENGRAMCTL" load "$F" --tensor layers.1.engram.embed --name alias1 >/dev/null
check "alias1 (layer 1 again) loads" test "$(table_state alias1)" = ready
grouped() { test "$("$ENGRAMCTL" link tables | grep '^layer1 ' | grep -o 'as alias1' | wc -l)" = 2; }
check "link tables shows alias1 as layer1 on both links: one table" wait_for 10 grouped
check "alias1 on link 0: layer 1's rows, exact" \
	run "${fc1[@]}" --table alias1 --count "$(rows 50000)" --batch 288,4096 --seed 6

# --- a verify that finds the pinned bytes changed: that table stops serving
"${fc1[@]}" --table layer1 --count 2000000 --batch 288,4096 --timeout-ms 5000 \
	--duration-s "$(slow 6)" --seed 12 >"$ENGRAM_TEST_TMP/l0" 2>&1 &
l0=$!
"${fc1[@]}" --table alias1 --link 1 --count 2000000 --batch 288 --timeout-ms 5000 \
	--local "$F" --local-tensor layers.1.engram.embed --expect-fallbacks 1 \
	--duration-s "$(slow 6)" --seed 13 >"$ENGRAM_TEST_TMP/l1" 2>&1 &
l1=$!
sleep "$(slow 2)"
dmesg_mark
echo 1 >$P/fault_verify_mismatch
out=$("$ENGRAMCTL" verify alias1 2>&1)
rc=$?
diag "verify: $out"
check "a verify that finds a mismatch exits 1 and says the table is no longer served" \
	test $rc -eq 1 -a -n "$(grep 'verify MISMATCH: no longer served' <<<"$out")"
check "alias1 is failed (EBADMSG)" \
	test "$(table_state alias1) $(table_field alias1 error)" = "failed $(python3 -c 'import errno; print(errno.EBADMSG)')"
check "the kernel log says so" sh -c "dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'table alias1: verify found .* not served any more'"
wait $l0
rc0=$?
wait $l1
rc1=$?
sed 's/^/# layer1 on link 0: /' "$ENGRAM_TEST_TMP/l0"
sed 's/^/# alias1 on link 1: /' "$ENGRAM_TEST_TMP/l1"
check "layer 1 on link 0 throughout: every fetch exact, none failed (the healthy entries took them)" \
	test $rc0 -eq 0
check "alias1 on its link: exact, from the host and then from libengram's local copy" \
	test $rc1 -eq 0
check "the verify failure is counted" test "$(stat_global verify_failures)" -ge 1
check "a failed table loads again under its name" \
	sh -c "'$ENGRAMCTL' load '$F' --tensor layers.1.engram.embed --name alias1 >/dev/null"
check "... ready" test "$(table_state alias1)" = ready

# --- a name reloaded with the other tensor under an open link-0 handle
"${fc14[@]}" --table layer14 --count 2000000 --batch 288 --timeout-ms 2000 --tolerate \
	--duration-s "$(slow 8)" --seed 7 >"$ENGRAM_TEST_TMP/loop" 2>&1 &
loop=$!
sleep "$(slow 2)"
"$ENGRAMCTL" unload layer14 >/dev/null
"$ENGRAMCTL" load "$F" --tensor layers.1.engram.embed --name layer14 >/dev/null
check "layer14 is now layer 1's tensor" test "$(table_field layer14 weight_offset)" = "$W1"
wait $loop
rc=$?
sed 's/^/# loop: /' "$ENGRAM_TEST_TMP/loop"
check "the handle opened on the old layer14 never returned the new one's rows (bad 0)" \
	test $rc -eq 0
check "... and its fetches failed once the table was gone" \
	grep -Eq 'tolerated [1-9]' "$ENGRAM_TEST_TMP/loop"
check "a new open of layer14 on link 0 gets layer 1's tensor, exact" \
	run "${fc1[@]}" --table layer14 --count 20000 --batch 4096 --seed 8
"$ENGRAMCTL" unload layer14 >/dev/null
"$ENGRAMCTL" unload alias1 >/dev/null

# --- a smaller sibling: a row past its end is never the larger one's
python3 - "$G" <<'PY' || bail "siblings file"
import json, struct, sys
# small: 1,000 rows, big: 5,000 rows, in one file; row r of table t is a
# pure function of (t, r), so the file is the same on every run.
tables = {"small": 1000, "big": 5000}
hdr, blobs, off = {}, [], 0
for t, (name, rows) in enumerate(tables.items()):
    w = bytes((t * 37 + r * 7 + c) & 0xff for r in range(rows) for c in range(256))
    s = bytes((t * 11 + r * 3 + c) & 0x7f for r in range(rows) for c in range(8))
    for kind, data, shape, dt in (("weight", w, [rows, 256], "F8_E4M3"),
                                  ("scale", s, [rows, 8], "F8_E8M0")):
        hdr["%s.%s" % (name, kind)] = {"dtype": dt, "shape": shape,
                                       "data_offsets": [off, off + len(data)]}
        blobs.append(data)
        off += len(data)
h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
PY
"$ENGRAMCTL" load "$G" --tensor small --name small >/dev/null
"$ENGRAMCTL" load "$G" --tensor big --name big >/dev/null
check "small (1,000 rows) and big (5,000 rows) load from one file" \
	test "$(table_state small) $(table_state big)" = "ready ready"
fcs=("$CHECK" --file "$G" --weight-offset "$(table_field small weight_offset)"
	--scale-offset "$(table_field small scale_offset)" --table small)
check "small on link 0: row 1000 is past its end (ERANGE), never big's row" \
	run "${fcs[@]}" --rows-list 0,999,1000 --expect-errno ERANGE
check "small on link 0: its 1,000 rows exact" \
	run "${fcs[@]}" --rows-total 1000 --count 5000 --batch 288 --seed 9

# --- hosts that cannot say where the tensors are (version 3)
"$ENGRAMCTL" load "$F" --tensor layers.14.engram.embed --name layer14 >/dev/null
echo 3 >$P/protocol_version
"$ENGRAMCTL" link del 1 && "$ENGRAMCTL" link del 2
L3=$("$ENGRAMCTL" link add "$LA@$IP")
T3=$("$ENGRAMCTL" link add "$LT@$IP")
v3_up() { test "$(link_field "$L3" protocol) $(link_field "$T3" protocol)" = "3 3"; }
check "the links come back at version 3" wait_for 30 v3_up
check "layer1 on the named link $L3 by name: exact" \
	wait_fetchable 30 --link "$L3" --timeout-ms 10000
dmesg_mark
check "layer1 on link 0 while its host lists two tables of the file it cannot tell apart: ENOTUNIQ" \
	run "${fc1[@]}" --table layer1 --rows-list 0 --expect-errno ENOTUNIQ
check "... and the log says to open it on a link" \
	sh -c "dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'below protocol version 4'"
"$ENGRAMCTL" unload layer14 >/dev/null
check "with one table of the file there, layer1 on link 0 is exact" wait_for 20 \
	"${fc1[@]}" --table layer1 --count 20000 --batch 288,4096 --seed 10
echo 4 >$P/protocol_version

"$ENGRAMCTL" unload layer1 >/dev/null
"$ENGRAMCTL" unload small >/dev/null
"$ENGRAMCTL" unload big >/dev/null
check "the kernel log is clean" kmsg_clean
check "the module unloads" module_unload
check "the module loads again" module_load
done_testing
