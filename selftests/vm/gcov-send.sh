#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# In a debug-kernel guest: send the module's gcov counters so far (debugfs
# keeps them after rmmod) out on the third serial port, a gzipped tar in
# base64 followed by the line END, for selftests/vm/run.sh to decode.
#   gcov-send.sh END
# guest-setup.sh sends the final counters with END "ENGRAM-GCOV-END"; the
# guest runner, with ENGRAM_GCOV_EACH=1, a snapshot after each test with
# "ENGRAM-GCOV-TEST NAME".  Other kernels have no /sys/kernel/debug/gcov:
# nothing is written.
g=/sys/kernel/debug/gcov
[ -d "$g" ] && [ -c /dev/ttyS2 ] || exit 0
tmp=$(mktemp -d) || exit 0
# debugfs reports every size as 0, which tar would believe: copy with cat.
# Opening one costs the kernel a copy and conversion of the file's counters
# (about 1.5 s each on the debug kernel under TCG, 46 s for the module's 24
# files): one reader per CPU.
(cd "$g" && find . -name '*.gcda') |
	xargs -r -P "$(nproc)" -I{} sh -c 'mkdir -p "$(dirname "$2/$3")" && cat "$1/$3" >"$2/$3"' \
		sh "$g" "$tmp" {}
{ tar -C "$tmp" -cz . | base64 -w 76; echo "${1:?usage: gcov-send.sh END}"; } >/dev/ttyS2
rm -rf "$tmp"
