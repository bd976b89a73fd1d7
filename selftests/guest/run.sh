#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# In-guest test runner (started by selftests/vm/run.sh inside the QEMU guest):
#   selftests/guest/run.sh [FILTER...]
#
# Runs every selftests/guest/t_*.sh in name order (only those whose name
# contains one of the FILTER words, when given).  Each test prints TAP lines
# ("ok N - desc", "not ok N - desc", "# diagnostics") and exits non-zero on
# failure; it runs under `timeout` (300 s, or the value of a "# timeout: N"
# line in the test file, or ENGRAM_TEST_TIMEOUT's for every test, as make
# fuzz sets it).  The runner renumbers the results into one TAP
# stream, prefixes each description with the test's name, and adds a
# "not ok" line of its own when a test timed out, crashed or exited non-zero
# without reporting a failure, printed no result at all, ran a different
# number of results than its "1..N" plan, or when the kernel log gained a
# warning, oops or splat while it ran.  It ends with the line
# ENGRAM-SELFTESTS-COMPLETE after all tests ran (the host treats a run
# without it as failed) and exits 1 when anything failed.
#
# Each test gets ENGRAM_TEST_NAME and a fresh empty directory
# ENGRAM_TEST_TMP under the scratch file system.
#
# A test with a "# kernels: 6.12" line (one or more versions; "6.12" takes
# in the project's debug kernel, which is one, and "debug" names it alone)
# runs, in a full run, only on those kernels and is reported as skipped on
# the others; named on the command line it runs anywhere.  It keeps `make
# check` within its time budget: a test whose subject does not depend on
# the kernel's version runs on one of Debian's kernels, and one that `make
# check` runs on the debug kernel (which is a 6.12) skips Debian's 6.12.
set -u
export LC_ALL=C

dir=$(cd "$(dirname "$0")" && pwd)
DEFAULT_TIMEOUT=300
# The debug kernel (KASAN, lockdep, kmemleak under TCG) does the same work
# three to four times slower: its tests get that much longer.
case "$(uname -r)" in
*-engram-debug) TIMEOUT_SCALE=${ENGRAM_TIMEOUT_SCALE:-4} ;;
*) TIMEOUT_SCALE=${ENGRAM_TIMEOUT_SCALE:-1} ;;
esac
# What fails a test in its part of the kernel log: selftests/splats.awk.
SPLATS=$dir/../splats.awk

n=0 pass=0 fail=0 skip=0
tap() {
	# tap ok|not-ok DESCRIPTION
	n=$((n + 1))
	if [ "$1" = ok ]; then
		pass=$((pass + 1))
		echo "ok $n - $2"
	else
		fail=$((fail + 1))
		echo "not ok $n - $2"
	fi
}

