#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A table of more than 256 MiB loads from a safetensors file: its SHA-256 is
# the file's, verify passes, the pages are pinned (resident after
# drop_caches, writers get ETXTBSY, no anonymous copy), and unload gives
# everything back.
# timeout: 600
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/big.safetensors
# 1,020,000 rows x 264 bytes = 269 MB, with odd-sized tensors around the table.
make_table "$F" 1020000 --seed 7 --pad-before 13 --pad-after 7 || bail "mktable"
size=$(stat -c %s "$F")
want=$(sha256sum "$F" | cut -d' ' -f1)
diag "table file $size bytes, sha256 $want"

drop_caches
unevict0=$(meminfo Unevictable)
anon0=$(meminfo AnonPages)
out=$("$ENGRAMCTL" load "$F" --tensor $PREFIX --name big 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
check "engramctl load succeeds" test $rc -eq 0
check "engramctl load reports the SHA-256" grep -q "$want" <<<"$out"
anon1=$(meminfo AnonPages)
unevict_loaded=$(meminfo Unevictable)
diag "Unevictable while loaded: $unevict_loaded"
check "the table's pages sit on the unevictable list" \
	test $((unevict_loaded - unevict0)) -ge $((size / 10 * 9))

list=$("$ENGRAMCTL" -j list)
field() { jget "next(t['$1'] for t in d if t['name'] == 'big')" <<<"$list"; }
check "state is ready" test "$(field state)" = ready
check "sha256 equals sha256sum of the file" test "$(field sha256)" = "$want"
check "row count is the file's" test "$(field rows)" = 1020000
check "pinned bytes equal the file's pages" \
	test "$(field pinned_bytes)" = $(((size + PAGE - 1) / PAGE * PAGE))
meta=$(field meta_bytes)
diag "metadata $meta bytes for $size file bytes"
check "metadata is at most 0.5% of the file" test $((meta * 200)) -le "$size"
check "no anonymous copy (AnonPages grew $(((anon1 - anon0) >> 20)) MiB)" \
	test $((anon1 - anon0)) -lt $((size / 8))

drop_caches
check "pages stay resident through drop_caches" test "$(resident "$F")" -ge "$size"
check "opening the file for writing fails with ETXTBSY" write_denied "$F"
check "truncating the file is refused" sh -c "! truncate -s 0 '$F' 2>/dev/null"
check "file is unchanged" test "$(sha256sum "$F" | cut -d' ' -f1)" = "$want"

out=$("$ENGRAMCTL" verify big 2>&1)
rc=$?
echo "$out" | sed 's/^/# /'
check "engramctl verify passes" test $rc -eq 0
check "verify result is ok" test "$("$ENGRAMCTL" -j list | jget "d[0]['verify_result']")" = ok
check "list shows the table in text" sh -c "'$ENGRAMCTL' list | grep -q big"
check "a second load under the same name is refused" \
	sh -c "! '$ENGRAMCTL' load '$F' --tensor $PREFIX --name big 2>/dev/null"

check "engramctl unload succeeds" "$ENGRAMCTL" unload big
check "table is gone" test "$(table_state big)" = absent
check "file is writable again" writable "$F"
drop_caches
check "pages are released (nothing resident after drop_caches)" test "$(resident "$F")" -eq 0
unevict1=$(meminfo Unevictable)
diag "Unevictable before $unevict0, after $unevict1"
check "Unevictable back to its baseline" test $((unevict1 - unevict0)) -le $((1 << 20))

# Unloading during a verify cancels it without counting a verify failure.
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name big >/dev/null 2>&1
vf0=$(stat_global verify_failures)
"$ENGRAMCTL" verify big >/dev/null 2>&1 &
pid=$!
check "verify is seen in progress" wait_state big verifying 20
check "unload cancels a verify in progress" "$ENGRAMCTL" unload big
wait $pid
check "a cancelled verify is not counted as a failure" test "$(stat_global verify_failures)" -eq "$vf0"

# Cancel a load half-way through with engramctl unload.
drop_caches
unevict0=$(meminfo Unevictable)
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name cancelme >/dev/null 2>&1 &
pid=$!
check "load is seen in progress" wait_state cancelme loading 20
check "unload cancels a load in progress" "$ENGRAMCTL" unload cancelme
wait $pid
check "engramctl load reports the cancelled load as a failure" test $? -ne 0
check "cancelled table is gone" test "$(table_state cancelme)" = absent
check "file is writable after the cancel" writable "$F"
unevict1=$(meminfo Unevictable)
diag "Unevictable before the cancelled load $unevict0, after $unevict1"
check "readahead beyond the cancelled load's cursor is evictable again" \
	test $((unevict1 - unevict0)) -le $((1 << 20))

# Ctrl-C (SIGINT) in engramctl cancels its load.
drop_caches
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name sigint >/dev/null 2>&1 &
pid=$!
wait_state sigint loading 20
kill -INT $pid
wait $pid
rc=$?
check "engramctl exits 130 on SIGINT" test $rc -eq 130
check "SIGINT leaves no table behind" test "$(table_state sigint)" = absent
check "file is writable after SIGINT" writable "$F"
check "stats count the cancelled loads" test "$(stat_global loads_cancelled)" -ge 2

# Pinned pages stay out of ZONE_MOVABLE, where they would keep memory from
# being offlined (make check boots the 6.1 guest with movablecore=, make
# check-kernels the 5.10 one; any run can with
# ENGRAM_VM_APPEND=movablecore=768M).  Measured after drop_caches, which
# leaves only pinned (or mapped) file pages: the file pages left in the
# zone while the table is loaded, against none loaded.
# zone_pages ZONE FIELD...: the sum of those fields of that zone, in pages
zone_pages() {
	local z=$1
	shift
	awk -v z="$z" -v f=" $* " '$1 == "Node" { cur = $4; next }
		cur == z && index(f, " " $1 " ") { n += $2 } END { print n + 0 }' /proc/zoneinfo
}
movfile() { zone_pages Movable nr_zone_active_file nr_zone_inactive_file nr_zone_unevictable; }
if [ "$(zone_pages Movable present)" -gt 0 ]; then
	diag "ZONE_MOVABLE: $(zone_pages Movable present) pages"
	for how in fresh cached; do
		drop_caches
		base=$(movfile)
		if [ $how = cached ]; then
			cat "$F" >/dev/null
			diag "cached: $(($(movfile) - base)) of the file's pages in ZONE_MOVABLE before the load"
		fi
		"$ENGRAMCTL" load "$F" --tensor $PREFIX --name mov >/dev/null 2>&1
		check "$how: the table loads" test "$(table_state mov)" = ready
		drop_caches
		left=$(($(movfile) - base))
		check "$how: no pinned page in ZONE_MOVABLE ($left pages)" test $left -lt 256
		"$ENGRAMCTL" unload mov
	done
	dmesg | grep 'were read again outside it' | tail -1 | sed 's/^/# /'
	# The file's page cache is movable again once no table holds it.
	drop_caches
	base=$(movfile)
	cat "$F" >/dev/null
	check "after the unload the file's page cache may use ZONE_MOVABLE again" \
		test $(($(movfile) - base)) -gt 256
else
	diag "no ZONE_MOVABLE in this guest: boot it with movablecore= to test pinning there"
fi
done_testing
