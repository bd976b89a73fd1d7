#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Bad requests sent straight to the kernel (bypassing engramctl) are refused
# with an errno and an extended-ack message, and the module stays usable.
# The family's YNL spec drives the module through the kernel's own client.
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

# The family's YNL spec (Documentation/netlink/specs/engram_rdma.yaml)
# drives the module through the kernel's own client, tools/net/ynl/cli.py
# from linux-source-6.12 (selftests/vm/ynl-tree.sh unpacked it): a load
# whose table-fd is the client's descriptor 3, a do and a dump of
# table-get agreeing with engramctl, the counters and a refusal.
YNL=${CACHE:-/var/cache/engram-rdma}/ynl-6.12/tools/net/ynl/cli.py
SPEC=$TOP/Documentation/netlink/specs/engram_rdma.yaml
ynl() { timeout 60 python3 "$YNL" --spec "$SPEC" --no-schema --output-json "$@"; }
if [ -f "$YNL" ]; then
	# A subscriber to the events group for the whole of it: 5 s to join
	# (python under this kernel is slow to start), then what follows.
	ynl --subscribe events --sleep 40 >"$SCRATCH/ynl-events" 2>&1 &
	sub=$!
	sleep 5
	out=$(ynl --do table-load --json "{\"table-name\": \"ynl.t\", \"table-fd\": 3,
		\"table-rows\": 1000, \"table-weight-offset\": $woff, \"table-scale-offset\": $soff,
		\"table-weight-bytes\": 256, \"table-scale-bytes\": 8}" 3<"$F" 2>&1)
	check "ynl --do table-load with the spec loads a table from its descriptor 3 ($out)" \
		wait_state ynl.t ready 60
	out=$(ynl --do table-get --json '{"table-name": "ynl.t"}' 2>&1)
	check "ynl --do table-get: the table as engramctl shows it (state ready, rows, digest)" \
		python3 - "$out" "$("$ENGRAMCTL" -j show ynl.t)" <<'PY'
import json, sys
y, e = json.loads(sys.argv[1]), json.loads(sys.argv[2])
e = e[0] if isinstance(e, list) else e
ok = (y["table-state"] == "ready" and y["table-rows"] == e["rows"] and
      y["table-sha256"] == e["sha256"] and y["table-generation"] == e["generation"])
if not ok:
    print("# ynl:", y, "\n# engramctl:", e)
sys.exit(0 if ok else 1)
PY
	out=$(ynl --dump table-get 2>&1)
	check "ynl --dump table-get lists every table engramctl lists" \
		test "$(python3 -c 'import json, sys; print(sorted(t["table-name"] for t in json.loads(sys.argv[1])))' "$out" 2>&1)" = \
		"$("$ENGRAMCTL" -j list | jget 'sorted(t["name"] for t in d)')"
	out=$(ynl --do stats-get 2>&1)
	check "ynl --do stats-get: the counters nest decodes by name (loads-done $(stat_global loads_done))" \
		test "$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])["stats"]["loads-done"])' "$out" 2>&1)" = \
		"$(stat_global loads_done)"
	out=$(ynl --do table-unload --json '{"table-name": "no.such"}' 2>&1)
	check "ynl: a refusal comes back with the module's extended ack ($(tr '\n' ' ' <<<"$out" | cut -c1-160))" \
		grep -q "no table of that name" <<<"$out"
	ynl --do table-unload --json '{"table-name": "ynl.t"}' >/dev/null 2>&1
	check "ynl --do table-unload unloads it" test "$(table_state ynl.t)" = absent
	wait $sub
	check "ynl --subscribe events: the load's and the unload's events, decoded by the spec" \
		python3 - "$SCRATCH/ynl-events" <<'PY'
import json, sys
text = open(sys.argv[1]).read()
try:
    msgs = [m["msg"] for m in json.loads(text.strip().splitlines()[-1]) if m["name"] == "event"]
except (ValueError, IndexError, KeyError, TypeError):
    print("# not a list of events:", text[:300])
    sys.exit(1)
mine = [(m.get("event"), m.get("table-state")) for m in msgs if m.get("table-name") == "ynl.t"]
ok = ("table-state", "ready") in mine and any(e == "table-unloaded" for e, _ in mine)
if not ok:
    print("# events of ynl.t:", mine)
sys.exit(0 if ok else 1)
PY
else
	check "the kernel's YNL client is unpacked (selftests/vm/ynl-tree.sh)" false
fi
done_testing
