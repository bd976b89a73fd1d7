#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""Turn the "BENCH {json}" lines of selftests/bench/bench.sh into results.

    report.py --in LOG --json OUT.json [--png OUT.png] [--env KEY=VALUE]...
              [--check] [--replicas-only]

Writes one JSON file with every case, the environment and a top-level
"ratios" object; prints a markdown table on stdout; draws the plot with
gnuplot when --png is given.  --check (make check's smoke run): exit 1 unless
every expected case is there, ran all its iterations, and every fetched row
was exact.  Timings are never asserted.  --replicas-only: the log holds
only make bench's replicas case (selftests/bench/run.sh --replicas-only).

Every ratio is "this / that" of one measure, named in RATIO_DOC, so whether
higher or lower is better is stated next to it in the JSON.
"""

import argparse
import json
import math
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROW_BYTES = 264
SIZES = [1, 288, 4096, 16384, 49152]
PERF_ROWS = [1, 288, 4096, 49152]

RATIO_DOC = {
    "bw_49152_vs_ib_write_bw":
        "GB/s of 49,152-row RDMA fetches (one process, sleeping: bytes over the mean "
        "round trip) / "
        "ib_write_bw average at 12,976,128 B, median over rounds; higher is better, "
        "target >= 0.9",
    "rtt_288_vs_perftest":
        "p50 of a 288-row RDMA fetch (sleeping) / perftest's round trip for 76,032 B "
        "(2 x ib_write_lat t_typical), median over rounds; lower is better, target <= 0.8",
    "rtt_288_busy_vs_perftest":
        "as rtt_288_vs_perftest, busy-polling",
    "rtt_288_vs_send64_plus_write":
        "p50 of a 288-row RDMA fetch / (ib_send_lat t_typical at 64 B + ib_write_lat "
        "t_typical at 76,032 B): the same bytes each way as a fetch; lower is better",
    "load_vs_sha256sum":
        "speed of engramctl load (read, pin, SHA-256 in the kernel), cold cache / "
        "speed of sha256sum of the same file, cold cache; higher is better, target >= 0.9",
    "load_warm_vs_sha256sum": "as load_vs_sha256sum, both with the file cached",
    "verify_vs_sha256sum":
        "speed of engramctl verify (re-hash of the pinned pages) / sha256sum, file "
        "cached; higher is better",
    "tcp_vs_rdma_49152":
        "p50 of a 49,152-row fetch over TCP / over RDMA (sleeping); lower is better "
        "for TCP",
    "tcp_vs_rdma_288": "as tcp_vs_rdma_49152 at 288 rows",
    "link0_vs_rdma_288":
        "p50 of a 288-row fetch of the table opened on no link (link 0, the default; "
        "an RDMA and a TCP link serve it) / on the named RDMA link (sleeping): what "
        "the replica layer costs; lower is better, 1.0 is free",
    "link0_vs_rdma_1": "as link0_vs_rdma_288 at 1 row",
    "link0_vs_rdma_49152": "as link0_vs_rdma_288 at 49,152 rows",
    "link0_tput_vs_rdma_2p":
        "rows/s of 2 processes fetching 4,096 rows at a time on link 0 / on the named "
        "RDMA link; higher is better",
    "link0_tcp_share":
        "fetches the TCP link took / fetches both links took during the link-0 cases: "
        "0 with replica_prefer_rdma (RDMA first to a host both links reach)",
    "remote_vs_local_288":
        "p50 of a 288-row RDMA fetch / p50 of reading the same number of random rows "
        "with pread + O_DIRECT from the guest's disk; lower is better for remote",
    "remote_vs_local_49152": "as remote_vs_local_288 at 49,152 rows",
    # Medians over bench.sh's rounds (each round's ratio from cases measured
    # one right after the other); ratio_rounds in the JSON has every round.
    "rtt_1_vs_perftest":
        "p50 of a 1-row RDMA fetch (sleeping) / perftest's round trip at 264 B "
        "(2 x ib_write_lat t_typical), median over rounds; lower is better, target <= 2.0",
    "bw_49152_vs_ib_write_bw_4224":
        "GB/s of 49,152-row RDMA fetches / ib_write_bw at 4,224 B (the size of one "
        "gathered WRITE, 16 rows), median over rounds; higher is better, target >= 1.0",
    "tput_2p_vs_1p":
        "rows/s of 2 processes fetching 49,152 rows at a time / of 1 process, median "
        "over rounds; compare with ib_write_bw_q2_vs_q1",
    "ib_write_bw_q2_vs_q1":
        "ib_write_bw at 4,224 B over 2 QPs (-q 2) / over 1, median over rounds",
    "tput_scaling_vs_perftest":
        "tput_2p_vs_1p / ib_write_bw_q2_vs_q1, per round, median; target >= 1.0 (the "
        "fetches scale at least as perftest does from 1 to 2 queues)",
    "host_cpu_ns_per_row":
        "the host module's CPU time per row answered over RDMA over the whole run "
        "(served_rdma_cpu_ns / served_rdma_rows, tick-sampled; with the softirq work "
        "that ran on its CPU meanwhile, rxe's tasklets on 6.1); lower is better",
    "host_cpu_ns_per_row_tcp": "as host_cpu_ns_per_row, over TCP",
    "client_cpu_ns_per_row_49152":
        "CPU time of the fetching process inside engram_fetch() per row, 49,152-row "
        "RDMA fetches, sleeping (completions in other CPUs' softirqs not in it); lower "
        "is better",
    "client_cpu_ns_per_row_1": "as client_cpu_ns_per_row_49152, 1-row fetches",
    # make bench's replicas case (selftests/bench/replicas.sh), three guests.
    "replicas_vs_one_49152_p1":
        "rows/s of 1 process fetching 49,152 rows at a time from two host guests that "
        "serve the same table (opened on no link: each fetch split over both) / from one "
        "(opened on link 1), median over rounds; higher is better",
    "replicas_vs_one_49152_p2":
        "as replicas_vs_one_49152_p1, 2 processes (spread and split)",
    "replicas_vs_one_288_p2":
        "as replicas_vs_one_49152_p1, 2 processes fetching 288 rows at a time (spread "
        "over the two hosts, not split)",
}

# The round medians that replace the single-run figure of the same name.
ROUND_OVERRIDES = ("rtt_288_vs_perftest", "bw_49152_vs_ib_write_bw")
ROUND_RE = re.compile(r"^r(\d+)_(.+)$")
# replicas.sh's labels: repl_one|two_ROWS_pPROCS_rROUND.
REPL_RE = re.compile(r"^repl_(one|two)_(\d+)_p(\d+)_r(\d+)$")


def replicas(d):
    """{(rows, procs): {round: {"one": case, "two": case}}} of replicas.sh."""
    out = {}
    for label, c in d.items():
        m = REPL_RE.match(label)
        if m:
            key = (int(m.group(2)), int(m.group(3)))
            out.setdefault(key, {}).setdefault(int(m.group(4)), {})[m.group(1)] = c
    return dict(sorted(out.items(), key=lambda kv: (-kv[0][0], kv[0][1])))


def median_of(vals):
    vals = [v for v in vals if v is not None]
    return round(statistics.median(vals), 4) if vals else None


def replicas_ratios(d):
    """replicas_vs_one_ROWS_pP: two replicas' rows/s over one host's, per round, median."""
    r = {}
    for (rows, procs), rounds in replicas(d).items():
        per = [ratio(c.get("two", {}).get("rows_per_s"), c.get("one", {}).get("rows_per_s"))
               for c in rounds.values()]
        r[f"replicas_vs_one_{rows}_p{procs}"] = median_of(per)
    return r


def load_cases(path):
    cases = []
    with open(path, "r", errors="replace") as f:
        for line in f:
            line = line.strip()
            i = line.find("BENCH {")
            if i < 0:
                continue
            try:
                cases.append(json.loads(line[i + len("BENCH "):]))
            except json.JSONDecodeError as e:
                print(f"report.py: bad BENCH line ({e}): {line[:200]}", file=sys.stderr)
                cases.append({"case": "bad", "line": line[:200]})
    return cases


def by_label(cases):
    return {c["label"]: c for c in cases if "label" in c}


def rounds_of(d):
    """{round number: {base label: case}} for the rN_ cases of bench.sh's rounds."""
    out = {}
    for label, c in d.items():
        m = ROUND_RE.match(label)
        if m:
            out.setdefault(int(m.group(1)), {})[m.group(2)] = c
    return dict(sorted(out.items()))


def round_ratios(rd):
    """One round's ratios, from the cases of that round alone."""
    def q(a, b):
        return None if a is None or b is None or not b else a / b

    def rtt(rows):
        t = get(rd, f"ib_write_lat_{rows * ROW_BYTES}", "t_typical_us")
        return None if t is None else 2 * t
    r = {}
    r["rtt_1_vs_perftest"] = q(get(rd, "fetch_rdma_sleep_1", "p50_us"), rtt(1))
    r["rtt_288_vs_perftest"] = q(get(rd, "fetch_rdma_sleep_288", "p50_us"), rtt(288))
    fbw = bw(rd, "fetch_rdma_sleep_49152")
    r["bw_49152_vs_ib_write_bw_4224"] = q(fbw, get(rd, f"ib_write_bw_{16 * ROW_BYTES}",
                                                   "gbytes_per_s"))
    r["bw_49152_vs_ib_write_bw"] = q(fbw, get(rd, f"ib_write_bw_{49152 * ROW_BYTES}",
                                              "gbytes_per_s"))
    r["tput_2p_vs_1p"] = q(get(rd, "tput49152_rdma_2", "rows_per_s"),
                           get(rd, "tput49152_rdma_1", "rows_per_s"))
    r["ib_write_bw_q2_vs_q1"] = q(get(rd, f"ib_write_bw_{16 * ROW_BYTES}_q2", "gbytes_per_s"),
                                  get(rd, f"ib_write_bw_{16 * ROW_BYTES}", "gbytes_per_s"))
    r["tput_scaling_vs_perftest"] = q(r["tput_2p_vs_1p"], r["ib_write_bw_q2_vs_q1"])
    return r


def ratios_over_rounds(d):
    """({name: median}, {name: [each round's value]}) over bench.sh's rounds."""
    per = {}
    for _, rd in rounds_of(d).items():
        for k, v in round_ratios(rd).items():
            per.setdefault(k, []).append(None if v is None else round(v, 4))
    med = {}
    for k, vals in per.items():
        got = [v for v in vals if v is not None]
        med[k] = round(statistics.median(got), 4) if got else None
    return med, per


def ratio(a, b):
    if a is None or b is None or not b:
        return None
    return round(a / b, 4)


def get(d, label, key):
    c = d.get(label)
    if not c or c.get(key) is None:
        return None
    return float(c[key])


def bw(d, label):
    """GB/s of one caller's fetches: bytes over the mean round trip.

    engram_bench's own gbytes_per_s divides by wall time, which includes
    its row checks between fetches; the round trips alone are the transfer.
    """
    c = d.get(label)
    if not c or not c.get("mean_us"):
        return None
    return c["bytes"] / (c["mean_us"] * 1e-6) / 1e9


def perftest_rtt_us(d, rows):
    t = get(d, f"ib_write_lat_{rows * ROW_BYTES}", "t_typical_us")
    return None if t is None else 2 * t


def host_stats(cases):
    """The host module's counters at the end: the host guest's, or the one guest's."""
    for kind in ("stats_host", "stats"):
        c = next((c for c in cases if c.get("case") == kind), None)
        if c and isinstance(c.get("global"), dict):
            return c["global"]
    return {}


def cpu_ratios(d, g):
    r = {}
    for t, key in (("rdma", "host_cpu_ns_per_row"), ("tcp", "host_cpu_ns_per_row_tcp")):
        rows = g.get(f"served_{t}_rows")
        ns = g.get(f"served_{t}_cpu_ns")
        r[key] = round(ns / rows, 1) if rows and ns is not None else None
    for n in (49152, 1):
        c = d.get(f"fetch_rdma_sleep_{n}", {})
        cpu = c.get("client_cpu_s")
        rows = (c.get("fetches") or 0) * n
        r[f"client_cpu_ns_per_row_{n}"] = round(cpu * 1e9 / rows, 1) \
            if cpu is not None and rows else None
    return r


def ratios(d, cases=()):
    r = {}
    r["bw_49152_vs_ib_write_bw"] = ratio(bw(d, "fetch_rdma_sleep_49152"),
                                         get(d, f"ib_write_bw_{49152 * ROW_BYTES}",
                                             "gbytes_per_s"))
    rtt = perftest_rtt_us(d, 288)
    r["rtt_288_vs_perftest"] = ratio(get(d, "fetch_rdma_sleep_288", "p50_us"), rtt)
    r["rtt_288_busy_vs_perftest"] = ratio(get(d, "fetch_rdma_busy_288", "p50_us"), rtt)
    s64 = get(d, "ib_send_lat_64", "t_typical_us")
    w288 = get(d, f"ib_write_lat_{288 * ROW_BYTES}", "t_typical_us")
    r["rtt_288_vs_send64_plus_write"] = ratio(get(d, "fetch_rdma_sleep_288", "p50_us"),
                                              None if s64 is None or w288 is None
                                              else s64 + w288)

    def speed(label, key, ref_key="sha256sum_s"):
        c = d.get(label)
        if not c or not c.get(key) or not c.get(ref_key):
            return None
        return round(float(c[ref_key]) / float(c[key]), 4)

    r["load_vs_sha256sum"] = speed("load_cold", "load_s")
    r["load_warm_vs_sha256sum"] = speed("load_warm", "load_s")
    r["verify_vs_sha256sum"] = speed("load_warm", "verify_s")
    for n in (1, 288, 49152):
        r[f"link0_vs_rdma_{n}"] = ratio(get(d, f"fetch_link0_sleep_{n}", "p50_us"),
                                        get(d, f"fetch_rdma_sleep_{n}", "p50_us"))
    r["link0_tput_vs_rdma_2p"] = ratio(get(d, "tput_link0_2", "rows_per_s"),
                                       get(d, "tput_rdma_2", "rows_per_s"))
    l0 = next((c for c in cases if c.get("case") == "link0_links"), None)
    if l0 and l0.get("rdma_fetches", 0) + l0.get("tcp_fetches", 0) > 0:
        r["link0_tcp_share"] = round(l0["tcp_fetches"] /
                                     (l0["rdma_fetches"] + l0["tcp_fetches"]), 4)
    for n in (49152, 288):
        r[f"tcp_vs_rdma_{n}"] = ratio(get(d, f"fetch_tcp_sleep_{n}", "p50_us"),
                                      get(d, f"fetch_rdma_sleep_{n}", "p50_us"))
        r[f"remote_vs_local_{n}"] = ratio(get(d, f"fetch_rdma_sleep_{n}", "p50_us"),
                                          get(d, f"local_{n}", "p50_us"))
    r.update(cpu_ratios(d, host_stats(cases)))
    med, _ = ratios_over_rounds(d)
    for k, v in med.items():
        if k not in r or (k in ROUND_OVERRIDES and v is not None):
            r[k] = v
    r.update(replicas_ratios(d))
    return r


def round_labels(n):
    """The labels of round n (bench.sh's rounds())."""
    base = [f"ib_write_lat_{ROW_BYTES}", "fetch_rdma_sleep_1",
            f"ib_write_lat_{288 * ROW_BYTES}", "fetch_rdma_sleep_288",
            f"ib_write_bw_{16 * ROW_BYTES}", f"ib_write_bw_{16 * ROW_BYTES}_q2",
            f"ib_write_bw_{49152 * ROW_BYTES}", "fetch_rdma_sleep_49152",
            "tput49152_rdma_1", "tput49152_rdma_2"]
    return [f"r{n}_{b}" for b in base]


def expected_labels(full, rounds=0):
    labels = ["load_cold", "load_warm", "ib_send_lat_64"]
    for n in range(1, rounds + 1):
        labels += round_labels(n)
    labels += [f"ib_write_lat_{n * ROW_BYTES}" for n in PERF_ROWS]
    labels += [f"ib_write_bw_{n * ROW_BYTES}" for n in PERF_ROWS]
    for t in ("rdma", "tcp"):
        labels += [f"fetch_{t}_{m}_{n}" for m in ("sleep", "busy") for n in SIZES]
        labels += [f"tput_{t}_{p}" for p in (1, 2, 4)]
    labels += [f"fetch_link0_sleep_{n}" for n in SIZES]
    labels += [f"tput_link0_{p}" for p in (1, 2)]
    labels += [f"local_{n}" for n in (SIZES if full else (1, 288))]
    return labels


def check(cases, d, replicas_only=False):
    """Every case ran all its iterations, every row was exact."""
    problems = []
    kinds = [c.get("case") for c in cases]
    for k in () if replicas_only else ("env", "end"):
        if k not in kinds:
            problems.append(f"no '{k}' line: the run did not finish")
    problems += [f"unparsable line: {c['line']}" for c in cases if c.get("case") == "bad"]
    env = next((c for c in cases if c.get("case") == "env"), {})
    labels = [] if replicas_only else \
        expected_labels(not env.get("smoke"), int(env.get("rounds", 0)))
    labels += sorted(k for k in d if REPL_RE.match(k))
    if replicas_only:
        rep = replicas(d)
        for (rows, procs), rounds in rep.items():
            for n, sides in rounds.items():
                problems += [f"repl_{side}_{rows}_p{procs}_r{n}: missing"
                             for side in ("one", "two") if side not in sides]
        if not rep:
            problems.append("no case of the replicas run")
    for label in labels:
        c = d.get(label)
        if c is None:
            problems.append(f"{label}: missing")
            continue
        if c.get("error"):
            problems.append(f"{label}: {c['error']}")
        if c.get("kind") in ("fetch", "local"):
            want = c.get("iters", 0) * c.get("procs", 0)
            if not want or c.get("fetches") != want:
                problems.append(f"{label}: {c.get('fetches')} of {want} fetches succeeded"
                                f" (first error {c.get('first_error')})")
            if c.get("bad_rows") != 0 or c.get("errors") != 0:
                problems.append(f"{label}: bad_rows {c.get('bad_rows')} errors "
                                f"{c.get('errors')}")
            if not c.get("rows_checked"):
                problems.append(f"{label}: no row was checked")
            if c.get("fallbacks"):
                problems.append(f"{label}: {c['fallbacks']} fetches fell back")
        elif c.get("case") == "perftest":
            if c.get("iters") is None or float(c.get("iters", 0)) <= 0:
                problems.append(f"{label}: perftest reported no iterations")
        elif c.get("case") == "load":
            for k in ("sha256sum_s", "load_s", "verify_s"):
                if not c.get(k):
                    problems.append(f"{label}: no {k}")
    l0 = next((c for c in cases if c.get("case") == "link0_links"), None)
    if not replicas_only:
        if l0 is None:
            problems.append("no 'link0_links' line: the link-0 cases did not run")
        elif l0.get("prefer_rdma") == "Y" and l0.get("tcp_fetches") != 0:
            # A count, not a timing: with the preference no part goes to TCP.
            problems.append(f"link 0: the TCP link took {l0.get('tcp_fetches')} fetches"
                            " with replica_prefer_rdma=Y")
    return problems


# What a fetch costs (bench.sh's "cost" cases): per fetch, on each side.
COST_ROWS = [1, 288, 4096, 49152]
COST_LINKS = ("rdma", "kept", "link0")
COST_MODES = ("sleep", "busy")
COST_COLS = [
    ("client_allocs", "GPU allocs"), ("client_work_items", "GPU work items"),
    ("client_posts", "GPU posts"), ("client_wrs", "GPU WRs"), ("client_cqes", "GPU CQEs"),
    ("client_softirq_cqes", "GPU CQEs in softirq"),
    ("vol_switches", "fetcher switches"), ("client_link_locks", "GPU link-lock holds"),
    ("host_requests", "host requests"), ("host_work_items", "host work items"),
    ("host_posts", "host posts"), ("host_wrs", "host WRs"), ("host_cqes", "host CQEs"),
    ("irq_poll", "CQ events (both sides)"),
]
# What the verbs need for one fetch of one range: a side posts once (the
# REQUEST SEND, and the WRITEs with the RESPONSE SEND) and reaps one
# completion; no allocation and no work item on the way; a sleeping
# fetcher wakes once.  Receives are reposted too (the GPU node's eight
# to a post, the host's one each), and a 49,152-row answer is several WRs
# of WRITEs.
COST_FLOOR = {"client_allocs": 0, "client_work_items": 0, "client_posts": 1,
              "client_cqes": 1, "vol_switches": 1, "host_work_items": 0, "host_posts": 1,
              "host_cqes": 1, "host_requests": 1}


# The cost model: what each counted event would cost on a ConnectX-7 host
# and GPU node (µs), to turn the counts into a latency on paper.  Named
# assumptions, not measurements of this run.
COST_MODEL_US = {
    "wire_rtt": 2.0,          # a round trip on the wire, switch included
    "bytes_per_us": 25000.0,  # 200 Gb/s, the DGX Spark's ConnectX-7 port
    "post": 0.3,              # a doorbell and its WQEs, per post
    "cqe": 0.1,               # reaping one completion
    "irq": 1.5,               # an interrupt and the softirq that polls the CQ
    "switch": 3.0,            # a wake-up of a sleeping task, and its switch
    "work_item": 4.0,         # queue_work() to a worker that must wake, often on another CPU
    "alloc": 0.1,             # a slab allocation and its free
    "tcg_factor": 10.0,       # the fitted host time per request here over a native core's
    "host_row": 0.02,         # a native core finding a row's pages and adding its SGEs
}


def cost_model_us(p, rows, mode, fit=None):
    """One fetch's latency under COST_MODEL_US, from its counts @p.

    The host's time per request measured here includes rxe's own work
    (its packets are built when the WRITEs are posted), which a NIC does
    not cost the host's CPU: only the fitted intercept (@fit) is scaled
    to a native core, and each row costs host_row.
    """
    m = COST_MODEL_US
    if p.get("client_posts") is None:
        return None
    reqs = p.get("host_requests") or 0
    host_ns = reqs * fit["intercept_ns"] if fit else 0
    us = m["wire_rtt"] + rows * ROW_BYTES / m["bytes_per_us"] + rows * m["host_row"]
    us += (p.get("client_posts", 0) + p.get("host_posts", 0)) * m["post"]
    us += (p.get("client_cqes", 0) + p.get("host_cqes", 0)) * m["cqe"]
    us += (p.get("client_work_items", 0) + p.get("host_work_items", 0)) * m["work_item"]
    us += p.get("client_allocs", 0) * m["alloc"]
    # A sleeping fetcher is woken by an interrupt; the host always is.
    us += (2 if mode == "sleep" else 1) * m["irq"]
    us += (p.get("vol_switches") or 0) * m["switch"]
    us += host_ns / 1000 / m["tcg_factor"]
    return us


def cost_cases(cases):
    return {(c.get("link"), c.get("mode"), c.get("rows")): c
            for c in cases if c.get("case") == "cost"}


def cost_fit(cost, link="rdma", mode="sleep"):
    """Host time per request against rows, least squares: (intercept ns, ns per row)."""
    pts = []
    for rows in COST_ROWS:
        p = cost.get((link, mode, rows), {}).get("per_fetch", {})
        if p.get("host_requests") and p.get("host_request_ns"):
            pts.append((rows / p["host_requests"], p["host_request_ns"] / p["host_requests"]))
    if len(pts) < 2:
        return None
    # Weighted by 1/y^2 (relative error): the sizes span four orders of
    # magnitude, and a plain fit would give the intercept to the largest.
    w = [1 / (y * y) for _, y in pts]
    sw = sum(w)
    mx = sum(wi * x for wi, (x, _) in zip(w, pts)) / sw
    my = sum(wi * y for wi, (_, y) in zip(w, pts)) / sw
    sxx = sum(wi * (x - mx) ** 2 for wi, (x, _) in zip(w, pts))
    if not sxx:
        return None
    slope = sum(wi * (x - mx) * (y - my) for wi, (x, y) in zip(w, pts)) / sxx
    return {"intercept_ns": my - slope * mx, "ns_per_row": slope, "points": len(pts)}


def cost_doc(cases):
    cost = cost_cases(cases)
    fit = cost_fit(cost, "rdma", "sleep")
    return {"per_fetch": [{"link": k[0], "mode": k[1], "rows": k[2], **v["per_fetch"],
                           "model_cx7_us": cost_model_us(v["per_fetch"], k[2], k[1], fit)}
                          for k, v in sorted(cost.items(), key=str)],
            "model_assumptions_us": COST_MODEL_US,
            "floor": COST_FLOOR,
            "host_fit": {f"{lk}_{m}": cost_fit(cost, lk, m)
                         for lk in COST_LINKS for m in COST_MODES}}


def cost_markdown(cases):
    cost = cost_cases(cases)
    if not cost:
        return []
    fit = cost_fit(cost, "rdma", "sleep")
    out = ["", "| what a fetch costs, per fetch | rows | " +
           " | ".join(name for _, name in COST_COLS) +
           " | host µs per request (here) | ConnectX-7 model µs |",
           "|---|---:" + "|---:" * (len(COST_COLS) + 2) + "|"]
    for lk in COST_LINKS:
        for m in COST_MODES:
            for rows in COST_ROWS:
                p = cost.get((lk, m, rows), {}).get("per_fetch", {})
                host = p["host_request_ns"] / p["host_requests"] / 1000 \
                    if p.get("host_requests") and p.get("host_request_ns") is not None else None
                out.append(f"| {lk} {m} | {rows:,} | " +
                           " | ".join(fmt(p.get(k), 2) for k, _ in COST_COLS) +
                           f" | {fmt(host, 1)} | {fmt(cost_model_us(p, rows, m, fit), 1)} |")
    out.append("| floor (the verbs) | any | " +
               " | ".join(fmt(COST_FLOOR.get(k), 0) if k in COST_FLOOR else ""
                          for k, _ in COST_COLS) + " | | |")
    fits = []
    for lk in COST_LINKS:
        for m in COST_MODES:
            f = cost_fit(cost, lk, m)
            if f:
                fits.append(f"{lk} {m}: {fmt(f['intercept_ns'] / 1000, 1)} µs per request "
                            f"+ {fmt(f['ns_per_row'], 1)} ns per row")
    if fits:
        out += ["", "Host time from a request's frame to its last post, fitted over the "
                "row counts: " + "; ".join(fits) + "."]
    return out


def check_cost(cases):
    """Every cost case ran, exact, and the counters count (work, not time)."""
    problems = []
    cost = cost_cases(cases)
    for lk in COST_LINKS:
        for m in COST_MODES:
            for rows in COST_ROWS:
                c = cost.get((lk, m, rows))
                name = f"cost_{lk}_{m}_{rows}"
                if c is None:
                    problems.append(f"{name}: missing")
                    continue
                if not c.get("fetches") or c.get("fetches") != c.get("iters") or \
                        c.get("bad_rows") or c.get("errors"):
                    problems.append(f"{name}: {c.get('fetches')} of {c.get('iters')} fetches, "
                                    f"bad_rows {c.get('bad_rows')} errors {c.get('errors')}")
                    continue
                p = c.get("per_fetch", {})
                if not p.get("client_posts") or p["client_posts"] < 1:
                    problems.append(f"{name}: {p.get('client_posts')} GPU-node posts per fetch")
                # A fetch of one range is one request, on link 0 too: its RDMA
                # and TCP links reach one host, which a split would ask twice.
                if p.get("host_requests") != 1:
                    problems.append(f"{name}: {p.get('host_requests')} host requests per "
                                    "fetch, not 1")
                # A fetch of up to 4,096 rows posts its REQUEST (REG_MR and SEND
                # in one chain), and an eighth of a post for the receives given
                # back eight at a time.
                posts = p.get("client_posts")
                if lk != "kept" and rows <= 4096 and (posts is None or posts > 1.3):
                    problems.append(f"{name}: {fmt(posts, 2)} GPU-node posts per fetch, "
                                    "not 1 and an eighth")
                # A fetch holds its link's lock to take a slot, to track it and
                # for its RESPONSE (once: the receive completion's hold); a
                # fourth time only when its SEND completes after the RESPONSE.
                locks = p.get("client_link_locks")
                if rows <= 4096 and (locks is None or locks > 3.5):
                    problems.append(f"{name}: {fmt(locks, 2)} holds of the link's lock "
                                    "per fetch, not 3")
                # A busy-polling fetch goes on a poll queue (make bench sets
                # link_poll_queues=1), on link 0 as its parts: its caller
                # reaps its completions, none comes in softirq.
                soft = p.get("client_softirq_cqes")
                if m == "busy" and (soft is None or soft > 0.1):
                    problems.append(f"{name}: {fmt(soft, 2)} GPU completions per fetch in "
                                    "softirq while busy-polling, not 0")
                # Up to rdma_softirq_rows (4,096) the host answers in the receive
                # completion: a work item for most requests means it does not.
                hw, hr = p.get("host_work_items"), p.get("host_requests")
                if rows <= 4096 and hr and (hw is None or hw / hr >= 0.5):
                    problems.append(f"{name}: {hw} host work items per fetch "
                                    f"for {hr} requests")
                # Kept keys: a fetch is its SEND and the receive reposted for
                # its RESPONSE, besides each window's one registration.
                if lk == "kept":
                    wrs = p.get("client_wrs")
                    own = None if wrs is None else wrs - (p.get("kept_registrations") or 0)
                    if own is None or abs(own - 2) > 1e-6:
                        problems.append(f"{name}: {fmt(own, 2)} GPU WRs per fetch besides "
                                        "the windows' registrations, not 2")
                    # The RESPONSE's, and one SEND in 16 signaled.
                    cqes = p.get("client_cqes")
                    if cqes is None or cqes > 1.2:
                        problems.append(f"{name}: {fmt(cqes, 2)} GPU completions per fetch, "
                                        "not about 1")
    return problems


def fmt(v, digits=1):
    if v is None:
        return "-"
    if isinstance(v, float) and (abs(v) >= 1000 or v == int(v)) and digits <= 1:
        return f"{v:,.0f}"
    return f"{v:,.{digits}f}"


def replicas_markdown(d, r):
    """The replicas case's table, empty when it did not run."""
    out = []
    rep = replicas(d)
    if not rep:
        return out
    out.append("| replicas (three guests, wall time, row checks included) | processes "
               "| one host rows/s | two replicas rows/s | one host p50 µs "
               "| two replicas p50 µs | two / one, median of rounds |")
    out.append("|---:|---:|---:|---:|---:|---:|---:|")
    for (rows, procs), rounds in rep.items():
        def med(side, key):
            return median_of([c.get(side, {}).get(key) for c in rounds.values()])
        out.append(f"| {rows:,} rows | {procs} | {fmt(med('one', 'rows_per_s'))} | "
                   f"{fmt(med('two', 'rows_per_s'))} | {fmt(med('one', 'p50_us'))} | "
                   f"{fmt(med('two', 'p50_us'))} | "
                   f"{fmt(r.get(f'replicas_vs_one_{rows}_p{procs}'), 3)} |")
    out.append("")
    return out


def ratio_table(r):
    """The ratios with what each means."""
    out = ["| ratio | value | meaning |", "|---|---:|---|"]
    out += [f"| `{k}` | {fmt(v, 3)} | {RATIO_DOC.get(k, '')} |" for k, v in r.items()]
    return out


def markdown(d, r, env, cases=()):
    out = []
    out.append(f"engram-rdma bench: kernel {env.get('kernel', '?')}, "
               f"QEMU {env.get('qemu', '?')}, {env.get('guest_cpus', '?')} vCPUs, "
               f"commit {env.get('commit', '?')}, {env.get('iters', '?')} iterations per case, "
               f"RDMA MTU {env.get('rdma_mtu', '?')}")
    out.append("")
    out.append("| rows | bytes | RDMA p50 µs | RDMA p99 µs | RDMA p99.9 µs | RDMA busy p50 µs "
               "| TCP p50 µs | TCP busy p50 µs | perftest RTT µs | local p50 µs "
               "| RDMA GB/s | TCP GB/s | ib_write_bw GB/s |")
    out.append("|---:" * 13 + "|")
    for n in SIZES:
        rs = d.get(f"fetch_rdma_sleep_{n}", {})
        out.append("| " + " | ".join([
            f"{n:,}", f"{n * ROW_BYTES:,}",
            fmt(rs.get("p50_us")), fmt(rs.get("p99_us")), fmt(rs.get("p999_us")),
            fmt(get(d, f"fetch_rdma_busy_{n}", "p50_us")),
            fmt(get(d, f"fetch_tcp_sleep_{n}", "p50_us")),
            fmt(get(d, f"fetch_tcp_busy_{n}", "p50_us")),
            fmt(perftest_rtt_us(d, n)),
            fmt(get(d, f"local_{n}", "p50_us")),
            fmt(bw(d, f"fetch_rdma_sleep_{n}"), 3),
            fmt(bw(d, f"fetch_tcp_sleep_{n}"), 3),
            fmt(get(d, f"ib_write_bw_{n * ROW_BYTES}", "gbytes_per_s"), 3),
        ]) + " |")
    out.append("")
    out.append("| throughput (4,096 rows per fetch; wall time, row checks included) "
               "| processes | rows/s | GB/s "
               "| guest CPU s per million rows |")
    out.append("|---|---:|---:|---:|---:|")
    for t in ("rdma", "tcp"):
        for p in (1, 2, 4):
            c = d.get(f"tput_{t}_{p}", {})
            rows = c.get("rows_per_s", 0) * c.get("wall_s", 0)
            cpu = (c["cpu_busy_s"] / (rows / 1e6)) if rows and c.get("cpu_busy_s") is not None \
                else None
            out.append(f"| {t.upper()} | {p} | {fmt(c.get('rows_per_s'))} | "
                       f"{fmt(c.get('gbytes_per_s'), 3)} | {fmt(cpu, 2)} |")
    out.append("")
    out.append("| load (1 table) | bytes | sha256sum s | load s | verify s |")
    out.append("|---|---:|---:|---:|---:|")
    for m in ("cold", "warm"):
        c = d.get(f"load_{m}", {})
        out.append(f"| {m} | {fmt(c.get('bytes'))} | {fmt(c.get('sha256sum_s'), 3)} | "
                   f"{fmt(c.get('load_s'), 3)} | {fmt(c.get('verify_s'), 3)} |")
    out.append("")
    out += replicas_markdown(d, r)
    out += cost_markdown(cases)
    out += ratio_table(r)
    _, per = ratios_over_rounds(d)
    if per:
        out.append("")
        out.append("| ratio, each round | " + " | ".join(
            f"round {i + 1}" for i in range(max(len(v) for v in per.values()))) + " |")
        out.append("|---" + "|---:" * max(len(v) for v in per.values()) + "|")
        for k, vals in per.items():
            out.append(f"| `{k}` | " + " | ".join(fmt(v, 3) for v in vals) + " |")
    return "\n".join(out)


def rst(md, png_name):
    """The markdown tables as reStructuredText, for Documentation/."""
    out = [".. Generated by selftests/bench/report.py --rst; do not edit.", ""]
    lines = md.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.startswith("|"):
            out.append(line.replace("`", "``"))
            i += 1
            continue
        rows = []
        while i < len(lines) and lines[i].startswith("|"):
            if not set(lines[i]) <= set("|-: "):
                rows.append([c.strip().replace("`", "``")
                             for c in lines[i].strip("|").split("|")])
            i += 1
        out.append(".. list-table::")
        out.append("   :header-rows: 1")
        out.append("")
        for r in rows:
            for j, c in enumerate(r):
                out.append(("   * - " if j == 0 else "     - ") + (c or "\\-"))
        out.append("")
    out += ["", f".. image:: {png_name}", "   :alt: round trip and bandwidth against rows", ""]
    return "\n".join(out)


def plot_series(d):
    """The plot's points: {series: [(rows, p50 us, p99 us, GB/s)]}; None where not measured."""
    def fetch(label):
        return [(n, get(d, f"{label}_{n}", "p50_us"), get(d, f"{label}_{n}", "p99_us"),
                 bw(d, f"{label}_{n}")) for n in SIZES]
    return {
        "rdma": fetch("fetch_rdma_sleep"),
        "rdma_busy": fetch("fetch_rdma_busy"),
        "tcp": fetch("fetch_tcp_sleep"),
        "perftest": [(n, perftest_rtt_us(d, n), None,
                      get(d, f"ib_write_bw_{n * ROW_BYTES}", "gbytes_per_s"))
                     for n in PERF_ROWS],
        "local": fetch("local"),
    }


def plot_missing(series):
    """Points the plot cannot draw, as "series rows (what)" strings."""
    what = ("p50", "p99", "GB/s")
    out = []
    for name, pts in series.items():
        for n, *vals in pts:
            for w, v in zip(what, vals):
                if name == "perftest" and w == "p99":
                    continue        # perftest's latency is its t_typical only
                if v is None or (isinstance(v, float) and math.isnan(v)):
                    out.append(f"{name} {n} ({w})")
    return out


def plot(d, png, env):
    """Round trip p50 and p99 against rows (log-log) and bandwidth against rows
    (log-log), with gnuplot.  A point that was not measured is named on the
    plot and on stderr rather than silently left out."""
    series = plot_series(d)
    missing = plot_missing(series)
    for m in missing:
        print(f"report.py: plot: no value for {m}", file=sys.stderr)
    with tempfile.TemporaryDirectory() as tmp:
        for name, pts in series.items():
            with open(os.path.join(tmp, name + ".dat"), "w") as f:
                for n, *vals in pts:
                    f.write(f"{n} " + " ".join("NaN" if v is None else str(v) for v in vals)
                            + "\n")
        title = (f"engram-rdma, QEMU TCG + Soft-RoCE (software overhead, not a NIC); "
                 f"kernel {env.get('kernel', '?')}, MTU {env.get('rdma_mtu', '?')}, "
                 f"commit {env.get('commit', '?')}")
        styles = [("rdma", "engram RDMA (sleep)", 1), ("rdma_busy", "engram RDMA (busy-poll)", 2),
                  ("tcp", "engram TCP (sleep)", 3), ("perftest", "perftest (ib\\_write)", 4),
                  ("local", "local pread O\\_DIRECT", 5)]
        lat = [f"'{tmp}/{n}.dat' using 1:2 with linespoints lt {lt} pt {lt} lw 2 "
               f"title '{t} p50'" for n, t, lt in styles]
        lat += [f"'{tmp}/{n}.dat' using 1:3 with linespoints lt {lt} pt {lt} lw 1 dt 2 "
                f"title '{t} p99'" for n, t, lt in styles if n != "perftest"]
        bw_plot = ", ".join(f"'{tmp}/{n}.dat' using 1:4 with linespoints lt {lt} pt {lt} "
                            f"lw 2 title '{t}'" for n, t, lt in styles)
        if missing:
            text = ", ".join(missing)
            title += "\\nNOT MEASURED: " + (text if len(text) < 200 else text[:200] + " ...")
        script = f"""
set terminal pngcairo size 1400,640 font 'sans,10'
set output '{png}'
set multiplot layout 1,2 title "{title}"
set logscale xy
set grid
set key top left
set xlabel 'rows per fetch (264 B each)'
set ylabel 'round trip (microseconds; p50 solid, p99 dashed)'
set title 'Latency (perftest: 2 x ib\\_write\\_lat t\\_typical)'
plot {", ".join(lat)}
set logscale xy
set ylabel 'GB/s (one caller: bytes / mean round trip), log scale'
set title 'Bandwidth (perftest: ib\\_write\\_bw average)'
set key top left
plot {bw_plot}
unset multiplot
"""
        subprocess.run(["gnuplot"], input=script.encode(), check=True)
    return missing


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--in", dest="inp", required=True)
    ap.add_argument("--json", required=True)
    ap.add_argument("--png")
    ap.add_argument("--rst", help="also write the tables as reStructuredText")
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--replicas-only", action="store_true")
    a = ap.parse_args()

    cases = load_cases(a.inp)
    d = by_label(cases)
    env = next((dict(c) for c in cases if c.get("case") == "env"), {})
    env.pop("case", None)
    for kv in a.env:
        k, _, v = kv.partition("=")
        env[k] = v
    r = ratios(d, cases)
    if a.replicas_only:
        r = {k: v for k, v in r.items() if k.startswith("replicas_")}
    _, per = ratios_over_rounds(d)
    doc = {"environment": env, "ratios": r, "ratios_doc": RATIO_DOC, "ratio_rounds": per,
           "cost": cost_doc(cases),
           "cases": [c for c in cases if c.get("case") not in ("env", "end")]}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1, sort_keys=False)
        f.write("\n")
    if a.replicas_only:
        md = "\n".join(replicas_markdown(d, r) + ratio_table(r))
    else:
        md = markdown(d, r, env, cases)
    print(md)
    if a.rst:
        with open(a.rst, "w") as f:
            f.write(rst(md, os.path.basename(a.png) if a.png else "bench.png"))
    if a.png:
        plot(d, a.png, env)
    if a.check:
        problems = check(cases, d, a.replicas_only)
        if not a.replicas_only:
            problems += check_cost(cases)
        for p in problems:
            print(f"report.py: {p}", file=sys.stderr)
        if a.replicas_only:
            return 1 if problems else 0
        missing = [k for k in ("bw_49152_vs_ib_write_bw", "rtt_288_vs_perftest",
                               "load_vs_sha256sum", "tcp_vs_rdma_49152", "remote_vs_local_288",
                               "rtt_1_vs_perftest", "bw_49152_vs_ib_write_bw_4224",
                               "tput_2p_vs_1p", "ib_write_bw_q2_vs_q1",
                               "host_cpu_ns_per_row", "host_cpu_ns_per_row_tcp",
                               "client_cpu_ns_per_row_49152", "link0_vs_rdma_288",
                               "link0_tcp_share")
                   if not isinstance(r.get(k), float) or math.isnan(r[k])]
        for k in missing:
            print(f"report.py: ratio {k} could not be computed", file=sys.stderr)
        return 1 if problems or missing else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
