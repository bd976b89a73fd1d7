#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# The guest side of `make bench` (selftests/bench/run.sh), in one guest that
# is host and GPU node at once (rxe loopback on rxe0, 192.0.2.1):
#
#   bench.sh [--smoke] [--iters N] [--rows N] [--role one|host|spark]
#            [--mtu BYTES] [--rounds N]
#
# --role one (the default): this guest is host and GPU node at once.  With
# BENCH_TOPO=2 (selftests/bench/run.sh) the host guest (192.0.2.1) runs
# --role host: the table, load + verify, the perftest servers, serving
# until the Spark is done; the Spark guest (192.0.2.2) runs --role spark:
# the perftest clients, the fetches and the local reader (on its own copy
# of the same deterministic table).
#
# Loads a generated table (4,194,304 rows, 1.1 GB; --smoke: 65,536 rows)
# and measures, one after the other so they do not disturb each other:
#   - load + verify against sha256sum of the same file, cold and warm;
#   - perftest on the same rxe device: ib_send_lat at 64 B, ib_write_lat and
#     ib_write_bw at the byte counts of 1, 288, 4,096 and 49,152 rows;
#   - engram fetches of 1, 288, 4,096, 16,384 and 49,152 random rows over
#     RDMA and over TCP, sleeping and busy-polling (engram_bench fetch);
#   - throughput with 1, 2 and 4 fetching processes, with the guest's busy
#     CPU time;
#   - the same fetches (sleeping) and throughput (1 and 2 processes) of the
#     table opened on no link (link 0), which both links serve, and which
#     link took them;
#   - libengram's local reader (pread with O_DIRECT) on the same rows;
#   - what a fetch costs, in counts of work per fetch (case "cost"): the
#     module's posts, work requests, completions, work items, allocations
#     and host time per request, softirqs, interrupts and context switches,
#     for 1, 288, 4,096 and 49,152 rows on the named RDMA link and on link
#     0, sleeping and busy-polling;
#   - --rounds N (default 3; --smoke: 1) rounds of the comparisons whose
#     ratios report.py takes as medians over the rounds, each round
#     measuring a fetch right after its perftest counterpart: ib_write_lat
#     at 264 and 76,032 B, fetches of 1 and 288 rows, ib_write_bw at
#     4,224 B (one gathered WRITE) over 1 and 2 QPs and at 12,976,128 B,
#     fetches of 49,152 rows, and 1 and 2 processes fetching 49,152 rows
#     at a time.  Their labels start with rN_.
# Every fetched row is compared with the file.  Each case prints one line
# "BENCH {json}"; report.py turns them into the table, the ratios and the
# plot.  --iters N (default 1000) is the timed iterations of every case
# after its warm-up; --smoke runs each case briefly (make check asserts only
# that every case ran and every row was exact, never a timing).  --mtu sets
# the MTU of rxe0's netdev (and its veth peer) first: 1500, the default,
# gives rxe an RDMA MTU of 1024; 9000 gives 4096, as RoCE is deployed.
# With two guests both must be given the same.
set -uo pipefail
. "$(dirname "$0")/../guest/lib.sh"

SMOKE=0 ITERS="" ROWS="" ROLE=one MTU="" ROUNDS=""
while [ $# -gt 0 ]; do
	case "$1" in
	--smoke) SMOKE=1; shift ;;
	--rounds) ROUNDS=${2:?}; shift 2
		[ "$ROUNDS" -ge 1 ] 2>/dev/null || { echo "bench.sh: --rounds takes 1 or more" >&2; exit 2; } ;;
	--iters) ITERS=${2:?}; shift 2 ;;
	--rows) ROWS=${2:?}; shift 2 ;;
	--role) ROLE=${2:?}; shift 2 ;;
	--mtu) MTU=${2:?}; shift 2 ;;
	*) echo "bench.sh: unknown option '$1'" >&2; exit 2 ;;
	esac
done
if [ $SMOKE = 1 ]; then
	ITERS=${ITERS:-10} ROWS=${ROWS:-65536} WARMUP=(--warmup 1) LOCAL_SIZES="1 288"
	ROUNDS=${ROUNDS:-1}
