// SPDX-License-Identifier: GPL-2.0
/*
 * The host role's core: what every transport that serves tables shares,
 * once.  The transports (serve_rdma.c over RDMA, serve_tcp.c over TCP) own
 * their connections and frames; this file owns
 *
 * - the stopping flag: from engram_serve_stop() on, every request is
 *   answered SHUTTING_DOWN and no connection is accepted;
 * - the catalog: encoded for a connection's parameters by
 *   engram_serve_catalog_encode(), and every registered transport told
 *   when it changed (table.c tells us through the callback we give it, so
 *   no table code calls up into the host role);
 * - a request's fate: the checks after parsing (engram_serve_admit()), its
 *   accounting (engram_serve_answered()) and refusals
 *   (engram_serve_refused()), per table and module-wide.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/minmax.h>
#include <linux/mm.h>
#include <linux/mutex.h>
#include <linux/sched.h>
#include <linux/slab.h>
#include <linux/spinlock.h>
#include <linux/timekeeping.h>

#include "serve.h"
#include "trace.h"
#include "wire.h"

static bool engram_serve_stop_flag;

/* Registered transports; walked with the lock held, by any context. */
static LIST_HEAD(engram_serve_transports);
static DEFINE_SPINLOCK(engram_serve_lock);

/* The catalog's scratch: one encoding at a time. */
static DEFINE_MUTEX(engram_serve_cat_mutex);
static struct engram_wire_table *engram_serve_cat_tables;

/**
 * engram_serve_register() - a transport starts serving
 * @tr: the transport, told of every catalog change from now on
 */
void engram_serve_register(struct engram_serve_transport *tr)
{
	spin_lock_irq(&engram_serve_lock);
	list_add_tail(&tr->node, &engram_serve_transports);
	spin_unlock_irq(&engram_serve_lock);
}

/**
 * engram_serve_unregister() - a transport stops serving
 * @tr: the transport; once this returns, its catalog_changed() neither
 *	runs nor is called again (the transport then cancels what it queued)
 */
void engram_serve_unregister(struct engram_serve_transport *tr)
{
	spin_lock_irq(&engram_serve_lock);
	list_del_init(&tr->node);
	spin_unlock_irq(&engram_serve_lock);
}

/* table.c's callback: the set of tables, or one's state, changed. */
static void engram_serve_catalog_changed(void)
{
	struct engram_serve_transport *tr;
	unsigned long flags;

	spin_lock_irqsave(&engram_serve_lock, flags);
	list_for_each_entry(tr, &engram_serve_transports, node)
		tr->catalog_changed();
	spin_unlock_irqrestore(&engram_serve_lock, flags);
}

/**
 * engram_serve_stop() - answer every request SHUTTING_DOWN from now on
 *
 * The first step of the host role's exit, before its listeners and
 * connections go; engram_serve_init() clears it again.
 */
void engram_serve_stop(void)
{
	WRITE_ONCE(engram_serve_stop_flag, true);
}

/**
 * engram_serve_stopping() - is the host role going away?
 *
 * Any context.
 *
 * Return: true after engram_serve_stop().
 */
bool engram_serve_stopping(void)
{
	return READ_ONCE(engram_serve_stop_flag);
}

/**
 * engram_serve_catalog_encode() - the current catalog as a CATALOG frame
 * @buf: destination
 * @size: its size; ENGRAM_WIRE_MAX_CATALOG_BYTES holds any catalog
 * @neg: the connection's negotiated parameters
 * @ticket: 0 for a push, else the CATALOG_REQUEST's
 *
 * Entries the codec refuses are left out (and logged), so the frame is
 * always one the peer accepts.  Process context, between
 * engram_serve_init() and engram_serve_exit().
 *
 * Return: the frame's length, or a negative errno from the codec.
 */
int engram_serve_catalog_encode(void *buf, size_t size,
				const struct engram_wire_params *neg, u64 ticket)
{
	struct engram_wire_table *tab = engram_serve_cat_tables;
	u32 n, i, k;
	int len;

	mutex_lock(&engram_serve_cat_mutex);
	n = engram_table_catalog(tab, ENGRAM_MAX_TABLES, neg->version_max);
	n = min_t(u32, n, ENGRAM_MAX_TABLES);
	len = engram_wire_catalog_encode(buf, size, neg, ticket, tab, n);
	if (len == -EINVAL) {
		for (i = 0, k = 0; i < n; i++)
			if (engram_wire_catalog_encode(buf, size, neg, ticket, &tab[i], 1) > 0)
				tab[k++] = tab[i];
		pr_warn_ratelimited("catalog: %u of %u tables left out (invalid entries)\n",
				    n - k, n);
		len = engram_wire_catalog_encode(buf, size, neg, ticket, tab, k);
		if (len == -EINVAL)	/* two entries clash: announce nothing rather */
			len = engram_wire_catalog_encode(buf, size, neg, ticket, tab, 0);
	}
	mutex_unlock(&engram_serve_cat_mutex);
	return len;
}

/**
 * engram_serve_admit() - the checks of a parsed REQUEST that every transport makes
 * @req: the request, parsed by the transport against its connection
 * @neg: that connection's negotiated parameters
 * @tp: set to the table, held, or NULL
 * @bad: set to the first bad row index for ENGRAM_WIRE_ROW_OUT_OF_RANGE
 *	and ENGRAM_WIRE_ROW_NOT_HELD
 *
 * In the order of protocol.rst, after parsing: the host is not stopping,
 * the table is known and ready (by generation and digest) and in the
 * connection's catalog (a shard is not, below version 3), every row is in
 * it and held here.  A refusal may still hold the table (a bad row of a known table),
 * so that engram_serve_refused() counts it there.  Any context that may
 * take a spinlock.
 *
 * Return: ENGRAM_WIRE_OK (serve, then engram_serve_answered()) or the
 * status to refuse with (then engram_serve_refused()).
 */
