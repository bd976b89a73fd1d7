#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Listeners and links managed at run time (engramctl listen/link), checked
# without a working data path: refusals carry an errno and a message, state
# and last error are reported for a link nobody answers, and only
# CAP_NET_ADMIN may change either.
# timeout: 300
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
# Ports nothing else in the tests uses, so module parameters do not interfere.
L=rdma://$IP:18991
R=rdma://$IP:18996@$IP

as_nobody() { setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all -- "$@"; }

# refused DESC STRERROR PHRASE ARGS...: engramctl ARGS exits 1 saying both.
refused() {
	local desc=$1 errstr=$2 phrase=$3 out rc
	shift 3
	out=$("$ENGRAMCTL" "$@" 2>&1)
	rc=$?
	if [ $rc -eq 1 ] && grep -qF -- "$errstr" <<<"$out" && grep -qiF -- "$phrase" <<<"$out"; then
		ok "$desc: $out"
	else
		nok "$desc: exit 1 with '$errstr' and '$phrase'"
		diag "exit $rc: $out"
	fi
}

# listen_field URL FIELD: "absent" when URL is not listed, "" when FIELD is not set.
listen_field() {
	"$ENGRAMCTL" -j listen show |
		jget "next((str(x.get('$2', '')) for x in d if x['url'] == '$1'), 'absent')"
}
listen_state_is() { test "$(listen_field "$1" state)" = "$2"; }
listen_has_error() { test -n "$(listen_field "$1" error_str)"; }
link_has_error() { test -n "$(link_field "$1" error_str)"; }
# wait_for SECONDS COMMAND...: until COMMAND succeeds.

# --- listeners
out=$("$ENGRAMCTL" listen add "$L" 2>&1)
check "listen add $L: exit 0, quiet ($out)" test $? -eq 0 -a -z "$out"
check "listen show lists it" test "$(listen_field "$L" url)" = "$L"
wait_for 10 listen_state_is "$L" active
check "it becomes active on the rxe address ($(listen_field "$L" state))" \
	test "$(listen_field "$L" state)" = active
check "on device rxe0 ($(listen_field "$L" device))" test "$(listen_field "$L" device)" = rxe0
check "with 0 connections" test "$(listen_field "$L" connections)" = 0
check "text listen show has its line" sh -c "'$ENGRAMCTL' listen show | grep -qF '$L: state active'"
refused "the same address again" "File exists" "already listening" listen add "$L"
refused "the same address written differently" "File exists" "already listening" \
	listen add "rdma://$IP:018991"

