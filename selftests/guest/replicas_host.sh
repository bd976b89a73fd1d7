#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# A host guest of selftests/vm/run-replicas.sh; both load the same files:
# rep whole, w whole (small: what the old-peer checks fetch), sh in two
# shards (host1 rows 0-59999, host2 60000-119999) and gp in two shards with
# a gap between them (host1 0-49999, host2 70000-119999).
#   replicas_host.sh 1: serve the tables; once the Spark's fetches of rep
#	flow here, drain every table, wait until none is in flight, unload
#	rep and load it again (planned maintenance: the Spark's loop must not
#	notice); once fetches flow here again, unload the module under them
#	(unplanned: they fail over), load it and the table again, and once
#	they flow here again, print the kill marker and die without a word
#	(sysrq b), in the middle of the Spark's fetch loop.
#   replicas_host.sh 2: serve the tables; once the Spark has dropped its
#	first connection here (its link deleted), speak only protocol
#	version 1 from then on, as an older host would; serve until the Spark
#	deletes its link to this host again at the end.
. "$(dirname "$0")/lib.sh"

H=${1:?host number}
IP=$ENGRAM_IP
F=$SCRATCH/replicas.safetensors
S=$SCRATCH/shards.safetensors
G=$SCRATCH/gap.safetensors
W=$SCRATCH/whole.safetensors
make_table "$F" 200000 --seed 17 --pad-before 3 || bail "mktable"
make_table "$S" 120000 --seed 31 || bail "mktable shards"
make_table "$G" 120000 --seed 32 || bail "mktable gap"
make_table "$W" 20000 --seed 33 || bail "mktable whole"

load_table() {
	"$ENGRAMCTL" load "$F" --tensor $PREFIX --name rep >/dev/null 2>&1 &&
		wait_state rep ready 120
}
if [ "$H" = 1 ]; then
	SH=0-59999 GP=0-49999
else
	SH=60000-119999 GP=70000-119999
fi
check "the table loads" load_table
check "shard sh, rows $SH, loads" "$ENGRAMCTL" load "$S" --tensor $PREFIX --name sh --rows $SH \
	--no-progress
check "shard gp, rows $GP, loads" "$ENGRAMCTL" load "$G" --tensor $PREFIX --name gp --rows $GP \
	--no-progress
check "table w loads whole" "$ENGRAMCTL" load "$W" --tensor $PREFIX --name w --no-progress
if [ "$H" = 2 ]; then
	check "the Spark connects" wait_for 600 peer_connected
	check "the Spark drops its link here" wait_for 900 no_peer
	echo 1 >/sys/module/engram_rdma/parameters/protocol_version
	diag "protocol_version=1 from now on"
	check "the Spark links here again" wait_for 300 peer_connected
fi
check "the Spark fetches rep from this host" bounded 900 resumed 840 rep

if [ "$H" = 1 ]; then
	sleep 3		# the Spark's loop runs on both hosts
	# Planned: drain, then unload the table with nothing in flight.
	t0=$SECONDS
	out=$("$ENGRAMCTL" table drain --all --wait=120 2>&1)
	rc=$?
	echo "$out" | sed 's/^/# drain: /'
	check "table drain --all --wait=120: every table drained ($((SECONDS - t0)) s)" test $rc -eq 0
	check "rep reports draining, none in flight" \
		test "$(table_field rep draining) $(table_field rep inflight)" = "True 0"
	l0=$(lookups rep)
	sleep 2
	check "no request for rep came in 2 s of draining ($(($(lookups rep) - l0)))" \
		test "$(lookups rep)" -eq "$l0"
	check "the drained table unloads" "$ENGRAMCTL" table unload rep
	check "it loads again, not draining" load_table
	check "the Spark fetches from this host again" bounded 150 resumed 120 rep
	"$ENGRAMCTL" table undrain --all >/dev/null
	check "undrain --all: no table drains" \
		test "$(table_field sh draining) $(table_field w draining)" = "False False"
	sleep 3
	# Unplanned: the module goes under the Spark's fetches.
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

check "the Spark lets go of this host in the end" wait_for 900 no_peer
# For the next look when a link here did not come back (replicas_spark.sh).
diag "GSI QP: $(rdma resource show qp 2>&1 | grep -o 'link [^ ]* lqpn 1 type GSI state [A-Z]*')"
check "no warning, oops or other splat in this guest's kernel log" kmsg_clean
done_testing
