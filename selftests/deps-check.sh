#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Does `make deps` leave the machine alone?  (TAP)
#
#   deps-check.sh snapshot FILE          record the machine's state in FILE
#   deps-check.sh compare BEFORE [AFTER] compare two records (AFTER: the
#                                        machine now)
#
# A record holds the installed packages with their versions, and what is in
# /boot, in /lib/modules (two levels) and in /usr/src.  make check records
# one before deps.sh and compares after it.  What deps.sh may do is add
# build tools from bookworm: so every package there before is there after
# at the same version (nothing upgraded: not linux-libc-dev, not
# linux-perf), no package it added is a kernel, kernel headers, modules,
# kbuild or kernel source, none comes from backports (~bpo), and /boot,
# /lib/modules and /usr/src are as they were (the guests' kernels are in
# the cache: kheaders.sh).
set -uo pipefail
export LC_ALL=C

snapshot() {
	dpkg-query -W -f='pkg ${binary:Package} ${Version} ${db:Status-Abbrev}\n' 2>/dev/null |
		awk '$4 ~ /^.i/ { print $1, $2, $3 }' | sort
	[ -d /boot ] && find /boot -xdev -printf 'fs %p %y %s %l\n' 2>/dev/null | sort
	[ -d /usr/src ] && find /usr/src -mindepth 1 -maxdepth 2 -printf 'fs %p %y\n' | sort
	[ -d /lib/modules ] && find /lib/modules -mindepth 1 -maxdepth 2 -printf 'fs %p %y\n' | sort
	return 0
}

n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
notok() { n=$((n + 1)); failed=1; echo "not ok $n - $1"; }
diag() { sed 's/^/# /'; }

compare() {
	local before=$1 after=$2 changed added bad fs
	# Packages there before that are gone or at another version.
	changed=$(awk 'NR == FNR { if ($1 == "pkg") v[$2] = $3; next }
		$1 == "pkg" { a[$2] = $3 }
		END { for (p in v) if (!(p in a)) print p, v[p], "-> removed";
		      else if (a[p] != v[p]) print p, v[p], "->", a[p] }' "$before" "$after" | sort)
	if [ -z "$changed" ]; then
		ok "no package removed or upgraded"
	else
		notok "no package removed or upgraded"
		head -n 20 <<<"$changed" | diag
	fi
	added=$(awk 'NR == FNR { if ($1 == "pkg") v[$2] = 1; next }
		$1 == "pkg" && !($2 in v) { print $2, $3 }' "$before" "$after" | sort)
	echo "# deps added $(grep -c . <<<"$added") packages"
	bad=$(grep -E '^linux-(image|headers|modules|kbuild|source|binary)-' <<<"$added")
	if [ -z "$bad" ]; then
		ok "no kernel, kernel headers, modules or kernel source installed"
	else
		notok "no kernel, kernel headers, modules or kernel source installed"
		head -n 20 <<<"$bad" | diag
	fi
	bad=$(awk '$2 ~ /~bpo/' <<<"$added")
	if [ -z "$bad" ]; then
		ok "nothing installed from bookworm-backports"
	else
		notok "nothing installed from bookworm-backports"
		head -n 20 <<<"$bad" | diag
	fi
	fs=$(diff <(grep '^fs ' "$before") <(grep '^fs ' "$after"))
	if [ -z "$fs" ]; then
		ok "/boot, /lib/modules and /usr/src unchanged"
	else
		notok "/boot, /lib/modules and /usr/src unchanged"
		head -n 20 <<<"$fs" | diag
	fi
}

case "${1:-}" in
snapshot)
	snapshot > "${2:?usage: deps-check.sh snapshot FILE}"
	;;
compare)
	before=${2:?usage: deps-check.sh compare BEFORE [AFTER]}
	[ -s "$before" ] || { notok "a record of the machine before deps ($before)"; exit 1; }
	if [ -n "${3:-}" ]; then
		compare "$before" "$3"
	else
		now=$(mktemp)
		trap 'rm -f "$now"' EXIT
		snapshot > "$now"
		compare "$before" "$now"
	fi
	exit $failed
	;;
*)
	echo "usage: deps-check.sh snapshot FILE | compare BEFORE [AFTER]" >&2
	exit 2
	;;
esac
