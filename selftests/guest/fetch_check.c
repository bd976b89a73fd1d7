// SPDX-License-Identifier: GPL-2.0
/*
 * fetch_check: fetch random rows of a table through /dev/engram_rdma
 * (libengram) and check every byte against the table's file, read
 * independently (mapped, or with pread(); never through the module).
 *
 *   fetch_check --table NAME --file PATH --weight-offset N --scale-offset N
 *               [--dev PATH] [--link N] [--sha256 HEX] [--rows-total N] [--rows-below N]
 *               [--count N] [--batch LIST] [--seed N] [--stride N]
 *               [--offset N] [--buf-bytes N] [--mode fetch|submit|word]
 *               [--busy-poll] [--procs N] [--timeout-ms N] [--timeout-ns N]
 *               [--ranges N] [--rows-list LIST] [--expect-errno NAME]
 *               [--verify-after] [--settle-ms N] [--max-ms N] [--max-local-ms N]
 *               [--tolerate] [--duration-s N] [--stop-file PATH] [--progress-s N]
 *               [--count-exact]
 *               [--local FILE] [--local-tensor PREFIX] [--required]
 *               [--expect-fallbacks MIN] [--expect-no-fallbacks]
 *
 * Normal run: one staging buffer, registered once, big enough for the
 * largest batch (--buf-bytes overrides its size); --count rows in batches
 * of the --batch sizes in turn (default 288); random indices with repeats,
 * the first and the last row of the table in every fourth batch
 * (--rows-below N: rows below N only, N - 1 the last; for a shard).  Before
 * each fetch the whole buffer is filled with a canary byte (a different one
 * per batch); after it, every row is compared with the file and every byte
 * that is not a row (before --offset, stride gaps, between and after the
 * ranges) must still hold the canary.  With --ranges N the destination is
 * N ranges at row boundaries, laid out in the buffer in reverse order with
 * 8 canary bytes between them, so a row placed by its index alone is caught.
 * --mode submit sends with SUBMIT, waits for POLLIN on the fd (unless
 * --busy-poll), then WAITs for the ticket.  --mode word sends with a
 * completion word (engram_submit_word(), in a page registered apart) and
 * spins on the word alone: the rows are checked the moment it changes to
 * the fetch's value, with no WAIT; a failure value is WAITed for (the
 * library's fallback is made there) and must carry the errno the wait
 * returns.  --procs N runs N processes, each
 * with its own fd, buffer and seed (SEED + process number), each doing the
 * whole job.  Prints one line:
 *
 *   fetch_check: rows R batches B bad N errors N p50_us X p99_us Y max_us Z
 *
 * (R, B, bad and errors summed over the processes, latencies per fetch as
 * seen by the caller) and exits 0 only when R is --count times --procs and
 * bad and errors are 0.
 *
 * --rows-list i,j,k: one fetch of exactly these rows instead (checked the
 * same way).  --expect-errno NAME (ERANGE, ESTALE, ..., or OK): the first
 * step that fails (open, register, the fetch) must fail with that errno;
 * prints "fetch_check: STEP: expected NAME, got NAME (wire_status S,
 * bad_index I)"; a fetch the server refused (wire_status not ok) must also
 * have left the whole buffer untouched.  --verify-after: then a normal run
 * on the same fd and buffer, which must pass too.  --settle-ms N: after the
 * fetch (failed for whatever reason, or succeeded as --expect-errno OK
 * expects), take a copy of the buffer as it is when the call returned,
 * sleep N ms, and fail if any byte changed since
 * (a late write); also report whether any row byte landed before the
 * return.  --max-ms N: the failing call must return within N ms of its
 * start (the deadline plus the margin the caller allows).
 *
 * --tolerate: for runs during faults.  A fetch may fail with a transport
 * error (ETIMEDOUT, ECONNRESET, ENOTCONN, ESHUTDOWN, ENETDOWN, ENETUNREACH,
 * EHOSTUNREACH, ECONNREFUSED, ENODEV, EAGAIN, ESTALE, ENOENT, and ENXIO
 * for a row no host holds while a shard's host is away): it is counted
 * as "tolerated", not as an error, provided it returned within --max-ms
 * (else "slow") and nothing lands in the buffer after it returned: the
 * buffer is compared with a copy taken at the return before the next fetch
 * refills it, and after the last one --settle-ms later (else "late").  On
 * ESTALE or ENOENT the table is opened again (it was reloaded).  Any other
 * failure, a wrong byte, a slow or a late one fails the run.  --duration-s
 * and --stop-file end the run early (still a pass), so a fault script can
 * keep a loop running while it works.  Adds "tolerated T slow S late L"
 * and "tolerated by kind: ETIMEDOUT N ENOTCONN N ..." (the errno names).
 * --progress-s N: every process prints its counts so far to stderr every N
 * seconds (for long soaks).  --count-exact: a tolerated failure does not use
 * up --count, so the run ends with --count rows fetched exact (a soak's
 * figure); a link that stays down keeps it running until --duration-s,
 * --stop-file or the caller's timeout.
 *
 * Local fallback (libengram.h): --local FILE gives the table that local
 * copy (engram_table_set_local() right after the open; --local-tensor
 * names its tensors, default the table's name; a copy refused there is the
 * step "set_local", so --expect-errno EBADMSG tests the identity check).
 * --required: engram_set_required(), remote errors come back unchanged.
 * The ENGRAM_RDMA_* environment variables work as for any libengram user.
 * Every successful fetch is counted as "fallback" (LIBENGRAM_RESULT_FALLBACK:
 * the rows came from the local copy) or "remote", printed as
 *
 *   fetch_check: fallbacks F remote N slow S
 *
 * and --expect-fallbacks MIN / --expect-no-fallbacks fail the run unless at
 * least MIN / none of the fetches fell back.  --max-ms N also bounds every
 * successful fetch, remote or fallback: one that took longer is "slow" and
 * fails the run (in a normal run and with --expect-errno OK).  With
 * --max-local-ms N, a fallback's time is split by engram_result.local_ns:
 * the remote attempt (the rest of the call) is bounded by --max-ms, the
 * local read by N; the longest of each is printed as
 *
 *   fetch_check: fallback max remote part R ms, max local read L ms
 *
 * --duration-s
 * and --stop-file end a normal run early too (every fetch made must pass).
 *
 * --identity HEX:PATH (repeatable, instead of --file and the offsets): the
 * rows of whatever the open returns are checked against the file whose
 * SHA-256 is HEX, at the tensor offsets the open reported
 * (engram_table_info), and so again after each re-open (--tolerate): a
 * table is its file and its place there, whatever name or digest opened
 * it.  An open of a file no --identity names fails the run.  For the
 * randomized exactness checker (exact_lib.sh, make soak-exact).
 *
 * Exit status: 0 pass, 1 fail, 2 usage or setup error (unreadable file ...).
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "libengram.h"
#include "test_util.h"

#define ROW	LIBENGRAM_ROW_BYTES
#define WBYTES	LIBENGRAM_WEIGHT_BYTES
#define SBYTES	LIBENGRAM_SCALE_BYTES
#define RANGE_GAP	8	/* canary bytes between two ranges */
#define MAX_DIAG	10	/* diagnostics printed per process */
#define MAX_ERRORS	10	/* a process gives up after this many failed fetches */
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define MAX_IDS		16	/* --identity files */

