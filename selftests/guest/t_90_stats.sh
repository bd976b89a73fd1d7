#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Counters move with what happens, and every command has JSON output.
# The metrics as shipped: engram-rdma-prom.service's command (from
# tools/systemd, pointed at the tree's engramctl and a scratch directory)
# writes the textfile, and bookworm's node_exporter (unpacked into the
# cache by deps.sh), listening on the guest's loopback, serves it in its
# /metrics, which prometheus_client parses.
# timeout: 200
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/stats.safetensors
make_table "$F" 5000 --seed 19 || bail "mktable"

s0=$(stat_global loads_started)
d0=$(stat_global loads_done)
v0=$(stat_global verify_runs)
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name st >/dev/null || bail "load"
"$ENGRAMCTL" verify st >/dev/null
"$ENGRAMCTL" verify st >/dev/null
check "loads_started counts one load" test "$(stat_global loads_started)" -eq $((s0 + 1))
check "loads_done counts one load" test "$(stat_global loads_done)" -eq $((d0 + 1))
check "verify_runs counts two verifies" test "$(stat_global verify_runs)" -eq $((v0 + 2))
check "tables gauge is 1" test "$(stat_global tables)" -eq 1
json=$("$ENGRAMCTL" -j stats)
echo "# ${json:0:600}..." | tr -d '\n'; echo
check "per-table stats name the table" \
	test "$(jget "[t['name'] for t in d['tables']]" <<<"$json")" = "['st']"
check "per-table load_bytes is the file size" \
	test "$(jget "d['tables'][0]['load_bytes']" <<<"$json")" -eq "$(stat -c %s "$F")"
check "per-table verify_runs is 2" test "$(jget "d['tables'][0]['verify_runs']" <<<"$json")" -eq 2
check "text stats mention the table" sh -c "'$ENGRAMCTL' stats | grep -q st"
for cmd in "list" "stats" "table show st"; do
	check "engramctl -j $cmd is valid JSON" sh -c "'$ENGRAMCTL' -j $cmd | python3 -m json.tool >/dev/null"
done
check "engramctl -j verify is valid JSON" sh -c "'$ENGRAMCTL' -j verify st | python3 -m json.tool >/dev/null"

NE=${CACHE:-/var/cache/engram-rdma}/node-exporter/usr/bin/prometheus-node-exporter
TEXTDIR=$SCRATCH/textfile
mkdir -p "$TEXTDIR"
cmd=$(sed -n 's/^ExecStart=//p' "$TOP/tools/systemd/engram-rdma-prom.service.in" |
	sed "s|@SBINDIR@/engramctl|$ENGRAMCTL|; s|/var/lib/prometheus/node-exporter|$TEXTDIR|")
# shellcheck disable=SC2086
out=$($cmd 2>&1)
check "the metrics service's command writes the textfile ($out)" \
	test -s "$TEXTDIR/engram_rdma.prom" -a -z "$(ls "$TEXTDIR" | grep -vx engram_rdma.prom)"
if [ -x "$NE" ]; then
	"$NE" --web.listen-address=127.0.0.1:9100 --collector.disable-defaults \
		--collector.textfile --collector.textfile.directory="$TEXTDIR" \
		>"$SCRATCH/ne.log" 2>&1 &
	ne=$!
	check "node_exporter serves /metrics on the loopback" \
		wait_for 30 python3 -c 'import urllib.request; urllib.request.urlopen("http://127.0.0.1:9100/metrics", timeout=2)'
	check "node_exporter's /metrics carries the table's state, info and counters, read by prometheus_client" \
		python3 - <<'PY'
import sys, urllib.request
from prometheus_client.parser import text_string_to_metric_families
text = urllib.request.urlopen("http://127.0.0.1:9100/metrics", timeout=5).read().decode()
got = {}
for fam in text_string_to_metric_families(text):
    for s in fam.samples:
        got[(s.name, tuple(sorted(s.labels.items())))] = s.value
def one(name, **labels):
    return got.get((name, tuple(sorted(labels.items()))))
ok = True
for want, val in (((("engram_rdma_table_state",), {"table": "st", "state": "ready"}), 1.0),
                  ((("node_textfile_scrape_error",), {}), 0.0),
                  ((("engram_rdma_tables",), {}), 1.0)):
    (name,), labels = want
    if one(name, **labels) != val:
        print(f"# {name}{labels}: {one(name, **labels)}, want {val}")
        ok = False
if not any(n == "engram_rdma_table_info" and dict(l).get("table") == "st" for n, l in got):
    print("# no engram_rdma_table_info for st")
    ok = False
if not any(n == "engram_rdma_verify_runs_total" for n, l in got):
    print("# no engram_rdma_verify_runs_total")
    ok = False
sys.exit(0 if ok else 1)
PY
	kill $ne 2>/dev/null
	wait $ne 2>/dev/null
else
	check "node_exporter unpacked into the cache (make deps)" false
fi
check "engramctl -j unload succeeds" sh -c "'$ENGRAMCTL' -j unload st >/dev/null"
done_testing
