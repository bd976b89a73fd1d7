// SPDX-License-Identifier: GPL-2.0
/*
 * The client allow-list: which peer addresses a server accepts connections
 * from.  Never set (the default) means any peer that can reach a listening
 * address, as before the list existed; it is not authentication, only a
 * filter on the source address the transport reports.
 *
 * Once set, the list only ever narrows by deletion: deleting its last
 * entry leaves it empty and every peer refused, never open.  An
 * administrator who deletes entries is revoking access, and revoking the
 * last peer (say, a compromised one) must not let the whole network in;
 * refusing the delete instead would keep that peer in.  Opening up again
 * takes an explicit 0.0.0.0/0 and ::/0, which the list then shows.
 *
 * The list is read at every rdma_cm connect request and TCP accept, so
 * readers take only rcu_read_lock(); writers (allow= at load, netlink)
 * serialise on a mutex and publish a new copy of the whole array, which is
 * small and bounded (ENGRAM_ALLOW_MAX).  Changing the list never touches
 * connections that already exist.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/mutex.h>
#include <linux/overflow.h>
#include <linux/ratelimit.h>
#include <linux/rcupdate.h>
#include <linux/slab.h>
#include <net/netlink.h>

#include "engram.h"
#include "prefix.h"

/* Root only: the peers the host trusts are not for every local user. */
static char *engram_allow_param;
module_param_named(allow, engram_allow_param, charp, 0400);
MODULE_PARM_DESC(allow,
		 "comma-separated client addresses or prefixes (IP or IP/LEN, IPv6 without brackets) a server accepts; empty: any peer");

/* An empty set (n == 0) is a list whose entries were all deleted: no peer. */
struct engram_allow_set {
	struct rcu_head rcu;
	unsigned int n;
	struct engram_prefix e[];
};

static struct engram_allow_set __rcu *engram_allow_cur;
static DEFINE_MUTEX(engram_allow_mutex);

/*
 * Its own budget, so a peer retrying in a loop cannot hide other messages
 * and other messages cannot hide the refusals.
 */
static DEFINE_RATELIMIT_STATE(engram_allow_rs, 5 * HZ, 10);

static struct engram_allow_set *engram_allow_locked(void)
{
	return rcu_dereference_protected(engram_allow_cur,
					 lockdep_is_held(&engram_allow_mutex));
}

/*
 * Publish @set (NULL: no list, any peer) in place of the current one.
 * Readers still walking the old copy finish with it.  Mutex held.
 */
static void engram_allow_publish(struct engram_allow_set *set)
{
	struct engram_allow_set *old;

	old = rcu_replace_pointer(engram_allow_cur, set,
				  lockdep_is_held(&engram_allow_mutex));
	if (old)
		kfree_rcu(old, rcu);
}

static struct engram_allow_set *engram_allow_alloc(unsigned int n)
{
	struct engram_allow_set *set;

	set = kmalloc(struct_size(set, e, n), GFP_KERNEL);
	if (set)
		set->n = n;
	return set;
}

static int engram_allow_find(const struct engram_allow_set *set,
			     const struct engram_prefix *p)
{
	unsigned int i;

	for (i = 0; set && i < set->n; i++)
		if (engram_prefix_equal(&set->e[i], p))
			return i;
	return -1;
}

/**
 * engram_allow_peer_on() - may this peer connect?
 * @peer: the peer's address as the transport reports it
 * @listener: the listener's URL for the log line, or NULL
 *
 * Never sleeps.  On a refusal, counts ENGRAM_STAT_CONNECTS_DENIED and logs
 * one rate-limited line naming the peer and @listener; the caller then
 * rejects the connection without counting or logging it again.
 *
 * Return: true when no list was ever set or an entry matches @peer.
 */
bool engram_allow_peer_on(const struct sockaddr *peer, const char *listener)
{
	const struct engram_allow_set *set;
	bool ok = true, empty = false;
	unsigned int i;

	rcu_read_lock();
	set = rcu_dereference(engram_allow_cur);
	if (set) {
		ok = false;
		empty = !set->n;
		for (i = 0; i < set->n && !ok; i++)
			ok = engram_prefix_match(&set->e[i], peer);
	}
	rcu_read_unlock();
	if (ok)
		return true;
	engram_count(&engram_global_stats, ENGRAM_STAT_CONNECTS_DENIED);
	if (__ratelimit(&engram_allow_rs)) {
		if (peer && (peer->sa_family == AF_INET || peer->sa_family == AF_INET6))
			pr_info("connection from %pISc to %s denied: %s\n",
				peer, listener ? listener : "a listener",
				empty ? "the allow-list is empty" : "not on the allow-list");
		else
			pr_info("connection from an address of family %d to %s denied: %s\n",
				peer ? peer->sa_family : -1, listener ? listener : "a listener",
				empty ? "the allow-list is empty" : "not on the allow-list");
	}
	return false;
}

/**
 * engram_allow_add() - put an entry on the allow-list
 * @p: the entry, from engram_prefix_parse()
 * @extack: for the reason of a refusal
 *
 * Return: 0, -EEXIST for an entry already there, -ENOSPC when the list
 * is full, -ENOMEM.
 */
