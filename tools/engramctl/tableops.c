// SPDX-License-Identifier: GPL-2.0
/*
 * The table operations more than one command uses (table.h): TABLE_GET,
 * UNLOAD and VERIFY by name, following a job to its end, loading a file's
 * table with everything that can go wrong explained, the dump of every
 * table, and the signals that end a wait.  table.c's commands and sync.c's
 * build on them; nothing here calls a command, so the two never call each
 * other round.
 *
 * Loading is asynchronous in the kernel: TABLE_LOAD starts a worker and
 * returns, and this tool follows it with TABLE_GET.  Whatever ends the wait
 * other than success (load failure, Ctrl-C, SIGTERM from a unit stop) is
 * followed by TABLE_UNLOAD, so no half-loaded table outlives the command.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <netlink/attr.h>

#include "engramctl.h"
#include "fmt.h"
#include "jsonout.h"
#include "notify.h"
#include "progress.h"
#include "safetensors.h"
#include "table.h"
#include "tableinfo.h"

#define POLL_MS		200

static volatile sig_atomic_t interrupted;
/* Set by a command that loads several tables: each load must not reset it. */
static int signals_armed;

static void on_signal(int sig)
{
	interrupted = sig;
}

/**
 * table_signals_catch() - catch SIGINT and SIGTERM for one wait
 *
 * No SA_RESTART: the poll sleep must end as soon as the user asks.  Clears
 * what an earlier signal left.
 */
void table_signals_catch(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	interrupted = 0;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
}

/**
 * table_signals_arm() - catch SIGINT and SIGTERM for a whole command
 *
 * For a command that loads several tables (sync): the loads then leave the
 * handlers and the flag alone, so a signal between two of them still ends
 * the command.  table_signals_disarm() at its end.
 */
void table_signals_arm(void)
{
	table_signals_catch();
	signals_armed = 1;
}

void table_signals_disarm(void)
{
	signals_armed = 0;
}

void table_sleep_ms(unsigned int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

int table_check_name(const char *name, const char *hint)
{
	if (valid_table_name(name))
		return 0;
	err_msg("table name '%s' is not valid: 1-%d characters of A-Z a-z 0-9 . _ -%s",
		name, ENGRAM_NAME_MAX - 1, hint);
	return -EINVAL;
}

static int reply_table(struct nl_msg *msg, void *arg)
{
	struct nlattr *tb[ENGRAM_A_MAX + 1];

	if (enl_parse(msg, tb))
		return -EPROTO;
	return table_info_from_attrs(arg, tb);
}

int table_get(struct enl *nl, const char *name, struct table_info *ti)
{
	int ret;

	memset(ti, 0, sizeof(*ti));
	ret = enl_request_str(nl, ENGRAM_CMD_TABLE_GET, ENGRAM_A_TABLE_NAME, name, reply_table, ti);
	if (!ret && (!ti->name[0] || !TI_HAS(ti, ENGRAM_A_TABLE_STATE)))
		ret = -EPROTO;
	return ret;
}

/* UNLOAD and VERIFY: a name in, nothing we need back. */
int table_cmd_name(struct enl *nl, uint8_t cmd, const char *name)
{
	return enl_request_str(nl, cmd, ENGRAM_A_TABLE_NAME, name, NULL, NULL);
}

/* Follows a job until the table leaves state @busy; -EINTR when interrupted. */
int table_wait(struct enl *nl, const char *name, uint8_t busy, struct progress *pg,
		      struct table_info *ti)
{
	int ret;

	for (;;) {
		ret = table_get(nl, name, ti);
		if (ret)
			return ret;
		if (ti->state != busy)
			return 0;
		progress_update(pg, ti->done_bytes, ti->file_bytes, ti->elapsed_ns);
		svc_progress(pg, ti->done_bytes, ti->file_bytes, ti->elapsed_ns);
		if (interrupted)
			return -EINTR;
		table_sleep_ms(POLL_MS);
		if (interrupted)
			return -EINTR;
	}
}

static ssize_t pread_full(int fd, void *buf, size_t len, off_t off)
{
	size_t done = 0;
	ssize_t n;

	while (done < len) {
		n = pread(fd, (char *)buf + done, len - done, off + done);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -1;
		if (!n)
			break;
		done += n;
	}
	return done;
}

/* Reads and checks FILE's safetensors header and finds PREFIX's geometry. */
static int read_geometry(const char *file, int fd, const char *prefix, struct st_engram *eg)
{
	char err[ST_ERR_LEN], hint[512];
	struct st_file *st = NULL;
	uint8_t head[8], *buf;
	uint64_t hlen;
	struct stat sb;
	ssize_t n;
	int ret;

	if (fstat(fd, &sb)) {
		err_msg("%s: %s", file, strerror(errno));
		return -errno;
	}
	if (!S_ISREG(sb.st_mode)) {
		err_msg("%s: not a regular file", file);
		return -EINVAL;
	}
	n = pread_full(fd, head, sizeof(head), 0);
	if (n < 0) {
		err_msg("%s: read: %s", file, strerror(errno));
		return -EIO;
	}
	if (st_header_len(head, n, sb.st_size, &hlen, err, sizeof(err))) {
		err_msg("%s: %s", file, err);
		return -EINVAL;
	}
	buf = malloc(8 + hlen);
	if (!buf) {
		err_msg("%s: out of memory for a %" PRIu64 "-byte header", file, hlen);
		return -ENOMEM;
	}
	n = pread_full(fd, buf, 8 + hlen, 0);
	if (n < 0) {
		err_msg("%s: read: %s", file, strerror(errno));
		free(buf);
		return -EIO;
	}
	if ((uint64_t)n < 8 + hlen) {
		err_msg("%s: file truncated while reading its header (%zd of %" PRIu64 " bytes)",
			file, n, 8 + hlen);
		free(buf);
		return -EINVAL;
	}
	ret = st_parse(buf, n, sb.st_size, &st, err, sizeof(err));
	free(buf);
	if (ret) {
		err_msg("%s: %s", file, err);
		return ret;
	}
	ret = st_engram_lookup(st, prefix, eg, err, sizeof(err));
	if (ret) {
		if (st_engram_candidates(st, hint, sizeof(hint)))
			err_msg("%s: %s (Engram tables in this file: %s)", file, err, hint);
		else
			err_msg("%s: %s (this file has no Engram table)", file, err);
	}
	st_free(st);
	return ret;
}

static void print_loaded(const struct table_info *ti)
{
	char hex[2 * ENGRAM_SHA256_LEN + 1], sz[32], dur[32], rate[32];

	printf("%s: loaded, generation %" PRIu64 ", %" PRIu64
	       " rows, %s pinned in %s (%s)\n", ti->name, ti->generation, ti->rows,
	       fmt_bytes(sz, sizeof(sz), ti->pinned_bytes),
	       fmt_duration(dur, sizeof(dur), ti->elapsed_ns),
	       fmt_rate(rate, sizeof(rate), ti->file_bytes, ti->elapsed_ns));
	if (TI_HAS(ti, ENGRAM_A_TABLE_SHA256))
		printf("  sha256 %s\n", fmt_hex(hex, ti->sha256, ENGRAM_SHA256_LEN));
}

void print_table_error(const struct table_info *ti, const char *what)
{
	fprintf(stderr, "engramctl: %s: %s", ti->name, what);
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR))
		fprintf(stderr, ": %s", strerror(ti->error));
	if (TI_HAS(ti, ENGRAM_A_TABLE_ERROR_MSG) && ti->error_msg[0])
		fprintf(stderr, ": %s", ti->error_msg);
	fputc('\n', stderr);
}

