// SPDX-License-Identifier: GPL-2.0
/*
 * kfuzz: coverage-guided fuzzing of the module's kernel surfaces, in the
 * guest, on the project's debug kernel.
 *
 *   kfuzz SURFACE [--inputs N] [--seconds S] [--seed S] [--pcs FILE]
 *         [--save DIR] [--replay FILE]... [surface options]
 *
 * SURFACE is ioctl (/dev/engram_rdma as sequences of calls), netlink (the
 * generic netlink family, mutated commands and attributes), tcp (the wire
 * protocol from a raw socket: mutated hellos and frames) or rdma (a
 * librdmacm/verbs client: mutated REQ private data, then mutated frames as
 * SENDs).
 *
 * Like syzkaller, it reads the module's edges from KCOV: its own system
 * calls' through KCOV_ENABLE, and those of the module's work items and
 * completion handlers through KCOV_REMOTE_ENABLE and the common handle the
 * module's coverage build brackets them with (kmod/cover.h).  An input that
 * reaches an edge not seen before joins the corpus and is mutated further.
 *
 * After every input it reads /dev/kmsg: a KASAN, UBSAN, lockdep, BUG or
 * WARNING report is a finding; the inputs run just before it are written
 * to --save DIR so that they can be kept and replayed (--replay), and the
 * run stops.  It prints one line per surface:
 *
 *   kfuzz SURFACE: inputs N corpus N edges N pcs N findings N seconds S
 *
 * and with --pcs writes the module PCs reached, one hex address per line,
 * for a line count through the module's sections and addr2line.
 * Exit status: 0, 1 with a finding, 2 when the fuzzer itself failed.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <linux/genetlink.h>
#include <linux/kcov.h>
#include <linux/netlink.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <linux/engram_rdma.h>

#include "wire.h"

#define COVER_WORDS	(1u << 18)	/* per KCOV area, 8-byte words */
#define EDGE_BITS	22
#define PC_SLOTS	(1u << 18)
#define MAX_INPUT	4096
#define MAX_CORPUS	8192
#define RING		16
#define KCOV_INSTANCE	0x454e47	/* kmod/cover.h: ENGRAM_KCOV_INSTANCE */

static struct {
	const char *surface;
	uint64_t inputs;
	unsigned int seconds;
	uint64_t seed;
	const char *pcs;
	const char *save;
	const char *replay[16];
	unsigned int nr_replay;
	const char *table;	/* ioctl, tcp: a table the server has */
	const char *path;	/* netlink: a table file it may load */
	const char *addr;	/* tcp: the server */
	const char *port;
	unsigned int slow;	/* the debug kernel's timeout scale */
	bool verbose;
} o = { .inputs = 10000, .seconds = 3600, .seed = 1, .addr = "192.0.2.1",
	.port = "18520", .slow = 1 };

