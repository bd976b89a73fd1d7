#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make fuzz: coverage-guided fuzzing of the module's kernel surfaces
# (selftests/guest/kfuzz.c, KCOV) in a guest on the project's debug kernel,
# then the line coverage of that run alone.
#
#   FUZZ_INPUTS    inputs per surface (1000000)
#   FUZZ_SECONDS   wall-time bound per surface (14400)
#   FUZZ_SURFACES  "netlink ioctl tcp rdma"
#   FUZZ_SEED      the mutation seed (random; printed, and reproduces a run)
#   FUZZ_OUT       logs and coverage (build/fuzz)
#
# Prints per surface: inputs run, corpus kept, edges and module lines
# reached, findings.  A finding leaves the inputs before it in the guest's
# output (kfuzz --save) and fails the run; keep the one that reproduces it
# as selftests/guest/kfuzz-cases/SURFACE-NAME.kfz, and make check replays
# it.  The userspace codec fuzzers are `make -C selftests/unit fuzz`.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${FUZZ_OUT:-$root/build/fuzz}
inputs=${FUZZ_INPUTS:-1000000}
secs=${FUZZ_SECONDS:-14400}
surfaces=${FUZZ_SURFACES:-netlink ioctl tcp rdma}
seed=${FUZZ_SEED:-$((RANDOM * 32768 + RANDOM))}
n=$(wc -w <<<"$surfaces")

mkdir -p "$out"
make -s -C "$root/selftests/guest" kfuzz fetch_check >/dev/null || exit 1
echo "# make fuzz: $surfaces, $inputs inputs or $secs s each, seed $seed"
# run.sh hands the guest its command as one shell string: quote the words
# here, or the list of surfaces would split.
cmd=$(printf '%q ' env ENGRAM_FUZZ_INPUTS="$inputs" ENGRAM_FUZZ_SECONDS="$secs" \
	ENGRAM_FUZZ_SURFACES="$surfaces" ENGRAM_FUZZ_SEED="$seed" \
	ENGRAM_TEST_TIMEOUT=$((n * (secs + 600) + 900)) "$root/selftests/guest/run.sh" t_69_kfuzz)
"$root/selftests/vm/run.sh" --kver debug --timeout $((n * (secs + 900) + 1800)) \
	--logs "$out" -- "$cmd" | tee "$out/fuzz.log"
rc=${PIPESTATUS[0]}
if [ -s "$out/gcov.tar.gz" ]; then
	"$root/selftests/coverage.sh" "$out/coverage" "$out/gcov.tar.gz" | tee -a "$out/fuzz.log"
fi
echo "# make fuzz: exit $rc; log $out/fuzz.log"
exit "$rc"