int print_json_table(const struct table_info *ti)
{
	return json_print(table_info_json(ti), opts.pretty) ? EXIT_FAIL : EXIT_OK;
}

/* Leaves nothing behind after a failed or cancelled load. */
static void cleanup_unload(struct enl *nl, const char *name)
{
	int ret = table_cmd_name(nl, ENGRAM_CMD_TABLE_UNLOAD, name);

	if (ret && ret != -ENOENT)
		enl_perror(nl, ret, "%s: unload after failed load", name);
}

/*
 * Loads @file's table @prefix as @name and follows the load to its end;
 * @sha (or NULL) is the digest the whole file must have.  Errors and a
 * cancel (Ctrl-C, SIGTERM) are explained on stderr and leave no table
 * behind; with @report the loaded table is printed (text or -j).  @ti, if
 * not NULL, gets the table as it ended.  Returns an EXIT_* code.
 */
int table_load_file(struct enl *nl, const char *file, const char *prefix, const char *name,
		    const uint8_t *sha, uint64_t held_first, uint64_t held_rows,
		    int show_progress, int report, struct table_info *out)
{
	char path[PATH_MAX];
	struct table_info ti;
	struct st_engram eg;
	struct progress pg;
	int fd, ret, rc = EXIT_FAIL;
	struct nl_msg *msg;

	memset(&ti, 0, sizeof(ti));
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		err_msg("%s: %s", file, strerror(errno));
		return EXIT_FAIL;
	}
	if (read_geometry(file, fd, prefix, &eg))
		goto out_fd;
	if (held_rows && (held_first >= eg.rows || held_rows > eg.rows - held_first)) {
		err_msg("%s: --rows %" PRIu64 "-%" PRIu64 " is not inside its %" PRIu64 " rows",
			file, held_first, held_first + held_rows - 1, eg.rows);
		goto out_fd;
	}
	if (!realpath(file, path)) {
		err_msg("%s: realpath: %s", file, strerror(errno));
		goto out_fd;
	}
	if (strlen(path) >= ENGRAM_PATH_MAX) {
		err_msg("%s: path longer than %d bytes", file, ENGRAM_PATH_MAX - 1);
		goto out_fd;
	}

	msg = enl_msg(nl, ENGRAM_CMD_TABLE_LOAD, 0);
	if (!msg ||
	    nla_put_string(msg, ENGRAM_A_TABLE_NAME, name) ||
	    nla_put_u32(msg, ENGRAM_A_TABLE_FD, fd) ||
	    nla_put_string(msg, ENGRAM_A_TABLE_PATH, path) ||
	    nla_put_u64(msg, ENGRAM_A_TABLE_ROWS, eg.rows) ||
	    nla_put_u64(msg, ENGRAM_A_TABLE_WEIGHT_OFFSET, eg.weight_offset) ||
	    nla_put_u64(msg, ENGRAM_A_TABLE_SCALE_OFFSET, eg.scale_offset) ||
	    nla_put_u32(msg, ENGRAM_A_TABLE_WEIGHT_BYTES, ENGRAM_WEIGHT_BYTES) ||
	    nla_put_u32(msg, ENGRAM_A_TABLE_SCALE_BYTES, ENGRAM_SCALE_BYTES) ||
	    (sha && nla_put(msg, ENGRAM_A_TABLE_SHA256, ENGRAM_SHA256_LEN, sha)) ||
	    (held_rows && (nla_put_u64(msg, ENGRAM_A_TABLE_HELD_FIRST, held_first) ||
			   nla_put_u64(msg, ENGRAM_A_TABLE_HELD_ROWS, held_rows)))) {
		nlmsg_free(msg);
		err_msg("out of memory");
		goto out_fd;
	}

	if (!signals_armed)
		table_signals_catch();
	ret = enl_request(nl, msg, reply_table, &ti);
	/* The kernel took its own reference to the file during the request. */
	close(fd);
	fd = -1;
	if (ret) {
		enl_perror(nl, ret, "load %s", name);
		goto out_fd;
	}

	progress_init(&pg, "loading", name, show_progress);
	ret = table_wait(nl, name, ENGRAM_TABLE_LOADING, &pg, &ti);
	progress_end(&pg);
	if (ret == -EINTR) {
		ret = table_cmd_name(nl, ENGRAM_CMD_TABLE_UNLOAD, name);
		if (ret && ret != -ENOENT)
			enl_perror(nl, ret, "%s: unload to cancel the load", name);
		err_msg("%s: load cancelled", name);
		rc = EXIT_INTR;
		goto out_fd;
	}
	if (ret) {
		enl_perror(nl, ret, "%s: waiting for the load", name);
		cleanup_unload(nl, name);
		goto out_fd;
	}
	if (ti.state == ENGRAM_TABLE_FAILED) {
		print_table_error(&ti, "load failed");
		cleanup_unload(nl, name);
		if (opts.json && report)
			print_json_table(&ti);
		goto out_fd;
	}
	if (ti.state != ENGRAM_TABLE_READY && ti.state != ENGRAM_TABLE_VERIFYING) {
		/* A verify may already have started on the fresh table; anything else is odd. */
		err_msg("%s: unexpected table state %u after load", name, ti.state);
		goto out_fd;
	}
	rc = EXIT_OK;
	if (report)
		rc = opts.json ? print_json_table(&ti) : (print_loaded(&ti), EXIT_OK);
