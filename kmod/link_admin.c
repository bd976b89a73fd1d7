// SPDX-License-Identifier: GPL-2.0
/*
 * The links there are: the list, adding and deleting them (remote= and
 * netlink), finding one by id or by a table in its catalog, snapshots
 * for netlink, device removal, and the transports new links may use.
 * What one link does is link.c's.
 *
 * engram_links_mutex protects the list; under it a link's own mutex may
 * be taken (device removal), never the other way round.  The fetch path
 * reads the list under RCU (the replicas of a table): a deleted link is
 * unlisted, and the list's reference dropped only after a grace period.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/mutex.h>
#include <linux/rculist.h>
#include <linux/netlink.h>
#include <linux/string.h>

#include "event.h"
#include "link.h"

static LIST_HEAD(engram_links);
static DEFINE_MUTEX(engram_links_mutex);

/* A link's transport by its URL's; each registers itself. */
static const struct engram_link_ops *engram_link_transports[ENGRAM_TRANSPORT_TCP + 1];

/**
 * engram_link_admin_transport_set() - offer a transport to new links, or stop
 * @t: the URL scheme's transport
 * @ops: its operations, or NULL once no link uses them any more
 */
void engram_link_admin_transport_set(enum engram_transport t, const struct engram_link_ops *ops)
{
	if (!WARN_ON_ONCE(t >= ARRAY_SIZE(engram_link_transports)))
		WRITE_ONCE(engram_link_transports[t], ops);
}

static bool engram_link_admin_entry_match(const struct engram_wire_table *e, u32 flags,
					  const char *name, const u8 *sha256)
{
	if ((flags & ENGRAM_OPEN_BY_NAME) && strcmp(e->name, name))
		return false;
	if ((flags & ENGRAM_OPEN_BY_SHA256) && memcmp(e->sha256, sha256, ENGRAM_SHA256_LEN))
		return false;
	return true;
}

/*
 * Does @e's host serve it now?  A table being verified still serves, and
 * so does one draining: only fetches that may go elsewhere avoid it.
 */
static bool engram_link_admin_entry_ready(const struct engram_wire_table *e)
{
	return e->state == ENGRAM_TABLE_READY || e->state == ENGRAM_TABLE_VERIFYING ||
	       e->state == ENGRAM_TABLE_DRAINING;
}

/*
 * By SHA-256 alone, a link's catalog names one table only if every entry
 * with that digest is the same table (shards of it may be several): two
 * tensors of one file are two tables, and which the caller meant cannot be
 * told.  Nor can it from a host below version 4, which does not say where
 * an entry's tensors are.
 */
static int engram_link_admin_find_locked(struct engram_link *l, u32 flags, const char *name,
					 const u8 *sha256, struct engram_wire_table *out)
{
	const struct engram_wire_table *found = NULL;
	int ret = -ENOENT;
	u32 i;

	for (i = 0; i < l->nr_catalog; i++) {
		const struct engram_wire_table *e = &l->catalog[i];

		if (!engram_link_admin_entry_match(e, flags, name, sha256))
			continue;
		if (found && !(flags & ENGRAM_OPEN_BY_NAME) &&
		    (!e->weight_offset || e->weight_offset != found->weight_offset ||
		     e->scale_offset != found->scale_offset || e->rows != found->rows)) {
			pr_info_ratelimited("link %u: '%s' and '%s' are both tables of file %*phN: open one by name\n",
					    l->id, found->name, e->name, ENGRAM_SHA256_LEN, sha256);
			return -ENOTUNIQ;
		}
		if (!engram_link_admin_entry_ready(e)) {
			ret = -EAGAIN;
			continue;
		}
		if (!found) {
			found = e;
			*out = *e;
		}
	}
	return found ? 0 : ret;
}

/**
 * engram_link_admin_open_table() - find a table in a link's catalog
 * @link_id: a link id, or 0 for the first link that is up and has it
 * @flags: ENGRAM_OPEN_BY_NAME and/or ENGRAM_OPEN_BY_SHA256
 * @name: with BY_NAME
 * @sha256: with BY_SHA256
 * @out: the catalog entry
 * @max_rows: the link's negotiated rows per request
 *
 * Return: the link, held, or ERR_PTR: -ENODEV (no such link), -ENOTCONN
 * (the link named is not up), -ENOENT (no such table), -EAGAIN (the table
 * exists but is not ready).
 */