struct opts {
	const char *dev, *table, *file, *sha_hex;
	uint8_t sha256[LIBENGRAM_SHA256_LEN];
	uint32_t link;
	uint64_t weight_offset, scale_offset;
	bool have_woff, have_soff;
	uint64_t rows_total;		/* 0: the table's */
	uint64_t rows_below;		/* random rows below this (0: the table's rows) */
	uint64_t count;
	uint32_t *batches;
	size_t nr_batches;
	uint64_t seed;
	uint32_t stride;
	uint64_t offset;
	uint64_t buf_bytes;		/* 0: computed */
	bool submit, busy_poll, verify_after;
	bool word;			/* --mode word */
	int procs;
	uint64_t timeout_ns;
	uint32_t ranges;		/* 0: plain destination */
	uint32_t *rows_list;
	size_t nr_rows_list;
	bool expect;
	int expect_errno;		/* positive, 0 for OK */
	uint32_t settle_ms;		/* 0: no late-write check */
	uint32_t max_ms;		/* 0: no bound on the failing call */
	uint32_t max_local_ms;		/* 0: a fallback's local read counts in max_ms */
	bool tolerate;
	uint32_t duration_s;		/* 0: no time limit */
	uint32_t progress_s;		/* 0: no progress lines */
	bool count_exact;		/* --tolerate: only rows that came back count */
	const char *stop_file;
	const char *local, *local_tensor;	/* --local copy and its tensor prefix */
	bool required;
	int64_t expect_fallbacks;	/* -1: not checked; 0: none allowed; else minimum */
	/* --identity HEX:PATH: the files rows are checked against, by digest */
	struct { uint8_t sha256[LIBENGRAM_SHA256_LEN]; const char *path; } ids[MAX_IDS];
	int nr_ids;
};

#define NR_TOLERABLE	13

/* What one process reports; lat[] follows in the shared area. */
struct proc_result {
	uint64_t rows, batches, bad, errors;
	uint64_t identities;		/* --identity: opens whose rows were checked */
	uint64_t tolerated, tolerated_rows, slow, late;
	uint64_t tolerated_by_kind[NR_TOLERABLE];
	uint64_t fallbacks, remote;	/* successful fetches, by where the rows came from */
	uint64_t fb_remote_max_ms, fb_local_max_ms;	/* a fallback's two parts, longest */
	uint64_t nr_lat;
	int status;			/* exit status of the process's job */
};

/* Everything one process works with. */
struct job {
	const struct opts *o;
	int procno;
	struct engram *e;
	struct engram_table_info info;
	uint32_t handle;
	uint64_t rows_total;
	int fd;				/* the table's file */
	const uint8_t *map;		/* ... mapped, when it could be */
	size_t map_len;
	uint64_t woff, soff;		/* its tensors: --weight-offset, or the open's */
	int id_cur;			/* with --identity: the file of fd, or -1 */
	uint8_t *buf;
	size_t buf_len;
	uint32_t buf_id;
	uint64_t *word;			/* --mode word: in a page of its own */
	uint32_t word_id;
	uint64_t word_seq;
	uint32_t *rows;			/* one batch */
	uint64_t *pos;			/* buffer offset of each row of the batch */
	struct engram_range *ranges;	/* --ranges of them */
	uint32_t nr_ranges;
	uint64_t rng;
	uint8_t canary;
	bool snap_valid;		/* run_batches' snap holds the buffer to compare */
	int last_remote_error;		/* of the last fallback */
	int fallback_notes;		/* lines printed about fallbacks */
	unsigned int other_table;	/* re-opens that found the name on another table */
	int diags;
	struct proc_result *res;
	uint64_t *lat;
	uint64_t lat_cap;
};

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "OK", 0 }, { "ERANGE", ERANGE }, { "ESTALE", ESTALE }, { "ENOSPC", ENOSPC },
	{ "E2BIG", E2BIG }, { "ETIMEDOUT", ETIMEDOUT }, { "EPROTO", EPROTO },
	{ "EBUSY", EBUSY }, { "ESHUTDOWN", ESHUTDOWN }, { "EAGAIN", EAGAIN },
	{ "EIO", EIO }, { "EINVAL", EINVAL }, { "ENOENT", ENOENT }, { "EFAULT", EFAULT },
	{ "ENOMEM", ENOMEM }, { "EPERM", EPERM }, { "EACCES", EACCES },
	{ "ENODEV", ENODEV }, { "ENXIO", ENXIO }, { "ENOTTY", ENOTTY },
	{ "ENOTCONN", ENOTCONN }, { "ECONNRESET", ECONNRESET },
	{ "ENOLINK", ENOLINK }, { "EOVERFLOW", EOVERFLOW }, { "EMSGSIZE", EMSGSIZE },
	{ "ECANCELED", ECANCELED }, { "EINTR", EINTR }, { "ENAMETOOLONG", ENAMETOOLONG },
	{ "ETIME", ETIME }, { "EEXIST", EEXIST }, { "EBADF", EBADF }, { "ENODATA", ENODATA },
	{ "EBADMSG", EBADMSG }, { "ENOTDIR", ENOTDIR }, { "ENETDOWN", ENETDOWN },
	{ "ENETUNREACH", ENETUNREACH }, { "EHOSTUNREACH", EHOSTUNREACH },
	{ "ECONNREFUSED", ECONNREFUSED }, { "ENOTUNIQ", ENOTUNIQ },
};

static const char *errname(int err)
{
	static char other[32];
	size_t i;

	if (err < 0)
		err = -err;
	for (i = 0; i < ARRAY_SIZE(errnames); i++)
		if (errnames[i].err == err)
			return errnames[i].name;
	snprintf(other, sizeof(other), "errno %d", err);
	return other;
}

static int parse_errname(const char *s)
{
	size_t i;
	char *end;
	long v;

	for (i = 0; i < ARRAY_SIZE(errnames); i++)
		if (!strcasecmp(errnames[i].name, s))
			return errnames[i].err;
	errno = 0;
	v = strtol(s, &end, 0);
	if (!errno && *s && !*end && v >= 0 && v < 4096)
		return (int)v;
	return -1;
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs("fetch_check: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs(" (see the top of fetch_check.c)\n", stderr);
	exit(2);
}

/* Diagnostics of a process, limited to MAX_DIAG lines. */
__attribute__((format(printf, 2, 3)))
static void diag(struct job *j, const char *fmt, ...)
{
	va_list ap;

	/* procno is 0 .. 1023 (--procs): "%u" prints it as "%d" did. */
	va_start(ap, fmt);
	vdiag("fetch_check", &j->diags, MAX_DIAG, (unsigned int)j->procno, fmt, ap);
	va_end(ap);
}

static uint64_t parse_u64(const char *opt, const char *s)
{
	unsigned long long v;
	char *end;

	errno = 0;
	v = strtoull(s, &end, 0);
	if (errno || !*s || *end || *s == '-')
		usage_error("%s: not a number: '%s'", opt, s);
	return v;
}

static uint32_t parse_u32(const char *opt, const char *s)
{
	uint64_t v = parse_u64(opt, s);

	if (v > UINT32_MAX)
		usage_error("%s: %s is above 2^32 - 1", opt, s);
	return (uint32_t)v;
}

/* Comma-separated u32 list. */
static uint32_t *parse_list(const char *opt, const char *s, size_t *n)
{
	char *copy = strdup(s), *tok, *save = NULL;
	uint32_t *v = NULL;
	size_t cnt = 0;

	if (!copy)
		usage_error("out of memory");
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		v = realloc(v, (cnt + 1) * sizeof(*v));
		if (!v)
			usage_error("out of memory");
		v[cnt++] = parse_u32(opt, tok);
	}
	free(copy);
	if (!cnt)
		usage_error("%s: empty list", opt);
	*n = cnt;
	return v;
}

