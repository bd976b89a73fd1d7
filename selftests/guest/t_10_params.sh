#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Module parameters: every bad listen=/remote=/timeout_ms= fails the load with
# a log line naming the problem; good ones load and read back.
# timeout: 120
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

[ -f "$MODULE" ] || bail "module under test not found"
module_unload || bail "rmmod before the parameter tests"

# refuse PHRASE PARAM...: insmod must fail and dmesg must explain.
refuse() {
	local phrase=$1
	shift
	dmesg_mark
	if module_load "$@" 2>/dev/null; then
		nok "refuses $*"
		module_unload
		return
	fi
	if dmesg_since | grep -qF -- "$phrase"; then
		ok "refuses $* ($phrase)"
	else
		nok "refuses $* with a log line containing '$phrase'"
		dmesg_since | sed 's/^/# /'
	fi
}

refuse "listen=: entry 1 'rdma://0.0.0.0:18515': wildcard listen address '0.0.0.0'" \
	listen=rdma://0.0.0.0:18515
refuse "wildcard listen address '::'" "listen=tcp://[::]:18515"
refuse "port 0 out of range 1-65535" listen=rdma://192.0.2.1:0
refuse "port 65536 out of range 1-65535" listen=rdma://192.0.2.1:65536
refuse "port 99999 out of range" listen=tcp://192.0.2.1:99999
refuse "must start with rdma:// or tcp://" listen=http://192.0.2.1:80
refuse "malformed IPv4 listen address '192.0.2'" listen=rdma://192.0.2:18515
refuse "must be written in brackets" listen=rdma://2001:db8::1:18515
refuse "entry 2 is empty" listen=rdma://192.0.2.1:1,,tcp://192.0.2.1:2
refuse "entry 2 'rdma://192.0.2.1' duplicates entry 1" \
	listen=rdma://192.0.2.1:18515,rdma://192.0.2.1
refuse "remote=: entry 1 'rdma://192.0.2.1:18515': a remote URL needs the local address" \
	remote=rdma://192.0.2.1:18515
refuse "wildcard server address" remote=rdma://0.0.0.0:18515@192.0.2.1
refuse "wildcard local address" remote=rdma://192.0.2.1:18515@0.0.0.0
refuse "duplicates entry 1" \
	remote=tcp://192.0.2.1:7@192.0.2.1,tcp://192.0.2.1:7@192.0.2.1
refuse "a listen URL takes no '@LOCAL' part" listen=rdma://192.0.2.1:1@192.0.2.1
refuse "tcp_frame_timeout_ms=99: want milliseconds in 100-600000" tcp_frame_timeout_ms=99
refuse "tcp_hello_timeout_ms=600001: want milliseconds in 100-600000" tcp_hello_timeout_ms=600001
refuse "tcp_max_conns=0: want 1-512" tcp_max_conns=0
refuse "heartbeat_ms=60001: want milliseconds in 0-60000" heartbeat_ms=60001
refuse "heartbeat_timeout_ms=9: want milliseconds in 10-600000" heartbeat_timeout_ms=9
refuse "reconnect_min_ms=0: want milliseconds in 1-600000" reconnect_min_ms=0
refuse "reconnect_max_ms=x: want milliseconds in 1-600000" reconnect_max_ms=x
refuse "fault_delay_ms=60001: want 0-60000" fault_delay_ms=60001
refuse "fault_drop_pct=101: want 0-100" fault_drop_pct=101
refuse "statlog_s=86401: want seconds in 0-86400" statlog_s=86401
refuse "timeout_ms=0: want milliseconds" timeout_ms=0
refuse "timeout_ms=abc: want milliseconds" timeout_ms=abc
check "no module left behind by the refused loads" sh -c '! test -d /sys/module/engram_rdma'

good_listen="rdma://192.0.2.1:18515,rdma://[2001:db8::1]:18516"
good_remote="rdma://192.0.2.1:18515@192.0.2.1,rdma://[2001:db8::1]@[2001:db8::1]"
dmesg_mark
if module_load "listen=$good_listen" "remote=$good_remote" timeout_ms=250; then
	ok "loads with valid listen=, remote= and timeout_ms="
	check "listen= reads back" test "$(cat /sys/module/engram_rdma/parameters/listen)" = "$good_listen"
	check "remote= reads back" test "$(cat /sys/module/engram_rdma/parameters/remote)" = "$good_remote"
	check "remote= is root's only (0400): its URLs map the deployment" \
		test "$(stat -c %a /sys/module/engram_rdma/parameters/remote)" = 400
	check "a user cannot read it" sh -c '! setpriv --reuid 65534 --regid 65534 --clear-groups \
		cat /sys/module/engram_rdma/parameters/remote 2>/dev/null'
	check "listen= stays readable by all (0444)" \
		test "$(stat -c %a /sys/module/engram_rdma/parameters/listen)" = 444
	check "timeout_ms reads back" test "$(cat /sys/module/engram_rdma/parameters/timeout_ms)" = 250
	check "each endpoint is logged" test "$(dmesg_since | grep -cE 'engram_rdma: (listen|remote) [^ ]+$')" = 4
	check "timeout_ms refuses 0 at run time" sh -c '! echo 0 > /sys/module/engram_rdma/parameters/timeout_ms'
	check "timeout_ms takes 500 at run time" sh -c 'echo 500 > /sys/module/engram_rdma/parameters/timeout_ms'
else
	nok "loads with valid listen=, remote= and timeout_ms="
	dmesg_since | sed 's/^/# /'
fi
module_unload
check "reloads without parameters" module_load
done_testing
