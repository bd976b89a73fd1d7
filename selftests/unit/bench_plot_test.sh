#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make bench's plot (selftests/bench/report.py --png) on made-up results:
# a PNG comes out; with every case there nothing is reported missing; with
# a case left out, that point is named on stderr (and on the plot) rather
# than dropped silently.  Prints TAP.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
rep=$here/../bench/report.py
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }

# BENCH lines as bench.sh prints them, with made-up figures.
results() {
	local skip=${1:-} r us
	for r in 1 288 4096 16384 49152; do
		for l in fetch_rdma_sleep fetch_rdma_busy fetch_tcp_sleep local; do
			[ "${l}_$r" = "$skip" ] && continue
			us=$((100 + r / 10))
			printf 'BENCH {"case": "fetch", "label": "%s_%d", "rows": %d, "bytes": %d, "p50_us": %d, "p99_us": %d, "mean_us": %d}\n' \
				"$l" "$r" "$r" $((r * 264)) "$us" $((us * 2)) "$us"
		done
	done
	for r in 1 288 4096 49152; do
		printf 'BENCH {"case": "perftest", "label": "ib_write_lat_%d", "t_typical_us": 20}\n' $((r * 264))
		printf 'BENCH {"case": "perftest", "label": "ib_write_bw_%d", "gbytes_per_s": 0.5}\n' $((r * 264))
	done
}

results > "$tmp/all.log"
/usr/bin/python3 "$rep" --in "$tmp/all.log" --json "$tmp/all.json" --png "$tmp/all.png" \
	>/dev/null 2>"$tmp/all.err"
rc=$?
if [ $rc -eq 0 ] && [ "$(head -c 4 "$tmp/all.png" | od -An -c | tr -d ' ')" = '211PNG' ]; then
	ok "a PNG is drawn"
else
	nok "a PNG is drawn (exit $rc)"
	sed 's/^/#   /' "$tmp/all.err"
fi
if ! grep -q 'no value' "$tmp/all.err"; then
	ok "with every case there, no point is reported missing"
else
	nok "with every case there, no point is reported missing"
	sed 's/^/#   /' "$tmp/all.err"
fi
results fetch_tcp_sleep_49152 > "$tmp/some.log"
/usr/bin/python3 "$rep" --in "$tmp/some.log" --json "$tmp/some.json" --png "$tmp/some.png" \
	>/dev/null 2>"$tmp/some.err"
if grep -q 'no value for tcp 49152 (p50)' "$tmp/some.err" &&
   grep -q 'no value for tcp 49152 (p99)' "$tmp/some.err" && [ -s "$tmp/some.png" ]; then
	ok "a case left out is named (p50, p99) and the rest still drawn"
else
	nok "a case left out is named (p50, p99) and the rest still drawn"
	sed 's/^/#   /' "$tmp/some.err"
fi

# make bench's replicas case: each round's ratio (two replicas over one
# host), their median, a row of the table, and --check names a replicas
# case whose rows were wrong.
repl() {
	# repl SIDE ROWS PROCS ROUND ROWS_PER_S [BAD_ROWS]
	printf 'BENCH {"kind": "fetch", "label": "repl_%s_%d_p%d_r%d", "rows": %d, "procs": %d, "iters": 2, "fetches": %d, "rows_per_s": %s, "p50_us": 100, "rows_checked": 10, "bad_rows": %d, "errors": 0, "fallbacks": 0}\n' \
		"$1" "$2" "$3" "$4" "$2" "$3" $((2 * $3)) "$5" "${6:-0}"
}
{
	results
	for r in 1 2 3; do repl one 49152 1 $r 1000; done
	repl two 49152 1 1 1500
	repl two 49152 1 2 3000
	repl two 49152 1 3 1800
} >"$tmp/repl.log"
/usr/bin/python3 "$rep" --in "$tmp/repl.log" --json "$tmp/repl.json" >"$tmp/repl.md" 2>"$tmp/repl.err"
got=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ratios"].get("replicas_vs_one_49152_p1"))' "$tmp/repl.json" 2>&1)
if [ "$got" = 1.8 ] && grep -q '^| 49,152 rows | 1 | .* | 1.800 |$' "$tmp/repl.md"; then
	ok "replicas: the median of the rounds' ratios (1.5, 3.0, 1.8: 1.8), and its table row"
