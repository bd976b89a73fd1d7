#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The manual pages of tools/man: each renders without a single warning, as
# lintian renders them (man --warnings, which is groff -ww); engram_rdma.4
# sets in bold every module parameter kmod/*.c declares with module_param*(),
# and libengram.3 every function the global: section of libengram.map
# exports, so a parameter or a function added without its documentation
# fails here.  Needs man(1) (man-db, with groff-base).  Prints TAP.
set -u
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
mandir=$top/tools/man
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
finish() {
	echo "1..$n"
	echo "# $((n - failed)) passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

if ! command -v man >/dev/null 2>&1; then
	nok "man(1) not found: install man-db (and groff-base) to check the manual pages"
	finish
fi

shopt -s nullglob
pages=("$mandir"/*.[1-8])
shopt -u nullglob
if [ ${#pages[@]} -eq 0 ]; then
	nok "no manual page in tools/man"
	finish
fi

# As lintian's manpage check: anything on stderr is a warning.
for page in "${pages[@]}"; do
	rel=${page#"$top"/}
	warn=$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 \
		man --warnings -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)
	rc=$?
	if [ -z "$warn" ] && [ $rc -eq 0 ]; then
		ok "$rel renders without warnings"
	else
		nok "$rel renders without warnings$([ $rc -eq 0 ] || echo " (man exited $rc)")"
		while IFS= read -r line; do echo "#   $line"; done <<<"$warn"
	fi
done

# The words PAGE sets in bold, one a line: maximal runs of bold letters,
# digits and underscores, read from grotty's overstrikes ("c\bc").
bold_words() {
	MAN_KEEP_FORMATTING=1 GROFF_NO_SGR=1 LC_ALL=C.UTF-8 MANWIDTH=80 \
		man --nh --nj -E UTF-8 -l "$1" 2>/dev/null |
		sed 's/\(.\)\x08\1/\x01\1/g' |
		grep -ao $'\\(\001[A-Za-z0-9_]\\)\\+' | tr -d '\001' | sort -u
}

# The words of PAGE as plain text, one a line.
plain_words() {
	LC_ALL=C.UTF-8 MANWIDTH=80 man --nh --nj -E UTF-8 -l "$1" 2>/dev/null |
		grep -ao '[A-Za-z0-9_]\+' | sort -u
}

# names_in_bold PAGE WHAT NAMES: every one of NAMES (one a line) in bold in PAGE.
names_in_bold() {
	local page=$mandir/$1 what=$2 names=$3 bold plain missing="" why="" name count
	count=$(grep -c . <<<"$names")
	if [ -z "$names" ]; then
		nok "$1: found no $what to look for (is the pattern stale?)"
		return
	fi
	if [ ! -f "$page" ]; then
		nok "tools/man/$1 exists, to name the $count $what"
		return
	fi
	bold=$(bold_words "$page")
	plain=$(plain_words "$page")
	while read -r name; do
		if grep -qxF "$name" <<<"$bold"; then
			continue
		fi
		missing+=" $name"
		if grep -qxF "$name" <<<"$plain"; then
			why+="#   $name: in the page, but not in bold"$'\n'
		else
			why+="#   $name: not in the page"$'\n'
		fi
	done <<<"$names"
	if [ -z "$missing" ]; then
		ok "$1 names all $count $what in bold"
	else
		nok "$1 names all $count $what in bold; missing:$missing"
		printf '%s' "$why"
	fi
}

params=$(sed -n 's/^[[:space:]]*module_param[a-z_]*([[:space:]]*\([A-Za-z0-9_]\+\)[[:space:]]*,.*/\1/p' \
	"$top"/kmod/*.c | sort -u)
names_in_bold engram_rdma.4 "module parameters of kmod/*.c" "$params"
# The admin guide too: as a literal (``name``, ``name=...``) or a heading (name=).
missing=""
for p in $params; do
	grep -qE "(\`\`|^|, )$p(=|\`\`)" "$top/Documentation/admin-guide.rst" || missing="$missing $p"
done
if [ -z "$missing" ]; then
	ok "admin-guide.rst names all $(wc -w <<<"$params") module parameters of kmod/*.c"
else
	nok "admin-guide.rst names all module parameters of kmod/*.c; missing:$missing"
fi

symbols=$(awk '/^[[:space:]]*global:/ { g = 1; next } /^[[:space:]]*local:/ { g = 0 } g' \
	"$top/tools/libengram/libengram.map" |
	sed -n 's/^[[:space:]]*\([A-Za-z_][A-Za-z0-9_]*\);.*/\1/p' | sort -u)
names_in_bold libengram.3 "functions of libengram.map" "$symbols"

finish
