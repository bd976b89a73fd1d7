// SPDX-License-Identifier: GPL-2.0
/*
 * barrier_check: the moments after which nothing may write a fetch's
 * buffer (UNREG_BUF, close(), a FETCH interrupted by signals), and a TCP
 * server that stopped reading, through libengram; for t_63_barriers.sh.
 *
 *   barrier_check --table NAME --link N [--rows N] [--max-ms N]
 *                 [--settle-ms N] [--min-ms N] [--short-ms N] [--long-ms N]
 *                 MODE
 *
 * fetch   one engram_fetch() of --rows rows must succeed (the link is up).
 *
 * With the server holding responses back (its fault_delay_ms knob):
 *
 * unreg   SUBMIT --rows rows into a buffer, UNREG_BUF it at once, fill it
 *         with a canary, sleep --settle-ms: every canary byte must still be
 *         there, and UNREG_BUF must have returned within --max-ms.
 *         --fetch-ok: the fetch itself must then have succeeded (UNREG_BUF
 *         waited for it rather than breaking it).
 * close   the same with the fd closed instead of UNREG_BUF.
 * eintr   engram_fetch() of --rows rows while SIGALRM (no SA_RESTART)
 *         arrives every 50 ms: it must return 0 no sooner than --min-ms
 *         (the fetch really ran to its end) and leave the canary, written
 *         after it returned, alone for --settle-ms.
 *
 * On a TCP link whose server stopped reading:
 *
 * stall   thread A fetches max_rows rows (--long-ms deadline), which fills
 *         the socket; 500 ms later thread B fetches 16 rows (--short-ms
 *         deadline) on the same fd, and the main thread meanwhile asks WAIT
 *         for a ticket that does not exist.  B must fail with ETIMEDOUT
 *         within --short-ms + --max-ms, never be seen in D state before
 *         its deadline, and the WAIT must answer (ENOENT) within 200 ms.
 *
 * Prints "barrier_check: MODE ..." lines with the figures and exits 0 only
 * when every condition held.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "libengram.h"

#define CANARY	0xa5

static struct {
	const char *table;
	uint32_t link;
	uint32_t rows;
	uint32_t max_ms, settle_ms, min_ms, short_ms, long_ms;
	bool fetch_ok;
} o = { .rows = 4096, .max_ms = 3000, .settle_ms = 3000, .short_ms = 1000,
	.long_ms = 30000 };

static int fails;

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(uint32_t ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static void need(bool cond, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void need(bool cond, const char *fmt, ...)
{
	va_list ap;

	printf("barrier_check: %s: ", cond ? "ok" : "FAIL");
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
	if (!cond)
		fails++;
}

static void die(const char *what, int err)
{
	printf("barrier_check: %s: %s\n", what, engram_strerror(err));
	exit(2);
}

struct ctx {
	struct engram *e;
	struct engram_table_info ti;
	uint32_t handle;
	uint32_t *rows;
	uint8_t *buf;
	size_t len;
	uint32_t buf_id;
};

static void ctx_open(struct ctx *c, uint32_t nr_rows)
{
	int64_t h;
	uint32_t i;
	int ret;

	memset(c, 0, sizeof(*c));
	ret = engram_open(NULL, &c->e);
	if (ret)
		die("open", ret);
	h = engram_table_open(c->e, o.link, o.table, NULL, &c->ti);
	if (h < 0)
		die("table open", (int)h);
	c->handle = (uint32_t)h;
	c->rows = calloc(nr_rows, sizeof(*c->rows));
	if (!c->rows)
		die("rows", -ENOMEM);
	for (i = 0; i < nr_rows; i++)
		c->rows[i] = (uint32_t)(((uint64_t)i * 7919) % c->ti.rows);
	c->len = (size_t)nr_rows * LIBENGRAM_ROW_BYTES;
	c->buf = mmap(NULL, c->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (c->buf == MAP_FAILED)
		die("mmap", -errno);
	memset(c->buf, 0, c->len);
	ret = engram_buf_register(c->e, c->buf, c->len, &c->buf_id);
	if (ret)
		die("register", ret);
}

/* Canary the buffer now; after --settle-ms, how many bytes changed. */
static size_t canary_settle(const struct ctx *c)
{
	size_t i, bad = 0;

	memset(c->buf, CANARY, c->len);
	sleep_ms(o.settle_ms);
	for (i = 0; i < c->len; i++)
		bad += c->buf[i] != CANARY;
	return bad;
}