else
	nok "replicas: the median of the rounds' ratios (got '$got')"
	grep 'replicas\|rows |' "$tmp/repl.md" | sed 's/^/#   /'
fi
repl two 49152 1 4 2000 3 >>"$tmp/repl.log"
/usr/bin/python3 "$rep" --in "$tmp/repl.log" --json "$tmp/repl.json" --check >/dev/null 2>"$tmp/repl.err"
if grep -q 'repl_two_49152_p1_r4: bad_rows 3' "$tmp/repl.err"; then
	ok "replicas: --check names a case whose rows were wrong"
else
	nok "replicas: --check names a case whose rows were wrong"
	sed 's/^/#   /' "$tmp/repl.err"
fi

# Link 0 with replica_prefer_rdma=Y: a fetch the TCP link took is named
# (a count, not a timing), its share is in the ratios; with N it is not.
for pref in Y N; do
	{ results; printf 'BENCH {"case": "link0_links", "rdma_fetches": 9, "tcp_fetches": 3, "prefer_rdma": "%s"}\n' "$pref"; } \
		>"$tmp/l0.log"
	/usr/bin/python3 "$rep" --in "$tmp/l0.log" --json "$tmp/l0.json" --check >/dev/null \
		2>"$tmp/l0.err"
	named=0
	grep -q 'link 0: the TCP link took 3 fetches' "$tmp/l0.err" && named=1
	share=$(/usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["ratios"]["link0_tcp_share"])' "$tmp/l0.json")
	if [ "$share" = 0.25 ] && [ $named = "$([ $pref = Y ] && echo 1 || echo 0)" ]; then
		ok "link 0, replica_prefer_rdma=$pref: share 0.25, --check names it only with Y"
	else
		nok "link 0, replica_prefer_rdma=$pref: share $share, named $named"
	fi
done
# What a fetch costs: the host's time per request fitted over the row counts
# (made up as 5,000 ns + 2 ns per row: the fit gives both back), the table,
# and --check names a named-link case with other than one request a fetch.
cost() {	# cost LINK MODE ROWS [HOST_REQUESTS [HOST_WORK_ITEMS [CLIENT_WRS [LINK_LOCKS [POSTS [SOFTIRQ_CQES]]]]]]
	local hr=${4:-1} hw=${5:-0} wrs=${6:-2.5} locks=${7:-3.0} posts=${8:-1.1}
	local soft=${9:-$([ "$2" = busy ] && echo 0.0 || echo 1.0)}
	printf 'BENCH {"case": "cost", "link": "%s", "mode": "%s", "rows": %d, "fetches": 10, "iters": 10, "bad_rows": 0, "errors": 0, "per_fetch": {"client_posts": %s, "client_wrs": %s, "client_cqes": 1.0, "kept_registrations": 0.5, "client_allocs": 4.0, "host_requests": %s, "host_work_items": %s, "host_request_ns": %s, "vol_switches": 1.0, "client_link_locks": %s, "client_softirq_cqes": %s}}\n' \
		"$1" "$2" "$3" "$posts" "$wrs" "$hr" "$hw" "$(( (5000 + 2 * $3) ))" "$locks" "$soft"
}
{
	results
	for lk in rdma kept link0; do for m in sleep busy; do for r in 1 288 4096 49152; do
		case "$lk $m $r" in
		"rdma busy 288") cost "$lk" "$m" "$r" 2 ;;
		"kept sleep 288") cost "$lk" "$m" "$r" 1 0 3.5 ;;
		"link0 sleep 4096") cost "$lk" "$m" "$r" 1 0.6 ;;
		"link0 sleep 49152") cost "$lk" "$m" "$r" 1 1 ;;
		"rdma sleep 1") cost "$lk" "$m" "$r" 1 0 2.5 4.0 ;;
		"rdma sleep 49152") cost "$lk" "$m" "$r" 1 1 2.5 9.0 2.1 ;;
		"link0 busy 288") cost "$lk" "$m" "$r" 1 0 2.5 3.0 2.0 ;;
		"kept busy 1") cost "$lk" "$m" "$r" 1 0 2.5 3.0 2.1 ;;
		"rdma busy 4096") cost "$lk" "$m" "$r" 1 0 2.5 3.0 1.1 1.0 ;;
		"link0 busy 1") cost "$lk" "$m" "$r" 1 0 2.5 3.0 1.1 2.0 ;;
		*) cost "$lk" "$m" "$r" ;;
		esac
	done; done; done
} >"$tmp/cost.log"
/usr/bin/python3 "$rep" --in "$tmp/cost.log" --json "$tmp/cost.json" --check >"$tmp/cost.md" \
	2>"$tmp/cost.err"
