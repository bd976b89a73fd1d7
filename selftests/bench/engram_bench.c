// SPDX-License-Identifier: GPL-2.0
/*
 * engram_bench: latency and throughput of row fetches, for `make bench`.
 *
 *   engram_bench fetch --table NAME --file PATH --weight-offset N --scale-offset N
 *                      --rows-total N --rows R --iters I [--warmup W] [--busy-poll]
 *                      [--procs P] [--link L] [--seed S] [--timeout-ms T]
 *                      [--label TEXT] [--dev PATH]
 *   engram_bench local --file PATH --tensor PREFIX --weight-offset N --scale-offset N
 *                      --rows-total N --rows R --iters I [--warmup W] [--procs P]
 *                      [--seed S] [--label TEXT]
 *
 * fetch: rows through /dev/engram_rdma with libengram's engram_fetch(), as
 * an inference process would take them.  local: the same rows read from
 * the table's file by libengram's own local reader (local.c, the code its
 * fallback runs: pread() with O_DIRECT where the file system takes it), so
 * the two can be set side by side; no module is involved.
 *
 * Each of P processes (forked; each with its own libengram context, table
 * handle and one page-aligned staging buffer of R * 264 bytes, registered
 * once) makes W warm-up fetches (default max(10, I / 20)), waits at a
 * barrier, then makes I timed fetches of R row indices drawn uniformly from
 * [0, rows-total) by a splitmix64 generator seeded with S + process number.
 * The barrier (a pipe the parent closes once every process is ready) makes
 * the timed phases overlap, so P processes measure P concurrent callers.
 *
 * The latency of one fetch is CLOCK_MONOTONIC just before and just after
 * the call, nothing else: the indices are drawn before the first reading
 * (drawing 65536 of them would otherwise be part of the figure), and the
 * rows are checked after the second one.  Every row of every fetch, warm-up
 * included, is compared with the file mapped read-only (the page cache,
 * not the module nor O_DIRECT): row i is the 256 weight bytes at
 * weight-offset + i * 256, then the 8 scale bytes at scale-offset + i * 8.
 * A benchmark of wrong rows measures nothing; a bad row or a failed fetch is
 * counted and the run goes on.  The buffer is not refilled between fetches:
 * the indices are random, so a row a fetch failed to write still holds the
 * previous fetch's row, which is almost never the right one.
 *
 * wall_s runs from the barrier's release to the return of the last timed
 * fetch of the last process; it includes the checks between fetches, so
 * rows_per_s and gbytes_per_s (successful timed fetches over wall_s) are a
 * lower bound of what the fetches alone would reach.  cpu_busy_s is the
 * busy time of all CPUs together (user, nice, system, irq, softirq, steal
 * of /proc/stat's "cpu" line) from just before the release to after the
 * last process exited: everything the machine did meanwhile, the kernel's
 * RDMA and TCP work included, which the caller's own rusage would miss.
 * client_cpu_s is the CPU time of the processes themselves inside their
 * successful timed fetch (or read) calls, user and kernel: what a caller
 * pays per fetch, without the row checks around it and without completion
 * work that ran in another CPU's softirq.  vol_switches and invol_switches
 * are the processes' context switches (getrusage()) over their timed
 * fetches, checks included: a fetch that sleeps costs one voluntary
 * switch, one that busy-polls none.
 *
 * Prints one line on stdout, a JSON object: label, kind, rows, bytes, iters
 * (per process), warmup, procs, busy_poll, link, fetches (successful timed
 * fetches of all processes), p50_us, p99_us, p999_us (nearest rank), mean_us,
 * min_us, max_us (over those fetches; null when there are none), wall_s,
 * rows_per_s, gbytes_per_s, cpu_busy_s (null when /proc/stat cannot be
 * read), client_cpu_s, vol_switches, invol_switches, rows_checked, bad_rows, errors (failed fetches,
 * warm-up included), fallbacks (fetches that libengram served from a local
 * copy), first_error (errno name of the earliest failed fetch, or null).
 *
 * Exit status: 0 when every timed fetch succeeded and no fetch failed and no
 * row was wrong; 1 otherwise (the line is printed all the same); 2 on a
 * usage or setup error (open, table open, register, the file), with the
 * step and errno on stderr and no line on stdout.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <jansson.h>

#include "libengram.h"
#include "local.h"
#include "test_util.h"

#define PROG		"engram_bench"
#define ROW		LIBENGRAM_ROW_BYTES
#define WBYTES		LIBENGRAM_WEIGHT_BYTES
#define SBYTES		LIBENGRAM_SCALE_BYTES
#define MAX_PROCS	64
#define MAX_ROWS	65536u
/* Latencies kept in the shared area, all processes together (8 bytes each). */
#define MAX_SAMPLES	134217728ULL	/* 2^27: 1 GiB */
#define MAX_TIMEOUT_MS	600000u		/* the module's own bound on a deadline */
#define MAX_DIAG	5		/* diagnostics printed per process */

