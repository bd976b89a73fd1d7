#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# `make check`: the whole test suite, as one TAP stream.
#
#   deps (fast when everything is present) -> tools -> module for KDIR ->
#   module for the 6.1 and 6.12 test kernels -> style -> build matrix (5.10
#   to 7.3-rc, RT, arm64 4K/16K: MATRIX; the user-space side cross-built for
#   arm64) -> user-space unit tests -> make install into a scratch DESTDIR
#   -> Debian packages -> DKMS install/remove (and the tarballs of this
#   version and the next for the packages' guest) -> in-guest selftests
#   under QEMU: the 6.1 and 6.12 suites side by side, the two-guest runs,
#   the three-guest replicas run, the packages installed in a guest
#   (t_85_packages), a guest booting systemd with them, then the debug
#   kernel's suite
#
# Every step contributes TAP lines, renumbered globally and prefixed with the
# step ("ok 17 - [6.12] t_10_load: sha256 matches"); a build step is one
# line; a guest run that did not print ENGRAM-SELFTESTS-COMPLETE, or whose
# kernel log shows a warning or oops, adds a "not ok" line.  Ends with
# "N passed, N failed"; exits 1 if anything failed.  Full logs of every step:
# build/logs/.
#
# Environment: KVERS (default "6.1 6.12"; "5.10 7.2" in make check-kernels),
# CHECK_SKIP_VM=1 (no QEMU steps),
# GUEST_FILTER (arguments for selftests/guest/run.sh), VM_TIMEOUT (seconds
# for one guest run, default 2700; QEMU itself is killed 120 s later),
# PAIR_KVERS and FAULT_KVERS (kernels of the two-guest runs, default none
# and "6.12"), REPLICAS_KVERS (kernels of the three-guest replicas run,
# default "6.12"), EXACT_KVERS (the three-guest randomized exactness
# checker's, default "6.12"), ARM64_PAIR (the x86 host guest's kernel of the arm64 pair,
# default "6.12"), PACKAGES_KVER (the kernel of the packages' guest,
# default "6.12"; empty, or any GUEST_FILTER: not run).
#
# The project's debug kernel (KASAN, lockdep, kmemleak, UBSAN, object
# debugging: selftests/vm/debug-kernel.sh) is built in the background from
# the start (at low priority: the stock suites come first), then runs the
# tests of DEBUG_FILTER (every test there takes three to five times as
# long; DEBUG_FILTER2 in a second guest beside it), and the two-guest
# run with DEBUG_PAIR=1; its guests' gcov
# counters of the module give
# the line coverage of kmod/ (selftests/coverage.sh, report in
# build/coverage/).  CHECK_DEBUG=0 leaves it out; with "debug" in KVERS
# (make check-debug) it runs the whole suite instead.
set -uo pipefail
export LC_ALL=C

