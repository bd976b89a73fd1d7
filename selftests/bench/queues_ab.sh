#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# One process against two, over a link of one queue pair and over a link
# of two (link_queues), beside ib_write_bw -q 1 and -q 2 at 4,224 B (one
# gathered WRITE), in one guest (rxe loopback): ROUNDS rounds (default 3),
# the two links in alternating order, each fetch 49,152 rows.  Prints each
# round's figures, the medians, and per round the scaling from 1 to 2
# processes on each link over ib_write_bw's from -q 1 to -q 2.  Not part
# of make check or make bench:
#   make vm-run KVER=6.12 CMD='selftests/bench/queues_ab.sh'
. "$(dirname "$0")/../guest/lib.sh"
IP=192.0.2.1
F=$SCRATCH/qab.safetensors
ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-30}
P=/sys/module/engram_rdma/parameters
module_unload
# One listener per link: a link URL is unique.
module_load "listen=rdma://$IP:18515,rdma://$IP:18516" || exit 1
"$ENGRAMCTL" mktable "$F" --rows 300000 --seed 5 >/dev/null 2>&1
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name qab >/dev/null 2>&1 || exit 1
WOFF=$(table_field qab weight_offset); SOFF=$(table_field qab scale_offset)
B=("$TOP/selftests/bench/engram_bench" fetch --table qab --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --rows-total 300000 --timeout-ms 60000)
declare -A LINK
for q in 1 2; do
	echo $q > $P/link_queues
	LINK[$q]=$("$ENGRAMCTL" link add "rdma://$IP:$((18514 + q))@$IP") || exit 1
	for _ in $(seq 1 30); do
		"${B[@]}" --link "${LINK[$q]}" --rows 1 --iters 1 --warmup 0 >/dev/null 2>&1 && break
		sleep 1
	done
	got=$(link_field "${LINK[$q]}" queues)
	[ "$got" = "$q" ] || { echo "link ${LINK[$q]} has $got queues, not $q" >&2; exit 1; }
done
echo 1 > $P/link_queues
tput() {
	"${B[@]}" --link "$1" --rows 49152 --iters "$ITERS" --procs "$2" --warmup 2 --seed 9 |
		jget "d['rows_per_s']"
}
bw() {
	local v
	timeout 300 ib_write_bw -d rxe0 -F -p 18600 -s 4224 -n 2000 -q "$1" >/dev/null 2>&1 &
	sleep 1
	v=$(timeout 300 ib_write_bw -d rxe0 -F -p 18600 -s 4224 -n 2000 -q "$1" $IP 2>&1 |
		awk '/#bytes/ { f = 1; next } f && $1 ~ /^[0-9]+$/ { print $4; exit }')
	wait
	echo "${v:-nan}"
}
out=$SCRATCH/qab.txt
: >"$out"
for r in $(seq 1 "$ROUNDS"); do
	w1=$(bw 1) w2=$(bw 2)
	echo "ib_write_bw_4224_q1 $w1" >>"$out"
	echo "ib_write_bw_4224_q2 $w2" >>"$out"
	order="1 2"
	[ $((r % 2)) = 0 ] && order="2 1"
	for q in $order; do
		t1=$(tput "${LINK[$q]}" 1) t2=$(tput "${LINK[$q]}" 2)
		echo "queues${q}_1p $t1" >>"$out"
		echo "queues${q}_2p $t2" >>"$out"
		echo "queues${q}_scaling_vs_perftest" \
			"$(awk -v a="$t1" -v b="$t2" -v c="$w1" -v d="$w2" \
				'BEGIN { printf "%.3f", (b / a) / (d / c) }')" >>"$out"
	done
done
round_medians "$out"
"$ENGRAMCTL" link show | grep -E '^link|queue'