static void parse_hex(const char *s, uint8_t *out, size_t len)
{
	size_t i;
	unsigned int b;

	if (strlen(s) != 2 * len)
		usage_error("--sha256: want %zu hex digits", 2 * len);
	for (i = 0; i < len; i++) {
		if (sscanf(s + 2 * i, "%2x", &b) != 1)
			usage_error("--sha256: not hex: '%s'", s);
		out[i] = (uint8_t)b;
	}
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum {
		O_DEV = 256, O_TABLE, O_LINK, O_FILE, O_WOFF, O_SOFF, O_ROWS_TOTAL,
		O_COUNT, O_BATCH, O_SEED, O_STRIDE, O_OFFSET, O_MODE, O_BUSY, O_PROCS,
		O_TIMEOUT_MS, O_TIMEOUT_NS, O_RANGES, O_EXPECT, O_ROWS_LIST, O_VERIFY,
		O_SHA, O_BUF_BYTES, O_SETTLE, O_MAX_MS, O_MAX_LOCAL_MS, O_TOLERATE, O_DURATION,
		O_STOP, O_LOCAL, O_LOCAL_TENSOR, O_REQUIRED, O_EXPECT_FB, O_EXPECT_NO_FB,
		O_PROGRESS, O_COUNT_EXACT, O_ROWS_BELOW, O_IDENTITY,
	};
	static const struct option lo[] = {
		{ "dev", required_argument, NULL, O_DEV },
		{ "table", required_argument, NULL, O_TABLE },
		{ "sha256", required_argument, NULL, O_SHA },
		{ "link", required_argument, NULL, O_LINK },
		{ "file", required_argument, NULL, O_FILE },
		{ "weight-offset", required_argument, NULL, O_WOFF },
		{ "scale-offset", required_argument, NULL, O_SOFF },
		{ "rows-total", required_argument, NULL, O_ROWS_TOTAL },
		{ "rows-below", required_argument, NULL, O_ROWS_BELOW },
		{ "count", required_argument, NULL, O_COUNT },
		{ "batch", required_argument, NULL, O_BATCH },
		{ "seed", required_argument, NULL, O_SEED },
		{ "stride", required_argument, NULL, O_STRIDE },
		{ "offset", required_argument, NULL, O_OFFSET },
		{ "buf-bytes", required_argument, NULL, O_BUF_BYTES },
		{ "mode", required_argument, NULL, O_MODE },
		{ "busy-poll", no_argument, NULL, O_BUSY },
		{ "procs", required_argument, NULL, O_PROCS },
		{ "timeout-ms", required_argument, NULL, O_TIMEOUT_MS },
		{ "timeout-ns", required_argument, NULL, O_TIMEOUT_NS },
		{ "ranges", required_argument, NULL, O_RANGES },
		{ "expect-errno", required_argument, NULL, O_EXPECT },
		{ "rows-list", required_argument, NULL, O_ROWS_LIST },
		{ "verify-after", no_argument, NULL, O_VERIFY },
		{ "settle-ms", required_argument, NULL, O_SETTLE },
		{ "max-ms", required_argument, NULL, O_MAX_MS },
		{ "max-local-ms", required_argument, NULL, O_MAX_LOCAL_MS },
		{ "tolerate", no_argument, NULL, O_TOLERATE },
		{ "duration-s", required_argument, NULL, O_DURATION },
		{ "stop-file", required_argument, NULL, O_STOP },
		{ "local", required_argument, NULL, O_LOCAL },
		{ "local-tensor", required_argument, NULL, O_LOCAL_TENSOR },
		{ "required", no_argument, NULL, O_REQUIRED },
		{ "expect-fallbacks", required_argument, NULL, O_EXPECT_FB },
		{ "expect-no-fallbacks", no_argument, NULL, O_EXPECT_NO_FB },
		{ "progress-s", required_argument, NULL, O_PROGRESS },
		{ "count-exact", no_argument, NULL, O_COUNT_EXACT },
		{ "identity", required_argument, NULL, O_IDENTITY },
		{ NULL, 0, NULL, 0 }
	};
	uint64_t ms;
	int c;

	memset(o, 0, sizeof(*o));
	o->count = 10000;
	o->seed = 1;
	o->stride = ROW;
	o->procs = 1;
	o->expect_fallbacks = -1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case O_DEV:
			o->dev = optarg;
			break;
		case O_TABLE:
			o->table = optarg;
			break;
		case O_SHA:
			o->sha_hex = optarg;
			parse_hex(optarg, o->sha256, sizeof(o->sha256));
			break;
		case O_LINK:
			o->link = parse_u32("--link", optarg);
			break;
		case O_FILE:
			o->file = optarg;
			break;
		case O_WOFF:
			o->weight_offset = parse_u64("--weight-offset", optarg);
			o->have_woff = true;
			break;
		case O_SOFF:
			o->scale_offset = parse_u64("--scale-offset", optarg);
			o->have_soff = true;
			break;
		case O_ROWS_TOTAL:
			o->rows_total = parse_u64("--rows-total", optarg);
			break;
		case O_ROWS_BELOW:
			o->rows_below = parse_u64("--rows-below", optarg);
			if (!o->rows_below)
				usage_error("--rows-below: at least 1");
			break;
		case O_COUNT:
			o->count = parse_u64("--count", optarg);
			break;
		case O_BATCH:
			free(o->batches);
			o->batches = parse_list("--batch", optarg, &o->nr_batches);
			break;
		case O_SEED:
			o->seed = parse_u64("--seed", optarg);
			break;
		case O_STRIDE:
			o->stride = parse_u32("--stride", optarg);
			break;
		case O_OFFSET:
			o->offset = parse_u64("--offset", optarg);
			break;
		case O_BUF_BYTES:
			o->buf_bytes = parse_u64("--buf-bytes", optarg);
			break;
		case O_MODE:
			if (!strcmp(optarg, "fetch"))
				o->submit = false;
			else if (!strcmp(optarg, "submit"))
				o->submit = true;
			else if (!strcmp(optarg, "word"))
				o->submit = o->word = true;
			else
				usage_error("--mode: fetch, submit or word, not '%s'", optarg);
			break;
		case O_BUSY:
			o->busy_poll = true;
			break;
		case O_PROCS:
			o->procs = (int)parse_u32("--procs", optarg);
			if (o->procs < 1 || o->procs > 1024)
				usage_error("--procs: 1 .. 1024");
			break;
		case O_TIMEOUT_MS:
			ms = parse_u64("--timeout-ms", optarg);
			if (ms > UINT64_MAX / 1000000)
				usage_error("--timeout-ms: too large");
			o->timeout_ns = ms * 1000000;
			break;
		case O_TIMEOUT_NS:
			o->timeout_ns = parse_u64("--timeout-ns", optarg);
			break;
		case O_RANGES:
			o->ranges = parse_u32("--ranges", optarg);
			if (o->ranges < 1)
				usage_error("--ranges: at least 1");
			break;
		case O_EXPECT:
			o->expect = true;
			o->expect_errno = parse_errname(optarg);
			if (o->expect_errno < 0)
				usage_error("--expect-errno: unknown name '%s'", optarg);
			break;
		case O_ROWS_LIST:
			free(o->rows_list);
			o->rows_list = parse_list("--rows-list", optarg, &o->nr_rows_list);
			break;
		case O_VERIFY:
			o->verify_after = true;
			break;
		case O_SETTLE:
			o->settle_ms = parse_u32("--settle-ms", optarg);
			break;
		case O_MAX_MS:
			o->max_ms = parse_u32("--max-ms", optarg);
			break;
		case O_MAX_LOCAL_MS:
			o->max_local_ms = parse_u32("--max-local-ms", optarg);
			break;
		case O_TOLERATE:
			o->tolerate = true;
			break;
		case O_DURATION:
			o->duration_s = parse_u32("--duration-s", optarg);
			break;
		case O_PROGRESS:
			o->progress_s = parse_u32("--progress-s", optarg);
			break;
		case O_IDENTITY: {
			const char *colon = strchr(optarg, ':');

			if (!colon || colon - optarg != 2 * LIBENGRAM_SHA256_LEN ||
			    o->nr_ids == MAX_IDS)
				usage_error("--identity: HEX:PATH, %d at most", MAX_IDS);
			char hex[2 * LIBENGRAM_SHA256_LEN + 1];

			memcpy(hex, optarg, sizeof(hex) - 1);
			hex[sizeof(hex) - 1] = '\0';
			parse_hex(hex, o->ids[o->nr_ids].sha256, LIBENGRAM_SHA256_LEN);
			o->ids[o->nr_ids++].path = colon + 1;
			break;
		}
		case O_COUNT_EXACT:
			o->count_exact = true;
			break;
		case O_STOP:
			o->stop_file = optarg;
			break;
		case O_LOCAL:
			o->local = optarg;
			break;
		case O_LOCAL_TENSOR:
			o->local_tensor = optarg;
			break;
		case O_REQUIRED:
			o->required = true;
			break;
		case O_EXPECT_FB:
			o->expect_fallbacks = (int64_t)parse_u32("--expect-fallbacks", optarg);
			if (!o->expect_fallbacks)
				usage_error("--expect-fallbacks: at least 1 (or --expect-no-fallbacks)");
			break;
		case O_EXPECT_NO_FB:
			o->expect_fallbacks = 0;
			break;
		default:
			usage_error("bad option");
		}
	}
	if (optind < argc)
		usage_error("unexpected argument '%s'", argv[optind]);
	if (!o->table && !o->sha_hex)
		usage_error("--table or --sha256 is required");
	if (!o->batches) {
		o->batches = malloc(sizeof(*o->batches));
		if (!o->batches)
			usage_error("out of memory");
		o->batches[0] = 288;
		o->nr_batches = 1;
	}
	for (size_t i = 0; i < o->nr_batches; i++)
		if (!o->batches[i])
			usage_error("--batch: sizes must be at least 1");
	if ((!o->expect || o->verify_after) && !o->nr_ids) {
		if (!o->file || !o->have_woff || !o->have_soff)
			usage_error("--file, --weight-offset and --scale-offset are required");
		if (!o->count && (!o->rows_list || o->verify_after))
			usage_error("--count must be at least 1");
	}
	if (o->verify_after && !o->expect)
		usage_error("--verify-after goes with --expect-errno");
	if (o->settle_ms && !o->expect && !o->tolerate)
		usage_error("--settle-ms goes with --expect-errno or --tolerate");
	if (o->local_tensor && !o->local)
		usage_error("--local-tensor goes with --local");
	if (o->tolerate && (o->expect || o->rows_list))
		usage_error("--tolerate runs batches, not --expect-errno or --rows-list");
	if (o->count_exact && !o->tolerate)
		usage_error("--count-exact goes with --tolerate");
	if (o->expect && o->procs > 1)
		usage_error("--expect-errno runs one process");
	if (o->stride < ROW && !o->expect)
		usage_error("--stride below %d only makes sense with --expect-errno", ROW);
}

