#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# engramctl monitor and the netlink events group (one guest, rxe loopback):
# a monitor started before anything happens sees, in order, a table load
# (loading, ready), a verify (verifying, ready verify ok), a listener added
# and active, a link added, up and deleted, the listener deleted, the table
# unloaded, and a load refused by its digest (loading, failed EBADMSG); -j
# gives the same as JSON lines; an object filter and --count end a second
# monitor by themselves; a user without CAP_NET_ADMIN cannot join, or,
# on a kernel that cannot keep them out, sees no link's URL.
# timeout: 240
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
PORT=18584
F=$SCRATCH/monitor.safetensors
ROWS=4096
OUT=$ENGRAM_TEST_TMP

make_table "$F" $ROWS --seed 84 || bail "mktable"
module_loaded || module_load || bail "insmod"

# joined PID: the monitor's netlink socket (its port is its pid) has
# joined a group; when the group's id is above 32 /proc does not show it,
# so a second later is taken as joined too.
joined() { awk -v p="$1" '$2 == 16 && $3 == p && $4 != "00000000" { f = 1 } END { exit !f }' \
	/proc/net/netlink; }
start_monitor() {
	# start_monitor FILE ARGS...: a monitor in the background, MPID its pid.
	local f=$1
	shift
	"$ENGRAMCTL" "$@" > "$f" 2> "$f.err" &
	MPID=$!
	wait_for 5 joined $MPID || sleep 1
}

# The kernel keeps users without CAP_NET_ADMIN out of the group where it
# can (6.7, and stable kernels with the fix: Debian's 6.1.0-57 and 6.12);
# where it cannot (every 5.10; Debian's 6.1.0-47, which no test boots)
# anyone may join, and a link's events leave out its URL, which only
# administrators may read.
case "$(uname -r)" in
5.*) ADMIN_ONLY=0 ;;
*) ADMIN_ONLY=1 ;;
esac
out=$(setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all \
	timeout 3 "$ENGRAMCTL" monitor 2>&1)
NRC=$?
diag "as nobody (exit $NRC): $out"

start_monitor "$OUT/text" monitor
TPID=$MPID
start_monitor "$OUT/json" -j monitor
JPID=$MPID
start_monitor "$OUT/tables" monitor table --count 3
CPID=$MPID

"$ENGRAMCTL" load "$F" --tensor $PREFIX --name mon --no-progress >/dev/null 2>&1
wait_state mon ready 60 || nok "the table loads"
"$ENGRAMCTL" verify mon --no-progress >/dev/null 2>&1
wait_state mon ready 60 || nok "the table verifies"
"$ENGRAMCTL" listen add "rdma://$IP:$PORT" >/dev/null || nok "listen add"
ID=$("$ENGRAMCTL" link add "rdma://$IP:$PORT@$IP" 2>&1)
[ "$ID" -ge 1 ] 2>/dev/null || bail "link add: $ID"
link_up() { [ "$(link_field "$ID" state)" = up ]; }
wait_for 30 link_up || nok "the link comes up"
"$ENGRAMCTL" link del "$ID" >/dev/null || nok "link del"
"$ENGRAMCTL" listen del "rdma://$IP:$PORT" >/dev/null || nok "listen del"
"$ENGRAMCTL" unload mon >/dev/null || nok "unload"
bad=$(printf '%064d' 0)
# engramctl load waits for the result, and unloads a table that failed.
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name monbad --sha256 "$bad" --no-progress >/dev/null 2>&1
check "the load with a wrong digest fails" test $? -eq 1

# Every event delivered: the last one is monbad's unload.
last_in() { grep -q "$1" "$2"; }
wait_for 10 last_in "table monbad unloaded" "$OUT/text"
wait_for 10 last_in '"name":"monbad","event":"unloaded"\|"event":"unloaded".*"monbad"' "$OUT/json"
kill -INT $TPID $JPID 2>/dev/null
wait $TPID
check "SIGINT ends the monitor with status 0" test $? -eq 0
wait $JPID
cat "$OUT/text" | sed 's/^/# text| /'

# The lines in order, each a regular expression; others may come between
# (a link is "connecting" when added, and may be "down" before deleted).
in_order() {
	python3 - "$@" <<'PY'
import re, sys
lines = open(sys.argv[1]).read().splitlines()
i = 0
for pat in sys.argv[2:]:
    while i < len(lines) and not re.fullmatch(pat, lines[i]):
        i += 1
    if i == len(lines):
        print("# not found in order: " + pat)
        sys.exit(1)
    i += 1
PY
}
U="rdma://$IP:$PORT"
UL="rdma://$IP:$PORT@$IP"
LU=""
[ $ADMIN_ONLY -eq 0 ] || LU=" $UL"
check "table: loading, then ready" in_order "$OUT/text" "table mon loading" "table mon ready"
check "verify: verifying, then ready verify ok" in_order "$OUT/text" \
	"table mon verifying" "table mon ready verify ok"
