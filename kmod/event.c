// SPDX-License-Identifier: GPL-2.0
/*
 * The event ring between where a state changes and the netlink group
 * (event.h).  A monitor that stops reading loses events, never the module's
 * memory: the ring is fixed, a full ring drops the new event, and the count
 * of what was lost reaches the members on the next event or, once the ring
 * is empty, on an ENGRAM_EVENT_LOST of its own.
 */
#include <linux/jiffies.h>
#include <linux/spinlock.h>
#include <linux/string.h>
#include <linux/workqueue.h>

#include "event.h"

/* A burst of link changes (a host going away with every link) fits. */
#define ENGRAM_EVENT_RING	256
/* After a send that failed (no memory): try again this much later. */
#define ENGRAM_EVENT_RETRY	(HZ / 10)

static struct engram_event_rec engram_event_ring[ENGRAM_EVENT_RING];
static unsigned int engram_event_head, engram_event_count, engram_event_lost;
/* Set, under the lock, before the work is cancelled for the last time. */
static bool engram_event_closed = true;
static DEFINE_SPINLOCK(engram_event_lock);
static bool (*engram_event_wanted)(void);
static int (*engram_event_send)(const struct engram_event_rec *ev);

static void engram_event_work_fn(struct work_struct *work);
static DECLARE_DELAYED_WORK(engram_event_work, engram_event_work_fn);

/*
 * The next record to send, into @ev: the ring's oldest, else a LOST record
 * for a loss no event has carried.  False when there is nothing to send,
 * or nobody left to send it to (then nothing is owed to a later member).
 * Under engram_event_lock.
 */
static bool engram_event_next(struct engram_event_rec *ev, bool wanted)
{
	if (engram_event_closed)
		return false;
	if (!wanted) {
		engram_event_count = 0;
		engram_event_lost = 0;
		return false;
	}
	if (engram_event_count) {
		*ev = engram_event_ring[engram_event_head];
		engram_event_head = (engram_event_head + 1) % ENGRAM_EVENT_RING;
		engram_event_count--;
		return true;
	}
	if (!engram_event_lost)
		return false;
	memset(ev, 0, sizeof(*ev));
	ev->event = ENGRAM_EVENT_LOST;
	ev->lost = engram_event_lost;
	engram_event_lost = 0;
	return true;
}

static void engram_event_work_fn(struct work_struct *work)
{
	typeof(engram_event_wanted) wanted = READ_ONCE(engram_event_wanted);
	typeof(engram_event_send) send = READ_ONCE(engram_event_send);
	struct engram_event_rec ev;
	unsigned long flags;
	unsigned int i;
	bool more;

	/* At most a ring's worth per run, so other work gets the CPU. */
	for (i = 0; i <= ENGRAM_EVENT_RING; i++) {
		/* wanted() reads the group's members under RCU, no lock of ours. */
		bool listening = wanted && wanted();

		spin_lock_irqsave(&engram_event_lock, flags);
		more = engram_event_next(&ev, listening);
		spin_unlock_irqrestore(&engram_event_lock, flags);
		if (!more)
			return;
		if (!send || !send(&ev))
			continue;
		/*
		 * Not sent: it and the loss it carried are owed, and told by
		 * the next event or by a LOST record once the ring is empty.
		 * Later, not now: what failed was an allocation.
		 */
		spin_lock_irqsave(&engram_event_lock, flags);
		engram_event_lost += ev.lost + (ev.event != ENGRAM_EVENT_LOST);
		if (!engram_event_closed)
			mod_delayed_work(system_wq, &engram_event_work, ENGRAM_EVENT_RETRY);
		spin_unlock_irqrestore(&engram_event_lock, flags);
		return;
	}
	spin_lock_irqsave(&engram_event_lock, flags);
	if (!engram_event_closed)
		mod_delayed_work(system_wq, &engram_event_work, 0);
	spin_unlock_irqrestore(&engram_event_lock, flags);
}

