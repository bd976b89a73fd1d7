#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The root of a guest that boots Debian's systemd as PID 1
# (selftests/vm/run-systemd.sh; init's engram_systemd=1).
#
#   systemd-root.sh JOBFILE
#	chrooted in the new root (the host's, under an overlay on a tmpfs)
#	before switch_root: install the packages a host installs (engramctl
#	and libengram0 from build/deb, as selftests/deb-check.sh built them;
#	the module is the tree's build, not DKMS's: t_85_packages covers
#	that), the module and what it needs in /lib/modules, an RDMA device
#	(Soft-RoCE on a veth pair) that the module listens on, and units: the
#	job's, and a watcher that records the tables unit's state and status
#	text from before it starts; then the job's command with --prepare,
#	for what it wants at boot.  Every unit the machine itself enables is
#	left out of the boot: it is the host's, not this test's.
#   systemd-root.sh --run JOBFILE
#	the job's unit (engram-test.service): print the setup marker, run the
#	job's command bounded, print the exit marker, write the kernel log to
#	the second serial port and power off.
set -u
MODE=prep
if [ "${1:-}" = --run ]; then
	MODE=run
	shift
fi
JOB=${1:?usage: systemd-root.sh [--run] JOBFILE}
# shellcheck disable=SC1090
. "$JOB" || { echo "systemd-root: cannot read job file $JOB"; exit 1; }
MARK="ENGRAM-VM-$NONCE"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
export LANG=C.UTF-8
# The job's command is relative to the project's tree, as guest-setup.sh runs it.
cd "$PROJECT" || { echo "systemd-root: no $PROJECT"; echo "$MARK-EXIT 125"; exit 1; }

if [ "$MODE" = run ]; then
	exec </dev/null
	echo "$MARK-SETUP"
	export HOME=/root ENGRAM_KVER=$KVER ENGRAM_KREL=$KREL ENGRAM_MODULE=$MODULE
	export ENGRAM_PROJECT=$PROJECT ENGRAM_IP=192.0.2.1 ENGRAM_SCRATCH=/var/lib/engram-test
	timeout --kill-after=10 "$CMD_TIMEOUT" bash -c "$CMD"
	rc=$?
	[ $rc -ne 124 ] || echo "systemd-root: command timed out after ${CMD_TIMEOUT}s"
	echo "$MARK-EXIT $rc"
	dmesg >/dev/ttyS1 2>/dev/null
	sync
	systemctl --no-block poweroff
	exit 0
fi

die() {
	echo "systemd-root: $*"
	echo "$MARK-EXIT 125"
	exit 1
}
step() {
	local d=$1
	shift
	timeout 120 "$@" || die "$d failed"
}

# --- modules: the guest kernel's that engram_rdma and rxe need, alone -----
# depmod reads every module it finds: the 4,228 of Debian's 6.12 take it
# 80 s under TCG.  A tmpfs over /lib/modules holds only these, at their
# paths, and engram_rdma in updates/ as an installed module would be.
# A kernel's modules are in the cache where run.sh says (engram_modroot,
# from init's environment), else in the host's /lib/modules.
REL=$KREL
HOSTMOD=${engram_modroot:-/lib/modules/$REL}
[ -e "$HOSTMOD/modules.dep" ] || die "no $HOSTMOD/modules.dep on the host"
mods="$(modinfo -F depends "$MODULE" | tr , ' ') rdma_rxe veth"
case "$REL" in [1-6].*) mods="$mods crc32_generic" ;; esac
need=""
for m in $mods; do
	line=$(grep -E "(^|/)${m//_/[-_]}\.ko(\.[a-z]+)?:" "$HOSTMOD/modules.dep") ||
		die "$m is not in $HOSTMOD/modules.dep"
	need="$need ${line/:/}"
done
stage=/run/engram-modules/$REL
mkdir -p "$stage/updates"
for f in modules.order modules.builtin modules.builtin.modinfo; do
	cp "$HOSTMOD/$f" "$stage/" 2>/dev/null
done
for p in $(printf '%s\n' $need | sort -u); do
	mkdir -p "$stage/${p%/*}" && cp "$HOSTMOD/$p" "$stage/$p" || die "copy $p"
done
mount -t tmpfs -o mode=0755 tmpfs /lib/modules && cp -a /run/engram-modules/. /lib/modules/ ||
	die "tmpfs on /lib/modules"
