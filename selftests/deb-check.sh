#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The Debian packages (TAP): a copy of the tracked tree is built with
# dpkg-buildpackage -us -uc into build/deb/, which must give
# engram-rdma-dkms, engramctl, libengram0, libengram-dev and
# python3-engram-rdma at engram-rdma's version with the files each is for;
# lintian must report no error and no warning (the tags left are listed as
# diagnostics; debian/*.lintian-overrides explain the ones overridden).
# Then the next patch version of the same tree into build/deb/next/.
# t_85_packages installs the packages in a guest, and upgrades them to the
# next version's.
#
# Usage: deb-check.sh [OUTDIR]   (default build/deb)
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$root/build/deb}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else notok "$d"; fi; }
diag() { sed 's/^/# /'; }

ver=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$root/dkms.conf")
cver=$(cd "$root" && dpkg-parsechangelog -S Version 2>/dev/null)
check "debian/changelog's version is engram-rdma's ($cver, $ver)" test "$cver" = "$ver"
for t in dpkg-buildpackage dh dh_dkms dh_python3 lintian; do
	command -v $t >/dev/null || { notok "$t is installed (run 'make deps')"; echo "1..$n"; exit 1; }
done

# A clean copy of what git tracks: nothing built in the tree gets in.
rm -rf "$out"
src=$out/engram-rdma-$ver
mkdir -p "$src"
(cd "$root" && git ls-files -z | xargs -0 tar -cf - --) | tar -xf - -C "$src" ||
	{ notok "copy the tracked tree"; echo "1..$n"; exit 1; }
log=$out/build.log
if (cd "$src" && timeout 1200 dpkg-buildpackage -us -uc) >"$log" 2>&1; then
	ok "dpkg-buildpackage -us -uc"
else
	notok "dpkg-buildpackage -us -uc"
	grep -Ei -m 20 'error|warning|dh_.*:' "$log" | diag
	tail -n 20 "$log" | diag
	echo "1..$n"
	exit 1
fi

arch=$(dpkg --print-architecture)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
deb() { echo "$out/${1}_${ver}_$2.deb"; }
has() {
	# has PACKAGE ARCH PATH...: the package holds every PATH
	local f p list
	f=$(deb "$1" "$2")
	list=$(dpkg-deb -c "$f" 2>/dev/null | awk '{ print $6 }' | sed 's|^\./|/|; s| ->.*||')
	shift 2
	for p in "$@"; do
		grep -qx "$p" <<<"$list" || { echo "# missing $p"; return 1; }
	done
}
for p in engram-rdma-dkms:all engramctl:$arch libengram0:$arch libengram-dev:$arch \
	 python3-engram-rdma:all; do
	f=$(deb "${p%%:*}" "${p#*:}")
	check "${p%%:*} $ver built" test -s "$f"
done
check "engram-rdma-dkms: the module's sources and dkms.conf in /usr/src/engram-rdma-$ver" \
	has engram-rdma-dkms all /usr/src/engram-rdma-$ver/dkms.conf \
	/usr/src/engram-rdma-$ver/Kbuild /usr/src/engram-rdma-$ver/kmod/main.c \
	/usr/src/engram-rdma-$ver/uapi/linux/engram_rdma.h
dkms_list=$(dpkg-deb -c "$(deb engram-rdma-dkms all)" 2>/dev/null)
check "engram-rdma-dkms: no build product in the sources" \
	test -n "$dkms_list" -a -z "$(grep -E '\.(o|ko|mod|cmd)$|compat_probed\.h' <<<"$dkms_list")"
check "engramctl: the tool, its pages, the units, the udev rule, the memlock, modprobe.d and modules-load.d files" \
	has engramctl "$arch" /usr/sbin/engramctl /usr/share/man/man8/engramctl.8.gz \
	/usr/share/man/man4/engram_rdma.4.gz /lib/systemd/system/engram-rdma-tables.service \
	/lib/systemd/system/engram-rdma-prom.service /lib/systemd/system/engram-rdma-prom.timer \
	/usr/lib/udev/rules.d/60-engram-rdma.rules /etc/security/limits.d/engram-rdma.conf \
	/etc/modprobe.d/engram_rdma.conf /etc/modules-load.d/engram_rdma.conf \
	/etc/engram-rdma/tables.conf.example \
	/usr/share/bash-completion/completions/engramctl
check "libengram0: libengram.so.$ver and its soname link in /usr/lib/$ma" \
	has libengram0 "$arch" /usr/lib/"$ma"/libengram.so.$ver /usr/lib/"$ma"/libengram.so.0