static void mode_unreg(bool by_close)
{
	const char *what = by_close ? "close" : "UNREG_BUF";
	struct engram_result res;
	struct ctx c;
	uint64_t t0, ms;
	int64_t ticket;
	size_t bad;
	int ret;

	ctx_open(&c, o.rows);
	ticket = engram_submit(c.e, c.handle, c.rows, o.rows, c.buf_id, 0, 0,
			       (uint64_t)o.long_ms * 1000000, 0, &res);
	if (ticket < 0)
		die("submit", (int)ticket);
	t0 = now_ms();
	if (by_close) {
		engram_close(c.e);
		c.e = NULL;
		ret = 0;
	} else {
		ret = engram_buf_unregister(c.e, c.buf_id);
	}
	ms = now_ms() - t0;
	need(!ret, "%s with a fetch of %u rows in flight returned %d", what, o.rows, ret);
	need(ms <= o.max_ms, "%s took %" PRIu64 " ms (at most %u)", what, ms, o.max_ms);
	bad = canary_settle(&c);
	need(!bad, "%zu of %zu canary bytes changed in the %u ms after %s returned", bad, c.len,
	     o.settle_ms, what);
	if (c.e) {
		ret = engram_wait(c.e, (uint64_t)ticket, 0, 0, &res);
		if (o.fetch_ok)
			need(!ret, "the fetch itself ended with %s: UNREG_BUF waited for it",
			     engram_strerror(ret));
		else
			printf("barrier_check: the fetch itself ended with %d (%s)\n", ret,
			       engram_strerror(ret));
		engram_close(c.e);
	}
}

static void mode_fetch(void)
{
	struct engram_result res;
	struct ctx c;
	int ret;

	ctx_open(&c, o.rows);
	ret = engram_fetch(c.e, c.handle, c.rows, o.rows, c.buf_id, 0, 0,
			   (uint64_t)o.long_ms * 1000000, 0, &res);
	need(!ret, "a fetch of %u rows: %s", o.rows, engram_strerror(ret));
	engram_close(c.e);
}

static volatile sig_atomic_t alarms;

static void on_alarm(int sig)
{
	(void)sig;
	alarms++;
}

static void mode_eintr(void)
{
	struct itimerval it = { .it_interval = { .tv_usec = 50000 },
				.it_value = { .tv_usec = 50000 } };
	struct itimerval off = { 0 };
	struct engram_result res;
	struct sigaction sa;
	struct ctx c;
	uint64_t t0, ms;
	size_t bad;
	int ret;

	ctx_open(&c, o.rows);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;	/* no SA_RESTART: the ioctl sees EINTR */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		die("sigaction", -errno);
	alarms = 0;
	setitimer(ITIMER_REAL, &it, NULL);
	t0 = now_ms();
	ret = engram_fetch(c.e, c.handle, c.rows, o.rows, c.buf_id, 0, 0,
			   (uint64_t)o.long_ms * 1000000, 0, &res);
	ms = now_ms() - t0;
	setitimer(ITIMER_REAL, &off, NULL);
	need(alarms >= 2, "%d signals arrived during engram_fetch()", (int)alarms);
	need(ret == 0, "engram_fetch() interrupted by signals returned %d (%s)", ret,
	     engram_strerror(ret));
	need(ms >= o.min_ms, "it returned after %" PRIu64 " ms, once the fetch had ended "
	     "(the server held it %u ms)", ms, o.min_ms);
	bad = canary_settle(&c);
	need(!bad, "%zu of %zu canary bytes changed in the %u ms after it returned", bad, c.len,
	     o.settle_ms);
	engram_close(c.e);
}

struct stall_arg {
	struct ctx *c;
	uint32_t nr_rows;
	uint32_t timeout_ms;
	uint32_t offset_rows;
	pid_t tid;
	int ret;
	uint64_t ms;
	volatile int started, finished;
};

static void *stall_thread(void *p)
{
	struct stall_arg *a = p;
	struct engram_result res;
	uint64_t t0;

	a->tid = (pid_t)syscall(SYS_gettid);
	__atomic_store_n(&a->started, 1, __ATOMIC_RELEASE);
	t0 = now_ms();
	a->ret = engram_fetch(a->c->e, a->c->handle, a->c->rows, a->nr_rows, a->c->buf_id,
			      (uint64_t)a->offset_rows * LIBENGRAM_ROW_BYTES, 0,
			      (uint64_t)a->timeout_ms * 1000000, 0, &res);
	a->ms = now_ms() - t0;
	__atomic_store_n(&a->finished, 1, __ATOMIC_RELEASE);
	return NULL;
}

/* The state letter of a thread of ours, '?' when it is gone. */
static char thread_state(pid_t tid)
{
	char path[64], line[512], *p;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return '?';
	p = fgets(line, sizeof(line), f);
	fclose(f);
	p = p ? strrchr(line, ')') : NULL;
	return p && p[1] == ' ' ? p[2] : '?';
}

