#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Run a command in a QEMU (TCG) guest booted with a Debian test kernel, with
# engram_rdma.ko loaded and Soft-RoCE (rxe0 on er0, 192.0.2.1) set up:
#
#   run.sh --kver 6.1|6.12|5.10|7.2|debug|arm64-16k [--params "MODPARAMS"] [--no-module] [--mem 3G]
#          [--smp 2] [--disk-size 4G] [--timeout SECONDS] [--logs DIR]
#          [--net listen:PORT|connect:PORT --ip ADDR]
#          [--net2 listen:PORT|connect:PORT --ip2 ADDR] [--append ARGS]
#          [--peer PID] [--tcg-thread single|multi] -- CMD
#
# --tcg-thread single runs all of the guest's vCPUs in one QEMU thread
# (Documentation/testing.rst, "TCG, not KVM": the two-guest runs use it).
# --peer PID stops this guest 90 s (ENGRAM_VM_PEER_GRACE) after process
# PID (the runner of the guest this one talks to) has ended: a guest whose
# peer died (a kernel panic there) would otherwise wait out its whole
# timeout for it.
# --append (or ENGRAM_VM_APPEND) adds ARGS to the guest kernel's command
# line, e.g. "movablecore=1G" for a ZONE_MOVABLE.
# The host's root is shared read-only over virtio-9p, so the project tree is
# visible at the same path in the guest; a fresh sparse scratch disk is
# formatted ext4 and mounted at /tmp/scratch.  The guest gets no network
# device, unless --net joins it to another guest: a virtio NIC on QEMU's
# socket netdev at 127.0.0.1:PORT (the only address used on the machine),
# with rxe0 on it and ADDR/24 (selftests/vm/run-pair.sh); --net2 adds a
# second NIC on another socket, with rxe1 and ADDR2/24, for a guest joined
# to two others (selftests/vm/run-replicas.sh).  The command's output is streamed to stdout; run.sh exits with the
# command's exit status, or 125 when the guest never reported one (timeout,
# panic, crash, setup failure).  Logs of the last run: build/vm-<release>/
# {console,dmesg}.log, and also DIR/{console,dmesg}.log with --logs DIR;
# on the debug kernel, gcov.tar.gz beside them (the module's gcov counters,
# see selftests/coverage.sh), and with ENGRAM_GCOV_EACH=1 in the guest's
# environment gcov-TEST.tar.gz, the counters after each test.
#
# --kver arm64-16k boots an arm64 guest (qemu-system-aarch64 -M virt, TCG)
# with Debian's 16K-page 6.12 kernel: its root is the arm64 tree in the
# cache (kheaders.sh), the host's root is seen at /hostfs and the project
# tree at its own path, with build/arm64 (selftests/cross-arm64.sh) over the
# x86 tools and guest programs (selftests/vm/init).
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
. "$here/peer-lib.sh"
SRC=${ENGRAM_SRC:-$(cd "$here/../.." && pwd)}
BUILD=${ENGRAM_BUILD:-$SRC/build}

KVER=6.1 PARAMS="" MODULE_ON=1 MEM=3G SMP=2 DISK=4G TMO=600 LOGS="" NET="" IP=192.0.2.1
NET2="" IP2="" PEER="" TCGT=multi
APPEND=${ENGRAM_VM_APPEND:-}
usage() {
	sed -n '4,21p' "$0" | sed 's/^# \{0,1\}//' >&2
	exit 2
}
while [ $# -gt 0 ]; do
	case "$1" in
	--kver) KVER=${2:?}; shift 2 ;;
	--params) PARAMS=${2-}; shift 2 ;;
	--no-module) MODULE_ON=0; shift ;;
	--mem) MEM=${2:?}; shift 2 ;;
	--smp) SMP=${2:?}; shift 2 ;;
	--disk-size) DISK=${2:?}; shift 2 ;;
	--timeout) TMO=${2:?}; shift 2 ;;
	--logs) LOGS=${2:?}; shift 2 ;;
	--net) NET=${2:?}; shift 2 ;;
	--ip) IP=${2:?}; shift 2 ;;
	--net2) NET2=${2:?}; shift 2 ;;
	--ip2) IP2=${2:?}; shift 2 ;;
	--append) APPEND=${2-}; shift 2 ;;
	--peer) PEER=${2:?}; shift 2 ;;
	--tcg-thread) TCGT=${2:?}; shift 2 ;;
	--) shift; break ;;
	-h|--help) usage ;;
	*) echo "run.sh: unknown option '$1'" >&2; usage ;;
	esac