static uint32_t max_batch(const struct opts *o)
{
	uint32_t m = 0;
	size_t i;

	for (i = 0; i < o->nr_batches; i++)
		if (o->batches[i] > m)
			m = o->batches[i];
	if (o->rows_list && o->nr_rows_list > m)
		m = (uint32_t)o->nr_rows_list;
	return m;
}

/* Bytes of staging buffer a batch of @n rows needs, ranges and gaps included. */
static uint64_t dest_bytes(const struct opts *o, uint32_t n)
{
	uint64_t b = o->offset + (uint64_t)n * (o->stride < ROW ? ROW : o->stride);

	if (o->ranges)
		b += (uint64_t)o->ranges * RANGE_GAP;
	return b;
}

/* Batches a run of @o makes (the size of the latency array). */
static uint64_t nr_batches_of(const struct opts *o)
{
	uint64_t done = 0, b = 0;

	if (o->rows_list && !o->expect)
		return 1;
	while (done < o->count) {
		uint32_t n = o->batches[b % o->nr_batches];

		done += n < o->count - done ? n : o->count - done;
		b++;
	}
	return b;
}

/* Fill j->rows with batch @b of @n rows. */
static void make_rows(struct job *j, uint64_t b, uint32_t n)
{
	uint64_t last = j->rows_total - 1;
	uint32_t i;

	for (i = 0; i < n; i++)
		j->rows[i] = (uint32_t)(rnd(&j->rng) % j->rows_total);
	if (b % 4 == 0) {
		/* The table's edges. */
		if (n >= 2) {
			j->rows[0] = 0;
			j->rows[n - 1] = (uint32_t)last;
		} else {
			j->rows[0] = b % 8 ? (uint32_t)last : 0;
		}
	}
	/* Repeats: far apart, and side by side in every other batch. */
	if (n >= 3)
		j->rows[n / 2] = j->rows[n / 3];
	if (n >= 4 && b % 2)
		j->rows[2] = j->rows[1];
}

/*
 * Where each row of a batch of @n lands; sets up the ranges too.  Plain: at
 * offset + i * stride.  Ranges: rows split evenly into min(ranges, n) runs;
 * run k is range k, and the ranges lie in the buffer in reverse order with
 * RANGE_GAP bytes before each.
 */
static void layout(struct job *j, uint32_t n)
{
	const struct opts *o = j->o;
	uint64_t cursor = o->offset;
	uint32_t nr, k, i;

	if (!o->ranges) {
		for (i = 0; i < n; i++)
			j->pos[i] = o->offset + (uint64_t)i * o->stride;
		j->nr_ranges = 0;
		return;
	}
	/* More than LIBENGRAM_MAX_RANGES is sent as asked, for --expect-errno. */
	nr = o->ranges < n ? o->ranges : n;
	for (k = nr; k-- > 0;) {
		uint32_t start = (uint32_t)((uint64_t)k * n / nr);
		uint32_t end = (uint32_t)((uint64_t)(k + 1) * n / nr);

		cursor += RANGE_GAP;
		j->ranges[k].buf_id = j->buf_id;
		j->ranges[k].reserved = 0;
		j->ranges[k].offset = cursor;
		j->ranges[k].length = (uint64_t)(end - start) * o->stride;
		for (i = start; i < end; i++)
			j->pos[i] = cursor + (uint64_t)(i - start) * o->stride;
		cursor += (uint64_t)(end - start) * o->stride;
	}
	j->nr_ranges = nr;
}

/* The file rows are checked against: opened, and mapped when it can be. */
static int open_file(struct job *j, const char *path)
{
	struct stat st;

	if (j->map)
		munmap((void *)j->map, j->map_len);
	if (j->fd >= 0)
		close(j->fd);
	j->map = NULL;
	j->map_len = 0;
	j->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (j->fd < 0) {
		fprintf(stderr, "fetch_check: %s: %s\n", path, strerror(errno));
		return -1;
	}
	/* Read through the page cache, never through the module; pread() if it fails. */
	if (!fstat(j->fd, &st) && st.st_size > 0) {
		void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, j->fd, 0);

		if (m != MAP_FAILED) {
			j->map = m;
			j->map_len = (size_t)st.st_size;
		}
	}
	return 0;
}

/*
 * --identity: the rows of what the open returned are checked against the
 * file of its digest, at the tensors the open reported (j->info): a table
 * is its file and its place in it, whatever its name.  An open that names
 * no file given, or does not say where its tensors are, fails the run.
 */
static int use_identity(struct job *j)
{
	const struct opts *o = j->o;
	int k;

	if (!o->nr_ids)
		return 0;
	for (k = 0; k < o->nr_ids; k++)
		if (!memcmp(o->ids[k].sha256, j->info.sha256, LIBENGRAM_SHA256_LEN))
			break;
	if (k == o->nr_ids || !j->info.weight_offset) {
		fprintf(stderr, "fetch_check: [%d] the open returned %s (weight at %" PRIu64
			"): no --identity says which bytes it has\n", j->procno,
			k == o->nr_ids ? "a file no --identity names" : "a table", j->info.weight_offset);
		return -1;
	}
	if (k != j->id_cur && open_file(j, o->ids[k].path))
		return -1;
	j->id_cur = k;
	j->woff = j->info.weight_offset;
	j->soff = j->info.scale_offset;
	j->rows_total = j->info.rows;
	j->res->identities++;
	return 0;
}

static int read_ref(struct job *j, uint32_t row, uint8_t *out)
{
	uint64_t w = j->woff + (uint64_t)row * WBYTES;
	uint64_t sc = j->soff + (uint64_t)row * SBYTES;
	ssize_t r;

	/* The file's own pages: two syscalls per row would bound a soak under TCG. */
	if (j->map && w + WBYTES <= j->map_len && sc + SBYTES <= j->map_len) {
		memcpy(out, j->map + w, WBYTES);
		memcpy(out + WBYTES, j->map + sc, SBYTES);
		return 0;
	}

	r = pread(j->fd, out, WBYTES, (off_t)w);
	if (r != WBYTES)
		return -1;
	r = pread(j->fd, out + WBYTES, SBYTES, (off_t)sc);
	if (r != SBYTES)
		return -1;
	return 0;
}

