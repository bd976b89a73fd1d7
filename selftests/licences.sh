#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The licence check of `make style` (selftests/style.sh runs it):
#  - what engines link or include must stay usable from an Apache-2.0
#    engine (LICENSE): every source libengram.so is built from, the Python
#    binding and the uapi header offer BSD-2-Clause.  libengram's sources
#    are the ones its compiler's dependency files list, so a new file it
#    pulls in is checked too;
#  - every file git tracks but those of formats without comments names a
#    licence.
# The Python package's files are the ones git tracks: importing it in the
# tree (as README's example does) leaves a __pycache__ that is nobody's
# source.  Outside a git work tree (a release tarball) every file there
# counts but Python's caches.  Prints one line; fails on any finding.
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

tracked() {
	if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
		git ls-files -- "$@"
	else
		find "$@" -type f ! -path '*/__pycache__/*' 2>/dev/null | sort
	fi
}

rc=0
make -s -C tools/libengram >/dev/null 2>&1 || { echo "style: libengram does not build"; rc=1; }
lic_bad=""
lic_n=0
for f in $( (cd tools/libengram && cat ./*.d 2>/dev/null | tr ' \\' '\n\n' |
	grep -v -e '^$' -e ':$' -e '^/' | sort -u | sed 's|^|tools/libengram/|');
	tracked tools/python uapi/linux); do
	f=$(realpath -m --relative-to=. "$f")
	lic_n=$((lic_n + 1))
	head -n 3 "$f" | grep -q 'SPDX-License-Identifier: .*OR BSD-2-Clause' || lic_bad="$lic_bad $f"
done
for f in $(git ls-files 2>/dev/null); do
	# Formats without comments: Debian's changelog, copyright and source format.
	case "$f" in
	Documentation/bench-latest.inc | *.png | README.md) continue ;;
	debian/changelog | debian/copyright | debian/source/format) continue ;;
	esac
	head -n 3 "$f" | grep -q 'SPDX-License-Identifier: ' || lic_bad="$lic_bad $f(no SPDX line)"
done
if [ "$lic_n" -lt 15 ] || [ -n "$lic_bad" ]; then
	echo "style: licences: $lic_n linkable files; not dual-licensed or without SPDX:${lic_bad:- none}"
	rc=1
else
	echo "style: licences: $lic_n files engines link or include offer BSD-2-Clause"
fi
exit $rc
