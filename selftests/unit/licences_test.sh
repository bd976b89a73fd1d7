#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make style's licence check (selftests/licences.sh) after the Python
# package was imported in the tree, as README's example does: the
# __pycache__ that leaves is not a source to check.  Prints TAP.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
pkg=$top/tools/python/engram_rdma
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }

had=0
[ -d "$pkg/__pycache__" ] && had=1
make -s -C "$top/tools" >/dev/null 2>&1 || nok "the tools build"
if (cd "$top" && env -u PYTHONDONTWRITEBYTECODE -u PYTHONPYCACHEPREFIX \
	PYTHONPATH=tools/python python3 -c 'import engram_rdma') 2>/dev/null &&
   compgen -G "$pkg/__pycache__/*.pyc" >/dev/null; then
	ok "importing engram_rdma in the tree left $(ls "$pkg/__pycache__" | head -n1)"
else
	nok "importing engram_rdma in the tree left a __pycache__"
fi
if out=$("$top/selftests/licences.sh" 2>&1); then
	ok "licences.sh passes beside it: $out"
else
	nok "licences.sh passes beside it"
	sed 's/^/#   /' <<<"$out"
fi
[ $had -eq 1 ] || rm -rf "$pkg/__pycache__"
echo "1..$n"
[ $failed -eq 0 ]
