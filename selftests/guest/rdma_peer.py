#!/usr/bin/python3
# SPDX-License-Identifier: GPL-2.0
"""A raw rdma_cm peer for the server's connection limits (t_64).

    rdma_peer.py --src ADDR --dst ADDR --port P --count N [--rows R]
                 [--hold-file F] [--hold-max S]

Opens N connections to an engram_rdma server, one after the other, each with
a valid hello (version 1, R rows, 16 ranges, 16 in flight) as REQ private
data, and then sends nothing at all (it keeps receives posted, so the
server's CATALOG lands and nothing but silence ends the connection).  Prints one line
    accepted=A refused=R failed=F
and, with --hold-file, keeps the accepted connections open until that file
exists (or --hold-max seconds passed), then closes them and exits.
Needs python3-pyverbs (rdma-core's bindings): run it with /usr/bin/python3.
"""
import argparse
import errno
import os
import struct
import sys
import time

from pyverbs.cmid import CMID, AddrInfo, ConnParam
from pyverbs.pyverbs_error import PyverbsRDMAError
from pyverbs.qp import QPCap, QPInitAttr
import pyverbs.cm_enums as ce

MAGIC = 0x52474E45	# "ENGR", little-endian on the wire (kmod/wire.c)
HELLO = 48
CATALOG = 32768	# above the largest CATALOG frame, 30,744 bytes
RECVS = 4


def hello(rows):
    ranges = 16
    req_bytes = 48 + 24 * ranges + 4 * rows
    b = struct.pack("<IHHIIHHI", MAGIC, 1, 1, req_bytes, rows, 16, ranges, 0)
    return b + bytes(HELLO - len(b))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--dst", required=True)
    ap.add_argument("--port", required=True)
    ap.add_argument("--count", type=int, required=True)
    ap.add_argument("--rows", type=int, default=65536)
    ap.add_argument("--hold-file")
    ap.add_argument("--hold-max", type=float, default=120)
    a = ap.parse_args()

    held, acc, ref, fail = [], 0, 0, 0
    data = hello(a.rows)
    for _ in range(a.count):
        try:
            ai = AddrInfo(src=a.src, dst=a.dst, dst_service=str(a.port),
                          port_space=ce.RDMA_PS_TCP)
            cap = QPCap(max_send_wr=1, max_recv_wr=RECVS, max_send_sge=1, max_recv_sge=1)
            cm = CMID(creator=ai, qp_init_attr=QPInitAttr(cap=cap))
            # Room for the server's CATALOGs (never read): on rxe a send
            # that meets RNR for long ends in a transport retry error, and
            # the server would drop the connection on its own.
            mr = cm.reg_msgs(CATALOG)
            for _ in range(RECVS):
                cm.post_recv(mr, CATALOG)
        except Exception as e:	# no id: not the server's doing
            print(f"# setup failed: {e}", file=sys.stderr)
            fail += 1
            continue
        cp = ConnParam(rnr_retry=7, data_len=HELLO)
        cp.set_private_data(data)
        try:
            cm.connect(cp)
        except PyverbsRDMAError as e:
            if e.error_code == errno.ECONNREFUSED:
                ref += 1
            else:
                print(f"# connect failed: {e}", file=sys.stderr)
                fail += 1
            cm.close()
            continue
        held.append((cm, mr))
        acc += 1
    print(f"accepted={acc} refused={ref} failed={fail}", flush=True)
    if a.hold_file:
        end = time.monotonic() + a.hold_max
        while time.monotonic() < end and not os.path.exists(a.hold_file):
            time.sleep(0.1)
    for cm, _ in held:
        cm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
