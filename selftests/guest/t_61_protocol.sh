#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Wire protocol versions and the RESPONSE that invalidates (one guest, rxe
# loopback, host and client at once):
# - protocol_version takes 1 to 6 only, with a log line for anything else;
# - by default a link negotiates version 6 (drain; kept keys since 5; tensor offsets:
#   t_74_identity; shards since 3: t_73_shards), which
#   keeps what version 2 brought: the server sends each RESPONSE
#   as a SEND with invalidate of the first range's key, and the client
#   counts one remote_invalidations per fetch (one range or several; with
#   several, the others are still invalidated locally; a refusal too) and
#   posts no LOCAL_INV for a fetch of one range (fault_client_inv_fail
#   stays armed through one, fires on a fetch of two); rows exact; a buffer
#   whose keys are kept posts no LOCAL_INV even for two ranges, and is
#   invalidated by no RESPONSE;
# - a drained table is listed as draining, still fetched on the named link,
#   and an open on no link finds no host to send to (EAGAIN); undrained,
#   it is ready again;
# - with protocol_version=4 such a buffer is registered per fetch again,
#   and a draining table is left out of the catalog;
# - with protocol_version=1 on both sides the link negotiates 1, nothing is
#   invalidated remotely, rows are exact, and a fetch of one range posts a
#   LOCAL_INV again: version 1 is what an older peer speaks (test_wire.c
#   checks the negotiation between 1 and 1-2).
# timeout: 300
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/protocol.safetensors
ROWS=70000
P=/sys/module/engram_rdma/parameters

make_table "$F" $ROWS --seed 61 || bail "mktable"
module_unload || bail "rmmod"

dmesg_mark
check "protocol_version=7 is refused at load" sh -c "! insmod $MODULE protocol_version=7 2>/dev/null"
check "and says why" sh -c "dmesg | tail -n 20 | grep -q 'protocol_version=7: want 1-6'"
module_load "listen=rdma://$IP:18515" || bail "insmod with listen="
check "protocol_version is 6 by default" test "$(cat $P/protocol_version)" = 6
check "protocol_version refuses 0 at run time" sh -c "! echo 0 2>/dev/null > $P/protocol_version"
check "and 7" sh -c "! echo 7 2>/dev/null > $P/protocol_version"
check "and is still 6" test "$(cat $P/protocol_version)" = 6
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name proto >/dev/null 2>&1
check "the table loads" test "$(table_state proto)" = ready
WOFF=$(table_field proto weight_offset)
SOFF=$(table_field proto scale_offset)

