#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The randomized exactness checker (issue 37), in one guest that is host
# and GPU node at once (an RDMA and a TCP listener, a link to each):
#
#   exact_random.sh SEED SECONDS [FETCHERS]
#
# A schedule drawn from SEED (bash's RANDOM, seeded: the same seed replays
# the same schedule) runs for SECONDS: it loads a name with a table drawn
# from three files (two of them hold two tables each, so a digest names
# more than one table), as a whole table or as a shard of a drawn row
# range; unloads a name; reloads a name with another table or another
# file; deletes a link and adds it again; and makes a verify find the
# pinned bytes changed (fault_verify_mismatch), which stops that table.
# Beside it FETCHERS loops (3) open tables by name, by digest or by both,
# on no link or on a named link, and fetch for a second or two with
# fetch_check --identity: whatever an open returns is checked, row by row,
# against the file of the digest it reports at the tensor offsets it
# reports, by the checker's own reading of the files; a handle whose
# table is gone must fail (tolerated), and a re-open is checked against
# what it then returns.  A fetch may fail with a clear error; it may never
# return a wrong byte, nor write after it returned.  The three-guest
# version, with module reloads on the hosts, is exact_spark.sh and
# exact_host.sh (selftests/vm/run-exact.sh).
#
# Prints each operation, then
#   exact: seed S ops N fetch_runs N opens N rows N bad N errors N late N
#   exact: open errors by kind: ...
#   exact: fetch errors by kind: ...
# and exits 0 only with bad 0, late 0 and no open of an unknown table.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/exact_lib.sh"

SEED=${1:?seed}
SECS=${2:?seconds}
NF=${3:-3}
IP=${ENGRAM_IP:-192.0.2.1}
LA=rdma://$IP:18761
LT=tcp://$IP:18762
exact_setup "${ENGRAM_TEST_TMP:-$SCRATCH/exact-run}/exact" "$SEED" || exit 2

module_unload || exit 2
module_load "listen=$LA,$LT" "remote=$LA@$IP,$LT@$IP" heartbeat_ms=300 reconnect_max_ms=1000 ||
	exit 2
echo "exact: seed $SEED, $SECS s, $NF fetchers"
end=$((SECONDS + SECS))
exact_links
exact_fetchers "$NF" "$end"
while [ $SECONDS -lt "$end" ]; do
	if ! exact_table_op; then
		case $((RANDOM % 3)) in
		0) exact_link_op ;;
		*) exact_op sleep 0.$((RANDOM % 9 + 1)) ;;
		esac
	fi
	sleep 0.$((RANDOM % 5))
done
wait
exact_figures "$SEED"
rc=$?
for n in "${NAMES[@]}"; do "$ENGRAMCTL" unload "$n" >/dev/null 2>&1; done
exit $rc
