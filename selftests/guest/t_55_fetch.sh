#!/bin/bash
# SPDX-License-Identifier: GPL-2.0
# The data path in one guest (rxe loopback to the guest's own address): a
# table of more than 512 MiB, a million rows fetched in Engram-shaped
# batches and compared with the file read independently; refusals that
# leave the connection usable; four processes at once; killed fetchers,
# device removal under load and rmmod with live connections.  On 6.1 over
# rxe; make check runs it on 6.12 over siw (SIW_KVER), so both kernels and
# both providers see it without a third run.
# timeout: 1500
# kernels: 6.1
. "$(dirname "$0")/lib.sh"

IP=${ENGRAM_IP:-192.0.2.1}
CHECK=$TOP/selftests/guest/fetch_check
F=$SCRATCH/fetch.safetensors
ROWS=2050000	# 541 MB of rows

make_table "$F" $ROWS --seed 21 --pad-before 11 --pad-after 5 || bail "mktable"
module_unload || bail "rmmod"
module_load "listen=rdma://$IP:18515" "remote=rdma://$IP:18515@$IP" ||
	bail "insmod with listen= and remote="
check "/dev/engram_rdma exists" test -c /dev/engram_rdma
"$ENGRAMCTL" load "$F" --tensor $PREFIX --name fetch >/dev/null 2>&1
check "the table loads" test "$(table_state fetch)" = ready
WOFF=$(table_field fetch weight_offset)
SOFF=$(table_field fetch scale_offset)
FC=("$CHECK" --table fetch --file "$F" --weight-offset "$WOFF" --scale-offset "$SOFF"
	--rows-total $ROWS --timeout-ms 60000)
fc() { "${FC[@]}" "$@"; }

check "the link comes up and sees the table" wait_fetchable 30

run() { local out rc; out=$(fc "$@" 2>&1); rc=$?; echo "$out" | sed 's/^/# /'; return $rc; }
served_mark rdma
check "1,000,000 rows in batches of 288 and 49,152 are exact" \
	run --count 1000000 --batch 288,49152 --seed 1
served_check rdma 1000000
check "no row went over TCP" test "$(stat_global served_tcp_rows)" = 0
check "submit + poll + wait, 100,000 rows, exact" \
	run --count 100000 --batch 4096 --mode submit --seed 2
check "busy-poll, 50,000 rows, exact" run --count 50000 --batch 288 --busy-poll --seed 3
check "stride 512 with an offset, 60,000 rows, exact" \
	run --count 60000 --batch 20000 --stride 512 --offset 100 --seed 4
# Answered in the receive completion's softirq, up to rdma_softirq_rows
# rows a request: no work item.  A response that finds the send queue
# short after its first chain of WRITEs is finished by the work item,
# which rewrites its rows (the same bytes to the same place).
P=/sys/module/engram_rdma/parameters
work_req() { echo "$(stat_global host_work_items) $(stat_global host_requests)"; }
read -r w0 r0 <<<"$(work_req)"
check "4,096-row fetches answered in softirq, 81,920 rows, exact" \
	run --count 81920 --batch 4096 --seed 7
read -r w1 r1 <<<"$(work_req)"
check "they took no host work item ($((w1 - w0)) for $((r1 - r0)) requests)" \
	test $((w1 - w0)) -eq 0 -a $((r1 - r0)) -ge 20
echo 3 >$P/fault_server_softirq_short
check "3 responses cut short in softirq, finished by the work item: 8 fetches exact" \
	run --count 32768 --batch 4096 --seed 8
read -r w2 r2 <<<"$(work_req)"
check "the knob was taken 3 times, and the work item ran for them ($((w2 - w1)))" \
	test "$(cat $P/fault_server_softirq_short)" = 0 -a $((w2 - w1)) -ge 3
echo 0 >$P/rdma_softirq_rows
check "rdma_softirq_rows=0: every request in a work item, 2,880 rows exact" \
	run --count 2880 --batch 288 --seed 9
read -r w3 r3 <<<"$(work_req)"
check "a work item for each of the $((r3 - r2)) requests ($((w3 - w2)), heartbeats too)" \
	test $((w3 - w2)) -ge $((r3 - r2)) -a $((r3 - r2)) -ge 10
echo 4096 >$P/rdma_softirq_rows
check "destination as 5 ranges, 98,304 rows, exact" \
	run --count 98304 --batch 49152 --ranges 5 --seed 5