else
	ITERS=${ITERS:-1000} ROWS=${ROWS:-4194304} WARMUP=() LOCAL_SIZES="1 288 4096 16384 49152"
	ROUNDS=${ROUNDS:-3}
fi
# In the rounds, cases of 49,152 rows (12,976,128 B) make a fiftieth of the
# iterations (at least 5, the fewest perftest takes): a round then stays
# near a minute at the rate of rxe under TCG.
BIG_ITERS=$((ITERS / 50))
[ $BIG_ITERS -lt 5 ] && BIG_ITERS=5
# Labels of perftest cases start with this (rN_ in the rounds).
LP=""

# The local reader makes two 4 KiB O_DIRECT reads per row through an
# emulated disk, about 1 ms per row in a TCG guest (a 49,152-row read takes
# close to a minute), so its cases read at most LOCAL_ROWS rows in all.
LOCAL_ROWS=30000
case "$ROLE" in
one|host|spark) ;;
*) echo "bench.sh: --role takes one, host or spark" >&2; exit 2 ;;
esac
IP=192.0.2.1		# the host's address (the one guest's in --role one)
ME=$IP
[ "$ROLE" = spark ] && ME=192.0.2.2
RPORT=18515		# rdma_cm port of the module's listener
TPORT=18516		# TCP port of the module's listener
PPORT=18600		# perftest's own TCP exchange port
BENCH=$TOP/selftests/bench/engram_bench
F=$SCRATCH/bench.safetensors
SIZES="1 288 4096 16384 49152"
ROW_BYTES=264

emit() { echo "BENCH $*"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.6f", b - a }'; }

# --- the link's MTU ------------------------------------------------------
NETDEV=$(rdma link show rxe0/1 | sed -n 's/.* netdev \([^ ]*\).*/\1/p')
[ -n "$NETDEV" ] || bail "rxe0 has no netdev"
if [ -n "$MTU" ]; then
	ip link set "$NETDEV" mtu "$MTU" || bail "MTU $MTU on $NETDEV"
	[ "$NETDEV" = er0 ] && { ip link set er1 mtu "$MTU" || bail "MTU $MTU on er1"; }
fi
# rxe follows its netdev's MTU at once (NETDEV_CHANGEMTU): 1500 gives 1024.
RDMA_MTU=$(ibv_devinfo -d rxe0 | sed -n 's/.*active_mtu:[[:space:]]*\([0-9]*\).*/\1/p')
[ -n "$RDMA_MTU" ] || bail "no active_mtu for rxe0"

# --- environment -------------------------------------------------------
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
emit "{\"case\": \"env\", \"kernel\": \"$(uname -r)\", \"cpu_model\": \"${cpu//\"/}\"," \
	"\"guest_cpus\": $(nproc), \"guest_mem_bytes\": $(meminfo MemTotal)," \
	"\"perftest\": \"$(dpkg-query -W -f '${Version}' perftest 2>/dev/null)\"," \
	"\"netdev_mtu\": $(cat "/sys/class/net/$NETDEV/mtu"), \"rdma_mtu\": $RDMA_MTU," \
	"\"iters\": $ITERS, \"rounds\": $ROUNDS, \"table_rows\": $ROWS," \
	"\"smoke\": $([ $SMOKE = 1 ] && echo true || echo false)}"

# --- the table, load + verify -------------------------------------------
module_unload || bail "rmmod"
case "$ROLE" in
one) module_load "listen=rdma://$IP:$RPORT,tcp://$IP:$TPORT" \
	"remote=rdma://$IP:$RPORT@$IP,tcp://$IP:$TPORT@$IP" link_queues=0 link_poll_queues=1 ||
	bail "insmod" ;;
host) module_load "listen=rdma://$IP:$RPORT,tcp://$IP:$TPORT" || bail "insmod" ;;
spark) module_load "remote=rdma://$IP:$RPORT@$ME,tcp://$IP:$TPORT@$ME" link_queues=0 \
	link_poll_queues=1 ||
	bail "insmod" ;;
