// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl table drain|undrain: take a host's tables out of the GPU
 * nodes' routing before maintenance, and put them back.
 *
 * TABLE_DRAIN marks tables draining: still served, but the host's catalog
 * tells GPU nodes (protocol version 6) to send no new fetch of a table
 * opened on no link there.  --wait then follows TABLE_GET until each table
 * drained has no request in flight and has had none for the quiet time,
 * so that unloading it, or the module, next costs no fetch anything.  A
 * table unloaded meanwhile counts as drained; one that stops draining
 * (undrained, or loaded again) ends the wait with an error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <netlink/attr.h>

#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "progress.h"
#include "table.h"
#include "tableinfo.h"

#define DRAIN_POLL_MS		100
#define DRAIN_WAIT_DEFAULT_S	300
#define DRAIN_WAIT_MAX_S	86400
#define DRAIN_QUIET_DEFAULT_MS	1000
#define DRAIN_QUIET_MAX_MS	3600000
/* Busy tables named on a progress line; the error at the end names all. */
#define DRAIN_PROGRESS_NAMES	3

void usage_drain(FILE *f)
{
	fputs("Usage: engramctl [-j] table drain NAME | --all [--wait[=SECONDS]] [--quiet MS]\n"
	      "                                 [--no-progress]\n"
	      "       engramctl [-j] table undrain NAME | --all\n"
	      "\n"
	      "drain    go on serving table NAME (with --all: every table loaded), but tell\n"
	      "         GPU nodes (protocol version 6) to send new fetches of tables opened\n"
	      "         on no link to other hosts; older GPU nodes no longer see the table;\n"
	      "         --wait: then wait, at most SECONDS (default 300; a value is written\n"
	      "         --wait=SECONDS), until each table drained has no request in flight\n"
	      "         and has had none for --quiet MS (default 1000), so that unloading\n"
	      "         it costs no fetch anything; exit 1 naming the tables still busy\n"
	      "         when the time runs out\n"
	      "undrain  send new fetches to the table again\n", f);
}

struct drain_opts {
	const char *name;	/* NULL: --all */
	int wait;		/* --wait given */
	uint64_t wait_s;
	uint64_t quiet_ms;
	int show_progress;
};

/* A table this command drained, as the last TABLE_GET showed it. */
struct drained {
	char name[ENGRAM_NAME_MAX];
	int gone;		/* unloaded since: it serves nothing any more */
	int draining;
	uint32_t inflight;
	int has_quiet;
	uint64_t quiet_ns;
};

struct drain_set {
	struct drained *v;
	size_t n;
};

/* Is @s a plain number, as a --wait value given as a separate word would be? */
static int all_digits(const char *s)
{
	if (!*s)
		return 0;
	for (; *s; s++)
		if (*s < '0' || *s > '9')
			return 0;
	return 1;
}

/*
 * Options and arguments of drain (@drain) or undrain; -1 when they are
 * good, else the exit code (usage printed or explained).
 */
