#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Fifty load/unload cycles leave nothing behind: no page reference (the file
# drops out of the page cache), no slab growth, no unevictable pages.
# timeout: 400
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/leak.safetensors
make_table "$F" 32000 --seed 11 --pad-before 3 --pad-after 1 || bail "mktable"

# Warm up once so first-use allocations (crypto tfm, workqueue) are not counted.
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name warm >/dev/null && "$ENGRAMCTL" unload warm
drop_caches
slab0=$(meminfo Slab)
unevict0=$(meminfo Unevictable)
fails=0
for i in $(seq 1 50); do
	if ! "$ENGRAMCTL" load "$F" --tensor $PREFIX --name leak >/dev/null 2>&1 ||
	   ! "$ENGRAMCTL" unload leak; then
		fails=$((fails + 1))
		[ $fails -gt 3 ] && break
	fi
done
check "50 load/unload cycles all succeed ($fails failed)" test $fails -eq 0
drop_caches
slab1=$(meminfo Slab)
unevict1=$(meminfo Unevictable)
diag "Slab ${slab0} -> ${slab1}, Unevictable ${unevict0} -> ${unevict1}"
check "no page reference left (file not resident after drop_caches)" test "$(resident "$F")" -eq 0
check "slab back to baseline (within 2 MiB)" test $((slab1 - slab0)) -le $((2 << 20))
check "Unevictable back to baseline" test $((unevict1 - unevict0)) -le $((1 << 20))
check "no table and no pinned bytes in stats" \
	test "$(stat_global tables):$(stat_global pinned_bytes)" = 0:0
check "the file is writable" writable "$F"
done_testing
