#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Two guests, the faithful topology: a host guest (192.0.2.1) that loads a
# table and serves it, and a Spark guest (192.0.2.2) that fetches from it,
# joined by QEMU's socket netdev on 127.0.0.1 (the only address used on
# the machine), each with its own kernel and rxe0 on its virtio NIC.
#
#   run-pair.sh --kver 6.1|6.12 [--timeout SECONDS] [--logs DIR]
#               [--spark-kver K] [--name NAME] [--scripts HOST SPARK]
#               [--spark-mem SIZE] [--scale N]
#
# Runs selftests/guest/pair_host.sh in the host guest and pair_spark.sh in
# the Spark guest (or the two --scripts), prints both TAP streams (the
# Spark's first, its tests named NAME, "spark" unless told) and then
# ENGRAM-SELFTESTS-COMPLETE if both guests reported an exit status; exits
# non-zero unless both passed.  --spark-kver boots the Spark guest on
# another kernel than the host's (run-arm64-pair.sh: arm64-16k); --scale N
# multiplies the Spark module's heartbeat timeout and fetch deadline and
# the Spark's test timeouts (ENGRAM_TIMEOUT_SCALE) for a slower guest.
set -u

here=$(cd "$(dirname "$0")" && pwd)
. "$here/pair-lib.sh"
KVER=6.1 SKVER="" TMO=900 NAME=spark SMEM="" SCALE=""
LOGS=""	# read by pair-lib.sh's logs_opt
HSCRIPT=selftests/guest/pair_host.sh SSCRIPT=selftests/guest/pair_spark.sh
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--spark-kver) SKVER=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=${2:?}; shift 2 ;;
	--name) NAME=${2:?}; shift 2 ;;
	--scripts) HSCRIPT=${2:?} SSCRIPT=${3:?}; shift 3 ;;
	--spark-mem) SMEM=${2:?}; shift 2 ;;
	--scale) SCALE=${2:?}; shift 2 ;;
	*) echo "run-pair.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
SKVER=${SKVER:-$KVER}

work=$(mktemp -d "${TMPDIR:-/tmp}/engram-pair.XXXXXX")
hpid=""
trap 'kill $hpid 2>/dev/null; rm -rf "$work"' EXIT

# A free port on 127.0.0.1, chosen at random so that parallel runs differ.
port=$(free_port) || { echo "not ok - run-pair: no free port on 127.0.0.1"; exit 1; }

mapfile -t hl < <(logs_opt host)
"$here/run.sh" --kver "$KVER" --timeout "$TMO" --tcg-thread single "${hl[@]}" --net "listen:$port" \
	--ip 192.0.2.1 --params "listen=rdma://192.0.2.1:18515" \
	-- "$HSCRIPT" >"$work/host.out" 2>&1 &
hpid=$!
# QEMU must be listening before the other one connects.
wait_listening "$port" $hpid
mapfile -t sl < <(logs_opt "$NAME")
# Without --scale the guest's own defaults hold (the debug kernel's tests
# scale themselves).
sparams="remote=rdma://192.0.2.1:18515@192.0.2.2 heartbeat_timeout_ms=$((10000 * ${SCALE:-1}))"
senv=()
if [ -n "$SCALE" ]; then
	sparams+=" timeout_ms=$((1000 * SCALE))"
	senv=("ENGRAM_TIMEOUT_SCALE=$SCALE")
fi
"$here/run.sh" --kver "$SKVER" --timeout "$TMO" --tcg-thread single "${sl[@]}" --net "connect:$port" --peer $hpid \
	--ip 192.0.2.2 ${SMEM:+--mem "$SMEM"} --params "$sparams" \
	-- "${senv[@]}" "$SSCRIPT" >"$work/spark.out" 2>&1
src=$?
wait $hpid
hrc=$?
hpid=""

sed "s/^\(not \)\{0,1\}ok [0-9]* - /&$NAME: /" "$work/spark.out"
sed 's/^\(not \)\{0,1\}ok [0-9]* - /&host: /' "$work/host.out"
echo "# pair: $NAME guest exit $src, host guest exit $hrc"
# 125: that guest never reported an exit status (timeout, panic).
if [ $src -ne 125 ] && [ $hrc -ne 125 ]; then
	echo ENGRAM-SELFTESTS-COMPLETE
fi
[ $src -eq 0 ] && [ $hrc -eq 0 ]
