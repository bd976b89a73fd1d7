#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The host guest of the two-guest test (selftests/vm/run-pair.sh): loads a
# table and serves it until the Spark guest has connected, fetched and gone.
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/pair.safetensors
make_table "$F" 400000 --seed 41 --pad-before 7 --pad-after 3 || bail "mktable"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name pair >/dev/null 2>&1
check "the table loads" test "$(table_state pair)" = ready

# wait_conns CMP N SECONDS: the live connection count compares with N.
wait_conns() {
	local i
	for i in $(seq 1 "$3"); do
		[ "$(stat_global connections)" -"$1" "$2" ] && return 0
		sleep 1
	done
	return 1
}
check "the Spark guest connects" wait_conns ge 1 300
check "and disconnects when it is done" wait_conns eq 0 900
rows=$("$ENGRAMCTL" -j stats | jget "d['tables'][0]['rows']")
diag "rows served: $rows"
check "rows were served" test "$rows" -ge 100000
check "a refusal was counted" test "$(stat_global refused_row_out_of_range)" -ge 1
done_testing
