#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# Coverage-guided fuzzing of the module's kernel surfaces with kfuzz (KCOV,
# as syzkaller uses it): the generic netlink family, the /dev/engram_rdma
# ioctls as call sequences, the wire protocol over TCP from a raw socket,
# and over RDMA from a librdmacm/verbs client (mutated REQ private data,
# then mutated frames as SENDs).  Each surface runs ENGRAM_FUZZ_INPUTS inputs (10,000 in make
# check, a million in make fuzz) after replaying the kept regression cases
# (selftests/guest/kfuzz-cases/SURFACE-*.kfz); any KASAN, lockdep, UBSAN,
# BUG or WARNING report is a finding and fails it.  After each surface the
# module must still serve exact rows; at the end it must unload with
# whatever the fuzzers left, and the runner's kmemleak scan must be clean.
# Each surface prints its inputs, corpus, edges and the module lines its
# PCs map to (addr2line on the module's text sections).
# timeout: 3000
# kernels: debug
# needs: the debug kernel (fault injection, KCOV)
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
KFUZZ=$TOP/selftests/guest/kfuzz
CASES=$TOP/selftests/guest/kfuzz-cases
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/kfuzz.safetensors
FN=$SCRATCH/kfuzz-nl.safetensors	# what the netlink fuzzer may load
ROWS=20000
INPUTS=${ENGRAM_FUZZ_INPUTS:-10000}
SURFACES=${ENGRAM_FUZZ_SURFACES:-netlink ioctl tcp rdma}
SEED=${ENGRAM_FUZZ_SEED:-$((RANDOM * 32768 + RANDOM))}
# The fuzzer stops at INPUTS or after SECS, whichever comes first.
SECS=${ENGRAM_FUZZ_SECONDS:-$(slow 600)}

if [ ! -e /sys/kernel/debug/kcov ]; then
	ok "# SKIP this kernel has no KCOV"
	done_testing
fi
test -x "$KFUZZ" || bail "$KFUZZ is not built (make -C selftests/guest)"
command -v addr2line >/dev/null || bail "addr2line (binutils) is missing"
diag "seed $SEED, $INPUTS inputs or $SECS s per surface (ENGRAM_FUZZ_SEED reproduces the run)"

make_table "$F" $ROWS --seed 691 || bail "mktable"
make_table "$FN" 1000 --seed 692 || bail "mktable (netlink)"
module_unload || bail "rmmod"
module_load || bail "insmod"
"$ENGRAMCTL" listen add "rdma://$IP:18515" || bail "listen add rdma"
"$ENGRAMCTL" listen add "tcp://$IP:18520" || bail "listen add tcp"
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name kf --no-progress >/dev/null 2>&1
check "the table loads" test "$(table_state kf)" = ready
WOFF=$(table_field kf weight_offset)
SOFF=$(table_field kf scale_offset)
FC=("$CHECK" --table kf --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS)
fetchable() { "${FC[@]}" --count 600 --batch 200 >/dev/null 2>&1; }

# lines PCFILE: the module's source lines that KCOV's PCs fall on.
lines() {
	python3 - "$1" "$MODULE" <<'PY'
import os, subprocess, sys
secs = {}
d = "/sys/module/engram_rdma/sections"
for s in os.listdir(d):
    if s.startswith(".text") or s in (".noinstr.text", ".exit.text"):
        secs[s] = int(open(os.path.join(d, s)).read(), 16)
order = sorted(secs.items(), key=lambda kv: kv[1])
by = {}
for l in open(sys.argv[1]):
    pc = int(l, 16)
    best = None
    for s, a in order:
        if a <= pc:
            best = (s, a)
    if best:
        by.setdefault(best[0], []).append(pc - best[1])
seen = set()
for s, offs in by.items():
    out = subprocess.run(["addr2line", "-e", sys.argv[2], "-j", s] +
                         ["0x%x" % o for o in offs], capture_output=True, text=True).stdout
    for l in out.split():
        f, _, n = l.rpartition(":")
        n = n.split()[0] if n else ""
        if "/kmod/" in f and f.endswith(".c") and n.isdigit():
            seen.add((os.path.basename(f), int(n)))
print(len(seen))
PY
}

