#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Shards in one guest (rxe loopback, and TCP): one file loaded as two row
# ranges under two names, each pinning only the pages of its rows, is
# fetched by its SHA-256 on no link.  Each row goes to a link whose catalog
# holds it; the rows of both shards in one fetch land at their places
# (protocol version 3), over RDMA and TCP, into one range or several,
# exact, and each shard's counters grow.  A fetch within one shard goes as
# runs of rows, as to any host.  A row no host holds ends the fetch before
# anything is sent (ENXIO, ROW_NOT_HELD, its position, the buffer
# untouched); a host asked for a row it does not hold refuses it the same
# way; the next fetch works.  With protocol_version=2 the shards leave the
# catalog and a whole copy of the file serves alone.  A hostile shard
# host's keys reach only its own rows of a fetch that alternates between
# it and another host.  In make check on the debug kernel only (a 6.12),
# for the lines only it reaches, KASAN and lockdep; the three-guest
# replicas run covers shards on Debian's 6.12.
# timeout: 900
# kernels: debug
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
HOSTILE=$TOP/selftests/guest/rdma_hostile
F=$SCRATCH/shards.safetensors
ROWS=120000
HALF=60000
P=/sys/module/engram_rdma/parameters
LA=rdma://$IP:18731
LT=tcp://$IP:18732

make_table "$F" $ROWS --seed 73 --pad-before 3 || bail "mktable"
FILE_BYTES=$(stat -c %s "$F")
module_unload || bail "rmmod"
# Both transports take parts by load: no preference for RDMA (t_74_identity's).
module_load "listen=$LA,$LT" "remote=$LA@$IP,$LT@$IP" statlog_s=86400 replica_prefer_rdma=0 ||
	bail "insmod with an RDMA and a TCP listener and a link to each"
check "shard sa (rows 0-$((HALF - 1))) loads" \
	"$ENGRAMCTL" load "$F" --tensor $PREFIX --name sa --rows 0-$((HALF - 1)) --no-progress
check "shard sb (rows $HALF-$((ROWS - 1))) loads" \
	"$ENGRAMCTL" load "$F" --tensor $PREFIX --name sb --rows $HALF-$((ROWS - 1)) --no-progress
check "both are ready" test "$(table_state sa) $(table_state sb)" = "ready ready"
SHA=$(table_field sa sha256)
check "both have the file's SHA-256" test "$(table_field sb sha256)" = "$SHA"
pa=$(table_field sa pinned_bytes)
pb=$(table_field sb pinned_bytes)
check "each pins about half the file ($pa and $pb of $FILE_BYTES bytes)" \
	test $((pa * 10)) -gt $((FILE_BYTES * 4)) -a $((pa * 10)) -lt $((FILE_BYTES * 6)) \
	-a $((pb * 10)) -gt $((FILE_BYTES * 4)) -a $((pb * 10)) -lt $((FILE_BYTES * 6))
check "table list -j: the rows each holds" \
	test "$(table_field sa held_first) $(table_field sa held_rows) $(table_field sb held_first) $(table_field sb held_rows)" = \
	"0 $HALF $HALF $((ROWS - HALF))"