struct engram_link *engram_link_admin_open_table(u32 link_id, u32 flags, const char *name,
						 const u8 *sha256, struct engram_wire_table *out,
					   u32 *max_rows)
{
	struct engram_link *l, *found = NULL;
	int ret = link_id ? -ENODEV : -ENOENT;
	bool any_up = false;
	unsigned long irq;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		int r;

		if ((link_id && l->id != link_id) || l->removing)
			continue;
		spin_lock_irqsave(&l->lock, irq);
		if (l->state != ENGRAM_LINK_UP) {
			r = -ENOTCONN;
		} else {
			r = engram_link_admin_find_locked(l, flags, name, sha256, out);
			*max_rows = l->neg.max_rows;
		}
		spin_unlock_irqrestore(&l->lock, irq);
		if (!r) {
			found = l;
			engram_link_get(l);
			break;
		}
		if (r != -ENOTCONN)
			any_up = true;
		/* Report the most useful reason: a table not ready beats none. */
		if (link_id || r == -EAGAIN || (ret == -ENOENT && r != -ENOTCONN))
			ret = r;
		if (link_id)
			break;
	}
	mutex_unlock(&engram_links_mutex);
	if (!found && !link_id && !any_up)
		ret = -ENOTCONN;	/* no link up: the table may well exist */
	return found ? found : ERR_PTR(ret);
}

/* Ready entries of @l's catalog with the file digest @sha256; l->lock held. */
static unsigned int engram_link_admin_same_file(const struct engram_link *l, const u8 *sha256)
{
	unsigned int i, n = 0;

	for (i = 0; i < l->nr_catalog; i++)
		if (engram_link_admin_entry_ready(&l->catalog[i]) &&
		    !memcmp(l->catalog[i].sha256, sha256, ENGRAM_SHA256_LEN))
			n++;
	return n;
}

/*
 * Does @e serve the table @id?  Its digest and geometry must be the
 * table's, and so must its tensors' places.  Where either side cannot say
 * where the tensors are (a host below version 4, or a table that only such
 * hosts served at open), an entry is taken only when it is the one table of
 * that file on its host (@same of them), under the name asked for if any.
 */
static bool engram_link_admin_serves(const struct engram_wire_table *e, unsigned int same,
				     const struct engram_table_ident *id)
{
	if (!engram_link_admin_entry_ready(e) || e->rows != id->rows ||
	    e->row_bytes != ENGRAM_ROW_BYTES ||
	    memcmp(e->sha256, id->sha256, ENGRAM_SHA256_LEN))
		return false;
	if (e->weight_offset && id->weight_offset)
		return e->weight_offset == id->weight_offset &&
		       e->scale_offset == id->scale_offset;
	return same == 1 && (!id->by_name || !strcmp(e->name, id->name));
}

/* Is @e the same table as @id resolved so far (@id->rows 0: none yet)? */
static bool engram_link_admin_agrees(const struct engram_wire_table *e,
				     const struct engram_table_ident *id)
{
	if (!id->rows)
		return true;
	if (e->rows != id->rows || memcmp(e->sha256, id->sha256, ENGRAM_SHA256_LEN))
		return false;
	return !e->weight_offset || !id->weight_offset ||
	       (e->weight_offset == id->weight_offset && e->scale_offset == id->scale_offset);
}

/**
 * engram_link_admin_resolve() - which table an open on no link names
 * @flags: ENGRAM_OPEN_BY_NAME and/or ENGRAM_OPEN_BY_SHA256
 * @name: with BY_NAME
 * @sha256: with BY_SHA256
 * @id: set to the table's identity
 * @e: set to a catalog entry of it, one with the tensors' places if any
 *
 * Every ready entry that matches the name and digest asked for must be
 * one table: same digest, geometry and tensors.  Hosts below version 4
 * do not say where a table's tensors are, so one of their entries counts
 * only when it is the one table of its file on that host; then the table
 * is known by digest, rows and (if opened so) name alone, and only entries
 * alone with their digest on their host are taken for it later.
 *
 * Return: 0; -ENOTUNIQ (logged, with the tables' names) when the entries
 * name two tables, or an older host's cannot be told apart; -ENOENT when
 * no link that is up has a ready entry (the caller finds out why).
 */
