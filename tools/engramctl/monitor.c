// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl monitor: the module's events (the "events" multicast group of
 * the netlink family) as they happen, one line each, as `ip monitor` prints
 * them; with -j one JSON object a line.
 */
#include <errno.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <netlink/genl/ctrl.h>
#include <netlink/genl/genl.h>

#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "linkinfo.h"
#include "tableinfo.h"

static volatile sig_atomic_t monitor_stop;

static void monitor_on_signal(int sig)
{
	(void)sig;
	monitor_stop = 1;
}

enum {
	MON_TABLE = 1,
	MON_LINK = 2,
	MON_LISTEN = 4,
};

struct monitor {
	unsigned int objects;	/* MON_* */
	uint64_t count;		/* stop after this many; 0: never */
	uint64_t seen;
	int err;		/* first output error */
};

static void monitor_usage(FILE *f)
{
	fputs("Usage: engramctl [-j] monitor [all | table | link | listen]... [--count N]\n"
	      "\n"
	      "Prints the module's events as they happen: tables loading, ready,\n"
	      "verifying, failed or unloaded; links added, connecting, up, down or\n"
	      "deleted; listeners added, active, waiting or deleted.  Until interrupted,\n"
	      "or until N events with --count.  Needs CAP_NET_ADMIN.\n", f);
}

static unsigned int event_object(uint8_t ev)
{
	switch (ev) {
	case ENGRAM_EVENT_TABLE_STATE:
	case ENGRAM_EVENT_TABLE_UNLOADED:
		return MON_TABLE;
	case ENGRAM_EVENT_LINK_ADDED:
	case ENGRAM_EVENT_LINK_STATE:
	case ENGRAM_EVENT_LINK_DELETED:
		return MON_LINK;
	case ENGRAM_EVENT_LISTEN_ADDED:
	case ENGRAM_EVENT_LISTEN_STATE:
	case ENGRAM_EVENT_LISTEN_DELETED:
		return MON_LISTEN;
	default:
		return 0;
	}
}

static const char *const object_names[] = {
	[MON_TABLE] = "table", [MON_LINK] = "link", [MON_LISTEN] = "listen",
};

/* What happened, as one word: the new state, or added/deleted/unloaded. */
static const char *event_word(uint8_t ev, struct nlattr **tb)
{
	switch (ev) {
	case ENGRAM_EVENT_TABLE_UNLOADED:
		return "unloaded";
	case ENGRAM_EVENT_LINK_ADDED:
	case ENGRAM_EVENT_LISTEN_ADDED:
		return "added";
	case ENGRAM_EVENT_LINK_DELETED:
	case ENGRAM_EVENT_LISTEN_DELETED:
		return "deleted";
	case ENGRAM_EVENT_TABLE_STATE:
		return tb[ENGRAM_A_TABLE_STATE] ?
		       table_state_name(nla_get_u8(tb[ENGRAM_A_TABLE_STATE])) : "unknown";
	case ENGRAM_EVENT_LINK_STATE:
		return tb[ENGRAM_A_LINK_STATE] ?
		       link_state_name(nla_get_u8(tb[ENGRAM_A_LINK_STATE])) : "unknown";
	case ENGRAM_EVENT_LISTEN_STATE:
		return tb[ENGRAM_A_LISTEN_STATE] ?
		       listen_state_name(nla_get_u8(tb[ENGRAM_A_LISTEN_STATE])) : "unknown";
	default:
		return "unknown";
	}
}

static const char *errno_word(uint32_t e)
{
	const char *n = strerrorname_np((int)e);

	return n ? n : "unknown";
}

/**
 * monitor_format_json() - one event as a JSON object
 * @tb: its attributes
 *
 * Return: the object, or NULL when out of memory or not an event.
 */
static json_t *monitor_format_json(struct nlattr **tb)
{
	uint8_t ev = nla_get_u8(tb[ENGRAM_A_EVENT]);
	unsigned int obj = event_object(ev);
	struct nlattr *err = tb[ENGRAM_A_TABLE_ERROR] ? tb[ENGRAM_A_TABLE_ERROR] :
			     tb[ENGRAM_A_LINK_ERROR];
	json_t *o = json_object();
	int bad = !o;

	if (!o || !obj) {
		json_decref(o);
		return NULL;
	}
	bad |= json_set(o, "object", json_string(object_names[obj]));
	bad |= json_set(o, "event", json_string(event_word(ev, tb)));
	if (tb[ENGRAM_A_TABLE_NAME])
		bad |= json_set(o, "name", json_string(nla_get_string(tb[ENGRAM_A_TABLE_NAME])));
	if (tb[ENGRAM_A_LINK_ID])
		bad |= json_set(o, "id", json_integer(nla_get_u32(tb[ENGRAM_A_LINK_ID])));
	if (tb[ENGRAM_A_URL])
		bad |= json_set(o, "url", json_string(nla_get_string(tb[ENGRAM_A_URL])));
	if (tb[ENGRAM_A_TABLE_VERIFY_RESULT])
		bad |= json_set(o, "verify", json_string(verify_result_name(
					nla_get_u8(tb[ENGRAM_A_TABLE_VERIFY_RESULT]))));
	if (err) {
		bad |= json_set(o, "error", json_string(errno_word(nla_get_u32(err))));
		bad |= json_set(o, "errno", json_integer(nla_get_u32(err)));
	}
	if (bad) {
		json_decref(o);
		return NULL;
	}
	return o;
}