static int parse_args(int argc, char **argv, int drain, struct drain_opts *o)
{
	static const struct option drain_longopts[] = {
		{ "all", no_argument, NULL, 'a' },
		{ "wait", optional_argument, NULL, 'w' },
		{ "quiet", required_argument, NULL, 'q' },
		{ "no-progress", no_argument, NULL, 'P' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	static const struct option undrain_longopts[] = {
		{ "all", no_argument, NULL, 'a' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	const char *cmd = drain ? "table drain" : "table undrain";
	const char *quiet = NULL, *hint = "";
	int c, all = 0, wait_bare = 0, rc = EXIT_USAGE;

	memset(o, 0, sizeof(*o));
	o->wait_s = DRAIN_WAIT_DEFAULT_S;
	o->quiet_ms = DRAIN_QUIET_DEFAULT_MS;
	o->show_progress = 1;
	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS,
				drain ? drain_longopts : undrain_longopts, NULL)) != -1) {
		switch (common_opt(c, argv, cmd, usage_drain, &rc)) {
		case 1:
			continue;
		case -1:
			return rc;
		}
		switch (c) {
		case 'a':
			all = 1;
			break;
		case 'w':
			o->wait = 1;
			wait_bare = !optarg;
			if (optarg && (parse_u64(optarg, &o->wait_s, 0) ||
				       o->wait_s > DRAIN_WAIT_MAX_S))
				return usage_error(cmd, "--wait=%s: not a number of seconds from 0 "
						   "to %d", optarg, DRAIN_WAIT_MAX_S);
			break;
		case 'q':
			quiet = optarg;
			if (parse_u64(optarg, &o->quiet_ms, 0) || o->quiet_ms > DRAIN_QUIET_MAX_MS)
				return usage_error(cmd, "--quiet %s: not a number of milliseconds "
						   "from 0 to %d", optarg, DRAIN_QUIET_MAX_MS);
			break;
		case 'P':
			o->show_progress = 0;
			break;
		}
	}
	/* "--wait 30" gives getopt a NAME "30": say how to write it. */
	if (wait_bare && optind < argc && all_digits(argv[argc - 1]))
		hint = " (a --wait value is written --wait=SECONDS)";
	if (all && optind < argc)
		return usage_error(cmd, "NAME or --all, not both%s", hint);
	if (!all && optind >= argc)
		return usage_error(cmd, "NAME or --all missing");
	if (argc - optind > 1)
		return usage_error(cmd, "one NAME only%s", hint);
	if (quiet && !o->wait)
		return usage_error(cmd, "--quiet is for --wait");
	if (!all) {
		o->name = argv[optind];
		if (table_check_name(o->name, ""))
			return EXIT_USAGE;
	}
	return -1;
}

/* TABLE_DRAIN of @name (NULL: every table) to @on; 0 or a negative errno, explained. */
static int drain_send(struct enl *nl, const char *name, int on)
{
	const char *what = on ? "drain" : "undrain";
	struct nl_msg *msg;
	int ret;

	msg = enl_msg(nl, ENGRAM_CMD_TABLE_DRAIN, 0);
	if (!msg || nla_put_u8(msg, ENGRAM_A_TABLE_DRAINING, !!on) ||
	    (name && nla_put_string(msg, ENGRAM_A_TABLE_NAME, name))) {
		nlmsg_free(msg);
		err_msg("out of memory");
		return -ENOMEM;
	}
	ret = enl_request(nl, msg, NULL, NULL);
	if (!ret)
		return 0;
	if (name)
		enl_perror(nl, ret, "%s %s", what, name);
	else
		enl_perror(nl, ret, "%s --all", what);
	if (ret == -EOPNOTSUPP)
		err_msg("the loaded engram_rdma cannot drain tables (a module older than this "
			"engramctl)");
	return ret;
}

/*
 * The tables now: @name's alone (none when it is gone), or every table;
 * into *@v (to be freed) and *@n.  0 or a negative errno, explained.
 */
static int tables_now(struct enl *nl, const char *name, struct table_info **v, size_t *n)
{
	int ret;

	if (!name)
		return table_dump(nl, v, n);
	*n = 0;
	*v = malloc(sizeof(**v));
	if (!*v) {
		err_msg("out of memory");
		return -ENOMEM;
	}
	ret = table_get(nl, name, *v);
	if (!ret) {
		*n = 1;
	} else if (ret != -ENOENT) {
		enl_perror(nl, ret, "table %s", name);
		free(*v);
		*v = NULL;
		return ret;
	}
	return 0;
}

/*
 * The tables drained: @name, or every table the kernel says is draining
 * now; with @warn the others (but failed ones, which serve nothing) are
 * named on stderr.  0 or -ENOMEM, explained.
 */
static int set_init(struct drain_set *s, const char *name, const struct table_info *v, size_t n,
		    int warn)
{
	size_t i;

	s->n = 0;
	s->v = calloc(n ? n : 1, sizeof(*s->v));
	if (!s->v) {
		err_msg("out of memory");
		return -ENOMEM;
	}
	if (name) {
		snprintf(s->v[0].name, sizeof(s->v[0].name), "%s", name);
		s->n = 1;
		return 0;
	}
	for (i = 0; i < n; i++) {
		if (table_info_draining(&v[i]))
			snprintf(s->v[s->n++].name, sizeof(s->v[0].name), "%s", v[i].name);
		else if (warn && v[i].state != ENGRAM_TABLE_FAILED)
			err_msg("%s: not draining (state %s)", v[i].name,
				table_state_name(v[i].state));
	}
	return 0;
}

static void set_update(struct drain_set *s, const struct table_info *v, size_t n)
{
	struct drained *d;
	size_t i, k;

	for (i = 0; i < s->n; i++) {
		d = &s->v[i];
		for (k = 0; k < n && strcmp(v[k].name, d->name); k++)
			;
		if (k == n) {
			d->gone = 1;
			continue;
		}
		d->draining = table_info_draining(&v[k]);
		/* A module that reports no count has nothing to count. */
		d->inflight = TI_HAS(&v[k], ENGRAM_A_TABLE_INFLIGHT) ? v[k].inflight : 0;
		d->has_quiet = TI_HAS(&v[k], ENGRAM_A_TABLE_DRAIN_QUIET_NS);
		d->quiet_ns = v[k].drain_quiet_ns;
	}
}

/*
 * One TABLE_GET (of @name) or dump into @s, which @init (1: warn about
 * tables not draining, 2: do not) fills first; 0 or a negative errno,
 * explained.
 */
static int set_poll(struct enl *nl, const char *name, struct drain_set *s, int init)
{
	struct table_info *v;
	size_t n;
	int ret;

	ret = tables_now(nl, name, &v, &n);
	if (ret)
		return ret;
	ret = init ? set_init(s, name, v, n, init == 1) : 0;
	if (!ret)
		set_update(s, v, n);
	free(v);
	return ret;
}

static int is_quiet(const struct drained *d, uint64_t quiet_ms)
{
	return d->gone || (d->draining && !d->inflight && d->has_quiet &&
			   d->quiet_ns >= quiet_ms * 1000000);
}

/* The first table drained that does not drain any more, or NULL. */
static const struct drained *set_undrained(const struct drain_set *s)
{
	size_t i;

	for (i = 0; i < s->n; i++)
		if (!s->v[i].gone && !s->v[i].draining)
			return &s->v[i];
	return NULL;
}

static size_t set_busy(const struct drain_set *s, uint64_t quiet_ms)
{
	size_t i, busy = 0;

	for (i = 0; i < s->n; i++)
		busy += !is_quiet(&s->v[i], quiet_ms);
	return busy;
}

/* "3 in flight" or "quiet 0.4 s of 1.0 s": why @d is not drained yet. */
static const char *busy_why(char *buf, size_t len, const struct drained *d, uint64_t quiet_ms)
{
	char q[32], of[32];

	if (d->inflight)
		snprintf(buf, len, "%" PRIu32 " in flight", d->inflight);
	else if (!d->has_quiet)
		snprintf(buf, len, "quiet time not reported");
	else
		snprintf(buf, len, "quiet %s of %s", fmt_duration(q, sizeof(q), d->quiet_ns),
			 fmt_duration(of, sizeof(of), quiet_ms * 1000000));
	return buf;
}

static void show_progress(struct progress *pg, const struct drain_set *s,
			  const struct drain_opts *o, uint64_t waited_ms)
{
	char line[1024], why[96], w[32];
	size_t i, shown = 0, busy = set_busy(s, o->quiet_ms);
	int off;

	off = snprintf(line, sizeof(line), "draining: %zu of %zu busy:", busy, s->n);
	for (i = 0; i < s->n && off > 0 && (size_t)off < sizeof(line); i++) {
		if (is_quiet(&s->v[i], o->quiet_ms))
			continue;
		if (shown++ == DRAIN_PROGRESS_NAMES) {
			off += snprintf(line + off, sizeof(line) - off, ", ...");
			break;
		}
		off += snprintf(line + off, sizeof(line) - off, "%s %s (%s)", shown > 1 ? "," : "",
				s->v[i].name, busy_why(why, sizeof(why), &s->v[i], o->quiet_ms));
	}
	if (off > 0 && (size_t)off < sizeof(line))
		snprintf(line + off, sizeof(line) - off, "; waited %s of %" PRIu64 " s",
			 fmt_duration(w, sizeof(w), waited_ms * 1000000), o->wait_s);
	progress_text(pg, line);
}

/*
 * Follows @s until every table is quiet: 0, -ETIMEDOUT when the time
 * ran out, -EINTR when interrupted, -ESTALE when a table stopped
 * draining, or the errno of a failed TABLE_GET (explained).
 */
static int drain_wait(struct enl *nl, const struct drain_opts *o, struct drain_set *s,
		      uint64_t *waited_ms)
{
	uint64_t start = progress_now_ms(), now, limit = o->wait_s * 1000;
	/* The clock bounds the loop; the count too, whatever the clock does. */
	uint64_t polls, max_polls = limit / DRAIN_POLL_MS + 2;
	const struct drained *d;
	struct progress pg;
	int ret = 0;

	progress_init(&pg, "draining", o->name ? o->name : "", o->show_progress);
	table_signals_catch();
	for (polls = 0;; polls++) {
		if (polls) {
			ret = set_poll(nl, o->name, s, 0);
			if (ret)
				break;
		}
		now = progress_now_ms();
		*waited_ms = now - start;
		d = set_undrained(s);
		if (d) {
			progress_end(&pg);
			err_msg("%s: no longer draining (undrained, or loaded again)", d->name);
			ret = -ESTALE;
			break;
		}
		if (!set_busy(s, o->quiet_ms))
			break;
		if (table_interrupted()) {
			ret = -EINTR;
			break;
		}
		if (*waited_ms >= limit || polls >= max_polls) {
			ret = -ETIMEDOUT;
			break;
		}
		show_progress(&pg, s, o, *waited_ms);
		table_sleep_ms(limit - *waited_ms < DRAIN_POLL_MS ?
			       (unsigned int)(limit - *waited_ms) : DRAIN_POLL_MS);
		if (table_interrupted()) {
			ret = -EINTR;
			break;
		}
	}
	progress_end(&pg);
	return ret;
}

static json_t *names_json(const struct drain_set *s)
{
	json_t *arr = json_array();
	size_t i;

	for (i = 0; arr && i < s->n; i++) {
		if (json_array_append_new(arr, json_string(s->v[i].name))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

static json_t *busy_json(const struct drain_set *s, uint64_t quiet_ms)
{
	json_t *arr = json_array(), *t;
	size_t i;

	for (i = 0; arr && i < s->n; i++) {
		const struct drained *d = &s->v[i];

		if (is_quiet(d, quiet_ms))
			continue;
		t = json_object();
		if (!t || json_array_append_new(arr, t) ||
		    json_set(t, "name", json_string(d->name)) ||
		    json_set(t, "inflight", json_integer(d->inflight)) ||
		    (d->has_quiet &&
		     json_set(t, "drain_quiet_ms", json_u64(d->quiet_ns / 1000000)))) {
			json_decref(arr);
			return NULL;
		}
	}
	return arr;
}

/*
 * What drain did: -j's object, or a line a table ("NAME: draining",
 * "drained", "drained (unloaded)" or "busy (WHY)").  @waited is set with
 * --wait, @busy only then.
 */
static int drain_report(const struct drain_set *s, const struct drain_opts *o, int waited,
			uint64_t waited_ms)
{
	char why[96];
	json_t *obj;
	size_t i;

	if (opts.json) {
		obj = json_object();
		if (obj && (json_set(obj, "draining", names_json(s)) ||
			    (waited &&
			     (json_set(obj, "drained", json_boolean(!set_busy(s, o->quiet_ms))) ||
			      json_set(obj, "waited_ms", json_u64(waited_ms)) ||
			      json_set(obj, "busy", busy_json(s, o->quiet_ms)))))) {
			json_decref(obj);
			obj = NULL;
		}
		return json_print(obj, opts.pretty) ? EXIT_FAIL : EXIT_OK;
	}
	for (i = 0; i < s->n; i++) {
		const struct drained *d = &s->v[i];

		if (!waited)
			printf("%s: %s\n", d->name, d->gone ? "unloaded" : "draining");
		else if (d->gone)
			printf("%s: drained (unloaded)\n", d->name);
		else if (is_quiet(d, o->quiet_ms))
			printf("%s: drained\n", d->name);
		else
			printf("%s: busy (%s)\n", d->name,
			       busy_why(why, sizeof(why), d, o->quiet_ms));
	}
	return fflush(stdout) ? EXIT_FAIL : EXIT_OK;
}

/* "still busy after 300 s: b (3 in flight), c (quiet 0.4 s of 1.0 s)" */
static void explain_busy(const struct drain_set *s, const struct drain_opts *o, const char *what)
{
	char why[96];
	const char *sep = "";
	size_t i;

	fprintf(stderr, "engramctl: drain: %s: ", what);
	for (i = 0; i < s->n; i++) {
		if (is_quiet(&s->v[i], o->quiet_ms))
			continue;
		fprintf(stderr, "%s%s (%s)", sep, s->v[i].name,
			busy_why(why, sizeof(why), &s->v[i], o->quiet_ms));
		sep = ", ";
	}
	fputs("; still draining (table undrain serves them as before)\n", stderr);
}

int table_drain(int argc, char **argv)
{
	struct drain_set s = { 0 };
	struct drain_opts o;
	uint64_t waited_ms = 0;
	char what[64];
	struct enl nl;
	int ret, rc;

	rc = parse_args(argc, argv, 1, &o);
	if (rc >= 0)
		return rc;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	rc = EXIT_FAIL;
	if (drain_send(&nl, o.name, 1) || set_poll(&nl, o.name, &s, 1))
		goto out;
	if (o.name && !s.v[0].gone && !s.v[0].draining) {
		err_msg("%s: the module did not mark it draining", o.name);
		goto out;
	}
	if (!o.wait) {
		rc = drain_report(&s, &o, 0, 0);
		goto out;
	}
	ret = drain_wait(&nl, &o, &s, &waited_ms);
	if (ret && ret != -ETIMEDOUT && ret != -EINTR)
		goto out;
	rc = drain_report(&s, &o, 1, waited_ms);
	if (ret == -ETIMEDOUT) {
		snprintf(what, sizeof(what), "timed out after %" PRIu64 " s", o.wait_s);
		explain_busy(&s, &o, what);
		rc = EXIT_FAIL;
	} else if (ret == -EINTR) {
		explain_busy(&s, &o, "stopped waiting");
		rc = EXIT_INTR;
	}
out:
	free(s.v);
	enl_close(&nl);
	return rc;
}

int table_undrain(int argc, char **argv)
{
	struct drain_set s = { 0 };
	struct drain_opts o;
	struct enl nl;
	json_t *obj;
	size_t i;
	int rc;

	rc = parse_args(argc, argv, 0, &o);
	if (rc >= 0)
		return rc;
	if (nl_open_or_explain(&nl))
		return EXIT_FAIL;
	rc = EXIT_FAIL;
	/* With --all, those draining before are the ones undrained. */
	if ((!o.name && set_poll(&nl, NULL, &s, 2)) || drain_send(&nl, o.name, 0))
		goto out;
	if (o.name) {
		s.v = calloc(1, sizeof(*s.v));
		if (!s.v) {
			err_msg("out of memory");
			goto out;
		}
		snprintf(s.v[0].name, sizeof(s.v[0].name), "%s", o.name);
		s.n = 1;
	}
	if (opts.json) {
		obj = json_object();
		if (obj && json_set(obj, "undrained", names_json(&s))) {
			json_decref(obj);
			obj = NULL;
		}
		rc = json_print(obj, opts.pretty) ? EXIT_FAIL : EXIT_OK;
		goto out;
	}
	for (i = 0; i < s.n; i++)
		printf("%s: undrained\n", s.v[i].name);
	rc = EXIT_OK;
out:
	free(s.v);
	enl_close(&nl);
	return rc;
}