int engram_link_admin_resolve(u32 flags, const char *name, const u8 *sha256,
			      struct engram_table_ident *id, struct engram_wire_table *e)
{
	struct engram_wire_table clash, vague;
	u32 clash_link = 0, vague_link = 0, first_link = 0;
	struct engram_link *l;
	unsigned long irq;
	int ret = -ENOENT;
	u32 i;

	memset(id, 0, sizeof(*id));
	rcu_read_lock();
	list_for_each_entry_rcu(l, &engram_links, node) {
		spin_lock_irqsave(&l->lock, irq);
		for (i = 0; l->state == ENGRAM_LINK_UP && l->live && i < l->nr_catalog; i++) {
			const struct engram_wire_table *ent = &l->catalog[i];

			if (!engram_link_admin_entry_match(ent, flags, name, sha256) ||
			    !engram_link_admin_entry_ready(ent))
				continue;
			if (!ent->weight_offset &&
			    engram_link_admin_same_file(l, ent->sha256) > 1) {
				/* Never a candidate (engram_link_admin_serves()). */
				vague = *ent;
				vague_link = l->id;
				continue;
			}
			if (!engram_link_admin_agrees(ent, id)) {
				clash = *ent;
				clash_link = l->id;
				ret = -ENOTUNIQ;
				break;
			}
			/* Entries that say where the tensors are define the table. */
			if (!id->rows || (!id->weight_offset && ent->weight_offset)) {
				memcpy(id->sha256, ent->sha256, ENGRAM_SHA256_LEN);
				id->rows = ent->rows;
				id->weight_offset = ent->weight_offset;
				id->scale_offset = ent->scale_offset;
				*e = *ent;
				first_link = l->id;
				ret = 0;
			}
		}
		spin_unlock_irqrestore(&l->lock, irq);
		if (ret == -ENOTUNIQ)
			break;
	}
	rcu_read_unlock();
	if (ret == -ENOTUNIQ) {
		pr_info_ratelimited("open of %s: link %u's '%s' and link %u's '%s' are different tables (file %*phN): name one, or open it on a link\n",
				    (flags & ENGRAM_OPEN_BY_NAME) ? name : "a digest",
				    first_link, e->name, clash_link, clash.name,
				    ENGRAM_SHA256_LEN, clash.sha256);
		return ret;
	}
	if (ret && vague_link) {
		pr_info_ratelimited("open of %s: link %u's '%s' cannot be told from another table of its file there (a host below protocol version 4): open it on that link by name\n",
				    (flags & ENGRAM_OPEN_BY_NAME) ? name : "a digest",
				    vague_link, vague.name);
		return -ENOTUNIQ;
	}
	if (!ret && (flags & ENGRAM_OPEN_BY_NAME)) {
		id->by_name = true;
		strscpy(id->name, name, sizeof(id->name));
	}
	return ret;
}

/**
 * engram_link_admin_replicas() - the links, and the rows, that serve a table now
 * @id: the table, from engram_link_admin_resolve()
 * @c: filled with up to @max candidates: each a catalog entry of the table
 *	ready on a link that is up (a host that holds two shards of it under
 *	two names is two), its link held, with the entry's generation and
 *	rows held and the link's limits and fetches on the wire
 * @max: room in @c
 * @none: NULL, or set to why there is no candidate: -ENOTCONN when no link
 *	is up, -EAGAIN when the only entries of the table are draining,
 *	-ESTALE when no link that is up serves it
 *
 * Entries of other tables of the same file never count, whatever their
 * names (engram_link_admin_serves()).  Takes no lock but each link's own:
 * it runs for every fetch of a table opened on no link.
 *
 * Return: how many candidates were put in @c.
 */
int engram_link_admin_replicas(const struct engram_table_ident *id,
			       struct engram_replica_cand *c, unsigned int max, int *none)
{
	bool up = false, drained = false;
	struct engram_link *l;
	unsigned long irq;
	unsigned int n = 0;