check "four processes at once, all exact" run --count 100000 --batch 288,4096 --procs 4 --seed 6

# Kept registrations (ENGRAM_REG_F_KEEP_KEYS, asked for through
# libengram's ENGRAM_RDMA_KEEP_KEYS): the connection registers each window
# of the buffer once; a fetch is then its SEND and the receive reposted
# for its RESPONSE, and nothing is invalidated; only the RESPONSE
# completes, with one SEND in 16 to free the send queue.  fetch_check's canary
# shows no byte outside the rows changes although whole windows are open.
run_kept() { local out rc; out=$(ENGRAM_RDMA_KEEP_KEYS=1 "${FC[@]}" "$@" 2>&1); rc=$?
	echo "$out" | sed 's/^/# /'; return $rc; }
kept_mark() {
	echo "$(stat_global kept_registrations) $(stat_global remote_invalidations)" \
		"$(stat_global client_wrs) $(stat_global fetches) $(stat_global client_cqes)"
}
read -r k0 i0 w0 f0 c0 <<<"$(kept_mark)"
dmesg_mark
check "kept keys: 214,148 rows in batches of 1, 288, 4,096 and 49,152, exact, canary intact" \
	run_kept --count 214148 --batch 1,288,4096,49152 --seed 15
check "kept keys: 3,000 fetches of 1 row, busy-polling, exact" \
	run_kept --count 3000 --batch 1 --busy-poll --seed 16
check "kept keys: stride 512 from offset 100 over 5 ranges, exact, gaps keep the canary" \
	run_kept --count 60000 --batch 20000 --stride 512 --offset 100 --ranges 5 --seed 17
read -r k1 i1 w1 f1 c1 <<<"$(kept_mark)"
kept=$((k1 - k0)) fetches=$((f1 - f0))
check "kept keys: $kept windows registered for $fetches fetches, no invalidation ($((i1 - i0)))" \
	test "$kept" -ge 3 -a "$kept" -le 120 -a $((i1 - i0)) -eq 0 -a "$fetches" -ge 3019
# Per fetch: the SEND and the receive reposted for its RESPONSE.  Heartbeat
# echoes repost receives too: a few in these seconds, not one a fetch as
# a REG_MR (or a LOCAL_INV) per fetch would be.
check "kept keys: 2 work requests a fetch besides the windows' ($((w1 - w0)) for $fetches fetches, $kept windows)" \
	test $((w1 - w0 - kept)) -ge $((2 * fetches)) -a \
	$((w1 - w0 - kept)) -lt $((2 * fetches + fetches / 20))
check "kept keys: about one completion a fetch ($((c1 - c0)) for $fetches fetches)" \
	test $((c1 - c0)) -ge "$fetches" -a $((c1 - c0)) -lt $((fetches + fetches / 8))
check "kept keys: no warning in the kernel log" \
	sh -c "! dmesg | tail -n +$((DMESG_MARK + 1)) | grep -q 'WARNING:\|BUG:'"

# A second client connection, over IPv6: two links fetching at once.
IP6=${ENGRAM_IP6:-2001:db8::1}
check "listen add on the IPv6 address" "$ENGRAMCTL" listen add "rdma://[$IP6]:18515"
id2=$("$ENGRAMCTL" link add "rdma://[$IP6]:18515@[$IP6]" 2>&1)
check "link add over IPv6 gives an id ($id2)" test "$id2" -ge 2
wait_link() {
	local i
	for i in $(seq 1 "$2"); do
		fc --link "$1" --count 1 >/dev/null 2>&1 && return 0
		sleep 1
	done
	return 1
}
check "the IPv6 link comes up" wait_link "$id2" 30
check "the server has two connections" test "$(stat_global connections)" -eq 2
fc --link 1 --count 100000 --batch 288,49152 --seed 13 >"$ENGRAM_TEST_TMP/l1" 2>&1 &
p1=$!
fc --link "$id2" --count 100000 --batch 288,49152 --seed 14 >"$ENGRAM_TEST_TMP/l2" 2>&1 &
p2=$!
wait $p1; r1=$?
wait $p2; r2=$?
sed 's/^/# link 1: /' "$ENGRAM_TEST_TMP/l1"; sed "s/^/# link $id2: /" "$ENGRAM_TEST_TMP/l2"
check "two links (IPv4 and IPv6 connections) fetch at once, both exact" test "$r1:$r2" = 0:0
check "link del of the second link" "$ENGRAMCTL" link del "$id2"
check "listen del of the IPv6 listener" "$ENGRAMCTL" listen del "rdma://[$IP6]:18515"
conns_are() {
	local i
	for i in $(seq 1 100); do
		[ "$(stat_global connections)" -eq "$1" ] && return 0
		sleep 0.1
	done
	return 1
}
check "the server is back to one connection" conns_are 1

