#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Line coverage of kmod/'s pure-logic files from their user-space unit
# tests:  unit-coverage.sh OUT.info
#
# url.c, list.c, prefix.c, wire.c, wbuild.c, pieces.c and rowmap.c compile
# in user space too (ENGRAM_USERSPACE), where selftests/unit tests them far
# more densely than any guest can (every refusal of every parser).  This builds those tests
# again with --coverage in a scratch copy of the tree, runs them, and
# writes their lines of kmod/*.c as an lcov tracefile, for
# selftests/coverage.sh to add to the kernel's counters.  Prints a TAP
# diagnostic per test; exits non-zero when a test fails or lcov does.
set -uo pipefail
export LC_ALL=C

out=${1:?usage: unit-coverage.sh OUT.info}
root=$(cd "$(dirname "$0")/.." && pwd)
GCOV=${GCOV:-gcov-12}
command -v "$GCOV" >/dev/null || GCOV=gcov
TESTS=(test_url test_list test_prefix test_wire test_wbuild test_pieces test_rowmap)

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Only what the tests build from: their sources, the module's, the uapi
# header and engramctl's headers.
mkdir -p "$tmp/selftests" "$tmp/tools"
cp -r "$root/kmod" "$root/uapi" "$tmp/"
cp -r "$root/selftests/unit" "$tmp/selftests/"
cp -r "$root/tools/engramctl" "$root/tools/lib" "$tmp/tools/"
make -s -C "$tmp/selftests/unit" clean >/dev/null 2>&1
rm -f "$tmp"/selftests/unit/*.gcda "$tmp"/selftests/unit/*.gcno
if ! make -s -C "$tmp/selftests/unit" CFLAGS="-O0 -g --coverage" "${TESTS[@]}" \
	>"$tmp/build.log" 2>&1; then
	echo "# unit-coverage: build failed:"
	sed 's/^/#   /' "$tmp/build.log" | head -n 15
	exit 1
fi
bad=0
for t in "${TESTS[@]}"; do
	if (cd "$tmp/selftests/unit" && "./$t" >"$tmp/$t.out" 2>&1); then
		echo "# unit-coverage: $t ran ($(grep -c '^ok' "$tmp/$t.out") results)"
	else
		echo "# unit-coverage: $t failed"
		bad=$((bad + 1))
	fi
done
if ! lcov --quiet --gcov-tool "$GCOV" --rc lcov_branch_coverage=0 --capture \
	--directory "$tmp/selftests/unit" --output-file "$tmp/all.info" 2>"$tmp/lcov.err" ||
   ! lcov --quiet --rc lcov_branch_coverage=0 --extract "$tmp/all.info" "$tmp/kmod/*.c" \
	--output-file "$out" 2>>"$tmp/lcov.err"; then
	echo "# unit-coverage: lcov failed:"
	sed 's/^/#   /' "$tmp/lcov.err" | head -n 10
	exit 1
fi
[ $bad -eq 0 ]
