#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# A first reading of fetch latency next to perftest on the same rxe link, in
# one guest that is host and GPU node at once (rxe loopback):
#   make vm-run KVER=6.1 MODPARAMS='listen=rdma://192.0.2.1:18515 \
#       remote=rdma://192.0.2.1:18515@192.0.2.1' CMD='selftests/bench/fetch.sh'
# 288-row fetches (sleeping and busy-polling) and 49,152-row fetches, then
# ib_write_lat and ib_write_bw at the same byte counts (76,032 and
# 12,976,128).  Every fetched row is also checked against the file.  Under
# QEMU (TCG) and Soft-RoCE this measures software overhead, not a NIC; the
# full benchmark with ratios is the next step (make bench).
set -uo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
ctl=$top/tools/engramctl/engramctl
ip=${ENGRAM_IP:-192.0.2.1}
rows=1000000
f=${ENGRAM_SCRATCH:-/tmp}/bench-fetch.safetensors

[ -s "$f" ] || "$ctl" mktable "$f" --rows $rows --seed 3 >/dev/null
"$ctl" load "$f" --tensor layers.1.engram.embed --name bench >/dev/null || exit 1
field() { "$ctl" -j list | python3 -c "import json, sys; print([t for t in json.load(sys.stdin) if t['name'] == 'bench'][0]['$1'])"; }
fc=("$top/selftests/guest/fetch_check" --table bench --file "$f" --rows-total $rows
	--weight-offset "$(field weight_offset)" --scale-offset "$(field scale_offset)"
	--timeout-ms 60000)
for _ in $(seq 1 30); do "${fc[@]}" --count 1 >/dev/null 2>&1 && break; sleep 1; done

echo "== engram, 288 rows (76,032 B), sleeping";   "${fc[@]}" --count 57600 --batch 288 --seed 1
echo "== engram, 288 rows (76,032 B), busy-poll";  "${fc[@]}" --count 57600 --batch 288 --busy-poll --seed 2
echo "== engram, 49,152 rows (12,976,128 B)";      "${fc[@]}" --count 983040 --batch 49152 --seed 3
# Fewer iterations for the large size: each one takes about a second here.
for sn in 76032:200 12976128:20; do
	s=${sn%:*} n=${sn#*:}
	echo "== ib_write_lat $s B"
	timeout 180 ib_write_lat -d rxe0 -s $s -n $n -F >/dev/null 2>&1 &
	sleep 2
	timeout 180 ib_write_lat -d rxe0 -s $s -n $n -F "$ip" 2>&1 | grep -A1 '#bytes'
	wait
done
for s in 76032 12976128; do
	echo "== ib_write_bw $s B"
	timeout 120 ib_write_bw -d rxe0 -s $s -n 100 -F >/dev/null 2>&1 &
	sleep 2
	timeout 120 ib_write_bw -d rxe0 -s $s -n 100 -F "$ip" 2>&1 | grep -A1 '#bytes'
	wait
done
"$ctl" stats | grep -E 'rdma_writes|^  rows|fetch_rows|latency|<'
"$ctl" unload bench