root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1
logs=$root/build/logs
mkdir -p "$logs"
KVERS=${KVERS:-6.1 6.12}
# Two-guest runs take minutes each of both cores: the fault run (the data
# path between two guests, and the faults) on 6.12; the plain one only when
# asked for (PAIR_KVERS=6.1), to leave the budget to the debug kernel.
PAIR_KVERS=${PAIR_KVERS-}
FAULT_KVERS=${FAULT_KVERS-6.12}
# Replicas and shards across two host guests and a GPU-node guest, one host
# unloaded and killed under a fetch loop (run-replicas.sh): about three
# minutes of both cores.
REPLICAS_KVERS=${REPLICAS_KVERS-6.12}
# The randomized exactness checker's short pass in the same topology
# (run-exact.sh: ENGRAM_EXACT_S seconds, 60 here, of random schedules on
# both hosts and the GPU node; ENGRAM_EXACT_SEED replays one): about two
# minutes of both cores.  make soak-exact runs it for an hour.
EXACT_KVERS=${EXACT_KVERS-6.12}
export ENGRAM_EXACT_S=${ENGRAM_EXACT_S:-60}
# The arm64 pair (run-arm64-pair.sh): an x86 host guest on this kernel
# serving an arm64 16K-page GPU-node guest; empty: not run.
ARM64_PAIR=${ARM64_PAIR-6.12}
# The Debian packages installed in a guest of this kernel (t_85_packages):
# alone, after the two-guest runs, when the background build of the debug
# kernel is over.  Beside another guest it gains nothing: two TCG guests of
# two CPUs each on two cores slowed each other far beyond their sum (the
# debug guest's t_67 took 465 s beside it, 154 s alone), and beside the two
# suites no core was left idle.  Both of its module versions come prebuilt
# (the DKMS check's tarballs): about three minutes.  Empty: not run.
PACKAGES_KVER=${PACKAGES_KVER-6.12}
# Debian's systemd booted as PID 1 in a guest of this kernel, with the
# engramctl and libengram0 packages installed (run-systemd.sh): the module
# loaded at boot by modules-load.d, the tables unit's start, status line,
# journal, reload and stop.  About a minute and a half, alone, after the
# packages' guest.  Empty: not run.
SYSTEMD_KVER=${SYSTEMD_KVER-6.12}
# The fetch, deadline, fault and limit tests once more in a guest of this
# kernel over Soft-iWARP instead of rxe (selftests/vm/siw-module.sh builds
# siw.ko from linux-source-6.12): about five minutes, alone, after the
# packages' guest.  Empty: not run.
SIW_KVER=${SIW_KVER-6.12}
VM_TIMEOUT=${VM_TIMEOUT:-2700}
CHECK_DEBUG=${CHECK_DEBUG:-1}
[ "${CHECK_SKIP_VM:-0}" != 1 ] || CHECK_DEBUG=0
case " $KVERS " in *" debug "*) CHECK_DEBUG=0 ;; esac
# The debug kernel's tests, in one guest.  A second debug guest beside it
# gains nothing: each then runs at less than half its speed (t_67 took 789 s
# beside t_68 and t_69, 370 s alone; boot and setup 110 s against 60), and
# each pays the guest's own fixed cost again (boot, setup, the kmemleak scans
# and the gcov counters: about four minutes).  DEBUG_FILTER2 names tests for
# such a second guest all the same.
# t_62_link_faults (the link's fault paths) gave way to the three-guest
# replicas run: with it here the last full run took 3,513 s of the hour,
# and it took 89 s here; it still runs on Debian's 6.1 (and here when
# named: DEBUG_FILTER="... t_62_link_faults"), but the lines only it
# reached are no longer counted in the coverage.  t_54_deadline gave way to the packages' guest: it
# added no line (the coverage with the unit tests was 89.7 % without it and
# 89.6 % with it) and took 152 s here; it still runs on Debian's 6.12 and
# in make check-debug.  t_74_identity (a table's identity: resolution,
# routing, a verify failure, older peers) runs here too, for the lines of
# link_admin.c, replica.c and table.c only it reaches: the coverage with
# the unit tests was 85.5 % without it and 86.6 % with it; it took 264 s
# to 268 s here in the last runs.
DEBUG_FILTER=${DEBUG_FILTER:-t_40_malformed t_67_failfunc t_68_failslab t_69_kfuzz t_73_shards t_74_identity t_86_events_lost}
DEBUG_FILTER2=${DEBUG_FILTER2-}
DEBUG_PAIR=${DEBUG_PAIR:-0}
# t_67_failfunc fails, for the hooks of kmod/inject.h whose failures no
# other test reaches (the posts, a DMA mapping, pinning, a listener that
# cannot listen yet, the only TCP link on this kernel), one call at
# random and the last (every hook, ten calls spread over its calls, in make
# check-debug: the connect-path hooks are absorbed by a link's reconnect);
# t_68_failslab fails every tenth allocation site of each operation here
# (from a random first one), each one in make check-debug; t_69_kfuzz runs
# a bounded pass of about a minute (a million inputs per surface in make
# fuzz): 3,000 netlink inputs (5 ms each on this kernel), 1,000 ioctl
# sequences (16 ms), 300 TCP and 100 RDMA connections (50 to 120 ms).
DEBUG_ENV=${DEBUG_ENV:-ENGRAM_FAILNTH_STRIDE=10 ENGRAM_FAILFUNC_RUNS=1 ENGRAM_FAILFUNC_HOOKS=post_send,post_recv,dma_map,pin_pages,cm_listen,sock_listen,sock_connect,sock_accept ENGRAM_FUZZ_INPUTS=3000 ENGRAM_FUZZ_INPUTS_IOCTL=1000 ENGRAM_FUZZ_INPUTS_TCP=300 ENGRAM_FUZZ_INPUTS_RDMA=100}

