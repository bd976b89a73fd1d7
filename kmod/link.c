// SPDX-License-Identifier: GPL-2.0
/*
 * Client links, the generic part: one connection to one server each, from
 * remote= or netlink, over the transport its URL names (link_rdma.c,
 * link_tcp.c).  A link connects in a worker, learns the server's tables
 * from its CATALOG, and then carries fetches: a ticket and a request slot
 * each, a deadline that breaks the connection when it passes, and a
 * result published once the transport guarantees that nothing of the
 * fetch can land any more.  A broken connection is torn down (the
 * transport quiesced, what was in flight failed) and retried with
 * backoff; a heartbeat watches a quiet one.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/idr.h>
#include <linux/jiffies.h>
#include <linux/netlink.h>
#include <linux/random.h>
#include <linux/rwsem.h>
#include <linux/sched/signal.h>
#include <linux/slab.h>

#include "compat.h"
#include "cost.h"
#include "event.h"
#include "pieces.h"
#include "inject.h"
#include "link.h"
#include "trace.h"

/* How long a closing fd waits for a fetch before it breaks the connection. */
#define ENGRAM_LINK_CLOSE_WAIT_MS	2000
/* A fetch answered at its deadline: how long its invalidations may take. */
#define ENGRAM_LINK_INV_GRACE_MS	1000
/* How often the heartbeat worker looks while heartbeats are off. */
#define ENGRAM_LINK_HB_IDLE_MS		1000
/* The least time between two catalogs read (engram_link_cat_work()). */
#define ENGRAM_LINK_CAT_MIN_MS		10

static void engram_link_deadline_arm_locked(struct engram_link *l, ktime_t when);

static DEFINE_IDA(engram_link_ida);
/*
 * Where the next id is looked for: ids count up, not reused (netlink.rst).
 * Under its mutex, with the allocation: LINK_ADDs run in parallel.
 */
static DEFINE_MUTEX(engram_link_id_mutex);
static int engram_link_next_id = 1;
static struct workqueue_struct *engram_link_wq;
static bool engram_links_exiting;

/**
 * engram_link_exiting() - is the module going away?
 *
 * Return: true once engram_link_exit() has begun; a transport cuts its
 * waits short then.
 */
bool engram_link_exiting(void)
{
	return READ_ONCE(engram_links_exiting);
}

static void engram_link_set_state(struct engram_link *l, u8 state, int error)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	if (l->state != state) {
		trace_engram_link_state(l->id, l->state, state, error);
		engram_event_link(ENGRAM_EVENT_LINK_STATE, l->id, l->url.text, state, error);
		l->since = ktime_get();
	}
	l->state = state;
	if (error)
		l->error = -error;
	spin_unlock_irqrestore(&l->lock, flags);
}

/**
 * engram_link_status_errno() - the errno a fetch fails with for a wire status
 * @wire_status: enum engram_wire_status
 *
 * Return: 0 for OK, a negative errno otherwise (Documentation/ioctl.rst).
 */
int engram_link_status_errno(unsigned int wire_status)
{
	switch (wire_status) {
	case ENGRAM_WIRE_OK:
		return 0;
	case ENGRAM_WIRE_BAD_VERSION:
	case ENGRAM_WIRE_MALFORMED:
		return -EPROTO;
	case ENGRAM_WIRE_UNKNOWN_TABLE:
		return -ESTALE;
	case ENGRAM_WIRE_TABLE_NOT_READY:
		return -EAGAIN;
	case ENGRAM_WIRE_ROW_OUT_OF_RANGE:
		return -ERANGE;
	case ENGRAM_WIRE_ROW_NOT_HELD:
		return -ENXIO;
	case ENGRAM_WIRE_TOO_MANY_ROWS:
	case ENGRAM_WIRE_TOO_MANY_RANGES:
		return -E2BIG;
	case ENGRAM_WIRE_DEST_TOO_SMALL:
		return -ENOSPC;
	case ENGRAM_WIRE_BUSY:
		return -EBUSY;
	case ENGRAM_WIRE_SHUTTING_DOWN:
		return -ESHUTDOWN;
	default:
		return -EIO;
	}
}

static void engram_link_release(struct kref *ref)
{
	struct engram_link *l = container_of(ref, struct engram_link, ref);

	ida_free(&engram_link_ida, l->id);
	kvfree(l->catalog);
	kvfree(l->catalog_spare);
	kvfree(l->cat_new);
	kvfree(l->cat_read);
	l->ops->free(l);
}

/**
 * engram_link_get() - take a reference on a link
 * @l: the link
 */
void engram_link_get(struct engram_link *l)
{
	kref_get(&l->ref);
}

/**
 * engram_link_put() - drop a reference on a link
 * @l: the link
 */
void engram_link_put(struct engram_link *l)
{
	kref_put(&l->ref, engram_link_release);
}

/**
 * engram_link_id() - a link's id
 * @l: the link
 *
 * Return: the id, >= 1.
 */
u32 engram_link_id(const struct engram_link *l)
{
	return l->id;
}

/**
 * engram_link_max_ranges() - negotiated ranges per request
 * @l: the link
 *
 * Return: the current connection's limit, or ENGRAM_WIRE_MAX_RANGES while
 * down (a fetch then fails on submit anyway).
 */
u32 engram_link_max_ranges(const struct engram_link *l)
{
	u32 n = READ_ONCE(l->neg.max_ranges);

	return n ? n : ENGRAM_WIRE_MAX_RANGES;
}

/*
 * Retry after reconnect_min_ms, doubling up to reconnect_max_ms; the bounds
 * are read each time, so a change applies to the next retry.
 */
static void engram_link_schedule_connect(struct engram_link *l)
{
	unsigned int lo, hi, ms;

	if (l->deleted || READ_ONCE(engram_links_exiting))
		return;
	engram_params_reconnect_ms(&lo, &hi);
	ms = clamp(l->backoff_ms, lo, hi);
	l->backoff_ms = ms > hi / 2 ? hi : ms * 2;
	/* Jitter, so that clients of one server do not reconnect in step. */
	ms += get_random_u32_below(ms / 2 + 1);
	queue_delayed_work(engram_link_wq, &l->connect_work, msecs_to_jiffies(ms));
}

/**
 * engram_link_fail() - ask for the current connection to be broken
 * @l: the link
 * @error: what its fetches in flight fail with
 *
 * Any context.  Only the connection that is live now is broken, once; a
 * request that comes after it went down (a late completion, a receiver
 * that saw the socket shut) is ignored, so it cannot break the next one.
 */
void engram_link_fail(struct engram_link *l, int error)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	if (l->live && !l->down_pending) {
		l->down_pending = true;
		l->down_gen = l->conn_gen;
		l->down_error = error;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	queue_work(engram_link_wq, &l->down_work);
}

/*
 * Has everything of @f arrived?  Over RDMA its RESPONSE comes after its
 * rows, and only the invalidation of its keys is left, which does not wait
 * for the server; over TCP the rows follow their RESPONSE header, so the
 * fetch is still at the server's mercy until it is finished.
 */
static bool engram_link_answered(const struct engram_link *l, const struct engram_fetch *f)
{
	return f->responded && l->ops->answer_last;
}

/*
 * Break connection @gen only: a verdict reached on one connection must not
 * fall on the next one, which a reconnect may have set up meanwhile.
 */
static void engram_link_fail_gen(struct engram_link *l, u32 gen, int error)
{
	unsigned long flags;
	bool same;

	spin_lock_irqsave(&l->lock, flags);
	same = l->conn_gen == gen;
	spin_unlock_irqrestore(&l->lock, flags);
	if (same)
		engram_link_fail(l, error);
}

/**
 * engram_link_heard() - something arrived from the server
 * @l: the link
 *
 * Every frame, and every part of a long one, is proof of life: a link busy
 * with large responses is not broken because a heartbeat waits behind them.
 */
