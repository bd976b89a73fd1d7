#!/bin/bash
# Manual try of the host side of shards (branch shards), not a test yet.
. "$(dirname "$0")/../selftests/guest/lib.sh"
F=$SCRATCH/sh.safetensors
make_table "$F" 120000 --seed 73 >/dev/null || exit 1
E=$ENGRAMCTL
$E load "$F" --tensor $PREFIX --name s0 --rows 0-59999 --no-progress
$E load "$F" --tensor $PREFIX --name s1 --rows 60000-119999 --no-progress
$E load "$F" --tensor $PREFIX --name w --no-progress
$E load "$F" --tensor $PREFIX --name bad --rows 100000-120000 --no-progress; echo "bad range exit $?"
$E load "$F" --tensor $PREFIX --name bad --rows 5-4 --no-progress; echo "reversed exit $?"
$E list
$E show s0
$E -j show s1 | head -c 600; echo
$E verify s0 --no-progress; echo "verify s0 exit $?"
$E list
$E listen add rdma://192.0.2.1:18731
$E link add rdma://192.0.2.1:18731@192.0.2.1
sleep 5
$E link tables
$E -j link tables | head -c 800; echo
echo 2 > /sys/module/engram_rdma/parameters/protocol_version
$E link del 1; $E link add rdma://192.0.2.1:18731@192.0.2.1; sleep 5
$E link show 2 | head -5
$E link tables
$E unload s0; $E unload s1; $E unload w
dmesg | grep -iE "warn|bug|error" | tail -5
echo TRY-DONE