FC=("$CHECK" --table proto --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 20000)
run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
run_kept() { local out rc; out=$(ENGRAM_RDMA_KEEP_KEYS=1 "${FC[@]}" "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'; return $rc; }

# --- version 6: a RESPONSE invalidates, as from version 2 on -------------------
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "it negotiated version 6" test "$(link_field "$ID" protocol)" = 6
check "link list shows it" sh -c "'$ENGRAMCTL' link list | grep -q '^link $ID: .* protocol 6'"
check "and link show" sh -c "'$ENGRAMCTL' link show $ID | grep -Eq '^ +protocol +6$'"
ri0=$(link_stat "$ID" remote_invalidations) f0=$(link_stat "$ID" fetches)
check "200 fetches of one range (1 and 288 rows) are exact" \
	run --link "$ID" --count 28900 --batch 1,288 --seed 1
ri1=$(link_stat "$ID" remote_invalidations) f1=$(link_stat "$ID" fetches)
check "each RESPONSE invalidated its fetch's key ($((ri1 - ri0)) of $((f1 - f0)) fetches)" \
	test $((ri1 - ri0)) -eq $((f1 - f0)) -a $((f1 - f0)) -ge 200
check "fetches of 3 ranges are exact (the other keys invalidated locally)" \
	run --link "$ID" --count 12000 --batch 3000 --ranges 3 --stride 300 --seed 2
ri2=$(link_stat "$ID" remote_invalidations) f2=$(link_stat "$ID" fetches)
check "their first keys went with the RESPONSE ($((ri2 - ri1)) of $((f2 - f1)))" \
	test $((ri2 - ri1)) -eq $((f2 - f1)) -a $((f2 - f1)) -eq 4
ri2=$(link_stat "$ID" remote_invalidations)
rr2=$(link_stat "$ID" refused_row_out_of_range)
check "a refused fetch (a row past the end) fails with ERANGE" \
	run --link "$ID" --rows-list 0,5,$ROWS --expect-errno ERANGE
check "its RESPONSE invalidated its key too (remote_invalidations +1, refusals +1)" \
	test "$(link_stat "$ID" remote_invalidations)" -eq $((ri2 + 1)) -a \
	"$(link_stat "$ID" refused_row_out_of_range)" -eq $((rr2 + 1))
check "then fetches are exact" run --link "$ID" --count 2880 --batch 288 --seed 3
# A fetch of one range posts no LOCAL_INV: a failing post of one would
# fail it and use the knob up; a fetch of two ranges does both.
echo 1 > $P/fault_client_inv_fail
check "with the invalidation post failing, a fetch of one range is exact" \
	run --link "$ID" --count 288 --batch 288 --seed 4
check "and left the knob unused: it posted no LOCAL_INV" test "$(cat $P/fault_client_inv_fail)" = 1
check "a fetch of two ranges posts one, and fails with ECONNRESET" \
	run --link "$ID" --count 288 --batch 288 --ranges 2 --expect-errno ECONNRESET
check "the knob was used" test "$(cat $P/fault_client_inv_fail)" = 0
check "the link comes back" wait_fetchable 30 --link "$ID" --timeout-ms 10000
# Kept keys: nothing is invalidated, locally or by the RESPONSE.
ri3=$(link_stat "$ID" remote_invalidations) k3=$(link_stat "$ID" kept_registrations)
echo 1 > $P/fault_client_inv_fail
check "kept keys: fetches of two ranges are exact with the invalidation post failing" \
	run_kept --link "$ID" --count 2880 --batch 288 --ranges 2 --seed 6
check "and left the knob unused: no LOCAL_INV" test "$(cat $P/fault_client_inv_fail)" = 1
echo 0 > $P/fault_client_inv_fail
check "no RESPONSE invalidated a key, windows were kept ($(($(link_stat "$ID" kept_registrations) - k3)))" \
	test "$(link_stat "$ID" remote_invalidations)" -eq "$ri3" -a \
	"$(link_stat "$ID" kept_registrations)" -gt "$k3"

# --- drain: the catalog says so, and only a named link still sends ------------
# cat_state: proto's state in the link's catalog, "" when it lists none.
cat_state() {
	"$ENGRAMCTL" -j link tables |
		jget "' '.join(e['state'] for t in d for e in t['links'] if e['link'] == $ID and e['name'] == 'proto')"
}
cat_is() { test "$(cat_state)" = "$1"; }
# then_cat STATE COMMAND...: COMMAND, then the catalog shows STATE.
then_cat() { local st=$1; shift; "$@" && wait_for 10 cat_is "$st"; }
check "table drain proto" "$ENGRAMCTL" table drain proto
check "the link's catalog lists it as draining" wait_for 10 cat_is draining
check "table drain of no such table: refused" sh -c "! '$ENGRAMCTL' table drain nosuch 2>/dev/null"
check "a fetch on the named link: exact" run --link "$ID" --count 2880 --batch 288 --seed 8
check "an open on no link: no host to send to (EAGAIN)" \
	run --count 288 --batch 288 --expect-errno EAGAIN
check "the host saw none in flight, draining" \
	test "$(table_field proto inflight) $(table_field proto draining)" = "0 True"
prom_draining() {
	"$ENGRAMCTL" stats proto --prometheus | grep -qx 'engram_rdma_table_draining{table="proto"} 1'
}
check "stats --prometheus says it drains" prom_draining
check "table undrain proto: ready again in the catalog" \
	then_cat ready "$ENGRAMCTL" table undrain proto
check "... and an open on no link fetches exact" run --count 2880 --batch 288 --seed 9

# --- version 4: kept keys are not spoken, each fetch registers its own -------
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
echo 4 > $P/protocol_version
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "with protocol_version=4 the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "it negotiated version 4" test "$(link_field "$ID" protocol)" = 4
ri4=$(link_stat "$ID" remote_invalidations) f4=$(link_stat "$ID" fetches)
check "a buffer registered to keep its keys: fetches exact" \
	run_kept --link "$ID" --count 2880 --batch 288 --seed 7
check "each registered per fetch, invalidated by its RESPONSE, none kept" \
	test $(($(link_stat "$ID" remote_invalidations) - ri4)) -eq \
	$(($(link_stat "$ID" fetches) - f4)) -a "$(link_stat "$ID" kept_registrations)" = 0
check "drained, the table is left out of a version 4 catalog" \
	then_cat "" "$ENGRAMCTL" table drain --all
check "undrained, it is listed again" then_cat ready "$ENGRAMCTL" table undrain --all

# --- version 1 on both sides -------------------------------------------------
"$ENGRAMCTL" link del "$ID" >/dev/null 2>&1
echo 1 > $P/protocol_version
ID=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
check "with protocol_version=1 the link comes up" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "it negotiated version 1" test "$(link_field "$ID" protocol)" = 1
check "fetches of one and of 3 ranges are exact" \
	sh -c "$(printf '%q ' "${FC[@]}") --link $ID --count 28900 --batch 1,288 --seed 4 >/dev/null &&
	$(printf '%q ' "${FC[@]}") --link $ID --count 6000 --batch 3000 --ranges 3 --stride 300 --seed 5 >/dev/null"
check "nothing was invalidated remotely" test "$(link_stat "$ID" remote_invalidations)" = 0
check "no transport error" test "$(link_stat "$ID" transport_errors)" = 0
echo 1 > $P/fault_client_inv_fail
check "in version 1 a fetch of one range posts a LOCAL_INV: the failing post fails it" \
	run --link "$ID" --count 288 --batch 288 --expect-errno ECONNRESET
check "and used the knob" test "$(cat $P/fault_client_inv_fail)" = 0
check "the link comes back" wait_fetchable 30 --link "$ID" --timeout-ms 10000
check "still at version 1" test "$(link_field "$ID" protocol)" = 1
echo 6 > $P/protocol_version

check "unload and rmmod are clean" sh -c "'$ENGRAMCTL' unload proto && rmmod engram_rdma"
check "the module loads again" module_load
done_testing