check "a row past the end is refused with ERANGE, then a fetch works" \
	run --rows-list 0,5,$ROWS --expect-errno ERANGE --verify-after --count 2000
check "row 2^32-1 is refused with ERANGE" \
	run --rows-list 4294967295 --expect-errno ERANGE --verify-after --count 288
check "more rows than negotiated is refused with E2BIG" \
	run --count 70000 --batch 70000 --expect-errno E2BIG
check "a destination too small is refused with ENOSPC" \
	run --rows-list 1,2,3 --buf-bytes 600 --expect-errno ENOSPC
check "stride below a row is refused with EINVAL" \
	run --count 10 --batch 10 --stride 100 --expect-errno EINVAL
check "17 ranges are refused with E2BIG" \
	run --count 100 --batch 100 --ranges 17 --expect-errno E2BIG
check "fetches still work after the local refusals" run --count 4096 --batch 4096 --seed 12

# A wrong identity: reload the table, and a handle opened on link 1 names
# a dead generation; one opened on no link names the SHA-256, which every
# replica's catalog maps to its generation of the day, so it follows the
# reload (Documentation/ioctl.rst).
check "a stale generation is refused with ESTALE on a link's handle, a reopened table works, a handle on no link follows" \
	/usr/bin/python3 - "$TOP" "$F" "$WOFF" "$SOFF" <<'PY'
import os, subprocess, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tools", "python"))
import engram_rdma as er
top, path, woff, soff = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
ctl = os.path.join(top, "tools", "engramctl", "engramctl")
buf = bytearray(264 * 4)
with er.Engram() as e:
    t = e.open_table(name="fetch", link=1)
    g = e.open_table(name="fetch")
    e.register(buf)
    e.fetch(t, [0, 1, 2, 3], buf)
    e.fetch(g, [0, 1, 2, 3], buf)
    subprocess.run([ctl, "unload", "fetch"], check=True)
    subprocess.run([ctl, "load", path, "--tensor", "layers.1.engram.embed", "--name", "fetch"],
                   check=True, stdout=subprocess.DEVNULL)
    try:
        e.fetch(t, [0, 1, 2, 3], buf)
        print("# fetch on the stale handle succeeded"); sys.exit(1)
    except OSError as ex:
        print("# stale handle:", ex)
        if ex.errno not in (116,):  # ESTALE
            sys.exit(1)
    import time
    for _ in range(50):
        try:
            t2 = e.open_table(name="fetch", link=1); break
        except OSError:
            time.sleep(0.2)
    for h in (t2, g):
        buf[:] = bytes(len(buf))
        e.fetch(h, [7, 2049999], buf)
        with open(path, "rb") as f:
            for k, row in enumerate([7, 2049999]):
                f.seek(woff + row * 256); w = f.read(256)
                f.seek(soff + row * 8); s = f.read(8)
                if bytes(buf[k * 264:(k + 1) * 264]) != w + s:
                    print("# row", row, "differs"); sys.exit(1)
PY
check "the refusals are counted per link" sh -c \
	"'$ENGRAMCTL' -j stats | grep -q refused_row_out_of_range"

# What engines hand over: int64 indices (numpy's and torch's), torch tensors
# as destinations, several destination ranges, submit and wait.
check "Python: int64 numpy indices, a torch destination, fetch_ranges, submit/wait, kept keys: exact" \
	/usr/bin/python3 - "$TOP" "$F" "$WOFF" "$SOFF" <<'PY'
import os, sys
sys.path.insert(0, os.path.join(sys.argv[1], "tools", "python"))
import numpy as np
import engram_rdma as er
path, woff, soff = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
try:
    import torch
except ImportError:
    torch = None
