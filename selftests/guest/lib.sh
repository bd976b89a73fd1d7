# SPDX-License-Identifier: GPL-2.0
# Helpers shared by the in-guest tests: TAP output, module handling, memory
# readings.  Sourced by every t_*.sh; each test prints its own TAP plan.

set -u

T_NO=0
T_FAIL=0
TOP=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
ENGRAMCTL=${ENGRAMCTL:-$TOP/tools/engramctl/engramctl}
NL_RAW=$TOP/selftests/guest/nl_raw
SCRATCH=${ENGRAM_SCRATCH:-/tmp/scratch}
MODULE=${ENGRAM_MODULE:-}
PREFIX=layers.1.engram.embed
PAGE=$(getconf PAGESIZE)	# the kernel's: 4 KiB, or 16 KiB on the arm64 guest
# The project's debug kernel (KASAN, lockdep, kmemleak, all under TCG) does
# the same work three to five times slower than Debian's: every bound a
# test places on time, and every timeout it gives the module, is multiplied
# by SLOW there (see run.sh, which scales the tests' own timeouts alike).
# The arm64 guest (qemu-system-aarch64 under TCG) is slower still: its
# runner passes ENGRAM_TIMEOUT_SCALE.
case "$(uname -r)" in
*-engram-debug) SLOW=${ENGRAM_TIMEOUT_SCALE:-4} ;;
*) SLOW=${ENGRAM_TIMEOUT_SCALE:-1} ;;
esac
# slow MS: a bound of MS on Debian's kernels, scaled for this one.
slow() { echo $(($1 * SLOW)); }
# rows N: a fetch loop's row count on Debian's kernels, divided by SLOW
# here.  For loops that repeat the same batch sizes to reach their lines
# and statistics many times over; never for a count that is a fetch's own
# size or a limit under test.
rows() { echo $(($1 / SLOW)); }

ok() { T_NO=$((T_NO + 1)); echo "ok $T_NO - $*"; }
nok() { T_NO=$((T_NO + 1)); T_FAIL=$((T_FAIL + 1)); echo "not ok $T_NO - $*"; }
diag() { echo "# $*"; }
# check DESC COMMAND...: one TAP line from a command's status.
check() { local d=$1; shift; if "$@"; then ok "$d"; else nok "$d"; fi; }
done_testing() { echo "1..$T_NO"; [ "$T_FAIL" -eq 0 ]; exit $?; }
bail() { nok "$*"; done_testing; }

# Value of a /proc/meminfo field, in bytes.
meminfo() { awk -v k="$1:" '$1 == k { printf "%.0f\n", $2 * 1024 }' /proc/meminfo; }
# Python expression over the JSON document on stdin, bound to d.
jget() { python3 -c "import sys, json; d = json.load(sys.stdin); print($1)"; }
# Bytes of FILE resident in the page cache.
resident() { fincore --bytes --noheadings --output RES "$1" | tr -d ' '; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }
# wait_for SECONDS COMMAND...: until COMMAND succeeds, polled every 0.1 s,
# for SECONDS of wall time (a count of polls would stretch on a slow
# kernel, where COMMAND itself takes seconds).
wait_for() {
	local end=$((SECONDS + $1))

	shift
	while [ $SECONDS -lt $end ]; do
		"$@" && return 0
		sleep 0.1
	done
	return 1
}
# wait_fetchable SECONDS [ARGS...]: within SECONDS, a fetch of one row by
# the test's FC array (fetch_check with its table's options) and ARGS works;
# tried once a second, so that a link coming back after a break has time to.
wait_fetchable() {
	local end=$((SECONDS + $1))

	shift
	for _ in $(seq 1 "$((end - SECONDS))"); do
		"${FC[@]}" --count 1 "$@" >/dev/null 2>&1 && return 0
		[ $SECONDS -lt "$end" ] || break
		sleep 1
	done
	return 1
}
# bounded SECONDS CMD...: CMD's status, or 1 when it is still running after
# SECONDS; then the blocked tasks and the end of the kernel log are shown,
# so a hang is reported with its stack rather than ending the run silently.
bounded() {
	local secs=$1 pid i
	shift
	("$@") &
	pid=$!
	for ((i = 0; i < secs * 10; i++)); do
		kill -0 $pid 2>/dev/null || { wait $pid; return; }
		sleep 0.1
	done
	diag "still running after ${secs}s: $*"
	echo 1 >/proc/sys/kernel/sysrq
	echo w >/proc/sysrq-trigger
	dmesg | tail -n 100 | sed 's/^/# dmesg: /'
	kill -9 $pid 2>/dev/null
	return 1
}
# Does opening FILE for writing fail with ETXTBSY?
write_denied() {
	python3 - "$1" <<'PY'
import errno, sys
try:
    open(sys.argv[1], "r+b").close()
except OSError as e:
    sys.exit(0 if e.errno == errno.ETXTBSY else 2)
sys.exit(1)
PY
}
writable() { python3 -c "import sys; open(sys.argv[1], 'r+b').close()" "$1"; }

