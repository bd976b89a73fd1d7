#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make style`: kernel coding style and static checks for the module.
#  - checkpatch.pl --strict (from linux-source-6.1, extracted by deps.sh)
#    over kmod/*.[ch] and uapi/linux/*.h;
#  - sparse (make C=2) over a scratch copy of the module sources, built
#    against KDIR like selftests/vm/build-module.sh, so the in-tree build is
#    left alone;
#  - selftests/layers.py: every function named for its file, and no circle
#    among the calls between kmod/ files (Documentation/design.rst);
#  - licences (selftests/licences.sh): what engines link or include offers
#    BSD-2-Clause (LICENSE), and every tracked file has an SPDX line;
#  - selftests/ynl-spec-check.py: the family's YNL spec agrees with the
#    kernel's schema, the uapi header, kmod/netlink.c's policies and
#    Documentation/netlink.rst
#  - selftests/docs-files.sh: every tracked file is named in README.md's
#    layout table or Documentation/design.rst.
# Fails when any of them reports anything.  Logs: build/logs/style-*.log
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
CACHE=${CACHE:-/var/cache/engram-rdma}
CP=$CACHE/checkpatch/checkpatch.pl
logs=$root/build/logs
mkdir -p "$logs"

if [ ! -x "$CP" ] || ! command -v sparse >/dev/null; then
	selftests/vm/deps.sh || exit 1
fi
KDIR=${KDIR:-$(selftests/vm/kernels.sh kdir "${KVER:-6.1}")}
[ -n "$KDIR" ] && [ -d "$KDIR" ] || { echo "style: no kernel build tree (run 'make deps')" >&2; exit 1; }

rc=0
files=$(ls kmod/*.[ch] kmod/probes/*.c uapi/linux/*.h 2>/dev/null | grep -v "\.mod\.c$")
[ -n "$files" ] || { echo "style: no sources found" >&2; exit 1; }

# --- checkpatch ----------------------------------------------------------------
# SPDX tags, spelling and const-struct lists come from the files next to
# checkpatch.pl.  Out-of-tree: --no-tree; MAINTAINERS/file-path checks off.
# shellcheck disable=SC2086
"$CP" --strict --no-tree --terse --show-types --no-summary --color=never \
	--ignore FILE_PATH_CHANGES,SPDX_LICENSE_TAG_MISSING_DUMMY \
	--file $files >"$logs/style-checkpatch.log" 2>&1
cp_rc=$?
if [ $cp_rc -ne 0 ] || [ -s "$logs/style-checkpatch.log" ]; then
	echo "style: checkpatch --strict reported problems:"
	cat "$logs/style-checkpatch.log"
	rc=1
else
	echo "style: checkpatch --strict: clean ($(wc -w <<<"$files") files)"
fi

# --- licences --------------------------------------------------------------------
selftests/licences.sh || rc=1
selftests/docs-files.sh || rc=1

# --- the netlink family's YNL spec, held to the header, policies and docs ---------
if ynl=$(selftests/vm/ynl-tree.sh 2>"$logs/style-ynl.log") &&
   /usr/bin/python3 selftests/ynl-spec-check.py \
	--schema "$ynl/Documentation/netlink/genetlink-legacy.yaml" >>"$logs/style-ynl.log" 2>&1; then
	echo "style: ynl: Documentation/netlink/specs/engram_rdma.yaml agrees with the schema, uapi header, policies and netlink.rst ($(grep -c '^ok' "$logs/style-ynl.log") checks)"
else
	echo "style: selftests/ynl-spec-check.py reported problems:"
	grep -E '^(not ok|#)|ynl-tree' "$logs/style-ynl.log"
	rc=1
fi

# --- layers: names by file, no circles ---------------------------------------------
if python3 selftests/layers.py -v >"$logs/style-layers.log" 2>&1; then
	echo "style: $(tail -n 1 "$logs/style-layers.log")"
else
	echo "style: selftests/layers.py reported problems:"
	grep '^layers:' "$logs/style-layers.log"
	rc=1
fi

# --- sparse ------------------------------------------------------------------------
out=$root/build/style
mkdir -p "$out"
rsync -a --delete --exclude='*.o' --exclude='*.ko' --exclude='*.mod' --exclude='*.mod.c' \
	--exclude='.*.cmd' --exclude='modules.order' --exclude='Module.symvers' --exclude='compat_probed.h' \
	Kbuild kmod uapi "$out/"
timeout 900 make -C "$KDIR" M="$out" C=2 CF="-D__CHECK_ENDIAN__" W=1 -j"$(nproc)" modules \
	>"$logs/style-sparse.log" 2>&1
mk_rc=$?
# Everything sparse (or the compiler under W=1) says carries the file:line: prefix.
msgs=$(grep -E '^[^ ]+:[0-9]+:[0-9]+: (warning|error|note)' "$logs/style-sparse.log" |
	sed "s|$out/||")
if [ $mk_rc -ne 0 ] || [ -n "$msgs" ]; then
	echo "style: sparse (make C=2) reported problems (make exit $mk_rc):"
	if [ -n "$msgs" ]; then echo "$msgs"; else tail -n 30 "$logs/style-sparse.log"; fi
	rc=1
else
	echo "style: sparse: clean"
fi
exit $rc