done
CMD="$*"
[ -n "$CMD" ] || { echo "run.sh: no command given (after --)" >&2; usage; }
case "$TMO" in ''|*[!0-9]*) echo "run.sh: --timeout takes seconds" >&2; exit 2 ;; esac
case "$PEER" in *[!0-9]*) echo "run.sh: --peer takes a process id" >&2; exit 2 ;; esac
case "$TCGT" in single|multi) ;; *) echo "run.sh: --tcg-thread takes single or multi" >&2; exit 2 ;; esac
case "$NET" in
'') nic=(-nic none) ;;
listen:[0-9]*|connect:[0-9]*)
	# The last byte of the guest's address makes its MAC unique on the wire.
	mac=$(printf '52:54:00:e7:00:%02x' "${IP##*.}")
	nic=(-netdev "socket,id=n0,${NET%%:*}=127.0.0.1:${NET#*:}"
	     -device "virtio-net-pci,netdev=n0,mac=$mac") ;;
*) echo "run.sh: --net takes listen:PORT or connect:PORT" >&2; exit 2 ;;
esac
case "$NET2" in
'') ;;
listen:[0-9]*|connect:[0-9]*)
	[ -n "$NET" ] && [ -n "$IP2" ] ||
		{ echo "run.sh: --net2 goes with --net and --ip2" >&2; exit 2; }
	# Its MAC's fifth byte tells the guest which NIC is which.
	mac=$(printf '52:54:00:e7:01:%02x' "${IP2##*.}")
	nic+=(-netdev "socket,id=n1,${NET2%%:*}=127.0.0.1:${NET2#*:}"
	      -device "virtio-net-pci,netdev=n1,mac=$mac") ;;
*) echo "run.sh: --net2 takes listen:PORT or connect:PORT" >&2; exit 2 ;;
esac

die() { echo "run.sh: $*" >&2; exit 125; }

rel=$("$here/kernels.sh" release "$KVER") || exit 2
arch=$("$here/kernels.sh" arch "$KVER")
CACHE=${CACHE:-/var/cache/engram-rdma}
aroot=$CACHE/kheaders/arm64-root
vmlinuz=$("$here/kernels.sh" vmlinuz "$KVER")
modroot=$("$here/kernels.sh" modroot "$KVER")
if [ "$KVER" = debug ]; then
	[ -n "$rel" ] && [ -n "$vmlinuz" ] && [ -n "$modroot" ] ||
		die "the debug kernel is not built: run selftests/vm/debug-kernel.sh"
fi
[ -n "$rel" ] && [ -n "$vmlinuz" ] || die "test kernel $KVER is not installed: run 'make deps'"
if [ "$arch" = arm64 ]; then
	command -v qemu-system-aarch64 >/dev/null || die "qemu-system-aarch64 missing: run 'make deps'"
	[ -x "$aroot/usr/bin/bash" ] || die "no arm64 root in $aroot: run selftests/vm/kheaders.sh"
	for p in tools/engramctl/engramctl selftests/guest/fetch_check; do
		[ -x "$BUILD/arm64/$p" ] || die "no arm64 $p: run selftests/cross-arm64.sh"
	done
	# Mount points for the project tree in the (read-only to the guest) root.
	mkdir -p "$aroot$SRC" "$aroot$BUILD"
else
	command -v qemu-system-x86_64 >/dev/null || die "qemu-system-x86_64 missing: run 'make deps'"
fi

mkdir -p "$BUILD"
MODULE=""
if [ $MODULE_ON -eq 1 ]; then
	"$here/build-module.sh" "$KVER" >"$BUILD/.build-module-$rel.out" 2>&1 || {
		cat "$BUILD/.build-module-$rel.out" >&2
		die "module build for $rel failed"
	}
	MODULE=$BUILD/$rel/kmod/engram_rdma.ko
fi

vmdir=$BUILD/vm-$rel
mkdir -p "$vmdir"
initrd=$BUILD/initramfs-$rel.cpio
(
	flock -w 300 9 || die "initramfs lock busy"
	ENGRAM_ARCH=$arch "$here/mkinitramfs.sh" "$rel" "$initrd" ${modroot:+"$modroot"}
) 9>"$BUILD/.initramfs-$rel.lock" || die "cannot build the initramfs for $rel"

