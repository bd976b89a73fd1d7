#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Small fetches with and without the RESPONSE's invalidation, in one guest
# (rxe loopback), side by side: ROUNDS rounds (default 3), each measuring
# ib_write_lat at 264 B, then fetches of 1 and 288 rows over a link that
# negotiated protocol version 1 (every key invalidated with a LOCAL_INV)
# and over one that negotiated 2 (the RESPONSE invalidates it), the two
# in alternating order.  Prints each round's p50s and the median of each
# over the rounds.  Not part of make check or make bench:
#   make vm-run KVER=6.12 CMD='selftests/bench/rtt_ab.sh'
. "$(dirname "$0")/../guest/lib.sh"
IP=192.0.2.1
F=$SCRATCH/ab.safetensors
ROUNDS=${ROUNDS:-3} ITERS=${ITERS:-300}
P=/sys/module/engram_rdma/parameters
module_unload
# One listener per link: a link URL is unique.
module_load "listen=rdma://$IP:18515,rdma://$IP:18516" || exit 1
"$ENGRAMCTL" mktable "$F" --rows 300000 --seed 5 --pad-before 13 >/dev/null 2>&1
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name ab >/dev/null 2>&1 || exit 1
WOFF=$(table_field ab weight_offset); SOFF=$(table_field ab scale_offset)
B=("$TOP/selftests/bench/engram_bench" fetch --table ab --file "$F" --weight-offset "$WOFF"
	--scale-offset "$SOFF" --rows-total 300000 --timeout-ms 60000)
declare -A LINK
for v in 1 2; do
	echo $v > $P/protocol_version
	LINK[$v]=$("$ENGRAMCTL" link add "rdma://$IP:$((18514 + v))@$IP") || exit 1
	for _ in $(seq 1 30); do
		"${B[@]}" --link "${LINK[$v]}" --rows 1 --iters 1 --warmup 0 >/dev/null 2>&1 && break
		sleep 1
	done
	"$ENGRAMCTL" link show "${LINK[$v]}" | grep -E 'protocol'
done
echo 2 > $P/protocol_version
p50() { "${B[@]}" --link "$1" --rows "$2" --iters "$3" --warmup 10 | jget "d['p50_us']"; }
out=$SCRATCH/ab.txt
: > "$out"
for r in $(seq 1 "$ROUNDS"); do
	ib_write_lat -d rxe0 -F -p 18600 -s 264 -n "$ITERS" >/dev/null 2>&1 &
	sleep 1
	t=$(ib_write_lat -d rxe0 -F -p 18600 -s 264 -n "$ITERS" $IP 2>&1 |
		awk '/#bytes/ { f = 1; next } f && $1 ~ /^[0-9]+$/ { print $5; exit }')
	wait
	echo "ib_write_lat_264_rtt $(awk -v t="$t" 'BEGIN { print 2 * t }')" >> "$out"
	order="1 2"
	[ $((r % 2)) = 0 ] && order="2 1"
	for v in $order; do
		# protocol_version is module-wide: a link that reconnected since
		# would have negotiated 2.  Say so rather than compare 2 with 2.
		got=$(link_field "${LINK[$v]}" protocol)
		[ "$got" = "$v" ] || { echo "link ${LINK[$v]} speaks version $got, not $v" >&2; exit 1; }
		for rows in 1 288; do
			echo "v${v}_$rows $(p50 "${LINK[$v]}" $rows "$ITERS")" >> "$out"
		done
	done
done
round_medians "$out"
"$ENGRAMCTL" link list
"$ENGRAMCTL" stats | grep -E "remote_invalidations|fetches "
