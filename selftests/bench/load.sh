#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# Load speed (the load hashes the file and checks it against --sha256) and
# verify speed (re-hash of the pinned pages) against sha256sum of the same
# file, in the same guest:
#   make vm-run KVER=6.1 CMD='selftests/bench/load.sh [ROWS]'
# Both sides are measured cold (page cache dropped first) and warm (file
# already cached), since the kernel's load reads through the page cache just
# as sha256sum does.  Prints one line per figure and the ratios.
set -euo pipefail

top=$(cd "$(dirname "$0")/../.." && pwd)
ctl=$top/tools/engramctl/engramctl
rows=${1:-4070000}
f=${ENGRAM_SCRATCH:-/tmp}/bench-load.safetensors

now() { date +%s.%N; }
drop() { sync; echo 3 > /proc/sys/vm/drop_caches; }
rate() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.1f", b / s / 1e6 }'; }

[ -s "$f" ] || "$ctl" mktable "$f" --rows "$rows" --seed 1 --pad-before 13 >/dev/null 2>&1
bytes=$(stat -c %s "$f")
echo "file: $bytes bytes, $rows rows; sha256 drivers: $(awk '/^name.*sha256$/ { n = 1; next } n && /^driver/ { printf "%s ", $3; n = 0 }' /proc/crypto)"

declare -A t
for mode in cold warm; do
	[ $mode = cold ] && drop
	s=$(now); sum=$(sha256sum "$f" | cut -d' ' -f1); e=$(now)
	t[sha_$mode]=$(echo "$e - $s" | bc)
	[ $mode = cold ] && drop
	s=$(now); "$ctl" load "$f" --tensor layers.1.engram.embed --name bench --sha256 "$sum" --no-progress >/dev/null 2>&1; e=$(now)
	t[load_$mode]=$(echo "$e - $s" | bc)
	s=$(now); "$ctl" verify bench >/dev/null 2>&1; e=$(now)
	t[verify_$mode]=$(echo "$e - $s" | bc)
	"$ctl" unload bench
	for k in sha load verify; do
		echo "$mode $k: ${t[${k}_$mode]} s, $(rate "$bytes" "${t[${k}_$mode]}") MB/s"
	done
	echo "$mode ratio load/sha256sum speed: $(echo "scale=3; ${t[sha_$mode]} / ${t[load_$mode]}" | bc)"
	echo "$mode ratio verify/sha256sum speed: $(echo "scale=3; ${t[sha_$mode]} / ${t[verify_$mode]}" | bc)"
done