/* One event as a line: "link 2 rdma://... down error ECONNREFUSED (...)". */
static void monitor_format_text(FILE *f, struct nlattr **tb)
{
	uint8_t ev = nla_get_u8(tb[ENGRAM_A_EVENT]);
	unsigned int obj = event_object(ev);
	struct nlattr *err = tb[ENGRAM_A_TABLE_ERROR] ? tb[ENGRAM_A_TABLE_ERROR] :
			     tb[ENGRAM_A_LINK_ERROR];

	fputs(object_names[obj], f);
	if (tb[ENGRAM_A_TABLE_NAME])
		fprintf(f, " %s", nla_get_string(tb[ENGRAM_A_TABLE_NAME]));
	if (tb[ENGRAM_A_LINK_ID])
		fprintf(f, " %u", nla_get_u32(tb[ENGRAM_A_LINK_ID]));
	if (tb[ENGRAM_A_URL])
		fprintf(f, " %s", nla_get_string(tb[ENGRAM_A_URL]));
	fprintf(f, " %s", event_word(ev, tb));
	if (tb[ENGRAM_A_TABLE_VERIFY_RESULT])
		fprintf(f, " verify %s",
			verify_result_name(nla_get_u8(tb[ENGRAM_A_TABLE_VERIFY_RESULT])));
	if (err)
		fprintf(f, " error %s (%s)", errno_word(nla_get_u32(err)),
			strerror((int)nla_get_u32(err)));
	fputc('\n', f);
}

/*
 * Events that never reached us: @n dropped by the module (its ring was
 * full), or, with @n 0, an unknown number dropped by our socket (ENOBUFS).
 * Printed whatever the object filter: the lost ones may have matched it.
 */
static void monitor_lost(struct monitor *m, uint32_t n)
{
	if (opts.json) {
		json_t *o = json_object();
		int bad = !o;

		bad = bad || json_set(o, "object", json_string("monitor")) ||
		      json_set(o, "event", json_string("lost"));
		if (!bad && n)
			bad = json_set(o, "count", json_integer(n));
		if (bad) {
			json_decref(o);
			m->err = -ENOMEM;
			return;
		}
		if (json_print(o, opts.pretty))
			m->err = -ENOMEM;
	} else if (n) {
		printf("lost %u events\n", n);
	} else {
		puts("lost events (the socket's buffer overflowed)");
	}
	if (fflush(stdout) && !m->err)
		m->err = -errno;
}

static int monitor_cb(struct nl_msg *msg, void *arg)
{
	struct genlmsghdr *g = nlmsg_data(nlmsg_hdr(msg));
	struct nlattr *tb[ENGRAM_A_MAX + 1];
	struct monitor *m = arg;
	unsigned int obj;

	if (g->cmd != ENGRAM_CMD_EVENT || enl_parse(msg, tb) || !tb[ENGRAM_A_EVENT])
		return NL_SKIP;
	if (tb[ENGRAM_A_EVENTS_LOST])
		monitor_lost(m, nla_get_u32(tb[ENGRAM_A_EVENTS_LOST]));
	obj = event_object(nla_get_u8(tb[ENGRAM_A_EVENT]));
	if (!obj || !(m->objects & obj))
		return NL_SKIP;
	if (opts.json) {
		json_t *o = monitor_format_json(tb);

		if (!o || json_print(o, opts.pretty))
			m->err = -ENOMEM;
	} else {
		monitor_format_text(stdout, tb);
	}
	if (fflush(stdout) && !m->err)
		m->err = -errno;
	m->seen++;
	if (m->count && m->seen >= m->count)
		monitor_stop = 1;
	return NL_OK;
}

