/* SPDX-License-Identifier: GPL-2.0 */
/*
 * The host role's core (serve.c): what every transport that serves tables
 * shares.  serve_rdma_conn.c (RDMA) and serve_tcp.c (TCP) register on it, parse
 * their own frames, and leave to it the stopping flag, the catalog, and
 * the checks and accounting of a request.
 */
#ifndef _ENGRAM_SERVE_H
#define _ENGRAM_SERVE_H

#include <linux/list.h>
#include <linux/types.h>

#include "engram.h"

struct engram_wire_params;
struct engram_wire_req;

/**
 * struct engram_serve_transport - a transport of the host role
 * @node: on serve.c's list, between engram_serve_register() and
 *	engram_serve_unregister()
 * @catalog_changed: the catalog changed: push it to every connection.
 *	Called in any context with any lock held, so it only queues work.
 */
struct engram_serve_transport {
	struct list_head node;
	void (*catalog_changed)(void);
};

void engram_serve_register(struct engram_serve_transport *tr);
void engram_serve_unregister(struct engram_serve_transport *tr);
void engram_serve_stop(void);
bool engram_serve_stopping(void);
int engram_serve_catalog_encode(void *buf, size_t size,
				const struct engram_wire_params *neg, u64 ticket);
int engram_serve_admit(const struct engram_wire_req *req,
		       const struct engram_wire_params *neg, struct engram_table **tp,
		       u32 *bad);
void engram_serve_answered(struct engram_table *t, u32 nr_rows, u64 t_recv_ns);
u64 engram_serve_cpu_now(void);
void engram_serve_cpu_spent(bool tcp, u32 nr_rows, u64 cpu0);
void engram_serve_rows_spent(bool tcp, u32 nr_rows, u64 spent);
void engram_serve_refused(struct engram_table *t, int status);

#endif /* _ENGRAM_SERVE_H */