def want(rows):
    with open(path, "rb") as f:
        out = []
        for r in rows:
            f.seek(woff + int(r) * 256); w = f.read(256)
            f.seek(soff + int(r) * 8); out.append(w + f.read(8))
    return b"".join(out)
def same(what, got, rows):
    if bytes(got) != want(rows):
        print("# %s: rows differ" % what); sys.exit(1)
    print("# %s: %d rows exact" % (what, len(rows)))
with er.Engram() as e:
    t = e.open_table(name="fetch")
    idx = np.random.default_rng(5).integers(0, t.rows, 4096)       # int64
    idx[0], idx[-1] = 0, t.rows - 1
    out = np.zeros((4096, er.ROW_BYTES), np.uint8)
    e.register(out)
    e.fetch(t, idx, out)
    same("int64 numpy indices", out, idx)
    e.fetch_ranges(t, idx[:300], [out[1000:1100], out[2000:2200]])
    same("fetch_ranges into two slices", np.concatenate([out[1000:1100], out[2000:2200]]),
         idx[:300])
    tk = e.submit(t, idx[::-1].copy(), out[:4096])
    r = e.wait(tk, timeout_ms=10000)
    same("submit/wait ticket %d" % r.ticket, out, idx[::-1])
    if torch is not None:
        dst = torch.zeros((512, er.ROW_BYTES), dtype=torch.uint8)
        e.register(dst)
        ti = torch.from_numpy(idx[:512].copy())                      # int64 tensor
        e.fetch(t, ti, dst)
        same("torch int64 indices into a torch tensor", dst.numpy(), idx[:512])
        e.fetch(t, ti[:100], dst[300:400])
        same("into a slice of it", dst[300:400].numpy(), idx[:100])
        e.unregister(dst)
    else:
        print("# torch not installed: its cases not run")
    kept = np.zeros((288, er.ROW_BYTES), np.uint8)
    e.register(kept, keep_keys=True)
    e.fetch(t, idx[:288], kept)
    e.fetch(t, idx[288:576], kept)
    same("keep_keys=True, the second fetch into the same window", kept, idx[288:576])
PY
# The same counters in Prometheus' text format, read by prometheus_client.
check "stats --prometheus parses, and agrees with -j (served requests and rows, fetches, histogram count and sum; the table's state, generation, digest, rows)" \
	/usr/bin/python3 - "$ENGRAMCTL" <<'PY'
import json, subprocess, sys
from prometheus_client.parser import text_string_to_metric_families
ctl = sys.argv[1]
text = subprocess.run([ctl, "stats", "--prometheus"], check=True, capture_output=True,
                      text=True).stdout
j = json.loads(subprocess.run([ctl, "-j", "stats"], check=True, capture_output=True,
                              text=True).stdout)
fams = {f.name: f for f in text_string_to_metric_families(text)}
def val(fam, name, **labels):
    for s in fams[fam].samples:
        if s.name == name and s.labels == labels:
            return s.value
    raise KeyError((name, labels))
t = next(t for t in j["tables"] if t["name"] == "fetch")
l = next(l for l in j["links"] if l.get("fetches"))
want = [
    (val("engram_rdma_table_served_requests", "engram_rdma_table_served_requests_total",
         table="fetch"), t["lookups"]),
    (val("engram_rdma_table_served_rows", "engram_rdma_table_served_rows_total",
         table="fetch"), t["rows"]),
    (val("engram_rdma_link_fetches", "engram_rdma_link_fetches_total", link=str(l["id"])),
     l["fetches"]),
    (val("engram_rdma_link_latency_seconds", "engram_rdma_link_latency_seconds_count",
         link=str(l["id"])), l["latency"]["count"]),
    (val("engram_rdma_link_latency_seconds", "engram_rdma_link_latency_seconds_sum",
         link=str(l["id"])) * 1e9, l["latency"]["sum_ns"]),
    (val("engram_rdma_link_up", "engram_rdma_link_up", link=str(l["id"])), 1),
    (val("engram_rdma_table_state", "engram_rdma_table_state", table="fetch",
         state="ready"), 1),
]
tj = json.loads(subprocess.run([ctl, "-j", "table", "show", "fetch"], check=True,
                               capture_output=True, text=True).stdout)[0]
info = [s.labels for s in fams["engram_rdma_table_info"].samples
        if s.labels["table"] == "fetch"]
