#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The randomized exactness checker's short pass (issue 37): exact_random.sh
# for ENGRAM_EXACT_S seconds (90) with seed ENGRAM_EXACT_SEED (drawn from
# the clock and printed when not given; the same seed replays the same
# schedule: `ENGRAM_EXACT_SEED=S make soak-exact`).  Loads, unloads,
# reloads of names with other tables and files, shards, link del/add and
# verify failures run beside fetchers that open by name, digest or both,
# on no link and on named links; every row is checked against the table
# the open reported.  `make soak-exact` runs the same for an hour.
# timeout: 600
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

SEED=${ENGRAM_EXACT_SEED:-$(($(date +%s) % 1000000))}
diag "seed $SEED (replay: ENGRAM_EXACT_SEED=$SEED)"
"$TOP/selftests/guest/exact_random.sh" "$SEED" "${ENGRAM_EXACT_S:-90}" 3 >"$ENGRAM_TEST_TMP/exact.out" 2>&1
rc=$?
grep -v '^exact: op ' "$ENGRAM_TEST_TMP/exact.out" | sed 's/^/# /'
diag "$(grep -c '^exact: op ' "$ENGRAM_TEST_TMP/exact.out") operations (the last 5:)"
grep '^exact: op ' "$ENGRAM_TEST_TMP/exact.out" | tail -n 5 | sed 's/^/# /'
check "every row the randomized schedule fetched was exact (bad 0, late 0, seed $SEED)" test $rc -eq 0
check "... and it fetched rows" grep -Eq '^exact: .* rows [1-9]' "$ENGRAM_TEST_TMP/exact.out"
check "the kernel log is clean" kmsg_clean
check "the module unloads" module_unload
check "the module loads again" module_load
done_testing