check "listener: added, then active" in_order "$OUT/text" "listen $U added" "listen $U active"
check "link: added, up, deleted" in_order "$OUT/text" \
	"link $ID$LU added" "link $ID$LU up" "link $ID$LU deleted"
check "then the listener deleted and the table unloaded" in_order "$OUT/text" \
	"link $ID$LU deleted" "listen $U deleted" "table mon unloaded"
check "a wrong digest: loading, then failed with EBADMSG" in_order "$OUT/text" \
	"table monbad loading" "table monbad failed error EBADMSG \(.*\)" "table monbad unloaded"
check "no event lost" test -z "$(grep '^lost' "$OUT/text")"
check "nothing on the monitor's stderr" test ! -s "$OUT/text.err"

# -j: one JSON object a line, the same events.
json_ok() {
	python3 - "$OUT/json" "$ID" "$UL" $ADMIN_ONLY <<'PY'
import json, sys
ev = [json.loads(l) for l in open(sys.argv[1])]
up = {"object": "link", "id": int(sys.argv[2]), "event": "up"}
if sys.argv[4] == "1":
    up["url"] = sys.argv[3]
elif any("url" in e for e in ev if e.get("object") == "link"):
    print("# -j: a link's URL where any user may join")
    sys.exit(1)
want = [
    {"object": "table", "name": "mon", "event": "loading"},
    {"object": "table", "name": "mon", "event": "ready"},
    {"object": "table", "name": "mon", "event": "ready", "verify": "ok"},
    up,
    {"object": "link", "id": int(sys.argv[2]), "event": "deleted"},
    {"object": "table", "name": "monbad", "event": "failed", "error": "EBADMSG", "errno": 74},
]
i = 0
for e in ev:
    if i < len(want) and all(e.get(k) == v for k, v in want[i].items()):
        i += 1
if i != len(want):
    print("# -j: missing %r" % (want[i],))
    sys.exit(1)
PY
}
check "-j: JSON lines with the same events" json_ok

# A filter and --count: three table events, then it ends by itself.
wait $CPID
rc=$?
sed 's/^/# tables| /' "$OUT/tables" "$OUT/tables.err"
check "monitor table --count 3 ends by itself with status 0" test $rc -eq 0
check "and printed exactly the first three table events" test "$(cat "$OUT/tables")" = \
	"$(printf 'table mon loading\ntable mon ready\ntable mon verifying')"

# Without CAP_NET_ADMIN: no join where the kernel can refuse it, else a
# link's events by id, without its URL.
if [ $ADMIN_ONLY -eq 1 ]; then
	check "without CAP_NET_ADMIN the monitor cannot join (exit $NRC)" \
		test $NRC -eq 1 -a -n "$(grep 'needs CAP_NET_ADMIN' <<<"$out")"
else
	check "on $(uname -r) without CAP_NET_ADMIN the monitor joins (exit $NRC)" test $NRC -eq 124
	setpriv --reuid 65534 --regid 65534 --clear-groups --inh-caps=-all \
		timeout 60 "$ENGRAMCTL" monitor link > "$OUT/nobody" 2>&1 &
	NPID=$!
	wait_for 5 joined $NPID || sleep 1
	"$ENGRAMCTL" listen add "rdma://$IP:$PORT" >/dev/null || nok "listen add (2)"
	ID2=$("$ENGRAMCTL" link add "rdma://$IP:$PORT@$IP" 2>&1)
	[ "$ID2" -ge 1 ] 2>/dev/null || bail "link add (2): $ID2"
	"$ENGRAMCTL" link del "$ID2" >/dev/null || nok "link del (2)"
	"$ENGRAMCTL" listen del "rdma://$IP:$PORT" >/dev/null || nok "listen del (2)"
	wait_for 10 last_in "link $ID2 deleted" "$OUT/nobody"
	kill -INT $NPID 2>/dev/null
	wait $NPID
	sed 's/^/# nobody| /' "$OUT/nobody"
	check "without CAP_NET_ADMIN a link's events arrive by id" \
		in_order "$OUT/nobody" "link $ID2 added" "link $ID2 deleted"
	check "and without its URL" test -z "$(grep -e 'rdma://' -e 'tcp://' "$OUT/nobody")"
fi
out=$("$ENGRAMCTL" monitor bogus 2>&1)
check "an unknown object is a usage error" test $? -eq 2 -a -n "$(grep "unknown object 'bogus'" <<<"$out")"
out=$("$ENGRAMCTL" monitor --count 0 2>&1)
check "--count 0 is a usage error" test $? -eq 2
check "the kernel log is clean" kmsg_clean
done_testing
