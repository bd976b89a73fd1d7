#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Without CAP_NET_ADMIN, load, unload and verify are refused with a message;
# list and stats stay readable.
# timeout: 120
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
"$ENGRAMCTL" unload acc
done_testing