out_fd:
	if (fd >= 0)
		close(fd);
	if (out)
		*out = ti;
	return rc;
}

/*
 * @prefix's geometry in @file, as a load would find it; 0 or a negative
 * errno, explained on stderr.
 */
int table_geometry(const char *file, const char *prefix, struct st_engram *eg)
{
	int fd, ret;

	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		ret = -errno;
		err_msg("%s: %s", file, strerror(errno));
		return ret;
	}
	ret = read_geometry(file, fd, prefix, eg);
	close(fd);
	return ret;
}

/* True once SIGINT or SIGTERM came during a load or wait of this process. */
int table_interrupted(void)
{
	return interrupted != 0;
}

struct table_list {
	struct table_info *v;
	size_t n, cap;
};

static int reply_list(struct nl_msg *msg, void *arg)
{
	struct table_list *l = arg;
	struct table_info *nv;

	nv = enl_grow(l->v, &l->cap, l->n, sizeof(*l->v));
	if (!nv)
		return -ENOMEM;
	l->v = nv;
	if (reply_table(msg, &l->v[l->n]))
		return -EPROTO;
	l->n++;
	return 0;
}

static int cmp_name(const void *a, const void *b)
{
	return strcmp(((const struct table_info *)a)->name, ((const struct table_info *)b)->name);
}

/*
 * Every table, sorted by name, into *@v (to be freed) and *@n; 0 or a
 * negative errno, explained on stderr.
 */
int table_dump(struct enl *nl, struct table_info **v, size_t *n)
{
	struct table_list l = { 0 };
	struct nl_msg *msg;
	int ret;

	*v = NULL;
	*n = 0;
	msg = enl_msg(nl, ENGRAM_CMD_TABLE_GET, NLM_F_DUMP);
	if (!msg) {
		err_msg("out of memory");
		return -ENOMEM;
	}
	ret = enl_request(nl, msg, reply_list, &l);
	if (ret) {
		enl_perror(nl, ret, "list tables");
		free(l.v);
		return ret;
	}
	qsort(l.v, l.n, sizeof(*l.v), cmp_name);
	*v = l.v;
	*n = l.n;
	return 0;
}