dmesg_mark
refused "a wildcard address" "Invalid argument" "bad listen URL" listen add rdma://0.0.0.0:18992
out=$("$ENGRAMCTL" listen add rdma://0.0.0.0:18992 2>&1)
check "engramctl adds the parser's reason ($out)" grep -q "wildcard listen address" <<<"$out"
check "the kernel logs the reason" sh -c "dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'listen URL refused: wildcard'"
refused "a URL of another scheme" "Invalid argument" "must start with rdma:// or tcp://" \
	listen add "http://$IP:80"
refused "a remote URL" "Invalid argument" "takes no '@LOCAL' part" listen add "rdma://$IP:18992@$IP"
refused "a port out of range" "Invalid argument" "out of range" listen add rdma://$IP:65536
refused "a URL too long for the policy" "Invalid argument" "longer than 127" \
	listen add "rdma://$IP:18992/$(printf 'x%.0s' $(seq 1 130))"
refused "listen del of an address not listened on" "No such file or directory" "" \
	listen del rdma://$IP:18994
check "refused adds left no listener" test "$(listen_field rdma://0.0.0.0:18992 url)" = absent

# An address this host does not have: accepted, waiting, retried.
W=rdma://192.0.2.200:18995
check "listen add of an address not configured is accepted" "$ENGRAMCTL" listen add "$W"
check "it waits ($(listen_field "$W" state))" test "$(listen_field "$W" state)" = waiting
wait_for 10 listen_has_error "$W"
check "with its last error ($(listen_field "$W" error_str))" test -n "$(listen_field "$W" error_str)"
check "listen del of it" "$ENGRAMCTL" listen del "$W"
check "it is gone" test "$(listen_field "$W" url)" = absent

# --- links, to a port nobody listens on
id=$("$ENGRAMCTL" link add "$R" 2>&1)
check "link add prints the new id alone ($id)" grep -qx '[0-9][0-9]*' <<<"$id"
st=$(link_field "$id" state)
check "the link is connecting or down ($st)" test "$st" = connecting -o "$st" = down
wait_for 15 link_has_error "$id"
check "it reports a last error ($(link_field "$id" error_str))" test -n "$(link_field "$id" error_str)"
st=$(link_field "$id" state)
check "and is still not up ($st)" test "$st" = connecting -o "$st" = down
check "its URL is as given" test "$(link_field "$id" url)" = "$R"
check "no limits negotiated" test "$(link_field "$id" max_rows)" = 0
out=$("$ENGRAMCTL" link show "$id")
check "text link show has the last error as text" grep -q "last error" <<<"$out"
check "and the time in the state" grep -q "state  *\(connecting\|down\) for " <<<"$out"
refused "the same link again" "File exists" "exists" link add "$R"
refused "a link URL without @LOCAL" "Invalid argument" "bad remote URL" link add rdma://$IP:18996
out=$("$ENGRAMCTL" link add rdma://$IP:18996 2>&1)
check "engramctl adds the parser's reason ($out)" grep -q "needs the local address" <<<"$out"
refused "local and server of different families" "Invalid argument" "different families" \
	link add "rdma://$IP:18996@[2001:db8::1]"
refused "link show of an unknown id" "No such file or directory" "no link with that id" \
	link show 99999
refused "link del of an unknown id" "No such file or directory" "no link with that id" \
	link del 99999
"$ENGRAMCTL" link show 0 >/dev/null 2>&1
check "link show 0 is a usage error" test $? -eq 2
json=$("$ENGRAMCTL" -j stats)
check "stats -j has the link, with its counters and latency" \
	test "$(jget "[(l['id'], l['fetches'], l['latency']['count']) for l in d['links'] if l['id'] == $id]" <<<"$json")" = "[($id, 0, 0)]"
check "text stats has a section for the link" sh -c "'$ENGRAMCTL' stats | grep -qx 'link $id $R'"

# --- permissions, with a listener and a link in place
out=$(as_nobody "$ENGRAMCTL" listen add rdma://$IP:18997 2>&1)
check "unprivileged listen add is refused" test $? -eq 1
check "naming CAP_NET_ADMIN ($out)" grep -q "CAP_NET_ADMIN" <<<"$out"
out=$(as_nobody "$ENGRAMCTL" listen del "$L" 2>&1)
check "unprivileged listen del is refused ($out)" grep -q "Operation not permitted.*CAP_NET_ADMIN" <<<"$out"
out=$(as_nobody "$ENGRAMCTL" link add rdma://$IP:18997@$IP 2>&1)
check "unprivileged link add is refused ($out)" grep -q "Operation not permitted.*CAP_NET_ADMIN" <<<"$out"
out=$(as_nobody "$ENGRAMCTL" link del "$id" 2>&1)
check "unprivileged link del is refused ($out)" grep -q "Operation not permitted.*CAP_NET_ADMIN" <<<"$out"
check "the listener is still there" test "$(listen_field "$L" url)" = "$L"
check "the link is still there" test "$(link_field "$id" url)" = "$R"
check "unprivileged listen show works" as_nobody "$ENGRAMCTL" listen show
check "unprivileged link list works" as_nobody "$ENGRAMCTL" link list
check "unprivileged stats works" as_nobody "$ENGRAMCTL" stats

# --- at most 16 listeners and 16 links: a caller cannot make the module
# hold sockets, cm_ids and retries without bound
nl=$("$ENGRAMCTL" -j listen show | jget "len(d)")
added=()
for ((p = 19100; nl < 16 && p < 19140; p++)); do
	"$ENGRAMCTL" listen add "tcp://$IP:$p" >/dev/null 2>&1 && { added+=("tcp://$IP:$p"); nl=$((nl + 1)); }
done
check "16 listeners in all ($nl, ${#added[@]} added here)" test "$nl" -eq 16
refused "a 17th listener is refused" "No space left on device" "too many listeners (16)" \
	listen add "tcp://$IP:19150"
check "and is not listed" test "$(listen_field "tcp://$IP:19150" url)" = absent
for u in "${added[@]}"; do "$ENGRAMCTL" listen del "$u" >/dev/null 2>&1; done
check "listen add works again once some are gone" "$ENGRAMCTL" listen add "tcp://$IP:19150"
"$ENGRAMCTL" listen del "tcp://$IP:19150" >/dev/null 2>&1
nk=$("$ENGRAMCTL" link list | grep -c '^link ')
links=()
for ((p = 19200; nk < 16 && p < 19240; p++)); do
	i=$("$ENGRAMCTL" link add "rdma://$IP:$p@$IP" 2>/dev/null) && { links+=("$i"); nk=$((nk + 1)); }
done
check "16 links in all ($nk, ${#links[@]} added here)" test "$nk" -eq 16
refused "a 17th link is refused" "No space left on device" "too many links (16)" \
	link add "rdma://$IP:19250@$IP"
for i in "${links[@]}"; do "$ENGRAMCTL" link del "$i" >/dev/null 2>&1; done
check "the links added for it are gone" \
	test "$("$ENGRAMCTL" link list | grep -c '^link ')" -eq $((16 - ${#links[@]}))
last=${links[-1]}
i=$("$ENGRAMCTL" link add "rdma://$IP:19200@$IP" 2>&1)
check "a link added after them gets a new id, not a deleted one's ($i > $last)" \
	test "$i" -gt "$last" 2>/dev/null
"$ENGRAMCTL" link del "$i" >/dev/null 2>&1

# --- clean up, and what is gone is gone
check "link del" "$ENGRAMCTL" link del "$id"
refused "link show after del" "No such file or directory" "no link with that id" link show "$id"
check "listen del by an equal URL" "$ENGRAMCTL" listen del "rdma://$IP:018991"
check "the listener is gone" test "$(listen_field "$L" url)" = absent
for cmd in "listen show" "link list" "link show"; do
	check "engramctl -j $cmd is valid JSON" sh -c "'$ENGRAMCTL' -j $cmd | python3 -m json.tool >/dev/null"
done
done_testing