static int monitor_objects(int argc, char **argv, unsigned int *objects)
{
	static const struct cli_cmd words[] = {
		{ "all", NULL }, { "table", NULL }, { "link", NULL }, { "listen", NULL },
		{ NULL, NULL },
	};
	static const unsigned int bits[] = {
		MON_TABLE | MON_LINK | MON_LISTEN, MON_TABLE, MON_LINK, MON_LISTEN,
	};
	int i;

	*objects = 0;
	for (i = 0; i < argc; i++) {
		const struct cli_cmd *c = cli_find(words, argv[i]);

		if (!c)
			return usage_error("monitor", "unknown object '%s' (all, table, link or listen)",
					   argv[i]);
		*objects |= bits[c - words];
	}
	if (!*objects)
		*objects = MON_TABLE | MON_LINK | MON_LISTEN;
	return 0;
}

/**
 * cmd_monitor() - engramctl monitor
 * @argc: argument count, argv[0] being "monitor"
 * @argv: arguments
 *
 * Return: exit code.
 */
int cmd_monitor(int argc, char **argv)
{
	static const struct option longopts[] = {
		COMMON_LONGOPTS_JSON, COMMON_LONGOPTS_PRETTY, COMMON_LONGOPTS_HELP,
		{ "count", required_argument, NULL, 'c' },
		{ NULL, 0, NULL, 0 },
	};
	struct sigaction sa = { .sa_handler = monitor_on_signal };
	sigset_t block, orig;
	struct monitor m = { 0 };
	struct pollfd pfd;
	struct enl nl;
	int c, rc, grp, ret;

	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS "c:", longopts, NULL)) != -1) {
		if (common_opt(c, argv, "monitor", monitor_usage, &rc) == -1)
			return rc;
		if (c == 'c' && (parse_u64(optarg, &m.count, 0) || !m.count))
			return usage_error("monitor", "--count takes a number of events above 0");
	}
	rc = monitor_objects(argc - optind, argv + optind, &m.objects);
	if (rc)
		return rc;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	grp = genl_ctrl_resolve_grp(nl.sk, ENGRAM_GENL_NAME, ENGRAM_MCGRP_EVENTS);
	if (grp < 0) {
		err_msg("the loaded engram_rdma has no events group (a module older than this engramctl)");
		enl_close(&nl);
		return EXIT_FAIL;
	}
	ret = nl_socket_add_membership(nl.sk, grp);
	if (ret < 0) {
		err_msg("cannot join the events group: %s%s", nl_geterror(ret),
			ret == -NLE_PERM ? " (needs CAP_NET_ADMIN)" : "");
		enl_close(&nl);
		return EXIT_FAIL;
	}
	nl_socket_disable_seq_check(nl.sk);
	/*
	 * Room for a burst (every link of a host going down) while we print;
	 * the kernel caps it at net.core.rmem_max.
	 */
	nl_socket_set_buffer_size(nl.sk, 1 << 20, 0);
	nl_socket_set_nonblocking(nl.sk);
	nl_socket_modify_cb(nl.sk, NL_CB_VALID, NL_CB_CUSTOM, monitor_cb, &m);
	/*
	 * SIGINT and SIGTERM are let in only inside ppoll(): one that comes
	 * while an event is printed is seen at the next ppoll(), never lost
	 * between the flag's test and the wait.
	 */
	monitor_stop = 0;
	sigemptyset(&block);
	sigaddset(&block, SIGINT);
	sigaddset(&block, SIGTERM);
	sigprocmask(SIG_BLOCK, &block, &orig);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	pfd.fd = nl_socket_get_fd(nl.sk);
	pfd.events = POLLIN;
	rc = EXIT_OK;
	while (!monitor_stop && !m.err) {
		ret = ppoll(&pfd, 1, NULL, &orig);
		if (ret < 0) {
			if (errno == EINTR)
				continue;
			err_msg("poll: %s", strerror(errno));
			rc = EXIT_FAIL;
			break;
		}
		ret = nl_recvmsgs_default(nl.sk);
		if (ret < 0 && ret != -NLE_AGAIN && ret != -NLE_INTR) {
			/* ENOBUFS: the socket overflowed; say so in the stream, go on. */
			if (ret == -NLE_NOMEM) {
				monitor_lost(&m, 0);
				continue;
			}
			err_msg("receiving events: %s", nl_geterror(ret));
			rc = EXIT_FAIL;
			break;
		}
	}
	sigprocmask(SIG_SETMASK, &orig, NULL);
	if (m.err) {
		err_msg("writing events: %s", strerror(-m.err));
		rc = EXIT_FAIL;
	}
	enl_close(&nl);
	/* Interrupted is how a monitor ends, as ip monitor's: not a failure. */
	return rc;
}
