#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# make demo: the main job as far as it exists, shown in a QEMU guest running
# Debian's kernel.  On the machine it installs what is missing, builds, and
# boots the guest; in the guest (--guest) it generates an Engram table in a
# real safetensors file and loads, lists, verifies and counts it, then
# fetches rows over Soft-RoCE (the guest is host and GPU node at once,
# rxe loopback to its own address) and checks them against the file.
set -euo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
KVER=${KVER:-6.1}

if [ "${1:-}" != --guest ]; then
	cd "$top"
	selftests/vm/deps.sh
	make -s tools
	make -s -C selftests/guest
	exec selftests/vm/run.sh --kver "$KVER" \
		--params "listen=rdma://192.0.2.1:18515 remote=rdma://192.0.2.1:18515@192.0.2.1" \
		-- tools/demo.sh --guest
fi

ctl=$top/tools/engramctl/engramctl
f=${ENGRAM_SCRATCH:-/tmp}/demo.safetensors
rows=${DEMO_ROWS:-1000000}
step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
run() { printf '$'; printf ' %q' "$@"; printf '\n'; "$@"; }

step "kernel $(uname -r), engram_rdma $(cat /sys/module/engram_rdma/version)"
step "generate two Engram tables ($rows rows each) in one safetensors file"
run "$ctl" mktable "$f" --rows "$rows" --seed 42 \
	--prefix layers.1.engram.embed --prefix layers.14.engram.embed \
	--pad-before 4093 --pad-after 17
run ls -l "$f"
sum=$(sha256sum "$f" | cut -d' ' -f1)
printf 'sha256sum: %s\n' "$sum"

step "load layer 1 with the expected digest (the kernel pins and hashes the file)"
run "$ctl" load "$f" --tensor layers.1.engram.embed --name layer1 --sha256 "$sum"
step "load layer 14 from the same file"
run "$ctl" load "$f" --tensor layers.14.engram.embed --name layer14
step "a wrong digest is refused, and nothing stays pinned"
run "$ctl" load "$f" --tensor layers.1.engram.embed --name wrong \
	--sha256 "$(printf '%064d' 0)" || true
step "writers are refused while the tables are loaded"
run sh -c "echo x >> '$f'" || true
step "list"
run "$ctl" list
step "verify re-hashes the pinned pages"
run "$ctl" verify layer1
step "the GPU-node side: the link to the host is up and sees both tables"
run "$ctl" link show
run "$ctl" listen show
woff=$("$ctl" -j list | python3 -c "import json,sys; print([t for t in json.load(sys.stdin) if t['name'] == 'layer1'][0]['weight_offset'])")
soff=$("$ctl" -j list | python3 -c "import json,sys; print([t for t in json.load(sys.stdin) if t['name'] == 'layer1'][0]['scale_offset'])")
step "fetch 200,000 random rows of layer 1 in 288- and 49,152-row batches by RDMA WRITE, compare every byte with the file"
run "$top/selftests/guest/fetch_check" --table layer1 --file "$f" --weight-offset "$woff" \
	--scale-offset "$soff" --rows-total "$rows" --count 200000 --batch 288,49152 --timeout-ms 30000
step "the same from Python, into a numpy array"
run /usr/bin/python3 "$top/tools/python/example.py" --table layer1 --file "$f" \
	--weight-offset "$woff" --scale-offset "$soff" --count 4096
step "a row past the end is refused by the host with its own status"
run "$top/selftests/guest/fetch_check" --table layer1 --file "$f" --weight-offset "$woff" \
	--scale-offset "$soff" --rows-list 0,"$rows" --expect-errno ERANGE || true
step "stats: per table on the host, per link on the GPU node, with latency"
run "$ctl" stats
step "the same as JSON"
run "$ctl" -j list
step "unload"
run "$ctl" unload layer1
run "$ctl" unload layer14
run "$ctl" list
# The word make check's demo test waits for: every step above passed.
printf '\ndemo: ok\n'
