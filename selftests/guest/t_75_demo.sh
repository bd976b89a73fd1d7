#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# make demo's own steps, as a user runs them (issue 37): tools/demo.sh
# --guest with the module loaded as make demo loads it (one listener, one
# link to it), its defaults but a smaller table (DEMO_ROWS).  It loads
# layers 1 and 14 of one file, fetches layer 1 on no link from C and from
# Python, and compares every byte with the file: two tables of one file
# on link 0, the case make check never tried before, where half the rows
# came back as layer 14's.  Passes on the demo's own closing word.
# timeout: 600
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" ||
	bail "insmod as make demo does"
link_up() { test "$(link_field 1 state)" = up; }
check "the link comes up" wait_for 30 link_up
ENGRAM_SCRATCH=$SCRATCH DEMO_ROWS=${DEMO_ROWS:-250000} "$TOP/tools/demo.sh" --guest \
	>"$ENGRAM_TEST_TMP/demo" 2>&1
rc=$?
sed 's/^/# /' "$ENGRAM_TEST_TMP/demo"
check "the demo exits 0 (exit $rc)" test $rc -eq 0
check "... with its closing word" grep -q '^demo: ok$' "$ENGRAM_TEST_TMP/demo"
check "its fetch of layer 1 on link 0 was exact (bad 0)" \
	grep -Eq '^fetch_check: rows 200000 batches [0-9]+ bad 0 errors 0' "$ENGRAM_TEST_TMP/demo"
rm -f "$SCRATCH/demo.safetensors"
check "the kernel log is clean" kmsg_clean
check "the module unloads" module_unload
check "and loads again, as the next test expects" module_load
done_testing
