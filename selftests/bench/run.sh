#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: boot a guest, run selftests/bench/bench.sh in it, and turn its
# figures into a markdown table (stdout), a JSON file and a PNG plot:
#
#   run.sh [--kver 6.1|6.12] [--iters N] [--rows N] [--smoke] [--out DIR]
#
# Results go to DIR (default build/bench): bench.json (every figure, the
# environment and the "ratios" object), bench.md, bench.png and bench.log
# (the guest's output).  BENCH_TOPO=1 (the default) is one guest that is
# host and GPU node at once over rxe loopback.  Exits non-zero when a case
# is missing, a fetch failed or a row was wrong; never on a timing.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
KVER=${BENCH_KVER:-6.12} OUT=$top/build/bench ARGS=()
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--iters|--rows) ARGS+=("$1" "${2:?}"); shift 2 ;;
	--smoke) ARGS+=(--smoke); shift ;;
	--out) OUT=${2:?}; shift 2 ;;
	*) echo "run.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
case "${BENCH_TOPO:-1}" in
1) ;;
*) echo "run.sh: BENCH_TOPO=${BENCH_TOPO} is not supported; only 1 (one guest, rxe loopback)" >&2
   exit 2 ;;
esac
mkdir -p "$OUT"
log=$OUT/bench.log

# A 1.1 GB table pinned in the page cache, its file on the scratch disk.
"$top/selftests/vm/run.sh" --kver "$KVER" --mem 4G --disk-size 8G --timeout 10800 \
	-- "selftests/bench/bench.sh ${ARGS[*]}" | tee "$log"
rc=${PIPESTATUS[0]}
if [ "$rc" -ne 0 ]; then
	echo "run.sh: the guest's bench failed (exit $rc); its output is in $log" >&2
	exit 1
fi
commit=$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)
qemu=$(qemu-system-x86_64 --version | sed -n '1s/.*version \([^ ]*\).*/\1/p')
hostcpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
python3 "$here/report.py" --in "$log" --json "$OUT/bench.json" --png "$OUT/bench.png" \
	--env "commit=$commit" --env "qemu=$qemu" --env "host_cpu=$hostcpu" \
	--env "host_cpus=$(nproc)" --env "topology=1 guest, rxe loopback" --check \
	>"$OUT/bench.md"
rc=$?
cat "$OUT/bench.md"
echo "run.sh: results in $OUT/bench.json, $OUT/bench.md, $OUT/bench.png"
exit $rc