static void mode_stall(void)
{
	struct stall_arg a = { 0 }, b = { 0 };
	struct engram_result res;
	pthread_t ta, tb;
	uint64_t t0, tb0, ms, bound;
	uint32_t max, i;
	int ret, dstate = 0, samples = 0;
	bool waited = false;
	char st;
	struct ctx c;

	/* max_rows for A, 16 more rows for B after them in the same buffer. */
	ctx_open(&c, 1);
	max = c.ti.max_rows;
	engram_close(c.e);
	munmap(c.buf, c.len);
	free(c.rows);
	ctx_open(&c, max + 16);

	a.c = b.c = &c;
	a.nr_rows = max;
	a.timeout_ms = o.long_ms;
	b.nr_rows = 16;
	b.timeout_ms = o.short_ms;
	b.offset_rows = max;
	if (pthread_create(&ta, NULL, stall_thread, &a))
		die("pthread_create", -errno);
	sleep_ms(500);
	need(!a.finished, "a fetch of %u rows (%u ms deadline) is still sending or waiting "
	     "after 500 ms (state %c)", max, o.long_ms, thread_state(a.tid));
	if (pthread_create(&tb, NULL, stall_thread, &b))
		die("pthread_create", -errno);
	while (!__atomic_load_n(&b.started, __ATOMIC_ACQUIRE))
		sleep_ms(1);
	tb0 = now_ms();
	/*
	 * Sample B until shortly before its deadline, with a WAIT of our own
	 * on the fd a third of the way.  At the deadline B breaks the
	 * connection itself (teardown, bounded), which is no wait on the
	 * network.
	 */
	while (now_ms() + 100 < tb0 + o.short_ms &&
	       !__atomic_load_n(&b.finished, __ATOMIC_ACQUIRE)) {
		st = thread_state(b.tid);
		samples++;
		dstate += st == 'D';
		if (samples == 15) {
			waited = true;
			t0 = now_ms();
			ret = engram_wait(c.e, 1000000, 1000000, 0, &res);
			ms = now_ms() - t0;
			need(ms <= 200 && ret == -ENOENT, "meanwhile WAIT for an unknown ticket "
			     "on the same fd answered in %" PRIu64 " ms (%s)", ms,
			     engram_strerror(ret));
		}
		sleep_ms(20);
	}
	need(waited, "a WAIT was tried while B was waiting");
	need(!dstate && samples, "thread B was in D state in %d of %d samples before its "
	     "deadline", dstate, samples);
	bound = (uint64_t)o.short_ms + o.max_ms;
	for (i = 0; i < bound / 20 + 50 && !__atomic_load_n(&b.finished, __ATOMIC_ACQUIRE); i++)
		sleep_ms(20);
	need(__atomic_load_n(&b.finished, __ATOMIC_ACQUIRE),
	     "thread B (16 rows, %u ms deadline) returned", o.short_ms);
	pthread_join(tb, NULL);
	need(b.ret == -ETIMEDOUT && b.ms <= bound, "thread B: %s after %" PRIu64 " ms "
	     "(ETIMEDOUT within %" PRIu64 " ms)", engram_strerror(b.ret), b.ms, bound);
	pthread_join(ta, NULL);
	printf("barrier_check: thread A: %s after %" PRIu64 " ms\n", engram_strerror(a.ret),
	       a.ms);
	need(a.ret != 0, "thread A's fetch did not succeed: the server read nothing");
	engram_close(c.e);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "table", required_argument, NULL, 't' },
		{ "link", required_argument, NULL, 'l' },
		{ "rows", required_argument, NULL, 'r' },
		{ "max-ms", required_argument, NULL, 'M' },
		{ "settle-ms", required_argument, NULL, 'S' },
		{ "min-ms", required_argument, NULL, 'm' },
		{ "short-ms", required_argument, NULL, 's' },
		{ "long-ms", required_argument, NULL, 'L' },
		{ "fetch-ok", no_argument, NULL, 'k' },
		{ NULL, 0, NULL, 0 }
	};
	const char *mode;
	int c;

	setvbuf(stdout, NULL, _IOLBF, 0);
	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 't': o.table = optarg; break;
		case 'l': o.link = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'r': o.rows = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'M': o.max_ms = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'S': o.settle_ms = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'm': o.min_ms = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 's': o.short_ms = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'L': o.long_ms = (uint32_t)strtoul(optarg, NULL, 0); break;
		case 'k': o.fetch_ok = true; break;
		default: return 2;
		}
	}
	if (optind + 1 != argc || !o.table || !o.rows) {
		fprintf(stderr, "usage: barrier_check --table NAME [--link N] [options] "
			"fetch|unreg|close|eintr|stall\n");
		return 2;
	}
	mode = argv[optind];
	if (!strcmp(mode, "unreg"))
		mode_unreg(false);
	else if (!strcmp(mode, "close"))
		mode_unreg(true);
	else if (!strcmp(mode, "fetch"))
		mode_fetch();
	else if (!strcmp(mode, "eintr"))
		mode_eintr();
	else if (!strcmp(mode, "stall"))
		mode_stall();
	else
		return 2;
	return fails ? 1 : 0;
}
