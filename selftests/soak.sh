#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make soak: selftests/vm/run-soak.sh with the make variables, its output
# kept in SOAK_OUT (build/soak/soak.log, the guests' logs beside it).
#
#   SOAK_KVER (6.12)  SOAK_ROWS (100000000)  SOAK_FAULT_EVERY (180)
#   SOAK_PROCS (2)  SOAK_BATCH (16384,4096,288)  SOAK_MTU (9000)
#   SOAK_TIMEOUT (from the rows)  SOAK_OUT (build/soak)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
out=${SOAK_OUT:-$root/build/soak}
mkdir -p "$out"
make -s -C "$root/selftests/guest" fetch_check >/dev/null || exit 1
"$root/selftests/vm/build-module.sh" "${SOAK_KVER:-6.12}" >"$out/build.log" 2>&1 ||
	{ tail -n 20 "$out/build.log"; exit 1; }
"$root/selftests/vm/run-soak.sh" --kver "${SOAK_KVER:-6.12}" \
	--rows "${SOAK_ROWS:-100000000}" --fault-every "${SOAK_FAULT_EVERY:-180}" \
	--procs "${SOAK_PROCS:-2}" --batch "${SOAK_BATCH:-16384,4096,288}" \
	--mtu "${SOAK_MTU:-9000}" ${SOAK_TIMEOUT:+--timeout "$SOAK_TIMEOUT"} --logs "$out" |
	tee "$out/soak.log"
rc=${PIPESTATUS[0]}
echo "# make soak: exit $rc; log $out/soak.log"
exit "$rc"