static void die(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	fprintf(stderr, "kfuzz: ");
	vfprintf(stderr, fmt, ap);
	fprintf(stderr, "\n");
	va_end(ap);
	exit(2);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t rng_state;

static uint64_t rnd64(void)
{
	uint64_t s = rng_state;

	s ^= s << 13;
	s ^= s >> 7;
	s ^= s << 17;
	rng_state = s;
	return s * 0x2545f4914f6cdd1dULL;
}

static uint32_t rnd(uint32_t n)
{
	return n ? (uint32_t)(rnd64() >> 32) % n : 0;
}

static void put16(uint8_t *p, uint16_t v) { p[0] = v; p[1] = v >> 8; }
static void put32(uint8_t *p, uint32_t v) { put16(p, v); put16(p + 2, v >> 16); }
static uint32_t get32(const uint8_t *p)
{
	return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24;
}

/* ---- KCOV ------------------------------------------------------------- */

static uint64_t *cov_self, *cov_remote;
static uint64_t mod_lo, mod_hi;
static uint8_t edges[1u << (EDGE_BITS - 3)];
static uint64_t pcs[PC_SLOTS];
static uint64_t nr_edges, nr_pcs;

static uint64_t *kcov_open(int *fdp)
{
	uint64_t *area;
	int fd = open("/sys/kernel/debug/kcov", O_RDWR);

	if (fd < 0)
		die("/sys/kernel/debug/kcov: %s (a kernel with CONFIG_KCOV?)", strerror(errno));
	if (ioctl(fd, KCOV_INIT_TRACE, (unsigned long)COVER_WORDS))
		die("KCOV_INIT_TRACE: %s", strerror(errno));
	area = mmap(NULL, COVER_WORDS * sizeof(uint64_t), PROT_READ | PROT_WRITE,
		    MAP_SHARED, fd, 0);
	if (area == MAP_FAILED)
		die("mmap kcov: %s", strerror(errno));
	*fdp = fd;
	return area;
}

static pthread_mutex_t remote_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t remote_cv = PTHREAD_COND_INITIALIZER;
static int remote_state;	/* 0 starting, 1 on, -errno failed */

/*
 * A task holds one KCOV instance; the remote one, which collects the
 * module's work items and handlers under the common handle, lives in a
 * thread of its own that only waits.
 */
static void *remote_thread(void *arg)
{
	struct kcov_remote_arg ra = {
		.trace_mode = KCOV_TRACE_PC,
		.area_size = COVER_WORDS,
		.num_handles = 0,
		.common_handle = kcov_remote_handle(KCOV_SUBSYSTEM_COMMON, KCOV_INSTANCE),
	};
	int fd, st = 1;

	(void)arg;
	cov_remote = kcov_open(&fd);
	if (ioctl(fd, KCOV_REMOTE_ENABLE, &ra))
		st = -errno;
	pthread_mutex_lock(&remote_mu);
	remote_state = st;
	pthread_cond_broadcast(&remote_cv);
	pthread_mutex_unlock(&remote_mu);
	for (;;)
		pause();
	return NULL;
}

static void module_range(void)
{
	FILE *f = fopen("/proc/modules", "r");
	char line[512], name[64];
	unsigned long size;
	unsigned long long base;

	if (!f)
		die("/proc/modules: %s", strerror(errno));
	while (fgets(line, sizeof(line), f)) {
		if (sscanf(line, "%63s %lu %*s %*s %*s %llx", name, &size, &base) == 3 &&
		    !strcmp(name, "engram_rdma")) {
			mod_lo = base;
			mod_hi = base + size;
		}
	}
	fclose(f);
	if (!mod_lo)
		die("engram_rdma is not loaded, or /proc/modules hides its address");
}

static void cover_start(void)
{
	pthread_t t;

	module_range();
	{
		int fd;

		cov_self = kcov_open(&fd);
		if (ioctl(fd, KCOV_ENABLE, KCOV_TRACE_PC))
			die("KCOV_ENABLE: %s", strerror(errno));
	}
	if (pthread_create(&t, NULL, remote_thread, NULL))
		die("pthread_create");
	pthread_mutex_lock(&remote_mu);
	while (!remote_state)
		pthread_cond_wait(&remote_cv, &remote_mu);
	pthread_mutex_unlock(&remote_mu);
	if (remote_state < 0)
		die("KCOV_REMOTE_ENABLE: %s", strerror(-remote_state));
}

static void cover_reset(void)
{
	__atomic_store_n(&cov_self[0], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&cov_remote[0], 0, __ATOMIC_RELAXED);
}

static bool pc_add(uint64_t pc)
{
	uint64_t h = (pc * 0x9e3779b97f4a7c15ULL) >> 46;
	unsigned int i;

	for (i = 0; i < PC_SLOTS; i++) {
		uint64_t *s = &pcs[(h + i) & (PC_SLOTS - 1)];

		if (*s == pc)
			return false;
		if (!*s) {
			*s = pc;
			nr_pcs++;
			return true;
		}
	}
	return false;
}

/* New edges of the module in one area. */
static unsigned int cover_area(const uint64_t *area)
{
	uint64_t n = __atomic_load_n(&area[0], __ATOMIC_RELAXED), prev = 0, i;
	unsigned int fresh = 0;

	if (n > COVER_WORDS - 1)
		n = COVER_WORDS - 1;
	for (i = 1; i <= n; i++) {
		uint64_t pc = area[i], e;

		if (pc < mod_lo || pc >= mod_hi)
			continue;
		pc_add(pc);
		e = ((prev * 0x9e3779b97f4a7c15ULL) ^ pc) * 0xff51afd7ed558ccdULL;
		e >>= 64 - EDGE_BITS;
		if (!(edges[e >> 3] & (1u << (e & 7)))) {
			edges[e >> 3] |= 1u << (e & 7);
			nr_edges++;
			fresh++;
		}
		prev = pc;
	}
	return fresh;
}

/* Remote coverage lands when the module's work item ends: wait for it. */
static void cover_settle(unsigned int max_ms)
{
	uint64_t end = now_ms() + max_ms, last = ~0ULL, stable = 0;

	while (now_ms() < end) {
		uint64_t n = __atomic_load_n(&cov_remote[0], __ATOMIC_RELAXED);

		if (n == last && n) {
			if (++stable >= 2)
				return;
		} else {
			stable = 0;
		}
		last = n;
		usleep(1000);
	}
}

/* ---- findings: the kernel log ------------------------------------------ */

static int kmsg_fd = -1;
static char finding[512];

static void kmsg_open(void)
{
	kmsg_fd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
	if (kmsg_fd < 0)
		die("/dev/kmsg: %s", strerror(errno));
	lseek(kmsg_fd, 0, SEEK_END);
}

/* A checker's report since the last call; its first line goes to finding. */
static bool kmsg_report(void)
{
	static const char *const bad[] = {
		"BUG:", "WARNING:", "KASAN", "UBSAN", "kernel BUG", "Oops",
		"possible circular locking", "possible recursive locking",
		"inconsistent lock state", "suspicious RCU usage", "ODEBUG",
		"list_add corruption", "list_del corruption", "general protection",
		"INFO: task", "kmemleak", "refcount_t",
	};
	char rec[2048];
	ssize_t n;
	size_t i;

	for (;;) {
		n = read(kmsg_fd, rec, sizeof(rec) - 1);
		if (n < 0 && errno == EPIPE)
			continue;	/* overwritten records: read on */
		if (n <= 0)
			return finding[0];
		rec[n] = 0;
		for (i = 0; i < sizeof(bad) / sizeof(bad[0]) && !finding[0]; i++) {
			char *p = strchr(rec, ';'), *nl;

			if (strstr(rec, bad[i]) && p) {
				nl = strchr(p, '\n');
				if (nl)
					*nl = 0;
				snprintf(finding, sizeof(finding), "%s", p + 1);
			}
		}
	}
}

/* ---- inputs ---------------------------------------------------------- */

struct input {
	uint32_t len;
	uint8_t b[MAX_INPUT];
};

static struct input *corpus;
static unsigned int nr_corpus;
static struct input ring[RING];
static uint64_t ring_n;

static void corpus_add(const struct input *in)
{
	if (nr_corpus < MAX_CORPUS)
		corpus[nr_corpus++] = *in;
	else
		corpus[rnd(MAX_CORPUS)] = *in;
}

static void seed_add(const void *b, size_t len)
{
	struct input in;

	if (len > MAX_INPUT)
		len = MAX_INPUT;
	in.len = len;
	memcpy(in.b, b, len);
	corpus_add(&in);
}

static const uint64_t interesting[] = {
	0, 1, 2, 7, 8, 15, 16, 17, 31, 32, 48, 63, 64, 100, 127, 128, 255, 256,
	263, 264, 265, 511, 512, 1023, 1024, 4095, 4096, 4097, 32767, 32768,
	65535, 65536, 65537, 0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ULL,
	0x7fffffffffffffffULL, 0x8000000000000000ULL, ~0ULL, ~0ULL - 1,
};

static void mutate_one(struct input *in)
{
	uint32_t pos, n, w;

	switch (rnd(in->len ? 9 : 1)) {
	case 0: /* insert random bytes */
		n = 1 + rnd(16);
		if (in->len + n > MAX_INPUT)
			break;
		pos = rnd(in->len + 1);
		memmove(in->b + pos + n, in->b + pos, in->len - pos);
		for (w = 0; w < n; w++)
			in->b[pos + w] = rnd(256);
		in->len += n;
		break;
	case 1: /* flip a bit */
		pos = rnd(in->len);
		in->b[pos] ^= 1u << rnd(8);
		break;
	case 2: /* a random byte */
		in->b[rnd(in->len)] = rnd(256);
		break;
	case 3: /* an interesting value of 1, 2, 4 or 8 bytes */
	case 4: {
		uint64_t v = interesting[rnd(sizeof(interesting) / sizeof(interesting[0]))];

		w = 1u << rnd(4);
		if (in->len < w)
			break;
		pos = rnd(in->len - w + 1) & ~(w - 1);
		if (rnd(2))
			v += rnd(3) - 1;
		memcpy(in->b + pos, &v, w);
		break;
	}
	case 5: /* add to a 4-byte field */
		if (in->len < 4)
			break;
		pos = rnd(in->len - 3) & ~3u;
		put32(in->b + pos, get32(in->b + pos) + rnd(33) - 16);
		break;
	case 6: /* delete bytes */
		n = 1 + rnd(in->len < 16 ? in->len : 16);
		pos = rnd(in->len - n + 1);
		memmove(in->b + pos, in->b + pos + n, in->len - pos - n);
		in->len -= n;
		break;
	case 7: /* duplicate a chunk */
		n = 1 + rnd(in->len < 64 ? in->len : 64);
		pos = rnd(in->len - n + 1);
		if (in->len + n > MAX_INPUT)
			break;
		memmove(in->b + pos + n, in->b + pos, in->len - pos);
		in->len += n;
		break;
	case 8: { /* splice the tail of another corpus entry */
		const struct input *x = &corpus[rnd(nr_corpus)];
		uint32_t from = rnd(x->len + 1);

		pos = rnd(in->len + 1);
		n = x->len - from;
		if (pos + n > MAX_INPUT)
			n = MAX_INPUT - pos;
		memcpy(in->b + pos, x->b + from, n);
		in->len = pos + n;
		break;
	}
	}
}

/* ---- surface: ioctl --------------------------------------------------- */

/*
 * An ioctl input is a sequence of calls on one fresh fd, each
 * op(1) fix(1) len(1) then len bytes of the call's struct.  The fix bits
 * patch in what a random struct would never hold (the live handle, a
 * registered buffer, the rows array, a bounded timeout), so that deep
 * paths are reached; without them the call goes exactly as mutated.
 */
enum { OP_OPEN, OP_REG, OP_UNREG, OP_SUBMIT, OP_WAIT, OP_FETCH, OP_REPORT,
	OP_REOPEN, OP_RAW, OP_POLL, OP_REMAP, NR_OPS };
#define FIX_SIZE	0x01
#define FIX_HANDLE	0x02
#define FIX_BUF		0x04
#define FIX_ROWS	0x08
#define FIX_RANGES	0x10
#define FIX_TICKET	0x20
#define FIX_ALL		0x3f

#define UBUF_BYTES	(4u << 20)
#define NR_ROWS		8192

static uint8_t *ubuf;
static uint32_t rows_ok[NR_ROWS], rows_bad[NR_ROWS];
static struct engram_ioc_range ranges[ENGRAM_WIRE_MAX_RANGES + 2];
static uint64_t table_rows;
static long pg;

struct ioctl_state {
	int fd;
	uint32_t handle, buf_id, last_buf;
	uint64_t ticket;
};

/*
 * 0 is the module's own timeout_ms.  A deadline that passes breaks the
 * link until it reconnects, and every fetch meanwhile is ENOTCONN: so an
 * odd value gives a deadline under a millisecond, an even one 100 to 300
 * ms (scaled), enough for the few rows the fix-ups ask for.
 */
static uint64_t clamp_timeout(uint64_t ns)
{
	if (!ns)
		return 0;
	if (ns & 1)
		return 1 + ns % 1000000;
	return (100000000ULL + ns % 200000000ULL) * o.slow;
}

static void ioctl_call(struct ioctl_state *s, uint8_t op, uint8_t fix,
		       const uint8_t *p, unsigned int len)
{
	uint8_t arg[512] __attribute__((aligned(8)));
	unsigned long cmd = 0;
	size_t sz = 0;

	memset(arg, 0, sizeof(arg));
	memcpy(arg, p, len);
	switch (op % NR_OPS) {
	case OP_OPEN: {
		struct engram_ioc_open *a = (void *)arg;

		cmd = ENGRAM_IOC_OPEN_TABLE;
		sz = sizeof(*a);
		if (fix & FIX_HANDLE) {
			a->flags = (a->flags & ~ENGRAM_OPEN_FLAGS) | ENGRAM_OPEN_BY_NAME;
			snprintf(a->name, sizeof(a->name), "%s", o.table);
		}
		break;
	}
	case OP_REG: {
		struct engram_ioc_reg *a = (void *)arg;

		cmd = ENGRAM_IOC_REG_BUF;
		sz = sizeof(*a);
		if (fix & FIX_BUF) {
			uint64_t off = a->addr % UBUF_BYTES;

			if (!(fix & FIX_TICKET))
				off &= ~(uint64_t)(pg - 1);
			a->addr = (uintptr_t)ubuf + off;
			a->length = 1 + a->length % (UBUF_BYTES - off);
		}
		break;
	}
	case OP_UNREG: {
		struct engram_ioc_unreg *a = (void *)arg;

		cmd = ENGRAM_IOC_UNREG_BUF;
		sz = sizeof(*a);
		if (fix & FIX_BUF)
			a->buf_id = s->buf_id;
		break;
	}
	case OP_SUBMIT:
	case OP_FETCH: {
		struct engram_ioc_fetch *a = (void *)arg;

		cmd = op % NR_OPS == OP_SUBMIT ? ENGRAM_IOC_SUBMIT : ENGRAM_IOC_FETCH;
		sz = sizeof(*a);
		if (fix & FIX_HANDLE)
			a->handle = s->handle;
		if (fix & FIX_BUF)
			a->buf_id = s->buf_id;
		if (fix & FIX_ROWS) {
			a->rows = (uintptr_t)(a->offset & 1 ? rows_bad : rows_ok);
			/* Few rows: a big fetch takes a second on the debug kernel. */
			a->nr_rows = 1 + a->nr_rows % (a->nr_rows & 0x80000 ? NR_ROWS : 64);
			a->offset = (a->offset >> 1) % UBUF_BYTES;
		}
		/* ranges is refused unless asked for by the flag. */
		if ((fix & FIX_RANGES) && (a->flags & ENGRAM_FETCH_RANGES)) {
			unsigned int i;

			for (i = 0; i < ENGRAM_WIRE_MAX_RANGES + 2; i++)
				ranges[i].buf_id = s->buf_id ? s->buf_id : s->last_buf;
			a->ranges = (uintptr_t)ranges;
			a->nr_ranges %= ENGRAM_WIRE_MAX_RANGES + 2;
		}
		a->timeout_ns = clamp_timeout(a->timeout_ns);
		break;
	}
	case OP_WAIT: {
		struct engram_ioc_wait *a = (void *)arg;

		cmd = ENGRAM_IOC_WAIT;
		sz = sizeof(*a);
		if (fix & FIX_TICKET)
			a->ticket = s->ticket;
		a->timeout_ns = clamp_timeout(a->timeout_ns);
		if (!a->timeout_ns)
			a->timeout_ns = 1;	/* never wait the fetch's own deadline */
		break;
	}
	case OP_REPORT: {
		struct engram_ioc_report *a = (void *)arg;

		cmd = ENGRAM_IOC_REPORT;
		sz = sizeof(*a);
		if (fix & FIX_HANDLE)
			a->handle = s->handle;
		break;
	}
	case OP_REOPEN:
		close(s->fd);
		s->fd = open("/dev/engram_rdma", O_RDWR | O_CLOEXEC);
		s->handle = s->buf_id = 0;
		s->ticket = 0;
		return;
	case OP_RAW: {
		/* Any command of the magic, with a size and direction of its own. */
		cmd = _IOC(p && len ? p[0] & 3 : 0, ENGRAM_IOC_MAGIC,
			   len > 1 ? p[1] : 0, len > 2 ? p[2] % 256 : 0);
		ioctl(s->fd, cmd, fix & 1 ? (void *)arg : (void *)8);
		return;
	}
	case OP_POLL: {
		struct pollfd pf = { .fd = s->fd, .events = POLLIN | POLLOUT | POLLPRI };

		poll(&pf, 1, len ? p[0] % 20 : 0);
		return;
	}
	case OP_REMAP: {
		/* Registered memory going away under the module, then back. */
		uint32_t off = (len >= 4 ? get32(p) : 0) % (UBUF_BYTES / pg) * pg;

		munmap(ubuf + off, pg);
		if (mmap(ubuf + off, pg, PROT_READ | PROT_WRITE,
			 MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			die("mmap MAP_FIXED: %s", strerror(errno));
		return;
	}
	}
	if (fix & FIX_SIZE)
		put32(arg, sz);
	if (ioctl(s->fd, cmd, arg) < 0)
		return;
	switch (op % NR_OPS) {
	case OP_OPEN:
		s->handle = ((struct engram_ioc_open *)arg)->handle;
		break;
	case OP_REG:
		s->buf_id = ((struct engram_ioc_reg *)arg)->buf_id;
		s->last_buf = s->buf_id;
		break;
	case OP_SUBMIT:
		s->ticket = ((struct engram_ioc_fetch *)arg)->ticket;
		break;
	}
}

static void ioctl_exec(const struct input *in)
{
	struct ioctl_state s = { .fd = open("/dev/engram_rdma", O_RDWR | O_CLOEXEC) };
	uint32_t i = 0;

	if (s.fd < 0)
		die("/dev/engram_rdma: %s", strerror(errno));
	while (i + 3 <= in->len) {
		uint8_t op = in->b[i], fix = in->b[i + 1], len = in->b[i + 2];

		i += 3;
		if (len > in->len - i)
			len = in->len - i;
		if (s.fd >= 0)
			ioctl_call(&s, op, fix, in->b + i, len);
		i += len;
	}
	if (s.fd >= 0)
		close(s.fd);
}

static size_t rec(uint8_t *b, uint8_t op, uint8_t fix, const void *arg, size_t len)
{
	b[0] = op;
	b[1] = fix;
	b[2] = len;
	memcpy(b + 3, arg, len);
	return 3 + len;
}

static void ioctl_setup(void)
{
	struct engram_ioc_open op = { .size = sizeof(op), .flags = ENGRAM_OPEN_BY_NAME };
	struct engram_ioc_reg rg = { .size = sizeof(rg), .length = 1u << 20 };
	struct engram_ioc_unreg ur = { .size = sizeof(ur) };
	struct engram_ioc_fetch f = { .size = sizeof(f), .nr_rows = 16,
				      .stride = ENGRAM_ROW_BYTES, .timeout_ns = 100000000 };
	struct engram_ioc_wait w = { .size = sizeof(w), .timeout_ns = 100000000 };
	struct engram_ioc_report rp = { .size = sizeof(rp), .rows = 3, .error = -ETIMEDOUT };
	uint8_t b[MAX_INPUT];
	size_t n;
	unsigned int i;
	int fd;

	if (!o.table)
		die("ioctl needs --table");
	pg = sysconf(_SC_PAGESIZE);
	ubuf = mmap(NULL, UBUF_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		    -1, 0);
	if (ubuf == MAP_FAILED)
		die("mmap: %s", strerror(errno));
	/* The table's size, from a real open. */
	fd = open("/dev/engram_rdma", O_RDWR);
	snprintf(op.name, sizeof(op.name), "%s", o.table);
	if (fd < 0 || ioctl(fd, ENGRAM_IOC_OPEN_TABLE, &op))
		die("OPEN_TABLE %s: %s", o.table, strerror(errno));
	table_rows = op.rows;
	close(fd);
	for (i = 0; i < NR_ROWS; i++) {
		rows_ok[i] = (uint32_t)(rnd64() % table_rows);
		rows_bad[i] = i % 7 ? rows_ok[i] : (uint32_t)(table_rows + rnd(3));
	}
	for (i = 0; i < ENGRAM_WIRE_MAX_RANGES + 2; i++) {
		ranges[i].offset = i * 65536;
		ranges[i].length = i % 5 ? 65536 : 32 * ENGRAM_ROW_BYTES + i;
	}
	memset(op.name, 0, sizeof(op.name));
	/* Seeds: open; open, register, fetch; ... submit, wait; ranges; report. */
	n = rec(b, OP_OPEN, FIX_ALL, &op, sizeof(op));
	seed_add(b, n);
	n += rec(b + n, OP_REG, FIX_ALL & ~FIX_TICKET, &rg, sizeof(rg));
	n += rec(b + n, OP_FETCH, FIX_ALL, &f, sizeof(f));
	seed_add(b, n);
	n += rec(b + n, OP_SUBMIT, FIX_ALL, &f, sizeof(f));
	n += rec(b + n, OP_WAIT, FIX_ALL, &w, sizeof(w));
	seed_add(b, n);
	f.flags = ENGRAM_FETCH_RANGES;
	f.nr_ranges = 3;
	n += rec(b + n, OP_FETCH, FIX_ALL, &f, sizeof(f));
	n += rec(b + n, OP_REPORT, FIX_ALL, &rp, sizeof(rp));
	n += rec(b + n, OP_UNREG, FIX_ALL, &ur, sizeof(ur));
	seed_add(b, n);
	f.flags = 0;
	n = rec(b, OP_OPEN, FIX_ALL, &op, sizeof(op));
	n += rec(b + n, OP_REG, FIX_ALL & ~FIX_TICKET, &rg, sizeof(rg));
	n += rec(b + n, OP_SUBMIT, FIX_ALL, &f, sizeof(f));
	n += rec(b + n, OP_REMAP, 0, "\0\0\0\0", 4);
	n += rec(b + n, OP_POLL, 0, "\5", 1);
	n += rec(b + n, OP_REOPEN, 0, "", 0);
	seed_add(b, n);
}

/* ---- surface: netlink ------------------------------------------------ */

static int nl_fd;
static uint16_t nl_family;
static uint32_t nl_seq;
static int nl_table_fd = -1;

/* Send one message; read its answers until the ack, an error or a bound. */
static void nl_roundtrip(const void *msg, size_t len)
{
	uint8_t buf[65536];
	unsigned int i;

	if (send(nl_fd, msg, len, 0) < 0)
		return;
	for (i = 0; i < 4096; i++) {
		ssize_t n = recv(nl_fd, buf, sizeof(buf), 0);
		const struct nlmsghdr *h = (void *)buf;
		size_t left = n > 0 ? (size_t)n : 0;

		if (n <= 0)
			return;
		for (; NLMSG_OK(h, left); h = NLMSG_NEXT(h, left))
			if (h->nlmsg_type == NLMSG_ERROR || h->nlmsg_type == NLMSG_DONE)
				return;
	}
}

static size_t nl_build(uint8_t *b, size_t size, uint16_t type, uint16_t flags,
		       uint8_t cmd, uint8_t version, const void *attrs, size_t alen)
{
	struct nlmsghdr *h = (void *)b;
	struct genlmsghdr *g = (void *)(b + NLMSG_HDRLEN);
	size_t len = NLMSG_HDRLEN + GENL_HDRLEN + alen;

	if (len > size)
		len = size, alen = size - NLMSG_HDRLEN - GENL_HDRLEN;
	memset(b, 0, NLMSG_HDRLEN + GENL_HDRLEN);
	h->nlmsg_len = len;
	h->nlmsg_type = type;
	h->nlmsg_flags = flags;
	h->nlmsg_seq = ++nl_seq;
	g->cmd = cmd;
	g->version = version;
	memcpy(b + NLMSG_HDRLEN + GENL_HDRLEN, attrs, alen);
	return len;
}

static size_t attr(uint8_t *b, uint16_t type, const void *v, size_t len)
{
	put16(b, 4 + len);
	put16(b + 2, type);
	memcpy(b + 4, v, len);
	memset(b + 4 + len, 0, NLA_ALIGN(len) - len);
	return 4 + NLA_ALIGN(len);
}

static void nl_setup(void)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK };
	struct timeval tv = { .tv_sec = o.slow, .tv_usec = 0 };
	uint8_t a[256], m[512], buf[8192];
	const struct nlmsghdr *h = (void *)buf;
	ssize_t n;
	size_t k;
	int one = 1;

	nl_fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_GENERIC);
	if (nl_fd < 0 || bind(nl_fd, (struct sockaddr *)&sa, sizeof(sa)))
		die("netlink socket: %s", strerror(errno));
	setsockopt(nl_fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(nl_fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
	k = attr(a, CTRL_ATTR_FAMILY_NAME, ENGRAM_GENL_NAME, sizeof(ENGRAM_GENL_NAME));
	k = nl_build(m, sizeof(m), GENL_ID_CTRL, NLM_F_REQUEST, CTRL_CMD_GETFAMILY, 1, a, k);
	if (send(nl_fd, m, k, 0) < 0 || (n = recv(nl_fd, buf, sizeof(buf), 0)) <= 0)
		die("resolving %s: %s", ENGRAM_GENL_NAME, strerror(errno));
	if (h->nlmsg_type == GENL_ID_CTRL) {
		const uint8_t *p = buf + NLMSG_HDRLEN + GENL_HDRLEN;
		const uint8_t *end = buf + (h->nlmsg_len < n ? h->nlmsg_len : (size_t)n);

		while (p + 4 <= end) {
			uint16_t alen = p[0] | p[1] << 8, t = p[2] | p[3] << 8;

			if (alen < 4 || p + alen > end)
				break;
			if ((t & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID && alen >= 6)
				nl_family = p[4] | p[5] << 8;
			p += NLA_ALIGN(alen);
		}
	}
	if (!nl_family)
		die("family %s not found", ENGRAM_GENL_NAME);
	if (o.path)
		nl_table_fd = open(o.path, O_RDONLY | O_CLOEXEC);
}

/*
 * A netlink input: cmd(1) flags(1) version(1), then the attributes as raw
 * bytes.  flags bit 0 asks for a dump.
 */
static void nl_exec(const struct input *in)
{
	uint8_t m[MAX_INPUT + 64];
	size_t k;

	if (in->len < 3)
		return;
	k = nl_build(m, sizeof(m), nl_family,
		     NLM_F_REQUEST | NLM_F_ACK | (in->b[1] & 1 ? NLM_F_DUMP : 0),
		     in->b[0], in->b[2], in->b + 3, in->len - 3);
	nl_roundtrip(m, k);
}

static void nl_seed(uint8_t cmd, bool dump, const uint8_t *attrs, size_t len)
{
	uint8_t b[MAX_INPUT];

	b[0] = cmd;
	b[1] = dump;
	b[2] = ENGRAM_GENL_VERSION;
	memcpy(b + 3, attrs, len);
	seed_add(b, 3 + len);
}

static void nl_seeds(void)
{
	uint8_t a[1024];
	uint64_t v64;
	uint32_t v32;
	size_t k;
	char url[128];

	nl_seed(ENGRAM_CMD_TABLE_GET, true, NULL, 0);
	nl_seed(ENGRAM_CMD_STATS_GET, false, NULL, 0);
	nl_seed(ENGRAM_CMD_STATS_GET, true, NULL, 0);
	nl_seed(ENGRAM_CMD_LISTEN_GET, true, NULL, 0);
	nl_seed(ENGRAM_CMD_LINK_GET, true, NULL, 0);
	nl_seed(ENGRAM_CMD_ALLOW_GET, true, NULL, 0);
	k = attr(a, ENGRAM_A_TABLE_NAME, "fz0", 4);
	nl_seed(ENGRAM_CMD_TABLE_GET, false, a, k);
	nl_seed(ENGRAM_CMD_TABLE_VERIFY, false, a, k);
	nl_seed(ENGRAM_CMD_TABLE_UNLOAD, false, a, k);
	nl_seed(ENGRAM_CMD_STATS_GET, false, a, k);
	if (o.path) {
		k += attr(a + k, ENGRAM_A_TABLE_PATH, o.path, strlen(o.path) + 1);
		nl_seed(ENGRAM_CMD_TABLE_LOAD, false, a, k);
		k = attr(a, ENGRAM_A_TABLE_NAME, "fz1", 4);
		v32 = nl_table_fd;
		k += attr(a + k, ENGRAM_A_TABLE_FD, &v32, 4);
		v64 = 1000;
		k += attr(a + k, ENGRAM_A_TABLE_ROWS, &v64, 8);
		v64 = 4096;
		k += attr(a + k, ENGRAM_A_TABLE_WEIGHT_OFFSET, &v64, 8);
		v32 = 256;
		k += attr(a + k, ENGRAM_A_TABLE_WEIGHT_BYTES, &v32, 4);
		v32 = 8;
		k += attr(a + k, ENGRAM_A_TABLE_SCALE_BYTES, &v32, 4);
		nl_seed(ENGRAM_CMD_TABLE_LOAD, false, a, k);
	}
	snprintf(url, sizeof(url), "tcp://%s:19001", o.addr);
	k = attr(a, ENGRAM_A_URL, url, strlen(url) + 1);
	nl_seed(ENGRAM_CMD_LISTEN_ADD, false, a, k);
	nl_seed(ENGRAM_CMD_LISTEN_DEL, false, a, k);
	nl_seed(ENGRAM_CMD_LINK_ADD, false, a, k);
	snprintf(url, sizeof(url), "rdma://%s:19002", o.addr);
	k = attr(a, ENGRAM_A_URL, url, strlen(url) + 1);
	nl_seed(ENGRAM_CMD_LISTEN_ADD, false, a, k);
	snprintf(url, sizeof(url), "rdma://[::1]:19003@%s", o.addr);
	k = attr(a, ENGRAM_A_URL, url, strlen(url) + 1);
	nl_seed(ENGRAM_CMD_LINK_ADD, false, a, k);
	v32 = 1;
	k = attr(a, ENGRAM_A_LINK_ID, &v32, 4);
	nl_seed(ENGRAM_CMD_LINK_GET, false, a, k);
	nl_seed(ENGRAM_CMD_LINK_DEL, false, a, k);
	nl_seed(ENGRAM_CMD_STATS_GET, true, a, k);
	k = attr(a, ENGRAM_A_ALLOW, "192.0.2.0/24", 13);
	nl_seed(ENGRAM_CMD_ALLOW_ADD, false, a, k);
	nl_seed(ENGRAM_CMD_ALLOW_DEL, false, a, k);
	/* A nest where none belongs. */
	k = attr(a + 4, ENGRAM_A_TABLE_NAME, "fz0", 4);
	k = attr(a, ENGRAM_A_STATS | NLA_F_NESTED, a + 4, k);
	nl_seed(ENGRAM_CMD_STATS_GET, false, a, k);
}

/* ---- surface: tcp ----------------------------------------------------- */

static struct sockaddr_storage tcp_sa;
static socklen_t tcp_salen;

static void tcp_params(struct engram_wire_params *p)
{
	memset(p, 0, sizeof(*p));
	p->version_min = 1;
	p->version_max = 1;
	p->max_rows = 4096;
	p->max_ranges = 16;
	p->max_inflight = 16;
	p->max_request_bytes = engram_wire_request_size(4096, 16);
}

static int tcp_dial(void)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = 200000 * o.slow };
	struct linger lg = { .l_onoff = 1, .l_linger = 0 };
	int fd = socket(tcp_sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	if (fd < 0)
		return -1;
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* No TIME_WAIT pile-up over a million connections. */
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
	if (connect(fd, (struct sockaddr *)&tcp_sa, tcp_salen)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* Read until the server closes or stays quiet; bounded. */
static void tcp_drain(int fd, unsigned int quiet_ms)
{
	uint8_t buf[65536];
	uint64_t end = now_ms() + 2000 * o.slow;
	struct pollfd pf = { .fd = fd, .events = POLLIN };

	while (now_ms() < end) {
		if (poll(&pf, 1, quiet_ms) <= 0)
			return;
		if (recv(fd, buf, sizeof(buf), MSG_DONTWAIT) <= 0)
			return;
	}
}

static void tcp_exec(const struct input *in)
{
	int fd = tcp_dial();
	size_t off = 0;

	if (fd < 0) {
		usleep(10000);	/* refused (a cap, or the listener restarting) */
		return;
	}
	while (off < in->len) {
		ssize_t n = send(fd, in->b + off, in->len - off, MSG_NOSIGNAL);

		if (n <= 0)
			break;
		off += n;
	}
	shutdown(fd, SHUT_WR);
	tcp_drain(fd, 5 * o.slow);
	close(fd);	/* a reset (SO_LINGER 0): the server's work ends at once */
	cover_settle(10 * o.slow);
}

static void tcp_setup(void)
{
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST };
	struct engram_wire_params local, answer;
	struct engram_wire_hdr_info h;
	uint8_t b[MAX_INPUT], *buf;
	struct addrinfo *ai;
	char why[160];
	uint8_t digest[ENGRAM_WIRE_DIGEST_PREFIX] = { 0 };
	uint64_t gen = 0, rows = 1000;
	size_t n, k;
	int fd, i;

	if (getaddrinfo(o.addr, o.port, &hints, &ai))
		die("bad address %s port %s", o.addr, o.port);
	memcpy(&tcp_sa, ai->ai_addr, ai->ai_addrlen);
	tcp_salen = ai->ai_addrlen;
	freeaddrinfo(ai);
	tcp_params(&local);
	n = engram_wire_hello_frame_encode(b, sizeof(b), &local);
	seed_add(b, n);

	/* One clean exchange: learn the table's digest and generation. */
	buf = malloc(ENGRAM_WIRE_MAX_CATALOG_BYTES);
	fd = tcp_dial();
	if (!buf || fd < 0)
		die("connect %s:%s: %s", o.addr, o.port, strerror(errno));
	{
		struct timeval tv = { .tv_sec = 5 * o.slow };

		setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	}
	if (send(fd, b, n, 0) != (ssize_t)n ||
	    recv(fd, buf, ENGRAM_WIRE_HELLO_FRAME_BYTES, MSG_WAITALL) !=
	    ENGRAM_WIRE_HELLO_FRAME_BYTES ||
	    engram_wire_hello_frame_decode(buf, ENGRAM_WIRE_HELLO_FRAME_BYTES, &answer,
					   why, sizeof(why)))
		die("hello exchange with %s:%s failed", o.addr, o.port);
	if (recv(fd, buf, ENGRAM_WIRE_HDR_BYTES, MSG_WAITALL) == ENGRAM_WIRE_HDR_BYTES &&
	    !engram_wire_hdr_check(buf, ENGRAM_WIRE_HDR_BYTES, &answer, false, true, &h,
				   why, sizeof(why)) &&
	    h.type == ENGRAM_WIRE_CATALOG && h.length <= ENGRAM_WIRE_MAX_CATALOG_BYTES &&
	    recv(fd, buf + 16, h.length - 16, MSG_WAITALL) == (ssize_t)h.length - 16) {
		struct engram_wire_catalog_view cat;
		struct engram_wire_table t;
		uint32_t j;

		if (!engram_wire_catalog_parse(buf, h.length, &answer, &cat, why, sizeof(why)))
			for (j = 0; j < cat.nr_entries; j++) {
				engram_wire_catalog_get(&cat, j, &t);
				if (o.table && strcmp(t.name, o.table))
					continue;
				memcpy(digest, t.sha256, sizeof(digest));
				gen = t.generation;
				rows = t.rows;
			}
	}
	close(fd);
	free(buf);

	/* hello + heartbeat + catalog request; hello + requests of each shape. */
	k = n;
	k += engram_wire_simple_encode(b + k, sizeof(b) - k, &answer, ENGRAM_WIRE_HEARTBEAT, 7);
	k += engram_wire_simple_encode(b + k, sizeof(b) - k, &answer,
				       ENGRAM_WIRE_CATALOG_REQUEST, 8);
	seed_add(b, k);
	for (i = 0; i < 4; i++) {
		struct engram_wire_req r = { .ticket = 9 + i, .generation = gen,
					     .nr_rows = 1 + i * 5, .stride = ENGRAM_ROW_BYTES,
					     .nr_ranges = 1 + i };
		uint32_t rws[16];
		int j, m;

		memcpy(r.digest, digest, sizeof(digest));
		for (j = 0; j < 16; j++)
			rws[j] = (uint32_t)((j * 7919ULL + i) % rows);
		if (i == 3)
			rws[2] = rows;	/* out of range */
		for (j = 0; j < r.nr_ranges; j++)
			r.ranges[j].length = ENGRAM_ROW_BYTES * 16;
		k = n;
		for (m = 0; m <= i; m++) {
			int w = engram_wire_req_build(b + k, sizeof(b) - k, &answer, &r, rws, NULL);

			if (w > 0)
				k += w;
			r.ticket += 100;
		}
		seed_add(b, k);
	}
}

/* ---- surface: rdma ---------------------------------------------------- */

/*
 * An RDMA input is one connection: hlen(1), then hlen bytes of REQ private
 * data (the hello, at most 56), then frames, each len(2) and len bytes,
 * sent as SENDs once the connection is up.  The server's RDMA WRITEs may
 * land in a registered buffer of ours whose address and rkey the seeds'
 * requests carry.
 */
#define RD_RX		16
#define RD_RX_BYTES	65536
#define RD_TX		8
#define RD_TX_BYTES	8192
#define RD_DATA_BYTES	(1u << 20)
#define RD_PRIV_MAX	56

static struct rdma_event_channel *rd_ch;
static struct rdma_addrinfo *rd_ai;
static struct ibv_context *rd_verbs;
static struct ibv_pd *rd_pd;
static struct ibv_cq *rd_cq;
static struct ibv_mr *rd_mr;
static uint8_t *rd_buf;

/* Where connections ended, for -v: resolve, qp, refused, up. */
static uint64_t rd_stage[4], rd_stage_ms[4];

static uint8_t *rd_data(void)
{
	return rd_buf + (size_t)RD_RX * RD_RX_BYTES + (size_t)RD_TX * RD_TX_BYTES;
}

/*
 * The next event of @id, within @ms; others (a late event of an earlier
 * id) are acknowledged and dropped.  Its private data, if any, is copied
 * to @priv.  Return: the event type, or -1 on timeout.
 */
static int rd_event(struct rdma_cm_id *id, unsigned int ms, uint8_t *priv, uint8_t *plen)
{
	uint64_t end = now_ms() + ms;
	struct pollfd pf = { .fd = rd_ch->fd, .events = POLLIN };

	while (now_ms() < end) {
		struct rdma_cm_event *ev;
		int type;

		if (poll(&pf, 1, (int)(end - now_ms()) + 1) <= 0)
			continue;
		if (rdma_get_cm_event(rd_ch, &ev))
			continue;
		type = ev->event;
		if (ev->id != id) {
			rdma_ack_cm_event(ev);
			continue;
		}
		if (priv && plen) {
			*plen = ev->param.conn.private_data_len < RD_PRIV_MAX ?
				ev->param.conn.private_data_len : RD_PRIV_MAX;
			if (ev->param.conn.private_data)
				memcpy(priv, ev->param.conn.private_data, *plen);
			else
				*plen = 0;
		}
		rdma_ack_cm_event(ev);
		return type;
	}
	return -1;
}

static void rd_drain_cq(unsigned int ms)
{
	uint64_t end = now_ms() + ms;
	struct ibv_wc wc[16];

	do {
		if (rd_cq && ibv_poll_cq(rd_cq, 16, wc) > 0)
			continue;
		if (!ms)
			return;
		usleep(500);
	} while (now_ms() < end);
}

/* One connection up to ESTABLISHED; NULL when it did not get there. */
static struct rdma_cm_id *rd_connect(const uint8_t *hello, uint8_t hlen, uint8_t *ans,
				     uint8_t *alen)
{
	struct ibv_qp_init_attr qa = {
		.cap = { .max_send_wr = RD_TX, .max_recv_wr = RD_RX, .max_send_sge = 1,
			 .max_recv_sge = 1 },
		.qp_type = IBV_QPT_RC,
	};
	struct rdma_conn_param cp = { .retry_count = 2, .rnr_retry_count = 7 };
	struct rdma_cm_id *id;
	unsigned int i, ms = 1000 * o.slow, stage = 0;
	uint64_t t0 = now_ms();

	if (rdma_create_id(rd_ch, &id, NULL, RDMA_PS_TCP))
		return NULL;
	if (rdma_resolve_addr(id, NULL, rd_ai->ai_dst_addr, ms) ||
	    rd_event(id, ms, NULL, NULL) != RDMA_CM_EVENT_ADDR_RESOLVED ||
	    rdma_resolve_route(id, ms) ||
	    rd_event(id, ms, NULL, NULL) != RDMA_CM_EVENT_ROUTE_RESOLVED)
		goto fail;
	if (!rd_pd) {
		size_t bytes = (size_t)RD_RX * RD_RX_BYTES + (size_t)RD_TX * RD_TX_BYTES +
			       RD_DATA_BYTES;

		rd_verbs = id->verbs;
		rd_pd = ibv_alloc_pd(rd_verbs);
		rd_cq = rd_pd ? ibv_create_cq(rd_verbs, 4 * (RD_RX + RD_TX), NULL, NULL, 0) : NULL;
		rd_buf = rd_cq ? calloc(1, bytes) : NULL;
		rd_mr = rd_buf ? ibv_reg_mr(rd_pd, rd_buf, bytes, IBV_ACCESS_LOCAL_WRITE |
					    IBV_ACCESS_REMOTE_WRITE) : NULL;
		if (!rd_mr)
			die("rdma resources: %s", strerror(errno));
	}
	stage = 1;
	if (id->verbs != rd_verbs)
		goto fail;
	qa.send_cq = rd_cq;
	qa.recv_cq = rd_cq;
	if (rdma_create_qp(id, rd_pd, &qa))
		goto fail;
	for (i = 0; i < RD_RX; i++) {
		struct ibv_sge sge = { .addr = (uintptr_t)rd_buf + (size_t)i * RD_RX_BYTES,
				       .length = RD_RX_BYTES, .lkey = rd_mr->lkey };
		struct ibv_recv_wr wr = { .wr_id = i, .sg_list = &sge, .num_sge = 1 }, *bad;

		if (ibv_post_recv(id->qp, &wr, &bad))
			goto fail;
	}
	cp.private_data = hello;
	cp.private_data_len = hlen;
	cp.initiator_depth = hlen & 1;
	cp.responder_resources = hlen & 1;
	stage = 2;
	if (rdma_connect(id, &cp) ||
	    rd_event(id, ms, ans, alen) != RDMA_CM_EVENT_ESTABLISHED)
		goto fail;
	rd_stage[3]++;
	rd_stage_ms[3] += now_ms() - t0;
	return id;
fail:
	rd_stage[stage]++;
	rd_stage_ms[stage] += now_ms() - t0;
	if (id->qp)
		rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rd_drain_cq(0);
	return NULL;
}

static void rd_close(struct rdma_cm_id *id)
{
	rdma_disconnect(id);
	rd_event(id, 200 * o.slow, NULL, NULL);
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
	rd_drain_cq(0);
}

static void rd_send(struct rdma_cm_id *id, unsigned int slot, const uint8_t *f, uint32_t len)
{
	uint8_t *b = rd_buf + (size_t)RD_RX * RD_RX_BYTES + (size_t)slot * RD_TX_BYTES;
	struct ibv_sge sge = { .addr = (uintptr_t)b, .length = len, .lkey = rd_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 1000 + slot, .sg_list = &sge, .num_sge = 1,
				  .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED }, *bad;

	memcpy(b, f, len);
	ibv_post_send(id->qp, &wr, &bad);
}

static void rd_exec(const struct input *in)
{
	struct rdma_cm_id *id;
	uint32_t i, hlen, slot = 0;

	if (!in->len)
		return;
	hlen = in->b[0] < in->len - 1 ? in->b[0] : in->len - 1;
	if (hlen > RD_PRIV_MAX)
		hlen = RD_PRIV_MAX;
	id = rd_connect(in->b + 1, hlen, NULL, NULL);
	if (!id) {
		cover_settle(5 * o.slow);
		return;
	}
	for (i = 1 + hlen; i + 2 <= in->len && slot < RD_TX; slot++) {
		uint32_t len = in->b[i] | in->b[i + 1] << 8;

		i += 2;
		if (len > in->len - i)
			len = in->len - i;
		if (len > RD_TX_BYTES)
			len = RD_TX_BYTES;
		rd_send(id, slot, in->b + i, len);
		i += len;
	}
	rd_drain_cq(20 * o.slow);
	rd_close(id);
	cover_settle(10 * o.slow);
}

static size_t rd_frame(uint8_t *b, const void *f, size_t len)
{
	put16(b, len);
	memcpy(b + 2, f, len);
	return 2 + len;
}

static void rd_setup(void)
{
	struct rdma_addrinfo hints = { .ai_port_space = RDMA_PS_TCP };
	struct engram_wire_params local, answer;
	uint8_t hello[ENGRAM_WIRE_HELLO_BYTES], ans[RD_PRIV_MAX], alen = 0;
	uint8_t b[MAX_INPUT], f[RD_TX_BYTES], digest[ENGRAM_WIRE_DIGEST_PREFIX] = { 0 };
	uint64_t gen = 0, rows = 1000, end;
	struct rdma_cm_id *id;
	char why[160];
	size_t k, h;
	int i, n;

	rd_ch = rdma_create_event_channel();
	if (!rd_ch || rdma_getaddrinfo(o.addr, o.port, &hints, &rd_ai))
		die("rdma %s:%s: %s", o.addr, o.port, strerror(errno));
	tcp_params(&local);
	engram_wire_hello_encode(hello, sizeof(hello), &local);
	b[0] = sizeof(hello);
	memcpy(b + 1, hello, sizeof(hello));
	h = 1 + sizeof(hello);
	seed_add(b, h);

	/* One clean connection: the server's answer, then its CATALOG. */
	id = rd_connect(hello, sizeof(hello), ans, &alen);
	if (!id || engram_wire_hello_decode(ans, alen, &answer, why, sizeof(why)))
		die("a clean RDMA connection to %s:%s failed", o.addr, o.port);
	for (end = now_ms() + 5000 * o.slow; now_ms() < end;) {
		struct ibv_wc wc;
		struct engram_wire_catalog_view cat;
		struct engram_wire_table t;
		uint32_t j;

		if (ibv_poll_cq(rd_cq, 1, &wc) <= 0) {
			usleep(1000);
			continue;
		}
		if (wc.status != IBV_WC_SUCCESS || wc.opcode != IBV_WC_RECV)
			continue;
		if (engram_wire_catalog_parse(rd_buf + wc.wr_id * RD_RX_BYTES, wc.byte_len,
					      &answer, &cat, why, sizeof(why)))
			continue;
		for (j = 0; j < cat.nr_entries; j++) {
			engram_wire_catalog_get(&cat, j, &t);
			if (o.table && strcmp(t.name, o.table))
				continue;
			memcpy(digest, t.sha256, sizeof(digest));
			gen = t.generation;
			rows = t.rows;
		}
		break;
	}
	rd_close(id);

	k = h;
	n = engram_wire_simple_encode(f, sizeof(f), &answer, ENGRAM_WIRE_HEARTBEAT, 7);
	k += rd_frame(b + k, f, n);
	n = engram_wire_simple_encode(f, sizeof(f), &answer, ENGRAM_WIRE_CATALOG_REQUEST, 8);
	k += rd_frame(b + k, f, n);
	seed_add(b, k);
	for (i = 0; i < 4; i++) {
		struct engram_wire_req r = { .ticket = 9 + i, .generation = gen,
					     .nr_rows = 1 + i * 5, .stride = ENGRAM_ROW_BYTES,
					     .nr_ranges = 1 + i };
		uint32_t rws[16];
		int j, m;

		memcpy(r.digest, digest, sizeof(digest));
		for (j = 0; j < 16; j++)
			rws[j] = (uint32_t)((j * 7919ULL + i) % rows);
		if (i == 3)
			rws[2] = rows;
		for (j = 0; j < r.nr_ranges; j++) {
			r.ranges[j].addr = (uintptr_t)rd_data() + (uint64_t)j * 65536;
			r.ranges[j].rkey = rd_mr->rkey;
			r.ranges[j].length = ENGRAM_ROW_BYTES * 16;
		}
		k = h;
		for (m = 0; m <= i; m++) {
			n = engram_wire_req_build(f, sizeof(f), &answer, &r, rws, NULL);
			if (n > 0)
				k += rd_frame(b + k, f, n);
			r.ticket += 100;
		}
		seed_add(b, k);
	}
}

/* ---- the loop ------------------------------------------------------- */

static void (*exec_fn)(const struct input *);

static void save_ring(const char *why)
{
	char path[512];
	FILE *f;
	uint64_t i;

	if (!o.save)
		return;
	mkdir(o.save, 0755);
	snprintf(path, sizeof(path), "%s/%s-%d.kfz", o.save, o.surface, (int)getpid());
	f = fopen(path, "w");
	if (!f)
		return;
	/* Oldest first: replaying the file reproduces the order they ran in. */
	for (i = ring_n > RING ? ring_n - RING : 0; i < ring_n; i++) {
		const struct input *in = &ring[i % RING];

		fwrite(&in->len, sizeof(in->len), 1, f);
		fwrite(in->b, 1, in->len, f);
	}
	fclose(f);
	fprintf(stderr, "kfuzz: %s: the inputs before it are in %s\n", why, path);
}

static bool run_one(const struct input *in)
{
	ring[ring_n++ % RING] = *in;
	cover_reset();
	exec_fn(in);
	return kmsg_report();
}

static unsigned int replay(const char *path, uint64_t *count)
{
	FILE *f = fopen(path, "r");
	struct input in;
	unsigned int bad = 0;

	if (!f)
		die("%s: %s", path, strerror(errno));
	while (fread(&in.len, sizeof(in.len), 1, f) == 1) {
		if (in.len > MAX_INPUT || fread(in.b, 1, in.len, f) != in.len)
			die("%s: truncated or corrupt", path);
		(*count)++;
		if (run_one(&in)) {
			bad++;
			break;
		}
	}
	fclose(f);
	return bad;
}

static void write_pcs(void)
{
	FILE *f;
	unsigned int i;

	if (!o.pcs)
		return;
	f = fopen(o.pcs, "w");
	if (!f)
		die("%s: %s", o.pcs, strerror(errno));
	for (i = 0; i < PC_SLOTS; i++)
		if (pcs[i])
			fprintf(f, "0x%" PRIx64 "\n", pcs[i]);
	fclose(f);
}

static void usage(void)
{
	fprintf(stderr, "usage: kfuzz ioctl|netlink|tcp|rdma [--inputs N] [--seconds S] "
		"[--seed S] [--pcs FILE] [--save DIR] [--replay FILE] [--table NAME] "
		"[--path FILE] [--addr IP] [--port N] [--slow N] [-v]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	uint64_t t0, ran = 0, last_new = 0;
	unsigned int i, findings = 0;

	if (argc < 2)
		usage();
	o.surface = argv[1];
	for (i = 2; i < (unsigned int)argc; i++) {
		const char *a = argv[i], *v = i + 1 < (unsigned int)argc ? argv[i + 1] : NULL;

		if (!strcmp(a, "-v")) {
			o.verbose = true;
			continue;
		}
		if (!v)
			usage();
		i++;
		if (!strcmp(a, "--inputs"))
			o.inputs = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--seconds"))
			o.seconds = strtoul(v, NULL, 0);
		else if (!strcmp(a, "--seed"))
			o.seed = strtoull(v, NULL, 0);
		else if (!strcmp(a, "--pcs"))
			o.pcs = v;
		else if (!strcmp(a, "--save"))
			o.save = v;
		else if (!strcmp(a, "--replay") && o.nr_replay < 16)
			o.replay[o.nr_replay++] = v;
		else if (!strcmp(a, "--table"))
			o.table = v;
		else if (!strcmp(a, "--path"))
			o.path = v;
		else if (!strcmp(a, "--addr"))
			o.addr = v;
		else if (!strcmp(a, "--port"))
			o.port = v;
		else if (!strcmp(a, "--slow"))
			o.slow = strtoul(v, NULL, 0) ? strtoul(v, NULL, 0) : 1;
		else
			usage();
	}
	rng_state = o.seed * 0x9e3779b97f4a7c15ULL + 1;
	corpus = calloc(MAX_CORPUS, sizeof(*corpus));
	if (!corpus)
		die("out of memory");

	/* Setup talks to the module before coverage is on: it is not an input. */
	if (!strcmp(o.surface, "ioctl")) {
		ioctl_setup();
		exec_fn = ioctl_exec;
	} else if (!strcmp(o.surface, "netlink")) {
		nl_setup();
		nl_seeds();
		exec_fn = nl_exec;
	} else if (!strcmp(o.surface, "tcp")) {
		tcp_setup();
		exec_fn = tcp_exec;
	} else if (!strcmp(o.surface, "rdma")) {
		rd_setup();
		exec_fn = rd_exec;
	} else {
		usage();
	}
	kmsg_open();
	cover_start();
	t0 = now_ms();

	for (i = 0; i < o.nr_replay && !findings; i++)
		findings += replay(o.replay[i], &ran);
	/* The seeds run first, and keep their place only if they reach something. */
	{
		unsigned int nseeds = nr_corpus, kept = 0;

		for (i = 0; i < nseeds && !findings; i++) {
			struct input in = corpus[i];

			ran++;
			if (run_one(&in)) {
				findings++;
				break;
			}
			if (cover_area(cov_self) + cover_area(cov_remote) || !kept)
				corpus[kept++] = in;
		}
		nr_corpus = kept;
	}
	while (!findings && ran < o.inputs && now_ms() - t0 < o.seconds * 1000ULL) {
		struct input in = corpus[rnd(nr_corpus)];
		unsigned int m = 1 + rnd(4);

		while (m--)
			mutate_one(&in);
		ran++;
		if (run_one(&in)) {
			findings++;
			break;
		}
		if (cover_area(cov_self) + cover_area(cov_remote)) {
			corpus_add(&in);
			last_new = ran;
		}
		if (o.verbose && exec_fn == rd_exec && !(ran % 100))
			fprintf(stderr, "kfuzz rdma: %" PRIu64 " inputs: resolve %" PRIu64 "/%" PRIu64
				" ms, qp %" PRIu64 "/%" PRIu64 " ms, refused %" PRIu64 "/%" PRIu64
				" ms, up %" PRIu64 "/%" PRIu64 " ms\n", ran, rd_stage[0],
				rd_stage_ms[0], rd_stage[1], rd_stage_ms[1], rd_stage[2],
				rd_stage_ms[2], rd_stage[3], rd_stage_ms[3]);
		if (o.verbose && !(ran % 1000))
			fprintf(stderr, "kfuzz %s: %" PRIu64 " inputs, corpus %u, edges %" PRIu64
				", pcs %" PRIu64 ", last new at %" PRIu64 "\n", o.surface, ran,
				nr_corpus, nr_edges, nr_pcs, last_new);
	}
	if (findings) {
		fprintf(stderr, "kfuzz: finding: %s\n", finding);
		save_ring("finding");
	}
	write_pcs();
	printf("kfuzz %s: inputs %" PRIu64 " corpus %u edges %" PRIu64 " pcs %" PRIu64
	       " findings %u seconds %.1f\n", o.surface, ran, nr_corpus, nr_edges, nr_pcs,
	       findings, (now_ms() - t0) / 1000.0);
	fflush(stdout);
	/* The remote KCOV thread never returns: leave without joining it. */
	_exit(findings ? 1 : 0);
}
