// SPDX-License-Identifier: GPL-2.0
/*
 * The RDMA WRITEs of a response, built from gathered segments: a segment
 * whose remote side continues the last WRITE's (same rkey) extends it, and
 * its last SGE too when the local side is contiguous; anything else, or a
 * WRITE that is full, starts a new one.  Chains of WRITEs go to the owner
 * to post (see wbuild.h).
 */
#ifdef ENGRAM_USERSPACE
#include <string.h>
#else
#include <linux/string.h>
#endif

#include "wbuild.h"

/* The tail of a full WRITE that a cut moves to the next one. */
struct engram_wb_carry {
	struct ib_sge head;		/* the cut SGE's tail, first to move */
	u32 from;			/* then the SGEs from here ... */
	u32 to;				/* ... to before here, of the cut WR */
	u32 bytes;			/* all of it; 0: nothing moves */
};

/**
 * engram_wbuild_init() - set a builder up, with no chain yet
 * @b: the builder
 * @cfg: its scratch, limits and owner, copied
 *
 * The first engram_wbuild_add() asks the owner for credits.
 */
void engram_wbuild_init(struct engram_wb *b, const struct engram_wb_cfg *cfg)
{
	b->cfg = *cfg;
	b->nwr = 0;
	b->cap = 0;
	b->remote_end = 0;
	b->wr_len = 0;
}

/**
 * engram_wbuild_flush() - hand the chain built so far to the owner to post
 * @b: the builder
 *
 * The next engram_wbuild_add() asks the owner for credits again.
 *
 * Return: 0 (also when there was nothing to post), or the owner's error.
 */
int engram_wbuild_flush(struct engram_wb *b)
{
	u32 nr = b->nwr;

	if (!nr)
		return 0;
	b->nwr = 0;
	b->cap = 0;
	return b->cfg.ops->flush(b->cfg.ctx, b->cfg.wrs, nr);
}

/**
 * engram_wbuild_take() - take the chain built so far, to post with more
 * @b: the builder
 *
 * For an owner that posts the last chain together with what must follow
 * it (a RESPONSE's SEND, in one post): the chain is the first WRs of the
 * scratch, linked, the last one's next NULL and none of them signaled,
 * and the credits the owner gave for it still hold.  The builder is then
 * empty, as after engram_wbuild_flush().
 *
 * Return: the chain's WRs, 0 if none.
 */
u32 engram_wbuild_take(struct engram_wb *b)
{
	u32 nr = b->nwr;

	b->nwr = 0;
	b->cap = 0;
	return nr;
}

/*
 * Cut a full WRITE back to whole packets of the path MTU when its last
 * packet would be short; the tail is to open the next WRITE.  Rows gather
 * from two tensors (256 + 8 bytes), so a WRITE of 32 SGEs holds 16 rows,
 * 4,224 bytes: uncut that is two packets at 4096 MTU and five at 1024, the
 * last of 128 bytes, and a packet costs the NIC (or Soft-RoCE's CPU) about
 * the same whatever its size.  A long tail stays: moved, it would fill
 * most of the next WRITE's SGEs and leave that one short, which costs a
 * WRITE (and its ACK) more than the packet saved.
 */
static void engram_wbuild_cut(struct engram_wb *b, struct ib_rdma_wr *wr,
			      struct engram_wb_carry *c)
{
	u32 mtu = b->cfg.mtu;
	struct ib_sge *sge;
	u32 left, k;

	c->bytes = 0;
	/* An MTU of 0 (unknown) never reaches the modulo. */
	if (!mtu || b->wr_len <= mtu)
		return;
	left = b->wr_len % mtu;
	if (!left || left > mtu / 4)
		return;
	c->bytes = left;
	/* The SGEs hold wr_len > bytes in all, so this stops at k >= 0. */
	k = wr->wr.num_sge - 1;
	while (wr->wr.sg_list[k].length < left)
		left -= wr->wr.sg_list[k--].length;
	sge = &wr->wr.sg_list[k];
	c->head = *sge;
	c->head.addr += sge->length - left;
	c->head.length = left;
	c->from = k + 1;
	c->to = wr->wr.num_sge;
	sge->length -= left;
	wr->wr.num_sge = sge->length ? k + 1 : k;
	b->wr_len -= c->bytes;
}

/**
 * engram_wbuild_add() - add a segment to the WRITEs being built
 * @b: the builder
 * @remote: where the segment lands, in the peer's memory
 * @rkey: of that memory
 * @addr: where it comes from: a local DMA address
 * @len: its length in bytes, 1 to @b->cfg.max_bytes
 *
 * The segment extends the last WRITE when the remote side is contiguous
 * (and the last SGE too when the local side is), else starts a new WRITE.
 * A WRITE that is full is cut at a packet boundary first
 * (engram_wbuild_cut()).  A chain that is full goes to the owner's flush, and
 * the next one starts with its reserve.
 *
 * Return: 0, or the error of the owner's flush or reserve; the segment may
 * then be partly added.
 */
int engram_wbuild_add(struct engram_wb *b, u64 remote, u32 rkey, u64 addr, u32 len)
{
	const struct engram_wb_cfg *cfg = &b->cfg;
	struct engram_wb_carry c = {};
	struct ib_sge *sge, *cut_sgl = NULL;
	struct ib_rdma_wr *wr;
	int ret;

again:
	if (b->nwr) {
		wr = &cfg->wrs[b->nwr - 1];
		if (wr->rkey == rkey && b->remote_end == remote) {
			sge = &wr->wr.sg_list[wr->wr.num_sge - 1];
			if (b->wr_len + len <= cfg->max_bytes) {
				if (sge->addr + sge->length == addr) {
					sge->length += len;
					goto grown;
				}
				if ((u32)wr->wr.num_sge < cfg->max_sge) {
					sge++;
					wr->wr.num_sge++;
					goto fill;
				}
			}
			engram_wbuild_cut(b, wr, &c);
			cut_sgl = wr->wr.sg_list;
		}
	}
	/* Posting the cut WR leaves its list to us: ib_post_send() copied it. */
	if (b->nwr == b->cap) {
		ret = engram_wbuild_flush(b);
		if (!ret)
			ret = cfg->ops->reserve(cfg->ctx, &b->cap);
		if (ret)
			return ret;
	}
	wr = &cfg->wrs[b->nwr];
	memset(wr, 0, sizeof(*wr));
	wr->wr.wr_cqe = cfg->cqe;
	wr->wr.opcode = IB_WR_RDMA_WRITE;
	wr->wr.sg_list = &cfg->sges[b->nwr * cfg->max_sge];
	wr->wr.num_sge = 1;
	wr->remote_addr = remote - c.bytes;
	wr->rkey = rkey;
	if (b->nwr)
		cfg->wrs[b->nwr - 1].wr.next = &wr->wr;
	b->nwr++;
	b->wr_len = c.bytes;
	b->remote_end = remote;
	sge = &wr->wr.sg_list[0];
	if (c.bytes) {
		/* memmove, head last: were a chain one WR, the lists would be one. */
		memmove(sge + 1, cut_sgl + c.from, (c.to - c.from) * sizeof(*sge));
		*sge = c.head;
		wr->wr.num_sge += c.to - c.from;
		c.bytes = 0;
		goto again;
	}
fill:
	sge->addr = addr;
	sge->length = len;
	sge->lkey = cfg->lkey;
grown:
	b->wr_len += len;
	b->remote_end += len;
	return 0;
}
