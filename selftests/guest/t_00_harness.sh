#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The guest environment the other tests rely on: the module under test is
# the one loaded, Soft-RoCE is up, the scratch file system is a writable
# ext4 on a block device, the project tree is visible read-only.
# timeout: 120
# kernels: 6.12
set -u

n=0 failed=0
check() {
	# check DESCRIPTION CMD...
	local d=$1
	shift
	n=$((n + 1))
	if "$@" >/tmp/.t00.out 2>&1 </dev/null; then
		echo "ok $n - $d"
	else
		failed=1
		echo "not ok $n - $d"
		sed 's/^/#   /' /tmp/.t00.out | head -n 20
	fi
}
skip() {
	n=$((n + 1))
	echo "ok $n - $1 # SKIP $2"
}

echo "1..16"

check "kernel is ENGRAM_KREL (${ENGRAM_KREL:-unset})" \
	test "$(uname -r)" = "${ENGRAM_KREL:-}"
check "environment ENGRAM_SCRATCH ENGRAM_IP ENGRAM_IP6 set" \
	test -n "${ENGRAM_SCRATCH:-}" -a -n "${ENGRAM_IP:-}" -a -n "${ENGRAM_IP6:-}"

if [ -n "${ENGRAM_MODULE:-}" ]; then
	check "engram_rdma listed by lsmod" bash -c 'lsmod | grep -q "^engram_rdma "'
	check "/sys/module/engram_rdma exists" test -d /sys/module/engram_rdma
	check "loaded module is the one built ($ENGRAM_MODULE)" bash -c '
		n=/sys/module/engram_rdma/notes/.note.gnu.build-id
		a=$(od -An -v -tx1 -j16 "$n" | tr -d " \n")
		b=$(readelf -n "$ENGRAM_MODULE" | sed -n "s/.*Build ID: *//p")
		echo "loaded build-id $a, file build-id $b"; [ -n "$a" ] && [ "$a" = "$b" ]'
	check "no dkms/updates copy shadows the tree's module" bash -c '
		! find /lib/modules/$(uname -r)/updates -name "engram_rdma.ko*" 2>/dev/null | grep .'
else
	for d in "engram_rdma listed by lsmod" "/sys/module/engram_rdma exists" \
		 "loaded module is the one built" "no dkms/updates copy shadows the tree's module"; do
		skip "$d" "run without the module"
	done
fi

check "rxe0 is present" test -d /sys/class/infiniband/rxe0
check "rxe0 port 1 is ACTIVE" bash -c 'rdma link show rxe0/1 | grep -q "state ACTIVE"'
check "ibv_devices lists rxe0" bash -c 'ibv_devices | grep -qw rxe0'
check "er0 has ${ENGRAM_IP:-?} and ${ENGRAM_IP6:-?}" bash -c '
	ip -o addr show dev er0 | grep -q "inet ${ENGRAM_IP}/24" &&
	ip -o addr show dev er0 | grep -q "inet6 ${ENGRAM_IP6}/64"'
check "scratch is ext4 on a block device" bash -c '
	src=$(findmnt -n -o SOURCE --target "$ENGRAM_SCRATCH")
	fs=$(findmnt -n -o FSTYPE --target "$ENGRAM_SCRATCH")
	echo "$src $fs"; [ "$fs" = ext4 ] && [ -b "$src" ]'
check "scratch is writable (1 MiB write, fsync, read back)" bash -c '
	f=$ENGRAM_SCRATCH/.t00.$$
	head -c 1048576 /dev/urandom > $f.src &&
	dd if=$f.src of=$f bs=64k conv=fsync status=none &&
	cmp $f.src $f && rm -f $f $f.src'
check "project tree visible at $PWD" test -f "$PWD/selftests/guest/run.sh" -a -f "$PWD/Kbuild"
check "project tree is read-only in the guest" bash -c '! touch "$PWD/.t00-write-probe" 2>/dev/null'

rping_loop() {
	# Server and client on the same rxe device, bounded; the client retries
	# while the server is still starting, and after a client that stalled
	# (once in make check a client's connection broke half-way; a one-shot
	# server then left every retry REJECTED): the server persists (-P)
	# until the loop is done.
	local srv rc=1
	timeout 120 rping -s -P -a "$ENGRAM_IP" >/tmp/.t00.rps 2>&1 &
	srv=$!
	: >/tmp/.t00.rpc
	for _ in 1 2 3 4 5 6 7 8 9 10; do
		sleep 0.5
		if timeout 20 rping -c -a "$ENGRAM_IP" -C 5 -v >/tmp/.t00.rpc.1 2>&1; then
			rc=0
		fi
		cat /tmp/.t00.rpc.1 >>/tmp/.t00.rpc
		[ $rc -eq 0 ] && break
	done
	kill $srv 2>/dev/null
	wait $srv
	sed 's/^/client: /' /tmp/.t00.rpc | tail -n 20
	sed 's/^/server: /' /tmp/.t00.rps | tail -n 10
	[ $rc -eq 0 ] && [ "$(grep -c 'ping data' /tmp/.t00.rpc.1)" -eq 5 ]
}
check "rping over rxe0 to $ENGRAM_IP (5 round trips)" rping_loop

# ib_send_lat's server is listening on its rdma_cm id.
send_lat_listening() { rdma resource show cm_id 2>/dev/null | grep -q 'LISTEN.*comm ib_send_lat'; }
send_lat() {
	local srv try rc=1

	# A server of its own for each try: a client that comes before the
	# server listens is rejected, and perftest's client then crashes in
	# librdmacm (a general protection fault in user space, seen on a
	# loaded machine even after the listener showed), leaving a one-shot
	# server waiting for nobody.  Three tries, each bounded.
	for try in 1 2 3; do
		timeout 30 ib_send_lat -R -d rxe0 -n 200 >/tmp/.t00.sls 2>&1 &
		srv=$!
		for _ in $(seq 1 100); do
			send_lat_listening && break
			sleep 0.1
		done
		sleep 0.5
		if timeout 20 ib_send_lat -R -d rxe0 -n 200 "$ENGRAM_IP" >/tmp/.t00.slc 2>&1 &&
		   wait $srv; then
			rc=0
			break
		fi
		kill $srv 2>/dev/null
		wait $srv 2>/dev/null
		echo "# ib_send_lat: try $try failed: $(tail -n 1 /tmp/.t00.slc)"
	done
	tail -n 3 /tmp/.t00.slc
	[ $rc -eq 0 ]
}
check "ib_send_lat over rdma_cm on rxe0 (200 iterations)" send_lat
if [ -s /tmp/.t00.slc ]; then
	awk '/^ *2 +200/ { print "# ib_send_lat: t_typical " $5 " us, t_avg " $6 " us" }' /tmp/.t00.slc
fi

exit $failed