static void engram_event_raise(u8 event, u32 id, const char *name, u8 state, u8 verify,
			       int error)
{
	typeof(engram_event_wanted) wanted = READ_ONCE(engram_event_wanted);
	struct engram_event_rec *ev;
	unsigned long flags;

	if (!wanted || !wanted()) {
		/* Nobody listens: a loss counted for an earlier member is moot. */
		if (READ_ONCE(engram_event_lost)) {
			spin_lock_irqsave(&engram_event_lock, flags);
			engram_event_lost = 0;
			spin_unlock_irqrestore(&engram_event_lock, flags);
		}
		return;
	}
	spin_lock_irqsave(&engram_event_lock, flags);
	if (engram_event_closed) {
		spin_unlock_irqrestore(&engram_event_lock, flags);
		return;
	}
	if (engram_event_count == ENGRAM_EVENT_RING) {
		engram_event_lost++;
		spin_unlock_irqrestore(&engram_event_lock, flags);
		return;
	}
	ev = &engram_event_ring[(engram_event_head + engram_event_count) % ENGRAM_EVENT_RING];
	engram_event_count++;
	ev->event = event;
	ev->state = state;
	ev->verify = verify;
	ev->id = id;
	ev->error = error < 0 ? -error : error;
	ev->lost = engram_event_lost;
	engram_event_lost = 0;
	strscpy(ev->name, name ? name : "", sizeof(ev->name));
	/*
	 * Under the lock: once engram_event_register() has closed the ring,
	 * nobody can queue the work behind its cancel.  Now, even if a retry
	 * is due later.
	 */
	mod_delayed_work(system_wq, &engram_event_work, 0);
	spin_unlock_irqrestore(&engram_event_lock, flags);
}

/**
 * engram_event_register() - set (or, with NULLs, clear) where events go
 * @wanted: whether anyone listens now; called in any context
 * @send: delivers one event, or fails (-ENOMEM, -EMSGSIZE) leaving it
 *	  to be counted as lost; called from a work item
 *
 * Clearing closes the ring, so that nothing raised afterwards, from any
 * context, queues the work again, then waits for a delivery in progress:
 * the sender may go away once it returns.
 */
void engram_event_register(bool (*wanted)(void), int (*send)(const struct engram_event_rec *ev))
{
	unsigned long flags;

	spin_lock_irqsave(&engram_event_lock, flags);
	engram_event_head = 0;
	engram_event_count = 0;
	engram_event_lost = 0;
	engram_event_closed = !send;
	WRITE_ONCE(engram_event_wanted, wanted);
	WRITE_ONCE(engram_event_send, send);
	spin_unlock_irqrestore(&engram_event_lock, flags);
	if (!send)
		cancel_delayed_work_sync(&engram_event_work);
}

/**
 * engram_event_table() - a table was loaded, verified, failed or unloaded
 * @event: ENGRAM_EVENT_TABLE_STATE or ENGRAM_EVENT_TABLE_UNLOADED
 * @name: the table's name
 * @state: enum engram_table_state it is in now
 * @verify: enum engram_verify_result after a verification, else 0
 * @error: errno (either sign) when it failed, else 0
 *
 * Any context.
 */
void engram_event_table(u8 event, const char *name, u8 state, u8 verify, int error)
{
	engram_event_raise(event, 0, name, state, verify, error);
}

/**
 * engram_event_link() - a link was added, changed state or was deleted
 * @event: ENGRAM_EVENT_LINK_{ADDED,STATE,DELETED}
 * @id: the link's id
 * @url: its remote URL
 * @state: enum engram_link_state it is in now
 * @error: errno (either sign) of the failure that took it down, else 0
 *
 * Any context, including under the link's spinlock.
 */
void engram_event_link(u8 event, u32 id, const char *url, u8 state, int error)
{
	engram_event_raise(event, id, url, state, 0, error);
}

/**
 * engram_event_listen() - a listener was added, changed state or was deleted
 * @event: ENGRAM_EVENT_LISTEN_{ADDED,STATE,DELETED}
 * @url: its URL
 * @state: enum engram_listen_state it is in now
 * @error: errno (either sign) of why it waits, else 0
 *
 * Any context.
 */
void engram_event_listen(u8 event, const char *url, u8 state, int error)
{
	engram_event_raise(event, 0, url, state, 0, error);
}