# kmsg_clean: nothing in this guest's kernel log fails a run
# (selftests/splats.awk: warnings, oopses, KASAN and the like).
kmsg_clean() { [ -z "$(dmesg | awk -f "$TOP/selftests/splats.awk")" ]; }
dmesg_mark() { DMESG_MARK=$(dmesg | wc -l); }
dmesg_since() { dmesg | tail -n +"$((DMESG_MARK + 1))"; }

module_loaded() { [ -d /sys/module/engram_rdma ]; }
module_unload() { ! module_loaded || rmmod engram_rdma; }
# module_load [PARAM=VALUE]...: insmod the module under test.  A TCG guest
# on a loaded machine can leave a server's worker unscheduled for seconds:
# tests allow 10 s of silence before a heartbeat breaks a link, unless they
# pass their own heartbeat_timeout_ms (a later value wins); the server's
# stall bound gets the same, and the fetch deadline on the debug kernel.
module_load() {
	local t=()

	[ "$SLOW" -eq 1 ] || t=("timeout_ms=$(slow 1000)")
	insmod "$MODULE" "heartbeat_timeout_ms=$(slow 10000)" \
		"rdma_stall_timeout_ms=$(slow 10000)" "${t[@]}" "$@"
}

# table_state NAME: ready, loading, ... or "absent".
table_state() {
	"$ENGRAMCTL" -j list 2>/dev/null |
		jget "next((t['state'] for t in d if t['name'] == '$1'), 'absent')"
}
# table_field NAME FIELD
table_field() {
	"$ENGRAMCTL" -j list | jget "next(t['$2'] for t in d if t['name'] == '$1')"
}
stat_global() { "$ENGRAMCTL" -j stats | jget "d['global']['$1']"; }
# Has this host's server a connection from a peer now, or none?
peer_connected() { [ "$(stat_global connections)" -gt 0 ]; }
no_peer() { [ "$(stat_global connections)" -eq 0 ]; }
# round_medians FILE [UNIT]: FILE holds "NAME VALUE" lines, one per name
# and round; prints each line as "# round: ...", then each NAME's median
# with every round's value (the one-off bench scripts' summary).
round_medians() {
	local k vals m
	sed 's/^/# round: /' "$1"
	sort "$1" | awk '{ v[$1] = v[$1] " " $2 } END { for (k in v) print k v[k] }' |
		while read -r k vals; do
			m=$(tr ' ' '\n' <<<"$vals" | sort -g |
				awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
			echo "# median $k $m${2:+ $2} (of$(sed 's/ /, /g; s/^/ /' <<<"$vals"))"
		done
}
# served_mark T: note the host's served_T_rows and served_T_cpu_ns (T is
# rdma or tcp) and the time; served_check T N then checks that exactly N
# rows were answered over T since, with CPU time for them above 0 and
# within the wall time of every CPU.
served_mark() {
	SERVED_R0=$(stat_global "served_$1_rows")
	SERVED_C0=$(stat_global "served_$1_cpu_ns")
	SERVED_T0=$(date +%s%N)
}
served_check() {
	local t=$1 n=$2 cpu wall
	wall=$(($(date +%s%N) - SERVED_T0))
	check "the host counts the $n rows it answered over $t" \
		test "$(stat_global "served_${t}_rows")" -eq $((SERVED_R0 + n))
	cpu=$(($(stat_global "served_${t}_cpu_ns") - SERVED_C0))
	check "... and the CPU time it took ($cpu ns: above 0, within $wall ns on $(nproc) CPUs)" \
		test "$cpu" -gt 0 -a "$cpu" -le $((wall * $(nproc)))
}
# link_field ID KEY: an attribute of link ID from `link show -j` ("" when absent).
link_field() { "$ENGRAMCTL" -j link show "$1" | jget "str(d[0].get('$2', ''))"; }
# link_stat ID KEY: a counter of link ID from `stats -j` (0 when the counter
# is absent; nothing, and an error, when the link is).
link_stat() {
	"$ENGRAMCTL" -j stats | jget "next(l.get('$2', 0) for l in d['links'] if l['id'] == $1)"
}

# lookups NAME: the table's lookups served so far (0 when absent).
lookups() {
	"$ENGRAMCTL" -j stats 2>/dev/null |
		jget "sum(t['lookups'] for t in d['tables'] if t['name'] == '$1')" 2>/dev/null ||
		echo 0
}
# resumed SECONDS NAME [DONE_FILE]: a remote connection is up and lookups
# of table NAME are flowing again (or DONE_FILE exists: the remote side is
# done and nothing will flow again).
resumed() {
	local l0 end=$((SECONDS + $1))

	l0=$(lookups "$2")
	while [ $SECONDS -lt $end ]; do
		if [ "$(stat_global connections 2>/dev/null || echo 0)" -ge 1 ] &&
		   [ "$(lookups "$2")" -gt $((l0 + 5)) ]; then
			return 0
		fi
		[ -z "${3:-}" ] || [ ! -e "$3" ] || return 0
		sleep 1
	done
	return 1
}

# tensor_offsets FILE: the absolute file offsets of the weight and scale
# tensors (as "WEIGHT SCALE"), read from the safetensors header itself, for
# a remote side that has the file but not the host's table state.
tensor_offsets() {
	python3 - "$1" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
base = 8 + n
print(base + h["layers.1.engram.embed.weight"]["data_offsets"][0],
      base + h["layers.1.engram.embed.scale"]["data_offsets"][0])
PY
}

# make_table FILE ROWS [mktable options]: generate once, reuse afterwards.
make_table() {
	local f=$1 rows=$2
	shift 2
	[ -s "$f" ] && return 0
	"$ENGRAMCTL" mktable "$f.tmp" --rows "$rows" "$@" >/dev/null && mv "$f.tmp" "$f"
}

# wait_state NAME STATE SECONDS
# wait_state NAME STATE SECONDS: until table NAME is in STATE, polled with
# engramctl and awk: python3 (table_state) starts in seconds over 5.10's 9p
# root, too slow to catch a load of a few seconds while it runs.
wait_state() {
	local end=$((SECONDS + $3)) s
	for _ in $(seq 1 $(($3 * 10))); do
		s=$("$ENGRAMCTL" show "$1" 2>/dev/null | awk '$1 == "state" { print $2; exit }')
		[ "${s:-absent}" = "$2" ] && return 0
		[ $SECONDS -lt $end ] || break
		sleep 0.1
	done
	return 1
}

[ -n "$MODULE" ] || MODULE=$(ls "$TOP"/build/"$(uname -r)"/kmod/engram_rdma.ko 2>/dev/null)