void engram_link_heard(struct engram_link *l)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	engram_link_heard_locked(l);
	spin_unlock_irqrestore(&l->lock, flags);
}

/**
 * engram_link_heard_locked() - engram_link_heard(), l->lock held
 * @l: the link
 *
 * For a completion handler that holds l->lock for more than this.
 */
void engram_link_heard_locked(struct engram_link *l)
{
	lockdep_assert_held(&l->lock);
	l->last_rx = ktime_get();
}

static void engram_link_live_locked(struct engram_link *l)
{
	lockdep_assert_held(&l->lock);
	l->conn_gen++;
	l->live = true;
	/* The answer offers no more than we asked for; min() keeps it so. */
	l->q_slots = min_t(u32, l->neg.max_inflight, ENGRAM_WIRE_OFFER_INFLIGHT);
	l->nr_queues = clamp_t(u32, l->nr_queues, 1, ENGRAM_LINK_MAX_QUEUES);
	/* Queue 0, which carries catalogs, is never a poll queue. */
	l->nr_poll_queues = min(l->nr_poll_queues, l->nr_queues - 1);
	l->nr_slots = l->q_slots * l->nr_queues;
	bitmap_zero(l->slots_busy, ENGRAM_LINK_MAX_SLOTS);
	l->connects++;
	l->down_pending = false;
	l->last_rx = ktime_get();
	l->probe_since = 0;
	l->hb_ticket = 0;
}

/**
 * engram_link_went_live() - a transport's connection is negotiated
 * @l: the link, its mutex held
 *
 * From here frames are read, fetches may go out once the catalog is in,
 * and the heartbeat watches the connection.
 */
void engram_link_went_live(struct engram_link *l)
{
	unsigned long flags;

	lockdep_assert_held(&l->mutex);
	spin_lock_irqsave(&l->lock, flags);
	engram_link_live_locked(l);
	spin_unlock_irqrestore(&l->lock, flags);
}

/* --- completions --- */

/*
 * Off the wire: MRs back to the pool, slot free, result final.  Called with
 * l->lock held, when the SEND and every invalidation have completed
 * successfully, or by teardown once the queue pair is drained.  The caller
 * publishes the result with engram_link_publish() after dropping l->lock.
 *
 * Return: true if this call finished it (and so must publish it).
 */
static bool engram_link_finish_locked(struct engram_link *l, struct engram_fetch *f)
{
	lockdep_assert_held(&l->lock);
	if (f->finished)
		return false;
	f->finished = true;
	if (f->slot >= 0 && l->slot_fetch[f->slot] == f) {
		l->slot_fetch[f->slot] = NULL;
		l->inflight--;
	}
	if (l->ops->put_fetch)
		l->ops->put_fetch(l, f);
	if (f->slot >= 0) {
		__clear_bit(f->slot, l->slots_busy);
		if (!f->error && l->q_slots)
			l->queue_fetches[f->slot / l->q_slots]++;
	}
	/* Read without l->lock by a poller that reaps it (ops->reap). */
	WRITE_ONCE(f->slot, -1);
	f->rtt_ns = ktime_to_ns(ktime_sub(ktime_get(), f->start));
	trace_engram_fetch_done(l->id, f->ticket, f->nr_rows, f->error, f->rtt_ns);
	if (!f->error) {
		engram_count(&l->stats, ENGRAM_STAT_FETCHES);
		engram_count_add(&l->stats, ENGRAM_STAT_FETCH_ROWS, f->nr_rows);
		engram_count_add(&l->stats, ENGRAM_STAT_FETCH_BYTES,
				 (u64)f->nr_rows * ENGRAM_ROW_BYTES);
		engram_count(&engram_global_stats, ENGRAM_STAT_FETCHES);
		engram_count_add(&engram_global_stats, ENGRAM_STAT_FETCH_ROWS, f->nr_rows);
		engram_count_add(&engram_global_stats, ENGRAM_STAT_FETCH_BYTES,
				 (u64)f->nr_rows * ENGRAM_ROW_BYTES);
		engram_stats_hist_add(&l->lat, f->rtt_ns);
	} else {
		engram_count(&l->stats, ENGRAM_STAT_FETCH_ERRORS);
		engram_count(&engram_global_stats, ENGRAM_STAT_FETCH_ERRORS);
	}
	return true;
}

/*
 * The release of the link's put, which is never the last: reaching zero
 * there is a bug, which the caller WARNs about; leaking then beats freeing
 * (which may sleep) in atomic context.
 */
static void engram_link_release_never(struct kref *ref)
{
}

/**
 * engram_link_publish() - hand a finished fetch back to its fd
 * @f: a fetch engram_link_complete_locked() (or teardown) finished
 *
 * The fd holds its own reference until it has seen done, so dropping the
 * link's first is never the last put (which must not run here: freeing a
 * fetch may sleep).  done is set and the waiters woken under the wait
 * queue's lock, so a closing fd that takes that lock before freeing cannot
 * free it under us.  Any context, but never under l->lock.
 */
void engram_link_publish(struct engram_fetch *f)
{
	/* Read first: a fetch of the fd's own may be freed once it is done. */
	void (*part_done)(struct engram_fetch *f) = f->part_done;
	wait_queue_head_t *wq = f->wq;
	unsigned long flags;

	/* Only the fd's own fetches have a word; nothing lands after this. */
	if (f->done_buf) {
		if (!f->error) {
			engram_link_fetch_sync_rows(f);
			f->rows_synced = true;
		}
		engram_fetch_signal(f, f->error);
	}
	WARN_ON_ONCE(kref_put(&f->ref, engram_link_release_never));
	spin_lock_irqsave(&wq->lock, flags);
	engram_fetch_set_done(f);
	wake_up_locked(wq);
	spin_unlock_irqrestore(&wq->lock, flags);
	/* A part of a replica's fetch lives as long as that fetch: it decides. */
	if (part_done)
		part_done(f);
}

/**
 * engram_link_wire_broken_locked() - only teardown may end this fetch
 * @l: the link, its lock held
 * @f: a fetch on the wire
 * @error: what it fails with, unless it failed already
 *
 * A work request of @f failed, was flushed or could not be posted: its
 * keys may still be valid (a flushed LOCAL_INV invalidated nothing), so
 * engram_link_complete() passes it over, and only teardown ends it, once
 * the transport has destroyed whatever could still reach its buffer.
 */
void engram_link_wire_broken_locked(struct engram_link *l, struct engram_fetch *f,
				    int error)
{
	lockdep_assert_held(&l->lock);
	f->wire_broken = true;
	if (!f->error)
		f->error = error;
}

/**
 * engram_link_complete() - a transport is done with a fetch
 * @l: the link
 * @f: a fetch of its live connection, off the wire for good
 *
 * Any context.  A fetch whose wire broke (engram_link_wire_broken_locked())
 * is left for teardown to end.
 */
