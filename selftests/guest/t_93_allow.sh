#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The client allow-list: allow= at load (good and bad lists), engramctl
# listen allow add/del/show with their refusals and permissions, and in
# this one guest a link from a local address that is not on the list:
# denied at the rdma_cm connect request (CONNECTS_DENIED, a log line, the
# link not up with an error), then let in by `allow add`, after which the
# link comes up on its own and fetches exact rows.  Deleting the last entry
# closes the listeners to everyone (RDMA and TCP: denied and counted) until
# an entry is added; listen show says whom the listeners accept.
# kernels: 6.12
# timeout: 600
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
IP6=${ENGRAM_IP6:-2001:db8::1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/allow.safetensors
ROWS=30000
# A port nothing else in the tests uses.
PORT=18993

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
# wait_for SECONDS COMMAND...: until COMMAND succeeds.
allow_list() { "$ENGRAMCTL" listen allow show | tr '\n' ' ' | sed 's/ $//'; }

# --- allow= at load ------------------------------------------------------------
module_unload || bail "rmmod before the allow= tests"
many=$(for i in $(seq 1 65); do printf '10.0.%d.%d,' $((i / 256)) $((i % 256)); done)
many=${many%,}
# bad_param DESC REASON PARAM: the load fails and the log names the reason.
bad_param() {
	dmesg_mark
	if module_load "$3" 2>/dev/null; then
		nok "$1: module loaded"
		module_unload
		return
	fi
	line=$(dmesg_since | grep -F "engram_rdma: allow=: " | grep -F -- "$2")
	if [ -n "$line" ]; then
		ok "$1: load refused, log says '${line#*engram_rdma: }'"
	else
		nok "$1: log says 'allow=: ...$2'"
		dmesg_since | sed 's/^/# /'
	fi
}
bad_param "host bits past the length" "entry 2: '192.0.2.1/24' has address bits set past the prefix length: did you mean 192.0.2.0/24?" \
	"allow=10.0.0.0/8,192.0.2.1/24"
bad_param "IPv6 in brackets" "without brackets" "allow=[2001:db8::1]"
bad_param "an empty entry" "entry 2 is empty" "allow=192.0.2.1,,10.0.0.1"
bad_param "the unspecified address" "unspecified address" "allow=0.0.0.0"
bad_param "a duplicate" "entry 2 '192.0.2.1/32' duplicates entry 1" "allow=192.0.2.1,192.0.2.1/32"
bad_param "a length out of range" "out of range 0-32" "allow=192.0.2.0/33"
bad_param "a multicast address" "multicast" "allow=ff02::1"
bad_param "an IPv4-mapped address" "IPv4-mapped" "allow=::ffff:192.0.2.1"
bad_param "junk" "is not an IPv4 address" "allow=localhost"
bad_param "65 entries" "more than 64 entries" "allow=$many"
check "no module left behind by the refused loads" sh -c '! test -d /sys/module/engram_rdma'

good="192.0.2.0/24,2001:DB8:0::5,10.0.0.0/8,0.0.0.0/0"
dmesg_mark
if module_load "allow=$good"; then
	ok "loads with allow=$good"
	check "allow= reads back as given" test "$(cat /sys/module/engram_rdma/parameters/allow)" = "$good"
	check "allow= is root's only (0400), as the allow-list over netlink" \
		test "$(stat -c %a /sys/module/engram_rdma/parameters/allow)" = 400
	check "listen allow show: canonical, in order ($(allow_list))" \
		test "$(allow_list)" = "192.0.2.0/24 2001:db8::5 10.0.0.0/8 0.0.0.0/0"
	check "each entry is logged" test "$(dmesg_since | grep -cE 'engram_rdma: allow [^ ]+$')" = 4
	check "listen show ends with the list" sh -c \
		"'$ENGRAMCTL' listen show | tail -n 1 | grep -qx 'allow: 192.0.2.0/24 2001:db8::5 10.0.0.0/8 0.0.0.0/0'"
else
	nok "loads with allow=$good"
	dmesg_since | sed 's/^/# /'
fi
module_unload
check "loads without allow=" module_load

# --- engramctl listen allow --------------------------------------------------------
check "no list: listen allow show says any" test "$(allow_list)" = any
check "no list: listen show says allow: any" sh -c \
	"'$ENGRAMCTL' listen show | grep -qx 'allow: any (no allow-list: any peer may connect)'"
check "empty list: -j is []" test "$("$ENGRAMCTL" -j listen allow show)" = "[]"
out=$("$ENGRAMCTL" listen allow add 192.0.2.0/24 2>&1)
check "allow add 192.0.2.0/24: exit 0, quiet ($out)" test $? -eq 0 -a -z "$out"
check "allow add 2001:DB8::1:0/112" "$ENGRAMCTL" listen allow add 2001:DB8::1:0/112
check "show lists both, canonical ($(allow_list))" test "$(allow_list)" = "192.0.2.0/24 2001:db8::1:0/112"
json=$("$ENGRAMCTL" -j listen allow show)
check "-j: prefix, family, length ($json)" test "$(jget "[(e['prefix'], e['family'], e['length']) for e in d]" <<<"$json")" = \
	"[('192.0.2.0/24', 'ipv4', 24), ('2001:db8::1:0/112', 'ipv6', 112)]"
refused "the same entry again" "File exists" "already on the allow-list" listen allow add 192.0.2.0/24
refused "the same entry written differently" "File exists" "already on the allow-list" \
	listen allow add 2001:db8:0:0:0:0:1:0/112
dmesg_mark
refused "host bits past the length" "Invalid argument" "bad allow-list entry" listen allow add 192.0.2.1/24
out=$("$ENGRAMCTL" listen allow add 192.0.2.1/24 2>&1)
check "engramctl adds the parser's reason ($out)" grep -q "did you mean 192.0.2.0/24?" <<<"$out"
check "the kernel logs the reason" sh -c "dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'allow-list entry refused: .*did you mean'"
refused "brackets" "Invalid argument" "without brackets" listen allow add "[2001:db8::1]"
refused "a zone id" "Invalid argument" "scoped" listen allow add "fe80::1%er0"
refused "the unspecified address" "Invalid argument" "unspecified" listen allow add ::
refused "an empty entry" "Invalid argument" "empty address" listen allow add ""
refused "a length out of range" "Invalid argument" "out of range 0-128" listen allow add 2001:db8::/129
refused "junk" "Invalid argument" "is not an IPv4 address" listen allow add host.example
refused "an entry too long for the policy" "Invalid argument" "" \
	listen allow add "$(printf '1%.0s' $(seq 1 70))"
refused "del of an entry not there" "No such file or directory" "no such entry on the allow-list" \
	listen allow del 10.0.0.0/8
check "the refusals changed nothing ($(allow_list))" test "$(allow_list)" = "192.0.2.0/24 2001:db8::1:0/112"
for i in $(seq 1 62); do
	"$ENGRAMCTL" listen allow add "10.1.$i.0/24" || break
done
check "64 entries fit" test "$("$ENGRAMCTL" listen allow show | wc -l)" = 64
refused "a 65th is refused" "No space left on device" "full (64 entries)" listen allow add 10.2.0.0/16
for i in $(seq 1 62); do
	"$ENGRAMCTL" listen allow del "10.1.$i.0/24" || break
done
check "del takes them off again ($(allow_list))" test "$(allow_list)" = "192.0.2.0/24 2001:db8::1:0/112"
check "del of an IPv6 entry written differently" "$ENGRAMCTL" listen allow del 2001:db8:0::1:0/112
check "leaves the other ($(allow_list))" test "$(allow_list)" = "192.0.2.0/24"

out=$(as_nobody "$ENGRAMCTL" listen allow add 10.0.0.0/8 2>&1)
check "unprivileged allow add is refused ($out)" grep -q "Operation not permitted.*CAP_NET_ADMIN" <<<"$out"
out=$(as_nobody "$ENGRAMCTL" listen allow del 192.0.2.0/24 2>&1)
check "unprivileged allow del is refused ($out)" grep -q "Operation not permitted.*CAP_NET_ADMIN" <<<"$out"
out=$(as_nobody "$ENGRAMCTL" listen allow show 2>&1)
check "unprivileged allow show is refused ($out)" grep -q "Operation not permitted.*CAP_NET_ADMIN" <<<"$out"
check "the list is unchanged" test "$(allow_list)" = 192.0.2.0/24

# --- a peer not on the list --------------------------------------------------------
# The list holds 192.0.2.0/24 only: the IPv4 link is let in, the IPv6 one
# (from this guest's own 2001:db8::1) is not.
make_table "$F" $ROWS --seed 93 --pad-before 3 || bail "mktable"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name allow >/dev/null 2>&1
check "the table loads" test "$(table_state allow)" = ready
WOFF=$(table_field allow weight_offset)
SOFF=$(table_field allow scale_offset)
fc() {
	"$CHECK" --table allow --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF" \
		--rows-total $ROWS --timeout-ms 60000 "$@"
}
run() { local out rc; out=$(fc "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
fetchable() { fc --link "$1" --count 1 >/dev/null 2>&1; }
denied_since() { test "$(stat_global connects_denied)" -gt "$1"; }

dmesg_mark
check "listen add IPv4" "$ENGRAMCTL" listen add "rdma://$IP:$PORT"
check "the listener's log does not say it is open to any peer" sh -c \
	"! dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'no allow-list'"
check "listen show: the listener accepts the list" sh -c \
	"'$ENGRAMCTL' listen show | grep -q '^rdma://$IP:$PORT: .* allow list\$'"
check "listen show -j: allow is list" test \
	"$("$ENGRAMCTL" -j listen show | jget "d[0]['allow']")" = list
check "listen add IPv6" "$ENGRAMCTL" listen add "rdma://[$IP6]:$PORT"
d0=$(stat_global connects_denied)
r0=$(stat_global connects_rejected)
dmesg_mark
id4=$("$ENGRAMCTL" link add "rdma://$IP:$PORT@$IP")
id6=$("$ENGRAMCTL" link add "rdma://[$IP6]:$PORT@[$IP6]")
check "two links added ($id4, $id6)" test -n "$id4" -a -n "$id6"
check "the IPv4 link, on the list, comes up and fetches" wait_for 60 fetchable "$id4"
check "the IPv6 link is denied: CONNECTS_DENIED moves" wait_for 60 denied_since "$d0"
st=$(link_field "$id6" state)
check "the IPv6 link is not up ($st)" test "$st" = connecting -o "$st" = down
err=$(link_field "$id6" error_str)
check "and reports the refusal ($err)" test "$err" = "Connection refused"
check "a denial is not counted as a rejection" test "$(stat_global connects_rejected)" = "$r0"
line=$(dmesg_since | grep -m1 "denied: not on the allow-list")
check "the log names the peer and the listener ($line)" grep -qF \
	"connection from $IP6 to rdma://[$IP6]:$PORT denied: not on the allow-list" <<<"$line"
check "the server holds one connection" test "$(stat_global connections)" = 1
check "the IPv4 link fetches 20,000 rows, exact" run --link "$id4" --count 20000 --batch 288,4096 --seed 1

check "allow add $IP6" "$ENGRAMCTL" listen allow add "$IP6"
check "the IPv6 link comes up on its own and fetches" wait_for 60 fetchable "$id6"
check "the IPv6 link fetches 20,000 rows, exact" run --link "$id6" --count 20000 --batch 288,4096 --seed 2
d1=$(stat_global connects_denied)
check "the server holds both connections" test "$(stat_global connections)" = 2

# Taking an entry off keeps the connections that exist.
check "allow del $IP6" "$ENGRAMCTL" listen allow del "$IP6"
check "the IPv6 link keeps fetching, exact" run --link "$id6" --count 5000 --batch 1000 --seed 3
check "nothing more was denied" test "$(stat_global connects_denied)" = "$d1"

# Every denial is counted, the log lines are rate-limited: never more of them.
nd=$(( $(stat_global connects_denied) - d0 ))
nl=$(dmesg_since | grep -c "denied: not on the allow-list")
check "log lines ($nl) never outnumber denials ($nd)" test "$nl" -ge 1 -a "$nl" -le "$nd"

check "link del of the IPv6 link" "$ENGRAMCTL" link del "$id6"
dmesg_mark
check "allow del 192.0.2.0/24 empties the list" "$ENGRAMCTL" listen allow del 192.0.2.0/24
check "which is none, not any ($(allow_list))" test "$(allow_list)" = none
check "the log says no peer may connect" sh -c \
	"dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'allow 192.0.2.0/24 removed: the allow-list is empty, no peer may connect until an entry is added'"
check "listen show says none" sh -c \
	"'$ENGRAMCTL' listen show | grep -qx 'allow: none (the allow-list is empty: every peer is refused)'"
check "listen show -j: allow is none" test \
	"$("$ENGRAMCTL" -j listen show | jget "d[0]['allow']")" = none
check "the connections that exist are kept" run --link "$id4" --count 2000 --batch 1000 --seed 5

# Emptied: a new connection, RDMA or TCP, from an address that was allowed.
# The IPv4 link is deleted so that the same link can be added anew.
"$ENGRAMCTL" link del "$id4"
d4=$(stat_global connects_denied)
a4=$(stat_global connects_accepted)
dmesg_mark
TE=tcp://$IP:$PORT
check "listen add $TE while the list is empty" "$ENGRAMCTL" listen add "$TE"
check "its log says every peer is refused" sh -c \
	"dmesg | tail -n +$((DMESG_MARK + 1)) | grep -qF 'listen $TE: the allow-list is empty: every peer is refused'"
idr=$("$ENGRAMCTL" link add "rdma://$IP:$PORT@$IP")
idt=$("$ENGRAMCTL" link add "$TE@$IP")
check "two more links from $IP ($idr rdma, $idt tcp)" test -n "$idr" -a -n "$idt"
denied_by() { test "$(stat_global connects_denied)" -ge $(($1 + $2)); }
check "both are denied: connects_denied moves by 2 or more" wait_for 60 denied_by "$d4" 2
check "the RDMA link is not up ($(link_field "$idr" state))" test "$(link_field "$idr" state)" != up
check "the TCP link is not up ($(link_field "$idt" state))" test "$(link_field "$idt" state)" != up
check "the log says why, for RDMA" sh -c \
	"dmesg | tail -n +$((DMESG_MARK + 1)) | grep -qF 'connection from $IP to rdma://$IP:$PORT denied: the allow-list is empty'"
check "and for TCP" sh -c \
	"dmesg | tail -n +$((DMESG_MARK + 1)) | grep -qF 'connection from $IP to $TE denied: the allow-list is empty'"
check "none was accepted" test "$(stat_global connects_accepted)" = "$a4"
check "allow add 192.0.2.0/24 opens it again" "$ENGRAMCTL" listen allow add 192.0.2.0/24
check "the RDMA link comes up on its own and fetches" wait_for 60 fetchable "$idr"
check "the TCP link comes up on its own and fetches" wait_for 60 fetchable "$idt"
"$ENGRAMCTL" link del "$idt"
"$ENGRAMCTL" listen del "$TE"
id4=$idr	# the IPv4 link from here on
check "allow del 192.0.2.0/24 again" "$ENGRAMCTL" listen allow del 192.0.2.0/24


# The same at the TCP accept, where the transport has it.
T=tcp://[$IP6]:$PORT
if out=$("$ENGRAMCTL" listen add "$T" 2>&1); then
	check "allow add 192.0.2.0/24 again" "$ENGRAMCTL" listen allow add 192.0.2.0/24
	d3=$(stat_global connects_denied)
	dmesg_mark
	idt=$("$ENGRAMCTL" link add "$T@[$IP6]")
	check "a TCP link from $IP6 is denied at accept" wait_for 60 denied_since "$d3"
	st=$(link_field "$idt" state)
	check "the TCP link is not up ($st, '$(link_field "$idt" error_str)')" test "$st" != up
	check "the log names the TCP listener" sh -c \
		"dmesg | tail -n +$((DMESG_MARK + 1)) | grep -qF 'connection from $IP6 to $T denied: not on the allow-list'"
	check "allow add $IP6" "$ENGRAMCTL" listen allow add "$IP6"
	check "the TCP link comes up on its own and fetches" wait_for 60 fetchable "$idt"
	check "the TCP link fetches 5,000 rows, exact" run --link "$idt" --count 5000 --batch 1000 --seed 4
	"$ENGRAMCTL" link del "$idt"
	"$ENGRAMCTL" listen del "$T"
	"$ENGRAMCTL" listen allow del "$IP6"
	"$ENGRAMCTL" listen allow del 192.0.2.0/24
else
	ok "TCP accept # SKIP no TCP listener in this build ($out)"
fi
check "link del" "$ENGRAMCTL" link del "$id4"
"$ENGRAMCTL" listen del "rdma://$IP:$PORT"
"$ENGRAMCTL" listen del "rdma://[$IP6]:$PORT"
"$ENGRAMCTL" unload allow >/dev/null
check "rmmod with entries and denials behind" module_unload
check "the module loads again" module_load
done_testing
