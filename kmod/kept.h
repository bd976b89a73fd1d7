/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Kept registrations (ENGRAM_REG_F_KEEP_KEYS): a buffer registered once
 * per RDMA connection that writes into it, window by window, instead of
 * once per fetch.  See kept.c.
 */
#ifndef _ENGRAM_KEPT_H
#define _ENGRAM_KEPT_H

#include <linux/list.h>
#include <linux/spinlock.h>
#include <rdma/ib_verbs.h>

struct engram_link;
struct engram_ubuf;
struct scatterlist;

/**
 * struct engram_kept_conn - one RDMA connection's kept registrations
 * @lock: guards @keys and each entry's MR
 * @keys: the windows registered on this connection (struct engram_kept)
 * @link: the link it belongs to (embedded there)
 * @id: its number in every buffer's index of windows
 * @qp: the connection's QP, between engram_kept_conn_start() and _stop()
 * @pd: its PD, which no other peer's QP uses
 * @ibdev: its device
 * @reg_cqe: where a failed REG_MR completes (they are unsignaled)
 * @mr_pages: pages of one window: what one MR of the device maps
 */
struct engram_kept_conn {
	spinlock_t lock;	/* @keys, and the MR of each entry on it */
	struct list_head keys;
	struct engram_link *link;
	u32 id;
	struct ib_qp *qp;
	struct ib_pd *pd;
	struct ib_device *ibdev;
	struct ib_cqe *reg_cqe;
	u32 mr_pages;
};

int engram_kept_conn_init(struct engram_kept_conn *kc, struct engram_link *l);
void engram_kept_conn_exit(struct engram_kept_conn *kc);
void engram_kept_conn_start(struct engram_kept_conn *kc, struct ib_qp *qp, struct ib_pd *pd,
			    struct ib_cqe *reg_cqe, u32 mr_pages);
void engram_kept_conn_stop(struct engram_kept_conn *kc);
bool engram_kept_fits(const struct engram_kept_conn *kc, const struct engram_ubuf *b, u64 off,
		      u64 len);
int engram_kept_map(struct engram_kept_conn *kc, struct engram_ubuf *b, u64 off, u64 len,
		    struct scatterlist *sgl, struct ib_mr **mr, u64 *addr);
void engram_kept_buf_drop(struct engram_ubuf *b);

#endif