# The generation is a label: a 64-bit number a float64 sample would round.
want += [(len(info), 1), (info[0]["generation"] == str(tj["generation"]), 1),
         (info[0]["sha256"] == tj["sha256"], 1), (int(info[0]["rows"]), tj["rows"])]
print("# lookups %d, fetches %d, fetch time %.3f s in all" % (t["lookups"], l["fetches"],
                                                             l["latency"]["sum_ns"] / 1e9))
bad = [(a, b) for a, b in want if abs(a - b) > max(1, abs(b) * 1e-9)]
# Counters moved between the two reads only if something fetched: nothing does here.
sys.exit(1 if bad or not l["latency"]["sum_ns"] or not t["lookups"] else 0)
PY
check "the Python example runs and its rows are exact" \
	/usr/bin/python3 "$TOP/tools/python/example.py" --table fetch --file "$F" \
	--weight-offset "$WOFF" --scale-offset "$SOFF" --count 2000

# Poll queues (link_poll_queues): a fetch whose caller busy-polls goes on a
# queue whose CQ raises no interrupt, and its caller reaps it; no other
# fetch goes there.  Counted: the poll queue's fetches, and the client's
# completions reaped in softirq (heartbeat echoes on queue 0 among them).
# A link of its own, over the IPv6 listener: link 1 keeps its one queue.
PQ=/sys/module/engram_rdma/parameters/link_poll_queues
echo 1 >$PQ
"$ENGRAMCTL" listen add "rdma://[$IP6]:18515" >/dev/null
PL=$("$ENGRAMCTL" link add "rdma://[$IP6]:18515@[$IP6]")
pl_up() { test "$(link_field "$PL" state)" = up; }
check "a link with link_poll_queues=1 comes up" wait_for 60 pl_up
check "... with 2 queues, one a poll queue" test "$(link_field "$PL" queues)" = 2
qf() { "$ENGRAMCTL" -j link show "$PL" | jget "(d[0].get('queue_fetches', []) + [0, 0])[$1]"; }
cst() { stat_global "$1"; }
q0=$(qf 0) q1=$(qf 1) f0=$(link_stat "$PL" fetches) c0=$(cst client_cqes) s0=$(cst client_softirq_cqes)
check "busy-polling on the poll queue: 20,000 rows in batches of 1, 288 and 4,096, exact" \
	run --link "$PL" --count 20000 --batch 1,288,4096 --busy-poll --seed 30
check "... and 3,000 fetches of 1 row, exact" \
	run --link "$PL" --count 3000 --batch 1 --busy-poll --seed 35
nf=$(($(link_stat "$PL" fetches) - f0)) nq1=$(($(qf 1) - q1)) nc=$(($(cst client_cqes) - c0))
ns=$(($(cst client_softirq_cqes) - s0))
diag "busy-polling: $nf fetches, $nq1 on the poll queue, $(($(qf 0) - q0)) on queue 0; $nc completions, $ns of them in softirq"
check "every one of its $nf fetches went on the poll queue" test "$nf" -gt 0 -a "$nq1" = "$nf"
check "its completions were reaped by the caller: $ns of $nc in softirq (under 1 in 20)" \
	test "$nc" -ge "$nf" -a $((ns * 20)) -lt "$nc"
# Link 0 (the table opened on no link): the parts of a busy-polling fetch
# inherit its polling, so this link puts them on its poll queue and the
# caller reaps them (nothing else would: a part left there unreaped would
# time out); link 1, which has none, takes the others the ordinary way.
q1=$(qf 1) f0=$(link_stat "$PL" fetches)
check "busy-polling on link 0: 20,000 rows in batches of 1, 288 and 4,096, exact" \
	run --link 0 --count 20000 --batch 1,288,4096 --busy-poll --seed 37
nf=$(($(link_stat "$PL" fetches) - f0)) nq1=$(($(qf 1) - q1))
check "... the $nf parts this link took all went on its poll queue ($nq1)" \
	test "$nf" -gt 0 -a "$nq1" = "$nf"
