#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The GPU node of the three-guest randomized exactness checker
# (selftests/vm/run-exact.sh; exact_host.sh is each host):
#
#   exact_spark.sh SEED SECONDS [FETCHERS]
#
# Links to both hosts over RDMA (at boot) and TCP (added here), so that a
# table opened on no link has up to four links to its hosts, and runs
# FETCHERS (3) of exact_lib.sh's fetchers for SECONDS, by name, digest or
# both, on no link or a named link, beside a schedule drawn from SEED of
# link deletions and additions and of replica_prefer_rdma turned off and
# on (with it on, link-0 fetches go to each host over RDMA alone; with it
# off, over both transports; it starts off until a TCP link answered),
# while the hosts load, unload, reload, shard, fail and reload their
# modules on schedules of their own.  Every
# row is checked against the identity the open reported, by this guest's
# own reading of the same files.  Prints the figures (exact_figures) and
# passes only with bad 0, late 0 and no open of an unknown table; then
# lets go of both hosts.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/exact_lib.sh"

SEED=${1:?seed}
SECS=${2:?seconds}
NF=${3:-3}
exact_setup "$SCRATCH/exact" "$SEED" || bail "the checker's files"
up() { test "$(link_field "$1" state)" = up; }
check "links to both hosts over TCP" \
	sh -c "'$ENGRAMCTL' link add tcp://192.0.2.1:18516@192.0.2.2 >/dev/null &&
	       '$ENGRAMCTL' link add tcp://192.0.3.3:18516@192.0.3.4 >/dev/null"
all_up() { up 1 && up 2 && up 3 && up 4; }
check "all four links come up" wait_for 300 all_up
diag "seed $SEED, $SECS s, $NF fetchers (replay: SOAK_EXACT_SEED=$SEED SOAK_EXACT_S=$SECS make soak-exact)"
end=$((SECONDS + SECS))
exact_links
exact_fetchers "$NF" "$end"
# Link-0 fetches share the TCP links from the start, until one of them has
# answered: with replica_prefer_rdma on (the default) they go over RDMA
# alone, and the draw turns it off in 1 op of 12, so a short run could end
# without any TCP fetch (CI's run of seed 646446 did).  Then the schedule.
echo 0 >/sys/module/engram_rdma/parameters/replica_prefer_rdma
tcp_answered() {
	[ "$("$ENGRAMCTL" -j stats | jget "sum(l.get('fetches', 0) for l in d['links'] if l.get('url', '').startswith('tcp://'))")" -gt 0 ]
}
t0=$SECONDS
if wait_for 60 tcp_answered; then
	diag "a TCP link answered within $((SECONDS - t0)) s of replica_prefer_rdma=0"
else
	diag "no TCP link answered in 60 s of replica_prefer_rdma=0"
fi
while [ $SECONDS -lt "$end" ]; do
	case $((RANDOM % 6)) in
	0) exact_link_op ;;
	1) exact_op sh -c "echo $((RANDOM % 2)) >/sys/module/engram_rdma/parameters/replica_prefer_rdma" ;;
	*) exact_op sleep 1.$((RANDOM % 9)) ;;
	esac
done
wait
exact_figures "$SEED" >"$W/figures"
rc=$?
sed 's/^/# /' "$W/figures"
check "every row the randomized schedules fetched was exact (bad 0, late 0, seed $SEED)" \
	test $rc -eq 0
exact_link_fetches
# fetched URL: the fetches of every link to URL there was, above 0.
fetched() {
	local n

	n=$(awk -v u="$1" '$1 ~ u { s += $2 } END { print s + 0 }' "$W/link-fetches")
	diag "$1: $n fetches"
	[ "$n" -gt 0 ]
}
for u in rdma://192.0.2.1 rdma://192.0.3.3 tcp://; do
	check "$u answered fetches" fetched "$u"
done
read -ra ls <"$W/links"
for id in "${ls[@]}"; do "$ENGRAMCTL" link del "$id" >/dev/null 2>&1; done
check "no warning, oops or other splat in this guest's kernel log" kmsg_clean
done_testing
