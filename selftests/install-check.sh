#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make install` into a scratch DESTDIR puts the module (with depmod data),
# engramctl, its man page and the modprobe.d example where a distribution
# expects them, and a second install keeps an edited modprobe.d file.
# Prints TAP.
set -uo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
dest=$(mktemp -d)
trap 'rm -rf "$dest"' EXIT
n=0 failed=0
check() {
	local d=$1
	shift
	n=$((n + 1))
	if "$@"; then echo "ok $n - $d"; else echo "not ok $n - $d"; failed=$((failed + 1)); fi
}

kdir=${KDIR:-$(selftests/vm/kernels.sh kdir "${KVER:-6.1}")}
krel=$(make -s krel KDIR="$kdir")
uts=$(sed -n 's/^#define UTS_RELEASE "\(.*\)"/\1/p' "$kdir/include/generated/utsrelease.h")
check "modules install for the release the kernel reports ($uts)" test -n "$krel" -a "$krel" = "$uts"
group_before=$(getent group engram)
if ! make -s install KDIR="$kdir" DESTDIR="$dest" PREFIX=/usr >"$dest.log" 2>&1; then
	sed 's/^/# /' "$dest.log"
	check "make install DESTDIR=... PREFIX=/usr succeeds" false
else
	check "make install DESTDIR=... PREFIX=/usr succeeds" true
fi
check "module installed under lib/modules/$krel/updates" \
	test -f "$dest/lib/modules/$krel/updates/engram_rdma.ko"
check "depmod ran for the installed module" \
	grep -q "updates/engram_rdma.ko" "$dest/lib/modules/$krel/modules.dep"
check "engramctl installed in PREFIX/sbin" test -x "$dest/usr/sbin/engramctl"
check "man page installed" test -f "$dest/usr/share/man/man8/engramctl.8"
check "libengram(3) and engram_rdma(4) installed" \
	test -f "$dest/usr/share/man/man3/libengram.3" -a -f "$dest/usr/share/man/man4/engram_rdma.4"
check "modprobe.d example installed" test -f "$dest/etc/modprobe.d/engram_rdma.conf"
check "with no active line: the module loads with no listener or link until the admin says" \
	test -z "$(grep -v '^[[:space:]]*\(#\|$\)' "$dest/etc/modprobe.d/engram_rdma.conf")"
check "the udev rule installed where packages put them (PREFIX=/usr)" \
	grep -q 'GROUP="engram", MODE="0660"' "$dest/usr/lib/udev/rules.d/60-engram-rdma.rules"
check "the modules-load.d entry installed, disabled (a GPU node enables it)" \
	test -n "$(grep -x '#engram_rdma' "$dest/etc/modules-load.d/engram_rdma.conf")" -a \
	-z "$(grep -v '^[[:space:]]*\(#\|$\)' "$dest/etc/modules-load.d/engram_rdma.conf")"
check "the memlock snippet installed in limits.d" \
	grep -q '^@engram.*memlock' "$dest/etc/security/limits.d/engram-rdma.conf"
rm -f "$dest/etc/modprobe.d/engram_rdma.conf"
make -s -C tools install DESTDIR="$dest" PREFIX=/usr >/dev/null 2>&1
check "the tools' install alone installs the modprobe.d example too" \
	test -f "$dest/etc/modprobe.d/engram_rdma.conf"
check "an install into DESTDIR adds no group to the machine" \
	test "$(getent group engram)" = "$group_before"
unit=$dest/usr/lib/systemd/system/engram-rdma-tables.service
check "engram-rdma-tables.service installed, naming the installed engramctl" \
	grep -q '^ExecStart=/usr/sbin/engramctl table sync --config /etc/engram-rdma/tables.conf$' "$unit"
check "bash completion installed where bash-completion loads it" \
	test -f "$dest/usr/share/bash-completion/completions/engramctl"
check "its man page and the tables.conf example installed" \
	test -f "$dest/usr/share/man/man5/engram-rdma-tables.conf.5" -a \
	-f "$dest/etc/engram-rdma/tables.conf.example"