q1=$(qf 1) f0=$(link_stat "$PL" fetches) c0=$(cst client_cqes) s0=$(cst client_softirq_cqes)
sleeping() {
	run --link "$PL" --count 20000 --batch 1,288,4096 --seed 31 &&
		run --link "$PL" --count 1000 --batch 1 --seed 36
}
check "sleeping on the same link: 20,000 rows, and 1,000 fetches of 1 row, exact" sleeping
nf=$(($(link_stat "$PL" fetches) - f0)) ns=$(($(cst client_softirq_cqes) - s0))
check "... none on the poll queue ($(($(qf 1) - q1))), its completions in softirq ($ns for $nf fetches)" \
	test "$(qf 1)" = "$q1" -a "$ns" -ge "$nf"
check "two busy-polling processes share the poll queue: exact" \
	run --link "$PL" --count 20000 --batch 288,4096 --busy-poll --procs 2 --seed 32
# A poller that dies mid-fetch: its fd's close reaps the queue (reap_work).
# Fetches of 4,096 rows, well within the 2 s a closing fd waits for one
# before it breaks the link (ENGRAM_LINK_CLOSE_WAIT_MS).
"${FC[@]}" --link "$PL" --count 5000000 --batch 4096 --busy-poll --seed 33 >/dev/null 2>&1 &
pid=$!
sleep 3
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
check "after a busy-polling fetcher is killed, the link stays up and its fetches are exact" \
	run --link "$PL" --count 5000 --batch 288 --busy-poll --seed 34
check "... without a reconnect ($(link_field "$PL" reconnects))" test "$(link_field "$PL" reconnects)" = 0
"$ENGRAMCTL" link del "$PL" >/dev/null
"$ENGRAMCTL" listen del "rdma://[$IP6]:18515" >/dev/null
echo 0 >$PQ

# Lifetimes.
"${FC[@]}" --count 5000000 --batch 49152 --seed 7 >/dev/null 2>&1 &
pid=$!
sleep 3
kill -9 $pid 2>/dev/null
wait $pid 2>/dev/null
check "after a fetching process is killed, fetches still work" run --count 5000 --batch 288 --seed 8

# The software device: rxe0, or siw0 when the guest runs over Soft-iWARP
# (ENGRAM_VM_PROVIDER=siw, make check's siw suite).
PROV=${ENGRAM_PROVIDER:-rxe}
DEV=${PROV}0
"${FC[@]}" --count 5000000 --batch 49152 --seed 9 >/dev/null 2>&1 &
pid=$!
sleep 3
rdma link del $DEV
check "the fetcher stops with an error when the device goes" \
	sh -c "timeout 30 tail --pid=$pid -f /dev/null"
wait $pid
rc=$?
check "... and reports failure (exit $rc)" test $rc -ne 0
rdma link add $DEV type $PROV netdev er0
check "after rdma link del/add the server listens again and the link reconnects" \
	wait_fetchable 60
check "and fetches are exact again" run --count 20000 --batch 4096 --seed 10

# Jumbo frames, as RoCE is deployed: 4096-byte packets, where the server
# cuts full WRITEs back to whole packets (kmod/serve_rdma.c, engram_wb_cut()).
set_mtu() {
	rdma link del $DEV && ip link set er0 mtu "$1" && ip link set er1 mtu "$1" &&
		rdma link add $DEV type $PROV netdev er0
}
check "$DEV re-created on er0 at 9000 bytes MTU" set_mtu 9000
check "... whose active MTU is 4096" sh -c "ibv_devinfo -d $DEV | grep -q 'active_mtu:.*4096'"
check "the link reconnects at 4096 MTU" wait_fetchable 60
check "at 4096 MTU, 200,000 rows in batches of 1, 288 and 49,152 are exact" \
	run --count 200000 --batch 1,288,49152 --seed 13
check "at 4096 MTU, stride 512 with an offset, exact" \
	run --count 40000 --batch 20000 --stride 512 --offset 100 --seed 14
check "at 4096 MTU, destination as 5 ranges, exact" \
	run --count 98304 --batch 49152 --ranges 5 --seed 15
check "$DEV re-created at 1500 bytes MTU" set_mtu 1500
check "the link reconnects at 1024 MTU" wait_fetchable 60

"${FC[@]}" --count 5000000 --batch 4096 --seed 11 >/dev/null 2>&1 &
pid=$!
sleep 2
check "unload of a table under load completes" "$ENGRAMCTL" unload fetch
check "the fetcher ends" sh -c "timeout 30 tail --pid=$pid -f /dev/null"
wait $pid
check "rmmod with live connections succeeds" module_unload
check "the module loads again" module_load
done_testing
