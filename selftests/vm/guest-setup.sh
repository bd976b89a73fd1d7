#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Runs inside the test VM, chrooted into the host's root (read-only 9p),
# started by selftests/vm/init:  guest-setup.sh JOBFILE
#
# Sets up the guest (scratch ext4 disk at /tmp/scratch, a veth pair er0/er1
# with 192.0.2.1/24 and 2001:db8::1/64 on er0, Soft-RoCE device rxe0 on er0;
# or, when the job joins it to another guest, rxe0 on its virtio NIC with
# GUEST_IP/24),
# loads engram_rdma.ko with the job's parameters, then runs the job's command
# under timeout and prints the exit marker that run.sh on the host waits for.
# Nothing here may print the marker except the last step.
set -u
JOB=${1:?usage: guest-setup.sh JOBFILE}
# shellcheck disable=SC1090
. "$JOB" || { echo "guest-setup: cannot read job file $JOB"; exit 1; }
# From the job file: NONCE KVER KREL PROJECT MODULE MODPARAMS CMD CMD_TIMEOUT
MARK="ENGRAM-VM-$NONCE"
echo "$MARK-SETUP"

export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export HOME=/tmp LANG=C.UTF-8

finish() {
	"$(dirname "$0")/gcov-send.sh" ENGRAM-GCOV-END
	echo "$MARK-EXIT $1"
	exit 0
}
die() {
	local rc=$1
	shift
	echo "guest-setup: $*"
	finish "$rc"
}
step() {
	# step DESCRIPTION CMD...: run a setup command, bounded, fail loudly.
	local d=$1 rc
	shift
	[ -z "${ENGRAM_VM_DEBUG:-}" ] || echo "# setup: $d at $(cut -d' ' -f1 /proc/uptime)s" >&2
	timeout 60 "$@"
	rc=$?
	[ $rc -eq 0 ] || die 125 "setup failed: $d (exit $rc)"
}

t0=$(cut -d' ' -f1 /proc/uptime)
hostname engram-vm 2>/dev/null

# --- modules (one modprobe: every exec over 9p costs ~50 ms under TCG) -------
# rxe's ICRC asks the crypto API for "crc32" up to 6.x; from 7.x on it
# calls the CRC library and crc32_generic is gone.
mods="ext4 veth ib_core ib_uverbs rdma_cm rdma_ucm rdma_rxe"
case "$(uname -r)" in [1-6].*) mods="crc32_generic $mods" ;; esac
# shellcheck disable=SC2086
step "modprobe" modprobe -a $mods

# --- scratch disk: a real block-device file system -------------------------
dev=/dev/vda
[ -b $dev ] || die 125 "scratch disk $dev missing"
step "mkfs.ext4 $dev" mkfs.ext4 -q -F -L engram-scratch \
	-E lazy_itable_init=1,lazy_journal_init=1,nodiscard $dev
mkdir -p /tmp/scratch
step "mount $dev" mount -t ext4 -o noinit_itable $dev /tmp/scratch
chmod 1777 /tmp/scratch

