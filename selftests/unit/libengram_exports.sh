#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# libengram as built and installed: the shared library exports exactly the
# functions libengram.h declares (and the version script lists), under the
# soname libengram.so.0; the static library defines no other global symbol;
# `make install` into a scratch DESTDIR gives a header, libraries and a
# libengram.pc with which a program compiles and runs, linked either way.
# Prints TAP.
set -uo pipefail
LIB=$(cd "$(dirname "$0")/../../tools/libengram" && pwd)
CC=${CC:-cc}
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }
same() {
	# same DESC A B: two newline-separated lists, compared sorted
	if [ "$(sort <<<"$2")" = "$(sort <<<"$3")" ]; then ok "$1"; else
		nok "$1"
		diff <(sort <<<"$2") <(sort <<<"$3") | sed 's/^/#   /'
	fi
}

make -s -C "$LIB" >/dev/null || { nok "libengram builds"; echo "1..$n"; exit 1; }
# Declarations start a line (comments start with " *").
declared=$(sed -n 's/^[a-z][a-z0-9_ ]*[ *]\(engram_[a-z_]*\)(.*/\1/p' "$LIB/libengram.h")
exported=$(nm -D --defined-only "$LIB/libengram.so.0" | awk '$2 == "T" { sub(/@.*/, "", $3); print $3 }')
mapped=$(sed -n 's/^[[:space:]]*\(engram_[a-z_]*\);$/\1/p' "$LIB/libengram.map")
static=$(nm -g --defined-only "$LIB/libengram.a" | awk 'NF == 3 { print $3 }')
check "libengram.h declares functions ($(wc -w <<<"$declared"))" test -n "$declared"
same "libengram.so.0 exports exactly the functions of libengram.h" "$declared" "$exported"
same "the version script lists exactly the functions of libengram.h" "$declared" "$mapped"
same "libengram.a defines no other global symbol" "$declared" "$static"
check "no exported data symbols" \
	test -z "$(nm -D --defined-only "$LIB/libengram.so.0" | awk '$2 ~ /^[BDR]$/')"
check "soname is libengram.so.0" \
	sh -c "readelf -d '$LIB/libengram.so.0' | grep -q 'SONAME.*\[libengram.so.0\]'"
check "symbols carry the version LIBENGRAM_0" \
	sh -c "nm -D --defined-only '$LIB/libengram.so.0' | grep -q 'engram_fetch@@LIBENGRAM_0'"
check "libengram.so links to libengram.so.0" test "$(readlink "$LIB/libengram.so")" = libengram.so.0
ver=$(sed -n 's/^PACKAGE_VERSION="\{0,1\}\([^"]*\)"\{0,1\}$/\1/p' "$LIB/../../dkms.conf")
check "libengram.so.0 links to the real file libengram.so.$ver" \
	test "$(readlink "$LIB/libengram.so.0")" = "libengram.so.$ver" -a -f "$LIB/libengram.so.$ver" \
	-a ! -L "$LIB/libengram.so.$ver"

d=$(mktemp -d)
trap 'rm -rf "$d"' EXIT
if make -s -C "$LIB" install DESTDIR="$d" PREFIX=/usr >"$d/log" 2>&1; then
	ok "make install DESTDIR=... PREFIX=/usr succeeds"
else
	nok "make install DESTDIR=... PREFIX=/usr succeeds"
	sed 's/^/#   /' "$d/log"
fi
check "header in PREFIX/include" test -f "$d/usr/include/libengram.h"
# Debian's multiarch directory, as for its own libraries.
ma=$($CC -print-multiarch)
L=$d/usr/lib/$ma
check "libengram.so.$ver, its links .so.0 and .so, and libengram.a in PREFIX/lib/$ma" \
	test -f "$L/libengram.so.$ver" -a ! -L "$L/libengram.so.$ver" -a \
	"$(readlink "$L/libengram.so.0")" = "libengram.so.$ver" -a -L "$L/libengram.so" \
	-a -f "$L/libengram.a"
check "the shared library is not executable (0644)" test "$(stat -c %a "$L/libengram.so.$ver")" = 644
check "libengram.pc names PREFIX" grep -q '^prefix=/usr$' "$L/pkgconfig/libengram.pc"
# The scratch install first, then the system's .pc files (jansson, libcrypto).
pcpath=$L/pkgconfig:$(pkg-config --variable pc_path pkg-config)
check "pkg-config --modversion libengram is $ver" \
	test "$(PKG_CONFIG_LIBDIR=$pcpath pkg-config --modversion libengram)" = "$ver"
flags=$(PKG_CONFIG_SYSROOT_DIR=$d PKG_CONFIG_LIBDIR=$pcpath \
	pkg-config --cflags --libs libengram 2>&1 | sed 's/ *$//')
static_libs=$(PKG_CONFIG_LIBDIR=$pcpath pkg-config --static --libs-only-l libengram 2>&1 |
	sed 's/-lengram//')
check "pkg-config --cflags --libs libengram: $flags" \
	test "$flags" = "-I$d/usr/include -L$L -lengram"
cat >"$d/t.c" <<'C'
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <libengram.h>
int main(void)
{
	struct engram *e;

	if (engram_open("/nonexistent/engram_rdma", &e) != -ENOENT)
		return 1;
	printf("%s %s\n", engram_version(), engram_status_name(5));
	return 0;
}
C
# shellcheck disable=SC2086
if $CC -Wall -Werror -o "$d/t" "$d/t.c" $flags 2>"$d/log" &&
   LD_LIBRARY_PATH=$L "$d/t" | grep -Eqx "${ver//./\\.} row_out_of_range"; then
	ok "a program built with pkg-config's flags links libengram.so.0 and runs"
else
	nok "a program built with pkg-config's flags links libengram.so.0 and runs"
	sed 's/^/#   /' "$d/log"
fi
check "the program depends on libengram.so.0" \
	sh -c "readelf -d '$d/t' | grep -q 'NEEDED.*\[libengram.so.0\]'"
# shellcheck disable=SC2086
if $CC -Wall -Werror -o "$d/ts" "$d/t.c" -I"$d/usr/include" "$L/libengram.a" $static_libs -pthread \
	2>"$d/log" && "$d/ts" | grep -Eqx "${ver//./\\.} row_out_of_range"; then
	ok "a program linked with libengram.a runs without the shared library"
else
	nok "a program linked with libengram.a runs without the shared library"
	sed 's/^/#   /' "$d/log"
fi
echo "1..$n"
[ $failed -eq 0 ]
