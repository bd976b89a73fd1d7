#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One version everywhere: dkms.conf's PACKAGE_VERSION is engram-rdma's
# version, and the module (its source and, when built, modinfo), engramctl
# -V, libengram (its header, engram_version(), the real file name
# libengram.so.X.Y.Z) and the Python package say the same.  pkg-config's
# is checked by libengram_exports.sh.  Prints TAP.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
same() {
	# same WHAT GOT
	if [ "$2" = "$ver" ]; then ok "$1: $2"; else nok "$1: '$2', not $ver"; fi
}

ver=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$top/dkms.conf")
if [[ $ver =~ ^[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
	ok "dkms.conf's PACKAGE_VERSION is MAJOR.MINOR.PATCH ($ver)"
else
	nok "dkms.conf's PACKAGE_VERSION is MAJOR.MINOR.PATCH (got '$ver')"
	echo "1..$n"
	exit 1
fi
same "kmod/engram.h ENGRAM_VERSION" \
	"$(sed -n 's/^#define ENGRAM_VERSION[[:space:]]*"\(.*\)"$/\1/p' "$top/kmod/engram.h")"
ko=$top/kmod/engram_rdma.ko
if [ -f "$ko" ]; then
	same "modinfo -F version of the built module" "$(modinfo -F version "$ko")"
else
	echo "ok $((n += 1)) - modinfo of the built module # SKIP kmod/engram_rdma.ko not built"
fi
make -s -C "$top/tools" >/dev/null 2>&1 || nok "the tools build"
same "engramctl -V" "$("$top/tools/engramctl/engramctl" -V | awk '{ print $2 }')"
h=$top/tools/libengram/libengram.h
same "libengram.h LIBENGRAM_VERSION_*" "$(for p in MAJOR MINOR PATCH; do
	sed -n "s/^#define LIBENGRAM_VERSION_$p[[:space:]]*\([0-9]*\)$/\1/p" "$h"; done | paste -sd.)"
real=$(readlink "$top/tools/libengram/libengram.so.0")
same "the real file libengram.so.0 links to" "${real#libengram.so.}"
py=/usr/bin/python3
[ -x $py ] || py=python3
same "the Python package's __version__" \
	"$(PYTHONPATH=$top/tools/python $py -c 'import engram_rdma; print(engram_rdma.__version__)')"
for m in "$top"/tools/man/*.[0-9]; do
	grep -q '^\.TH .*"engram-rdma ' "$m" || continue
	same "${m#"$top"/}'s title" "$(sed -n 's/^\.TH .*"engram-rdma \([^"]*\)".*/\1/p' "$m")"
done
# tools/set-version.sh, on a copy of the tree: every place then says the
# new version (the changelog too), and the old one nowhere.
tmp=$(mktemp -d)
(cd "$top" && git ls-files -z dkms.conf kmod/engram.h tools/engramctl/engramctl.h tools/libengram/libengram.h \
	tools/python/engram_rdma/__init__.py tools/man debian/changelog tools/set-version.sh |
	xargs -0 tar -cf - --) | tar -xf - -C "$tmp"
nv=$(awk -F. '{ printf "%d.%d.%d", $1, $2 + 1, 0 }' <<<"$ver")
if "$tmp/tools/set-version.sh" "$nv" "A test." >/dev/null 2>&1 &&
   [ "$(sed -n '1s/^engram-rdma (\([^)]*\)).*/\1/p' "$tmp/debian/changelog")" = "$nv" ] &&
   grep -q "^#define LIBENGRAM_VERSION_MINOR[[:space:]]*$(cut -d. -f2 <<<"$nv")\$" \
	"$tmp/tools/libengram/libengram.h" &&
   [ -z "$(grep -rlF "$ver" "$tmp/dkms.conf" "$tmp/kmod" "$tmp/tools/engramctl" "$tmp/tools/python" \
	"$tmp/tools/man")" ]; then
	ok "tools/set-version.sh $nv writes it in every place, and a changelog entry"
else
	nok "tools/set-version.sh $nv writes it in every place, and a changelog entry"
fi
rm -rf "$tmp"
echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