/*
 * Check a fetched batch: each row against the file, then every other byte
 * of the buffer against the canary (each row, once checked, is overwritten
 * with the canary so one scan covers the gaps).  Returns the bad count.
 */
static uint64_t check_batch(struct job *j, uint64_t b, uint32_t n)
{
	uint8_t ref[ROW];
	uint64_t bad = 0;
	uint32_t i;
	size_t k;

	for (i = 0; i < n; i++) {
		uint8_t *got = j->buf + j->pos[i];

		if (read_ref(j, j->rows[i], ref)) {
			diag(j, "cannot read row %" PRIu32 " from the file: %s", j->rows[i],
			     strerror(errno));
			bad++;
			continue;
		}
		k = row_mismatch(got, ref, ref + WBYTES);
		if (k < ROW) {
			diag(j, "batch %" PRIu64 " position %" PRIu32 ": row %" PRIu32
			     " differs from the file at byte %zu (got 0x%02x, want 0x%02x)%s",
			     b, i, j->rows[i], k, got[k], ref[k],
			     got[k] == j->canary ? ", canary: never written" : "");
			bad++;
		}
	}
	for (i = 0; i < n; i++)
		memset(j->buf + j->pos[i], j->canary, ROW);
	for (k = 0; k < j->buf_len; k++) {
		if (j->buf[k] != j->canary) {
			diag(j, "batch %" PRIu64 ": byte %zu of the buffer outside every row"
			     " changed (0x%02x, canary 0x%02x)", b, k, j->buf[k], j->canary);
			bad++;
			break;
		}
	}
	return bad;
}

/*
 * --mode word: submit with a completion word and watch the word alone.
 * Bounded by the fetch's deadline and 5 s more (60 s for the module's).
 */
static int do_word_fetch(struct job *j, uint32_t n, struct engram_result *res)
{
	const struct opts *o = j->o;
	struct engram_word w = { .buf_id = j->word_id, .value = ++j->word_seq };
	uint64_t v, t0 = now_ns(), limit;
	int64_t ticket;
	int ret;

	limit = (o->timeout_ns ? o->timeout_ns : 60000000000ULL) + 5000000000ULL;
	__atomic_store_n(j->word, 0, __ATOMIC_RELAXED);
	ticket = engram_submit_word(j->e, j->handle, j->rows, n, o->ranges ? j->ranges : NULL,
				    o->ranges ? j->nr_ranges : 0, o->ranges ? 0 : j->buf_id,
				    o->ranges ? 0 : o->offset, o->stride, o->timeout_ns, &w, 0,
				    res);
	if (ticket < 0)
		return (int)ticket;
	while (!(v = __atomic_load_n(j->word, __ATOMIC_ACQUIRE))) {
		if (now_ns() - t0 > limit) {
			diag(j, "word: still 0 %" PRIu64 " ms after the submit", limit / 1000000);
			engram_wait(j->e, (uint64_t)ticket, 0, 0, res);
			return -ETIME;
		}
		sched_yield();
	}
	if (v == w.value) {
		res->ticket = (uint64_t)ticket;
		return 0;
	}
	ret = engram_wait(j->e, (uint64_t)ticket, 0, 0, res);
	if (!(v & LIBENGRAM_WORD_FAILED)) {
		diag(j, "word: 0x%" PRIx64 ", neither the value 0x%" PRIx64 " nor a failure",
		     v, w.value);
		return -EPROTO;
	}
	if (!ret && __atomic_load_n(j->word, __ATOMIC_ACQUIRE) != w.value) {
		diag(j, "word: the wait fell back, but the word is 0x%" PRIx64, *j->word);
		return -EPROTO;
	}
	if (ret && (uint64_t)-ret != (v & ~LIBENGRAM_WORD_FAILED)) {
		diag(j, "word: failure %s, the wait says %s",
		     errname((int)(v & ~LIBENGRAM_WORD_FAILED)), errname(-ret));
		return -EPROTO;
	}
	return ret;
}

/* One fetch of j->rows[0..n) by the chosen mode.  Returns 0 or -errno. */
static int do_fetch(struct job *j, uint32_t n, struct engram_result *res)
{
	const struct opts *o = j->o;
	uint32_t wflags = o->busy_poll ? LIBENGRAM_BUSY_POLL : 0;
	int64_t ticket;
	int ret;

	memset(res, 0, sizeof(*res));
	if (o->word)
		return do_word_fetch(j, n, res);
	if (!o->submit) {
		if (o->ranges)
			return engram_fetch_ranges(j->e, j->handle, j->rows, n, j->ranges,
						   j->nr_ranges, o->stride, o->timeout_ns,
						   wflags, res);
		return engram_fetch(j->e, j->handle, j->rows, n, j->buf_id, o->offset,
				    o->stride, o->timeout_ns, wflags, res);
	}
	if (o->ranges)
		ticket = engram_submit_ranges(j->e, j->handle, j->rows, n, j->ranges,
					      j->nr_ranges, o->stride, o->timeout_ns, 0, res);
	else
		ticket = engram_submit(j->e, j->handle, j->rows, n, j->buf_id, o->offset,
				       o->stride, o->timeout_ns, 0, res);
	if (ticket < 0)
		return (int)ticket;
	/* Served from the local copy at once: ready for WAIT, never raises POLLIN. */
	if (!o->busy_poll && !(res->flags & LIBENGRAM_RESULT_FALLBACK)) {
		struct pollfd p = { .fd = engram_fd(j->e), .events = POLLIN };
		/* The fetch's deadline, and some; 0 is the module's default. */
		int ms = o->timeout_ns ? (int)(o->timeout_ns / 1000000) + 5000 : 60000;

		ret = poll(&p, 1, ms);
		if (ret <= 0 || !(p.revents & POLLIN))
			diag(j, "poll: no POLLIN within %d ms of the submit (ret %d revents 0x%x)",
			     ms, ret, ret > 0 ? p.revents : 0);
		if (ret <= 0 || !(p.revents & POLLIN))
			ret = -ETIME;	/* counted as an error; still collect the ticket */
		else
			ret = 0;
	} else {
		ret = 0;
	}
	{
		int wret = engram_wait(j->e, (uint64_t)ticket, 0, wflags, res);

		if (!wret && res->ticket != (uint64_t)ticket) {
			diag(j, "wait for ticket %" PRId64 " reported ticket %" PRIu64,
			     ticket, res->ticket);
			wret = -EPROTO;
		}
		return ret ? ret : wret;
	}
}

/* "ERANGE (wire_status row_out_of_range, bad_index 2)", "ENOENT (no server status)", "OK" */
static void describe(char *out, size_t len, int err, const struct engram_result *res)
{
	if (!err && !res->wire_status)
		snprintf(out, len, "OK");
	else if (!res->wire_status && !res->bad_index)
		snprintf(out, len, "%s (no server status)", errname(err));
	else
		snprintf(out, len, "%s (wire_status %s, bad_index %" PRIu32 ")", errname(err),
			 engram_status_name(res->wire_status), res->bad_index);
}

/* The transport errors --tolerate accepts during a fault, counted by kind. */
static const int tolerable_errnos[NR_TOLERABLE] = {
	ETIMEDOUT, ECONNRESET, ENOTCONN, ESHUTDOWN, ENETDOWN, ENETUNREACH, EHOSTUNREACH,
	ECONNREFUSED, ENODEV, EAGAIN, ESTALE, ENOENT, ENXIO
};

/* Index of -ret in tolerable_errnos[], or -1. */
static int tolerable_kind(int ret)
{
	int i;

	for (i = 0; i < NR_TOLERABLE; i++)
		if (-ret == tolerable_errnos[i])
			return i;
	return -1;
}

static bool tolerable(int ret)
{
	return tolerable_kind(ret) >= 0;
}