enum kind { KIND_FETCH, KIND_LOCAL };

struct opts {
	enum kind kind;
	const char *table, *file, *tensor, *label, *dev;
	uint64_t weight_offset, scale_offset, rows_total;
	bool have_woff, have_soff, have_warmup, busy_poll;
	uint32_t rows, iters, warmup, procs, link;
	uint64_t seed, timeout_ns;
};

/* What one process reports; written by it alone, read by the parent after it exited. */
struct proc_stats {
	uint64_t fetches;		/* successful timed fetches: their latencies in lat[] */
	uint64_t rows_checked, bad_rows, errors, fallbacks;
	uint64_t cpu_ns;		/* CPU time inside its successful timed fetches */
	uint64_t vcsw, ivcsw;		/* its context switches over the timed fetches */
	uint64_t end_ns;		/* when its last timed fetch returned; 0: none did */
	uint64_t first_err_ns;		/* when its first failed fetch returned */
	int first_err;			/* and its errno, positive; 0: none failed */
};

/* Shared by the parent and every process; the latencies follow it. */
struct shared {
	int abort;			/* set before the release: another process failed setup */
	struct proc_stats st[MAX_PROCS];
};

/* Everything one process works with. */
struct job {
	const struct opts *o;
	unsigned int procno;
	const uint8_t *map;		/* the table's file, read-only */
	struct proc_stats *st;
	uint64_t *lat;			/* iters of them */
	uint8_t *buf;
	size_t buf_len;
	uint32_t *rows;
	uint64_t rng;
	struct engram *e;
	uint32_t handle, buf_id;
	struct local_copy *lc;
	int diags;
};

static void show_usage(FILE *f)
{
	fputs("usage:\n"
	      "  " PROG " fetch --table NAME --file PATH --weight-offset N --scale-offset N\n"
	      "        --rows-total N --rows R --iters I [--warmup W] [--busy-poll] [--procs P]\n"
	      "        [--link L] [--seed S] [--timeout-ms T] [--label TEXT] [--dev PATH]\n"
	      "  " PROG " local --file PATH --tensor PREFIX --weight-offset N --scale-offset N\n"
	      "        --rows-total N --rows R --iters I [--warmup W] [--procs P] [--seed S]\n"
	      "        [--label TEXT]\n", f);
}

/* "ETIMEDOUT" for -ETIMEDOUT or ETIMEDOUT. */
static const char *errname(int err)
{
	static char other[32];
	const char *s = strerrorname_np(abs(err));

	if (s)
		return s;
	snprintf(other, sizeof(other), "errno %d", abs(err));
	return other;
}

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	show_usage(stderr);
	exit(2);
}

/* A setup step failed: name it and its errno. */
__attribute__((format(printf, 2, 3), noreturn))
static void setup_error(int err, const char *fmt, ...)
{
	va_list ap;

	fputs(PROG ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	if (err)
		fprintf(stderr, ": %s (%s)", errname(err), engram_strerror(err));
	fputc('\n', stderr);
	exit(2);
}

/* Diagnostics of a process, at most MAX_DIAG lines. */
__attribute__((format(printf, 2, 3)))
static void diag(struct job *j, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vdiag(PROG, &j->diags, MAX_DIAG, j->procno, fmt, ap);
	va_end(ap);
}

/* Decimal only: "010" is ten, and no sign, space or suffix gets through. */
static uint64_t parse_u64(const char *opt, const char *s)
{
	unsigned long long v;
	char *end;

	if (*s < '0' || *s > '9')
		usage_error("%s: not a number: '%s'", opt, s);
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || *end)
		usage_error("%s: not a number (or too large): '%s'", opt, s);
	return v;
}

