#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# engram-rdma-tables.service, its commands run as systemd runs them (the
# guest's init is not systemd): ExecStart, ExecReload and ExecStop read
# from tools/systemd/engram-rdma-tables.service.in, with the tree's
# engramctl and a tables file in scratch in place of /etc's.  Its
# ExecStartPre (modprobe) is checked to be that, not run: the module under
# test is not in the guest's /lib/modules, and is loaded already.
# - start loads what the file lists; a second start changes nothing (the
#   generations stay); a reload after editing the file replaces the table
#   whose tensor changed, loads the new one, leaves the rest; a table loaded
#   by hand stays, until sync --prune;
# - a wrong digest fails that table only (exit 1, the others unchanged), a
#   malformed file changes nothing;
# - SIGTERM (a stop) during a load cancels it: exit 130, nothing left;
# - stop unloads every listed table;
# - under $NOTIFY_SOCKET (Type=notify), a start sends the load's progress
#   as STATUS=, extends its timeout while the load runs, and READY=1 once
#   the table serves, as systemd would read them (a python3 socket here).
# timeout: 300
# kernels: 6.12
. "$(dirname "$0")/lib.sh"

UNIT=$TOP/tools/systemd/engram-rdma-tables.service.in
F1=$SCRATCH/svc1.safetensors
F2=$SCRATCH/svc2.safetensors
CONF=$SCRATCH/tables.conf
P=/sys/module/engram_rdma/parameters

make_table "$F1" 3000 --seed 81 || bail "mktable 1"
make_table "$F2" 2000 --seed 82 --prefix t.a --prefix t.b || bail "mktable 2"
module_loaded || module_load || bail "insmod"
SHA1=$(sha256sum "$F1" | cut -d' ' -f1)

# unit_cmd KEY: the unit's KEY= command line, pointed at the tree and $CONF.
unit_cmd() {
	sed -n "s/^$1=//p" "$UNIT" |
		sed "s|@SBINDIR@/engramctl|$ENGRAMCTL|; s|/etc/engram-rdma/tables.conf|$CONF|"
}
# unit KEY: run it as systemd does (no shell: split at blanks), within the
# unit's start timeout scaled down to the test's; output in $OUT, $ERR.
unit() {
	local cmd rc
	cmd=$(unit_cmd "$1")
	[ -n "$cmd" ] || { ERR="no $1= in the unit"; return 99; }
	# shellcheck disable=SC2086
	timeout 120 $cmd >"$SCRATCH/unit.out" 2>"$SCRATCH/unit.err"
	rc=$?
	OUT=$(cat "$SCRATCH/unit.out")
	ERR=$(cat "$SCRATCH/unit.err")
	return $rc
}
gen() { table_field "$1" generation 2>/dev/null; }
# woff FILE PREFIX: the absolute offset of PREFIX.weight in FILE.
woff() {
	python3 - "$1" "$2" <<'PY'
import json, struct, sys
with open(sys.argv[1], "rb") as f:
    n = struct.unpack("<Q", f.read(8))[0]
    h = json.loads(f.read(n))
print(8 + n + h[sys.argv[2] + ".weight"]["data_offsets"][0])
PY
}

check "the unit's ExecStartPre is modprobe engram_rdma, outside the sandbox" \
	test "$(sed -n 's/^ExecStartPre=//p' "$UNIT")" = "+/sbin/modprobe engram_rdma"
check "it is a notify unit that remains after it started" \
	sh -c "grep -qx 'Type=notify' '$UNIT' && grep -qx 'RemainAfterExit=yes' '$UNIT'"

# notify_listen SOCKET LOG: systemd's end of the notification socket, in
# the background: each datagram appended to LOG with a "--" line after it,
# the descriptor of a BARRIER=1 closed as systemd does, until END or 60 s.
notify_listen() {
	rm -f "$1"
	python3 - "$1" "$2" <<'PY' &
import array, os, socket, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(sys.argv[1])
s.settimeout(60)
with open(sys.argv[2], "w") as f:
    for _ in range(10000):
        try:
            msg, anc, _, _ = s.recvmsg(4096, socket.CMSG_SPACE(16))
        except socket.timeout:
            break
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                for fd in array.array("i", data[:len(data) - len(data) % 4]):
                    os.close(fd)
        if msg == b"END":
            break
        f.write(msg.decode() + "\n--\n")
        f.flush()
PY
	wait_for 20 test -S "$1"
}
notify_end() {
	python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b"END", sys.argv[1])' "$1"
	wait
}

printf '# tables of this host\nsvc.one %s %s %s\nsvc.two\t%s\tt.a\t-  # no digest\n' \
	"$F1" "$PREFIX" "$SHA1" "$F2" >"$CONF"
unit ExecStart
check "start: exit 0 ($ERR)" test $? -eq 0
check "start: both tables loaded ($OUT)" \
	test "$OUT" = "$(printf 'svc.one: loaded\nsvc.two: loaded')"
check "both are ready" test "$(table_state svc.one) $(table_state svc.two)" = "ready ready"
g1=$(gen svc.one)
g2=$(gen svc.two)
unit ExecStart
check "a second start: exit 0, both unchanged ($OUT)" \
	test $? -eq 0 -a "$OUT" = "$(printf 'svc.one: unchanged\nsvc.two: unchanged')"
check "neither was loaded again (generations $g1 $g2)" \
	test "$(gen svc.one) $(gen svc.two)" = "$g1 $g2"

