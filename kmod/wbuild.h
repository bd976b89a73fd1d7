/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The RDMA WRITEs of a response: gathered segments coalesced into chains of
 * WRITEs of at most max_sge SGEs and max_bytes bytes, each cut back to whole
 * packets of the path MTU when that saves a short packet.  Pure logic: the
 * owner posts the chains and hands out send-queue credits through two
 * callbacks, so the same file builds in userspace (ENGRAM_USERSPACE) where
 * it is unit-tested.
 */
#ifndef _ENGRAM_WBUILD_H
#define _ENGRAM_WBUILD_H

#include "userspace.h"

#ifdef ENGRAM_USERSPACE
/* Just the fields of <rdma/ib_verbs.h> that the builder uses. */
struct ib_cqe {
	int unused;
};

struct ib_sge {
	u64 addr;
	u32 length;
	u32 lkey;
};

enum ib_wr_opcode {
	IB_WR_RDMA_WRITE,
};

enum ib_send_flags {
	IB_SEND_SIGNALED = 1 << 1,
};

struct ib_send_wr {
	struct ib_send_wr *next;
	struct ib_cqe *wr_cqe;
	struct ib_sge *sg_list;
	int num_sge;
	enum ib_wr_opcode opcode;
	int send_flags;
};

struct ib_rdma_wr {
	struct ib_send_wr wr;
	u64 remote_addr;
	u32 rkey;
};
#else
#include <rdma/ib_verbs.h>
#endif

/**
 * struct engram_wb_ops - what the owner of a builder does for it
 * @flush: post the chain of @nr WRs starting at @wrs, linked by their
 *	wr.next, every one with the builder's cqe and none signaled: the owner
 *	marks the last one signaled, counts and posts.  The builder reuses
 *	@wrs and their SGEs once this returns, as ib_post_send() allows.
 *	Returns 0 or a negative errno, which engram_wbuild_add() and
 *	engram_wbuild_flush() pass on.
 * @reserve: wait for send-queue credits for the next chain and set *@cap
 *	to how many WRs it may hold (at least 1, at most the scratch's
 *	size).  Returns 0 or a negative errno, passed on likewise.
 */
struct engram_wb_ops {
	int (*flush)(void *ctx, struct ib_rdma_wr *wrs, u32 nr);
	int (*reserve)(void *ctx, u32 *cap);
};

/**
 * struct engram_wb_cfg - a builder's scratch, limits and owner
 * @wrs: scratch for one chain of WRs, as many as @ops->reserve may allow
 * @sges: their SGEs, @max_sge per WR
 * @max_sge: SGEs per WRITE, at least 1
 * @max_bytes: bytes per WRITE; no single segment may be longer
 * @mtu: the path MTU in bytes that full WRITEs are cut to; 0 or U32_MAX:
 *	never cut
 * @lkey: of every SGE
 * @cqe: of every WR (the owner changes the last one's at @ops->flush)
 * @ops: the owner's callbacks
 * @ctx: their first argument
 */
struct engram_wb_cfg {
	struct ib_rdma_wr *wrs;
	struct ib_sge *sges;
	u32 max_sge;
	u32 max_bytes;
	u32 mtu;
	u32 lkey;
	struct ib_cqe *cqe;
	const struct engram_wb_ops *ops;
	void *ctx;
};

/**
 * struct engram_wb - a chain of WRITEs being built
 * @cfg: set by engram_wbuild_init()
 * @nwr: WRs built
 * @cap: WRs this chain may hold (credits); 0 until the first reserve
 * @remote_end: next remote byte of the last WR
 * @wr_len: bytes in the last WR
 */
struct engram_wb {
	struct engram_wb_cfg cfg;
	u32 nwr;
	u32 cap;
	u64 remote_end;
	u32 wr_len;
};

void engram_wbuild_init(struct engram_wb *b, const struct engram_wb_cfg *cfg);
int engram_wbuild_add(struct engram_wb *b, u64 remote, u32 rkey, u64 addr, u32 len);
int engram_wbuild_flush(struct engram_wb *b);
u32 engram_wbuild_take(struct engram_wb *b);

#endif /* _ENGRAM_WBUILD_H */
