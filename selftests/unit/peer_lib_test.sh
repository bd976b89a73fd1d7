#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
#
# selftests/vm/peer-lib.sh, which stops a guest of a multi-guest run soon
# after the guest it talks to died: with sleeps standing in for both
# guests' runners, bounded to 20 s each.  Prints TAP.
set -uo pipefail
top=$(cd "$(dirname "$0")/../.." && pwd)
. "$top/selftests/vm/peer-lib.sh"
n=0 failed=0
ok() { n=$((n + 1)); echo "ok $n - $1"; }
nok() { n=$((n + 1)); failed=$((failed + 1)); echo "not ok $n - $1"; }

sleep 30 &
peer=$!
if peer_alive $peer; then ok "a running peer is alive"; else nok "a running peer is alive"; fi
kill $peer
sleep 0.5
# Not yet waited for: a zombie, which kill -0 would call alive.
if ! peer_alive $peer; then ok "a peer that ended (a zombie) is not"; else nok "a peer that ended (a zombie) is not"; fi
wait $peer 2>/dev/null
if ! peer_alive $peer; then ok "nor once it was waited for"; else nok "nor once it was waited for"; fi

# The guest stand-in outlives its peer by far; the watch stops it 2 s
# after the peer ended.
sleep 20 &
guest=$!
sleep 1 &
peer=$!
start=$SECONDS
peer_watch $peer 2 kill $guest &
watch=$!
wait $guest 2>/dev/null
took=$((SECONDS - start))
if [ $took -ge 2 ] && [ $took -le 8 ]; then
	ok "the guest is stopped 2 s after its peer ended (after ${took} s)"
else
	nok "the guest is stopped 2 s after its peer ended (after ${took} s, not 2 to 8)"
fi
wait $watch

# A peer that outlives the guest: the watch does nothing to it.
sleep 20 &
peer=$!
sleep 2 &
guest=$!
peer_watch $peer 1 kill $guest &
watch=$!
wait $guest
rc=$?
kill $watch $peer 2>/dev/null
if [ $rc -eq 0 ]; then ok "while the peer runs, the guest runs to its end"; else nok "while the peer runs, the guest runs to its end (exit $rc)"; fi
echo "1..$n"
[ $failed -eq 0 ]