# --- RDMA over a veth pair, or over the NIC that joins two guests ------------
NET=${NET:-} GUEST_IP=${GUEST_IP:-192.0.2.1} GUEST_IP2=${GUEST_IP2:-}
netdev2=""
if [ -n "$NET" ]; then
	step "modprobe virtio_net" modprobe virtio_net
	netdev=""
	for _ in {1..50}; do
		for d in /sys/class/net/*; do
			case "$(readlink "$d/device/driver" 2>/dev/null)" in
			*/virtio_net) ;;
			*) continue ;;
			esac
			# run.sh's MACs: 52:54:00:e7:00:* the first NIC, :01:* the second.
			case "$(cat "$d/address")" in
			52:54:00:e7:01:*) netdev2=${d##*/} ;;
			*) netdev=${d##*/} ;;
			esac
		done
		[ -n "$netdev" ] && { [ -z "$GUEST_IP2" ] || [ -n "$netdev2" ]; } && break
		sleep 0.1
	done
	[ -n "$netdev" ] || die 125 "no virtio NIC found"
	[ -z "$GUEST_IP2" ] || [ -n "$netdev2" ] || die 125 "no second virtio NIC found"
	step "address $GUEST_IP on $netdev" ip -batch - <<EOB
address add $GUEST_IP/24 dev $netdev
link set lo up
link set $netdev up
EOB
	if [ -n "$GUEST_IP2" ]; then
		step "address $GUEST_IP2 on $netdev2" ip -batch - <<EOB
address add $GUEST_IP2/24 dev $netdev2
link set $netdev2 up
EOB
	fi
else
	netdev=er0
	step "veth pair er0/er1" ip -batch - <<EOB
link add er0 type veth peer name er1
address add 192.0.2.1/24 dev er0
address add 2001:db8::1/64 dev er0 nodad
link set lo up
link set er0 up
link set er1 up
EOB
fi
# rxe_add NAME NETDEV: a Soft-RoCE device on NETDEV, its port ACTIVE; with
# RDMA_PROVIDER=siw (ENGRAM_VM_PROVIDER on the machine) a Soft-iWARP one
# instead, named siw0, siw1.
RDMA_PROVIDER=${RDMA_PROVIDER:-rxe}
if [ "$RDMA_PROVIDER" = siw ]; then
	# Debian's kernels leave siw out: selftests/vm/siw-module.sh builds it.
	siw=$PROJECT/build/$KREL/siw/siw.ko
	[ -f "$siw" ] || die 125 "$siw not built (selftests/vm/siw-module.sh)"
	deps=$(modinfo -F depends "$siw" 2>/dev/null | tr ',' ' ')
	[ -z "$deps" ] || step "modprobe $deps (for siw)" modprobe -a $deps
	step "insmod siw" insmod "$siw"
fi
rxe_add() {
	local state="" name=$1

	[ "$RDMA_PROVIDER" = siw ] && name=siw${1#rxe}
	step "rdma link add $name ($RDMA_PROVIDER)" rdma link add "$name" type "$RDMA_PROVIDER" \
		netdev "$2"
	set -- "$name" "$2"
	for _ in {1..50}; do
		read -r state </sys/class/infiniband/"$1"/ports/1/state 2>/dev/null
		case "$state" in *ACTIVE*) return 0 ;; esac
		sleep 0.1
	done
	die 125 "$1 port not ACTIVE (state '$state')"
}
rxe_add rxe0 "$netdev"
[ -z "$netdev2" ] || rxe_add rxe1 "$netdev2"

# --- the module ---------------------------------------------------------------------
if [ -n "$MODULE" ]; then
	[ -f "$MODULE" ] || die 125 "module $MODULE not found"
	# insmod does not resolve dependencies: load what the module needs first.
	deps=$(modinfo -F depends "$MODULE" 2>/dev/null | tr ',' ' ')
	[ -z "$deps" ] || step "modprobe $deps (dependencies)" modprobe -a $deps
	eval "params=($MODPARAMS)" || die 125 "cannot parse module parameters: $MODPARAMS"
	out=$(timeout 120 insmod "$MODULE" "${params[@]}" 2>&1)
	rc=$?
	if [ $rc -ne 0 ]; then
		echo "guest-setup: insmod $MODULE ${params[*]} failed (exit $rc): $out"
		dmesg | tail -n 20
		finish "$rc"
	fi
fi

t1=$(cut -d' ' -f1 /proc/uptime)
echo "# vm: kernel $KREL, boot ${t0}s, setup $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }')s" >&2

# --- the command ----------------------------------------------------------------------
cd "$PROJECT" || die 125 "cannot cd to $PROJECT"
export ENGRAM_KVER=$KVER ENGRAM_KREL=$KREL ENGRAM_MODULE=$MODULE
export ENGRAM_SCRATCH=/tmp/scratch ENGRAM_IP=$GUEST_IP ENGRAM_IP6=2001:db8::1
export ENGRAM_NETDEV=$netdev ENGRAM_IP2=$GUEST_IP2 ENGRAM_NETDEV2=$netdev2
export ENGRAM_PROVIDER=$RDMA_PROVIDER
export ENGRAM_PROJECT=$PROJECT
export PATH="$PROJECT/tools/engramctl:$PROJECT/tools:$PATH"
timeout --kill-after=10 "$CMD_TIMEOUT" bash -c "$CMD" </dev/null
rc=$?
if [ $rc -eq 124 ] || [ $rc -eq 137 ]; then
	echo "guest-setup: command timed out after ${CMD_TIMEOUT}s (exit $rc)"
fi
sync
finish "$rc"
