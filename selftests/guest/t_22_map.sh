#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# DMA mapping of tables happens off the request path: at the end of a load
# and, for a device that appears later, in the background.  A slow mapping
# (fault_map_delay_ms stands in for an IOMMU) holds up no request on
# another table, and a request on a device whose mapping is not done yet is
# refused with TABLE_NOT_READY (EAGAIN) instead of waiting.  Prints the
# first fetch's latency right after loading a large table, against later
# ones: 528 MB by default, to keep make check short; ENGRAM_T22_ROWS=5600000
# makes it 1.48 GB, about as much as the guest's 3 GiB can pin (and adds
# about 6 minutes under TCG).
# kernels: 6.12
# timeout: 900
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
KNOB=/sys/module/engram_rdma/parameters/fault_map_delay_ms
A=$SCRATCH/mapa.safetensors
B=$SCRATCH/mapb.safetensors
C=$SCRATCH/mapc.safetensors
AROWS=100000
BROWS=${ENGRAM_T22_ROWS:-2000000}
CROWS=50000

make_table "$A" $AROWS --seed 31 --pad-before 3 || bail "mktable a"
make_table "$B" $BROWS --seed 32 --pad-before 5 --pad-after 3 || bail "mktable b"
make_table "$C" $CROWS --seed 33 --pad-after 9 || bail "mktable c"
# Offsets read once per table, so a fetch_check starts without delay.
declare -A WOFF SOFF
offsets() { WOFF[$1]=$(table_field "$1" weight_offset); SOFF[$1]=$(table_field "$1" scale_offset); }
# fc TABLE FILE ROWS [fetch_check options]
fc() {
	local t=$1 f=$2 rows=$3
	shift 3
	"$CHECK" --table "$t" --file "$f" --weight-offset "${WOFF[$t]}" \
		--scale-offset "${SOFF[$t]}" --rows-total "$rows" --timeout-ms 60000 "$@"
}
fa() { fc mapa "$A" $AROWS "$@"; }
fb() { fc mapb "$B" $BROWS "$@"; }
fcc() { fc mapc "$C" $CROWS "$@"; }
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" ||
	bail "insmod with listen= and remote="
"$ENGRAMCTL" load "$A" --tensor $PREFIX --name mapa >/dev/null 2>&1
check "table a loads" test "$(table_state mapa)" = ready
offsets mapa

run() { local out rc; out=$("$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
wait_a_fetchable() {
	local i
	for i in $(seq 1 "$1"); do
		fa --count 1 >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}
check "the link comes up and fetches from a" wait_a_fetchable 30
# p50 of a fetch_check output line
p50() { sed -n 's/.* p50_us \([0-9]*\).*/\1/p'; }

# 1. The largest table: mapped by its load, so its first fetch maps nothing.
drop_caches
dmesg_mark
t0=$(date +%s%N)
"$ENGRAMCTL" load "$B" --tensor $PREFIX --name mapb >/dev/null 2>&1
t1=$(date +%s%N)
check "table b ($((BROWS * 264 / 1000000)) MB) loads" test "$(table_state mapb)" = ready
offsets mapb
diag "load of b took $(((t1 - t0) / 1000000)) ms"
mapped=$(dmesg_since | grep -c 'table mapb: [0-9]* pages mapped for 1 device')
dmesg_since | grep 'pages mapped' | sed 's/^/# /'
check "the load mapped b for rxe0" test "$mapped" -eq 1
first=$(fb --count 1 --batch 1 --seed 1 2>&1)
second=$(fb --count 1 --batch 1 --seed 2 2>&1)
later=$(fb --count 2000 --batch 1 --seed 3 2>&1)
diag "first fetch after the load: $(echo "$first" | p50) us"
diag "second fetch: $(echo "$second" | p50) us; 2000 more: $later"
check "the first fetches of b are exact" test -n "$(echo "$first" | p50)" -a -n "$(echo "$later" | p50)"

# 2. A slow mapping of c holds up neither a's fetches nor c's first one.
# a fetches for a few seconds, each fetch bounded, while c is being mapped
# by its load, and again while c's first fetch runs.
echo 8000 > "$KNOB"
"$ENGRAMCTL" load "$C" --tensor $PREFIX --name mapc >/dev/null 2>&1 &
lp=$!
check "c is loading" wait_state mapc loading 10
check "fetches on a while c is being mapped are not held up" \
	run fa --count 1000000 --batch 288 --duration-s 4 --max-ms 3000 --seed 4
diag "c is $(table_state mapc) after them"
wait $lp
check "c is ready" test "$(table_state mapc)" = ready
offsets mapc
fa --count 1000000 --batch 288 --duration-s 8 --max-ms 3000 --seed 5 >"$ENGRAM_TEST_TMP/a2" 2>&1 &
ap=$!
sleep 1
check "c's first fetch after its load needs no mapping" \
	run fcc --count 1 --batch 1 --max-ms 3000 --seed 6
wait $ap
ar=$?
sed 's/^/# a: /' "$ENGRAM_TEST_TMP/a2"
check "a's fetches meanwhile were not held up" test $ar -eq 0

# 3. A device that appears gets both tables mapped in the background; until
# then its requests are refused, not held.
echo 15000 > "$KNOB"
dmesg_mark
rdma link del rxe0
rdma link add rxe0 type rxe netdev er0
refused=1
for _ in $(seq 1 40); do
	if fa --count 1 --batch 1 --expect-errno EAGAIN >"$ENGRAM_TEST_TMP/r" 2>&1; then
		refused=0
		break
	fi
	grep -q "got OK" "$ENGRAM_TEST_TMP/r" && break
	sleep 0.2
done
sed 's/^/# /' "$ENGRAM_TEST_TMP/r"
check "a request before the new rxe0 is mapped is refused with EAGAIN" test $refused -eq 0
echo 0 > "$KNOB"
check "then the link fetches again" wait_a_fetchable 60
check "a is exact after the re-add" run fa --count 20000 --batch 4096 --seed 7
check "b is exact after the re-add" run fb --count 20000 --batch 4096 --seed 8
dmesg_since | grep 'pages mapped' | sed 's/^/# /'
check "c is exact after the re-add" run fcc --count 20000 --batch 4096 --seed 9
check "each table was mapped for the new rxe0 once" \
	test "$(dmesg_since | grep -c 'pages mapped for 1 device')" -eq 3
check "unload b" "$ENGRAMCTL" unload mapb
check "rmmod" rmmod engram_rdma
check "module loads again" module_load
done_testing
