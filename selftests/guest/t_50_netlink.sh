#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Bad requests sent straight to the kernel (bypassing engramctl) are refused
# with an errno and an extended-ack message, and the module stays usable.
# timeout: 200
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/nl.safetensors
make_table "$F" 1000 --seed 5 || bail "mktable"
size=$(stat -c %s "$F")
# Geometry of the generated file, as engramctl computes it.
geo=$("$ENGRAMCTL" -j load "$F" --tensor $PREFIX --name probe) || bail "load probe table"
woff=$(jget "d['weight_offset']" <<<"$geo")
soff=$(jget "d['scale_offset']" <<<"$geo")
"$ENGRAMCTL" unload probe
good="fd=$F rows=1000 woff=$woff soff=$soff wbytes=256 sbytes=8"
mkdir -p /run/engram-tmpfs
mount -t tmpfs none /run/engram-tmpfs
cp "$F" /run/engram-tmpfs/t

# expect ERRNO PHRASE CMD ATTR...: refused with that errno and message.
expect() {
	local errno=$1 phrase=$2 out
	shift 2
	out=$("$NL_RAW" "$@" 2>&1)
	if [[ $out == "error $errno "* && $out != "error $errno -" ]] && grep -qiF -- "$phrase" <<<"$out"; then
		ok "refused: ${*:1:3}... -> $out"
	else
		nok "'$*' refused with errno $errno and '$phrase'"
		diag "got: $out"
	fi
}

expect 22 "weight rows must be 256" load name=g1 $good wbytes=255
expect 22 "scale rows must be 8" load name=g1 $good sbytes=9
expect 22 "row count out of range" load name=g1 $good rows=0
expect 22 "out of range" load name=g1 $good rows=0x10000000000000
expect 34 "weight tensor ends past the file end" load name=g1 $good woff=$((size - 100))
expect 34 "scale tensor ends past the file end" load name=g1 $good soff=$((size - 7))
expect 34 "past the file end" load name=g1 $good woff=0xffffffffffffff00
expect 22 "overlap" load name=g1 $good soff=$((woff + 8))
expect 22 "length prefix" load name=g1 $good woff=0
expect 9 "not an open file" load name=g1 $good fd=num:999
expect 22 "not a regular file" load name=g1 $good fd=dir:/tmp
expect 9 "not open for reading" load name=g1 $good fd=wronly:/run/engram-tmpfs/t
expect 95 "page-cache read path" load name=g1 $good fd=/run/engram-tmpfs/t
expect 22 "missing" load name=g1 fd=$F rows=1000 woff=$woff soff=$soff wbytes=256
expect 22 "missing" load $good
expect 22 "1-63 characters" load name=bad/name $good
expect 22 "" load name=$(printf 'x%.0s' $(seq 1 80)) $good
expect 34 "" load name=g1 $good sha=0011
expect 22 "" load name=g1 $good bogus=1
expect 22 "" load u32name=5 $good
expect 2 "no table of that name" unload name=nosuch
expect 2 "no table of that name" verify name=nosuch
expect 2 "no table of that name" get name=nosuch
expect 22 "missing" unload
expect 22 "" stats bogus=1

exec 8>>"$SCRATCH/writer.safetensors"
cp "$F" "$SCRATCH/writer.safetensors"
expect 26 "open for writing" load name=g1 $good fd="$SCRATCH/writer.safetensors"
exec 8>&-

out=$("$NL_RAW" load name=g1 $good)
check "a good request through the same path is accepted ($out)" test "$out" = ok
check "the table becomes ready" wait_state g1 ready 60
expect 17 "exists" load name=g1 $good
check "STATS_GET do with a name answers for that table" test "$("$NL_RAW" stats name=g1)" = ok
expect 2 "no table of that name" stats name=nosuch
"$NL_RAW" load name=g2 $good >/dev/null
wait_state g2 ready 60
check "a TABLE_GET dump lists both tables" test "$("$NL_RAW" dump)" = "ok 2 messages"
check "a TABLE_GET dump filters by name" test "$("$NL_RAW" dump name=g2)" = "ok 1 messages"
"$ENGRAMCTL" unload g2

# A file larger than RAM would pin memory reclaim cannot get back: refused
# before a single page is read.  The file is sparse, so it costs no disk.
ram=$(meminfo MemTotal)
huge=$SCRATCH/huge.safetensors
rm -f "$huge"
truncate -s "$ram" "$huge"
hrows=$(((ram - 8) / 264))
hgood="fd=$huge rows=$hrows woff=8 soff=$((8 + hrows * 256)) wbytes=256 sbytes=8"
expect 12 "not enough RAM to pin" load name=huge $hgood
check "the refused huge table is not listed" test "$(table_state huge)" = absent
# A failed table of the same name survives a replacing load that is refused.
"$NL_RAW" load name=huge $good sha=$(printf '%064d' 0) >/dev/null
check "a load with a wrong digest ends failed" wait_state huge failed 60
expect 12 "not enough RAM to pin" load name=huge $hgood
check "the failed table and its reason survive the refused reload" \
	test "$(table_field huge error_msg | cut -c1-19)" = "SHA-256 mismatch: f"
"$ENGRAMCTL" unload huge
rm -f "$huge"
"$ENGRAMCTL" unload g1
check "stats count refused requests" test "$(stat_global requests_refused)" -ge 20
check "module is still usable: list works" "$ENGRAMCTL" list
umount /run/engram-tmpfs

# ramfs keeps files in RAM and owns the unevictable flag we would clear.
mkdir -p /run/engram-ramfs
mount -t ramfs none /run/engram-ramfs
cp "$F" /run/engram-ramfs/t
expect 95 "kept in RAM already" load name=g1 $good fd=/run/engram-ramfs/t
umount /run/engram-ramfs

# A very long path is shown by its end, and the table still fits a dump.
long=$SCRATCH
for i in $(seq 1 12); do long=$long/$(printf 'd%.0s' $(seq 1 150)); done
mkdir -p "$long"
cp "$F" "$long/t.safetensors"
check "a table under a ${#long}-byte directory loads" \
	"$ENGRAMCTL" load "$long/t.safetensors" --tensor $PREFIX --name longpath
shown=$("$ENGRAMCTL" -j list | jget "next(t['path'] for t in d if t['name'] == 'longpath')")
check "its path is shown by its end, within 1023 bytes (${#shown})" \
	test "${#shown}" -le 1023 -a "${shown:0:3}" = "..." -a "${shown: -14}" = "/t.safetensors"
check "a dump still lists it" test "$("$NL_RAW" dump name=longpath)" = "ok 1 messages"
"$ENGRAMCTL" unload longpath
rm -rf "$SCRATCH/$(printf 'd%.0s' $(seq 1 150))"
done_testing
