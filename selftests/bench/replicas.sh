#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench's replicas case, in the three guests of
# selftests/vm/run-replicas.sh (--scripts): two host guests load the same
# generated table; the GPU-node guest (Spark) links to both and measures the
# throughput of 49,152-row fetches (one and two processes) and of 288-row
# fetches (two processes) against one host (the table opened on link 1)
# and against both (opened on no link: spread, and a large fetch split over
# the two), in ROUNDS rounds whose order alternates, so that a drift of the
# machine does not favour one side.  Every row is checked (engram_bench).
#
#   replicas.sh spark | replicas.sh 1|2 (a host)
#
# The Spark prints one "BENCH {json}" line per case and round (labels
# repl_one_ROWS_pP_rN and repl_two_ROWS_pP_rN; report.py takes the medians
# and their ratios), then deletes its links, which ends the hosts.
# Environment: BENCH_REPLICAS_ROWS (table rows, default 1,048,576: 277 MB),
# BENCH_REPLICAS_ITERS (timed fetches per process and case, default 10),
# BENCH_REPLICAS_ROUNDS (default 3).
. "$(dirname "$0")/../guest/lib.sh"

ROLE=${1:?usage: replicas.sh spark|1|2}
ROWS=${BENCH_REPLICAS_ROWS:-1048576}
ITERS=${BENCH_REPLICAS_ITERS:-10}
ROUNDS=${BENCH_REPLICAS_ROUNDS:-3}
F=$SCRATCH/bench-replicas.safetensors
make_table "$F" "$ROWS" --seed 7 || bail "mktable"

if [ "$ROLE" != spark ]; then
	check "the table loads" "$ENGRAMCTL" load "$F" --tensor "$PREFIX" --name bench --no-progress
	check "the Spark connects" wait_for 900 peer_connected
	check "the Spark lets go of this host in the end" wait_for 3600 no_peer
	diag "served $(stat_global served_rdma_rows) rows over RDMA"
	done_testing
fi

read -r WOFF SOFF < <(tensor_offsets "$F")
B=("$TOP/selftests/bench/engram_bench" fetch --table bench --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --rows-total "$ROWS" --timeout-ms 60000)
ready() { "${B[@]}" --link "$1" --rows 1 --iters 1 --warmup 0 >/dev/null 2>&1; }
both() { ready 1 && ready 2; }
check "both hosts serve the table" wait_for 900 both

fails=0
# measure SIDE ROWS PROCS ROUND: one case; SIDE one (link 1) or two (no link).
measure() {
	local link=() out rc err=$SCRATCH/replicas-bench.err
	[ "$1" = one ] && link=(--link 1)
	out=$("${B[@]}" "${link[@]}" --rows "$2" --procs "$3" --iters "$ITERS" --warmup 2 \
		--seed "$4" --label "repl_$1_$2_p$3_r$4" 2>"$err")
	rc=$?
	[ -z "$out" ] || echo "BENCH $out"
	if [ $rc -ne 0 ] || [ -z "$out" ]; then
		fails=$((fails + 1))
		diag "repl_$1_$2_p$3_r$4: exit $rc: $(head -c 500 "$err")"
	fi
}
f1=$(link_stat 1 fetches) f2=$(link_stat 2 fetches) s0=$(stat_global splits)
for r in $(seq 1 "$ROUNDS"); do
	order="one two"
	[ $((r % 2)) = 0 ] && order="two one"
	for c in "49152 1" "49152 2" "288 2"; do
		for side in $order; do
			# shellcheck disable=SC2086
			measure "$side" $c "$r"
		done
	done
done
check "every fetch of every case succeeded with exact rows" test $fails -eq 0
diag "fetches answered: link 1 $(($(link_stat 1 fetches) - f1)), link 2 $(($(link_stat 2 fetches) - f2)); splits $(($(stat_global splits) - s0))"
check "both hosts answered fetches on no link" test "$(link_stat 2 fetches)" -gt "$f2"
check "link del of both links" sh -c "'$ENGRAMCTL' link del 1 && '$ENGRAMCTL' link del 2"
done_testing