static uint32_t parse_range(const char *opt, const char *s, uint64_t min, uint64_t max)
{
	uint64_t v = parse_u64(opt, s);

	if (v < min || v > max)
		usage_error("%s: %s is outside %" PRIu64 "..%" PRIu64, opt, s, min, max);
	return (uint32_t)v;
}

static void parse_opts(int argc, char **argv, struct opts *o)
{
	enum {
		O_TABLE = 256, O_FILE, O_TENSOR, O_WOFF, O_SOFF, O_ROWS_TOTAL, O_ROWS, O_ITERS,
		O_WARMUP, O_BUSY, O_PROCS, O_LINK, O_SEED, O_TIMEOUT, O_LABEL, O_DEV, O_HELP,
	};
	static const struct option lo[] = {
		{ "table", required_argument, NULL, O_TABLE },
		{ "file", required_argument, NULL, O_FILE },
		{ "tensor", required_argument, NULL, O_TENSOR },
		{ "weight-offset", required_argument, NULL, O_WOFF },
		{ "scale-offset", required_argument, NULL, O_SOFF },
		{ "rows-total", required_argument, NULL, O_ROWS_TOTAL },
		{ "rows", required_argument, NULL, O_ROWS },
		{ "iters", required_argument, NULL, O_ITERS },
		{ "warmup", required_argument, NULL, O_WARMUP },
		{ "busy-poll", no_argument, NULL, O_BUSY },
		{ "procs", required_argument, NULL, O_PROCS },
		{ "link", required_argument, NULL, O_LINK },
		{ "seed", required_argument, NULL, O_SEED },
		{ "timeout-ms", required_argument, NULL, O_TIMEOUT },
		{ "label", required_argument, NULL, O_LABEL },
		{ "dev", required_argument, NULL, O_DEV },
		{ "help", no_argument, NULL, O_HELP },
		{ NULL, 0, NULL, 0 }
	};
	bool fetch_only = false;
	const char *fetch_opt = NULL;
	int c;

	memset(o, 0, sizeof(*o));
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		show_usage(argc < 2 ? stderr : stdout);
		exit(argc < 2 ? 2 : 0);
	}
	if (!strcmp(argv[1], "fetch"))
		o->kind = KIND_FETCH;
	else if (!strcmp(argv[1], "local"))
		o->kind = KIND_LOCAL;
	else
		usage_error("unknown mode '%s': fetch or local", argv[1]);
	o->procs = 1;
	o->seed = 1;
	o->timeout_ns = 10000ULL * 1000000;
	/* argv[1] stands for the program name: getopt starts after it. */
	opterr = 0;
	while ((c = getopt_long(argc - 1, argv + 1, "", lo, NULL)) != -1) {
		switch (c) {
		case O_TABLE:
			o->table = optarg;
			fetch_only = true;
			fetch_opt = "--table";
			break;
		case O_FILE:
			o->file = optarg;
			break;
		case O_TENSOR:
			o->tensor = optarg;
			if (o->kind != KIND_LOCAL)
				usage_error("--tensor is an option of local");
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
			/* Row indices are 32 bits wide. */
			if (!o->rows_total || o->rows_total > (uint64_t)UINT32_MAX + 1)
				usage_error("--rows-total: 1..2^32");
			break;
		case O_ROWS:
			o->rows = parse_range("--rows", optarg, 1, MAX_ROWS);
			break;
		case O_ITERS:
			o->iters = parse_range("--iters", optarg, 1, UINT32_MAX);
			break;
		case O_WARMUP:
			o->warmup = parse_range("--warmup", optarg, 0, UINT32_MAX);
			o->have_warmup = true;
			break;
		case O_BUSY:
			o->busy_poll = true;
			fetch_only = true;
			fetch_opt = "--busy-poll";
			break;
		case O_PROCS:
			o->procs = parse_range("--procs", optarg, 1, MAX_PROCS);
			break;
		case O_LINK:
			o->link = parse_range("--link", optarg, 0, UINT32_MAX);
			fetch_only = true;
			fetch_opt = "--link";
			break;
		case O_SEED:
			o->seed = parse_u64("--seed", optarg);
			break;
		case O_TIMEOUT:
			o->timeout_ns = parse_range("--timeout-ms", optarg, 1, MAX_TIMEOUT_MS) *
					1000000ULL;
			fetch_only = true;
			fetch_opt = "--timeout-ms";
			break;
		case O_LABEL:
			o->label = optarg;
			break;
		case O_DEV:
			o->dev = optarg;
			fetch_only = true;
			fetch_opt = "--dev";
			break;
		case O_HELP:
			show_usage(stdout);
			exit(0);
		default:
			usage_error("unknown option, or one without its value: '%s'",
				    argv[optind]);
		}
	}
	if (optind < argc - 1)
		usage_error("unexpected argument '%s'", argv[optind + 1]);
	if (fetch_only && o->kind != KIND_FETCH)
		usage_error("%s is an option of fetch", fetch_opt);
	if (o->kind == KIND_FETCH && !o->table)
		usage_error("fetch: --table is required");
	if (o->kind == KIND_LOCAL && !o->tensor)
		usage_error("local: --tensor is required");
	if (!o->file || !o->have_woff || !o->have_soff || !o->rows_total)
		usage_error("--file, --weight-offset, --scale-offset, --rows-total: required");
	if (!o->rows || !o->iters)
		usage_error("--rows and --iters are required");
	if ((uint64_t)o->iters * o->procs > MAX_SAMPLES)
		usage_error("--iters times --procs: at most %llu", MAX_SAMPLES);
	if (!o->have_warmup)
		o->warmup = o->iters / 20 > 10 ? o->iters / 20 : 10;
	if (!o->label)
		o->label = o->kind == KIND_FETCH ? "fetch" : "local";
}