# cleanup_netlink: what the netlink fuzzer created (links, allow entries,
# tables, listeners) goes, so that the module's own state is known again.
cleanup_netlink() {
	local x
	for x in $("$ENGRAMCTL" -j link show 2>/dev/null | jget "' '.join(str(l['id']) for l in d)"); do
		"$ENGRAMCTL" link del "$x" >/dev/null 2>&1
	done
	for x in $("$ENGRAMCTL" -j listen allow show 2>/dev/null | jget "' '.join(e['prefix'] for e in d)"); do
		"$ENGRAMCTL" listen allow del "$x" >/dev/null 2>&1
	done
	# A list, once set, never opens by deletion: open it explicitly.
	if "$ENGRAMCTL" listen show 2>/dev/null | grep -q "^allow: none"; then
		"$ENGRAMCTL" listen allow add 0.0.0.0/0 >/dev/null
		"$ENGRAMCTL" listen allow add ::/0 >/dev/null
	fi
	for x in $("$ENGRAMCTL" -j list 2>/dev/null | jget "' '.join(t['name'] for t in d if t['name'] != 'kf')"); do
		"$ENGRAMCTL" unload "$x" >/dev/null 2>&1
	done
	for x in $("$ENGRAMCTL" -j listen show 2>/dev/null | jget "' '.join(l['url'] for l in d)"); do
		case $x in
		"rdma://$IP:18515" | "tcp://$IP:18520") ;;
		*) "$ENGRAMCTL" listen del "$x" >/dev/null 2>&1 ;;
		esac
	done
}

fuzz() {
	local s=$1 out rc pcf=$ENGRAM_TEST_TMP/kfuzz-$1.pcs replay=() c t0 t1 n inputs=$INPUTS
	shift
	# ENGRAM_FUZZ_INPUTS_NETLINK, _IOCTL, _TCP, _RDMA: a surface's own
	# count (a TCP or RDMA input is a connection: 60 to 450 ms here).
	c=ENGRAM_FUZZ_INPUTS_${s^^}
	inputs=${!c:-$INPUTS}
	for c in "$CASES/$s"-*.kfz; do
		[ -e "$c" ] && replay+=(--replay "$c")
	done
	dmesg_mark
	t0=$SECONDS
	# Bounded: the fuzzer's own clock stops it, timeout(1) backs it up.
	timeout $((SECS + $(slow 120))) "$KFUZZ" "$s" --inputs "$inputs" \
		--seconds "$SECS" --seed "$SEED" --slow "$SLOW" --pcs "$pcf" \
		--save "$ENGRAM_TEST_TMP/kfuzz-findings" "${replay[@]}" "$@" \
		${ENGRAM_FUZZ_ARGS:-} >"$ENGRAM_TEST_TMP/kfuzz-$s.out" 2>&1
	rc=$?
	# With ENGRAM_FUZZ_ARGS=-v: the fuzzer's last progress lines.
	grep "^kfuzz $s.*inputs[:,]" "$ENGRAM_TEST_TMP/kfuzz-$s.out" | tail -4 | sed 's/^/# /'
	out=$(grep "^kfuzz $s: inputs " "$ENGRAM_TEST_TMP/kfuzz-$s.out")
	if [ $rc -eq 0 ] && [ -n "$out" ]; then
		t1=$SECONDS
		n=$(lines "$pcf")
		ok "kfuzz $s: no finding (${out#kfuzz $s: } lines $n, ${#replay[@]} replay args; $((t1 - t0)) s, lines in $((SECONDS - t1)) s)"
	else
		nok "kfuzz $s: exit $rc after $((SECONDS - t0)) s"
		sed 's/^/# /' "$ENGRAM_TEST_TMP/kfuzz-$s.out" | tail -20
		dmesg_since | grep -E "BUG|WARNING|KASAN|UBSAN|locking|Call Trace" -A3 | head -40 |
			sed 's/^/# /'
	fi
	check "kfuzz $s: the kernel log shows no report" \
		sh -c "! dmesg | tail -n +$((DMESG_MARK + 1)) | grep -qE 'BUG:|WARNING:|KASAN|UBSAN|circular locking|ODEBUG'"
}

for s in $SURFACES; do
	case $s in
	netlink)
		fuzz netlink --path "$FN" --addr "$IP"
		cleanup_netlink
		;;
	ioctl)
		"$ENGRAMCTL" link show 2>/dev/null | grep -q . ||
			"$ENGRAMCTL" link add "rdma://$IP:18515@$IP" >/dev/null
		wait_for "$(slow 30)" fetchable || nok "the link fetches before the ioctl fuzzer"
		fuzz ioctl --table kf
		;;
	tcp)
		fuzz tcp --table kf --addr "$IP" --port 18520
		;;
	rdma)
		fuzz rdma --table kf --addr "$IP" --port 18515
		;;
	*)
		bail "unknown surface $s"
		;;
	esac
	"$ENGRAMCTL" link show 2>/dev/null | grep -q . ||
		"$ENGRAMCTL" link add "rdma://$IP:18515@$IP" >/dev/null
	if wait_for "$(slow 30)" fetchable; then
		ok "after $s: a fetch is exact"
	else
		nok "after $s: a fetch is exact"
		{
			"${FC[@]}" --count 600 --batch 200
			"$ENGRAMCTL" list
			"$ENGRAMCTL" listen show
			"$ENGRAMCTL" listen allow show
			"$ENGRAMCTL" link show
		} 2>&1 | head -40 | sed 's/^/# /'
	fi
done

check "the module unloads with what the fuzzers left" module_unload
done_testing