	rcu_read_lock();
	list_for_each_entry_rcu(l, &engram_links, node) {
		unsigned int i, same, got = 0;

		spin_lock_irqsave(&l->lock, irq);
		if (l->state == ENGRAM_LINK_UP && l->live)
			up = true;
		/*
		 * How many tables of the file the link lists matters only where
		 * an entry may lack its tensors' places: a second pass over the
		 * catalog, on every fetch, only then.
		 */
		if (l->state != ENGRAM_LINK_UP || !l->live)
			same = 0;
		else if (id->weight_offset && l->neg.version_max >= ENGRAM_WIRE_VERSION_TENSOR)
			same = 1;
		else
			same = engram_link_admin_same_file(l, id->sha256);
		for (i = 0; same && i < l->nr_catalog; i++) {
			const struct engram_wire_table *ent = &l->catalog[i];
			struct engram_replica_cand *ci = &c[n + got];

			if (n + got == max)
				break;
			if (!engram_link_admin_serves(ent, same, id))
				continue;
			/* Where fetches may go to any host, none goes to one draining. */
			if (ent->state == ENGRAM_TABLE_DRAINING) {
				drained = true;
				continue;
			}
			ci->link = l;
			ci->generation = ent->generation;
			ci->held_first = ent->held_first;
			ci->held_rows = ent->held_rows;
			ci->max_rows = l->neg.max_rows;
			ci->max_ranges = l->neg.max_ranges;
			ci->max_request_bytes = l->neg.max_request_bytes;
			ci->places = l->neg.version_max >= ENGRAM_WIRE_VERSION_SHARDS;
			ci->mr_pages = l->mr_pages ? l->mr_pages : U32_MAX;
			ci->remote_write = l->mr_pages != 0;
			ci->url = &l->url;
			ci->inflight = l->inflight;
			got++;
		}
		spin_unlock_irqrestore(&l->lock, irq);
		for (i = 0; i < got; i++)
			engram_link_get(l);
		n += got;
		if (n == max)
			break;
	}
	rcu_read_unlock();
	if (none)
		*none = !up ? -ENOTCONN : drained ? -EAGAIN : -ESTALE;
	return n;
}

/**
 * engram_link_admin_entry_name() - the name a link's catalog gives a table
 * @l: the link
 * @generation: the table's generation there
 * @name: set to the name, ENGRAM_NAME_MAX bytes; left alone when not found
 *
 * Return: true when the catalog has that generation.
 */
bool engram_link_admin_entry_name(struct engram_link *l, u64 generation, char *name)
{
	unsigned long irq;
	bool found = false;
	u32 i;

	spin_lock_irqsave(&l->lock, irq);
	for (i = 0; i < l->nr_catalog && !found; i++) {
		if (l->catalog[i].generation != generation)
			continue;
		strscpy(name, l->catalog[i].name, ENGRAM_NAME_MAX);
		found = true;
	}
	spin_unlock_irqrestore(&l->lock, irq);
	return found;
}

/**
 * engram_link_admin_add() - add a link and start connecting it
 * @u: a parsed remote URL
 * @id: set to the new link's id
 * @extack: where to say why it is refused
 *
 * Return: 0, -EEXIST for a URL already linked, -EINVAL for a URL that is
 * not a remote one, -ENOSPC past ENGRAM_URL_MAX links, -ENOMEM.
 */
int engram_link_admin_add(const struct engram_url *u, u32 *id, struct netlink_ext_ack *extack)
{
	const struct engram_link_ops *ops = NULL;
	struct engram_link *l, *o;
	unsigned int n = 0;

	if (u->transport < ARRAY_SIZE(engram_link_transports))
		ops = READ_ONCE(engram_link_transports[u->transport]);
	if (u->role != ENGRAM_URL_REMOTE || !ops) {
		NL_SET_ERR_MSG_MOD(extack, "not a remote rdma:// or tcp:// URL");
		return -EINVAL;
	}
	l = engram_link_alloc(u, ops);
	if (!l)
		return -ENOMEM;
	mutex_lock(&engram_links_mutex);
	list_for_each_entry(o, &engram_links, node) {
		n++;
		if (engram_url_equal(&o->url, u)) {
			mutex_unlock(&engram_links_mutex);
			engram_link_put(l);
			NL_SET_ERR_MSG_MOD(extack, "that link exists already");
			return -EEXIST;
		}
	}
	if (n >= ENGRAM_URL_MAX) {
		mutex_unlock(&engram_links_mutex);
		engram_link_put(l);
		NL_SET_ERR_MSG_MOD(extack, "too many links (16)");
		return -ENOSPC;
	}
	list_add_tail_rcu(&l->node, &engram_links);
	*id = l->id;
	/* Before it starts, so that its state changes come after. */
	engram_event_link(ENGRAM_EVENT_LINK_ADDED, l->id, l->url.text, ENGRAM_LINK_CONNECTING, 0);
	engram_link_start(l);
	mutex_unlock(&engram_links_mutex);
	pr_info("link %u: %s added\n", l->id, u->text);
	return 0;
}

