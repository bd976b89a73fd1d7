#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The guest of selftests/vm/run-systemd.sh: Debian's systemd is PID 1, the
# engramctl and libengram0 packages are installed (selftests/vm/
# systemd-root.sh), and this host does what an installed host does at boot:
# - systemd-modules-load loads engram_rdma from the modules-load.d entry
#   the package ships disabled (enabled here), with the package's
#   modprobe.d file's options (listen= on rxe0, and remote= to itself, a
#   GPU node's link; fault_map_delay_ms makes each table's load take
#   seconds, as a slow IOMMU would);
# - engram-rdma-tables.service, enabled by the package, loads the tables
#   tables.conf lists: its status line says what it loads while it loads
#   (a watcher unit started before it records it), and the journal has its
#   lines; the link comes up and a fetch of a table is exact;
# - systemctl reload after an edit of tables.conf loads the new table and
#   leaves the others (their generations) alone;
# - systemctl stop unloads them.
#   systemd_boot.sh --prepare: in the root before it boots (chrooted):
#	the tables, tables.conf, the module's options, modules-load.d.
. "$(dirname "$0")/lib.sh"

ENGRAMCTL=/usr/sbin/engramctl
D=$SCRATCH
CONF=/etc/engram-rdma/tables.conf
UNIT=engram-rdma-tables.service
ROWS=20000
IP=${ENGRAM_IP:-192.0.2.1}

if [ "${1:-}" = --prepare ]; then
	make_table "$D/a.safetensors" $ROWS --seed 871 || exit 1
	make_table "$D/b.safetensors" $ROWS --seed 872 --prefix t.a --prefix t.b || exit 1
	make_table "$D/c.safetensors" 5000 --seed 873 || exit 1
	printf 'tab.a %s %s %s\ntab.b %s t.b -\n' "$D/a.safetensors" "$PREFIX" \
		"$(sha256sum "$D/a.safetensors" | cut -d' ' -f1)" "$D/b.safetensors" >"$CONF" || exit 1
	# As an administrator would: the package's files, edited.
	grep -qx '#engram_rdma' /etc/modules-load.d/engram_rdma.conf || exit 1
	sed -i 's/^#engram_rdma$/engram_rdma/' /etc/modules-load.d/engram_rdma.conf
	echo "options engram_rdma listen=rdma://$IP:18515 remote=rdma://$IP:18515@$IP fault_map_delay_ms=1500" \
		>>/etc/modprobe.d/engram_rdma.conf
	exit 0
fi

jctl() { journalctl -b --no-pager -o cat "$@" 2>/dev/null; }
check "systemd is PID 1 ($(cat /proc/1/comm))" test "$(cat /proc/1/comm)" = systemd
check "the package enabled $UNIT ($(cat /run/engram-enabled-by-package 2>/dev/null))" \
	grep -qx enabled /run/engram-enabled-by-package
ml=$(jctl -u systemd-modules-load.service)
echo "$ml" | tail -n 4 | sed 's/^/# modules-load: /'
# Its "Inserted module" line, or, when the journal kept none of its lines
# (CI's boot, where it ran while journald was starting), the module's own
# "loaded" line in the kernel log within the unit's run (monotonic clock,
# 1 s either side): nothing else loads the module that early.
t_mod=$(dmesg | sed -n 's/^\[ *\([0-9.]*\)\] engram_rdma: version .* loaded$/\1/p' | head -n 1)
ml_times=$(systemctl show -p InactiveExitTimestampMonotonic -p ActiveEnterTimestampMonotonic \
	systemd-modules-load.service)
t_in=$(sed -n 's/^InactiveExitTimestampMonotonic=//p' <<<"$ml_times")
t_out=$(sed -n 's/^ActiveEnterTimestampMonotonic=//p' <<<"$ml_times")
diag "engram_rdma loaded at ${t_mod:-?} s; systemd-modules-load ran from $((${t_in:-0} / 1000)) to $((${t_out:-0} / 1000)) ms"
by_modules_load() {
	grep -q "Inserted module 'engram_rdma'" <<<"$ml" && return 0
	[ -n "$t_mod" ] && [ -n "$t_in" ] && [ -n "$t_out" ] && [ "$t_out" -gt 0 ] &&
		awk -v m="$t_mod" -v a="$t_in" -v b="$t_out" \
			'BEGIN { exit !(m >= a / 1e6 - 1 && m <= b / 1e6 + 1) }'
}
check "systemd-modules-load loaded engram_rdma at boot (modules-load.d)" by_modules_load
check "with the options of modprobe.d (fault_map_delay_ms $(cat /sys/module/engram_rdma/parameters/fault_map_delay_ms 2>/dev/null))" \
	test "$(cat /sys/module/engram_rdma/parameters/fault_map_delay_ms 2>/dev/null)" = 1500
# This unit runs after the tables' has started (After=): it is active now.
state=$(systemctl show -p ActiveState --value $UNIT)
check "$UNIT is active after boot ($state)" test "$state" = active
check "the tables it lists loaded at boot" \
	test "$(table_state tab.a) $(table_state tab.b)" = "ready ready"
diag "watcher: $(grep -c . /run/engram-watch.log 2>/dev/null) lines, e.g. $(grep -m1 'StatusText=loading' /run/engram-watch.log)"
loading_seen() {
	grep 'ActiveState=activating' /run/engram-watch.log | grep -Eq 'StatusText=loading tab\.[ab]: '
}
check "its status line said what it loaded while it started" loading_seen
st=$(systemctl show -p StatusText --value $UNIT)
check "its status line once started: '$st'" grep -q '^2 tables serving' <<<"$st"
j=$(jctl -u $UNIT)
echo "$j" | tail -n 8 | sed 's/^/# journal: /'
both_lines() { grep -q "Started $UNIT" <<<"$j" && grep -q 'tab.a: loaded' <<<"$j"; }
check "the journal has the start and engramctl's lines" both_lines

# The module's own link (remote=) to its listener, as a GPU node has it.
up() { test "$(link_field 1 state 2>/dev/null)" = up; }
check "the link of remote= comes up" wait_for 120 up
read -r WOFF SOFF < <(tensor_offsets "$D/a.safetensors")
check "a fetch of tab.a through it is exact" \
	"$TOP/selftests/guest/fetch_check" --table tab.a --file "$D/a.safetensors" \
	--weight-offset "$WOFF" --scale-offset "$SOFF" --rows-total $ROWS --count 2880 \
	--batch 288 --timeout-ms 20000 --seed 1

ga=$(table_field tab.a generation) gb=$(table_field tab.b generation)
printf 'tab.a %s %s -\ntab.b %s t.b -\ntab.c %s %s -\n' "$D/a.safetensors" "$PREFIX" \
	"$D/b.safetensors" "$D/c.safetensors" "$PREFIX" >"$CONF"
check "systemctl reload after an edit of tables.conf" timeout 300 systemctl reload $UNIT
check "the new table loaded, the others kept their generations" \
	test "$(table_state tab.c) $(table_field tab.a generation) $(table_field tab.b generation)" = \
	"ready $ga $gb"
check "systemctl stop" timeout 300 systemctl stop $UNIT
check "no table is left" test "$("$ENGRAMCTL" -j list | jget 'len(d)')" = 0
check "the journal has the stop's lines" grep -q 'tab.c: unloaded' <<<"$(jctl -u $UNIT)"
check "no warning, oops or other splat in the kernel log" kmsg_clean
done_testing
