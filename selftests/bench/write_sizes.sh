#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# What bigger gathered WRITEs could gain, bounded by perftest: ib_write_bw
# on rxe0 (loopback, one guest) at the byte counts of one WRITE of 16 rows
# (4,224 B: today's rows, two SGEs each, 32 SGEs a WRITE), of 32 rows
# (8,448 B: one SGE a row, as a packed [rows, 264] layout would give), of
# 64 rows, and of one 49,152-row message, in ROUNDS alternating rounds
# (default 3), with the median of each.  A fetch of 49,152 rows already
# runs at about the 4,224-byte rate (make bench: bw_49152_vs_ib_write_bw_4224),
# so the 8,448-byte rate over the 4,224-byte one bounds what the packed
# layout of issue 15 could gain here.  Not part of make check or make bench:
#   make vm-run KVER=6.12 CMD='selftests/bench/write_sizes.sh'
. "$(dirname "$0")/../guest/lib.sh"
IP=192.0.2.1
ROUNDS=${ROUNDS:-3}
out=$SCRATCH/ws.txt
: >"$out"
for r in $(seq 1 "$ROUNDS"); do
	for s in 4224 8448 16896 12976128; do
		n=2000
		[ $s = 12976128 ] && n=20
		timeout 300 ib_write_bw -d rxe0 -F -p 18600 -s $s -n $n >/dev/null 2>&1 &
		sleep 1
		v=$(timeout 300 ib_write_bw -d rxe0 -F -p 18600 -s $s -n $n $IP 2>&1 |
			awk '/#bytes/ { f = 1; next } f && $1 ~ /^[0-9]+$/ { print $4; exit }')
		wait
		echo "ib_write_bw_$s ${v:-nan}" >>"$out"
	done
done
round_medians "$out" MiB/s