n=0 pass=0 fail=0
t_start=$SECONDS
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
tail_log() {
	# Last lines of a log as TAP diagnostics.
	tail -n "${2:-15}" "$1" | sed 's/^/#   /'
}
# oops_log CONSOLE NAME: a guest that died has only its console; its first
# oops or panic (40 lines from there) as TAP diagnostics, for a CI run
# whose logs are gone once it ends.
oops_log() {
	local at

	[ -s "$1" ] || return 0
	at=$(grep -n -m1 -E 'Oops|BUG:|Kernel panic|double fault|general protection|WARNING:' "$1" |
		cut -d: -f1)
	[ -n "$at" ] || return 0
	# A summary first: CI's excerpt of a long failure keeps only the
	# first lines of each.
	tail -n "+$at" "$1" | head -n 120 | tr -d '\r' | awk -v who="$2" '
		NR == 1 { sub(/^\[ *[0-9.]+\] */, ""); first = $0 }
		!rip && /RIP: [0-9a-f]+:/ { rip = $0; sub(/.*RIP: [0-9a-f]+:/, "", rip) }
		/RIP: | \? / { next }
		/\+0x[0-9a-f]+\/0x[0-9a-f]+/ && n < 14 {
			for (i = 1; i <= NF; i++)
				if ($i ~ /\+0x/) { f = $i; sub(/\+.*/, "", f); fns = fns " " f; n++; break }
		}
		END {
			printf "#   %s splat: %s; RIP %s\n", who, first, rip ? rip : "?"
			printf "#   %s trace:%s\n", who, fns ? fns : " ?"
		}'
	echo "#   $2's console from its first splat:"
	sed -n "${at},$((at + 39))p" "$1" | tr -d '\r' | sed 's/^/#   /'
}

# run_build NAME DESCRIPTION CMD...: one TAP line for the whole step.
run_build() {
	local name=$1 desc=$2 log=$logs/$1.log t0=$SECONDS rc
	shift 2
	"$@" >"$log" 2>&1 </dev/null
	rc=$?
	if [ $rc -eq 0 ]; then
		tap ok "$desc ($((SECONDS - t0))s)"
	else
		tap not-ok "$desc (exit $rc)"
		if grep -Eqi '(error|warning):' "$log"; then
			# The first diagnostics say more than the tail of make's output.
			grep -Ei -m 15 '(error|warning):' "$log" | sed 's/^/#   /'
		else
			tail_log "$log"
		fi
	fi
	return $rc
}

