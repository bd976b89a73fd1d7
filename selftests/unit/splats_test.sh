#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/splats.awk, which fails a guest run on its kernel log: the
# kernel's own reports count, a process's fault that the kernel only
# reports does not, and an injected allocation failure counts only without
# alloc_ok.  Prints TAP.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }
# flags DESC WANT [AWK-ARGS...] <LOG: the lines the filter prints, counted
flags() {
	local desc=$1 want=$2 got
	shift 2
	got=$(awk "$@" -f "$top/selftests/splats.awk" | wc -l)
	if [ "$got" -eq "$want" ]; then ok "$desc ($got)"; else nok "$desc: $got lines, want $want"; fi
}

flags "a process's general protection fault is not the kernel's" 0 <<'LOG'
[   39.362010] traps: ib_send_lat[337] general protection fault ip:7fdf77650472 sp:7ffc8f3a3bf0 error:0 in librdmacm.so.1.3.44.0[a472,7fdf7764a000+15000]
LOG
flags "the kernel's general protection fault is" 2 <<'LOG'
[  132.307026] Oops: general protection fault, probably for non-canonical address 0xdead000000000122: 0000 [#1] PREEMPT SMP NOPTI
[  132.307100] general protection fault, probably for non-canonical address 0xdead000000000122
LOG
flags "a double fault, a BUG and a KASAN report are" 3 <<'LOG'
[  132.307026] Oops: double fault: 0000 [#1] PREEMPT SMP NOPTI
[    5.000000] BUG: KASAN: slab-use-after-free in engram_link_claim+0x10/0x20
[    5.000001] other line
[    6.000000] WARNING: CPU: 1 PID: 2 at kmod/link.c:100 engram_link_publish+0x1/0x2
LOG
alloc='[    7.000000] kworker/0:1: page allocation failure: order:4, mode:0x40cc0
[    7.000001] Call Trace:'
flags "an allocation failure counts" 2 <<<"$alloc"
flags "... but not with alloc_ok=1, nor its stack dump" 0 -v alloc_ok=1 <<<"$alloc"

echo "1..$n"
[ "$failed" -eq 0 ]
