#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Where a fetch's time goes, in one guest (rxe loopback): perf record -a -g
# over 10 fetches of 49,152 rows, over ib_write_bw at the same bytes, and
# over 200 fetches of 1 row; prints the flat profiles (self time) and the
# module's counters.  Not part of make check or make bench:
#   make vm-run KVER=6.12 CMD='selftests/bench/profile.sh'
. "$(dirname "$0")/../guest/lib.sh"
IP=192.0.2.1
F=$SCRATCH/p.safetensors
module_unload
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" || exit 1
"$ENGRAMCTL" mktable "$F" --rows 300000 --seed 5 --pad-before 13 >/dev/null 2>&1
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name bench >/dev/null 2>&1 || exit 1
WOFF=$(table_field bench weight_offset); SOFF=$(table_field bench scale_offset)
B=("$TOP/selftests/bench/engram_bench" fetch --table bench --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --rows-total 300000 --timeout-ms 60000)
for _ in $(seq 1 30); do
	"${B[@]}" --rows 1 --iters 1 --warmup 0 >/dev/null 2>&1 && break
	sleep 1
done
"${B[@]}" --rows 49152 --iters 5 --warmup 1
perf record -q -a -g -o $SCRATCH/perf1.data -- "${B[@]}" --rows 49152 --iters 10 --warmup 1 > /dev/null 2>&1
perf report -i $SCRATCH/perf1.data --stdio --no-children --sort sym 2>/dev/null | grep -v "^$" | grep "%" | head -40 | sed 's/^/# fetch49152: /'
ib_write_bw -d rxe0 -F -p 18600 -s 12976128 -n 20 >/dev/null 2>&1 &
sleep 1
perf record -q -a -g -o $SCRATCH/perf2.data -- ib_write_bw -d rxe0 -F -p 18600 -s 12976128 -n 20 $IP 2>&1 | grep -A1 "#bytes"
wait
perf report -i $SCRATCH/perf2.data --stdio --no-children --sort sym 2>/dev/null | grep -v "^$" | grep "%" | head -30 | sed 's/^/# writebw: /'
"${B[@]}" --rows 288 --iters 50 --warmup 5
perf record -q -a -g -o $SCRATCH/perf3.data -- "${B[@]}" --rows 1 --iters 200 --warmup 5 > /dev/null 2>&1
perf report -i $SCRATCH/perf3.data --stdio --no-children --sort sym 2>/dev/null | grep -v "^$" | grep "%" | head -40 | sed 's/^/# fetch1: /'
"$ENGRAMCTL" stats | head -40 | sed 's/^/# stats: /'
# The server's own CPU: of the samples taken inside the request handling
# (engram_serve_rdma_handle_request, engram_serve_tcp_request), the
# functions they were in (self), over 49,152-row fetches on each transport.
"$ENGRAMCTL" link add "tcp://$IP:18516@$IP" >/dev/null 2>&1
"$ENGRAMCTL" listen add "tcp://$IP:18516" >/dev/null 2>&1
for _ in $(seq 1 30); do
	"${B[@]}" --link 2 --rows 1 --iters 1 --warmup 0 >/dev/null 2>&1 && break
	sleep 1
done
for t in rdma:1:engram_serve_rdma_handle_request tcp:2:engram_serve_tcp_request; do
	IFS=: read -r name link fn <<<"$t"
	perf record -q -a -g -o $SCRATCH/perf-$name.data -- "${B[@]}" --link "$link" \
		--rows 49152 --iters 10 --warmup 1 >/dev/null 2>&1
	perf script -i $SCRATCH/perf-$name.data -F ip,sym 2>/dev/null | python3 -c '
import collections, sys
fn, name = sys.argv[1], sys.argv[2]
leaf, total, inside, stack = collections.Counter(), 0, 0, []
def flush():
    global total, inside
    if not stack:
        return
    total += 1
    if fn in stack:
        inside += 1
        leaf[stack[0]] += 1
for line in sys.stdin:
    s = line.strip()
    if not s:
        flush()
        stack = []
        continue
    t = s.split()
    stack.append((t[1] if len(t) > 1 else t[0]).split("+")[0])
flush()
print(f"# server-{name}: {inside} of {total} samples inside {fn}")
for sym, n in leaf.most_common(25):
    print(f"# server-{name}: {100 * n / max(inside, 1):5.1f}% {sym}")
' "$fn" "$name"
done
"$ENGRAMCTL" stats | grep -E "served_" | sed 's/^/# stats: /'