esac
# The same seed on both guests: the Spark checks rows against its own copy.
"$ENGRAMCTL" mktable "$F" --rows "$ROWS" --seed 5 --pad-before 13 >/dev/null 2>&1 ||
	bail "mktable $ROWS rows"
bytes=$(stat -c %s "$F")
[ "$ROLE" = spark ] || for mode in cold warm; do
	[ $mode = cold ] && drop_caches
	s=$(now); sum=$(sha256sum "$F" | cut -d' ' -f1); e=$(now); tsha=$(secs "$s" "$e")
	[ $mode = cold ] && drop_caches
	s=$(now)
	"$ENGRAMCTL" load "$F" --tensor "$PREFIX" --name bench --sha256 "$sum" --no-progress \
		>/dev/null 2>&1 || bail "load ($mode)"
	e=$(now); tload=$(secs "$s" "$e")
	s=$(now); "$ENGRAMCTL" verify bench >/dev/null 2>&1 || bail "verify ($mode)"
	e=$(now); tver=$(secs "$s" "$e")
	emit "{\"case\": \"load\", \"label\": \"load_$mode\", \"mode\": \"$mode\"," \
		"\"bytes\": $bytes, \"sha256sum_s\": $tsha, \"load_s\": $tload, \"verify_s\": $tver}"
	[ $mode = cold ] && { "$ENGRAMCTL" unload bench >/dev/null 2>&1 || bail "unload"; }
done
# The tensors' offsets in the file, from its header.
read -r WOFF SOFF < <(python3 - "$F" "$PREFIX" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
base = 8 + n
print(base + h[sys.argv[2] + ".weight"]["data_offsets"][0],
      base + h[sys.argv[2] + ".scale"]["data_offsets"][0])
PY
)
[ -n "$SOFF" ] || bail "no tensor offsets in $F"