static bool stop_now(const struct opts *o, uint64_t start)
{
	if (o->duration_s && now_ns() - start >= o->duration_s * 1000000000ULL)
		return true;
	return o->stop_file && access(o->stop_file, F_OK) == 0;
}

/* Did anything land in the buffer since the last tolerated failure returned? */
static bool check_snap(struct job *j, const uint8_t *snap)
{
	size_t k;

	if (!snap || !j->snap_valid)
		return false;
	j->snap_valid = false;
	for (k = 0; k < j->buf_len && j->buf[k] == snap[k]; k++)
		;
	if (k == j->buf_len)
		return false;
	diag(j, "late write: byte %zu changed after a failed fetch returned", k);
	j->res->late++;
	return false;
}

/* A transport failure during a fault: bounded in time, nothing lands after. */
static void tolerated(struct job *j, int ret, uint32_t n, uint64_t ms, uint8_t *snap)
{
	const struct opts *o = j->o;
	struct proc_result *r = j->res;
	int64_t h;

	r->tolerated++;
	r->tolerated_rows += n;
	r->tolerated_by_kind[tolerable_kind(ret)]++;
	if (o->max_ms && ms > o->max_ms) {
		diag(j, "a fetch failed (%s) after %" PRIu64 " ms, bound %u ms",
		     errname(-ret), ms, o->max_ms);
		r->slow++;
	}
	memcpy(snap, j->buf, j->buf_len);
	j->snap_valid = true;
	if (ret == -ESTALE || ret == -ENOENT) {
		struct engram_table_info ti;

		h = engram_table_open(j->e, o->link, o->table, o->sha_hex ? o->sha256 : NULL,
				      &ti);
		/*
		 * The name may now be another table (another tensor of the
		 * file): the rows checked are the --weight-offset table's, so
		 * such a handle is not taken, and the fetches keep failing.
		 */
		if (h >= 0 && o->nr_ids) {
			/* A new open: its rows are checked against what it says it is. */
			j->info = ti;
			j->handle = (uint32_t)h;
			if (use_identity(j))
				j->res->errors++;
		} else if (h >= 0 && ti.weight_offset && o->weight_offset &&
			   (ti.weight_offset != o->weight_offset ||
			    ti.scale_offset != o->scale_offset)) {
			if (!j->other_table++)
				fprintf(stderr, "fetch_check: [%d] the name now opens another table (weight at %" PRIu64 "): not taken\n",
					j->procno, ti.weight_offset);
		} else if (h >= 0) {	/* the old handle stays with the fd: harmless */
			j->info = ti;
			j->handle = (uint32_t)h;
		}
	}
	if (ret == -ENOTCONN || ret == -ENOENT || ret == -ESTALE) {
		/* Failing at once while the link is down: do not spin. */
		struct timespec ts = { .tv_nsec = 20 * 1000000 };

		nanosleep(&ts, NULL);
	}
}

/* A fetch that succeeded: remote or fallback, and within --max-ms. */
static void count_success(struct job *j, const struct engram_result *res, uint64_t b,
			  uint64_t ms)
{
	const struct opts *o = j->o;

	if (res->flags & LIBENGRAM_RESULT_FALLBACK) {
		/* Why the remote failed, when the reason changes; not from diag()'s budget. */
		if ((!j->res->fallbacks || res->remote_error != j->last_remote_error) &&
		    j->fallback_notes++ < MAX_DIAG)
			fprintf(stderr, "fetch_check: [%d] batch %" PRIu64 " fell back after %s\n",
				j->procno, b,
				res->remote_error ? errname(res->remote_error) : "no remote table");
		j->last_remote_error = res->remote_error;
		j->res->fallbacks++;
		/* libengram times the read it did; no read takes 0 ns or longer than the call. */
		if (!res->local_ns || res->local_ns / 1000000 > ms) {
			diag(j, "batch %" PRIu64 ": local_ns %" PRIu64 " for a call of %" PRIu64
			     " ms", b, res->local_ns, ms);
			j->res->errors++;
		}
	} else
		j->res->remote++;
	if ((res->flags & LIBENGRAM_RESULT_FALLBACK) && o->max_local_ms) {
		/* The disk's time and the remote attempt's, each against its own bound. */
		uint64_t local_ms = res->local_ns / 1000000;
		uint64_t remote_ms = ms > local_ms ? ms - local_ms : 0;

		if (remote_ms > j->res->fb_remote_max_ms)
			j->res->fb_remote_max_ms = remote_ms;
		if (local_ms > j->res->fb_local_max_ms)
			j->res->fb_local_max_ms = local_ms;
		if ((o->max_ms && remote_ms > o->max_ms) || local_ms > o->max_local_ms) {
			diag(j, "batch %" PRIu64 " fell back after %" PRIu64 " ms (bound %u ms),"
			     " its local read took %" PRIu64 " ms (bound %u ms)", b, remote_ms,
			     o->max_ms, local_ms, o->max_local_ms);
			j->res->slow++;
		}
		return;
	}
	if (o->max_ms && ms > o->max_ms) {
		diag(j, "batch %" PRIu64 " succeeded (%s) after %" PRIu64 " ms, bound %u ms", b,
		     res->flags & LIBENGRAM_RESULT_FALLBACK ? "fallback" : "remote", ms,
		     o->max_ms);
		j->res->slow++;
	}
}

/* The normal run: --count random rows, or the rows of @list; every byte checked. */
static void run_batches(struct job *j, const uint32_t *list, size_t nr_list)
{
	const struct opts *o = j->o;
	struct proc_result *r = j->res;
	struct engram_result res;
	uint64_t done = 0, b = 0, t0, t1;
	uint64_t target = list ? nr_list : o->count;
	uint64_t start = now_ns(), next_progress = start;
	uint8_t *snap = NULL;		/* the buffer when a tolerated failure returned */
	char what[160];
	uint32_t n;
	int ret;

	if (o->tolerate) {
		snap = malloc(j->buf_len);
		if (!snap) {
			diag(j, "out of memory");
			r->errors++;
			return;
		}
	}
	while (done < target) {
		if (stop_now(o, start) || (o->tolerate && check_snap(j, snap)))
			break;
		if (o->progress_s && now_ns() >= next_progress) {
			/* A long soak shows it is alive, and how fast it goes. */
			fprintf(stderr, "fetch_check: [%d] after %" PRIu64 " s: rows %" PRIu64
				" fetches %" PRIu64 " tolerated %" PRIu64 " bad %" PRIu64
				" errors %" PRIu64 "\n", j->procno, (now_ns() - start) / 1000000000,
				r->rows, r->batches, r->tolerated, r->bad, r->errors);
			next_progress += o->progress_s * 1000000000ULL;
		}
		if (list) {
			n = (uint32_t)nr_list;
			memcpy(j->rows, list, n * sizeof(*j->rows));
		} else {
			n = o->batches[b % o->nr_batches];
			if (n > target - done)
				n = (uint32_t)(target - done);
			make_rows(j, b, n);
		}
		layout(j, n);
		j->canary = (uint8_t)(0x5a + 0x1d * (b + 1));
		if (!j->canary)
			j->canary = 0xa5;
		memset(j->buf, j->canary, j->buf_len);

		t0 = now_ns();
		ret = do_fetch(j, n, &res);
		t1 = now_ns();
		r->batches++;
		if (ret && o->tolerate && tolerable(ret)) {
			tolerated(j, ret, n, (t1 - t0) / 1000000, snap);
			if (o->count_exact) {
				b++;
				continue;
			}
		} else if (ret) {
			describe(what, sizeof(what), ret, &res);
			diag(j, "batch %" PRIu64 " of %" PRIu32 " rows failed: %s", b, n, what);
			r->errors++;
			if (r->errors >= MAX_ERRORS) {
				diag(j, "giving up after %" PRIu64 " failed fetches", r->errors);
				return;
			}
		} else {
			if (r->nr_lat < j->lat_cap)
				j->lat[r->nr_lat++] = t1 - t0;
			count_success(j, &res, b, (t1 - t0) / 1000000);
			r->rows += n;
			r->bad += check_batch(j, b, n);
		}
		done += n;
		b++;
	}
	if (snap && j->snap_valid && o->settle_ms) {
		struct timespec ts = { .tv_sec = o->settle_ms / 1000,
				       .tv_nsec = (long)(o->settle_ms % 1000) * 1000000 };

		while (nanosleep(&ts, &ts) && errno == EINTR)
			;
	}
	check_snap(j, snap);
	free(snap);
}

