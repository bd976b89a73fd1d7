#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Two tables load at once; rmmod with tables loaded and with a load in
# progress releases every page and the write denial.
# timeout: 600
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/two.safetensors
make_table "$F" 100000 --seed 13 --prefix layers.1.engram.embed \
	--prefix layers.14.engram.embed --pad-before 9 || bail "mktable"
want=$(sha256sum "$F" | cut -d' ' -f1)
# A fresh module: the module-wide counts below must not see an earlier
# test's tables.
module_unload || bail "rmmod"
module_load || bail "insmod"

drop_caches
"$ENGRAMCTL" load "$F" --tensor layers.1.engram.embed --name l1 >/dev/null 2>&1 &
p1=$!
"$ENGRAMCTL" load "$F" --tensor layers.14.engram.embed --name l14 >/dev/null 2>&1 &
p14=$!
wait $p1
r1=$?
wait $p14
r14=$?
check "two tables loading at once both succeed" test "$r1:$r14" = 0:0
check "both are ready" test "$(table_state l1):$(table_state l14)" = ready:ready
check "both carry the file's digest" \
	test "$(table_field l1 sha256):$(table_field l14 sha256)" = "$want:$want"
size=$(stat -c %s "$F")
check "module-wide pinned bytes count the shared file once" \
	test "$(stat_global pinned_bytes)" -eq $(((size + 4095) / 4096 * 4096))
check "their generations differ" test "$(table_field l1 generation)" != "$(table_field l14 generation)"

"$ENGRAMCTL" unload l1
drop_caches
check "unloading one keeps the other's pages resident" \
	test "$(resident "$F")" -ge "$(stat -c %s "$F")"
check "and keeps writes denied" write_denied "$F"
check "the other still verifies" "$ENGRAMCTL" verify l14
"$ENGRAMCTL" load "$F" --tensor layers.1.engram.embed --name l1 >/dev/null 2>&1

check "rmmod with two tables loaded" rmmod engram_rdma
check "the file is writable after rmmod" writable "$F"
drop_caches
check "no page stays pinned after rmmod" test "$(resident "$F")" -eq 0
check "module loads again" module_load

B=$SCRATCH/big.safetensors
make_table "$B" 1020000 --seed 7 --pad-before 13 --pad-after 7 || bail "mktable big"
drop_caches
"$ENGRAMCTL" load "$B" --tensor $PREFIX --name inflight >/dev/null 2>&1 &
pid=$!
check "a load is in progress" wait_state inflight loading 20
sleep 0.5
check "rmmod with a load in progress" timeout 60 rmmod engram_rdma
timeout 30 tail --pid=$pid -f /dev/null
check "engramctl load returns once the module is gone" sh -c "! kill -0 $pid 2>/dev/null"
wait $pid 2>/dev/null
check "the file is writable after rmmod mid-load" writable "$B"
drop_caches
check "no page stays pinned after rmmod mid-load" test "$(resident "$B")" -eq 0
check "module loads again" module_load
check "and works" "$ENGRAMCTL" list
done_testing
