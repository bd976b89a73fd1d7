#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0 OR BSD-2-Clause
"""Fetch random rows of a table through /dev/engram_rdma and check them.

    example.py --table NAME --file PATH --weight-offset N --scale-offset N
               [--dev PATH] [--link N] [--count N] [--seed N] [--timeout-ms N]
               [--local PATH [--local-tensor PREFIX]] [--local-dir DIR]
               [--required] [--expect-fallback] [--word]

Opens the device, opens the table by name, registers a numpy uint8 array of
shape (count, 264), fetches random rows (the first and the last row of the
table among them, in batches of at most the link's max_rows, each batch
into its slice of the array) and compares every row with the table's
safetensors file read independently: weight row i at weight_offset + i*256
(256 bytes), its scales at scale_offset + i*8 (8 bytes).  The offsets are
the table's absolute file offsets (``engramctl -j list``: weight_offset,
scale_offset).  Prints "example: N rows exact (F of B fetches from the
local copy)" and exits 0 only if every row matches.

The local fallback (libengram.h): --local gives the table a local copy of
its shard (Engram.set_local(), checked once), --local-dir a directory where
open_table() looks for it (Engram(local_dir=...), as ENGRAM_RDMA_LOCAL_DIR
does).  A fetch the network fails (timeout, link down, table gone on the
server) is then filled from the copy, exactly, and its Result says so
(fallback True, remote_error the errno).  --required (Engram(required=True),
ENGRAM_RDMA_REQUIRED=1) never falls back.  --expect-fallback: exit 1 unless
every fetch came from the local copy (for tests that break the remote).

--word: each batch is submitted with a completion word (one element of a
registered uint64 array) and the word alone is watched, the engine's way;
a failure value is waited for, which raises or falls back and sets it.
"""

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from engram_rdma import Engram, ROW_BYTES, SCALE_BYTES, WEIGHT_BYTES, WORD_FAILED  # noqa: E402


def fetch_word(e, t, rows, out, words, k, timeout_ms):
    """Submit with a completion word and watch it; returns the fallback flag."""
    words[k] = 0
    ticket = e.submit(t, rows, out, timeout_ms=timeout_ms, word=(words[k:k + 1], k + 1))
    end = time.monotonic() + (timeout_ms or 60000) / 1000 + 5
    while words[k] == 0:
        if time.monotonic() > end:
            raise TimeoutError("the word of fetch %d was not set" % ticket)
    if words[k] == k + 1:
        return False
    if not int(words[k]) & WORD_FAILED:
        raise ValueError("word %#x is neither the value nor a failure" % int(words[k]))
    r = e.wait(ticket)      # raises, or read the rows locally and set the word
    if words[k] != k + 1:
        raise ValueError("the fallback left the word at %#x" % int(words[k]))
    return r.fallback


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dev", default=None, help="device (default /dev/engram_rdma)")
    ap.add_argument("--table", required=True, help="table name")
    ap.add_argument("--link", type=int, default=0, help="link id (default: any)")
    ap.add_argument("--file", required=True, help="the table's safetensors file")
    ap.add_argument("--weight-offset", type=int, required=True)
    ap.add_argument("--scale-offset", type=int, required=True)
    ap.add_argument("--count", type=int, default=4096, help="rows to fetch")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--timeout-ms", type=float, default=None)
    ap.add_argument("--local", default=None, help="the table's local copy (safetensors)")
    ap.add_argument("--local-tensor", default=None,
                    help="tensor prefix in --local (default: the table's name)")
    ap.add_argument("--local-dir", default=None, help="directory of local copies")
    ap.add_argument("--required", action="store_true", help="never fall back")
    ap.add_argument("--word", action="store_true", help="watch completion words, no wait")
    ap.add_argument("--expect-fallback", action="store_true",
                    help="fail unless every fetch fell back")
    a = ap.parse_args()
    if a.count < 1:
        ap.error("--count must be at least 1")

    with Engram(a.dev, required=a.required or None, local_dir=a.local_dir) as e, \
            open(a.file, "rb") as f:
        t = e.open_table(name=a.table, link=a.link)
        print("example: %r" % t)
        if a.local:
            e.set_local(t, a.local, a.local_tensor)
        rng = np.random.default_rng(a.seed)
        rows = rng.integers(0, t.rows, size=a.count, dtype=np.uint32)
        rows[0] = 0
        rows[-1] = t.rows - 1
        out = np.empty((a.count, ROW_BYTES), dtype=np.uint8)
        e.register(out)
        step = max(1, t.max_rows)
        words = np.zeros((a.count + step - 1) // step, dtype=np.uint64)
        if a.word:
            e.register(words)
        fetches = fallbacks = 0
        for k, i in enumerate(range(0, a.count, step)):
            if a.word:
                fetches += 1
                fallbacks += fetch_word(e, t, rows[i:i + step], out[i:i + step], words, k,
                                        a.timeout_ms)
                continue
            r = e.fetch(t, rows[i:i + step], out[i:i + step], timeout_ms=a.timeout_ms)
            fetches += 1
            if r.fallback:
                fallbacks += 1
                if fallbacks == 1:
                    why = os.strerror(-r.remote_error) if r.remote_error else "no link has it"
                    print("example: remote failed (%s), rows read from the local copy" % why)

        fd = f.fileno()
        bad = 0
        for i, r in enumerate(rows.tolist()):
            want = os.pread(fd, WEIGHT_BYTES, a.weight_offset + r * WEIGHT_BYTES) + \
                os.pread(fd, SCALE_BYTES, a.scale_offset + r * SCALE_BYTES)
            got = out[i].tobytes()
            if got != want:
                if bad < 5:
                    k = next(j for j in range(ROW_BYTES) if j >= len(want) or got[j] != want[j])
                    print("example: row %d (position %d) differs at byte %d" % (r, i, k),
                          file=sys.stderr)
                bad += 1
        if bad:
            print("example: %d of %d rows differ" % (bad, a.count), file=sys.stderr)
            return 1
        print("example: %d rows exact (%d of %d fetches from the local copy)"
              % (a.count, fallbacks, fetches))
        if a.expect_fallback and fallbacks != fetches:
            print("example: expected every fetch to fall back", file=sys.stderr)
            return 1
        return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except OSError as e:
        print("example: %s" % e, file=sys.stderr)
        sys.exit(1)