# run_tap NAME PREFIX CMD...: re-number the command's TAP lines; show its
# diagnostics; add a "not ok" when it failed without saying so.
# Sets STEP_RC, STEP_COMPLETE (saw ENGRAM-SELFTESTS-COMPLETE), STEP_RESULTS.
run_tap() {
	local name=$1 prefix=$2 log=$logs/$1.log line desc failed=0
	shift 2
	STEP_RC="" STEP_COMPLETE=0 STEP_RESULTS=0
	: >"$log"
	while IFS= read -r line; do
		line=${line%$'\r'}
		if [[ $line =~ ^__ENGRAM_CHECK_RC__\ ([0-9]+)$ ]]; then
			STEP_RC=${BASH_REMATCH[1]}
			continue
		fi
		printf '%s\n' "$line" >>"$log"
		if [[ $line =~ ^[[:space:]]*(not\ )?ok([[:space:]]+[0-9]+)?([[:space:]]*-)?[[:space:]]*(.*)$ ]]; then
			STEP_RESULTS=$((STEP_RESULTS + 1))
			desc=${BASH_REMATCH[4]}
			if [ -z "${BASH_REMATCH[1]}" ] || [[ $desc =~ \#[[:space:]]*[Tt][Oo][Dd][Oo] ]]; then
				tap ok "$prefix $desc"
			else
				failed=$((failed + 1))
				tap not-ok "$prefix $desc"
			fi
		elif [ "$line" = ENGRAM-SELFTESTS-COMPLETE ]; then
			STEP_COMPLETE=1
		elif [[ $line =~ ^[[:space:]]*# ]]; then
			printf '%s\n' "$line"
		fi
	done < <("$@" </dev/null 2>&1; printf '\n__ENGRAM_CHECK_RC__ %d\n' $?)
	if [ -z "$STEP_RC" ]; then
		tap not-ok "$prefix lost the exit status"
	elif [ "$STEP_RC" -ne 0 ] && [ $failed -eq 0 ]; then
		tap not-ok "$prefix exited with status $STEP_RC"
		tail_log "$log"
	elif [ $STEP_RESULTS -eq 0 ]; then
		tap not-ok "$prefix printed no test result"
		tail_log "$log"
	fi
}

echo "# engram-rdma check: $(date -u '+%Y-%m-%d %H:%M:%S UTC') on $(uname -r), logs in $logs"

# --- dependencies ----------------------------------------------------------------
# deps.sh may add bookworm's build tools, nothing else: a record of the
# machine before it, compared after (selftests/deps-check.sh).
selftests/deps-check.sh snapshot "$logs/machine-before-deps.txt"
run_build deps "deps: build and test dependencies installed" selftests/vm/deps.sh
run_tap deps-check "[deps]" selftests/deps-check.sh compare "$logs/machine-before-deps.txt"
# The other kernels' headers (the build matrix) and images (5.10 and 7.2,
# make check-kernels), unpacked into the cache: seconds when present.
run_build kheaders "deps: other kernels' headers and images in ${CACHE:-/var/cache/engram-rdma}/kheaders" \
	selftests/vm/kheaders.sh

# The debug kernel takes a quarter of an hour of both cores when it is not
# cached: start it now, behind everything else.
if [ "$CHECK_DEBUG" = 1 ]; then
	rm -f "$logs/debug-kernel.rc"
	(nice -n 19 selftests/vm/debug-kernel.sh >"$logs/debug-kernel.log" 2>&1 </dev/null
	 echo $? >"$logs/debug-kernel.rc") &
fi

# --- builds --------------------------------------------------------------------------
run_build tools "build: tools" make -C tools
if [ -f selftests/guest/Makefile ]; then
	run_build guest-helpers "build: in-guest test helpers" make -C selftests/guest
fi
run_build bench-tool "build: the benchmark's engram_bench" make -C selftests/bench
kdir=$(selftests/vm/kernels.sh kdir "${KVER:-6.1}")
kdir=${KDIR:-$kdir}
build_default() {
	# The in-tree build for the default KDIR; warnings fail it like build-module.sh.
	# After a warning, drop the objects so the next incremental build
	# recompiles and reports them again.
	local out rc
	out=$(make KDIR="$kdir" module 2>&1)
	rc=$?
	printf '%s\n' "$out"
	[ $rc -eq 0 ] || return $rc
	if grep -qi 'warning:' <<<"$out"; then
		rm -f kmod/*.o kmod/engram_rdma.ko
		return 1
	fi
}
run_build module-default "build: module for KDIR=$kdir (W=1, no warnings)" build_default
declare -A built
for k in $KVERS; do
	rel=$(selftests/vm/kernels.sh release "$k")
	if run_build "module-$k" "build: module for $k (${rel:-not installed}, W=1, no warnings)" \
		selftests/vm/build-module.sh "$k"; then
		built[$k]=1
	fi
done

# --- style: checkpatch --strict and sparse must stay clean ------------------------
run_build style "style: checkpatch --strict and sparse (C=2) clean" selftests/style.sh

# --- build matrix: every supported kernel and architecture ------------------------
# 6.1 only repeats what the W=1 build above and style.sh's sparse did, and
# 6.12 what the W=1 build above and trixie's newer 6.12 under sparse do.
# The oldest ABI of bullseye's and bookworm's main archives are there
# because a stable backport that an old ABI lacks breaks users' DKMS builds.
MATRIX=${MATRIX:-x86-5.10-oldest x86-5.10 x86-6.1-oldest x86-6.12-trixie x86-6.12-rt x86-7.2 x86-7.3-rc \
	arm64-6.12 arm64-6.12-16k} \
	run_tap matrix "[matrix]" selftests/build-matrix.sh
run_tap cross-arm64 "[matrix]" selftests/cross-arm64.sh

# --- user-space unit tests -------------------------------------------------------
run_tap unit "[unit]" make -s -C selftests/unit run

# --- make install into a scratch DESTDIR ------------------------------------------
run_tap install "[install]" selftests/install-check.sh

# --- Debian packages (installed in a guest by t_85_packages) -----------------------
run_tap deb "[deb]" selftests/deb-check.sh

# --- DKMS ------------------------------------------------------------------------------
# For the packages' guest's kernel, with the builds of this version and of
# the next one (deb-check.sh's build/deb/next) as DKMS tarballs for it: the
# guest's install and upgrade load those rather than build under TCG, which
# took ten of the packages guest's thirteen minutes.  Not under build/deb,
# which deb-check.sh makes anew.
if [ -n "$PACKAGES_KVER" ]; then
	next_tree=""
	for d in build/deb/next/engram-rdma-*/; do
		[ -f "$d/dkms.conf" ] && next_tree=$d
	done
	run_tap dkms "[dkms]" selftests/dkms-check.sh "$PACKAGES_KVER" \
		--tarball "build/dkms-tarball/$PACKAGES_KVER" ${next_tree:+--next-tree "$next_tree"}
else
	run_tap dkms "[dkms]" selftests/dkms-check.sh
fi

# --- in-guest selftests ----------------------------------------------------------
# One guest keeps a little more than one of the two cores busy, so the
# kernels' suites run side by side; their TAP is read in order afterwards.
# vm_wait K: the output of kernel K's guest run once it has ended, then its
# exit status (run_tap runs this in a subshell, which cannot wait(1) for it).
vm_wait() {
	local i rc
	for ((i = 0; i < VM_TIMEOUT + 600; i++)); do
		[ -s "$logs/vm-$1.rc" ] && break
		sleep 1
	done
	cat "$logs/vm-$1.out"
	read -r rc <"$logs/vm-$1.rc" 2>/dev/null || rc=125
	return "$rc"
}
# two_guests pair|faults|replicas|exact K GUEST...: run-pair.sh, run-faults.sh or
# run-replicas.sh (or run-exact.sh, in its topology) on kernel K, then check
# each guest's kernel log.  The
# first host boot of the fault run and host1 of the replicas run are killed
# outright and never write their kernel log (each checked dmesg itself just
# before): their console stands in.
two_guests() {
	local what=$1 k=$2 g dlog t0=$SECONDS
	shift 2
	run_tap "$what-$k" "[$k $what]" "selftests/vm/run-$what.sh" --kver "$k" \
		--timeout "$VM_TIMEOUT" --logs "$logs/$what-$k"
	echo "# [$k] $what run: $((SECONDS - t0))s, exit ${STEP_RC:-?}"
	if [ $STEP_COMPLETE -ne 1 ]; then
		tap not-ok "[$k $what] every guest ran to completion"
		for g in "$@"; do
			oops_log "$logs/$what-$k/$g/console.log" "$g"
		done
	fi
	for g in "$@"; do
		dlog=$logs/$what-$k/$g/dmesg.log
		[ -s "$dlog" ] || [ "$g" != host1 ] || dlog=$logs/$what-$k/$g/console.log
		log_clean "$dlog" "[$k $what] $g guest's kernel log"
	done
}
# log_clean LOG DESC [ALLOC_OK]: TAP lines saying that LOG was captured and
# holds no warning, oops or other splat (selftests/splats.awk).  ALLOC_OK=1
# for a guest whose runner judged each test's page-allocation failure
# reports already (only a test that injects them may cause them).
log_clean() {
	local splats

	if [ ! -s "$1" ]; then
		tap not-ok "$2 captured"
		return
	fi
	splats=$(awk -v alloc_ok="${3:-0}" -f selftests/splats.awk "$1")
	if [ -n "$splats" ]; then
		tap not-ok "$2 free of warnings and oopses"
		head -n 10 <<<"$splats" | sed 's/^/#   /'
	else
		tap ok "$2 free of warnings and oopses"
	fi
}
# suite_start K [FILTER...]: kernel K's single-guest suite, in the background,
# with the guest environment of SUITE_ENV (VAR=VALUE words), its logs named
# SUITE_NAME (default K: two guests of one kernel need two names).
suite_start() {
	local k=$1 name=${SUITE_NAME:-$1}

	shift
	rm -f "$logs/vm-$name.rc"
	# shellcheck disable=SC2086
	(selftests/vm/run.sh --kver "$k" --timeout "$VM_TIMEOUT" --logs "$logs/vm-$name" \
		-- ${SUITE_ENV:-} selftests/guest/run.sh "$@" >"$logs/vm-$name.out" 2>&1 </dev/null
	 echo $? >"$logs/vm-$name.rc") &
}
# suite_report NAME: its TAP once it ended, and its kernel log checked.
suite_report() {
	local k=$1 dlog src

	run_tap "vm-$k" "[$k]" vm_wait "$k"
	echo "# [$k] guest run: done after $((SECONDS - t0))s, exit ${STEP_RC:-?}"
	if [ $STEP_COMPLETE -ne 1 ]; then
		tap not-ok "[$k] guest selftests ran to completion (no ENGRAM-SELFTESTS-COMPLETE)"
		tail_log "$logs/vm-$k.log" 25
		oops_log "$logs/vm-$k/console.log" "the guest"
	fi
	dlog=$logs/vm-$k/dmesg.log
	src="kernel log"
	if [ ! -s "$dlog" ]; then
		# The guest died before writing its kernel log (panic, hang):
		# what reached the console is all there is.
		dlog=$logs/vm-$k/console.log
		src="console (the guest wrote no kernel log)"
	fi
	log_clean "$dlog" "[$k] $src" 1
}
if [ "${CHECK_SKIP_VM:-0}" != 1 ]; then
	t0=$SECONDS
	for k in $KVERS; do
		[ -n "${built[$k]:-}" ] || continue
		# A folio kernel's suite and 5.10's (pages, pinned one by one) run
		# with a ZONE_MOVABLE, where tables must not pin pages (t_20_load);
		# ENGRAM_VM_APPEND set by the caller wins.
		append=${ENGRAM_VM_APPEND-}
		case "$append:$k" in
		:6.1|:5.10) append=movablecore=512M ;;
		esac
		# shellcheck disable=SC2086
		ENGRAM_VM_APPEND=$append suite_start "$k" ${GUEST_FILTER:-}
	done
	for k in $KVERS; do
		if [ -z "${built[$k]:-}" ]; then
			tap not-ok "[$k] guest selftests not run: module build failed"
			continue
		fi
		suite_report "$k"
	done
	# A guest of a multi-guest run whose peer died stops soon after it
	# (run.sh --peer), rather than at its timeout: here the peer is a
	# process that ends after 2 s, the grace 3 s, the guest's command a
	# sleep of 600 s.
	k=${KVERS%% *}
	if [ -n "${built[$k]:-}" ]; then
		t0=$SECONDS
		sleep 2 &
		ENGRAM_VM_PEER_GRACE=3 selftests/vm/run.sh --kver "$k" --no-module --timeout 700 \
			--peer $! -- sleep 600 >"$logs/vm-peer.out" 2>&1
		rc=$?
		if [ $rc -eq 125 ] && [ $((SECONDS - t0)) -lt 300 ] &&
		   grep -q 'ended 3 s ago; stopping this guest' "$logs/vm-peer.out"; then
			tap ok "[$k] harness: a guest whose peer ended is stopped ($((SECONDS - t0)) s, exit 125)"
		else
			tap not-ok "[$k] harness: a guest whose peer ended is stopped ($((SECONDS - t0)) s, exit $rc)"
			tail_log "$logs/vm-peer.out"
		fi
	fi
	# Two guests at a time from here on, one kernel after the other.
	for k in $KVERS; do
		[ -n "${built[$k]:-}" ] || continue
		case " $PAIR_KVERS " in *" $k "*) two_guests pair "$k" host spark ;; esac
		case " $FAULT_KVERS " in *" $k "*) two_guests faults "$k" spark host1 host2 ;; esac
		case " $REPLICAS_KVERS " in *" $k "*) two_guests replicas "$k" spark host1 host2 ;; esac
		case " $EXACT_KVERS " in *" $k "*) two_guests exact "$k" spark host1 host2 ;; esac
	done
	for k in $ARM64_PAIR; do
		two_guests arm64-pair "$k" arm64 host
	done
	if [ -n "$PACKAGES_KVER" ] && [ -z "${GUEST_FILTER:-}" ]; then
		t0=$SECONDS
		if [ -n "${built[$PACKAGES_KVER]:-}" ]; then
			SUITE_NAME=packages suite_start "$PACKAGES_KVER" t_85_packages
			suite_report packages
		else
			tap not-ok "[packages] not run: no module built for $PACKAGES_KVER"
		fi
	fi
	if [ -n "$SYSTEMD_KVER" ] && [ -n "${built[$SYSTEMD_KVER]:-}" ] &&
	   [ -z "${GUEST_FILTER:-}" ]; then
		t0=$SECONDS
		k=$SYSTEMD_KVER
		run_tap "systemd-$k" "[$k systemd]" selftests/vm/run-systemd.sh --kver "$k" \
			--timeout 600 --logs "$logs/systemd-$k"
		echo "# [$k] systemd boot: $((SECONDS - t0))s, exit ${STEP_RC:-?}"
		if [ $STEP_COMPLETE -ne 1 ]; then
			tap not-ok "[$k systemd] the guest ran to completion"
			oops_log "$logs/systemd-$k/console.log" "the guest"
		fi
		log_clean "$logs/systemd-$k/dmesg.log" "[$k systemd] kernel log"
	fi
	# The fetch test over a second provider, Soft-iWARP (built out of tree:
	# Debian's kernels leave it out), so that nothing depends on rxe.
	if [ -n "$SIW_KVER" ] && [ -n "${built[$SIW_KVER]:-}" ] &&
	   [ -z "${GUEST_FILTER:-}" ]; then
		t0=$SECONDS
		if run_build siw-module "build: siw.ko for $SIW_KVER (out of tree, linux-source-6.12)" \
			selftests/vm/siw-module.sh "$SIW_KVER"; then
			ENGRAM_VM_PROVIDER=siw SUITE_NAME=siw suite_start "$SIW_KVER" \
				t_54_deadline t_55_fetch t_62_link_faults t_64_conn_limits
			suite_report siw
		fi
	fi
