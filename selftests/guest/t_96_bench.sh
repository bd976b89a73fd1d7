#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make bench's smoke run (selftests/bench/bench.sh --smoke): every case of
# the benchmark (load + verify against sha256sum, perftest on rxe0, engram
# fetches of 1 to 49,152 rows over RDMA and TCP, sleeping and busy-polling,
# 1, 2 and 4 processes, the local O_DIRECT reader, and one round of the
# side-by-side comparisons: 1, 288 and 49,152 rows against ib_write_lat and
# ib_write_bw at 4,224 B over 1 and 2 QPs) runs a few iterations on a small
# table, every fetched row is compared with the file, and report.py
# computes the JSON with its ratios and draws the plot.  No timing is
# asserted: this guards the benchmark against rot, not the speed.
# kernels: 6.1
# timeout: 900
. "$(dirname "$0")/lib.sh"

OUT=$ENGRAM_TEST_TMP/bench
mkdir -p "$OUT"
"$TOP/selftests/bench/bench.sh" --smoke --iters 5 >"$OUT/bench.log" 2>&1
rc=$?
diag "$(grep -c '^BENCH ' "$OUT/bench.log") BENCH lines"
grep -v '^BENCH ' "$OUT/bench.log" | tail -n 20 | sed 's/^/# bench.sh: /'
grep '^BENCH ' "$OUT/bench.log" | sed 's/^/# /'
check "bench.sh --smoke runs to its end (exit $rc)" test $rc -eq 0
python3 "$TOP/selftests/bench/report.py" --in "$OUT/bench.log" --json "$OUT/bench.json" \
	--png "$OUT/bench.png" --env commit=smoke --check >"$OUT/bench.md" 2>"$OUT/report.err"
rc=$?
sed 's/^/# /' "$OUT/report.err"
check "every case ran all its iterations, every row exact, the ratios computed" test $rc -eq 0
ratios_ok() {
	jget "all(isinstance(d['ratios'][k], float) for k in ('bw_49152_vs_ib_write_bw',
		'rtt_288_vs_perftest', 'load_vs_sha256sum', 'tcp_vs_rdma_49152',
		'remote_vs_local_288', 'rtt_1_vs_perftest', 'bw_49152_vs_ib_write_bw_4224',
		'tput_2p_vs_1p', 'ib_write_bw_q2_vs_q1')) and
		all(len(d['ratio_rounds'][k]) == 1 for k in ('rtt_1_vs_perftest',
		'tput_scaling_vs_perftest'))" <"$OUT/bench.json" 2>/dev/null | grep -qx True
}
check "the JSON's ratios object holds the nine named ratios as plain numbers, with their round" \
	ratios_ok
# CPU per row: the host's from its served_*_cpu_ns counters, the client's
# from the fetching process's own CPU time; positive, and below a second
# a row, or the units are wrong.
cpu_ok() {
	jget "all(isinstance(d['ratios'][k], float) and 0 < d['ratios'][k] < 1e9 for k in
		('host_cpu_ns_per_row', 'host_cpu_ns_per_row_tcp',
		'client_cpu_ns_per_row_49152'))" <"$OUT/bench.json" 2>/dev/null | grep -qx True
}
check "host_cpu_ns_per_row (RDMA and TCP) and client_cpu_ns_per_row_49152 are in the JSON" \
	cpu_ok
check "the markdown table lists all five sizes" \
	test "$(grep -cE '^\| (1|288|4,096|16,384|49,152) \|' "$OUT/bench.md")" -eq 5
check "the plot is a PNG" sh -c "head -c 8 '$OUT/bench.png' | od -An -c | grep -q 'P   N   G'"
done_testing
