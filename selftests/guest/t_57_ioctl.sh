#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The /dev/engram_rdma ioctl ABI under abuse (rxe loopback to the guest's
# own address): ioctl_bad sends raw, malformed and misused structs (sizes,
# flags, reserved fields, names, pointers, registrations, RLIMIT_MEMLOCK,
# fetch destinations, WAIT/poll, buffers and fds going away under fetches)
# and checks each errno; each of its cases is one result here.  Then an
# exact fetch_check run proves the module still serves rows, and the kernel
# log must show no warning.
# timeout: 300
# kernels: 6.1 debug
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
IOCTL_BAD=$TOP/selftests/guest/ioctl_bad
F=$SCRATCH/ioctl.safetensors
ROWS=100000

make_table "$F" $ROWS --seed 57 --pad-before 3 || bail "mktable"
test -x "$IOCTL_BAD" || bail "$IOCTL_BAD is not built (make -C selftests/guest)"
module_unload || bail "rmmod"
# The debug kernel moves rows about 20 times slower: a 65,536-row fetch
# outlasts any sane stall bound there, so requests are halved (32,768 rows
# still hold the 8 MiB of the max_ranges case), and the fetch that must end
# within UNREG_BUF's 2 s wait is a quarter of its usual 4,096 rows.
cap=() barrier=4096
[ "$SLOW" -eq 1 ] || cap=(rdma_max_request_rows=32768) barrier=1024
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" "${cap[@]}" ||
	bail "insmod with listen= and remote="
check "/dev/engram_rdma exists" test -c /dev/engram_rdma
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name ioctl >/dev/null 2>&1
check "the table loads" test "$(table_state ioctl)" = ready
WOFF=$(table_field ioctl weight_offset)
SOFF=$(table_field ioctl scale_offset)
FC=("$CHECK" --table ioctl --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 60000)

if wait_fetchable 30; then
	ok "the link comes up and sees the table"
else
	bail "the link did not come up with the table within 30 s"
fi

# connects: connections the links have made so far (a reconnect adds one).
connects() {
	"$ENGRAMCTL" -j link list 2>/dev/null | jget \
		"sum(l.get('connects', 0) for l in (d if isinstance(d, list) else d.get('links', [])))"
}
c0=$(connects)
dmesg_mark
# Every case of ioctl_bad becomes one result of this test.
"$IOCTL_BAD" --table ioctl --rows-total $ROWS --barrier-rows $barrier >"$ENGRAM_TEST_TMP/ioctl_bad.out" 2>&1
rc=$?
cases=0
plan=
while IFS= read -r line; do
	if [[ $line =~ ^ok\ [0-9]+\ -\ (.*)$ ]]; then
		cases=$((cases + 1))
		ok "ioctl: ${BASH_REMATCH[1]}"
	elif [[ $line =~ ^not\ ok\ [0-9]+\ -\ (.*)$ ]]; then
		cases=$((cases + 1))
		nok "ioctl: ${BASH_REMATCH[1]}"
	elif [[ $line =~ ^1\.\.([0-9]+)$ ]]; then
		plan=${BASH_REMATCH[1]}
	elif [ -n "$line" ]; then
		diag "ioctl_bad: ${line#\# }"
	fi
done <"$ENGRAM_TEST_TMP/ioctl_bad.out"
check "ioctl_bad ran to its plan ($cases of ${plan:-no plan}) and exits 0 (rc $rc)" \
	test "$rc" -eq 0 -a -n "$plan" -a "${plan:-0}" = "$cases"
c1=$(connects)
check "no case broke the connection (link connects $c0, then $c1)" test "$c0" = "$c1"

run() { local out rc; out=$("${FC[@]}" "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
check "after all that, 20,000 rows in batches of 288 and 4,096 are exact" \
	run --count 20000 --batch 288,4096 --seed 57
check "and in submit mode too" run --count 4096 --batch 1024 --mode submit --seed 58
splat=$(dmesg_since | grep -E 'WARNING|BUG|Oops|refcount_t|list_(add|del) corruption|KASAN|UBSAN')
check "the kernel log shows no WARNING or BUG" test -z "$splat"
[ -z "$splat" ] || sed 's/^/# dmesg: /' <<<"$splat" | head -n 20

"$ENGRAMCTL" unload ioctl >/dev/null 2>&1
check "rmmod succeeds (no fd or pin left behind)" module_unload
check "the module loads again" module_load
done_testing
