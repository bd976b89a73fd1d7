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
echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