fi

# --- the debug kernel ----------------------------------------------------------------
if [ "$CHECK_DEBUG" = 1 ]; then
	t0=$SECONDS
	for ((i = 0; i < 3600; i++)); do
		[ -s "$logs/debug-kernel.rc" ] && break
		sleep 1
	done
	read -r rc <"$logs/debug-kernel.rc" 2>/dev/null || rc=125
	secs=$(sed -n 's/^BUILD_SECONDS_DEBUG=//p' \
		"${CACHE:-/var/cache/engram-rdma}/debug-kernel.env" 2>/dev/null)
	if [ "$rc" -eq 0 ]; then
		how="cached, built in ${secs:-?}s"
		grep -q '^debug-kernel: built ' "$logs/debug-kernel.log" &&
			how="built now in ${secs:-?}s"
		tap ok "build: debug kernel $(selftests/vm/kernels.sh release debug) ($how, waited for $((SECONDS - t0))s)"
	else
		tap not-ok "build: debug kernel (exit $rc)"
		tail_log "$logs/debug-kernel.log"
	fi
	if [ "$rc" -eq 0 ] && run_build module-debug \
		"build: module for debug ($(selftests/vm/kernels.sh release debug), W=1, gcov and KCOV)" \
		selftests/vm/build-module.sh debug; then
		# The stock suites are done, both cores are free.
		# shellcheck disable=SC2086
		SUITE_ENV=$DEBUG_ENV suite_start debug $DEBUG_FILTER
		# shellcheck disable=SC2086
		[ -z "$DEBUG_FILTER2" ] ||
			SUITE_ENV=$DEBUG_ENV SUITE_NAME=debug2 suite_start debug $DEBUG_FILTER2
		suite_report debug
		[ -z "$DEBUG_FILTER2" ] || suite_report debug2
		[ "$DEBUG_PAIR" != 1 ] || two_guests pair debug host spark
	else
		tap not-ok "[debug] guest selftests not run: no debug kernel or module"
	fi
fi

# --- line coverage of kmod/, from the debug kernel's guests -------------------------------
mapfile -t gcov < <(find "$logs" -name gcov.tar.gz -newer "$logs/deps.log" 2>/dev/null | sort)
if [ ${#gcov[@]} -gt 0 ]; then
	# The files the module shares with user space, from their unit tests too.
	unit_info=$root/build/unit-coverage.info
	run_tap unit-coverage "[coverage]" sh -c \
		'selftests/unit-coverage.sh "$1" && echo "ok - coverage: unit tests of the shared files ran with --coverage"' \
		sh "$unit_info"
	export UNIT_INFO=$unit_info
	run_tap coverage "[coverage]" selftests/coverage.sh \
		"$root/build/coverage" "${gcov[@]}"
elif [ "$CHECK_DEBUG" = 1 ]; then
	tap not-ok "[coverage] the debug kernel's guest sent out gcov counters"
fi

echo "1..$n"
echo "# total time $((SECONDS - t_start))s"
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]