WOFF=$(table_field sa weight_offset)
SOFF=$(table_field sa scale_offset)
FC=("$CHECK" --sha256 "$SHA" --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
run_kept() { local out rc; out=$(ENGRAM_RDMA_KEEP_KEYS=1 "${FC[@]}" "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'; return $rc; }
# refused RC OUT: fetch_check passed (RC 0) and its output says the row at
# position 1 was not held.
refused() { test "$1" -eq 0 && grep -q 'row_not_held, bad_index 1' <<<"$2"; }
# lt_stat LINK NAME KEY: the counter KEY of table NAME on link LINK (0 when absent).
lt_stat() {
	"$ENGRAMCTL" -j stats | jget "sum(t.get('$3', 0) for l in d['links'] if l.get('id') == $1 for t in l.get('tables', []) if t['name'] == '$2')"
}
# host_stat NAME KEY: the host's counter KEY of its table NAME.
host_stat() {
	"$ENGRAMCTL" -j stats | jget "sum(t.get('$2', 0) for t in d['tables'] if t['name'] == '$1')"
}
# held LINK NAME: "FIRST ROWS" of table NAME in link LINK's catalog.
held() {
	"$ENGRAMCTL" -j link tables | jget "' '.join(str(e[k]) for t in d for e in t['links'] if e['link'] == $1 and e['name'] == '$2' for k in ('held_first', 'held_rows'))"
}
both_up() {
	wait_fetchable 30 --rows-list 0,$((ROWS - 1)) --timeout-ms 10000 &&
		test "$(held 1 sb)" = "$HALF $((ROWS - HALF))" -a "$(held 2 sa)" = "0 $HALF"
}
check "both links come up and list both shards with their rows" both_up
diag "link tables: $("$ENGRAMCTL" link tables 2>&1)"
check "link tables names the rows each link holds" \
	sh -c "'$ENGRAMCTL' link tables | grep -q 'rows 0-$((HALF - 1))'"

# --- rows of both shards in one fetch: each goes where it is held
echo 1024 >$P/replica_split_rows
h0a=$(host_stat sa lookups) h0b=$(host_stat sb lookups) t0=$(link_stat 2 fetches)
check "100,000 rows over both shards, batches of 288 and 49,152, two processes: exact" \
	run --count 100000 --batch 288,49152 --procs 2 --timeout-ms 60000 --seed 1
check "the host served both shards ($(($(host_stat sa lookups) - h0a)) and $(($(host_stat sb lookups) - h0b)) requests)" \
	test "$(host_stat sa lookups)" -gt "$h0a" -a "$(host_stat sb lookups)" -gt "$h0b"
check "each shard counts its fetches on the GPU-node side (sa $(($(lt_stat 1 sa fetches) + $(lt_stat 2 sa fetches))), sb $(($(lt_stat 1 sb fetches) + $(lt_stat 2 sb fetches))))" \
	test $(($(lt_stat 1 sa fetches) + $(lt_stat 2 sa fetches))) -gt 0 -a \
	$(($(lt_stat 1 sb fetches) + $(lt_stat 2 sb fetches))) -gt 0
check "the TCP link took parts with row places ($(($(link_stat 2 fetches) - t0)) fetches)" \
	test "$(link_stat 2 fetches)" -gt "$t0"
check "... and fetches of 49,152 rows were split" test "$(stat_global splits)" -gt 0
check "rows of both shards into three destination ranges: exact" \
	run --count "$(rows 20000)" --batch 4096 --ranges 3 --timeout-ms 60000 --seed 2
check "at a stride of 320 bytes: exact" \
	run --count "$(rows 20000)" --batch 4096 --stride 320 --timeout-ms 60000 --seed 3
# Kept keys: parts into the caller's buffer land through its kept windows
# (rows of one shard: runs, no bounce), gathered ones through a bounce
# buffer's per-fetch keys; also on the debug kernel, where KASAN and
# lockdep watch kept.c.
k0=$(stat_global kept_registrations)
check "kept keys: both shards, 3 ranges at a stride of 320 bytes, exact" \
	run_kept --count 8192 --batch 4096 --ranges 3 --stride 320 --timeout-ms 60000 --seed 13
check "kept keys: shard sa's rows, split over two links, two processes, exact" \
	run_kept --count 20000 --batch 4096,288 --ranges 3 --stride 320 --rows-below $HALF \
	--procs 2 --timeout-ms 60000 --seed 14
check "kept keys: windows were registered ($(($(stat_global kept_registrations) - k0)))" \
	test "$(stat_global kept_registrations)" -gt "$k0"
echo 0 >$P/replica_split_rows
check "not split (replica_split_rows=0): still one part per shard, exact" \
	run --count 98304 --batch 49152 --timeout-ms 60000 --seed 4

# --- rows of one shard: runs of rows, as to any host
b0=$(($(lt_stat 1 sb fetches) + $(lt_stat 2 sb fetches)))
check "rows of shard sa only: exact" \
	run --rows-below $HALF --count "$(rows 20000)" --batch 288,4096 --timeout-ms 60000 --seed 5
check "... and shard sb took none of them" \
	test $(($(lt_stat 1 sb fetches) + $(lt_stat 2 sb fetches))) = "$b0"

# --- a host asked for a row it does not hold
r0=$(host_stat sa refused_row_not_held)
out=$("$CHECK" --table sa --link 1 --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF" \
	--rows-total $ROWS --rows-list 5,$((HALF + 10)) --timeout-ms 10000 --expect-errno ENXIO \
	2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
check "shard sa opened on link 1, a row of sb: ENXIO, row_not_held at position 1" \
	refused $rc "$out"
check "the connection serves on: shard sa's rows on link 1, exact" \
	run --table sa --link 1 --rows-below $HALF --count 4096 --batch 1024 --timeout-ms 10000
check "the host counts the refusal ($(host_stat sa refused_row_not_held) from $r0)" \
	test "$(host_stat sa refused_row_not_held)" -gt "$r0"

# --- a row no host holds
check "shard sb unloads" "$ENGRAMCTL" unload sb
check "shard sc (rows $((HALF + 10000))-$((ROWS - 1))) loads" \
	"$ENGRAMCTL" load "$F" --tensor $PREFIX --name sc --rows $((HALF + 10000))-$((ROWS - 1)) \
	--no-progress
gap_seen() { test "$(held 1 sc)" = "$((HALF + 10000)) $((ROWS - HALF - 10000))" -a -z "$(held 1 sb)"; }
check "the links see sc and no longer sb" wait_for 15 gap_seen
out=$(run --rows-list 5,$((HALF + 5)),$((ROWS - 1)) --timeout-ms 10000 --expect-errno ENXIO \
	--settle-ms 200)
rc=$?
echo "$out"
check "a fetch with a row in the gap: ENXIO, row_not_held at position 1, nothing written" \
	refused $rc "$out"
check "the next fetch, of rows held, is exact" \
	run --rows-list 5,$((ROWS - 1)),$((HALF + 10000)),$((HALF - 1)) --timeout-ms 10000

# --- a hostile shard host: its keys must reach its own rows and no other
# part's.  A raw peer (rdma_hostile) lists rows HALF to HALF + 9,999 (the
# gap) as a version 3 host, and writes 0xee over all it was registered
# before it places its rows: were its part registered over the span of
# the fetch's places, sa's rows between its own would be overwritten.
timeout 120 "$HOSTILE" --addr "$IP" --port-a 18733 --table sh --rows $ROWS \
	--shard "$F,$WOFF,$SOFF,$HALF,10000" --sha256 "$SHA" --linger-ms 40000 \
	>"$SCRATCH/hostile.out" 2>&1 &
hpid=$!
wait_for 20 grep -q "rdma_hostile: ready" "$SCRATCH/hostile.out" ||
	{ sed 's/^/# /' "$SCRATCH/hostile.out"; bail "the hostile shard host listens"; }
hl=$("$ENGRAMCTL" link add "rdma://$IP:18733@$IP" 2>&1)
hostile_seen() { test "$(held "$hl" sh)" = "$HALF 10000"; }
check "a link to a hostile version 3 host of rows $HALF-$((HALF + 9999)) (link $hl)" \
	wait_for 30 hostile_seen
LIST=$(for i in $(seq 0 47); do printf '%d,%d,' $((i * 997)) $((HALF + i * 199)); done)
check "rows alternating between shard sa and the hostile host's: exact" \
	run --rows-list "${LIST%,}" --timeout-ms 20000
check "... and again, 3 ranges at a stride of 320 bytes: exact" \
	run --rows-list "${LIST%,}" --ranges 3 --stride 320 --timeout-ms 20000
"$ENGRAMCTL" link del "$hl"
wait "$hpid"
sed 's/^/# /' "$SCRATCH/hostile.out"
check "the hostile host answered them" grep -Eq "^rdma_hostile: shard: [1-9][0-9]* requests" \
	"$SCRATCH/hostile.out"

# --- a peer below version 3 sees no shard
PV=$(cat $P/protocol_version)
echo 2 >$P/protocol_version
"$ENGRAMCTL" link del 1 && "$ENGRAMCTL" link del 2
check "links again at protocol version 2" \
	sh -c "'$ENGRAMCTL' link add '$LA@$IP' && '$ENGRAMCTL' link add '$LT@$IP'"
v2_up() {
	test "$("$ENGRAMCTL" -j link show | jget "sorted(l['state'] for l in d)")" = "['up', 'up']"
}
check "both come up" wait_for 30 v2_up
# held_any NAME: the rows held of table NAME in any link's catalog.
held_any() {
	"$ENGRAMCTL" -j link tables | jget "' '.join(str(e['held_rows']) for t in d for e in t['links'] if e['name'] == '$1')"
}
check "their catalogs list no shard" test -z "$(held_any sa)$(held_any sc)"
check "the table by its SHA-256 is not found on any link (ENOENT)" \
	run --count 1 --timeout-ms 5000 --expect-errno ENOENT
check "a whole copy loads" "$ENGRAMCTL" load "$F" --tensor $PREFIX --name w --no-progress
check "the links see it" wait_fetchable 30 --timeout-ms 10000
check "$(rows 20000) rows over the whole table at version 2: exact" \
	run --count "$(rows 20000)" --batch 288,4096 --timeout-ms 60000 --seed 6
echo "$PV" >$P/protocol_version

check "unload and rmmod are clean" \
	sh -c "'$ENGRAMCTL' unload sa && '$ENGRAMCTL' unload sc && '$ENGRAMCTL' unload w && rmmod engram_rdma"
check "no warning in the kernel log" kmsg_clean
check "the module loads again" module_load
done_testing
