#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/docs-files.sh on a scratch git tree: a file added without a
# word in README.md's layout table or design.rst fails, and is named in
# the failure; naming it (or its .c, or its directory) passes.  make style
# runs the check on the project's own tree.  Prints TAP.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
chk=$top/selftests/docs-files.sh
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }

t=$(mktemp -d)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/kmod" "$t/Documentation" "$t/debian" "$t/selftests/guest"
printf '| Path | Contents |\n| --- | --- |\n| `kmod/` | `main.c` (wiring) |\n| `selftests/guest/` | tests |\n' >"$t/README.md"
echo "Design" >"$t/Documentation/design.rst"
for f in kmod/main.c kmod/main.h kmod/link.c kmod/linkinfo.c debian/control selftests/guest/t_00.sh; do
	: >"$t/$f"
done
git -C "$t" init -q && git -C "$t" add -A
# Run: expect exit status $1 and output matching $2.
expect() {
	local out rc

	out=$("$chk" "$t" 2>&1)
	rc=$?
	if [ $rc -eq "$1" ] && grep -qE -- "$2" <<<"$out"; then
		ok "$3"
	else
		nok "$3 (exit $rc)"
		sed 's/^/#   /' <<<"$out"
	fi
}
expect 1 '^  kmod/link\.c$' "a .c no document names fails, and is listed"
expect 1 '^  debian/control$' "... as does a file of another kind"
out=$("$chk" "$t" 2>&1)
if grep -q 'kmod/main\.[ch]$\|t_00' <<<"$out"; then
	nok "a .c named in the table, its header, and files under a directory the table names pass"
else
	ok "a .c named in the table, its header, and files under a directory the table names pass"
fi
echo '``link.c`` (the link)' >>"$t/Documentation/design.rst"
expect 1 '^  kmod/linkinfo\.c$' "a name inside a longer one (link.c in linkinfo.c) names nothing"
printf '| `linkinfo.c` | the rest |\n| `debian/`, `README.md`, `Documentation/` | the rest |\n' >>"$t/README.md"
git -C "$t" add -A
expect 0 'each of 8 tracked files is named' "once named in design.rst and the table, all pass"

echo "1..$n"
[ $failed -eq 0 ]