# Per-run files: job description, scratch disk.  Both live under build/ so
# the guest sees them through the read-only 9p share.
run=$(mktemp -d "$vmdir/run.XXXXXX")
cleanup() {
	# Keep the logs of this run (concurrent runs each have their own $run).
	local keep=("$run/console.log" "$run/dmesg.log") d

	# The debug kernel's gcov counters, when the guest got them all out;
	# with ENGRAM_GCOV_EACH=1, a snapshot after each test before them.
	if [ -s "$run/gcov.b64" ]; then
		tr -d '\r' <"$run/gcov.b64" | awk -v dir="$run" '
			/^ENGRAM-GCOV-(TEST|END)/ {
				f = $1 == "ENGRAM-GCOV-END" ? "gcov" : "gcov-" $2
				cmd = "base64 -d >" dir "/" f ".tar.gz 2>/dev/null"
				printf "%s", buf | cmd
				close(cmd)
				buf = ""
				next
			}
			{ buf = buf $0 "\n" }'
		for f in "$run"/gcov*.tar.gz; do
			[ -s "$f" ] && keep+=("$f")
		done
	fi
	for d in "$vmdir" ${LOGS:+"$LOGS"}; do
		mkdir -p "$d" && rm -f "$d"/gcov*.tar.gz && cp -f "${keep[@]}" "$d/" 2>/dev/null
	done
	rm -rf "$run"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
nonce=$(od -An -N8 -tx8 /dev/urandom | tr -d ' \n')
job=$run/job.sh
{
	printf 'NONCE=%q\n' "$nonce"
	printf 'KVER=%q\n' "$KVER"
	printf 'KREL=%q\n' "$rel"
	printf 'PROJECT=%q\n' "$SRC"
	printf 'MODULE=%q\n' "$MODULE"
	printf 'MODPARAMS=%q\n' "$PARAMS"
	printf 'CMD=%q\n' "$CMD"
	printf 'CMD_TIMEOUT=%q\n' "$TMO"
	printf 'ENGRAM_VM_DEBUG=%q\n' "${ENGRAM_VM_DEBUG:-}"
	printf 'RDMA_PROVIDER=%q\n' "${ENGRAM_VM_PROVIDER:-rxe}"
	printf 'NET=%q\n' "${NET%%:*}"
	printf 'GUEST_IP=%q\n' "$IP"
	printf 'GUEST_IP2=%q\n' "$IP2"
} > "$job"
chmod 0644 "$job"
disk=$run/scratch.img
truncate -s "$DISK" "$disk"

console=$run/console.log
dmesglog=$run/dmesg.log
gcovlog=$run/gcov.b64
: > "$console"
: > "$dmesglog"
: > "$gcovlog"

# Boot + setup + dmesg + power-off take well under a minute on TCG; allow
# generous slack before the outer timeout kills QEMU.
outer=$((TMO + 120))
qemu=(
	qemu-system-x86_64
	-machine q35 -accel "tcg,thread=$TCGT" -cpu max -smp "$SMP" -m "$MEM"
	-nographic -no-reboot "${nic[@]}"
	-kernel "$vmlinuz" -initrd "$initrd"
	-append "console=ttyS0 quiet loglevel=3 panic=-1 oops=panic log_buf_len=4M engram_job=$job engram_setup=$here/guest-setup.sh engram_src=$SRC engram_build=$BUILD${modroot:+ engram_modroot=$modroot}${APPEND:+ $APPEND}"
	-serial mon:stdio
	-serial "file:$dmesglog"
	-serial "file:$gcovlog"
	-fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap
	-device virtio-9p-pci,fsdev=r,mount_tag=hostroot
	-drive "file=$disk,if=none,id=scratch,format=raw,cache=unsafe,discard=unmap"
	-device virtio-blk-pci,drive=scratch,serial=engram-scratch
)
if [ "$arch" = arm64 ]; then
	# One UART on virt: the kernel log goes to a virtio console (hvc0).
	# pauth-impdef: TCG's pointer authentication at a fraction of the cost.
	qemu=(
		qemu-system-aarch64
		-machine virt -accel "tcg,thread=$TCGT" -cpu max,pauth-impdef=on -smp "$SMP" -m "$MEM"
		-nographic -no-reboot "${nic[@]}"
		-kernel "$vmlinuz" -initrd "$initrd"
		-append "console=ttyAMA0 quiet loglevel=3 panic=-1 oops=panic log_buf_len=4M engram_job=$job engram_setup=$here/guest-setup.sh engram_src=$SRC engram_build=$BUILD engram_guestroot=1 engram_logtty=hvc0${modroot:+ engram_modroot=$modroot}${APPEND:+ $APPEND}"
		-serial mon:stdio
		-device virtio-serial-pci
		-chardev "file,id=dlog,path=$dmesglog"
		-device virtconsole,chardev=dlog
		-fsdev "local,id=g,path=$aroot,security_model=none,readonly=on,multidevs=remap"
		-device virtio-9p-pci,fsdev=g,mount_tag=guestroot
		-fsdev local,id=r,path=/,security_model=none,readonly=on,multidevs=remap
		-device virtio-9p-pci,fsdev=r,mount_tag=hostroot
		-drive "file=$disk,if=none,id=scratch,format=raw,cache=unsafe,discard=unmap"
		-device virtio-blk-pci,drive=scratch,serial=engram-scratch
	)
fi

# Stream the console: boot noise before the setup marker goes only to the
# log; the marker lines themselves are dropped.
start=$(date +%s.%N)
boot() {
	timeout --kill-after=15 "$outer" "${qemu[@]}" </dev/null 2>&1 |
		tee "$console" |
		{
			# Line by line as it comes (mawk would buffer its input).
			on=0
			while IFS= read -r line || [ -n "$line" ]; do
				line=${line%$'\r'}
				case "$line" in
				*"ENGRAM-VM-$nonce-SETUP"*) on=1 ;;
				*"ENGRAM-VM-$nonce-EXIT"*) on=0 ;;
				*) [ $on -eq 0 ] || printf '%s\n' "$line" ;;
				esac
			done
		}
	qrc=${PIPESTATUS[0]}
}
# With --peer: stop QEMU (matched by this run's own job path on its
# command line) once the peer has been gone GRACE seconds.
GRACE=${ENGRAM_VM_PEER_GRACE:-90}
case "$GRACE" in ''|*[!0-9]*) echo "run.sh: ENGRAM_VM_PEER_GRACE takes seconds" >&2; exit 2 ;; esac
stop_qemu() {
	echo "run.sh: the peer guest's runner (pid $PEER) ended ${GRACE} s ago; stopping this guest" >&2
	: >"$run/peer-gone"
	# pkill takes a regular expression; the path has '+' (6.12.95+deb12).
	pkill -f -- "engram_job=$(sed 's/[][\\.*^$+?(){}|]/\\&/g' <<<"$job") " || true
}
wpid=""
if [ -n "$PEER" ]; then
	peer_watch "$PEER" "$GRACE" stop_qemu &
	wpid=$!