/* Uniform over [0, rows_total): the high half of a 64 x 64-bit product, no modulo bias. */
static void make_rows(struct job *j)
{
	uint64_t total = j->o->rows_total;
	uint32_t i;

	for (i = 0; i < j->o->rows; i++)
		j->rows[i] = (uint32_t)(((__uint128_t)rnd(&j->rng) * total) >> 64);
}

/* This process's CPU time (one thread), user and kernel. */
static uint64_t cpu_ns(void)
{
	struct timespec ts;

	if (clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* One fetch of j->rows into the buffer; t0, t1 and cpu bracket the call alone. */
static int fetch_once(struct job *j, uint64_t *t0, uint64_t *t1, bool *fallback,
		      uint64_t *cpu)
{
	const struct opts *o = j->o;
	struct engram_result res;
	struct local_dest d;
	uint32_t bad_index = 0;
	int ret;

	*fallback = false;
	memset(&res, 0, sizeof(res));
	if (o->kind == KIND_LOCAL) {
		d.addr = j->buf;
		d.len = j->buf_len;
		*cpu = cpu_ns();
		*t0 = now_ns();
		ret = local_read_rows(j->lc, j->rows, o->rows, &d, 1, ROW, &bad_index);
		*t1 = now_ns();
		*cpu = cpu_ns() - *cpu;
		if (ret == -ERANGE)
			diag(j, "local read: row %" PRIu32 " (position %" PRIu32 ") out of range",
			     j->rows[bad_index], bad_index);
		return ret;
	}
	*cpu = cpu_ns();
	*t0 = now_ns();
	ret = engram_fetch(j->e, j->handle, j->rows, o->rows, j->buf_id, 0, ROW, o->timeout_ns,
			   o->busy_poll ? LIBENGRAM_BUSY_POLL : 0, &res);
	*t1 = now_ns();
	*cpu = cpu_ns() - *cpu;
	if (ret && res.wire_status)
		diag(j, "fetch refused by the server: %s, bad_index %" PRIu32,
		     engram_status_name(res.wire_status), res.bad_index);
	*fallback = !ret && (res.flags & LIBENGRAM_RESULT_FALLBACK);
	return ret;
}

/* Compare every row of the buffer with the file; returns the bad ones. */
static uint64_t check_rows(struct job *j, bool timed, uint64_t k)
{
	const struct opts *o = j->o;
	const uint8_t *got, *w, *s;
	uint64_t bad = 0;
	uint32_t i;
	size_t b;

	for (i = 0; i < o->rows; i++) {
		got = j->buf + (size_t)i * ROW;
		w = j->map + o->weight_offset + (uint64_t)j->rows[i] * WBYTES;
		s = j->map + o->scale_offset + (uint64_t)j->rows[i] * SBYTES;
		b = row_mismatch(got, w, s);
		if (b == ROW)
			continue;
		bad++;
		diag(j, "%s fetch %" PRIu64 ", position %" PRIu32 ": row %" PRIu32
		     " differs from the file at byte %zu", timed ? "timed" : "warm-up", k, i,
		     j->rows[i], b);
	}
	return bad;
}

/* @n fetches; with @timed, their latencies are kept. */
static void run_fetches(struct job *j, uint64_t n, bool timed)
{
	struct proc_stats *st = j->st;
	uint64_t k, t0, t1, cpu;
	bool fallback;
	int ret;

	for (k = 0; k < n; k++) {
		make_rows(j);
		ret = fetch_once(j, &t0, &t1, &fallback, &cpu);
		if (timed)
			st->end_ns = t1;
		if (ret) {
			if (!st->errors++) {
				st->first_err = abs(ret);
				st->first_err_ns = t1;
			}
			diag(j, "%s fetch %" PRIu64 " of %" PRIu32 " rows failed: %s (%s)",
			     timed ? "timed" : "warm-up", k, j->o->rows, errname(ret),
			     engram_strerror(ret));
			continue;
		}
		if (timed) {
			j->lat[st->fetches++] = t1 - t0;
			st->cpu_ns += cpu;
		}
		if (fallback)
			st->fallbacks++;
		st->bad_rows += check_rows(j, timed, k);
		st->rows_checked += j->o->rows;
	}
}

/* Open what the process fetches with; 0, or 2 after saying what failed. */
static int job_setup(struct job *j)
{
	const struct opts *o = j->o;
	int64_t h;
	int ret;

	j->buf_len = (size_t)o->rows * ROW;
	j->buf = mmap(NULL, j->buf_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	j->rows = calloc(o->rows, sizeof(*j->rows));
	if (j->buf == MAP_FAILED || !j->rows) {
		if (j->buf == MAP_FAILED)
			j->buf = NULL;
		fprintf(stderr, PROG ": [%u] cannot allocate a buffer of %zu bytes\n", j->procno,
			j->buf_len);
		return 2;
	}
	/* Fault the pages in now, not during the first fetches. */
	memset(j->buf, 0, j->buf_len);
	if (o->kind == KIND_LOCAL) {
		ret = local_open(o->file, o->tensor, &j->lc);
		if (ret) {
			fprintf(stderr, PROG ": [%u] local_open %s: %s\n", j->procno, o->file,
				errname(ret));
			return 2;
		}
		return 0;
	}
	ret = engram_open(o->dev, &j->e);
	if (ret) {
		fprintf(stderr, PROG ": [%u] open %s: %s (%s)\n", j->procno,
			o->dev ? o->dev : LIBENGRAM_DEFAULT_DEV, errname(ret),
			engram_strerror(ret));
		return 2;
	}
	h = engram_table_open(j->e, o->link, o->table, NULL, NULL);
	if (h < 0) {
		fprintf(stderr, PROG ": [%u] table open '%s' (link %" PRIu32 "): %s (%s)\n",
			j->procno, o->table, o->link, errname((int)h), engram_strerror((int)h));
		return 2;
	}
	j->handle = (uint32_t)h;
	ret = engram_buf_register(j->e, j->buf, j->buf_len, &j->buf_id);
	if (ret) {
		fprintf(stderr, PROG ": [%u] register %zu bytes: %s (%s)\n", j->procno,
			j->buf_len, errname(ret), engram_strerror(ret));
		return 2;
	}
	return 0;
}

static void job_teardown(struct job *j)
{
	if (j->e && j->buf_id)
		engram_buf_unregister(j->e, j->buf_id);
	engram_close(j->e);
	local_close(j->lc);
	if (j->buf)
		munmap(j->buf, j->buf_len);
	free(j->rows);
}

static int write_byte(int fd, char c)
{
	ssize_t n;

	do {
		n = write(fd, &c, 1);
	} while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

/*
 * One process: set up, warm up, report ready (one byte on @ready_w, 'R',
 * or 'F' after a failed setup), wait for the release (end of file on
 * @go_r), then the timed fetches.  Returns its exit status.
 */
static int child(const struct opts *o, unsigned int procno, const uint8_t *map,
		 struct shared *sh, uint64_t *lat, int ready_w, int go_r)
{
	struct job j = { .o = o, .procno = procno, .map = map, .st = &sh->st[procno],
			 .lat = lat };
	ssize_t n;
	char c;
	int status;

	j.rng = o->seed + procno;
	status = job_setup(&j);
	if (!status)
		run_fetches(&j, o->warmup, false);
	/* Closed at once, so the parent sees end of file once all have answered or died. */
	if (write_byte(ready_w, status ? 'F' : 'R'))
		status = 2;
	close(ready_w);
	if (!status) {
		do {
			n = read(go_r, &c, 1);
		} while (n < 0 && errno == EINTR);
		if (n != 0 || __atomic_load_n(&sh->abort, __ATOMIC_ACQUIRE))
			status = 2;
	}
	if (!status) {
		struct rusage r0, r1;

		getrusage(RUSAGE_SELF, &r0);
		run_fetches(&j, o->iters, true);
		getrusage(RUSAGE_SELF, &r1);
		j.st->vcsw = (uint64_t)(r1.ru_nvcsw - r0.ru_nvcsw);
		j.st->ivcsw = (uint64_t)(r1.ru_nivcsw - r0.ru_nivcsw);
	}
	job_teardown(&j);
	return status;
}

/*
 * The table as the processes will find it: there, as many rows as
 * --rows-total, taking --rows per fetch.  Checked once here so that a wrong
 * argument is one clear message, not one per process.
 */
static void check_table(const struct opts *o)
{
	struct engram_table_info info;
	struct local_copy *lc;
	struct engram *e;
	int64_t h;
	int ret;

	if (o->kind == KIND_LOCAL) {
		ret = local_open(o->file, o->tensor, &lc);
		if (ret)
			setup_error(ret, "local_open %s, tensor %s", o->file, o->tensor);
		if (lc->rows != o->rows_total || lc->weight_offset != o->weight_offset ||
		    lc->scale_offset != o->scale_offset)
			setup_error(0, "%s: tensor %s has %" PRIu64 " rows, weights at %" PRIu64
				    ", scales at %" PRIu64 "; the arguments say %" PRIu64 ", %"
				    PRIu64 ", %" PRIu64, o->file, o->tensor, lc->rows,
				    lc->weight_offset, lc->scale_offset, o->rows_total,
				    o->weight_offset, o->scale_offset);
		local_close(lc);
		return;
	}
	ret = engram_open(o->dev, &e);
	if (ret)
		setup_error(ret, "open %s", o->dev ? o->dev : LIBENGRAM_DEFAULT_DEV);
	h = engram_table_open(e, o->link, o->table, NULL, &info);
	if (h < 0)
		setup_error((int)h, "table open '%s' (link %" PRIu32 ")", o->table, o->link);
	if (info.row_bytes != ROW)
		setup_error(0, "table '%s' has rows of %" PRIu32 " bytes, not %d", o->table,
			    info.row_bytes, ROW);
	if (info.rows != o->rows_total)
		setup_error(0, "table '%s' has %" PRIu64 " rows, --rows-total says %" PRIu64,
			    o->table, info.rows, o->rows_total);
	if (info.max_rows && o->rows > info.max_rows)
		usage_error("--rows: %" PRIu32 " is above the %" PRIu32
			    " rows per fetch of table '%s' on link %" PRIu32, o->rows,
			    info.max_rows, o->table, info.link);
	if (!info.link)
		fprintf(stderr, PROG ": table '%s' is served from a local copy only\n", o->table);
	engram_close(e);
}

/* The file, mapped read-only, after checking that it holds every row. */
static const uint8_t *map_file(const struct opts *o)
{
	uint64_t wend, send;
	struct stat sb;
	void *map;
	int fd;

	fd = open(o->file, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		setup_error(-errno, "open %s", o->file);
	if (fstat(fd, &sb))
		setup_error(-errno, "stat %s", o->file);
	wend = o->weight_offset + o->rows_total * WBYTES;
	send = o->scale_offset + o->rows_total * SBYTES;
	if (!S_ISREG(sb.st_mode) || wend < o->weight_offset || send < o->scale_offset ||
	    wend > (uint64_t)sb.st_size || send > (uint64_t)sb.st_size)
		setup_error(0, "%s (%jd bytes) does not hold %" PRIu64 " rows at weight offset %"
			    PRIu64 " and scale offset %" PRIu64, o->file, (intmax_t)sb.st_size,
			    o->rows_total, o->weight_offset, o->scale_offset);
	map = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (map == MAP_FAILED)
		setup_error(-errno, "mmap %s", o->file);
	close(fd);
	return map;
}

/* Busy ticks of all CPUs since boot: user nice system irq softirq steal (USER_HZ). */
static int cpu_busy_ticks(uint64_t *out)
{
	unsigned long long v[8] = { 0 };
	char line[512];
	FILE *f;
	int n;

	f = fopen("/proc/stat", "re");
	if (!f)
		return -errno;
	if (!fgets(line, sizeof(line), f))
		line[0] = '\0';
	fclose(f);
	if (strncmp(line, "cpu ", 4))
		return -EPROTO;
	/* user nice system idle iowait irq softirq steal; guest time is within user. */
	n = sscanf(line + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2],
		   &v[3], &v[4], &v[5], &v[6], &v[7]);
	if (n < 7)
		return -EPROTO;
	*out = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
	return 0;
}

/* Nearest rank: the smallest sample with at least @permille / 1000 of them at or below it. */
static double pct_us(const uint64_t *sorted, uint64_t n, uint64_t permille)
{
	uint64_t rank = (permille * n + 999) / 1000;

	return sorted[rank ? rank - 1 : 0] / 1000.0;
}

__attribute__((noreturn))
static void oom(void)
{
	fprintf(stderr, PROG ": out of memory writing the result\n");
	exit(2);
}

static void set(json_t *obj, const char *key, json_t *v)
{
	if (!v || json_object_set_new(obj, key, v))
		oom();
}

static json_t *real_or_null(bool valid, double v)
{
	return valid ? json_real(v) : json_null();
}

static int report(const struct opts *o, struct shared *sh, uint64_t *lat, uint64_t release_ns,
		  bool have_cpu, double cpu_busy_s)
{
	uint64_t fetches = 0, checked = 0, bad = 0, errors = 0, fallbacks = 0, end_ns = 0;
	uint64_t first_ns = 0, sum = 0, i, n = 0, cpu = 0, vcsw = 0, ivcsw = 0;
	const struct proc_stats *st;
	double wall_s, rate = 0;
	int first_err = 0;
	unsigned int p;
	char *line;
	json_t *j;

	for (p = 0; p < o->procs; p++) {
		st = &sh->st[p];
		/* Move each process's latencies next to the previous one's. */
		memmove(lat + n, lat + (uint64_t)p * o->iters, st->fetches * sizeof(*lat));
		n += st->fetches;
		fetches += st->fetches;
		checked += st->rows_checked;
		bad += st->bad_rows;
		errors += st->errors;
		fallbacks += st->fallbacks;
		cpu += st->cpu_ns;
		vcsw += st->vcsw;
		ivcsw += st->ivcsw;
		if (st->end_ns > end_ns)
			end_ns = st->end_ns;
		if (st->first_err && (!first_err || st->first_err_ns < first_ns)) {
			first_err = st->first_err;
			first_ns = st->first_err_ns;
		}
	}
	qsort(lat, n, sizeof(*lat), cmp_u64);
	for (i = 0; i < n; i++)
		sum += lat[i];
	wall_s = end_ns > release_ns ? (end_ns - release_ns) / 1e9 : 0;
	if (wall_s > 0)
		rate = fetches * o->rows / wall_s;

	j = json_object();
	if (!j)
		oom();
	set(j, "label", json_string(o->label));
	set(j, "kind", json_string(o->kind == KIND_FETCH ? "fetch" : "local"));
	set(j, "rows", json_integer(o->rows));
	set(j, "bytes", json_integer((json_int_t)o->rows * ROW));
	set(j, "iters", json_integer(o->iters));
	set(j, "warmup", json_integer(o->warmup));
	set(j, "procs", json_integer(o->procs));
	set(j, "busy_poll", json_boolean(o->busy_poll));
	set(j, "link", json_integer(o->link));
	set(j, "fetches", json_integer((json_int_t)fetches));
	set(j, "p50_us", real_or_null(n, n ? pct_us(lat, n, 500) : 0));
	set(j, "p99_us", real_or_null(n, n ? pct_us(lat, n, 990) : 0));
	set(j, "p999_us", real_or_null(n, n ? pct_us(lat, n, 999) : 0));
	set(j, "mean_us", real_or_null(n, n ? (double)sum / n / 1000.0 : 0));
	set(j, "min_us", real_or_null(n, n ? lat[0] / 1000.0 : 0));
	set(j, "max_us", real_or_null(n, n ? lat[n - 1] / 1000.0 : 0));
	set(j, "wall_s", json_real(wall_s));
	set(j, "rows_per_s", json_real(rate));
	set(j, "gbytes_per_s", json_real(rate * ROW / 1e9));
	set(j, "cpu_busy_s", real_or_null(have_cpu, cpu_busy_s));
	set(j, "client_cpu_s", json_real(cpu / 1e9));
	set(j, "vol_switches", json_integer((json_int_t)vcsw));
	set(j, "invol_switches", json_integer((json_int_t)ivcsw));
	set(j, "rows_checked", json_integer((json_int_t)checked));
	set(j, "bad_rows", json_integer((json_int_t)bad));
	set(j, "errors", json_integer((json_int_t)errors));
	set(j, "fallbacks", json_integer((json_int_t)fallbacks));
	set(j, "first_error", first_err ? json_string(errname(first_err)) : json_null());
	line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(12));
	if (!line)
		oom();
	printf("%s\n", line);
	fflush(stdout);
	free(line);
	json_decref(j);
	return !errors && !bad && fetches == (uint64_t)o->procs * o->iters ? 0 : 1;
}

/* Release nobody: every process that is waiting exits, then so do we. */
__attribute__((noreturn))
static void abort_run(struct shared *sh, int go_w, const pid_t *pids, unsigned int forked,
		      const char *why)
{
	unsigned int p;

	__atomic_store_n(&sh->abort, 1, __ATOMIC_RELEASE);
	close(go_w);
	for (p = 0; p < forked; p++)
		waitpid(pids[p], NULL, 0);
	fprintf(stderr, PROG ": %s\n", why);
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t busy0 = 0, busy1 = 0, release_ns;
	int ready[2], go[2], ws, status;
	pid_t pids[MAX_PROCS];
	unsigned int p, nready = 0, answers = 0;
	const uint8_t *map;
	struct shared *sh;
	size_t area;
	bool have_cpu;
	uint64_t *lat;
	ssize_t n;
	char c;
	struct opts o;

	parse_opts(argc, argv, &o);
	check_table(&o);
	map = map_file(&o);

	area = sizeof(*sh) + (size_t)o.procs * o.iters * sizeof(uint64_t);
	sh = mmap(NULL, area, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED)
		setup_error(-errno, "mmap %zu bytes of shared results", area);
	lat = (uint64_t *)(sh + 1);
	if (pipe2(ready, O_CLOEXEC) || pipe2(go, O_CLOEXEC))
		setup_error(-errno, "pipe");

	fflush(NULL);
	for (p = 0; p < o.procs; p++) {
		pids[p] = fork();
		if (pids[p] < 0) {
			fprintf(stderr, PROG ": fork: %s\n", errname(errno));
			close(ready[1]);
			abort_run(sh, go[1], pids, p, "could not start every process");
		}
		if (!pids[p]) {
			close(ready[0]);
			close(go[1]);
			_exit(child(&o, p, map, sh, lat + (uint64_t)p * o.iters, ready[1], go[0]));
		}
	}
	close(ready[1]);
	close(go[0]);
	/* One byte from each process, or end of file when the rest died. */
	while (answers < o.procs) {
		n = read(ready[0], &c, 1);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		answers++;
		nready += c == 'R';
	}
	close(ready[0]);
	if (nready != o.procs)
		abort_run(sh, go[1], pids, o.procs, "setup failed in a process (see above)");

	have_cpu = !cpu_busy_ticks(&busy0);
	release_ns = now_ns();
	close(go[1]);

	status = 0;
	for (p = 0; p < o.procs; p++) {
		if (waitpid(pids[p], &ws, 0) < 0) {
			fprintf(stderr, PROG ": waitpid: %s\n", errname(errno));
			status = 1;
		} else if (WIFSIGNALED(ws)) {
			fprintf(stderr, PROG ": process %u died: %s\n", p, strsignal(WTERMSIG(ws)));
			status = 1;
		} else if (WEXITSTATUS(ws)) {
			fprintf(stderr, PROG ": process %u exited with %d\n", p, WEXITSTATUS(ws));
			status = 1;
		}
	}
	have_cpu = have_cpu && !cpu_busy_ticks(&busy1);
	if (!have_cpu)
		fprintf(stderr, PROG ": /proc/stat unreadable: cpu_busy_s is null\n");
	if (report(&o, sh, lat, release_ns, have_cpu,
		   have_cpu ? (double)(busy1 - busy0) / sysconf(_SC_CLK_TCK) : 0))
		status = 1;
	return status;
}
