#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A host guest of the three-guest randomized exactness checker
# (selftests/vm/run-exact.sh; exact_spark.sh is the GPU node):
#
#   exact_host.sh SEED SECONDS H
#
# Serves over RDMA (port 18515) and TCP (18516), and runs for SECONDS a
# schedule drawn from SEED + H (each host its own, both replayed by the
# same SEED) of exact_lib.sh's table operations (loads of a name with one
# of five tables of three files, whole or as a shard of a drawn range,
# unloads, reloads with another table or file, verify failures) and, now
# and then, a reload of the module itself under the GPU node's fetches,
# after which it loads two names again.  Then it serves on until the GPU
# node has let go of it, and checks its kernel log.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/exact_lib.sh"

SEED=${1:?seed}
SECS=${2:?seconds}
H=${3:?host number}
IP=$ENGRAM_IP
LISTEN=listen=rdma://$IP:18515,tcp://$IP:18516
exact_setup "$SCRATCH/exact" $((SEED + H)) || bail "the checker's files"
rmmod engram_rdma 2>/dev/null
check "the module loads with an RDMA and a TCP listener" module_load "$LISTEN"
diag "seed $SEED, host $H, $SECS s"
end=$((SECONDS + SECS))
reloads=0
while [ $SECONDS -lt "$end" ]; do
	if ! exact_table_op; then
		if [ $((RANDOM % 12)) -eq 0 ]; then
			reloads=$((reloads + 1))
			exact_op module_unload
			exact_op module_load "$LISTEN"
			exact_table_op
			exact_table_op
		else
			exact_op sleep 0.$((RANDOM % 9 + 1))
		fi
	fi
	sleep 0.$((RANDOM % 5))
done
diag "$EXACT_OPS operations, $reloads module reloads"
check "the module is loaded at the end" module_loaded
# Gone for good: a link that broke (a reload here) is back within a second.
gone() { no_peer && sleep 3 && no_peer; }
check "the GPU node lets go of this host in the end" wait_for 300 gone
check "no warning, oops or other splat in this guest's kernel log" kmsg_clean
done_testing