/*
 * One process's whole job.  Returns 0 (pass), 1 (fail) or 2 (setup
 * error).  In expect mode the first failing step is compared with the
 * expected errno.
 */
/*
 * After a fetch that ended (failed, or succeeded as expected): no byte of
 * the buffer may change once the call has returned.  Compares a copy
 * taken now with the buffer after ms.  Returns true when something
 * changed (a late write).
 */
static bool settle(const struct job *j, uint32_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };
	size_t k, changed = 0, first = 0, written = 0;
	uint8_t *copy = malloc(j->buf_len);

	if (!copy) {
		printf("fetch_check: settle: out of memory\n");
		return true;
	}
	memcpy(copy, j->buf, j->buf_len);
	for (k = 0; k < j->buf_len; k++)
		written += copy[k] != j->canary;
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
	for (k = 0; k < j->buf_len; k++)
		if (j->buf[k] != copy[k] && !changed++)
			first = k;
	free(copy);
	printf("fetch_check: settle %u ms: %zu bytes written before the return,"
	       " %zu changed after it\n", ms, written, changed);
	if (changed)
		printf("fetch_check: late write: byte %zu changed after the call returned\n",
		       first);
	return changed != 0;
}

/* engram_open() fails with EINVAL on a malformed ENGRAM_RDMA_* variable: name them. */
static void env_hint(void)
{
	extern char **environ;
	char **v;

	for (v = environ; *v; v++)
		if (!strncmp(*v, "ENGRAM_RDMA_", 12))
			fprintf(stderr, "fetch_check: open: EINVAL with %s set (malformed?)\n", *v);
}

static int run_job(const struct opts *o, int procno, struct proc_result *r, uint64_t *lat,
		   uint64_t lat_cap)
{
	struct job j = { .o = o, .procno = procno, .res = r, .lat = lat, .lat_cap = lat_cap,
			 .fd = -1, .id_cur = -1 };
	struct engram_result res;
	uint32_t mb = max_batch(o);
	char what[160];
	int64_t h;
	int ret, status = 2;
	const char *step = NULL;
	bool refused_wrote = false, late = false;
	uint64_t t0, elapsed_ms;

	memset(&res, 0, sizeof(res));
	j.rng = o->seed + (uint64_t)procno;
	ret = engram_open(o->dev, &j.e);
	if (ret) {
		step = "open";
		goto fail_step;
	}
	if (o->required) {
		ret = engram_set_required(j.e, 1);
		if (ret) {
			step = "set_required";
			goto fail_step;
		}
	}
	h = engram_table_open(j.e, o->link, o->table, o->sha_hex ? o->sha256 : NULL, &j.info);
	if (h < 0) {
		ret = (int)h;
		step = "open_table";
		goto fail_step;
	}
	j.handle = (uint32_t)h;
	j.rows_total = j.info.rows;
	if (o->local) {
		ret = engram_table_set_local(j.e, j.handle, o->local, o->local_tensor);
		if (ret) {
			step = "set_local";
			goto fail_step;
		}
	}
	if (o->rows_total && o->rows_total != j.info.rows) {
		fprintf(stderr, "fetch_check: table has %" PRIu64 " rows, --rows-total says %"
			PRIu64 "\n", j.info.rows, o->rows_total);
		goto out;
	}
	if (o->rows_below > j.info.rows) {
		fprintf(stderr, "fetch_check: table has %" PRIu64 " rows, --rows-below says %"
			PRIu64 "\n", j.info.rows, o->rows_below);
		goto out;
	}
	if (o->rows_below)
		j.rows_total = o->rows_below;	/* the random rows, and the "last" one */
	if (!j.rows_total || j.info.row_bytes != ROW) {
		fprintf(stderr, "fetch_check: table has %" PRIu64 " rows of %" PRIu32 " bytes\n",
			j.info.rows, j.info.row_bytes);
		goto out;
	}
	j.woff = o->weight_offset;
	j.soff = o->scale_offset;
	if (o->nr_ids ? use_identity(&j) : o->file && open_file(&j, o->file))
		goto out;

	j.buf_len = o->buf_bytes ? o->buf_bytes : dest_bytes(o, mb);
	j.buf = mmap(NULL, j.buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	j.rows = calloc(mb, sizeof(*j.rows));
	j.pos = calloc(mb, sizeof(*j.pos));
	j.ranges = calloc(o->ranges ? o->ranges : 1, sizeof(*j.ranges));
	if (j.buf == MAP_FAILED || !j.rows || !j.pos || !j.ranges) {
		if (j.buf == MAP_FAILED)
			j.buf = NULL;
		fprintf(stderr, "fetch_check: cannot allocate %zu bytes of staging buffer\n",
			j.buf_len);
		goto out;
	}
	ret = engram_buf_register(j.e, j.buf, j.buf_len, &j.buf_id);
	if (ret) {
		step = "register";
		goto fail_step;
	}
	if (o->word) {
		long page = sysconf(_SC_PAGESIZE);

		j.word = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			      -1, 0);
		if (j.word == MAP_FAILED) {
			j.word = NULL;
			fprintf(stderr, "fetch_check: cannot allocate the word's page\n");
			goto out;
		}
		ret = engram_buf_register(j.e, j.word, page, &j.word_id);
		if (ret) {
			step = "register";
			goto fail_step;
		}
	}

	if (o->expect) {
		uint32_t n;

		if (o->rows_list) {
			n = (uint32_t)o->nr_rows_list;
			memcpy(j.rows, o->rows_list, n * sizeof(*j.rows));
		} else {
			n = o->batches[0];
			make_rows(&j, 0, n);
		}
		layout(&j, n);
		j.canary = 0xc3;
		memset(j.buf, j.canary, j.buf_len);
		t0 = now_ns();
		ret = do_fetch(&j, n, &res);
		elapsed_ms = (now_ns() - t0) / 1000000;
		step = "fetch";
		if (!ret)
			count_success(&j, &res, 0, elapsed_ms);
		if (ret && o->max_ms) {
			printf("fetch_check: the failing fetch returned after %" PRIu64 " ms"
			       " (bound %u ms)\n", elapsed_ms, o->max_ms);
			if (elapsed_ms > o->max_ms)
				late = true;
		}
		/* A success expected (OK) is as over as a failure is. */
		if (o->settle_ms && settle(&j, o->settle_ms))
			late = true;
		/* A refusal by the server writes no row: the buffer is untouched. */
		if (ret && res.wire_status) {
			size_t k;

			for (k = 0; k < j.buf_len && j.buf[k] == j.canary; k++)
				;
			if (k < j.buf_len) {
				printf("fetch_check: fetch: refused (%s) but byte %zu of the buffer"
				       " changed\n", engram_status_name(res.wire_status), k);
				refused_wrote = true;
			}
		}
		goto fail_step;
	}
	run_batches(&j, o->rows_list, o->nr_rows_list);
	status = r->bad || r->errors || r->slow || r->late ? 1 : 0;
	goto out;

fail_step:
	if (ret == -EINVAL && !strcmp(step, "open"))
		env_hint();
	if (!o->expect) {
		describe(what, sizeof(what), ret, &res);
		fprintf(stderr, "fetch_check: [%d] %s: %s: %s\n", procno, step, what,
			engram_strerror(ret));
		status = 2;
		goto out;
	}
	describe(what, sizeof(what), ret, &res);
	printf("fetch_check: %s: expected %s, got %s\n", step, errname(o->expect_errno), what);
	status = -ret == o->expect_errno && !refused_wrote && !late && !r->slow ? 0 : 1;
	if (status == 0 && o->verify_after) {
		if (strcmp(step, "fetch")) {
			fprintf(stderr, "fetch_check: --verify-after needs the failure in the fetch\n");
			status = 1;
		} else {
			run_batches(&j, NULL, 0);
			status = r->bad || r->errors || r->slow ? 1 : 0;
			printf("fetch_check: after the refusal: rows %" PRIu64 " bad %" PRIu64
			       " errors %" PRIu64 "\n", r->rows, r->bad, r->errors);
		}
	}

out:
	if (j.e && j.buf_id)
		engram_buf_unregister(j.e, j.buf_id);
	if (j.e && j.word_id)
		engram_buf_unregister(j.e, j.word_id);
	engram_close(j.e);
	if (j.buf)
		munmap(j.buf, j.buf_len);
	if (j.word)
		munmap(j.word, (size_t)sysconf(_SC_PAGESIZE));
	if (j.fd >= 0)
		close(j.fd);
	if (j.map)
		munmap((void *)j.map, j.map_len);
	free(j.rows);
	free(j.pos);
	free(j.ranges);
	r->status = status;
	return status;
}