"$ENGRAMCTL" load "$F1" --tensor "$PREFIX" --name by.hand --no-progress >/dev/null ||
	bail "load by hand"
printf 'svc.one %s %s %s\nsvc.two %s t.b -\nsvc.three %s %s -\n' \
	"$F1" "$PREFIX" "$SHA1" "$F2" "$F1" "$PREFIX" >"$CONF"
unit ExecReload
check "reload after an edit: exit 0 ($ERR)" test $? -eq 0
check "svc.two replaced (its tensor changed), svc.three loaded, svc.one unchanged ($OUT)" \
	test "$OUT" = "$(printf 'svc.one: unchanged\nsvc.two: replaced (another tensor or geometry)\nsvc.three: loaded')"
check "svc.one kept its generation, svc.two has a new one" \
	test "$(gen svc.one)" = "$g1" -a "$(gen svc.two)" != "$g2"
check "svc.two now serves t.b's rows" \
	test "$(table_field svc.two weight_offset)" = "$(woff "$F2" t.b)"
check "a table loaded by hand stays" test "$(table_state by.hand)" = ready
out=$("$ENGRAMCTL" table sync --config "$CONF" --prune --no-progress 2>&1)
check "until sync --prune unloads it ($out)" \
	test -n "$(grep -x 'by.hand: unloaded (not listed)' <<<"$out")" -a "$(table_state by.hand)" = absent

g3=$(gen svc.three)
printf 'svc.one %s %s %s\nsvc.three %s %s %064d\n' "$F1" "$PREFIX" "$SHA1" "$F1" "$PREFIX" 0 >"$CONF"
unit ExecReload
rc=$?
check "a wrong digest: exit 1 ($OUT)" test $rc -eq 1 -a "$OUT" = \
	"$(printf 'svc.one: unchanged\nsvc.three: failed (another SHA-256)')"
check "the error names the mismatch ($ERR)" grep -qi 'sha' <<<"$ERR"
check "svc.one still serves, generation $g1" test "$(gen svc.one)" = "$g1"
check "svc.three is not left half-loaded" test "$(table_state svc.three)" = absent

printf 'svc.one %s %s\n' "$F1" "$PREFIX" >"$CONF"
unit ExecReload
rc=$?
check "a malformed file: exit 1, naming the line ($ERR)" test $rc -eq 1 -a -n "$(grep ':1: 3 fields' <<<"$ERR")"
check "and nothing changed" test "$(gen svc.one) $(table_state svc.two)" = "$g1 ready"

# A stop while the unit starts: SIGTERM to the sync during a load.
printf 'svc.slow %s %s -\n' "$F1" "$PREFIX" >"$CONF"
echo 3000 >$P/fault_map_delay_ms
cmd=$(unit_cmd ExecStart)
# shellcheck disable=SC2086
$cmd >"$SCRATCH/unit.out" 2>&1 &
pid=$!
wait_state svc.slow loading 10
sleep 0.5
kill -TERM $pid
wait $pid
rc=$?
echo 0 >$P/fault_map_delay_ms
check "SIGTERM during a load: exit 130 ($(tr '\n' ' ' <"$SCRATCH/unit.out"))" test $rc -eq 130
check "the load was cancelled, nothing left" wait_for 20 sh -c "test \"\$('$ENGRAMCTL' -j list | python3 -c 'import json,sys; print(any(t[\"name\"] == \"svc.slow\" for t in json.load(sys.stdin)))')\" = False"

# Type=notify: a start whose load takes seconds (every DMA mapping of the
# table is held 1.5 s), as systemd sees it.
printf 'svc.slow %s %s -\n' "$F1" "$PREFIX" >"$CONF"
NSOCK=$SCRATCH/notify.sock
NLOG=$SCRATCH/notify.log
notify_listen "$NSOCK" "$NLOG" || bail "no notification socket"
echo 1500 >$P/fault_map_delay_ms
NOTIFY_SOCKET=$NSOCK unit ExecStart
rc=$?
echo 0 >$P/fault_map_delay_ms
notify_end "$NSOCK"
heard=$(tr '\n' ' ' <"$NLOG")
check "notify: start exit 0, the table ready ($OUT)" \
	test $rc -eq 0 -a "$(table_state svc.slow)" = ready
check "notify: the load's progress is the unit's status ($heard)" \
	grep -q '^STATUS=loading svc.slow: ' "$NLOG"
check "notify: the running load extends the start timeout" \
	grep -qx 'EXTEND_TIMEOUT_USEC=90000000' "$NLOG"
check "notify: READY=1 once it serves, the last message but for the barrier" \
	test "$(grep -v -e '^--$' -e '^BARRIER=1$' "$NLOG" | tail -n 2 | tr '\n' ' ')" = \
	"READY=1 STATUS=1 tables serving (1 loaded now, 0 unchanged) "
"$ENGRAMCTL" unload svc.slow >/dev/null 2>&1

printf 'svc.one %s %s %s\nsvc.two %s t.b -\nsvc.gone %s %s -\n' \
	"$F1" "$PREFIX" "$SHA1" "$F2" "$F1" "$PREFIX" >"$CONF"
unit ExecStop
check "stop: exit 0, each listed table unloaded or not loaded ($OUT)" test $? -eq 0 -a "$OUT" = \
	"$(printf 'svc.one: unloaded\nsvc.two: unloaded\nsvc.gone: not loaded')"
check "no table is left" test "$("$ENGRAMCTL" -j list | jget 'len(d)')" = 0
done_testing