fi
set +e
boot
# A Debian kernel that oopses while it boots under TCG, before the setup
# script (so before anything of this project runs in the guest), is
# QEMU's, not the module's: seen once on 6.12, an int3 trap in
# sched_clock_cpu() while the kernel patched its own text, 1.8 s into
# the boot.  Boot once more, saying so; a second such boot fails.
if ! grep -aq "ENGRAM-VM-$nonce-SETUP" "$console" && grep -aq 'Kernel panic' "$console"; then
	echo "run.sh: the guest kernel panicked while booting, before the setup script; booting again" >&2
	tr -d '\r' < "$console" | grep -a -m 3 -E 'Oops|RIP:|Kernel panic' | sed 's/^/  | /' >&2
	cp "$console" "$run/console-boot1.log"
	: > "$console"
	: > "$dmesglog"
	boot
fi
[ -z "$wpid" ] || kill "$wpid" 2>/dev/null
set -e
end=$(date +%s.%N)

status=$(tr -d '\r' < "$console" | grep -a -o "ENGRAM-VM-$nonce-EXIT [0-9]*" | tail -n1 | cut -d" " -f2 || true)
if [ -z "$status" ]; then
	{
		echo "run.sh: FAILED: the guest never reported the command's exit status."
		if [ -e "$run/peer-gone" ]; then
			echo "run.sh: stopped ${GRACE} s after its peer guest's runner (pid $PEER) ended."
		elif [ "$qrc" -eq 124 ] || [ "$qrc" -eq 137 ]; then
			echo "run.sh: QEMU killed after ${outer}s (hung guest or command ignoring its timeout)."
		elif grep -aq 'Kernel panic' "$console"; then
			echo "run.sh: the guest kernel panicked."
		else
			echo "run.sh: QEMU exited with status $qrc."
		fi
		if ! grep -aq "ENGRAM-VM-$nonce-SETUP" "$console"; then
			echo "run.sh: the guest did not reach the setup script; last console lines:"
			tr -d '\r' < "$console" | tail -n 40 | sed 's/^/  | /'
		else
			echo "run.sh: last console lines:"
			tr -d '\r' < "$console" | tail -n 15 | sed 's/^/  | /'
		fi
		echo "run.sh: console log: ${LOGS:-$vmdir}/console.log"
		echo "run.sh: kernel log:  ${LOGS:-$vmdir}/dmesg.log"
	} >&2
	exit 125
fi
printf '# vm: %s, %.1fs wall, exit %s\n' "$rel" \
	"$(awk -v a="$start" -v b="$end" 'BEGIN { print b - a }')" "$status" >&2
exit "$status"