int engram_serve_admit(const struct engram_wire_req *req,
		       const struct engram_wire_params *neg, struct engram_table **tp,
		       u32 *bad)
{
	struct engram_table *t;
	int st;

	*tp = NULL;
	*bad = 0;
	if (engram_serve_stopping()) {
		st = ENGRAM_WIRE_SHUTTING_DOWN;
	} else {
		st = engram_table_serve_get(req->digest, req->generation, &t);
		if (!st) {
			u64 first, held;

			engram_table_held(t, &first, &held);
			if (held != engram_table_rows(t) &&
			    neg->version_max < ENGRAM_WIRE_VERSION_SHARDS) {
				/* What its catalog does not list is unknown to it. */
				engram_table_serve_put(t);
				st = ENGRAM_WIRE_UNKNOWN_TABLE;
			} else {
				*tp = t;
				st = engram_wire_req_check_rows(req, engram_table_rows(t), first,
								held, bad);
			}
		}
	}
	trace_engram_serve_request(req->ticket, req->generation, req->nr_rows, st);
	return st;
}

/**
 * engram_serve_answered() - count a request whose rows were sent
 * @t: its table, still held
 * @nr_rows: rows sent
 * @t_recv_ns: when the request was received (ktime_get_ns())
 */
void engram_serve_answered(struct engram_table *t, u32 nr_rows, u64 t_recv_ns)
{
	engram_table_count_add(t, ENGRAM_STAT_LOOKUPS, 1);
	engram_table_count_add(t, ENGRAM_STAT_ROWS, nr_rows);
	engram_table_count_add(t, ENGRAM_STAT_BYTES, (u64)nr_rows * ENGRAM_ROW_BYTES);
	engram_table_latency(t, ktime_get_ns() - t_recv_ns);
}

/**
 * engram_serve_cpu_now() - the calling thread's CPU time so far
 *
 * The scheduler's tick sampling, as /proc/stat and getrusage() see it: the
 * difference over one request is 0 or whole ticks, and its sum over many
 * is the CPU time they took, time asleep (a full send queue, a full socket)
 * left out; softirqs that run on top of the thread meanwhile are in it
 * unless the kernel has CONFIG_IRQ_TIME_ACCOUNTING.  (A nohz_full CPU with
 * vtime accounting updates it only at context switches: there it reads
 * near zero.)
 *
 * Return: nanoseconds.
 */
u64 engram_serve_cpu_now(void)
{
	return current->utime + current->stime;
}

/**
 * engram_serve_cpu_spent() - count rows answered and the CPU time they took
 * @tcp: answered over TCP (else RDMA)
 * @nr_rows: rows answered
 * @cpu0: engram_serve_cpu_now() when the request's handling began
 *
 * Makes the host's CPU cost per row served a counter that operators (and
 * make bench) read instead of profiling for it.
 */
void engram_serve_cpu_spent(bool tcp, u32 nr_rows, u64 cpu0)
{
	engram_serve_rows_spent(tcp, nr_rows, engram_serve_cpu_now() - cpu0);
}

/**
 * engram_serve_rows_spent() - count rows answered and the CPU time they took
 * @tcp: answered over TCP (else RDMA)
 * @nr_rows: rows answered
 * @spent: nanoseconds of CPU: from engram_serve_cpu_now(), or the time a
 *	softirq spent on them, which is all CPU
 */
void engram_serve_rows_spent(bool tcp, u32 nr_rows, u64 spent)
{
	engram_count_add(&engram_global_stats,
			 tcp ? ENGRAM_STAT_SERVED_TCP_ROWS : ENGRAM_STAT_SERVED_RDMA_ROWS, nr_rows);
	if (spent)
		engram_count_add(&engram_global_stats, tcp ? ENGRAM_STAT_SERVED_TCP_CPU_NS :
				 ENGRAM_STAT_SERVED_RDMA_CPU_NS, spent);
}

/**
 * engram_serve_refused() - count a refusal, and let go of its table
 * @t: the table the request named, held, or NULL when it named none
 * @status: the ENGRAM_WIRE_* status refused with
 *
 * Counted per table when there is one, and always module-wide.
 */
void engram_serve_refused(struct engram_table *t, int status)
{
	trace_engram_serve_refuse(t ? engram_table_name(t) : "", status);
	if (t) {
		engram_stats_count_refusal(engram_table_counters(t), status);
		engram_table_serve_put(t);
	}
	engram_stats_count_refusal(&engram_global_stats, status);
}

/**
 * engram_serve_init() - set up the host role's core
 *
 * Before any transport registers; tells table.c whom to tell of catalog
 * changes.
 *
 * Return: 0 or -ENOMEM.
 */
int engram_serve_init(void)
{
	engram_serve_cat_tables = kvcalloc(ENGRAM_MAX_TABLES, sizeof(*engram_serve_cat_tables),
					   GFP_KERNEL);
	if (!engram_serve_cat_tables)
		return -ENOMEM;
	WRITE_ONCE(engram_serve_stop_flag, false);
	engram_table_notify(engram_serve_catalog_changed);
	return 0;
}

/**
 * engram_serve_exit() - free the core, once every transport unregistered
 */
void engram_serve_exit(void)
{
	engram_table_notify(NULL);
	kvfree(engram_serve_cat_tables);
	engram_serve_cat_tables = NULL;
}