/**
 * engram_link_admin_del() - remove a link
 * @id: its id
 * @extack: where to say why it is refused
 *
 * Fetches in flight on it fail with -ESHUTDOWN; tables opened on it stay
 * open but every fetch on them fails with -ENOTCONN.
 *
 * Return: 0 or -ENOENT.
 */
int engram_link_admin_del(u32 id, struct netlink_ext_ack *extack)
{
	struct engram_link *l, *found = NULL;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		if (l->id == id && !l->removing) {
			found = l;
			l->removing = true;
			break;
		}
	}
	mutex_unlock(&engram_links_mutex);
	if (!found) {
		NL_SET_ERR_MSG_MOD(extack, "no link with that id");
		return -ENOENT;
	}
	/*
	 * Stopped while still listed, so a device removal meanwhile still
	 * finds (and waits for) its connection.
	 */
	engram_link_stop(found);
	mutex_lock(&engram_links_mutex);
	list_del_rcu(&found->node);
	mutex_unlock(&engram_links_mutex);
	synchronize_rcu();
	pr_info("link %u: %s deleted\n", found->id, found->url.text);
	engram_event_link(ENGRAM_EVENT_LINK_DELETED, found->id, found->url.text,
			  ENGRAM_LINK_UNSPEC, 0);
	engram_link_put(found);
	return 0;
}

static void engram_link_admin_snapshot(struct engram_link *l, struct engram_link_info *info)
{
	unsigned long flags;

	memset(info, 0, sizeof(*info));
	info->id = l->id;
	strscpy(info->url, l->url.text, sizeof(info->url));
	engram_stats_counters_snapshot(&l->stats, info->stats);
	engram_stats_hist_snapshot(&l->lat, info->lat);
	spin_lock_irqsave(&l->lock, flags);
	info->state = l->state;
	info->error = l->error;
	info->tables = l->nr_catalog;
	if (l->live) {
		info->max_rows = l->neg.max_rows;
		info->max_inflight = l->neg.max_inflight;
		info->protocol = l->neg.version_max;
		info->queues = l->nr_queues;
	}
	memcpy(info->queue_fetches, l->queue_fetches, sizeof(info->queue_fetches));
	info->connects = l->connects;
	info->reconnects = info->stats[ENGRAM_STAT_RECONNECTS];
	info->transport = l->url.transport;
	info->have_heartbeat = l->have_hb_rtt;
	info->heartbeat_us = l->hb_rtt_us;
	info->since_ns = ktime_to_ns(ktime_sub(ktime_get(), l->since));
	if (l->live && l->ops->device && l->ops->device(l))
		strscpy(info->device, l->ops->device(l), sizeof(info->device));
	spin_unlock_irqrestore(&l->lock, flags);
}

/*
 * Snapshot the first link for which @match(l, key) is true, counting
 * down *key for a position (its key is a countdown) or comparing an id.
 */
static int engram_link_admin_info(bool (*match)(struct engram_link *l, unsigned long *key),
				  unsigned long key, struct engram_link_info *info)
{
	struct engram_link *l;
	int ret = -ENOENT;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		if (!match(l, &key))
			continue;
		engram_link_admin_snapshot(l, info);
		ret = 0;
		break;
	}
	mutex_unlock(&engram_links_mutex);
	return ret;
}

static bool engram_link_admin_is_nth(struct engram_link *l, unsigned long *n)
{
	return !(*n)--;
}

