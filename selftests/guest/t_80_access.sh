#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Without CAP_NET_ADMIN, load, unload and verify are refused with a message;
# list and stats stay readable, but without table paths and link URLs, and
# the allow-list cannot be read.
# timeout: 120
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

F=$SCRATCH/access.safetensors
make_table "$F" 1000 --seed 17 || bail "mktable"
chmod 0644 "$F"
chmod 0755 "$SCRATCH"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name acc >/dev/null || bail "root load"

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all -- "$@"; }

out=$(as_nobody "$ENGRAMCTL" load "$F" --tensor $PREFIX --name acc2 2>&1)
check "unprivileged load is refused" test $? -ne 0
check "with a message naming CAP_NET_ADMIN ($out)" grep -q CAP_NET_ADMIN <<<"$out"
out=$(as_nobody "$ENGRAMCTL" unload acc 2>&1)
check "unprivileged unload is refused" test $? -ne 0
check "with a message naming CAP_NET_ADMIN ($out)" grep -q CAP_NET_ADMIN <<<"$out"
out=$(as_nobody "$ENGRAMCTL" verify acc 2>&1)
check "unprivileged verify is refused" test $? -ne 0
check "with a message naming CAP_NET_ADMIN ($out)" grep -q CAP_NET_ADMIN <<<"$out"
out=$(as_nobody "$NL_RAW" load name=acc3 fd="$F" rows=1 woff=8 soff=300 wbytes=256 sbytes=8)
check "raw unprivileged load gets EPERM ($out)" grep -q "^error 1 .*CAP_NET_ADMIN" <<<"$out"
check "the table is still there" test "$(table_state acc)" = ready
check "unprivileged list works" as_nobody "$ENGRAMCTL" list
check "unprivileged stats works" as_nobody "$ENGRAMCTL" stats

# What an unprivileged user reads: names, states, digests and counters, not
# where the files live, which servers a link uses or whom the host trusts.
root_keys=$("$ENGRAMCTL" -j show acc | jget "sorted(d[0].keys())")
user_keys=$(as_nobody "$ENGRAMCTL" -j show acc | jget "sorted(d[0].keys())")
lacks() { ! grep -qF -- "$1" <<<"$2"; }
check "root sees the table's path" grep -q "'path'" <<<"$root_keys"
check "an unprivileged user does not ($user_keys)" lacks "'path'" "$user_keys"
check "but sees its name, state and digest" \
	test "$(as_nobody "$ENGRAMCTL" -j show acc | jget "(d[0]['name'], d[0]['state'], len(d[0]['sha256']))")" = "('acc', 'ready', 64)"
out=$(as_nobody "$ENGRAMCTL" list 2>&1; as_nobody "$ENGRAMCTL" show acc 2>&1)
check "no text output names the file for it" lacks "$F" "$out"

IP=${ENGRAM_IP:-192.0.2.1}
R=tcp://$IP:18580@$IP
id=$("$ENGRAMCTL" link add "$R")
check "a link to nowhere ($id)" test -n "$id"
check "root sees its URL" test "$("$ENGRAMCTL" -j link show "$id" | jget "d[0].get('url')")" = "$R"
check "an unprivileged user does not (link show)" \
	test "$(as_nobody "$ENGRAMCTL" -j link show "$id" | jget "d[0].get('url')")" = None
out=$(as_nobody "$ENGRAMCTL" link list 2>&1)
check "nor in link list ($out)" lacks "$IP:18580" "$out"
check "nor in stats" \
	test "$(as_nobody "$ENGRAMCTL" -j stats | jget "[l.get('url') for l in d['links']]")" = "[None]"
check "but sees the link's state" test -n "$(as_nobody "$ENGRAMCTL" -j link show "$id" | jget "d[0]['state']")"
"$ENGRAMCTL" link del "$id"

check "allow add 192.0.2.0/24" "$ENGRAMCTL" listen allow add 192.0.2.0/24
out=$(as_nobody "$ENGRAMCTL" listen allow show 2>&1)
check "unprivileged allow show is refused" test $? -eq 1
check "with a message naming CAP_NET_ADMIN ($out)" grep -q "Operation not permitted.*reading the allow-list needs CAP_NET_ADMIN" <<<"$out"
out=$(as_nobody "$ENGRAMCTL" listen show 2>&1)
check "unprivileged listen show works and says the list is not shown ($out)" \
	grep -qx "allow: not shown (reading it needs CAP_NET_ADMIN)" <<<"$out"
check "root reads the list" test "$("$ENGRAMCTL" listen allow show)" = 192.0.2.0/24
"$ENGRAMCTL" unload acc
# The allow-list would refuse the next tests' peers: start them afresh.
check "rmmod" module_unload
check "the module loads again" module_load
done_testing
