#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench: boot a guest, run selftests/bench/bench.sh in it, and turn its
# figures into a markdown table (stdout), a JSON file and a PNG plot:
#
#   run.sh [--kver 6.1|6.12] [--iters N] [--rows N] [--mtu BYTES] [--smoke]
#          [--out DIR] [--replicas-only]
#
# Results go to DIR (default build/bench): bench.json (every figure, the
# environment and the "ratios" object), bench.md, bench.png and bench.log
# (the guests' output).  BENCH_TOPO=1 (the default) is one guest that is
# host and GPU node at once over rxe loopback; BENCH_TOPO=2 is two guests,
# a host (192.0.2.1) and a Spark (192.0.2.2), joined by QEMU's socket
# netdev on 127.0.0.1 as in selftests/vm/run-pair.sh.  Then, unless
# BENCH_REPLICAS=0, the replicas case (selftests/bench/replicas.sh): the
# throughput of one GPU-node guest against two host guests that serve the
# same table, beside the same against one of them, in the three guests of
# selftests/vm/run-replicas.sh (its output in replicas.log and under
# replicas/); --replicas-only runs that case alone.  Exits non-zero when
# a case is missing, a fetch failed or a row was wrong; never on a timing.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
KVER=${BENCH_KVER:-6.12} OUT=$top/build/bench ARGS=() ONLY=""
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--iters|--rows|--mtu) ARGS+=("$1" "${2:?}"); shift 2 ;;
	--smoke) ARGS+=(--smoke); shift ;;
	--out) OUT=${2:?}; shift 2 ;;
	--replicas-only) ONLY=replicas; shift ;;
	*) echo "run.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
TOPO=${BENCH_TOPO:-1}
# What was built, before the run: the tree may move on while it runs.
commit=$(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)
mkdir -p "$OUT"
log=$OUT/bench.log
# A 1.1 GB table pinned in the page cache, its file on the scratch disk.
VM=(--kver "$KVER" --mem 4G --disk-size 8G --timeout 10800)
rc=0 topology=""
[ -z "$ONLY" ] || { : >"$log"; TOPO=none; }
case "$TOPO" in
none) ;;
1)
	"$top/selftests/vm/run.sh" "${VM[@]}" -- "selftests/bench/bench.sh ${ARGS[*]}" |
		tee "$log"
	rc=${PIPESTATUS[0]}
	topology="1 guest, rxe loopback"
	;;
2)
	. "$top/selftests/vm/pair-lib.sh"
	port=$(free_port) || { echo "run.sh: no free port on 127.0.0.1" >&2; exit 1; }
	"$top/selftests/vm/run.sh" "${VM[@]}" --net "listen:$port" --ip 192.0.2.1 \
		-- "selftests/bench/bench.sh --role host ${ARGS[*]}" >"$OUT/host.log" 2>&1 &
	hpid=$!
	wait_listening "$port" $hpid
	"$top/selftests/vm/run.sh" "${VM[@]}" --net "connect:$port" --ip 192.0.2.2 \
		-- "selftests/bench/bench.sh --role spark ${ARGS[*]}" | tee "$OUT/spark.log"
	rc=${PIPESTATUS[0]}
	wait $hpid
	hrc=$?
	[ "$hrc" -eq 0 ] || { echo "run.sh: the host guest failed (exit $hrc), see $OUT/host.log" >&2; rc=1; }
	cat "$OUT/spark.log" "$OUT/host.log" >"$log"
	topology="2 guests (host and Spark) over QEMU's socket netdev"
	;;
*)
	echo "run.sh: BENCH_TOPO takes 1 or 2" >&2
	exit 2
	;;
esac
if [ "$rc" -ne 0 ]; then
	echo "run.sh: the guest's bench failed (exit $rc); its output is in $log" >&2
	exit 1
fi
if [ "${BENCH_REPLICAS:-1}" != 0 ] || [ -n "$ONLY" ]; then
	# Each guest's environment comes first in its command.
	renv=""
	for v in BENCH_REPLICAS_ROWS BENCH_REPLICAS_ITERS BENCH_REPLICAS_ROUNDS; do
		[ -z "${!v:-}" ] || renv="$renv $v=${!v}"
	done
	"$top/selftests/vm/run-replicas.sh" --kver "$KVER" --timeout 5400 --logs "$OUT/replicas" \
		--scripts "$renv selftests/bench/replicas.sh spark" "$renv selftests/bench/replicas.sh" \
		>"$OUT/replicas.log" 2>&1
	rc=$?
	grep -E '^(not )?ok|^# ' "$OUT/replicas.log" | grep -v '^# vm:'
	cat "$OUT/replicas.log" >>"$log"
	if [ "$rc" -ne 0 ]; then
		echo "run.sh: the replicas case failed (exit $rc); its output is in $OUT/replicas.log" >&2
		exit 1
	fi
	topology="${topology:+$topology; }replicas: 3 guests (2 hosts and a Spark)"
fi
qemu=$(qemu-system-x86_64 --version | sed -n '1s/.*version \([^ ]*\).*/\1/p')
hostcpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
# The plot is of the one-guest cases: none with --replicas-only.
opts=(--png "$OUT/bench.png" --rst "$OUT/bench.rst")
[ -z "$ONLY" ] || opts=(--replicas-only)
python3 "$here/report.py" --in "$log" --json "$OUT/bench.json" "${opts[@]}" \
	--env "commit=$commit" --env "qemu=$qemu" --env "host_cpu=$hostcpu" \
	--env "host_cpus=$(nproc)" --env "topology=$topology" --check \
	>"$OUT/bench.md"
rc=$?
cat "$OUT/bench.md"
png=", $OUT/bench.png"
[ -z "$ONLY" ] || png=""
echo "run.sh: results in $OUT/bench.json, $OUT/bench.md$png"
exit $rc