int engram_allow_add(const struct engram_prefix *p, struct netlink_ext_ack *extack)
{
	struct engram_allow_set *set, *new;
	char text[ENGRAM_PREFIX_TEXT_MAX];
	unsigned int n = 0;
	int ret = 0;

	mutex_lock(&engram_allow_mutex);
	set = engram_allow_locked();
	if (engram_allow_find(set, p) >= 0) {
		NL_SET_ERR_MSG_MOD(extack, "the entry is already on the allow-list");
		ret = -EEXIST;
		goto out;
	}
	if (set)
		n = set->n;
	if (n == ENGRAM_ALLOW_MAX) {
		NL_SET_ERR_MSG_MOD(extack, "the allow-list is full (64 entries)");
		ret = -ENOSPC;
		goto out;
	}
	new = engram_allow_alloc(n + 1);
	if (!new) {
		ret = -ENOMEM;
		goto out;
	}
	if (n)
		memcpy(new->e, set->e, n * sizeof(new->e[0]));
	new->e[n] = *p;
	engram_allow_publish(new);
	engram_prefix_format(p, text, sizeof(text));
	pr_info("allow %s (%u entr%s)\n", text, n + 1, n ? "ies" : "y");
out:
	mutex_unlock(&engram_allow_mutex);
	return ret;
}

/**
 * engram_allow_del() - take an entry off the allow-list
 * @p: the entry, from engram_prefix_parse(); must equal one on the list
 * @extack: for the reason of a refusal
 *
 * Taking the last entry off leaves the list empty: no peer may connect
 * until an entry is added (see the top of the file for why).
 *
 * Return: 0, -ENOENT for an entry that is not there, -ENOMEM.
 */
int engram_allow_del(const struct engram_prefix *p, struct netlink_ext_ack *extack)
{
	struct engram_allow_set *set, *new;
	char text[ENGRAM_PREFIX_TEXT_MAX];
	unsigned int n;
	int i, ret = 0;

	mutex_lock(&engram_allow_mutex);
	set = engram_allow_locked();
	i = engram_allow_find(set, p);
	if (i < 0) {
		NL_SET_ERR_MSG_MOD(extack, "no such entry on the allow-list");
		ret = -ENOENT;
		goto out;
	}
	n = set->n - 1;
	new = engram_allow_alloc(n);
	if (!new) {
		ret = -ENOMEM;
		goto out;
	}
	memcpy(new->e, set->e, i * sizeof(new->e[0]));
	memcpy(new->e + i, set->e + i + 1, (n - i) * sizeof(new->e[0]));
	engram_allow_publish(new);
	engram_prefix_format(p, text, sizeof(text));
	if (n)
		pr_info("allow %s removed (%u entr%s)\n", text, n, n == 1 ? "y" : "ies");
	else
		pr_notice("allow %s removed: the allow-list is empty, no peer may connect until an entry is added\n",
			  text);
out:
	mutex_unlock(&engram_allow_mutex);
	return ret;
}

/**
 * engram_allow_nth() - one entry, for a dump
 * @n: its position, from 0
 * @out: the entry
 *
 * Return: 0, or -ENOENT past the end.
 */
int engram_allow_nth(unsigned long n, struct engram_prefix *out)
{
	const struct engram_allow_set *set;
	int ret = -ENOENT;

	rcu_read_lock();
	set = rcu_dereference(engram_allow_cur);
	if (set && n < set->n) {
		*out = set->e[n];
		ret = 0;
	}
	rcu_read_unlock();
	return ret;
}

/**
 * engram_allow_mode() - whom the listeners accept now
 *
 * Return: ENGRAM_ALLOW_ANY while no list was ever set, ENGRAM_ALLOW_NONE
 * once its last entry was deleted, else ENGRAM_ALLOW_LIST.
 */
enum engram_allow_mode engram_allow_mode(void)
{
	const struct engram_allow_set *set;
	enum engram_allow_mode mode;

	rcu_read_lock();
	set = rcu_dereference(engram_allow_cur);
	mode = !set ? ENGRAM_ALLOW_ANY : set->n ? ENGRAM_ALLOW_LIST : ENGRAM_ALLOW_NONE;
	rcu_read_unlock();
	return mode;
}

/**
 * engram_allow_init() - parse allow= and publish it
 *
 * Return: 0, or -EINVAL after logging which entry is wrong and why (the
 * module does not load: a host that accepted more peers than configured is
 * worse than one that refuses to start), or -ENOMEM.
 */
int engram_allow_init(void)
{
	struct engram_allow_set *set;
	char err[200], text[ENGRAM_PREFIX_TEXT_MAX];
	unsigned int n, i;
	int ret;

	set = engram_allow_alloc(ENGRAM_ALLOW_MAX);
	if (!set)
		return -ENOMEM;
	ret = engram_prefix_list_parse(engram_allow_param, set->e, ENGRAM_ALLOW_MAX, &n,
				       err, sizeof(err));
	if (ret) {
		pr_err("allow=: %s\n", err);
		kfree(set);
		return ret;
	}
	if (!n) {
		kfree(set);
		return 0;
	}
	set->n = n;
	for (i = 0; i < n; i++) {
		engram_prefix_format(&set->e[i], text, sizeof(text));
		pr_info("allow %s\n", text);
	}
	mutex_lock(&engram_allow_mutex);
	engram_allow_publish(set);
	mutex_unlock(&engram_allow_mutex);
	return 0;
}

/**
 * engram_allow_exit() - free the list
 *
 * Called after every reader (listeners, connections, netlink) is gone.
 */
void engram_allow_exit(void)
{
	struct engram_allow_set *set;

	mutex_lock(&engram_allow_mutex);
	set = rcu_replace_pointer(engram_allow_cur, NULL,
				  lockdep_is_held(&engram_allow_mutex));
	mutex_unlock(&engram_allow_mutex);
	synchronize_rcu();
	kfree(set);
}