static bool engram_link_admin_has_id(struct engram_link *l, unsigned long *id)
{
	return l->id == *id;
}

/**
 * engram_link_admin_info_nth() - snapshot the n-th link
 * @n: position, from 0
 * @info: filled on success
 *
 * Return: 0 or -ENOENT past the last link.
 */
int engram_link_admin_info_nth(unsigned long n, struct engram_link_info *info)
{
	return engram_link_admin_info(engram_link_admin_is_nth, n, info);
}

/**
 * engram_link_admin_info_by_id() - snapshot one link
 * @id: link id
 * @info: filled on success
 *
 * Return: 0 or -ENOENT.
 */
int engram_link_admin_info_by_id(u32 id, struct engram_link_info *info)
{
	return engram_link_admin_info(engram_link_admin_has_id, id, info);
}

/**
 * engram_link_admin_catalog_nth() - the n-th table over the links' catalogs
 * @n: position, from 0: the first link's tables, then the next link's
 * @ci: filled on success
 *
 * Return: 0 or -ENOENT past the last one.
 */
int engram_link_admin_catalog_nth(unsigned long n, struct engram_link_catalog_info *ci)
{
	struct engram_link *l;
	unsigned long flags;
	int ret = -ENOENT;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node) {
		spin_lock_irqsave(&l->lock, flags);
		if (n < l->nr_catalog) {
			const struct engram_wire_table *e = &l->catalog[n];

			memset(ci, 0, sizeof(*ci));
			ci->link_id = l->id;
			ci->link_state = l->state;
			strscpy(ci->name, e->name, sizeof(ci->name));
			memcpy(ci->sha256, e->sha256, sizeof(ci->sha256));
			ci->rows = e->rows;
			ci->held_first = e->held_first;
			ci->held_rows = e->held_rows;
			ci->weight_offset = e->weight_offset;
			ci->scale_offset = e->scale_offset;
			ci->generation = e->generation;
			ci->state = e->state;
			ret = 0;
		} else {
			n -= l->nr_catalog;
		}
		spin_unlock_irqrestore(&l->lock, flags);
		if (!ret)
			break;
	}
	mutex_unlock(&engram_links_mutex);
	return ret;
}

/**
 * engram_link_admin_remove_device() - tear down every link on a departing device
 * @ibdev: the device
 *
 * Synchronous; the links reconnect later, on whatever device then carries
 * their addresses.
 */
void engram_link_admin_remove_device(struct ib_device *ibdev)
{
	struct engram_link *l;

	mutex_lock(&engram_links_mutex);
	list_for_each_entry(l, &engram_links, node)
		engram_link_drop_device(l, ibdev);
	mutex_unlock(&engram_links_mutex);
}

/**
 * engram_link_admin_init() - start the links of remote=
 *
 * Return: 0 or a negative errno (no memory).
 */
int engram_link_admin_init(void)
{
	unsigned int i;
	u32 id;
	int ret;

	ret = engram_link_init();
	if (ret)
		return ret;
	for (i = 0; i < engram_config.n_remote; i++) {
		ret = engram_link_admin_add(&engram_config.remote[i], &id, NULL);
		if (ret) {
			pr_err("remote=%s: cannot add link (%d)\n",
			       engram_config.remote[i].text, ret);
			engram_link_admin_exit();
			return ret;
		}
	}
	return 0;
}

/**
 * engram_link_admin_exit() - stop every link
 *
 * The character device is gone, so no fetch can start; fetches still in
 * flight fail with -ESHUTDOWN.
 */
void engram_link_admin_exit(void)
{
	struct engram_link *l;

	engram_link_shutdown();
	for (;;) {
		mutex_lock(&engram_links_mutex);
		l = list_first_entry_or_null(&engram_links, struct engram_link, node);
		mutex_unlock(&engram_links_mutex);
		if (!l)
			break;
		/* Netlink is gone, so nothing else removes links now. */
		engram_link_stop(l);
		mutex_lock(&engram_links_mutex);
		list_del_rcu(&l->node);
		mutex_unlock(&engram_links_mutex);
		synchronize_rcu();
		engram_link_put(l);
	}
	engram_link_exit();
}
