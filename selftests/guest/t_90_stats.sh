#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Counters move with what happens, and every command has JSON output.
# timeout: 200
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/stats.safetensors
make_table "$F" 5000 --seed 19 || bail "mktable"

s0=$(stat_global loads_started)
d0=$(stat_global loads_done)
v0=$(stat_global verify_runs)
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name st >/dev/null || bail "load"
"$ENGRAMCTL" verify st >/dev/null
"$ENGRAMCTL" verify st >/dev/null
check "loads_started counts one load" test "$(stat_global loads_started)" -eq $((s0 + 1))
check "loads_done counts one load" test "$(stat_global loads_done)" -eq $((d0 + 1))
check "verify_runs counts two verifies" test "$(stat_global verify_runs)" -eq $((v0 + 2))
check "tables gauge is 1" test "$(stat_global tables)" -eq 1
json=$("$ENGRAMCTL" -j stats)
echo "# ${json:0:600}..." | tr -d '\n'; echo
check "per-table stats name the table" \
	test "$(jget "[t['name'] for t in d['tables']]" <<<"$json")" = "['st']"
check "per-table load_bytes is the file size" \
	test "$(jget "d['tables'][0]['load_bytes']" <<<"$json")" -eq "$(stat -c %s "$F")"
check "per-table verify_runs is 2" test "$(jget "d['tables'][0]['verify_runs']" <<<"$json")" -eq 2
check "text stats mention the table" sh -c "'$ENGRAMCTL' stats | grep -q st"
for cmd in "list" "stats" "table show st"; do
	check "engramctl -j $cmd is valid JSON" sh -c "'$ENGRAMCTL' -j $cmd | python3 -m json.tool >/dev/null"
done
check "engramctl -j verify is valid JSON" sh -c "'$ENGRAMCTL' -j verify st | python3 -m json.tool >/dev/null"
check "engramctl -j unload succeeds" sh -c "'$ENGRAMCTL' -j unload st >/dev/null"
done_testing