# With engramctl where this machine has it (not installed here); the
# metrics timer's units beside (installed, not enabled).
mkdir -p "$dest/verify"
sysd=$dest/usr/lib/systemd/system
for u in engram-rdma-tables.service engram-rdma-prom.service engram-rdma-prom.timer; do
	if [ ! -f "$sysd/$u" ]; then
		check "$u installed" false
		continue
	fi
	sed "s|/usr/sbin/engramctl|$root/tools/engramctl/engramctl|" "$sysd/$u" >"$dest/verify/$u"
done
check "the metrics service writes node_exporter's textfile directory, atomically" \
	grep -qx 'ExecStart=/usr/sbin/engramctl stats --prometheus --output /var/lib/prometheus/node-exporter/engram_rdma.prom' \
	"$sysd/engram-rdma-prom.service"
out=$(cd "$dest/verify" && systemd-analyze verify --man=no engram-rdma-tables.service \
	engram-rdma-prom.service engram-rdma-prom.timer 2>&1)
check "systemd-analyze verify finds nothing wrong with the three units${out:+ ($out)}" test -z "$out"
# The sandboxes, as systemd-analyze rates them (0 to 10; 9.6 without): no
# running systemd needed.
for u in engram-rdma-tables.service engram-rdma-prom.service; do
	sec=$(systemd-analyze security --offline=true "$dest/verify/$u" 2>&1)
	level=$(sed -n 's/.*Overall exposure level for [^:]*: \([0-9.]*\).*/\1/p' <<<"$sec")
	check "systemd-analyze security rates $u's sandbox ${level:-?}, at most 2.0" \
		awk -v l="${level:-99}" 'BEGIN { exit !(l <= 2.0) }'
done
check "the example file parses: engramctl sync --dry-run reads it before anything else" \
	sh -c 'out=$(tools/engramctl/engramctl table sync --dry-run --config "$1" 2>&1);
		case "$out" in *"module not loaded"*) exit 0;; esac
		echo "# $out"; exit 1' _ "$dest/etc/engram-rdma/tables.conf.example"
py=$dest/usr/lib/python3/dist-packages/engram_rdma
check "the Python package installed where Debian's python3 looks (PREFIX=/usr)" \
	test -f "$py/__init__.py" -a -f "$py/py.typed"
check "and it imports from there, finding the installed libengram" \
	env -u ENGRAM_LIBENGRAM LD_LIBRARY_PATH="$dest/usr/lib/$(cc -print-multiarch)" PYTHONPATH="${py%/engram_rdma}" \
	/usr/bin/python3 -c 'import engram_rdma, sys
assert engram_rdma.__file__.startswith(sys.argv[1]), engram_rdma.__file__
engram_rdma.load_library()' "$dest"
echo "options engram_rdma listen=rdma://192.0.2.10:18515" >"$dest/etc/modprobe.d/engram_rdma.conf"
make -s install KDIR="$kdir" DESTDIR="$dest" PREFIX=/usr >/dev/null 2>&1
check "a second install keeps the admin's modprobe.d file" \
	grep -q "^options engram_rdma listen=rdma://192.0.2.10:18515$" "$dest/etc/modprobe.d/engram_rdma.conf"
make -s uninstall KDIR="$kdir" DESTDIR="$dest" PREFIX=/usr >"$dest.log" 2>&1
check "make uninstall succeeds" test $? -eq 0
left=$(cd "$dest" && find . -type f ! -path './etc/*' ! -path './verify/*' \
	! -name 'modules.*' | sort | tr '\n' ' ')
check "and leaves nothing but the admin's /etc and depmod's indexes${left:+ ($left)}" \
	test -z "$left"
check "the admin's files under /etc stay" \
	test -f "$dest/etc/modprobe.d/engram_rdma.conf" -a -f "$dest/etc/security/limits.d/engram-rdma.conf"
rm -f "$dest.log"
echo "1..$n"
[ $failed -eq 0 ]