check "engram-rdma-dkms: its postinst has dkms build the module (common.postinst)" \
	sh -c "dpkg-deb --ctrl-tarfile '$(deb engram-rdma-dkms all)' | tar -xO ./postinst | grep -q 'dkms/common.postinst'"
check "and no other package's sources hold dkms.conf" \
	test -z "$(for p in engramctl libengram0 libengram-dev; do dpkg-deb -c "$(deb $p "$arch")"; done |
		grep dkms.conf)"
check "engramctl: its postinst enables the tables unit (deb-systemd-helper)" \
	sh -c "dpkg-deb --ctrl-tarfile '$(deb engramctl "$arch")' | tar -xO ./postinst | grep -q 'deb-systemd-helper.*engram-rdma-tables.service'"
check "engramctl: the metrics timer is installed disabled (no maintainer script names it)" \
	test -z "$(dpkg-deb --ctrl-tarfile "$(deb engramctl "$arch")" |
		tar -xO ./postinst ./prerm ./postrm 2>/dev/null | grep engram-rdma-prom)"
# An upgrade must leave the tables loaded: the unit's stop unloads them.
ctl_script() { dpkg-deb --ctrl-tarfile "$(deb engramctl "$arch")" | tar -xO "./$1" 2>/dev/null; }
postinst=$(ctl_script postinst)
check "engramctl: an upgrade does not restart the tables unit (postinst only starts it)" \
	test -n "$(grep 'deb-systemd-invoke' <<<"$postinst")" -a \
	-z "$(grep -E '_dh_action=restart|deb-systemd-invoke (try-)?restart' <<<"$postinst")"
check "engramctl: nor stop it (prerm stops it on remove only)" \
	awk '/deb-systemd-invoke stop/ { n++; if (prev !~ /"\$1" = remove/) bad = 1 }
		{ prev = $0 } END { exit !(n >= 1 && !bad) }' <<<"$(ctl_script prerm)"
check "libengram0: a symbols file" \
	sh -c "dpkg-deb --ctrl-tarfile '$(deb libengram0 "$arch")' | tar -t | grep -qx './symbols'"
check "libengram-dev: header, libengram.so, libengram.a, libengram.pc, libengram(3)" \
	has libengram-dev "$arch" /usr/include/libengram.h /usr/lib/"$ma"/libengram.so \
	/usr/lib/"$ma"/libengram.a /usr/lib/"$ma"/pkgconfig/libengram.pc \
	/usr/share/man/man3/libengram.3.gz
check "python3-engram-rdma: the package where Debian's python3 looks" \
	has python3-engram-rdma all /usr/lib/python3/dist-packages/engram_rdma/__init__.py \
	/usr/lib/python3/dist-packages/engram_rdma/py.typed
check "python3-engram-rdma depends on libengram0" \
	sh -c "dpkg-deb -f '$(deb python3-engram-rdma all)' Depends | grep -q 'libengram0'"

changes=$(ls "$out"/engram-rdma_"$ver"_*.changes 2>/dev/null | head -n1)
lint=$(timeout 900 lintian --fail-on error,warning --display-info --pedantic "$changes" 2>&1)
rc=$?
if [ $rc -eq 0 ]; then
	ok "lintian: no error or warning ($(grep -c "^[IPX]: " <<<"$lint") info and pedantic tags)"
else
	notok "lintian: no error or warning (exit $rc)"
fi
[ -z "$lint" ] || diag <<<"$lint"

# The next patch version of the same tree (tools/set-version.sh), binary
# packages only, into $out/next: what t_85_packages upgrades to.
next=$(awk -F. '{ printf "%d.%d.%d", $1, $2, $3 + 1 }' <<<"$ver")
nsrc=$out/next/engram-rdma-$next
mkdir -p "$nsrc"
(cd "$root" && git ls-files -z | xargs -0 tar -cf - --) | tar -xf - -C "$nsrc" &&
	"$root/tools/set-version.sh" --tree "$nsrc" "$next" \
		"Test build of the next version: the upgrade that t_85_packages installs." &&
	(cd "$nsrc" && timeout 1200 dpkg-buildpackage -us -uc -b) >"$out/next/build.log" 2>&1
rc=$?
check "the next version, $next, builds for the upgrade test (dpkg-buildpackage -b)" test $rc -eq 0
[ $rc -eq 0 ] || tail -n 20 "$out/next/build.log" | diag
for p in engram-rdma-dkms:all engramctl:$arch libengram0:$arch libengram-dev:$arch \
	 python3-engram-rdma:all; do
	check "  ...${p%%:*} $next" test -s "$out/next/${p%%:*}_${next}_${p#*:}.deb"
done
echo "1..$n"
exit $failed