int main(int argc, char **argv)
{
	struct opts o;
	uint64_t lat_cap, nr_lat = 0, rows = 0, batches = 0, bad = 0, errors = 0;
	uint64_t identities = 0, tol = 0, tol_rows = 0, slow = 0, late = 0, fallbacks = 0, remote = 0;
	uint64_t fb_remote_max = 0, fb_local_max = 0, by_kind[NR_TOLERABLE] = { 0 };
	uint64_t *all_lat, p50 = 0, p99 = 0, pmax = 0, want;
	size_t slot, area;
	uint8_t *shared;
	int i, status = 0;

	parse_opts(argc, argv, &o);
	setvbuf(stdout, NULL, _IOLBF, 0);
	lat_cap = nr_batches_of(&o);
	slot = (sizeof(struct proc_result) + lat_cap * sizeof(uint64_t) + 63) & ~(size_t)63;
	area = slot * (size_t)o.procs;
	shared = mmap(NULL, area, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (shared == MAP_FAILED) {
		fprintf(stderr, "fetch_check: mmap: %s\n", strerror(errno));
		return 2;
	}
#define RES(i)	((struct proc_result *)(shared + slot * (size_t)(i)))
#define LAT(i)	((uint64_t *)(RES(i) + 1))

	if (o.procs == 1) {
		run_job(&o, 0, RES(0), LAT(0), lat_cap);
	} else {
		pid_t *pids = calloc((size_t)o.procs, sizeof(*pids));

		if (!pids)
			return 2;
		fflush(NULL);
		for (i = 0; i < o.procs; i++) {
			RES(i)->status = 2;	/* a process that dies reports nothing */
			pids[i] = fork();
			if (pids[i] < 0) {
				fprintf(stderr, "fetch_check: fork: %s\n", strerror(errno));
				status = 2;
				break;
			}
			if (!pids[i])
				_exit(run_job(&o, i, RES(i), LAT(i), lat_cap));
		}
		for (i = 0; i < o.procs && pids[i] > 0; i++) {
			int ws;

			if (waitpid(pids[i], &ws, 0) < 0 || !WIFEXITED(ws)) {
				fprintf(stderr, "fetch_check: process %d died (%s)\n", i,
					WIFSIGNALED(ws) ? strsignal(WTERMSIG(ws)) : "?");
				RES(i)->status = 2;
			}
		}
		free(pids);
	}

	for (i = 0; i < o.procs; i++) {
		struct proc_result *r = RES(i);

		if (o.procs > 1)
			fprintf(stderr, "fetch_check: [%d] rows %" PRIu64 " batches %" PRIu64
				" bad %" PRIu64 " errors %" PRIu64 " status %d\n", i, r->rows,
				r->batches, r->bad, r->errors, r->status);
		rows += r->rows;
		batches += r->batches;
		bad += r->bad;
		errors += r->errors;
		identities += r->identities;
		tol += r->tolerated;
		tol_rows += r->tolerated_rows;
		for (int k = 0; k < NR_TOLERABLE; k++)
			by_kind[k] += r->tolerated_by_kind[k];
		slow += r->slow;
		late += r->late;
		fallbacks += r->fallbacks;
		remote += r->remote;
		if (r->fb_remote_max_ms > fb_remote_max)
			fb_remote_max = r->fb_remote_max_ms;
		if (r->fb_local_max_ms > fb_local_max)
			fb_local_max = r->fb_local_max_ms;
		nr_lat += r->nr_lat;
		if (r->status > status)
			status = r->status;
	}
	printf("fetch_check: fallbacks %" PRIu64 " remote %" PRIu64 " slow %" PRIu64 "\n",
	       fallbacks, remote, slow);
	if (o.max_local_ms && fallbacks)
		printf("fetch_check: fallback max remote part %" PRIu64 " ms, max local read %"
		       PRIu64 " ms\n", fb_remote_max, fb_local_max);
	if (o.expect_fallbacks == 0 && fallbacks) {
		fprintf(stderr, "fetch_check: %" PRIu64 " fetches fell back, none expected\n",
			fallbacks);
		if (!status)
			status = 1;
	} else if (o.expect_fallbacks > 0 && fallbacks < (uint64_t)o.expect_fallbacks) {
		fprintf(stderr, "fetch_check: %" PRIu64 " fetches fell back, at least %" PRId64
			" expected\n", fallbacks, o.expect_fallbacks);
		if (!status)
			status = 1;
	}
	if (o.expect && !o.verify_after)
		return status;

	all_lat = malloc((nr_lat ? nr_lat : 1) * sizeof(*all_lat));
	if (!all_lat)
		return 2;
	nr_lat = 0;
	for (i = 0; i < o.procs; i++) {
		memcpy(all_lat + nr_lat, LAT(i), RES(i)->nr_lat * sizeof(*all_lat));
		nr_lat += RES(i)->nr_lat;
	}
	if (nr_lat) {
		qsort(all_lat, nr_lat, sizeof(*all_lat), cmp_u64);
		p50 = all_lat[(nr_lat - 1) * 50 / 100];
		p99 = all_lat[(nr_lat - 1) * 99 / 100];
		pmax = all_lat[nr_lat - 1];
	}
	free(all_lat);

	want = (o.rows_list && !o.expect ? o.nr_rows_list : o.count) * (uint64_t)o.procs;
	printf("fetch_check: rows %" PRIu64 " batches %" PRIu64 " bad %" PRIu64 " errors %"
	       PRIu64 " p50_us %" PRIu64 " p99_us %" PRIu64 " max_us %" PRIu64 "\n", rows,
	       batches, bad, errors, p50 / 1000, p99 / 1000, pmax / 1000);
	if (o.nr_ids)
		printf("fetch_check: identities %" PRIu64 "\n", identities);
	if (o.tolerate) {
		printf("fetch_check: tolerated %" PRIu64 " slow %" PRIu64 " late %" PRIu64 "\n",
		       tol, slow, late);
		printf("fetch_check: tolerated by kind:");
		for (int k = 0; k < NR_TOLERABLE; k++)
			if (by_kind[k])
				printf(" %s %" PRIu64, errname(tolerable_errnos[k]), by_kind[k]);
		printf("%s\n", tol ? "" : " none");
		/* A run cut short by --duration-s or --stop-file checked fewer rows. */
		if (o.duration_s || o.stop_file)
			want = rows + tol_rows;
		else if (o.count_exact)
			want += tol_rows;
		if (rows + tol_rows != want)
			fprintf(stderr, "fetch_check: %" PRIu64 " rows tried, %" PRIu64
				" wanted\n", rows + tol_rows, want);
		if (!status && (rows + tol_rows != want || bad || errors || slow || late))
			status = 1;
		return status;
	}
	/* Cut short by --duration-s or --stop-file: every fetch made must be exact. */
	if (o.duration_s || o.stop_file)
		want = rows;
	if (!status && (rows != want || bad || errors))
		status = 1;
	if (rows != want)
		fprintf(stderr, "fetch_check: %" PRIu64 " rows checked, %" PRIu64 " wanted\n",
			rows, want);
	return status;
}
