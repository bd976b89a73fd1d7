#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A host guest of selftests/vm/run-replicas.sh; both load the same file.
#   replicas_host.sh 1: serve the table; once the Spark's fetches flow
#	here, unload the module under them, load it and the table again, and
#	once they flow here again, print the kill marker and die without a
#	word (sysrq b), in the middle of the Spark's fetch loop.
#   replicas_host.sh 2: serve the table until the Spark deletes its link
#	to this host (no connection left).
. "$(dirname "$0")/lib.sh"

H=${1:?host number}
IP=$ENGRAM_IP
F=$SCRATCH/replicas.safetensors
make_table "$F" 200000 --seed 17 --pad-before 3 || bail "mktable"

load_table() {
	"$ENGRAMCTL" load "$F" --tensor $PREFIX --name rep >/dev/null 2>&1 &&
		wait_state rep ready 120
}
check "the table loads" load_table
check "the Spark fetches from this host" bounded 900 resumed 840 rep

if [ "$H" = 1 ]; then
	sleep 3		# the Spark's loop runs on both hosts
	check "rmmod under the Spark's fetches" bounded 60 module_unload
	sleep 3
	check "modprobe again" bounded 60 module_load "listen=rdma://$IP:18515"
	check "the table loads again" bounded 150 load_table
	check "the Spark fetches from this host again" bounded 150 resumed 120 rep
	sleep 2
	check "no warning, oops or other splat in this guest's kernel log" kmsg_clean
	echo ENGRAM-REPLICAS-KILL-HOST
	sync
	echo b >/proc/sysrq-trigger
	sleep 30
	bail "still running 30 s after sysrq b"
fi

gone() { [ "$(stat_global connections)" -eq 0 ]; }
check "the Spark lets go of this host in the end" wait_for 900 gone
check "no warning, oops or other splat in this guest's kernel log" kmsg_clean
done_testing
