/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Events for `engramctl monitor` (the netlink group ENGRAM_MCGRP_EVENTS): a
 * table's, link's or listener's state changed, or one was added or removed.
 * They are raised where the change happens, which for a link can be a CM
 * handler or a completion in softirq context, so raising one only copies a
 * small record into a bounded ring; a work item hands the records to the
 * sender the netlink family registered, in process context.  Nothing is
 * queued while nobody listens.  An event dropped (the ring full) or not
 * sent (no memory for its message) is counted, and the count reaches the
 * listeners on the next event, or on an ENGRAM_EVENT_LOST of its own once
 * the ring is empty, so that no loss goes untold for want of a later event.
 */
#ifndef _ENGRAM_EVENT_H
#define _ENGRAM_EVENT_H

#include <linux/types.h>

#include "url.h"		/* ENGRAM_URL_TEXT_MAX */

/**
 * struct engram_event_rec - one event, as the sender gets it
 * @event: enum engram_event
 * @state: the object's state after it (enum engram_{table,link,listen}_state)
 * @verify: a table's enum engram_verify_result, when it has one
 * @id: a link's id
 * @error: positive errno of the failure that led to @state, or 0
 * @lost: events dropped or not sent before this one
 * @name: a table's name, or a link's or listener's URL
 */
struct engram_event_rec {
	u8 event;
	u8 state;
	u8 verify;
	u32 id;
	u32 error;
	u32 lost;
	char name[ENGRAM_URL_TEXT_MAX];
};

void engram_event_register(bool (*wanted)(void), int (*send)(const struct engram_event_rec *ev));
void engram_event_table(u8 event, const char *name, u8 state, u8 verify, int error);
void engram_event_link(u8 event, u32 id, const char *url, u8 state, int error);
void engram_event_listen(u8 event, const char *url, u8 state, int error);

#endif /* _ENGRAM_EVENT_H */