fit=$(/usr/bin/python3 -c 'import json, sys; f = json.load(open(sys.argv[1]))["cost"]["host_fit"]["rdma_sleep"]; print("%.0f %.1f" % (f["intercept_ns"], f["ns_per_row"]))' "$tmp/cost.json" 2>&1)
if [ "$fit" = "5000 2.0" ] && grep -q '^| rdma sleep | 288 | 4.00 | ' "$tmp/cost.md" &&
   grep -q 'rdma sleep: 5 µs per request + 2 ns per row' "$tmp/cost.md"; then
	ok "cost: the host's time fitted over rows (5,000 ns + 2 ns a row) and the table"
else
	nok "cost: fit '$fit'"
	grep 'cost\|rdma sleep' "$tmp/cost.md" | sed 's/^/#   /'
fi
# flags_only DESC MESSAGE OTHER: --check printed MESSAGE, and no other line
# of it matches OTHER.
flags_only() {
	if grep -q -- "$2" "$tmp/cost.err" && ! grep -v -- "$2" "$tmp/cost.err" | grep -q -- "$3"; then
		ok "cost: --check names $1"
	else
		nok "cost: --check names $1"
		sed 's/^/#   /' "$tmp/cost.err"
	fi
}
flags_only "the named-link case with two requests a fetch, and only it" \
	'cost_rdma_busy_288: 2 host requests per fetch, not 1' 'cost_rdma_sleep_288'
flags_only "the kept-keys case that posts a registration per fetch, and only it" \
	'cost_kept_sleep_288: 3.00 GPU WRs per fetch besides the windows' \
	'cost_kept_sleep_1\|cost_kept_busy'
flags_only "a case up to 4,096 rows whose requests took work items, not 49,152's" \
	'cost_link0_sleep_4096: 0.6 host work items per fetch for 1 requests' \
	'cost_link0_sleep_49152'
flags_only "a case up to 4,096 rows that posts its receive apart, and only it" \
	'cost_link0_busy_288: 2.00 GPU-node posts per fetch, not 1 and an eighth' \
	'GPU-node posts per fetch'
flags_only "a case up to 4,096 rows holding the link's lock 4 times a fetch" \
	"cost_rdma_sleep_1: 4.00 holds of the link's lock per fetch, not 3" \
	'cost_rdma_sleep_49152\|cost_rdma_busy_1:'
flags_only "a busy-polling case whose completions came in softirq, and only it" \
	'cost_rdma_busy_4096: 1.00 GPU completions per fetch in softirq' \
	'cost_rdma_busy_\(1\|288\|49152\):.*in softirq\|cost_kept.*in softirq'
flags_only "a busy-polling case on link 0 whose completions came in softirq" \
	'cost_link0_busy_1: 2.00 GPU completions per fetch in softirq' \
	'cost_link0_busy_[24].*in softirq while busy'
echo "1..$n"
echo "# $((n - failed)) passed, $failed failed"
[ $failed -eq 0 ]
