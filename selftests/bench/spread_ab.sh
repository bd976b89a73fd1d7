#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Does a 49,152-row fetch cost more when its rows are spread over a large
# table?  In one guest (rxe loopback), ROUNDS alternating rounds (default
# 3) of ib_write_bw at 4,224 bytes (one gathered WRITE), then 49,152-row
# fetches from a 65,536-row table (17 MB) and from a 4,194,304-row one
# (1.1 GB, make bench's), each as GB/s (bytes over the mean round trip,
# as make bench reports it) over ib_write_bw's: the same
# requests, WRITEs and packets, only the rows' spread differs.  Prints
# each round and the medians.  Not part of make check or make bench:
#   make vm-run KVER=6.12 CMD='selftests/bench/spread_ab.sh'
. "$(dirname "$0")/../guest/lib.sh"
IP=192.0.2.1
ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-10}
module_unload
module_load "listen=rdma://$IP:18515" || exit 1
declare -A FILE WOFF SOFF NROWS
NROWS[small]=65536 NROWS[large]=4194304
for t in small large; do
	FILE[$t]=$SCRATCH/$t.safetensors
	"$ENGRAMCTL" mktable "${FILE[$t]}" --rows "${NROWS[$t]}" --seed 7 >/dev/null 2>&1 || exit 1
	"$ENGRAMCTL" load "${FILE[$t]}" --tensor $PREFIX --name $t >/dev/null 2>&1 || exit 1
	WOFF[$t]=$(table_field $t weight_offset) SOFF[$t]=$(table_field $t scale_offset)
done
L=$("$ENGRAMCTL" link add "rdma://$IP:18515@$IP") || exit 1
fetch() {
	"$TOP/selftests/bench/engram_bench" fetch --table "$1" --file "${FILE[$1]}" \
		--weight-offset "${WOFF[$1]}" --scale-offset "${SOFF[$1]}" --rows-total "${NROWS[$1]}" \
		--timeout-ms 60000 --link "$L" "${@:2}"
}
for _ in $(seq 1 30); do fetch small --rows 1 --iters 1 --warmup 0 >/dev/null 2>&1 && break; sleep 1; done
bw() {
	local v
	timeout 300 ib_write_bw -d rxe0 -F -p 18600 -s 4224 -n 3000 >/dev/null 2>&1 &
	sleep 1
	v=$(timeout 300 ib_write_bw -d rxe0 -F -p 18600 -s 4224 -n 3000 $IP 2>&1 |
		awk '/#bytes/ { f = 1; next } f && $1 ~ /^[0-9]+$/ { print $4 * 1048576 / 1e9; exit }')
	wait
	echo "${v:-nan}"
}
out=$SCRATCH/spread.txt
: >"$out"
for r in $(seq 1 "$ROUNDS"); do
	w=$(bw)
	echo "ib_write_bw_4224_gbs $w" >>"$out"
	order="small large"
	[ $((r % 2)) = 0 ] && order="large small"
	for t in $order; do
		g=$(fetch $t --rows 49152 --iters "$ITERS" --warmup 1 --seed $r | jget "49152 * 264 / d['mean_us'] / 1e3")
		echo "${t}_gbs $g" >>"$out"
		echo "${t}_vs_ib_write_bw_4224 $(awk -v a="$g" -v b="$w" 'BEGIN { printf "%.3f", a / b }')" >>"$out"
	done
done
round_medians "$out"