rm -rf /run/engram-modules
cp "$MODULE" "/lib/modules/$REL/updates/engram_rdma.ko" || die "copy $MODULE"
step "depmod" depmod "$REL"
echo "systemd-root: modules: $(printf '%s\n' $need | sed 's|.*/||' | sort -u | tr '\n' ' ')"

# --- the packages a host installs --------------------------------------------
VER=$(sed -n 's/^PACKAGE_VERSION="\(.*\)"$/\1/p' "$PROJECT/dkms.conf")
debs=""
for p in engramctl libengram0; do
	d=$(ls "$PROJECT/build/deb/${p}_${VER}"_*.deb 2>/dev/null | head -n1)
	[ -n "$d" ] || die "no $p $VER package in $PROJECT/build/deb (selftests/deb-check.sh)"
	debs="$debs $d"
done
# man-db's trigger would index every manual page of the machine under TCG.
rm -f /var/lib/man-db/auto-update
# shellcheck disable=SC2086
step "dpkg -i engramctl libengram0" env DEBIAN_FRONTEND=noninteractive dpkg -i $debs
systemctl is-enabled engram-rdma-tables.service >/run/engram-enabled-by-package 2>&1

# --- the boot: this test's units, none of the machine's ---------------------
for w in multi-user getty timers sockets remote-fs graphical default; do
	for u in /etc/systemd/system/$w.target.wants/*; do
		[ -e "$u" ] || [ -L "$u" ] || continue
		case "${u##*/}" in engram-*) continue ;; esac
		rm -f "$u"
	done
done
# A getty on the console would hang up the job's writes to it.
step "systemctl mask getty.target" systemctl mask getty.target
cat >/etc/systemd/system/engram-test.service <<EOF
[Unit]
Description=engram-rdma selftest under systemd (job $NONCE)
After=engram-rdma-tables.service

[Service]
Type=oneshot
ExecStart=/bin/bash $PROJECT/selftests/vm/systemd-root.sh --run $JOB
StandardOutput=tty
StandardError=tty
TTYPath=/dev/ttyS0
TimeoutStartSec=$((CMD_TIMEOUT + 60))

[Install]
WantedBy=multi-user.target
EOF
# Started before the tables unit: its state and status line every 0.1 s
# until it is active (or 300 s), for the job to read.
cat >/etc/systemd/system/engram-test-watch.service <<'EOF'
[Unit]
Description=engram-rdma selftest: watch engram-rdma-tables.service start
Before=engram-rdma-tables.service

[Service]
Type=simple
ExecStart=/bin/bash -c 'for i in $(seq 3000); do s=$(systemctl show -p ActiveState -p StatusText engram-rdma-tables.service | tr "\\n" " "); echo "$(cut -d" " -f1 /proc/uptime) $s"; case "$s" in *ActiveState=active*) exit 0 ;; esac; sleep 0.1; done >/run/engram-watch.log 2>&1'

[Install]
WantedBy=multi-user.target
EOF
step "systemctl enable the test's units" \
	systemctl enable engram-test.service engram-test-watch.service
# The tables unit comes enabled with the package (checked by the job).
systemctl enable engram-rdma-tables.service >/dev/null 2>&1
ln -sf /lib/systemd/system/multi-user.target /etc/systemd/system/default.target

# --- RDMA: Soft-RoCE on a veth pair, as guest-setup.sh makes it -------------
step "modprobe" modprobe -a veth rdma_rxe
step "veth pair er0/er1" ip -batch - <<EOB
link add er0 type veth peer name er1
address add 192.0.2.1/24 dev er0
link set lo up
link set er0 up
link set er1 up
EOB
step "rxe0 on er0" rdma link add rxe0 type rxe netdev er0

# --- a scratch file system for the tables, at their path --------------------
mkdir -p /var/lib/engram-test
step "mkfs.ext4 /dev/vda" mkfs.ext4 -q -F -L engram-scratch \
	-E lazy_itable_init=1,lazy_journal_init=1,nodiscard /dev/vda
step "mount /dev/vda" mount -t ext4 -o noinit_itable /dev/vda /var/lib/engram-test

# --- what the job wants at boot (its tables, the module's options) ----------
export ENGRAM_MODULE=$MODULE ENGRAM_PROJECT=$PROJECT ENGRAM_SCRATCH=/var/lib/engram-test
export HOME=/root ENGRAM_IP=192.0.2.1
step "the job's --prepare" bash -c "$CMD --prepare"
echo "systemd-root: root ready, handing over to systemd"