# --- perftest on the same device ------------------------------------------
# perftest TOOL SIZE N: run TOOL's server and client on rxe0 and print the
# figures row of its report (the line after "#bytes").
perftest() {
	local tool=$1 size=$2 n=$3 out srv i r
	shift 3		# the rest: options of the tool, for server and client
	# Long enough for 1,000 round trips of 12,976,128 B under emulation.
	local tmo=$((600 + n * (size / 65536 + 1) / 20))
	if [ "$ROLE" = host ]; then
		# The Spark's clients come in the same order; each server ends
		# with its client.
		timeout $tmo "$tool" -d rxe0 -F -p $PPORT -s "$size" -n "$n" "$@" >/dev/null 2>&1
		return
	fi
	if [ "$ROLE" = one ]; then
		timeout $tmo "$tool" -d rxe0 -F -p $PPORT -s "$size" -n "$n" "$@" >/dev/null 2>&1 &
		srv=$!
		sleep 1
	fi
	# The Spark retries until the host guest's server for this case listens
	# (the first one only after the host's load, minutes for 1.1 GB).
	# In one guest, a client that came before its server listened finds
	# nothing on the port (a loaded machine, more than the second above):
	# the server still waits, so try again, a few times.
	for i in $(seq 1 600); do
		out=$(timeout $tmo "$tool" -d rxe0 -F -p $PPORT -s "$size" -n "$n" "$@" $IP 2>&1) &&
			break
		if [ "$ROLE" = one ]; then
			[ "$i" -lt 10 ] && grep -q "Couldn't connect" <<<"$out" || break
		elif [ "$ROLE" != spark ]; then
			break
		fi
		sleep 1
	done
	if [ "$ROLE" = one ]; then
		# A client that failed leaves its server waiting.
		echo "$out" | grep -q '#bytes' || kill $srv 2>/dev/null
		wait $srv
	fi
	# The first line of figures after the header (a warning may come
	# between them).
	r=$(echo "$out" | awk '/#bytes/ { f = 1; next } f && $1 ~ /^[0-9]+$/ { print; exit }')
	# A report is a line of figures: 4 of them from ib_write_bw, 9 from
	# the latency tools.  Anything else, or figures of "inf", is shown
	# with what perftest said of it.
	case "$(used_figures "$r")" in
	*inf*|*nan*) ;;
	*) [ "$(wc -w <<<"$r")" -lt 4 ] || { echo "$r"; return; } ;;
	esac
	{ echo "$out" | grep -iE "correlation|conflicting|error|fail|couldn" | head -n 3
	  echo "$out" | tail -n 3; } | sed "s/^/perftest: $tool -s $size: /" >&2
	echo "$r"
}
# perftest's latency tools sometimes print "inf" for every figure of a
# short run in a TCG guest (ib_write_lat -s 12976128 -n 5 on 6.1, three
# tries in a row twice in make checks with two guests busy).  The likely
# cause: perftest calibrates its cycle counter against usleep() at start,
# and takes 0 MHz ("Correlation coefficient r^2 < 0.9") when a loaded
# machine's timings do not fit a line.  They also
# sometimes end without a report, or with less of one than they print.
# In one guest (two guests run their cases in lockstep), up to five more
# tries, a few seconds apart so that a burst of load can pass, each
# rejected one shown with its reason; then the case reports that it had
# none.
# used_figures ROW: a report's figures without the latency tools' standard
# deviation (the 7th), which nothing here reads and which ib_write_lat
# prints as -nan over 150 round trips of 12,976,128 B (seen on 6.12) when
# the others are sound.
used_figures() { awk 'NF >= 9 { $7 = "" } { print }' <<<"$1"; }
perftest_figures() {
	local r try bad want=9
	[ "$1" = ib_write_bw ] && want=4
	for try in 1 2 3 4 5 6; do
		r=$(perftest "$@")
		# The host guest runs the servers only: the Spark reports.
		[ "$ROLE" = host ] && return
		# ib_write_bw over a handful of iterations may report 0.00 MB/s
		# (seen at -n 5 for 76,032 and 12,976,128 bytes on 6.1 in make
		# check), which leaves the ratios without a denominator.
		bad=
		case "$1:$(used_figures "$r")" in
		*inf*|*nan*) bad="no clock (inf or nan)" ;;
		*:) bad="no report" ;;
		ib_write_bw:*) awk '{ exit !($4 <= 0) }' <<<"$r" && bad="0 MB/s" ;;
		esac
		[ -n "$bad" ] || [ "$(wc -w <<<"$r")" -ge $want ] || bad="$(wc -w <<<"$r") figures"
		[ -z "$bad" ] && { echo "$r"; return; }
		echo "perftest: $1 -s $2 -n $3: try $try: $bad: $r" >&2
		[ "$ROLE" = one ] && [ $try -lt 6 ] || break
		sleep 3
	done
	case "$(used_figures "$r")" in *inf*|*nan*) return ;; esac
	echo "$r"
}
lat_case() {
	local tool=$1 size=$2 n=$3 r
	r=$(perftest_figures "$tool" "$size" "$n")
	[ "$ROLE" = host ] && return
	set -- $r
	if [ $# -lt 9 ]; then
		emit "{\"case\": \"perftest\", \"label\": \"$LP${tool}_$size\", \"tool\": \"$tool\"," \
			"\"bytes\": $size, \"iters\": $n, \"error\": \"no report\"}"
		return
	fi
	# t_typical is perftest's median one-way latency (half a round trip).
	emit "{\"case\": \"perftest\", \"label\": \"$LP${tool}_$size\", \"tool\": \"$tool\"," \
		"\"bytes\": $1, \"iters\": $2, \"t_min_us\": $3, \"t_max_us\": $4," \
		"\"t_typical_us\": $5, \"t_avg_us\": $6, \"p99_us\": $8, \"p999_us\": $9}"
}
# bw_case SIZE N [QPS]: ib_write_bw, over QPS queue pairs (-q) when given,
# labelled with a _qQPS suffix.
bw_case() {
	local size=$1 n=$2 qps=${3:-} r q=() sfx=""
	[ -n "$qps" ] && { q=(-q "$qps"); sfx=_q$qps; }
	r=$(perftest_figures ib_write_bw "$size" "$n" "${q[@]}")
	[ "$ROLE" = host ] && return
	set -- $r
	if [ $# -lt 4 ]; then
		emit "{\"case\": \"perftest\", \"label\": \"${LP}ib_write_bw_$size$sfx\"," \
			"\"tool\": \"ib_write_bw\", \"bytes\": $size, \"iters\": $n, \"error\": \"no report\"}"
		return
	fi
	# perftest's MB is 2^20 bytes.
	emit "{\"case\": \"perftest\", \"label\": \"${LP}ib_write_bw_$size$sfx\", \"tool\": \"ib_write_bw\"," \
		"\"qps\": ${qps:-1}, \"bytes\": $1, \"iters\": $2, \"bw_peak_mib_s\": $3," \
		"\"bw_avg_mib_s\": $4," \
		"\"gbytes_per_s\": $(awk -v m="$4" 'BEGIN { printf "%.6f", m * 1048576 / 1e9 }')}"
}
lat_case ib_send_lat 64 "$ITERS"
for r in 1 288 4096 49152; do
	lat_case ib_write_lat $((r * ROW_BYTES)) "$ITERS"
done
for r in 1 288 4096 49152; do
	bw_case $((r * ROW_BYTES)) "$ITERS"
done

# rounds: the comparisons report.py takes medians of, each fetch case right
# after its perftest counterpart, ROUNDS times.  The host guest runs the
# perftest servers of each round in the same order (fetch_round and
# tput_round do nothing there); the Spark's links are up by then.
fetch_round() {
	[ "$ROLE" = host ] && return
	run_bench "${FB[@]}" --link "$RLINK" --rows "$1" --iters "$2" "${WARMUP[@]}" \
		--seed "$1" --label "${LP}fetch_rdma_sleep_$1"
}
tput_round() {
	[ "$ROLE" = host ] && return
	run_bench "${FB[@]}" --link "$RLINK" --rows 49152 --iters "$BIG_ITERS" --procs "$1" \
		"${WARMUP[@]}" --seed 9 --label "${LP}tput49152_rdma_$1"
}
rounds() {
	local round
	for round in $(seq 1 "$ROUNDS"); do
		LP=r${round}_
		lat_case ib_write_lat $ROW_BYTES "$ITERS"
		fetch_round 1 "$ITERS"
		lat_case ib_write_lat $((288 * ROW_BYTES)) "$ITERS"
		fetch_round 288 "$ITERS"
		bw_case $((16 * ROW_BYTES)) "$ITERS"
		bw_case $((16 * ROW_BYTES)) "$ITERS" 2
		bw_case $((49152 * ROW_BYTES)) "$BIG_ITERS"
		fetch_round 49152 "$BIG_ITERS"
		tput_round 1
		tput_round 2
	done
	LP=""
}
run_bench() { emit "$("$@" 2>/dev/null || true)"; }

if [ "$ROLE" = host ]; then
	rounds
	# Serve until the Spark unloads its module (its links go away), at
	# most 3 hours.
	seen=0
	for _ in $(seq 1 10800); do
		c=$(stat_global connections)
		[ "$c" -gt 0 ] && seen=1
		[ $seen = 1 ] && [ "$c" -eq 0 ] && break
		sleep 1
	done
	"$ENGRAMCTL" -j stats | jget "json.dumps({'case': 'stats_host', 'global': d['global']})" |
		sed 's/^/BENCH /'
	"$ENGRAMCTL" unload bench >/dev/null 2>&1
	emit '{"case": "end_host"}'
	exit 0
fi

# --- engram fetches --------------------------------------------------------
link_of() {
	"$ENGRAMCTL" -j link show | jget "[l['id'] for l in d if l['transport'] == '$1'][0]"
}
RLINK=$(link_of rdma) || bail "no rdma link"
TLINK=$(link_of tcp) || bail "no tcp link"
FB=("$BENCH" fetch --table bench --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total "$ROWS" --timeout-ms 60000)
# Both links up with the table before anything is timed.
for l in $RLINK $TLINK; do
	ok_link=0
	for _ in $(seq 1 60); do
		out=$("${FB[@]}" --link "$l" --rows 1 --iters 1 --warmup 0 2>&1) &&
			{ ok_link=1; break; }
		sleep 1
	done
	if [ $ok_link = 0 ]; then
		echo "$out" | tail -n 5 | sed "s/^/link $l: /" >&2
		"$ENGRAMCTL" link show >&2
		bail "link $l never served the table"
	fi
done
rounds
for t in rdma tcp; do
	l=$RLINK
	[ $t = tcp ] && l=$TLINK
	for mode in sleep busy; do
		bp=()
		[ $mode = busy ] && bp=(--busy-poll)
		for r in $SIZES; do
			run_bench "${FB[@]}" --link "$l" --rows "$r" --iters "$ITERS" "${bp[@]}" \
				"${WARMUP[@]}" --seed "$r" --label "fetch_${t}_${mode}_$r"
		done
	done
	# Throughput: concurrent processes, 4,096 rows each fetch.
	for p in 1 2 4; do
		run_bench "${FB[@]}" --link "$l" --rows 4096 --iters "$ITERS" --procs "$p" \
			"${WARMUP[@]}" --seed 7 --label "tput_${t}_${p}"
	done
done

# --- link 0: the table opened on no link (the default of libengram, the
# Python package and fetch_check), with an RDMA and a TCP link to this
# host: beside the named RDMA link's figures, what the replica layer
# costs; the links' fetch counters say which took the fetches (RDMA
# alone with replica_prefer_rdma, the default).
lr0=$(link_stat "$RLINK" fetches) lt0=$(link_stat "$TLINK" fetches)
for r in $SIZES; do
	run_bench "${FB[@]}" --link 0 --rows "$r" --iters "$ITERS" "${WARMUP[@]}" --seed "$r" \
		--label "fetch_link0_sleep_$r"
done
for p in 1 2; do
	run_bench "${FB[@]}" --link 0 --rows 4096 --iters "$ITERS" --procs "$p" \
		"${WARMUP[@]}" --seed 7 --label "tput_link0_$p"
done
emit "{\"case\": \"link0_links\", \"rdma_fetches\": $(($(link_stat "$RLINK" fetches) - lr0))," \
	"\"tcp_fetches\": $(($(link_stat "$TLINK" fetches) - lt0))," \
	"\"prefer_rdma\": \"$(cat /sys/module/engram_rdma/parameters/replica_prefer_rdma)\"}"

# --- what a fetch costs: counts of work, which emulation does not move ------
# For 1, 288, 4,096 and 49,152 rows, on the named RDMA link (with per-fetch
# keys, and as "kept" with the buffer's keys kept: ENGRAM_RDMA_KEEP_KEYS)
# and on link 0, sleeping and busy-polling: the module's cost counters (both roles are in
# this guest: client_* are the GPU node's, host_* the host's), the
# softirqs that poll completion queues (IRQ_POLL: one per completion event
# of the module's CQs, both roles, where a NIC raises an interrupt) and
# the provider's (NET_RX, TASKLET), read before and after COST_ITERS
# fetches (no warm-up) and divided by them, with the fetching process's
# context switches.  Hardware interrupts are left out: rxe raises none,
# and a TCG guest's are its timer's.  Heartbeats are off meanwhile, so
# that nothing else posts, and so is the host's idle timeout, so that no
# queue reconnects.  report.py makes the table.
cost_snap() {
	"$ENGRAMCTL" -j stats |
		jget "json.dumps({k: v for k, v in d['global'].items() if k.startswith(('client_', 'host_', 'kept_'))})"
}
softirqs() {	# NAME: that softirq's count, summed over the CPUs
	awk -v n="$1:" '$1 == n { s = 0; for (i = 2; i <= NF; i++) s += $i; print s }' /proc/softirqs
}
cost_counts() {
	echo "{\"module\": $(cost_snap), \"irq_poll\": $(softirqs IRQ_POLL)," \
		"\"net_rx\": $(softirqs NET_RX), \"tasklet\": $(softirqs TASKLET)}"
}
cost_case() {	# cost_case LINK NAME MODE ROWS ITERS
	local a b out bp=() keep=
	[ "$3" = busy ] && bp=(--busy-poll)
	[ "$2" = kept ] && keep=1
	a=$(cost_counts)
	out=$(ENGRAM_RDMA_KEEP_KEYS=$keep "${FB[@]}" --link "$1" --rows "$4" --iters "$5" --warmup 0 "${bp[@]}" \
		--seed "$4" --label "cost_$2_$3_$4" 2>/dev/null)
	b=$(cost_counts)
	emit "$(python3 - "$a" "$b" "$out" "$2" "$3" "$4" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
try:
    f = json.loads(sys.argv[3])
except ValueError:
    f = {}
n = f.get("fetches") or 0
per = {}
for k, v in b["module"].items():
    per[k] = (v - a["module"].get(k, 0)) / n if n else None
for k in ("irq_poll", "net_rx", "tasklet"):
    per[k] = (b[k] - a[k]) / n if n else None
for k in ("vol_switches", "invol_switches"):
    per[k] = f[k] / n if n and k in f else None
print(json.dumps({"case": "cost", "link": sys.argv[4], "mode": sys.argv[5],
                  "rows": int(sys.argv[6]), "fetches": n, "iters": f.get("iters"),
                  "bad_rows": f.get("bad_rows"), "errors": f.get("errors"),
                  "p50_us": f.get("p50_us"), "per_fetch": per}))
PY
)"
}
# Without heartbeats a queue that no case uses for a while (the poll queue
# while fetches sleep, queue 0 while they busy-poll) would be closed idle
# by the host (rdma_idle_timeout_ms, 30 s), and the link's reconnect
# counted in the next case's posts: the host's idle timeout is off too.
HB_SAVED=$(cat /sys/module/engram_rdma/parameters/heartbeat_ms)
IDLE_SAVED=$(cat /sys/module/engram_rdma/parameters/rdma_idle_timeout_ms)
echo 0 > /sys/module/engram_rdma/parameters/heartbeat_ms
echo 0 > /sys/module/engram_rdma/parameters/rdma_idle_timeout_ms
COST_ITERS=$((SMOKE ? 10 : 200))
for lk in "$RLINK rdma" "$RLINK kept" "0 link0"; do
	set -- $lk
	for mode in sleep busy; do
		for r in 1 288 4096 49152; do
			it=$COST_ITERS
			[ "$r" = 49152 ] && it=$((COST_ITERS / 10 < 5 ? 5 : COST_ITERS / 10))
			cost_case "$1" "$2" "$mode" "$r" "$it"
		done
	done
done
echo "$HB_SAVED" > /sys/module/engram_rdma/parameters/heartbeat_ms
echo "$IDLE_SAVED" > /sys/module/engram_rdma/parameters/rdma_idle_timeout_ms

# --- the local reader ---------------------------------------------------
for r in $LOCAL_SIZES; do
	n=$((LOCAL_ROWS / r))
	[ $n -gt "$ITERS" ] && n=$ITERS
	[ $n -lt 3 ] && n=3
	run_bench "$BENCH" local --file "$F" --tensor "$PREFIX" --weight-offset "$WOFF" \
		--scale-offset "$SOFF" --rows-total "$ROWS" --rows "$r" --iters "$n" \
		--warmup 1 --seed "$r" --label "local_$r"
done
"$ENGRAMCTL" -j stats | jget "json.dumps({'case': 'stats', 'global': d['global']})" |
	sed 's/^/BENCH /'
[ "$ROLE" = one ] && "$ENGRAMCTL" unload bench >/dev/null 2>&1
# The host guest serves until this link goes away.
[ "$ROLE" = spark ] && module_unload
emit '{"case": "end"}'
