#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The randomized exactness checker in three guests (issue 37): the
# topology of run-replicas.sh (a GPU node and two hosts), running
# selftests/guest/exact_spark.sh on the GPU node and exact_host.sh on
# each host, with one seed and one length for all three.
#
#   run-exact.sh --kver 6.1|6.12 [--timeout SECONDS] [--logs DIR]
#                [--seed N] [--secs N] [--fetchers N]
#
# --seed: the schedules' seed (ENGRAM_EXACT_SEED, else drawn from the
# clock; printed either way, and the same seed replays the schedules);
# --secs: how long they run (ENGRAM_EXACT_S, else 90); --fetchers: the
# GPU node's fetch loops (3).  Prints the three guests' TAP, then
# ENGRAM-SELFTESTS-COMPLETE when each exited by itself; exits non-zero
# unless all three passed.
set -u

here=$(cd "$(dirname "$0")" && pwd)
SEED=${ENGRAM_EXACT_SEED:-$(($(date +%s) % 1000000))}
SECS=${ENGRAM_EXACT_S:-90}
NF=3
args=()
while [ $# -gt 0 ]; do
	case "$1" in
	--kver | --timeout | --logs) args+=("$1" "${2:?}"); shift 2 ;;
	--seed) SEED=${2:?}; shift 2 ;;
	--secs) SECS=${2:?}; shift 2 ;;
	--fetchers) NF=${2:?}; shift 2 ;;
	*) echo "run-exact.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
echo "# exact: seed $SEED, $SECS s, $NF fetchers (replay: SOAK_EXACT_SEED=$SEED SOAK_EXACT_S=$SECS make soak-exact)"
exec "$here/run-replicas.sh" "${args[@]}" \
	--scripts "selftests/guest/exact_spark.sh $SEED $SECS $NF" \
	"selftests/guest/exact_host.sh $SEED $SECS"