void engram_link_complete(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags;
	bool fin;

	engram_link_lock_fetch(l, flags);
	fin = engram_link_complete_locked(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
	if (fin)
		engram_link_publish(f);
}

/**
 * engram_link_complete_locked() - engram_link_complete(), l->lock held
 * @l: the link
 * @f: a fetch whose last WR has completed
 *
 * For a completion handler that holds l->lock for more than this.
 *
 * Return: true if @f is finished now: the caller then publishes it with
 * engram_link_publish() once it has dropped l->lock.
 */
bool engram_link_complete_locked(struct engram_link *l, struct engram_fetch *f)
{
	lockdep_assert_held(&l->lock);
	return !f->wire_broken && engram_link_finish_locked(l, f);
}

/**
 * engram_link_track() - a fetch is about to go on the wire
 * @l: the link
 * @f: the fetch, its ticket set
 *
 * From here the fetch ends through the link: its response, or teardown.
 * Tracked before it is sent, as its response may come before the send
 * returns.
 *
 * Return: 0 or -ENOMEM.
 */
int engram_link_track(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags;
	int ret;

	engram_link_lock_fetch(l, flags);
	/* Submitted in a slot of its own (engram_link_submit()), kept until finished. */
	ret = f->slot < 0 || f->slot >= ENGRAM_LINK_MAX_SLOTS || l->slot_fetch[f->slot] ?
	      -EINVAL : 0;
	if (!ret) {
		l->slot_fetch[f->slot] = f;
		l->inflight++;
		engram_link_deadline_arm_locked(l, f->deadline);
	}
	spin_unlock_irqrestore(&l->lock, flags);
	if (WARN_ON_ONCE(ret))
		return ret;
	kref_get(&f->ref);		/* the link's, dropped when it is finished */
	f->start = ktime_get();
	return 0;
}

/**
 * engram_link_finish_all() - take every fetch of a connection off the wire
 * @l: the link, in teardown, the transport quiesced
 * @error: what a fetch without an error of its own fails with
 * @done: the fetches to hand to engram_link_publish_all()
 *
 * The first half of engram_link_end_all(), for a transport that must
 * destroy something between taking the fetches off the wire and letting
 * their callers go (RDMA: the MRs, whose keys die with them).
 */
void engram_link_finish_all(struct engram_link *l, int error, struct list_head *done)
{
	struct engram_fetch *f;
	unsigned long flags;
	unsigned int i;

	spin_lock_irqsave(&l->lock, flags);
	for (i = 0; i < ENGRAM_LINK_MAX_SLOTS; i++) {
		f = l->slot_fetch[i];
		if (!f)
			continue;
		if (!f->error)
			f->error = error;
		if (engram_link_finish_locked(l, f))
			list_add_tail(&f->done_node, done);
	}
	spin_unlock_irqrestore(&l->lock, flags);
}

/**
 * engram_link_publish_all() - let the callers of finished fetches go
 * @done: the list engram_link_finish_all() filled
 */
void engram_link_publish_all(struct list_head *done)
{
	struct engram_fetch *f, *tmp;

	list_for_each_entry_safe(f, tmp, done, done_node)
		engram_link_publish(f);
}

/**
 * engram_link_end_all() - end every fetch of a connection that is gone
 * @l: the link, in teardown, the transport quiesced
 * @error: what a fetch without an error of its own fails with
 */
void engram_link_end_all(struct engram_link *l, int error)
{
	LIST_HEAD(done);

	engram_link_finish_all(l, error, &done);
	engram_link_publish_all(&done);
}

/**
 * engram_link_claim_locked() - match a RESPONSE to the fetch it answers
 * @l: the link, its lock held
 * @resp: the decoded response
 * @queue: the queue it came on
 * @bad_pos: set when the response named a row position past the fetch's
 *
 * Records the status on the fetch.  A fetch is claimed once; the caller
 * then places its rows (TCP) or invalidates its registrations (RDMA) and
 * completes it, and after dropping l->lock reports the claim with
 * engram_link_claim_report().  Only the queue the fetch went out on may
 * answer it: over RDMA its RESPONSE is known to follow its rows only on
 * the same queue pair.
 *
 * Return: the fetch, or NULL for a ticket that is not one of this
 * connection's fetches on the wire of that queue (a protocol error).
 */
struct engram_fetch *engram_link_claim_locked(struct engram_link *l,
					      const struct engram_wire_resp *resp,
					      unsigned int queue, bool *bad_pos)
{
	struct engram_fetch *f = NULL;
	unsigned int i;

	lockdep_assert_held(&l->lock);
	*bad_pos = false;
	for (i = queue * l->q_slots; l->q_slots && i < (queue + 1) * l->q_slots &&
	     i < ENGRAM_LINK_MAX_SLOTS; i++) {
		if (l->slot_fetch[i] && l->slot_fetch[i]->ticket == resp->ticket) {
			f = l->slot_fetch[i];
			break;
		}
	}
	if (!f || f->responded || f->conn_gen != l->conn_gen || f->slot < 0 || !l->q_slots ||
	    f->slot / l->q_slots != queue)
		return NULL;
	f->responded = true;
	f->wire_status = resp->status;
	f->bad_index = resp->bad_index;
	*bad_pos = (resp->status == ENGRAM_WIRE_ROW_OUT_OF_RANGE ||
		    resp->status == ENGRAM_WIRE_ROW_NOT_HELD) && resp->bad_index >= f->nr_rows;
	if (*bad_pos) {
		/* Callers index their rows with it: a position past them is a lie. */
		f->wire_status = ENGRAM_WIRE_MALFORMED;
		f->bad_index = 0;
	}
	/* A fetch already timed out stays timed out: its caller was told so. */
	if (f->error)
		;
	else if (*bad_pos)
		f->error = -EPROTO;
	else if (resp->status == ENGRAM_WIRE_OK &&
		 resp->bytes != (u64)f->nr_rows * ENGRAM_ROW_BYTES)
		f->error = -EPROTO;
	else
		f->error = engram_link_status_errno(resp->status);
	return f;
}

/**
 * engram_link_claim_report() - log and count a claim, l->lock dropped
 * @l: the link
 * @resp: the decoded response
 * @found: whether engram_link_claim_locked() returned a fetch
 * @nr_rows: that fetch's rows, read under the lock: it may be gone now
 * @bad_pos: what engram_link_claim_locked() set
 */
void engram_link_claim_report(struct engram_link *l, const struct engram_wire_resp *resp,
			      bool found, u32 nr_rows, bool bad_pos)
{
	if (!found) {
		pr_warn_ratelimited("link %u: response to unknown ticket %llu\n",
				    l->id, resp->ticket);
		return;
	}
	if (bad_pos)
		pr_warn_ratelimited("link %u: %s for ticket %llu names row %u of %u: a protocol error\n",
				    l->id, engram_wire_status_name(resp->status), resp->ticket,
				    resp->bad_index, nr_rows);
	if (resp->status != ENGRAM_WIRE_OK)
		engram_stats_count_refusal(&l->stats, resp->status);
}

/**
 * engram_link_claim() - engram_link_claim_locked() and its report
 * @l: the link
 * @resp: the decoded response
 * @queue: the queue it came on
 *
 * Return: the fetch, or NULL for a ticket that is not one of this
 * connection's fetches on the wire of that queue (a protocol error).
 */
struct engram_fetch *engram_link_claim(struct engram_link *l,
				       const struct engram_wire_resp *resp, unsigned int queue)
{
	struct engram_fetch *f;
	unsigned long flags;
	bool bad_pos;

	engram_link_lock_fetch(l, flags);
	f = engram_link_claim_locked(l, resp, queue, &bad_pos);
	spin_unlock_irqrestore(&l->lock, flags);
	/* The caller's hold on the wire keeps @f until it completes it. */
	engram_link_claim_report(l, resp, !!f, f ? f->nr_rows : 0, bad_pos);
	return f;
}

/**
 * engram_link_hb_parse() - read a HEARTBEAT's ticket
 * @l: the link
 * @buf: the frame
 * @len: its length
 * @ticket: the ticket it carries
 *
 * Return: 0, or -EPROTO for a malformed one (logged).
 */
int engram_link_hb_parse(struct engram_link *l, const void *buf, u32 len, u64 *ticket)
{
	char err[96];

	if (engram_wire_simple_parse(buf, len, &l->neg, false, ENGRAM_WIRE_HEARTBEAT, ticket,
				     err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad heartbeat: %s\n", l->id, err);
		return -EPROTO;
	}
	return 0;
}

/**
 * engram_link_hb_answered() - the server echoed heartbeat @ticket
 * @l: the link
 * @ticket: the echo's ticket
 *
 * Return: true if it was the link's heartbeat on the wire, whose round
 * trip is now known; false for another one (a transport that sends a
 * heartbeat on several connections hears it more than once).
 */
bool engram_link_hb_answered(struct engram_link *l, u64 ticket)
{
	unsigned long flags;
	bool ours;

	spin_lock_irqsave(&l->lock, flags);
	ours = l->hb_ticket && ticket == l->hb_ticket;
	if (ours) {
		l->hb_rtt_us = min_t(u64, ktime_us_delta(ktime_get(), l->hb_sent), U32_MAX);
		l->have_hb_rtt = true;
		l->hb_ticket = 0;
		l->probe_since = 0;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	return ours;
}

/**
 * engram_link_hb_echo() - a HEARTBEAT came back on a link of one connection
 * @l: the link
 * @buf: the frame
 * @len: its length
 *
 * Return: 0, or -EPROTO for a malformed one or one that answers no
 * heartbeat of ours.
 */
int engram_link_hb_echo(struct engram_link *l, const void *buf, u32 len)
{
	u64 ticket;

	if (engram_link_hb_parse(l, buf, len, &ticket))
		return -EPROTO;
	if (engram_link_hb_answered(l, ticket))
		return 0;
	pr_warn_ratelimited("link %u: heartbeat echo with unknown ticket %llu\n", l->id, ticket);
	return -EPROTO;
}

/*
 * Read the newest CATALOG a connection brought, in process context: a host
 * may send one whenever it likes, as often as it likes, and checking 256
 * entries is work that softirq and l->lock should not carry.  Entries are
 * decoded into the spare array with no lock held, and the arrays swapped
 * under l->lock, which every reader of the catalog holds.  Runs at most
 * once every ENGRAM_LINK_CAT_MIN_MS; catalogs that come in between replace
 * the one waiting, so only the newest is read.  The first one after a
 * connect brings the link up.
 */
static void engram_link_cat_work(struct work_struct *work)
{
	struct engram_link *l = container_of(to_delayed_work(work), struct engram_link,
					     cat_work);
	struct engram_wire_catalog_view cat;
	struct engram_wire_table *t;
	unsigned long flags;
	char err[96];
	u32 i, len, gen;
	bool stale;
	u8 *buf;

	spin_lock_irqsave(&l->cat_lock, flags);
	len = l->cat_len;
	gen = l->cat_gen;
	buf = l->cat_new;
	l->cat_new = l->cat_read;
	l->cat_read = buf;
	l->cat_len = 0;
	l->cat_next = jiffies + msecs_to_jiffies(ENGRAM_LINK_CAT_MIN_MS);
	spin_unlock_irqrestore(&l->cat_lock, flags);
	if (!len)
		return;
	if (engram_wire_catalog_parse(buf, len, &l->neg, &cat, err, sizeof(err))) {
		pr_warn_ratelimited("link %u: bad catalog: %s\n", l->id, err);
		engram_link_fail_gen(l, gen, -EPROTO);
		return;
	}
	for (i = 0; i < cat.nr_entries; i++)
		engram_wire_catalog_get(&cat, i, &l->catalog_spare[i]);
	engram_count(&l->stats, ENGRAM_STAT_CATALOGS);
	engram_count(&engram_global_stats, ENGRAM_STAT_CATALOGS);
	spin_lock_irqsave(&l->lock, flags);
	/* Of a connection that is gone: teardown emptied the catalog already. */
	stale = !l->live || l->conn_gen != gen;
	if (!stale) {
		t = l->catalog;
		l->catalog = l->catalog_spare;
		l->catalog_spare = t;
		l->nr_catalog = cat.nr_entries;
	}
	if (!stale && l->state == ENGRAM_LINK_CONNECTING) {
		trace_engram_link_state(l->id, l->state, ENGRAM_LINK_UP, 0);
		engram_event_link(ENGRAM_EVENT_LINK_STATE, l->id, l->url.text, ENGRAM_LINK_UP, 0);
		l->state = ENGRAM_LINK_UP;
		l->since = ktime_get();
		l->backoff_ms = 0;
	}
	spin_unlock_irqrestore(&l->lock, flags);
}

/**
 * engram_link_frame_catalog() - take a CATALOG frame
 * @l: the link
 * @buf: the frame
 * @len: its length
 *
 * Copied for engram_link_cat_work(), which reads it; any context.  The
 * copy replaces a catalog still waiting to be read, which is counted.
 *
 * Return: 0, or -EPROTO for a frame longer than any catalog.
 */
int engram_link_frame_catalog(struct engram_link *l, const void *buf, u32 len)
{
	unsigned long flags, delay = 0;
	bool waiting;

	if (len > ENGRAM_WIRE_MAX_CATALOG_BYTES) {
		pr_warn_ratelimited("link %u: bad catalog: %u bytes\n", l->id, len);
		return -EPROTO;
	}
	spin_lock_irqsave(&l->cat_lock, flags);
	waiting = l->cat_len;
	memcpy(l->cat_new, buf, len);
	l->cat_len = len;
	l->cat_gen = READ_ONCE(l->conn_gen);
	if (time_before(jiffies, l->cat_next))
		delay = l->cat_next - jiffies;
	spin_unlock_irqrestore(&l->cat_lock, flags);
	if (waiting) {
		engram_count(&l->stats, ENGRAM_STAT_CATALOGS_REPLACED);
		engram_count(&engram_global_stats, ENGRAM_STAT_CATALOGS_REPLACED);
		return 0;
	}
	queue_delayed_work(engram_link_wq, &l->cat_work, delay);
	return 0;
}

/*
 * Tear the connection down: no new fetch, the transport quiesced and every
 * fetch of the connection ended, then freed.
 */
static void engram_link_teardown(struct engram_link *l, int error)
{
	unsigned long flags;

	lockdep_assert_held(&l->mutex);
	spin_lock_irqsave(&l->lock, flags);
	l->live = false;
	spin_unlock_irqrestore(&l->lock, flags);
	/* A TCP sender may hold conn_sem while it blocks on the socket. */
	if (l->ops->stop)
		l->ops->stop(l);
	down_write(&l->conn_sem);
	l->ops->teardown(l, error);
	/* Whatever the transport left (it should leave nothing) ends too. */
	engram_link_end_all(l, error);
	spin_lock_irqsave(&l->lock, flags);
	l->nr_catalog = 0;
	l->nr_slots = 0;
	l->hb_ticket = 0;
	l->probe_since = 0;
	spin_unlock_irqrestore(&l->lock, flags);
	up_write(&l->conn_sem);
}

/**
 * engram_link_fetch_req() - the REQUEST of a fetch, as both transports send it
 * @f: the fetch, cut into its pieces
 * @req: filled in; each range has its piece's length, and an RDMA transport
 *	adds the address and key of the piece's registration
 */
void engram_link_fetch_req(const struct engram_fetch *f, struct engram_wire_req *req)
{
	unsigned int i;

	memset(req, 0, sizeof(*req));
	req->ticket = f->ticket;
	req->generation = f->generation;
	memcpy(req->digest, f->digest, sizeof(req->digest));
	req->nr_rows = f->nr_rows;
	req->stride = f->stride;
	req->nr_ranges = f->nr_pieces;
	if (f->places)
		req->flags |= ENGRAM_WIRE_REQ_SLOTS;
	for (i = 0; i < f->nr_pieces; i++)
		req->ranges[i].length = f->pieces[i].len;
}

/**
 * engram_link_local_params() - the hello a client offers
 * @p: filled with our version range and limits
 */
void engram_link_local_params(struct engram_wire_params *p)
{
	engram_wire_offer(p, ENGRAM_WIRE_OFFER_ROWS, ENGRAM_WIRE_OFFER_INFLIGHT,
			  engram_params_protocol_version());
}

static void engram_link_connect_work(struct work_struct *work)
{
	struct engram_link *l = container_of(to_delayed_work(work), struct engram_link,
					     connect_work);
	int ret;

	mutex_lock(&l->mutex);
	if (l->deleted || l->live) {
		mutex_unlock(&l->mutex);
		return;
	}
	/* Every attempt after the link had a connection is a reconnect. */
	if (l->connects) {
		engram_count(&l->stats, ENGRAM_STAT_RECONNECTS);
		engram_count(&engram_global_stats, ENGRAM_STAT_RECONNECTS);
	}
	engram_link_set_state(l, ENGRAM_LINK_CONNECTING, 0);
	ret = l->ops->connect(l);
	if (ret) {
		engram_link_teardown(l, -ENOTCONN);
		engram_link_set_state(l, ENGRAM_LINK_DOWN, ret);
		pr_info_ratelimited("link %u (%s): connect failed (%d), retrying\n",
				    l->id, l->url.text, ret);
		engram_link_schedule_connect(l);
	} else if (l->ops->device && l->ops->device(l)) {
		pr_info("link %u (%s): connected on %s\n", l->id, l->url.text,
			l->ops->device(l));
	} else {
		pr_info("link %u (%s): connected\n", l->id, l->url.text);
	}
	mutex_unlock(&l->mutex);
}

/* Connection lost or broken: tear down, then retry. */
static void engram_link_down_locked(struct engram_link *l, int error)
{
	lockdep_assert_held(&l->mutex);
	if (!l->live)
		return;
	/*
	 * A timeout names the link's error; the fetches that did not time out
	 * themselves were cut off with the connection (the late ones carry
	 * their ETIMEDOUT already).
	 */
	engram_link_teardown(l, error == -ETIMEDOUT ? -ECONNRESET : error);
	engram_count(&l->stats, ENGRAM_STAT_TRANSPORT_ERRORS);
	engram_link_set_state(l, ENGRAM_LINK_DOWN, error);
	pr_info("link %u (%s): down (%d)\n", l->id, l->url.text, error);
	engram_link_schedule_connect(l);
}

static void engram_link_down_work(struct work_struct *work)
{
	struct engram_link *l = container_of(work, struct engram_link, down_work);
	unsigned long flags;
	bool mine;
	int error;

	mutex_lock(&l->mutex);
	spin_lock_irqsave(&l->lock, flags);
	/* Only the connection the request was made for. */
	mine = l->down_pending && l->down_gen == l->conn_gen;
	error = l->down_error;
	l->down_pending = false;
	spin_unlock_irqrestore(&l->lock, flags);
	if (mine)
		engram_link_down_locked(l, error);
	mutex_unlock(&l->mutex);
}

/*
 * Is a fetch on the wire whose deadline is still ahead?  Its deadline
 * watches the connection then: a server busy writing a long response may
 * answer the heartbeat only after it, and the client hears nothing of
 * RDMA WRITEs, so silence is no proof of death while a fetch runs.
 */
static bool engram_link_deadline_pending_locked(struct engram_link *l, ktime_t now)
{
	struct engram_fetch *f;
	unsigned int i;

	lockdep_assert_held(&l->lock);
	for (i = 0; i < ENGRAM_LINK_MAX_SLOTS; i++) {
		f = l->slot_fetch[i];
		if (f && !f->finished && !engram_link_answered(l, f) &&
		    ktime_before(now, f->deadline))
			return true;
	}
	return false;
}

/*
 * The heartbeat.  Every heartbeat_ms, a link that is up and has no
 * heartbeat on the wire sends one; the server echoes it.  The link is
 * broken when, since the oldest unanswered heartbeat was due, nothing at
 * all has come from the server for heartbeat_timeout_ms: any frame is
 * proof of life, so a link busy with large responses stays up while its
 * echo waits behind them, and a quiet one is still probed (while a fetch
 * is on the wire within its deadline, that deadline watches instead: the
 * client hears nothing of the WRITEs of a long response).  At most one
 * heartbeat is outstanding, which is what the server's spare receive
 * allows for; heartbeats take no fetch slot, so they never make a fetch
 * fail with EBUSY.  The worker runs for as long as the link exists and
 * never sleeps on the connection: a break is left to down_work.
 */
static void engram_link_hb_work(struct work_struct *work)
{
	struct engram_link *l = container_of(to_delayed_work(work), struct engram_link,
					     hb_work);
	unsigned int every = engram_params_heartbeat_ms();
	unsigned int limit = engram_params_heartbeat_timeout_ms();
	bool dead = false, send = false, stuck = false;
	ktime_t now = ktime_get();
	unsigned long flags;
	u64 ticket = 0;
	u32 gen = 0;
	int ret;

	spin_lock_irqsave(&l->lock, flags);
	/*
	 * Connected but no catalog: a server that dies right after the hello
	 * leaves an idle QP that nothing would ever notice.
	 */
	if (l->live && l->state == ENGRAM_LINK_CONNECTING &&
	    ktime_ms_delta(now, l->last_rx) >= limit) {
		gen = l->conn_gen;
		stuck = true;
	}
	if (every && l->live && l->state == ENGRAM_LINK_UP) {
		gen = l->conn_gen;
		if (l->probe_since) {
			ktime_t heard = ktime_after(l->last_rx, l->probe_since) ?
					l->last_rx : l->probe_since;

			dead = ktime_ms_delta(now, heard) >= limit &&
			       !engram_link_deadline_pending_locked(l, now);
		}
		if (!dead && !l->hb_ticket) {
			ticket = ++l->next_ticket;
			l->hb_ticket = ticket;
			l->hb_sent = now;
			if (!l->probe_since)
				l->probe_since = now;
			send = true;
		}
	}
	spin_unlock_irqrestore(&l->lock, flags);

	if (dead) {
		engram_count(&l->stats, ENGRAM_STAT_HEARTBEATS_MISSED);
		engram_count(&engram_global_stats, ENGRAM_STAT_HEARTBEATS_MISSED);
		pr_info_ratelimited("link %u (%s): no answer for %u ms, breaking the connection\n",
				    l->id, l->url.text, limit);
		engram_link_fail_gen(l, gen, -ETIMEDOUT);
	} else if (stuck) {
		pr_info_ratelimited("link %u (%s): no catalog %u ms after connecting, breaking the connection\n",
				    l->id, l->url.text, limit);
		engram_link_fail_gen(l, gen, -ETIMEDOUT);
	} else if (send) {
		/* Not taken: a teardown runs, and this heartbeat is moot. */
		ret = -EBUSY;
		if (down_read_trylock(&l->conn_sem)) {
			if (READ_ONCE(l->live) && READ_ONCE(l->conn_gen) == gen)
				ret = l->ops->heartbeat(l, ticket);
			up_read(&l->conn_sem);
		}
		if (ret) {
			/* Not sent: try again at the next tick; the clock runs on. */
			spin_lock_irqsave(&l->lock, flags);
			if (l->hb_ticket == ticket)
				l->hb_ticket = 0;
			spin_unlock_irqrestore(&l->lock, flags);
		}
		if (ret && ret != -EBUSY)
			engram_link_fail_gen(l, gen, -ECONNRESET);
	}
	if (!READ_ONCE(l->deleted) && !READ_ONCE(engram_links_exiting))
		queue_delayed_work(engram_link_wq, &l->hb_work,
				   msecs_to_jiffies(every ? every : ENGRAM_LINK_HB_IDLE_MS));
}

/* Have deadline_work run by @when, unless it already runs earlier. */
static void engram_link_deadline_arm_locked(struct engram_link *l, ktime_t when)
{
	s64 ns;

	lockdep_assert_held(&l->lock);
	if (l->deadline_armed && !ktime_before(when, l->deadline_next))
		return;
	l->deadline_armed = true;
	l->deadline_next = when;
	ns = ktime_to_ns(ktime_sub(when, ktime_get()));
	mod_delayed_work(engram_link_wq, &l->deadline_work,
			 ns > 0 ? nsecs_to_jiffies(ns) + 1 : 0);
}

/*
 * Mark @f late: it fails with ETIMEDOUT, and the caller breaks the
 * connection so nothing of it can land afterwards.  False when it was
 * answered or ended meanwhile (its rows are in, or it failed otherwise).
 */
static bool engram_link_expire_locked(struct engram_link *l, struct engram_fetch *f)
{
	lockdep_assert_held(&l->lock);
	if (f->finished || f->error || engram_link_answered(l, f))
		return false;
	f->error = -ETIMEDOUT;
	trace_engram_fetch_timeout(l->id, f->ticket, f->nr_rows,
				   ktime_to_ns(ktime_sub(ktime_get(), f->deadline)));
	engram_count(&l->stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	engram_count(&engram_global_stats, ENGRAM_STAT_FETCH_TIMEOUTS);
	return true;
}

/*
 * The deadline holds even when nobody waits (SUBMIT, then poll() or no
 * call at all): a fetch still unanswered at its deadline fails with
 * ETIMEDOUT and breaks the connection, the other fetches on it fail with
 * ECONNRESET, as the nvme host's timeout handler does.
 */
static void engram_link_deadline_work(struct work_struct *work)
{
	struct engram_link *l = container_of(to_delayed_work(work), struct engram_link,
					     deadline_work);
	ktime_t now = ktime_get(), next = 0;
	struct engram_fetch *f;
	unsigned long flags;
	bool late = false;
	unsigned int i;
	u32 gen;

	spin_lock_irqsave(&l->lock, flags);
	l->deadline_armed = false;
	gen = l->conn_gen;
	for (i = 0; i < ENGRAM_LINK_MAX_SLOTS; i++) {
		f = l->slot_fetch[i];
		if (!f || f->finished || f->error || engram_link_answered(l, f))
			continue;
		if (!ktime_before(now, f->deadline))
			late |= engram_link_expire_locked(l, f);
		else if (!next || ktime_before(f->deadline, next))
			next = f->deadline;
	}
	if (next)
		engram_link_deadline_arm_locked(l, next);
	spin_unlock_irqrestore(&l->lock, flags);
	if (late)
		engram_link_fail_gen(l, gen, -ETIMEDOUT);
}

/* --- fetches --- */

/* A free slot of queues [@first, @first + @n), the CPU's among them first. */
static unsigned long engram_link_find_slot_in(struct engram_link *l, unsigned int first,
					      unsigned int n)
{
	unsigned int q = first + raw_smp_processor_id() % n;
	unsigned long end = (q + 1) * l->q_slots, last = (first + n) * l->q_slots, slot;

	slot = find_next_zero_bit(l->slots_busy, end, q * l->q_slots);
	if (slot < end)
		return slot;
	slot = find_next_zero_bit(l->slots_busy, last, first * l->q_slots);
	return slot < last ? slot : l->nr_slots;
}

/*
 * A free slot, on the submitting CPU's queue if it has one, as nvme-rdma
 * maps a CPU to its queue: callers on different CPUs then use different
 * queue pairs, completion queues and (on a NIC) interrupt vectors.  Any
 * other queue's slot if that one is full.  A fetch whose caller busy-polls
 * takes a poll queue's slot first, and another only when those are full
 * (its completion then comes in softirq as any other); no other fetch
 * ever takes a poll queue's, whose completions only a poller reaps.
 * l->lock held.
 *
 * Return: the slot, or l->nr_slots when every slot it may take is busy.
 */
static unsigned long engram_link_find_slot(struct engram_link *l, bool polled)
{
	unsigned int irq_queues = l->nr_queues - l->nr_poll_queues;
	unsigned long slot;

	lockdep_assert_held(&l->lock);
	if (polled && l->nr_poll_queues) {
		slot = engram_link_find_slot_in(l, irq_queues, l->nr_poll_queues);
		if (slot < l->nr_slots)
			return slot;
	}
	return engram_link_find_slot_in(l, 0, irq_queues);
}

/**
 * engram_link_submit() - put a fetch on the wire
 * @l: the link the fetch's table was opened on
 * @f: the fetch, its pieces and rows filled in
 *
 * Takes the link's reference on @f on success.  Process context.
 *
 * Return: 0; -ENOTCONN while the link is down (at once, without waiting
 * for a reconnect); -E2BIG above the negotiated rows, ranges or request
 * bytes, for row places below version 3, or for a piece larger than one
 * registration; -EBUSY when max_inflight fetches
 * are out; -ENOMEM; -EIO when posting failed (the connection is broken).
 */
int engram_link_submit(struct engram_link *l, struct engram_fetch *f)
{
	unsigned long flags, slot = 0;
	int ret;

	down_read(&l->conn_sem);
	engram_link_lock_fetch(l, flags);
	if (!l->live || l->state != ENGRAM_LINK_UP) {
		ret = -ENOTCONN;
	} else if (f->nr_rows > l->neg.max_rows || f->nr_pieces > l->neg.max_ranges) {
		ret = -E2BIG;
	} else if (f->places &&
		   (l->neg.version_max < ENGRAM_WIRE_VERSION_SHARDS ||
		    engram_wire_request_size_slots(f->nr_rows, f->nr_pieces) >
		    l->neg.max_request_bytes)) {
		/* Row places are version 3's, and take room in the request. */
		ret = -E2BIG;
	} else {
		slot = engram_link_find_slot(l, f->polled);
		ret = slot < l->nr_slots ? 0 : -EBUSY;
		if (!ret) {
			__set_bit(slot, l->slots_busy);
			f->poll_q = slot >= (l->nr_queues - l->nr_poll_queues) * l->q_slots;
		}
	}
	if (!ret) {
		f->ticket = ++l->next_ticket;
		f->conn_gen = l->conn_gen;
		trace_engram_fetch_submit(l->id, f->ticket, f->nr_rows,
					  ktime_to_ns(ktime_sub(f->deadline, ktime_get())));
	}
	spin_unlock_irqrestore(&l->lock, flags);
	if (!ret) {
		f->slot = slot;
		ret = l->ops->submit(l, f);
		if (ret) {
			engram_link_lock_fetch(l, flags);
			__clear_bit(slot, l->slots_busy);
			f->slot = -1;
			f->poll_q = false;
			spin_unlock_irqrestore(&l->lock, flags);
		}
	}
	up_read(&l->conn_sem);
	return ret;
}

/**
 * engram_link_reap() - reap a fetch's completions if its waiter must
 * @f: a submitted fetch, or a replica group's
 * @now: the caller busy-polls: reap here, else leave it to a worker
 *
 * A fetch on a poll queue is reaped by whoever waits for it: its poller
 * (@now), or a worker of the transport's while it waits another way.  A
 * replica group's fetch is on no link itself: its parts on poll queues are
 * reaped the same way (f->reap).  Nothing for any other fetch.  Process
 * context, no lock of the fetch's or its link's held.
 */
void engram_link_reap(struct engram_fetch *f, bool now)
{
	if (engram_fetch_done(f))
		return;
	if (f->poll_q)
		f->link->ops->reap(f->link, f, now);
	else if (f->reap)
		f->reap(f, now);
}

/**
 * engram_link_break_fetch() - end a fetch now, breaking its connection
 * @f: a fetch submitted on a link
 *
 * @f is past its deadline (or its fd is closing): end it now.  A fetch
 * still waiting for its server is marked timed out and its connection
 * broken, unless a reconnect replaced that connection meanwhile (whose
 * teardown ended @f already).  One whose answer is in, with only its keys
 * left to invalidate, gets a moment for that first; so does one whose
 * invalidation failed, for the teardown its failure asked for.  Returns
 * when @f is done: after that nothing of it can land any more.  Process
 * context.
 */
void engram_link_break_fetch(struct engram_fetch *f)
{
	struct engram_link *l = f->link;
	unsigned long flags;
	bool late;

	engram_link_lock_fetch(l, flags);
	late = engram_link_expire_locked(l, f);
	spin_unlock_irqrestore(&l->lock, flags);
	engram_link_reap(f, false);
	if (!late)
		wait_event_timeout(*f->wq, engram_fetch_done(f),
				   msecs_to_jiffies(ENGRAM_LINK_INV_GRACE_MS));
	mutex_lock(&l->mutex);
	if (!engram_fetch_done(f) && l->live && l->conn_gen == f->conn_gen)
		engram_link_down_locked(l, -ETIMEDOUT);
	mutex_unlock(&l->mutex);
	/* The break finished every fetch of that connection, this one included. */
	wait_event(*f->wq, engram_fetch_done(f));
}

/* Past its deadline: a replica group's fetch ends its parts its own way. */
static void engram_link_expire(struct engram_fetch *f)
{
	if (f->expire)
		f->expire(f);
	else
		engram_link_break_fetch(f);
}

/**
 * engram_link_fetch_wait() - wait for a submitted fetch to end
 * @f: the fetch
 * @timeout_ns: how long to wait at most; 0 waits until the fetch's deadline
 * @busy: poll instead of sleeping
 *
 * When the fetch's deadline passes first, the connection is broken (queue
 * pair drained and destroyed) before this returns, so no late WRITE can land
 * in the destination, and the fetch fails with -ETIMEDOUT.  Process context.
 *
 * Return: 0 when the fetch has ended (its own result is in @f), -EAGAIN when
 * @timeout_ns passed first, -EINTR on a signal (the fetch goes on).
 */
int engram_link_fetch_wait(struct engram_fetch *f, u64 timeout_ns, bool busy)
{
	ktime_t until = f->deadline;
	bool own_deadline = true;
	long left;

	timeout_ns = min_t(u64, timeout_ns, ENGRAM_FETCH_MAX_TIMEOUT_NS);
	if (timeout_ns && ktime_before(ktime_add_ns(ktime_get(), timeout_ns), until)) {
		until = ktime_add_ns(ktime_get(), timeout_ns);
		own_deadline = false;
	}
	while (!engram_fetch_done(f)) {
		ktime_t now = ktime_get();

		if (!ktime_before(now, until))
			break;
		if (busy) {
			if (signal_pending(current)) {
				engram_link_reap(f, false);
				return -EINTR;
			}
			engram_link_reap(f, true);
			cond_resched();
			continue;
		}
		engram_link_reap(f, false);
		left = nsecs_to_jiffies(ktime_to_ns(ktime_sub(until, now))) + 1;
		left = wait_event_interruptible_timeout(*f->wq, engram_fetch_done(f), left);
		if (left < 0)
			return -EINTR;
	}
	if (engram_fetch_done(f))
		return 0;
	if (!own_deadline) {
		engram_link_reap(f, false);
		return -EAGAIN;
	}
	engram_link_expire(f);
	return 0;
}

/**
 * engram_link_fetch_end() - make sure a fetch is over, without signals
 * @f: a submitted fetch
 *
 * For a closing fd or a dying process: waits (uninterruptibly) until the
 * fetch ends or its deadline passes, and then breaks the connection, so the
 * buffer may be unpinned safely afterwards.  Process context.
 */
void engram_link_fetch_end(struct engram_fetch *f)
{
	s64 left = ktime_to_ns(ktime_sub(f->deadline, ktime_get()));

	/* A dying process is not kept in D state for a long deadline. */
	left = min_t(s64, left, ENGRAM_LINK_CLOSE_WAIT_MS * NSEC_PER_MSEC);
	engram_link_reap(f, false);
	if (left > 0)
		wait_event_timeout(*f->wq, engram_fetch_done(f), nsecs_to_jiffies(left) + 1);
	if (engram_fetch_done(f))
		return;
	engram_link_expire(f);
}

/**
 * engram_link_fetch_sync_rows() - give the rows a fetch placed to the CPU
 * @f: an ended fetch (or part) that succeeded over RDMA (f->ibdev set)
 *
 * Syncs the bytes of each of its rows where it placed them, and nothing
 * else of its pieces: a part with row places spans rows of other parts,
 * and stride gaps are the caller's.  Rows fill the pieces in order, each
 * whole in one piece (engram_pieces_cut()), at place * stride of their
 * concatenation.  Any context: a fetch with a completion word is synced
 * where it ends, before its word is set.
 */
void engram_link_fetch_sync_rows(struct engram_fetch *f)
{
	struct engram_pieces_cursor cur = {};
	u64 len[ENGRAM_WIRE_MAX_RANGES], off, run_off = 0, run_len = 0;
	unsigned int j, run_piece = 0;
	u32 i;

	if (!f->ibdev || !f->nr_pieces)
		return;
	if (!f->places && f->stride == ENGRAM_ROW_BYTES) {
		/* Rows back to back: the pieces are exactly their bytes. */
		for (j = 0; j < f->nr_pieces; j++)
			engram_ubuf_sync(f->pieces[j].buf, f->ibdev, f->pieces[j].off,
					 f->pieces[j].len, false);
		return;
	}
	for (j = 0; j < f->nr_pieces; j++)
		len[j] = f->pieces[j].len;
	/* Rows that touch in one piece are one sync: one map lookup, not one a row. */
	for (i = 0; i < f->nr_rows; i++) {
		u64 pos = (u64)(f->places ? f->places[i] : i) * f->stride;

		if (WARN_ON_ONCE(engram_pieces_locate(len, f->nr_pieces, pos, ENGRAM_ROW_BYTES,
						      &cur, &off)))
			break;
		if (run_len && cur.piece == run_piece && off == run_off + run_len) {
			run_len += ENGRAM_ROW_BYTES;
			continue;
		}
		if (run_len)
			engram_ubuf_sync(f->pieces[run_piece].buf, f->ibdev,
					 f->pieces[run_piece].off + run_off, run_len, false);
		run_piece = cur.piece;
		run_off = off;
		run_len = ENGRAM_ROW_BYTES;
	}
	if (run_len)
		engram_ubuf_sync(f->pieces[run_piece].buf, f->ibdev,
				 f->pieces[run_piece].off + run_off, run_len, false);
}

/**
 * engram_link_count() - add to one of a link's counters
 * @l: the link
 * @stat: ENGRAM_STAT_*
 * @n: how much
 */
void engram_link_count(struct engram_link *l, enum engram_stat stat, u64 n)
{
	engram_count_add(&l->stats, stat, n);
}

/**
 * engram_link_mr_pages() - pages one registration of this link covers
 * @l: the link
 *
 * Return: the limit of the current RDMA connection; no limit (U32_MAX)
 * over TCP, which registers nothing, and while down, so that a fetch then
 * fails on submit with -ENOTCONN rather than for its size.
 */
u32 engram_link_mr_pages(const struct engram_link *l)
{
	u32 n = READ_ONCE(l->mr_pages);

	return n ? n : U32_MAX;
}

/* --- a link's life (link_admin.c keeps the list) --- */

/**
 * engram_link_alloc() - a new link, not connecting yet
 * @u: its remote URL
 * @ops: its transport
 *
 * Return: the link, one reference held, or NULL when out of memory.
 */
struct engram_link *engram_link_alloc(const struct engram_url *u,
				      const struct engram_link_ops *ops)
{
	struct engram_link *l;
	int id;

	l = ops->alloc();
	if (!l)
		return NULL;
	l->ops = ops;
	l->catalog = kvcalloc(ENGRAM_MAX_TABLES, sizeof(*l->catalog), GFP_KERNEL);
	l->catalog_spare = kvcalloc(ENGRAM_MAX_TABLES, sizeof(*l->catalog), GFP_KERNEL);
	l->cat_new = kvmalloc(ENGRAM_WIRE_MAX_CATALOG_BYTES, GFP_KERNEL);
	l->cat_read = kvmalloc(ENGRAM_WIRE_MAX_CATALOG_BYTES, GFP_KERNEL);
	/*
	 * Past the last id given, so that a script or a table opened through
	 * a link that was deleted never meets another link under its id; only
	 * after 2^31 links does it wrap.
	 */
	mutex_lock(&engram_link_id_mutex);
	id = ida_alloc_range(&engram_link_ida, engram_link_next_id, INT_MAX, GFP_KERNEL);
	if (id == -ENOSPC)
		id = ida_alloc_min(&engram_link_ida, 1, GFP_KERNEL);
	if (id >= 0)
		engram_link_next_id = id == INT_MAX ? 1 : id + 1;
	mutex_unlock(&engram_link_id_mutex);
	if (!l->catalog || !l->catalog_spare || !l->cat_new || !l->cat_read || id < 0) {
		if (id >= 0)
			ida_free(&engram_link_ida, id);
		kvfree(l->catalog);
		kvfree(l->catalog_spare);
		kvfree(l->cat_new);
		kvfree(l->cat_read);
		ops->free(l);
		return NULL;
	}
	l->id = id;
	kref_init(&l->ref);
	l->url = *u;
	mutex_init(&l->mutex);
	init_rwsem(&l->conn_sem);
	spin_lock_init(&l->lock);
	spin_lock_init(&l->cat_lock);
	INIT_DELAYED_WORK(&l->connect_work, engram_link_connect_work);
	INIT_DELAYED_WORK(&l->hb_work, engram_link_hb_work);
	INIT_DELAYED_WORK(&l->cat_work, engram_link_cat_work);
	INIT_WORK(&l->down_work, engram_link_down_work);
	INIT_DELAYED_WORK(&l->deadline_work, engram_link_deadline_work);
	l->state = ENGRAM_LINK_CONNECTING;
	l->since = ktime_get();
	l->nr_queues = 1;
	return l;
}

/**
 * engram_link_start() - start connecting a new link, and its heartbeat
 * @l: from engram_link_alloc()
 */
void engram_link_start(struct engram_link *l)
{
	queue_delayed_work(engram_link_wq, &l->connect_work, 0);
	queue_delayed_work(engram_link_wq, &l->hb_work, 0);
}

/**
 * engram_link_bounce_get() - a bounce buffer for a gathered part
 * @l: the link the part goes to
 * @out: ENGRAM_BOUNCE_BYTES of kernel pages, one reference
 *
 * One the link kept, mapped already for its device, or a new one.  Its
 * bytes are zero wherever a row may land.  Process context.
 *
 * Return: 0, or -ENOMEM.
 */
int engram_link_bounce_get(struct engram_link *l, struct engram_ubuf **out)
{
	unsigned long flags;

	spin_lock_irqsave(&l->lock, flags);
	*out = l->nr_bounce ? l->bounce[--l->nr_bounce] : NULL;
	spin_unlock_irqrestore(&l->lock, flags);
	if (*out)
		return 0;
	return engram_ubuf_create_kernel(ENGRAM_BOUNCE_BYTES, out);
}

/**
 * engram_link_bounce_put() - give a bounce buffer back, its rows used
 * @l: the link it came from
 * @b: the buffer, with the caller's only reference, nothing on a wire
 * @used: the bytes from its start that a fetch may have written
 *
 * Those are zeroed (a row of one fetch must never show in another, even
 * where a host wrote nothing) and the buffer kept for the link's next
 * gathered part; freed when the link keeps enough, or is stopped.
 * Process context.
 */
void engram_link_bounce_put(struct engram_link *l, struct engram_ubuf *b, u64 used)
{
	unsigned long flags;
	bool kept = false;

	engram_ubuf_zero(b, used);
	spin_lock_irqsave(&l->lock, flags);
	if (!l->bounce_closed && l->nr_bounce < ENGRAM_LINK_BOUNCE_CACHE) {
		l->bounce[l->nr_bounce++] = b;
		kept = true;
	}
	spin_unlock_irqrestore(&l->lock, flags);
	if (!kept)
		engram_ubuf_put(b);
}

/* A stopped link keeps no bounce buffer: their maps go with them. */
static void engram_link_bounce_drain(struct engram_link *l)
{
	struct engram_ubuf *b[ENGRAM_LINK_BOUNCE_CACHE];
	unsigned long flags;
	unsigned int n, i;

	spin_lock_irqsave(&l->lock, flags);
	l->bounce_closed = true;
	n = l->nr_bounce;
	memcpy(b, l->bounce, n * sizeof(b[0]));
	l->nr_bounce = 0;
	spin_unlock_irqrestore(&l->lock, flags);
	for (i = 0; i < n; i++)
		engram_ubuf_put(b[i]);
}

/**
 * engram_link_stop() - stop a link for good
 * @l: the link
 *
 * No reconnect, the connection gone, every fetch of it ended.  Process
 * context; the caller then takes it off the list and puts it.
 */
void engram_link_stop(struct engram_link *l)
{
	mutex_lock(&l->mutex);
	l->deleted = true;
	mutex_unlock(&l->mutex);
	cancel_delayed_work_sync(&l->connect_work);
	cancel_delayed_work_sync(&l->hb_work);
	cancel_work_sync(&l->down_work);
	mutex_lock(&l->mutex);
	engram_link_teardown(l, -ESHUTDOWN);
	engram_link_set_state(l, ENGRAM_LINK_DOWN, -ESHUTDOWN);
	mutex_unlock(&l->mutex);
	/* A CQ callback may have queued them again during the teardown. */
	cancel_delayed_work_sync(&l->deadline_work);
	cancel_delayed_work_sync(&l->cat_work);
	cancel_work_sync(&l->down_work);
	engram_link_bounce_drain(l);
}

/**
 * engram_link_drop_device() - tear a link down if its connection uses @ibdev
 * @l: the link
 * @ibdev: a departing device
 *
 * Synchronous; the link reconnects later, on whatever device then carries
 * its address.
 */
void engram_link_drop_device(struct engram_link *l, struct ib_device *ibdev)
{
	/* A TCP link has no device; do not wait for its connect. */
	if (!l->ops->on_device)
		return;
	mutex_lock(&l->mutex);
	if (l->ops->on_device(l, ibdev)) {
		engram_link_teardown(l, -ENODEV);
		engram_link_set_state(l, ENGRAM_LINK_DOWN, -ENODEV);
		engram_link_schedule_connect(l);
	}
	mutex_unlock(&l->mutex);
}

/**
 * engram_link_init() - the links' workqueue
 *
 * Return: 0 or -ENOMEM.
 */
int engram_link_init(void)
{
	engram_link_wq = alloc_workqueue("engram_link", WQ_UNBOUND | WQ_MEM_RECLAIM, 0);
	return engram_link_wq ? 0 : -ENOMEM;
}

/**
 * engram_link_shutdown() - the module is going: no reconnect from now on
 */
void engram_link_shutdown(void)
{
	WRITE_ONCE(engram_links_exiting, true);
}

/**
 * engram_link_exit() - once every link has stopped
 */
void engram_link_exit(void)
{
	destroy_workqueue(engram_link_wq);
	engram_link_wq = NULL;
}