selected() {
	local name=$1 f
	[ $# -ge 1 ] || return 0
	shift
	[ $# -gt 0 ] || return 0
	for f in "$@"; do
		case "$name" in *"$f"*) return 0 ;; esac
	done
	return 1
}

kmsg_lines() { dmesg 2>/dev/null | wc -l; }

tests=()
for t in "$dir"/t_*.sh; do
	[ -f "$t" ] || continue
	name=$(basename "$t" .sh)
	selected "$name" "$@" && tests+=("$t")
done
if [ ${#tests[@]} -eq 0 ]; then
	tap not-ok "no test matches '${*:-t_*.sh}' in $dir"
fi

# The debug kernel's kmemleak (no automatic scans): forget what boot left,
# so that the scan at the end reports only what the tests allocated.
KMEMLEAK=/sys/kernel/debug/kmemleak
[ -w "$KMEMLEAK" ] && echo clear > "$KMEMLEAK" 2>/dev/null

# With ENGRAM_GCOV_EACH=1 on the debug kernel, the module's gcov counters
# after each test (selftests/vm/gcov-send.sh): the difference between two
# snapshots is what one test added to the coverage.
gcov_snapshot() {
	[ "${ENGRAM_GCOV_EACH:-0}" = 1 ] || return 0
	"$dir/../vm/gcov-send.sh" "ENGRAM-GCOV-TEST $1"
}

scratch=${ENGRAM_SCRATCH:-/tmp/scratch}
for t in "${tests[@]}"; do
	name=$(basename "$t" .sh)
	tmo=$(sed -n 's/^#[[:space:]]*timeout:[[:space:]]*\([0-9][0-9]*\).*/\1/p' "$t" | head -n1)
	tmo=$((${tmo:-$DEFAULT_TIMEOUT} * TIMEOUT_SCALE))
	[ -z "${ENGRAM_TEST_TIMEOUT:-}" ] || tmo=$ENGRAM_TEST_TIMEOUT
	kvers=$(sed -n 's/^#[[:space:]]*kernels:[[:space:]]*\(.*\)$/\1/p' "$t" | head -n1)
	if [ $# -eq 0 ] && [ -n "$kvers" ]; then
		mine=0
		for k in $kvers; do
			case "$k:$(uname -r)" in
			debug:*-engram-debug | "$k:$k".*) mine=1 ;;
			esac
		done
		if [ $mine -eq 0 ]; then
			skip=$((skip + 1))
			tap ok "$name: # SKIP runs on kernel $kvers only"
			continue
		fi
	fi
	echo "# ---- $name (timeout ${tmo}s)"
	export ENGRAM_TEST_NAME=$name
	export ENGRAM_TEST_TMP=$scratch/tests/$name
	rm -rf "$ENGRAM_TEST_TMP"
	mkdir -p "$ENGRAM_TEST_TMP"
	k0=$(kmsg_lines)
	t0=$SECONDS

	results=0 failed=0 plan="" rc=""
	while IFS= read -r line; do
		line=${line%$'\r'}
		if [[ $line =~ ^__ENGRAM_RC__\ ([0-9]+)$ ]]; then
			rc=${BASH_REMATCH[1]}
		elif [[ $line =~ ^(not\ )?ok([[:space:]]+[0-9]+)?([[:space:]]*-)?[[:space:]]*(.*)$ ]]; then
			results=$((results + 1))
			desc=${BASH_REMATCH[4]}
			if [ -z "${BASH_REMATCH[1]}" ]; then
				[[ $desc =~ \#[[:space:]]*[Ss][Kk][Ii][Pp] ]] && skip=$((skip + 1))
				tap ok "$name: $desc"
			elif [[ $desc =~ \#[[:space:]]*[Tt][Oo][Dd][Oo] ]]; then
				tap ok "$name: $desc"
			else
				failed=$((failed + 1))
				tap not-ok "$name: $desc"
			fi
		elif [[ $line =~ ^1\.\.([0-9]+) ]]; then
			plan=${BASH_REMATCH[1]}
		elif [ -z "$line" ]; then
			:
		elif [[ $line == \#* ]]; then
			echo "$line"
		else
			echo "# $name| $line"
		fi
	done < <(
		cd "${ENGRAM_PROJECT:-$dir/../..}" || exit
		# timeout puts the test in its own process group: kill whatever
		# the test left running in the background, or it would hold the
		# pipe open and hang the runner.
		timeout --kill-after=10 "$tmo" bash "$t" </dev/null 2>&1 &
		tp=$!
		wait $tp
		trc=$?
		kill -KILL -- -$tp 2>/dev/null
		printf '\n__ENGRAM_RC__ %d\n' $trc)
	dt=$((SECONDS - t0))

	if [ -z "$rc" ]; then
		tap not-ok "$name: runner lost the exit status"
	elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
		tap not-ok "$name: timed out after ${tmo}s"
	elif [ "$rc" -ne 0 ] && [ $failed -eq 0 ]; then
		tap not-ok "$name: exited with status $rc without reporting a failure"
	elif [ $results -eq 0 ]; then
		tap not-ok "$name: printed no test result"
	fi
	if [ -n "$plan" ] && [ "$plan" -ne $results ] && [ "${rc:-1}" -ne 124 ]; then
		tap not-ok "$name: planned $plan results, printed $results"
	fi
	# A test that injects page-allocation failures says so, and then the
	# allocator's reports of them are expected.
	alloc_ok=0
	[ ! -e "$ENGRAM_TEST_TMP/kmsg-alloc-failures-expected" ] || alloc_ok=1
	splat=$(dmesg 2>/dev/null | tail -n +"$((k0 + 1))" |
		awk -v alloc_ok=$alloc_ok -f "$SPLATS" | head -n 5)
	if [ -n "$splat" ]; then
		tap not-ok "$name: kernel log clean"
		sed 's/^/# dmesg: /' <<<"$splat"
	fi
	echo "# ---- $name: exit $rc, ${dt}s"
	gcov_snapshot "$name"
done

# With the module unloaded, anything of its still allocated is a leak, and
# so is anything the tests made the rest of the kernel lose.  Two scans,
# because kmemleak reports only objects older than 5 s and unreferenced in
# a scan; the guest's own memory is small, so each takes seconds.
if [ -w "$KMEMLEAK" ] && [ ${#tests[@]} -gt 0 ]; then
	if [ -d /sys/module/engram_rdma ] && ! rmmod engram_rdma 2>/dev/null; then
		tap not-ok "kmemleak: rmmod engram_rdma before the scan"
	fi
	echo scan > "$KMEMLEAK"
	sleep 6
	echo scan > "$KMEMLEAK"
	leaks=$(grep -c '^unreferenced object' "$KMEMLEAK")
	if [ "$leaks" -eq 0 ]; then
		tap ok "kmemleak: nothing leaked by the run (module unloaded, two scans)"
	else
		tap not-ok "kmemleak: $leaks object(s) leaked by the run"
		head -n 60 "$KMEMLEAK" | sed 's/^/# kmemleak: /'
	fi
fi

echo "# guest selftests: $pass passed, $fail failed ($skip skipped) on $(uname -r)"
echo "ENGRAM-SELFTESTS-COMPLETE"
[ $fail -eq 0 ]
