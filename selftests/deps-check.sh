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
# build tools from bookworm: so no package is removed, no kernel, kernel
# headers, modules, kbuild or kernel source is added or changed, nor
# linux-libc-dev or linux-perf, nothing comes from backports (~bpo), and
# /boot, /lib/modules and /usr/src gain, lose or relink nothing (the
# guests' kernels are in the cache: kheaders.sh).  Other upgrades (a -dev
# package pulling its library to the same bookworm version) are listed.
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

# none_of DESC LIST: ok when LIST is empty, else not ok and its first lines.
none_of() {
	if [ -z "$2" ]; then
		ok "$1"
	else
		notok "$1"
		head -n 20 <<<"$2" | diag
	fi
}

compare() {
	local before=$1 after=$2 gone changed added bad fs
	gone=$(awk 'NR == FNR { if ($1 == "pkg") v[$2] = $3; next }
		$1 == "pkg" { a[$2] = 1 }
		END { for (p in v) if (!(p in a)) print p, v[p] }' "$before" "$after" | sort)
	none_of "no package removed" "$gone"
	# Packages there before at another version now.  A build tool's -dev
	# package may pull its runtime library to the matching bookworm version;
	# what must not move is what the machine boots and builds against.
	changed=$(awk 'NR == FNR { if ($1 == "pkg") v[$2] = $3; next }
		$1 == "pkg" && ($2 in v) && v[$2] != $3 { print $2, v[$2], "->", $3 }' \
		"$before" "$after" | sort)
	[ -z "$changed" ] || { echo "# upgraded:"; head -n 20 <<<"$changed" | diag; }
	added=$(awk 'NR == FNR { if ($1 == "pkg") v[$2] = 1; next }
		$1 == "pkg" && !($2 in v) { print $2, $3 }' "$before" "$after" | sort)
	echo "# deps added $(grep -c . <<<"$added") packages"
	bad=$(grep -E '^(linux-(image|headers|modules|kbuild|source|binary)-|linux-libc-dev |linux-perf )' \
		<<<"$added
$changed")
	none_of "no kernel, kernel headers, modules, kernel source, linux-libc-dev or linux-perf added or changed" "$bad"
	bad=$(awk '$NF ~ /~bpo/' <<<"$added
$changed")
	none_of "nothing installed from bookworm-backports" "$bad"
	# /boot by name, type and link target (an initrd a package's trigger
	# rebuilds for the same kernel changes size, not what boots).
	fs=$(diff <(grep '^fs ' "$before" | awk '{ print $2, $3, $5 }') \
		<(grep '^fs ' "$after" | awk '{ print $2, $3, $5 }'))
	none_of "/boot, /lib/modules and /usr/src: nothing added, removed or relinked" "$fs"
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
