#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/layers.py, the checker of kmod/'s shape (make style), on small
# trees of its own: it must pass a clean one and catch a circle between
# files, a function not named for its file, one that reads as a longer
# sibling's, and must not be fooled by "//" inside a string, and catch a
# circle between a user-space program's files.  Then the real tree.
# Prints TAP.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
LAYERS=$here/../layers.py
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# tree NAME FILE=BODY...: a kmod/ of the given files
tree() {
	local d=$tmp/$1 f
	shift
	mkdir -p "$d/kmod"
	for f in "$@"; do printf '%b\n' "${f#*=}" >"$d/kmod/${f%%=*}"; done
	echo "$d"
}
# expect DESC RC PATTERN ROOT: layers.py exits RC and prints PATTERN
expect() {
	local out rc
	out=$(python3 "$LAYERS" --root "$4" 2>&1)
	rc=$?
	if [ "$rc" = "$2" ] && grep -q -- "$3" <<<"$out"; then ok "$1"; else
		nok "$1 (exit $rc)"
		sed 's/^/#   /' <<<"$out"
	fi
}

lo='int engram_lo_get(void)\n{\n\treturn 1;\n}'
up='int engram_up_use(void)\n{\n\treturn engram_lo_get();\n}'
d=$(tree clean "lo.c=$lo" "up.c=$up")
expect "a clean tree passes, its arrow counted" 0 "2 files, 1 arrows, 0 circles, 0 misnamed" "$d"

back='int engram_lo_get(void)\n{\n\treturn engram_up_use();\n}'
d=$(tree circle "lo.c=$back" "up.c=$up")
expect "a circle between two files is caught" 1 "circle: lo.c, up.c" "$d"

bad='static int engram_other_get(void)\n{\n\treturn 1;\n}'
d=$(tree misnamed "lo.c=$bad")
expect "a function not named for its file is caught" 1 "engram_other_get() is not named engram_lo_" "$d"

sib='int engram_lo_x_get(void)\n{\n\treturn 1;\n}'
d=$(tree sibling "lo.c=$sib" "lo_x.c=int engram_lo_x_put(void)\n{\n\treturn 0;\n}")
expect "a name that reads as a longer sibling's is caught" 1 "engram_lo_x_get() reads as lo_x.c" "$d"

str='int engram_lo_get(void)\n{\n\tpr("rdma:// or tcp://");\n\treturn 1;\n}\n\nint engram_lo_put(void)\n{\n\treturn 0;\n}'
use='int engram_up_use(void)\n{\n\treturn engram_lo_put();\n}'
d=$(tree string "lo.c=$str" "up.c=$use")
expect "\"//\" in a string hides no definition" 0 "2 files, 1 arrows" "$d"

# A user-space program: no naming rule, but no circle either.
mkdir -p "$d/tools/engramctl"
printf 'int sync_run(void)\n{\n\treturn table_load();\n}\n' >"$d/tools/engramctl/sync.c"
printf 'static int helper(void)\n{\n\treturn 0;\n}\n\nint table_load(void)\n{\n\treturn helper();\n}\n' \
	>"$d/tools/engramctl/table.c"
expect "engramctl's files calling one way pass" 0 "engramctl: 2 files, 1 arrows, 0 circles" "$d"
printf 'static int helper(void)\n{\n\treturn sync_run();\n}\n\nint table_load(void)\n{\n\treturn helper();\n}\n' \
	>"$d/tools/engramctl/table.c"
expect "a circle between engramctl's files is caught" 1 \
	"circle in engramctl: tools/engramctl/sync.c, tools/engramctl/table.c" "$d"

expect "kmod/ itself: no circle, every function named for its file" 0 " 0 circles, 0 misnamed" "$here/../.."
expect "engramctl and libengram: no circle" 0 "engramctl: [0-9]* files, [0-9]* arrows, 0 circles; libengram: [0-9]* files, [0-9]* arrows, 0 circles" "$here/../.."

echo "1..$n"
[ "$failed" -eq 0 ]
