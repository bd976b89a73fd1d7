// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl_bad: malformed and misused ioctls on /dev/engram_rdma, sent raw
 * (not through libengram) so that any struct can be built, and the exact
 * errno of each checked against kmod/chardev.c and kmod/ubuf.c.
 *
 *   ioctl_bad --table NAME --rows-total N [--dev PATH] [--barrier-rows N]
 *
 * --barrier-rows (4096): the rows of the fetch that must end within the
 * 2 s UNREG_BUF waits for it; the debug kernel moves rows several times
 * slower, so its runs ask for fewer.
 *
 * NAME must be a ready table of N rows on a link that is up.  Prints one
 * TAP line per case ("ok N - desc", or "not ok N - desc: got errno X want
 * Y"), "# ..." diagnostics, and the plan "1..N" last; exits 0 only when
 * every case passed (1 otherwise, 2 for a usage or setup error).
 *
 * Cases, in order: the size field of every struct (below VER0, above
 * PAGE_SIZE, a longer struct with a nonzero or a zero tail) and the size in
 * the command number (ignored), unknown and misdirected commands; bad
 * struct pointers (NULL, unmapped, cut by an unmapped page, read-only);
 * flags, reserved fields and names of OPEN_TABLE; REG_BUF ranges, mappings
 * and RLIMIT_MEMLOCK (a child without CAP_IPC_LOCK), with mm->pinned_vm
 * (VmPin) checked after each refusal; UNREG_BUF; every refusal of
 * FETCH/SUBMIT, plain and with ENGRAM_FETCH_RANGES, and ROW_OUT_OF_RANGE
 * from the server; WAIT and poll(), WAIT timeouts (EAGAIN) and a signal
 * during FETCH (EINTR, then WAIT); a buffer unregistered (UNREG_BUF returns
 * once the fetch ended) or unmapped under a fetch in flight, a second fd closed with fetches in flight, and the
 * per-fd limits (1,024 buffers, 4,096 tables); REPORT's size, flags,
 * reserved fields, rows, error and handle.  A normal fetch (two
 * fetches of the same rows at different strides and offsets: equal rows,
 * untouched gaps) is checked between the groups and at the end.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/capability.h>
#include <linux/engram_rdma.h>

#define ROW		ENGRAM_ROW_BYTES
#define TMO_NS		(60ULL * 1000000000ULL)	/* every fetch's deadline */
#define NV		64			/* rows of a verification fetch */
#define VGAP		40			/* stride - ROW of the second one */
#define VOFF		7			/* its offset after the first */
#define ARRAY_SIZE(a)	(sizeof(a) / sizeof((a)[0]))
#define SIZE_MASK	((unsigned long)_IOC_SIZEMASK << _IOC_SIZESHIFT)
#define DIR_MASK	((unsigned long)_IOC_DIRMASK << _IOC_DIRSHIFT)

static int t_no, t_fail;
static size_t pg;
static const char *dev_path = "/dev/engram_rdma";
static const char *table_name;
static uint64_t rows_total;
static int dev_fd = -1;
static uint32_t handle, max_rows, link_id;
static uint32_t barrier_rows = 4096;	/* ends within UNREG_BUF's wait */
static uint8_t table_sha[ENGRAM_SHA256_LEN];
static uint64_t seed = 0x1234567;

/* A registered buffer of dev_fd. */
struct rbuf {
	uint8_t *p;
	size_t len;
	uint32_t id;
};

static struct rbuf vb;		/* verification fetches */
static struct rbuf sb, sb2;	/* 64 KiB each */
static struct rbuf big;		/* max_rows rows */
static uint8_t *hole;		/* an unmapped page */
static uint8_t *edge;		/* the mapped page just before it */
static uint8_t *argpg;		/* two pages for struct arguments */
static uint32_t *rowbuf;	/* max_rows + 1 valid indices */

/* ------------------------------------------------------------------ */
/* TAP                                                                 */

static const struct {
	const char *name;
	int err;
} errnames[] = {
	{ "EPERM", EPERM }, { "ENOENT", ENOENT }, { "EINTR", EINTR }, { "EIO", EIO },
	{ "E2BIG", E2BIG }, { "EBADF", EBADF }, { "EAGAIN", EAGAIN }, { "ENOMEM", ENOMEM },
	{ "EACCES", EACCES }, { "EFAULT", EFAULT }, { "EBUSY", EBUSY }, { "ENODEV", ENODEV },
	{ "EINVAL", EINVAL }, { "EMFILE", EMFILE }, { "ENOTTY", ENOTTY }, { "ENOSPC", ENOSPC },
	{ "ERANGE", ERANGE }, { "ENOTCONN", ENOTCONN }, { "ETIMEDOUT", ETIMEDOUT },
	{ "ECONNRESET", ECONNRESET }, { "ESTALE", ESTALE }, { "EPROTO", EPROTO },
	{ "ESHUTDOWN", ESHUTDOWN }, { "EOVERFLOW", EOVERFLOW }, { "ENXIO", ENXIO },
	{ "ETIME", ETIME }, { "ENOSYS", ENOSYS }, { "EOPNOTSUPP", EOPNOTSUPP },
};

static const char *errname(int err)
{
	static char other[4][32];
	static int n;
	size_t i;

	if (err < 0)
		err = -err;
	if (!err)
		return "0 (success)";
	n = (n + 1) % 4;
	for (i = 0; i < ARRAY_SIZE(errnames); i++)
		if (errnames[i].err == err) {
			snprintf(other[n], sizeof(other[n]), "%s (%d)", errnames[i].name, err);
			return other[n];
		}
	snprintf(other[n], sizeof(other[n]), "%d", err);
	return other[n];
}

__attribute__((format(printf, 1, 2)))
static void diag(const char *fmt, ...)
{
	va_list ap;

	fputs("# ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
}

__attribute__((format(printf, 2, 3)))
static bool tap(bool pass, const char *fmt, ...)
{
	va_list ap;

	t_no++;
	if (!pass)
		t_fail++;
	printf("%sok %d - ", pass ? "" : "not ", t_no);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	return pass;
}

/* One case: a call gave @got (0 or an errno) and @want was expected. */
__attribute__((format(printf, 3, 4)))
static bool expect(int got, int want, const char *fmt, ...)
{
	char desc[320];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(desc, sizeof(desc), fmt, ap);
	va_end(ap);
	if (got == want)
		return tap(true, "%s", desc);
	return tap(false, "%s: got errno %s want %s", desc, errname(got), errname(want));
}

__attribute__((format(printf, 1, 2), noreturn))
static void bail(const char *fmt, ...)
{
	va_list ap;

	fputs("Bail out! ioctl_bad: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf("\n1..%d\n", t_no);
	exit(2);
}

/* ------------------------------------------------------------------ */
/* Helpers                                                             */

static int xio(int fd, unsigned long cmd, void *arg)
{
	return ioctl(fd, cmd, arg) < 0 ? errno : 0;
}

static uint64_t rnd(void)
{
	uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void *map(size_t len, int prot)
{
	void *p = mmap(NULL, len, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		bail("mmap of %zu bytes: %s", len, strerror(errno));
	return p;
}

static uint64_t ptr(const void *p)
{
	return (uint64_t)(uintptr_t)p;
}

/* mm->pinned_vm of this process, in kB (VmPin in /proc/self/status). */
static long vm_pin(void)
{
	char line[256];
	long v = -1;
	FILE *f = fopen("/proc/self/status", "r");

	if (!f)
		return -1;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "VmPin: %ld kB", &v) == 1)
			break;
	fclose(f);
	return v;
}

static struct engram_ioc_open mk_open(void)
{
	struct engram_ioc_open a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.flags = ENGRAM_OPEN_BY_NAME;
	memcpy(a.name, table_name, strlen(table_name));
	return a;
}

static struct engram_ioc_reg mk_reg(const void *p, uint64_t len)
{
	struct engram_ioc_reg a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.addr = ptr(p);
	a.length = len;
	return a;
}

static struct engram_ioc_unreg mk_unreg(uint32_t id)
{
	struct engram_ioc_unreg a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.buf_id = id;
	return a;
}

static struct engram_ioc_fetch mk_fetch(const uint32_t *rows, uint32_t n, uint32_t buf_id,
					uint64_t off)
{
	struct engram_ioc_fetch a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.handle = handle;
	a.nr_rows = n;
	a.rows = ptr(rows);
	a.buf_id = buf_id;
	a.offset = off;
	a.stride = ROW;
	a.timeout_ns = TMO_NS;
	return a;
}

static struct engram_ioc_fetch mk_rfetch(const uint32_t *rows, uint32_t n,
					 const struct engram_ioc_range *r, uint32_t nr)
{
	struct engram_ioc_fetch a = mk_fetch(rows, n, 0, 0);

	a.flags = ENGRAM_FETCH_RANGES;
	a.ranges = ptr(r);
	a.nr_ranges = nr;
	return a;
}

static struct engram_ioc_wait mk_wait(uint64_t ticket)
{
	struct engram_ioc_wait a;

	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.ticket = ticket;
	return a;
}

static int reg_fd(int fd, const void *p, uint64_t len, uint32_t *id)
{
	struct engram_ioc_reg a = mk_reg(p, len);
	int e = xio(fd, ENGRAM_IOC_REG_BUF, &a);

	if (!e && id)
		*id = a.buf_id;
	return e;
}

static int unreg_fd(int fd, uint32_t id)
{
	struct engram_ioc_unreg a = mk_unreg(id);

	return xio(fd, ENGRAM_IOC_UNREG_BUF, &a);
}

static void reg_or_bail(struct rbuf *b, size_t len)
{
	int e;

	b->len = len;
	b->p = map(len, PROT_READ | PROT_WRITE);
	e = reg_fd(dev_fd, b->p, len, &b->id);
	if (e)
		bail("REG_BUF of %zu bytes: %s", len, strerror(e));
}

static int submit(struct engram_ioc_fetch *a)
{
	return xio(dev_fd, ENGRAM_IOC_SUBMIT, a);
}

static int wait_ticket(uint64_t ticket, struct engram_ioc_wait *out)
{
	struct engram_ioc_wait a = mk_wait(ticket);
	int e = xio(dev_fd, ENGRAM_IOC_WAIT, &a);

	if (out)
		*out = a;
	return e;
}

/* Reap whatever is still outstanding on dev_fd; returns how many. */
static int drain(void)
{
	int n = 0;

	while (!wait_ticket(0, NULL))
		n++;
	return n;
}

static void fill_rows(uint32_t *r, uint32_t n)
{
	uint32_t i;

	for (i = 0; i < n; i++)
		r[i] = (uint32_t)(rnd() % rows_total);
	r[0] = 0;
	if (n > 1)
		r[n - 1] = (uint32_t)(rows_total - 1);
	if (n > 4)
		r[n / 2] = r[1];
}

/*
 * A normal fetch works: the same NV rows fetched twice, at stride ROW and
 * at stride ROW + VGAP after an odd offset, give the same bytes, repeated
 * indices give the same row, and nothing between the rows is written.
 */
static bool good_fetch(const char *when)
{
	uint32_t rows[NV];
	uint64_t boff = (uint64_t)NV * ROW + VOFF;
	struct engram_ioc_fetch a, b;
	const uint8_t canary = 0xa5;
	uint8_t *x = vb.p, *y = vb.p + boff;
	int e1, e2;
	size_t i, k;
	bool ok = true, all_canary = true;

	fill_rows(rows, NV);
	memset(vb.p, canary, vb.len);
	a = mk_fetch(rows, NV, vb.id, 0);
	b = mk_fetch(rows, NV, vb.id, boff);
	b.stride = ROW + VGAP;
	e1 = xio(dev_fd, ENGRAM_IOC_FETCH, &a);
	e2 = xio(dev_fd, ENGRAM_IOC_FETCH, &b);
	if (e1 || e2) {
		diag("good fetch %s: %s / %s (wire_status %u %u)", when, errname(e1),
		     errname(e2), a.wire_status, b.wire_status);
		return tap(false, "a normal fetch works %s: got errno %s want 0", when,
			   errname(e1 ? e1 : e2));
	}
	for (i = 0; i < NV; i++) {
		if (memcmp(x + i * ROW, y + i * (ROW + VGAP), ROW)) {
			diag("row %zu (index %u) differs between the two fetches", i, rows[i]);
			ok = false;
		}
		for (k = 0; k < ROW; k++)
			if (x[i * ROW + k] != canary)
				all_canary = false;
		if (i + 1 < NV)
			for (k = ROW; k < ROW + VGAP; k++)
				if (y[i * (ROW + VGAP) + k] != canary) {
					diag("gap byte %zu after row %zu written", k - ROW, i);
					ok = false;
					break;
				}
	}
	if (memcmp(x + 1 * ROW, x + (NV / 2) * ROW, ROW)) {
		diag("a repeated index gave two different rows");
		ok = false;
	}
	for (k = (size_t)NV * ROW; k < boff; k++)
		if (vb.p[k] != canary)
			ok = false;
	for (k = boff + (NV - 1) * (ROW + VGAP) + ROW; k < vb.len; k++)
		if (vb.p[k] != canary) {
			diag("byte %zu after the last row written", k);
			ok = false;
			break;
		}
	if (all_canary) {
		diag("no row was written");
		ok = false;
	}
	return tap(ok, "a normal fetch works %s (two strides agree, gaps untouched)", when);
}

/* ------------------------------------------------------------------ */
/* The size field                                                      */

/*
 * Each ioctl: how to build a valid argument (prep, into a zeroed page)
 * and how to clean up after a call with it (done, with the call's errno).
 */
struct ioc {
	const char *name;
	unsigned long cmd;
	uint32_t ksize, ver0;
	bool writes_back;
	void (*prep)(void *a);
	void (*done)(void *a, int err);
};

static uint32_t prep_id;
static uint64_t prep_ticket;
static uint32_t vrows[8];

static void prep_open(void *p)
{
	struct engram_ioc_open a = mk_open();

	memcpy(p, &a, sizeof(a));
}

static void done_open(void *p, int err)
{
	(void)p;
	(void)err;
}

static void prep_reg(void *p)
{
	struct engram_ioc_reg a = mk_reg(sb.p, pg);

	memcpy(p, &a, sizeof(a));
}

static void done_reg(void *p, int err)
{
	struct engram_ioc_reg a;

	memcpy(&a, p, sizeof(a));
	if (!err && unreg_fd(dev_fd, a.buf_id))
		diag("cleanup: UNREG_BUF %u failed", a.buf_id);
}

static void prep_unreg(void *p)
{
	struct engram_ioc_unreg a;

	prep_id = 0;
	if (reg_fd(dev_fd, sb.p, pg, &prep_id))
		diag("prep: REG_BUF failed");
	a = mk_unreg(prep_id);
	memcpy(p, &a, sizeof(a));
}

static void done_unreg(void *p, int err)
{
	(void)p;
	if (err && unreg_fd(dev_fd, prep_id))
		diag("cleanup: UNREG_BUF %u failed", prep_id);
}

static void prep_fetch(void *p)
{
	struct engram_ioc_fetch a;

	fill_rows(vrows, ARRAY_SIZE(vrows));
	a = mk_fetch(vrows, ARRAY_SIZE(vrows), sb.id, 0);
	memcpy(p, &a, sizeof(a));
}

static void done_submit(void *p, int err)
{
	struct engram_ioc_fetch a;
	int e;

	memcpy(&a, p, sizeof(a));
	e = err ? 0 : wait_ticket(a.ticket, NULL);
	if (e)
		diag("cleanup: WAIT for ticket %" PRIu64 ": %s", (uint64_t)a.ticket, errname(e));
}

static void done_fetch(void *p, int err)
{
	(void)p;
	(void)err;
}

static void prep_wait(void *p)
{
	struct engram_ioc_fetch f;
	struct engram_ioc_wait a;

	fill_rows(vrows, ARRAY_SIZE(vrows));
	f = mk_fetch(vrows, ARRAY_SIZE(vrows), sb.id, 0);
	prep_ticket = 0;
	if (submit(&f))
		diag("prep: SUBMIT failed");
	else
		prep_ticket = f.ticket;
	a = mk_wait(prep_ticket);
	memcpy(p, &a, sizeof(a));
}

static void done_wait(void *p, int err)
{
	(void)p;
	if (err)
		wait_ticket(prep_ticket, NULL);
}

static const struct ioc iocs[] = {
	{ "OPEN_TABLE", ENGRAM_IOC_OPEN_TABLE, sizeof(struct engram_ioc_open),
	  ENGRAM_OPEN_SIZE_VER0, true, prep_open, done_open },
	{ "REG_BUF", ENGRAM_IOC_REG_BUF, sizeof(struct engram_ioc_reg),
	  ENGRAM_REG_SIZE_VER0, true, prep_reg, done_reg },
	{ "UNREG_BUF", ENGRAM_IOC_UNREG_BUF, sizeof(struct engram_ioc_unreg),
	  ENGRAM_UNREG_SIZE_VER0, false, prep_unreg, done_unreg },
	{ "SUBMIT", ENGRAM_IOC_SUBMIT, sizeof(struct engram_ioc_fetch),
	  ENGRAM_FETCH_SIZE_VER0, true, prep_fetch, done_submit },
	{ "WAIT", ENGRAM_IOC_WAIT, sizeof(struct engram_ioc_wait),
	  ENGRAM_WAIT_SIZE_VER0, true, prep_wait, done_wait },
	{ "FETCH", ENGRAM_IOC_FETCH, sizeof(struct engram_ioc_fetch),
	  ENGRAM_FETCH_SIZE_VER0, true, prep_fetch, done_fetch },
};

/*
 * Call @d with a valid argument whose size field is @usize; with @dirty,
 * the last byte of the @usize bytes is 1 (beyond the kernel's struct).
 * *@tail_clean: the bytes beyond the kernel's struct are still zero.
 */
static int call_sized(const struct ioc *d, unsigned long cmd, uint32_t usize, bool dirty,
		      bool *tail_clean)
{
	size_t k, end = usize < 2 * pg ? usize : 2 * pg;
	int e;

	memset(argpg, 0, 2 * pg);
	d->prep(argpg);
	memcpy(argpg, &usize, sizeof(usize));
	if (dirty && usize > d->ksize && usize <= 2 * pg)
		argpg[usize - 1] = 1;
	e = xio(dev_fd, cmd, argpg);
	if (tail_clean) {
		*tail_clean = true;
		for (k = d->ksize; k < end; k++)
			if (argpg[k])
				*tail_clean = false;
	}
	d->done(argpg, e);
	return e;
}

static void size_cases(void)
{
	size_t i;
	bool clean;
	int e;

	for (i = 0; i < ARRAY_SIZE(iocs); i++) {
		const struct ioc *d = &iocs[i];
		unsigned long nosize = d->cmd & ~SIZE_MASK;

		if (d->ksize != d->ver0)
			diag("%s: sizeof %u, VER0 %u", d->name, d->ksize, d->ver0);
		expect(call_sized(d, d->cmd, 0, false, NULL), EINVAL, "%s: size 0 is EINVAL",
		       d->name);
		expect(call_sized(d, d->cmd, 4, false, NULL), EINVAL, "%s: size 4 is EINVAL",
		       d->name);
		expect(call_sized(d, d->cmd, d->ver0 - 1, false, NULL), EINVAL,
		       "%s: size VER0 - 1 (%u) is EINVAL", d->name, d->ver0 - 1);
		expect(call_sized(d, d->cmd, (uint32_t)pg + 1, false, NULL), E2BIG,
		       "%s: size PAGE_SIZE + 1 is E2BIG", d->name);
		expect(call_sized(d, d->cmd, UINT32_MAX, false, NULL), E2BIG,
		       "%s: size 2^32 - 1 is E2BIG", d->name);
		expect(call_sized(d, d->cmd, d->ksize + 1, true, NULL), E2BIG,
		       "%s: size + 1 with a nonzero tail byte is E2BIG", d->name);
		expect(call_sized(d, d->cmd, d->ksize + 8, true, NULL), E2BIG,
		       "%s: size + 8 with a nonzero tail is E2BIG", d->name);
		expect(call_sized(d, d->cmd, (uint32_t)pg, true, NULL), E2BIG,
		       "%s: size PAGE_SIZE with its last byte nonzero is E2BIG", d->name);
		e = call_sized(d, d->cmd, d->ksize + 8, false, &clean);
		expect(e, 0, "%s: size + 8 with a zero tail is accepted", d->name);
		tap(clean, "%s: ... and the kernel wrote nothing beyond its struct", d->name);
		expect(call_sized(d, d->cmd, (uint32_t)pg, false, NULL), 0,
		       "%s: size PAGE_SIZE with a zero tail is accepted", d->name);
		/* The size in the command number is not what counts. */
		expect(call_sized(d, nosize | (200UL << _IOC_SIZESHIFT), d->ksize, false, NULL), 0,
		       "%s: a command with _IOC_SIZE 200 reaches the handler", d->name);
		expect(call_sized(d, nosize, d->ksize, false, NULL), 0,
		       "%s: a command with _IOC_SIZE 0 reaches the handler", d->name);
		expect(call_sized(d, nosize | (200UL << _IOC_SIZESHIFT), 0, false, NULL), EINVAL,
		       "%s: _IOC_SIZE 200 with size field 0: the size field is what counts "
		       "(EINVAL)", d->name);
		/* Direction is part of the match. */
		expect(call_sized(d, (d->cmd & ~DIR_MASK) |
				  ((unsigned long)_IOC_NONE << _IOC_DIRSHIFT), d->ksize, false,
				  NULL), ENOTTY, "%s: the command with direction _IOC_NONE is ENOTTY",
		       d->name);
		expect(call_sized(d, (d->cmd & ~DIR_MASK) |
				  ((unsigned long)(_IOC_DIR(d->cmd) == _IOC_WRITE ?
						   _IOC_READ | _IOC_WRITE : _IOC_WRITE)
				   << _IOC_DIRSHIFT), d->ksize, false, NULL),
		       ENOTTY, "%s: the command with another direction is ENOTTY", d->name);
	}
	/* The example of the brief, literally. */
	expect(call_sized(&iocs[3], _IOWR(ENGRAM_IOC_MAGIC, 4, char[200]),
			  sizeof(struct engram_ioc_fetch), false, NULL), 0,
	       "_IOWR(0xE7, 4, char[200]) is a SUBMIT");
	if (drain())
		diag("size cases left fetches outstanding");

	/* Unknown commands. */
	{
		static const struct {
			unsigned long cmd;
			const char *what;
		} bad[] = {
			{ _IOWR(ENGRAM_IOC_MAGIC, 0, struct engram_ioc_fetch), "number 0" },
			{ _IOWR(ENGRAM_IOC_MAGIC, 7, struct engram_ioc_fetch), "number 7" },
			{ _IOWR(ENGRAM_IOC_MAGIC, 255, struct engram_ioc_fetch), "number 255" },
			{ _IOWR(0xE8, 6, struct engram_ioc_fetch), "FETCH's number, magic 0xE8" },
			{ _IOWR(0, 6, struct engram_ioc_fetch), "FETCH's number, magic 0" },
			{ TCGETS, "TCGETS" },
		};

		for (i = 0; i < ARRAY_SIZE(bad); i++) {
			struct engram_ioc_fetch a;

			prep_fetch(&a);
			expect(xio(dev_fd, bad[i].cmd, &a), ENOTTY,
			       "unknown command (%s) is ENOTTY", bad[i].what);
		}
		expect(isatty(dev_fd) ? 0 : errno, ENOTTY, "isatty() on the device is ENOTTY");
	}
}

/* ------------------------------------------------------------------ */
/* Struct pointers                                                     */

static void pointer_cases(void)
{
	size_t i;
	long pin0;
	int e;

	for (i = 0; i < ARRAY_SIZE(iocs); i++) {
		const struct ioc *d = &iocs[i];
		uint32_t sz = d->ksize;
		uint8_t *ro;

		expect(xio(dev_fd, d->cmd, NULL), EFAULT, "%s: a NULL struct pointer is EFAULT",
		       d->name);
		expect(xio(dev_fd, d->cmd, hole), EFAULT, "%s: an unmapped struct is EFAULT",
		       d->name);
		expect(xio(dev_fd, d->cmd, (void *)(uintptr_t)0xffff800000000000ULL), EFAULT,
		       "%s: a kernel address as the struct is EFAULT", d->name);
		/* The size field readable, the rest on the unmapped page. */
		memcpy(edge + pg - 4, &sz, 4);
		expect(xio(dev_fd, d->cmd, edge + pg - 4), EFAULT,
		       "%s: a struct cut by an unmapped page is EFAULT", d->name);
		/* A read-only struct: read fine, written back never. */
		ro = map(pg, PROT_READ | PROT_WRITE);
		d->prep(ro);
		if (mprotect(ro, pg, PROT_READ))
			bail("mprotect: %s", strerror(errno));
		pin0 = vm_pin();
		e = xio(dev_fd, d->cmd, ro);
		d->done(ro, e);
		if (d->writes_back)
			expect(e, EFAULT, "%s: a read-only struct is EFAULT (output not writable)",
			       d->name);
		else
			expect(e, 0, "%s: a read-only struct is fine (nothing is written back)",
			       d->name);
		if (d->cmd == ENGRAM_IOC_REG_BUF)
			tap(vm_pin() == pin0, "REG_BUF: ... and the buffer it pinned is released "
			    "(VmPin %ld kB, was %ld kB)", vm_pin(), pin0);
		if (d->cmd == ENGRAM_IOC_SUBMIT) {
			/* The fetch was sent; its ticket was lost, WAIT(0) reaps it. */
			struct engram_ioc_wait w;

			e = wait_ticket(0, &w);
			tap(!e && !w.error && w.done_ticket, "SUBMIT: ... but the fetch was sent; "
			    "WAIT(0) reaps it (%s, error %d, ticket %" PRIu64 ")", errname(e),
			    w.error, (uint64_t)w.done_ticket);
		}
		if (d->cmd == ENGRAM_IOC_WAIT) {
			/* The fetch was reaped before the copy-out failed. */
			expect(wait_ticket(prep_ticket, NULL), ENOENT,
			       "WAIT: ... and its fetch is gone (WAIT on the ticket again is "
			       "ENOENT)");
		}
		munmap(ro, pg);
	}
	e = drain();
	if (e)
		diag("pointer cases left %d fetches outstanding", e);
}

/* ------------------------------------------------------------------ */
/* OPEN_TABLE                                                          */

static int open_with(struct engram_ioc_open *a)
{
	return xio(dev_fd, ENGRAM_IOC_OPEN_TABLE, a);
}

static void open_cases(void)
{
	struct engram_ioc_open a;
	int i, e;

	a = mk_open();
	a.flags = 0;
	expect(open_with(&a), EINVAL, "OPEN_TABLE: no BY_ flag is EINVAL");
	a = mk_open();
	a.flags = ENGRAM_OPEN_BY_NAME | (1U << 2);
	expect(open_with(&a), EINVAL, "OPEN_TABLE: flag bit 2 is EINVAL");
	a = mk_open();
	a.flags = ENGRAM_OPEN_BY_NAME | (1U << 31);
	expect(open_with(&a), EINVAL, "OPEN_TABLE: flag bit 31 is EINVAL");
	a = mk_open();
	a.flags = 1U << 2;
	expect(open_with(&a), EINVAL, "OPEN_TABLE: only an unknown flag is EINVAL");
	a = mk_open();
	a.reserved0 = 1;
	expect(open_with(&a), EINVAL, "OPEN_TABLE: reserved0 nonzero is EINVAL");
	for (i = 0; i < (int)ARRAY_SIZE(a.reserved); i++) {
		a = mk_open();
		a.reserved[i] = 1ULL << (i * 16);
		expect(open_with(&a), EINVAL, "OPEN_TABLE: reserved[%d] nonzero is EINVAL", i);
	}
	a = mk_open();
	memset(a.name, 0, sizeof(a.name));
	expect(open_with(&a), EINVAL, "OPEN_TABLE: an empty name is EINVAL");
	a = mk_open();
	memset(a.name, 'a', sizeof(a.name));
	expect(open_with(&a), EINVAL, "OPEN_TABLE: 64 name bytes without a NUL are EINVAL");
	a = mk_open();
	memset(a.name, 'a', sizeof(a.name) - 1);
	expect(open_with(&a), ENOENT, "OPEN_TABLE: a 63-byte name (valid, absent) is ENOENT");
	{
		static const char *const bad[] = { "bad/name", "bad name", "bad\tname", "bad*",
						   "tab\xc3\xa9", "..\\x", "a:b" };

		for (i = 0; i < (int)ARRAY_SIZE(bad); i++) {
			a = mk_open();
			memset(a.name, 0, sizeof(a.name));
			memcpy(a.name, bad[i], strlen(bad[i]));
			expect(open_with(&a), EINVAL,
			       "OPEN_TABLE: name with an illegal character (#%d) is EINVAL", i);
		}
	}
	a = mk_open();
	memset(a.name, 0, sizeof(a.name));
	memcpy(a.name, "no-such-table_9.x", 17);
	expect(open_with(&a), ENOENT, "OPEN_TABLE: a table that does not exist is ENOENT");
	a = mk_open();
	a.link = 9999;
	expect(open_with(&a), ENODEV, "OPEN_TABLE: link 9999 (does not exist) is ENODEV");
	a = mk_open();
	a.link = UINT32_MAX;
	expect(open_with(&a), ENODEV, "OPEN_TABLE: link 2^32 - 1 is ENODEV");
	a = mk_open();
	a.link = link_id;
	e = open_with(&a);
	expect(e, 0, "OPEN_TABLE: the link it was found on, by id (%u), works", link_id);
	a = mk_open();
	a.flags = ENGRAM_OPEN_BY_SHA256;
	memcpy(a.sha256, table_sha, sizeof(a.sha256));
	memset(a.name, '/', sizeof(a.name));
	e = open_with(&a);
	expect(e, 0, "OPEN_TABLE: BY_SHA256 alone ignores the name field (even an invalid one)");
	tap(!e && a.rows == rows_total && !memcmp(a.sha256_out, table_sha, sizeof(table_sha)),
	    "OPEN_TABLE: ... and finds the same table (rows %" PRIu64 ")", (uint64_t)a.rows);
	a = mk_open();
	a.flags = ENGRAM_OPEN_BY_SHA256;
	memcpy(a.sha256, table_sha, sizeof(a.sha256));
	a.sha256[31] ^= 0x55;
	expect(open_with(&a), ENOENT, "OPEN_TABLE: BY_SHA256 with a wrong digest is ENOENT");
	a = mk_open();
	a.flags = ENGRAM_OPEN_BY_NAME | ENGRAM_OPEN_BY_SHA256;
	memcpy(a.sha256, table_sha, sizeof(a.sha256));
	a.sha256[0] ^= 1;
	expect(open_with(&a), ENOENT, "OPEN_TABLE: right name, wrong digest, both flags is ENOENT");
	a = mk_open();
	a.flags = ENGRAM_OPEN_BY_NAME | ENGRAM_OPEN_BY_SHA256;
	memcpy(a.sha256, table_sha, sizeof(a.sha256));
	expect(open_with(&a), 0, "OPEN_TABLE: right name and digest, both flags works");
	a = mk_open();
	a.handle = 77;
	a.rows = 5;
	a.max_rows = 9;
	memset(a.sha256_out, 0xff, sizeof(a.sha256_out));
	e = open_with(&a);
	expect(e, 0, "OPEN_TABLE: output fields set on input are ignored");
	tap(!e && a.rows == rows_total && a.max_rows == max_rows && a.handle != 77,
	    "OPEN_TABLE: ... and overwritten (handle %u rows %" PRIu64 " max_rows %u)",
	    a.handle, (uint64_t)a.rows, a.max_rows);
}

/* ------------------------------------------------------------------ */
/* REG_BUF / UNREG_BUF                                                 */

static int drop_ipc_lock(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];
	unsigned int ix = CAP_TO_INDEX(CAP_IPC_LOCK);
	uint32_t m = CAP_TO_MASK(CAP_IPC_LOCK);

	if (syscall(SYS_capget, &h, d))
		return errno;
	d[ix].effective &= ~m;
	d[ix].permitted &= ~m;
	d[ix].inheritable &= ~m;
	if (syscall(SYS_capset, &h, d))
		return errno;
	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return errno;
	return d[ix].effective & m ? EPERM : 0;
}

/*
 * RLIMIT_MEMLOCK: a child with its own fd and a 64 KiB limit, first with
 * CAP_IPC_LOCK (not charged against the limit), then without it.
 */
static void memlock_cases(void)
{
	enum { R_SETUP, R_CAP, R_DROP, R_OVER, R_IN, R_SUM_OVER, R_SUM_EXACT, R_AFTER_UNREG,
	       R_PIN, R_N };
	int *res = mmap(NULL, pg, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	pid_t pid;
	int ws, i;

	if (res == MAP_FAILED)
		bail("mmap: %s", strerror(errno));
	for (i = 0; i < R_N; i++)
		res[i] = -1;
	fflush(NULL);
	pid = fork();
	if (pid < 0)
		bail("fork: %s", strerror(errno));
	if (!pid) {
		struct rlimit rl = { 64 << 10, 64 << 10 };
		uint8_t *m = mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE,
				  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
		uint32_t a = 0, b = 0, c = 0;
		int fd = open(dev_path, O_RDWR | O_CLOEXEC);

		if (fd < 0 || m == MAP_FAILED || setrlimit(RLIMIT_MEMLOCK, &rl)) {
			res[R_SETUP] = errno;
			_exit(2);
		}
		res[R_SETUP] = 0;
		res[R_CAP] = reg_fd(fd, m, 1 << 20, &a);
		if (!res[R_CAP])
			unreg_fd(fd, a);
		res[R_DROP] = drop_ipc_lock();
		if (res[R_DROP])
			_exit(2);
		res[R_OVER] = reg_fd(fd, m, 1 << 20, NULL);
		res[R_IN] = reg_fd(fd, m, 16 << 10, &a);		/* 4 pages of 16 */
		res[R_SUM_OVER] = reg_fd(fd, m + (16 << 10), 64 << 10, NULL);	/* 20 */
		res[R_SUM_EXACT] = reg_fd(fd, m + (16 << 10), 48 << 10, &b);	/* 16 */
		unreg_fd(fd, a);
		unreg_fd(fd, b);
		res[R_AFTER_UNREG] = reg_fd(fd, m, 64 << 10, &c);
		res[R_PIN] = (int)vm_pin();
		close(fd);
		_exit(0);
	}
	if (waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws))
		diag("memlock child died");
	if (res[R_SETUP]) {
		tap(false, "RLIMIT_MEMLOCK child: setup failed: %s", errname(res[R_SETUP]));
		return;
	}
	expect(res[R_CAP], 0, "REG_BUF: 1 MiB over a 64 KiB RLIMIT_MEMLOCK with CAP_IPC_LOCK "
	       "works");
	if (!expect(res[R_DROP], 0, "capset() drops CAP_IPC_LOCK in the child"))
		return;
	expect(res[R_OVER], ENOMEM, "REG_BUF: 1 MiB over a 64 KiB RLIMIT_MEMLOCK without "
	       "CAP_IPC_LOCK is ENOMEM");
	expect(res[R_IN], 0, "REG_BUF: 16 KiB within the limit works");
	expect(res[R_SUM_OVER], ENOMEM, "REG_BUF: 16 KiB + 64 KiB (over in sum) is ENOMEM");
	expect(res[R_SUM_EXACT], 0, "REG_BUF: 16 KiB + 48 KiB (the limit exactly) works");
	expect(res[R_AFTER_UNREG], 0, "REG_BUF: after UNREG_BUF the charge is returned "
	       "(64 KiB works again)");
	tap(res[R_PIN] == 64, "VmPin of the child is 64 kB with one 64 KiB buffer (%d kB)",
	    res[R_PIN]);
	munmap(res, pg);
}

static void reg_cases(void)
{
	struct engram_ioc_reg a;
	long pin0 = vm_pin(), pin;
	uint8_t *p, *ro;
	uint32_t id = 0, id1 = 0, id2 = 0;
	int e;

	diag("VmPin at the start of the REG_BUF cases: %ld kB", pin0);
	expect(reg_fd(dev_fd, sb.p, 0, NULL), EINVAL, "REG_BUF: length 0 is EINVAL");
	expect(reg_fd(dev_fd, NULL, 0, NULL), EINVAL, "REG_BUF: address 0, length 0 is EINVAL");
	expect(reg_fd(dev_fd, (void *)(uintptr_t)0xfffffffffffff000ULL, 0x2000, NULL), EINVAL,
	       "REG_BUF: a range that wraps around 2^64 is EINVAL");
	expect(reg_fd(dev_fd, sb.p, UINT64_MAX, NULL), EINVAL,
	       "REG_BUF: length 2^64 - 1 is EINVAL");
	expect(reg_fd(dev_fd, (void *)(uintptr_t)0xffff800000000000ULL, pg, NULL), EINVAL,
	       "REG_BUF: a kernel address is EINVAL");
	expect(reg_fd(dev_fd, (void *)(uintptr_t)0x00fffffffffff000ULL, 2 * pg, NULL), EINVAL,
	       "REG_BUF: a range across the end of user space (2^56) is EINVAL");
	expect(reg_fd(dev_fd, sb.p, (64ULL << 30) + 1, NULL), EINVAL,
	       "REG_BUF: 64 GiB + 1 is EINVAL");
	expect(reg_fd(dev_fd, sb.p, 1ULL << 40, NULL), EINVAL, "REG_BUF: 1 TiB is EINVAL");
	expect(reg_fd(dev_fd, hole, pg, NULL), EFAULT, "REG_BUF: an unmapped page is EFAULT");
	expect(reg_fd(dev_fd, NULL, pg, NULL), EFAULT, "REG_BUF: page 0 is EFAULT");
	expect(reg_fd(dev_fd, edge, 2 * pg, NULL), EFAULT,
	       "REG_BUF: a mapped page then an unmapped one is EFAULT");
	expect(reg_fd(dev_fd, edge + pg - 1, 2, NULL), EFAULT,
	       "REG_BUF: 2 bytes across into an unmapped page are EFAULT");
	ro = map(4 * pg, PROT_READ);
	expect(reg_fd(dev_fd, ro, 4 * pg, NULL), EFAULT,
	       "REG_BUF: a PROT_READ mapping is EFAULT (FOLL_WRITE pin fails)");
	memset(argpg, 0, pg);
	if (mprotect(argpg, pg, PROT_READ))
		bail("mprotect: %s", strerror(errno));
	expect(reg_fd(dev_fd, argpg, pg, NULL), EFAULT,
	       "REG_BUF: a page made read-only by mprotect() is EFAULT");
	mprotect(argpg, pg, PROT_READ | PROT_WRITE);
	munmap(ro, 4 * pg);
	ro = map(pg, PROT_NONE);
	expect(reg_fd(dev_fd, ro, pg, NULL), EFAULT, "REG_BUF: a PROT_NONE mapping is EFAULT");
	munmap(ro, pg);
	pin = vm_pin();
	tap(pin == pin0, "REG_BUF: the refusals charged nothing (VmPin %ld kB, was %ld kB)",
	    pin, pin0);

	a = mk_reg(sb.p, pg);
	a.flags = ENGRAM_REG_F_KEEP_KEYS << 1;
	expect(xio(dev_fd, ENGRAM_IOC_REG_BUF, &a), EINVAL,
	       "REG_BUF: flags 2, the first unknown, is EINVAL");
	a = mk_reg(sb.p, pg);
	a.flags = ENGRAM_REG_F_KEEP_KEYS;
	e = xio(dev_fd, ENGRAM_IOC_REG_BUF, &a);
	tap(!e && !unreg_fd(dev_fd, a.buf_id) && vm_pin() == pin0,
	    "REG_BUF: ENGRAM_REG_F_KEEP_KEYS registers, and UNREG_BUF gives its charge back (%s)",
	    strerror(e));
	a = mk_reg(sb.p, pg);
	a.flags = 1U << 31;
	expect(xio(dev_fd, ENGRAM_IOC_REG_BUF, &a), EINVAL, "REG_BUF: flags bit 31 is EINVAL");
	a = mk_reg(sb.p, pg);
	a.reserved0 = 1;
	expect(xio(dev_fd, ENGRAM_IOC_REG_BUF, &a), EINVAL, "REG_BUF: reserved0 nonzero is EINVAL");
	a = mk_reg(sb.p, pg);
	a.reserved[0] = 1;
	expect(xio(dev_fd, ENGRAM_IOC_REG_BUF, &a), EINVAL,
	       "REG_BUF: reserved[0] nonzero is EINVAL");
	a = mk_reg(sb.p, pg);
	a.reserved[1] = 1ULL << 63;
	expect(xio(dev_fd, ENGRAM_IOC_REG_BUF, &a), EINVAL,
	       "REG_BUF: reserved[1] nonzero is EINVAL");

	/* What is charged: whole pages, also for an unaligned range. */
	p = map(4 * pg, PROT_READ | PROT_WRITE);
	e = reg_fd(dev_fd, p + 100, 300, &id1);
	expect(e, 0, "REG_BUF: 300 bytes at page offset 100 work");
	tap(vm_pin() == pin0 + (long)pg / 1024, "REG_BUF: ... and charge one page (VmPin %ld kB)",
	    vm_pin());
	e = reg_fd(dev_fd, p + pg - 8, 16, &id2);
	expect(e, 0, "REG_BUF: 16 bytes across a page boundary work");
	tap(vm_pin() == pin0 + 3 * (long)pg / 1024,
	    "REG_BUF: ... and charge two pages (VmPin %ld kB)", vm_pin());
	expect(reg_fd(dev_fd, p, 4 * pg, &id), 0, "REG_BUF: the same memory registered again "
	       "works (buffers may overlap)");
	{
		struct engram_ioc_unreg u = mk_unreg(id);

		u.flags = 1;
		expect(xio(dev_fd, ENGRAM_IOC_UNREG_BUF, &u), EINVAL,
		       "UNREG_BUF: flags 1 is EINVAL");
		u = mk_unreg(id);
		u.reserved0 = 1;
		expect(xio(dev_fd, ENGRAM_IOC_UNREG_BUF, &u), EINVAL,
		       "UNREG_BUF: reserved0 nonzero is EINVAL");
	}
	expect(unreg_fd(dev_fd, id), 0, "UNREG_BUF: ... the buffer was still registered");
	expect(unreg_fd(dev_fd, id), ENOENT, "UNREG_BUF: the same id twice is ENOENT");
	expect(unreg_fd(dev_fd, id2), 0, "UNREG_BUF: another buffer works");
	expect(unreg_fd(dev_fd, id1), 0, "UNREG_BUF: and the third");
	expect(unreg_fd(dev_fd, 0), ENOENT, "UNREG_BUF: id 0 is ENOENT");
	expect(unreg_fd(dev_fd, 999999), ENOENT, "UNREG_BUF: an id never given is ENOENT");
	expect(unreg_fd(dev_fd, UINT32_MAX), ENOENT, "UNREG_BUF: id 2^32 - 1 is ENOENT");
	pin = vm_pin();
	tap(pin == pin0, "UNREG_BUF: every charge is returned (VmPin %ld kB, was %ld kB)",
	    pin, pin0);
	munmap(p, 4 * pg);
	memlock_cases();
}

/* ------------------------------------------------------------------ */
/* FETCH / SUBMIT                                                      */

static int fetch(struct engram_ioc_fetch *a)
{
	return xio(dev_fd, ENGRAM_IOC_FETCH, a);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A fetch of @n rows into sb that sets the word at @off of buffer @id. */
static struct engram_ioc_fetch mk_wfetch(const uint32_t *rows, uint32_t n, uint32_t id,
					 uint64_t off, uint64_t value)
{
	struct engram_ioc_fetch a = mk_fetch(rows, n, sb.id, 0);

	a.flags = ENGRAM_FETCH_DONE_WORD;
	a.done_buf_id = id;
	a.done_offset = off;
	a.done_value = value;
	return a;
}

/*
 * ENGRAM_FETCH_DONE_WORD: where a word may be (EINVAL, ENOENT), what it
 * is set to (the value; ENGRAM_DONE_FAILED | ERANGE for a refusal), that
 * a fetch that succeeded needs no WAIT (the next SUBMIT reaps it: a WAIT
 * for it is then ENOENT) and one that failed stays for WAIT, and that a
 * buffer holding a word in flight is unregistered only once it is set.
 */
static void word_cases(void)
{
	struct rbuf wb = { 0 };
	struct engram_ioc_fetch a, b;
	struct engram_ioc_wait w;
	volatile uint64_t *word;
	uint32_t rows[4];
	uint64_t t0;
	int e;

	fill_rows(rows, 4);
	reg_or_bail(&wb, pg);
	word = (volatile uint64_t *)(void *)wb.p;

	a = mk_wfetch(rows, 4, wb.id, 8, 0);
	a.flags = 0;
	expect(fetch(&a), EINVAL, "FETCH: done_buf_id without ENGRAM_FETCH_DONE_WORD is EINVAL");
	a = mk_wfetch(rows, 4, wb.id, 8, 1);
	a.reserved1 = 1;
	expect(fetch(&a), EINVAL, "FETCH: reserved1 nonzero is EINVAL");
	a = mk_wfetch(rows, 4, 0, 8, 1);
	expect(fetch(&a), EINVAL, "FETCH: a word in buf_id 0 is EINVAL");
	a = mk_wfetch(rows, 4, 5000, 8, 1);
	expect(fetch(&a), ENOENT, "FETCH: a word in an unknown buffer is ENOENT");
	a = mk_wfetch(rows, 4, wb.id, 4, 1);
	expect(fetch(&a), EINVAL, "FETCH: a word at offset 4 (misaligned) is EINVAL");
	a = mk_wfetch(rows, 4, wb.id, pg - 4, 1);
	expect(fetch(&a), EINVAL, "FETCH: a word past the buffer's end is EINVAL");
	a = mk_wfetch(rows, 4, wb.id, UINT64_MAX - 7, 1);
	expect(fetch(&a), EINVAL, "FETCH: a word at offset 2^64 - 8 is EINVAL");
	a = mk_wfetch(rows, 4, wb.id, 8, ENGRAM_DONE_FAILED | 1);
	expect(fetch(&a), EINVAL, "FETCH: a value with bit 63 set is EINVAL");
	a = mk_wfetch(rows, 4, sb.id, 4 * ROW - 8, 1);
	expect(fetch(&a), EINVAL, "FETCH: a word in the last row's bytes is EINVAL");
	a = mk_wfetch(rows, 4, sb.id, 0, 1);
	expect(fetch(&a), EINVAL, "FETCH: a word in the first row's bytes is EINVAL");
	a = mk_wfetch(rows, 4, sb.id, 4 * ROW, 7);
	expect(fetch(&a), 0, "FETCH: a word just after the rows, in their buffer, works");

	word[1] = 0;
	a = mk_wfetch(rows, 4, wb.id, 8, 42);
	e = fetch(&a);
	expect(e, 0, "FETCH with a completion word works");
	tap(!e && word[1] == 42, "FETCH: ... and set the word to its value (%" PRIu64 ")",
	    (uint64_t)word[1]);

	/* Succeeded: no WAIT owed; the next SUBMIT reaps it. */
	word[2] = 0;
	a = mk_wfetch(rows, 4, wb.id, 16, 43);
	e = submit(&a);
	expect(e, 0, "SUBMIT with a completion word works");
	for (t0 = now_ms(); !e && !word[2] && now_ms() - t0 < 30000;)
		usleep(1000);
	tap(!e && word[2] == 43, "SUBMIT: ... and the word becomes its value (%" PRIu64 ")",
	    (uint64_t)word[2]);
	b = mk_fetch(rows, 4, sb2.id, 0);
	expect(fetch(&b), 0, "FETCH after it works");
	expect(wait_ticket(a.ticket, NULL), ENOENT,
	       "WAIT for the word's fetch, which succeeded, after a later FETCH is ENOENT");

	/* Refused by the server: the word says ERANGE, and WAIT reports it. */
	rows[3] = (uint32_t)rows_total + 7;
	word[3] = 0;
	a = mk_wfetch(rows, 4, wb.id, 24, 44);
	e = submit(&a);
	expect(e, 0, "SUBMIT of a row past the end, with a word, is sent");
	for (t0 = now_ms(); !e && !word[3] && now_ms() - t0 < 30000;)
		usleep(1000);
	tap(!e && word[3] == (ENGRAM_DONE_FAILED | ERANGE),
	    "SUBMIT: ... and its word becomes ENGRAM_DONE_FAILED | ERANGE (0x%" PRIx64 ")",
	    (uint64_t)word[3]);
	b = mk_fetch(rows, 3, sb2.id, 0);
	expect(fetch(&b), 0, "FETCH after it works");
	e = e ? e : wait_ticket(a.ticket, &w);
	tap(!e && w.error == -ERANGE && w.done_ticket == a.ticket,
	    "WAIT: the failed one stayed for it, error -ERANGE (%d)", e ? 0 : w.error);
	fill_rows(rows, 4);

	/* UNREG of the word's buffer waits for the fetch that sets it. */
	word[4] = 0;
	a = mk_fetch(rowbuf, barrier_rows, big.id, 0);
	a.flags = ENGRAM_FETCH_DONE_WORD;
	a.done_buf_id = wb.id;
	a.done_offset = 32;
	a.done_value = 45;
	e = submit(&a);
	expect(e, 0, "SUBMIT of %u rows with a word in a page of its own", barrier_rows);
	expect(unreg_fd(dev_fd, wb.id), 0, "UNREG_BUF of the word's buffer with it in flight");
	tap(word[4] == 45 || word[4] == (ENGRAM_DONE_FAILED | ECONNRESET) ||
	    word[4] == (ENGRAM_DONE_FAILED | ETIMEDOUT),
	    "UNREG_BUF: ... returned with the word set (0x%" PRIx64 ")", (uint64_t)word[4]);
	if (!e)
		wait_ticket(a.ticket, NULL);
	munmap(wb.p, wb.len);
}

static void fetch_cases(void)
{
	uint32_t rows[8], tiny, gone;
	struct engram_ioc_fetch a;
	struct engram_ioc_range r[ENGRAM_WIRE_MAX_RANGES + 1];
	uint32_t *xrows;
	size_t i, k;
	int e;

	fill_rows(rows, 8);
	a = mk_fetch(rows, 4, sb.id, 0);
	a.flags = 1U << 3;
	expect(fetch(&a), EINVAL, "FETCH: flag bit 3 is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.flags = 1U << 31;
	expect(fetch(&a), EINVAL, "FETCH: flag bit 31 is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.flags = 1U << 3;
	expect(submit(&a), EINVAL, "SUBMIT: flag bit 3 is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.reserved0 = 1;
	expect(fetch(&a), EINVAL, "FETCH: reserved0 nonzero is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.reserved[0] = 1;
	expect(fetch(&a), EINVAL, "FETCH: reserved[0] nonzero is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.reserved[1] = 1;
	expect(submit(&a), EINVAL, "SUBMIT: reserved[1] nonzero is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.ticket = 99;
	a.wire_status = 7;
	a.bad_index = 3;
	a.rtt_ns = 1;
	e = fetch(&a);
	expect(e, 0, "FETCH: output fields set on input are ignored");
	tap(!e && a.wire_status == 0 && a.bad_index == 0 && a.rtt_ns != 1,
	    "FETCH: ... and overwritten (wire_status %u bad_index %u rtt_ns %" PRIu64 ")",
	    a.wire_status, a.bad_index, (uint64_t)a.rtt_ns);

	a = mk_fetch(rows, 4, sb.id, 0);
	a.handle = 0;
	expect(fetch(&a), ENOENT, "FETCH: handle 0 is ENOENT");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.handle = 5000;
	expect(fetch(&a), ENOENT, "FETCH: a handle never given is ENOENT");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.handle = 5000;
	expect(submit(&a), ENOENT, "SUBMIT: a handle never given is ENOENT");
	if (reg_fd(dev_fd, sb.p, pg, &gone) || unreg_fd(dev_fd, gone))
		bail("REG/UNREG of a page failed");
	a = mk_fetch(rows, 4, gone, 0);
	expect(fetch(&a), ENOENT, "FETCH: an unregistered buf_id is ENOENT");
	a = mk_fetch(rows, 4, 0, 0);
	expect(fetch(&a), ENOENT, "FETCH: buf_id 0 is ENOENT");
	a = mk_fetch(rows, 0, sb.id, 0);
	expect(fetch(&a), EINVAL, "FETCH: zero rows is EINVAL");
	a = mk_fetch(rows, 0, sb.id, 0);
	expect(submit(&a), EINVAL, "SUBMIT: zero rows is EINVAL");
	a = mk_fetch(rowbuf, max_rows + 1, big.id, 0);
	expect(fetch(&a), E2BIG, "FETCH: max_rows + 1 (%u) rows is E2BIG", max_rows + 1);
	a = mk_fetch(rowbuf, UINT32_MAX, big.id, 0);
	expect(fetch(&a), E2BIG, "FETCH: 2^32 - 1 rows is E2BIG");
	a = mk_fetch(rowbuf, max_rows, big.id, 0);
	expect(fetch(&a), 0, "FETCH: max_rows (%u) rows work", max_rows);
	a = mk_fetch(rows, 4, sb.id, 0);
	a.stride = ROW - 1;
	expect(fetch(&a), EINVAL, "FETCH: stride 263 is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.stride = 0;
	expect(fetch(&a), EINVAL, "FETCH: stride 0 is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.stride = 8;
	expect(submit(&a), EINVAL, "SUBMIT: stride 8 is EINVAL");
	a = mk_fetch(NULL, 4, sb.id, 0);
	expect(fetch(&a), EINVAL, "FETCH: a NULL rows pointer is EINVAL");
	a = mk_fetch((uint32_t *)hole, 4, sb.id, 0);
	expect(fetch(&a), EFAULT, "FETCH: rows on an unmapped page is EFAULT");
	a = mk_fetch((uint32_t *)(edge + pg - 8), 4, sb.id, 0);
	expect(fetch(&a), EFAULT, "FETCH: rows cut by an unmapped page is EFAULT");
	a = mk_fetch((uint32_t *)(uintptr_t)0xffff800000000000ULL, 4, sb.id, 0);
	expect(fetch(&a), EFAULT, "FETCH: rows at a kernel address is EFAULT");
	a = mk_fetch((uint32_t *)hole, 4, sb.id, 0);
	expect(submit(&a), EFAULT, "SUBMIT: rows on an unmapped page is EFAULT");

	/* Destination, plain. */
	a = mk_fetch(rows, 1, sb.id, sb.len);
	expect(fetch(&a), ENOSPC, "FETCH: offset == buffer length is ENOSPC");
	a = mk_fetch(rows, 1, sb.id, UINT64_MAX);
	expect(fetch(&a), ENOSPC, "FETCH: offset 2^64 - 1 is ENOSPC");
	a = mk_fetch(rows, 1, sb.id, sb.len - ROW + 1);
	expect(fetch(&a), ENOSPC, "FETCH: one row at length - 263 is ENOSPC");
	a = mk_fetch(rows, 1, sb.id, sb.len - ROW);
	expect(fetch(&a), 0, "FETCH: one row at length - 264 works");
	if (reg_fd(dev_fd, sb.p, 600, &tiny))
		bail("REG_BUF of 600 bytes failed");
	a = mk_fetch(rows, 3, tiny, 0);
	expect(fetch(&a), ENOSPC, "FETCH: 3 rows into a 600-byte buffer is ENOSPC");
	a = mk_fetch(rows, 2, tiny, 0);
	a.stride = 337;
	expect(fetch(&a), ENOSPC, "FETCH: 2 rows at stride 337 into 600 bytes is ENOSPC");
	a = mk_fetch(rows, 2, tiny, 0);
	a.stride = 336;
	expect(fetch(&a), 0, "FETCH: 2 rows at stride 336 into 600 bytes work");
	a = mk_fetch(rows, 2, sb.id, 0);
	a.stride = UINT32_MAX;
	expect(fetch(&a), ENOSPC, "FETCH: 2 rows at stride 2^32 - 1 is ENOSPC");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.nr_ranges = 1;
	expect(fetch(&a), EINVAL, "FETCH: nr_ranges without ENGRAM_FETCH_RANGES is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.ranges = ptr(r);
	expect(fetch(&a), EINVAL, "FETCH: a ranges pointer without ENGRAM_FETCH_RANGES is EINVAL");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.timeout_ns = UINT64_MAX;
	expect(fetch(&a), 0, "FETCH: timeout_ns 2^64 - 1 is accepted (capped)");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.timeout_ns = 0;
	expect(fetch(&a), 0, "FETCH: timeout_ns 0 (the module's timeout) works");
	a = mk_fetch(rows, 4, sb.id, 0);
	a.flags = ENGRAM_FETCH_BUSY_POLL;
	expect(fetch(&a), 0, "FETCH: ENGRAM_FETCH_BUSY_POLL works");

	/* Destination, ranges. */
#define RNG(i, b, o, l) do {						\
		r[i].buf_id = (b);						\
		r[i].reserved = 0;						\
		r[i].offset = (o);						\
		r[i].length = (l);						\
	} while (0)
	RNG(0, sb.id, 0, 2 * ROW);
	RNG(1, sb2.id, 100, 2 * ROW);
	memset(sb2.p, 0x3c, 100);
	a = mk_rfetch(rows, 4, r, 2);
	e = fetch(&a);
	expect(e, 0, "FETCH RANGES: two ranges in two buffers work");
	if (!e) {
		struct engram_ioc_fetch p = mk_fetch(rows, 4, vb.id, 0);
		bool same;

		e = fetch(&p);
		same = !e && !memcmp(sb.p, vb.p, 2 * ROW) &&
		       !memcmp(sb2.p + 100, vb.p + 2 * ROW, 2 * ROW);
		for (k = 0; k < 100; k++)
			same = same && sb2.p[k] == 0x3c;
		tap(same, "FETCH RANGES: ... rows land where a plain fetch puts them, in order");
	}
	a = mk_rfetch(rows, 4, r, 0);
	expect(fetch(&a), EINVAL, "FETCH RANGES: zero ranges is EINVAL");
	for (i = 0; i < ARRAY_SIZE(r); i++)
		RNG(i, sb.id, i * 2 * ROW, 2 * ROW);
	a = mk_rfetch(rows, 4, r, ENGRAM_WIRE_MAX_RANGES + 1);
	expect(fetch(&a), E2BIG, "FETCH RANGES: 17 ranges is E2BIG");
	a = mk_rfetch(rows, 4, r, UINT32_MAX);
	expect(fetch(&a), E2BIG, "FETCH RANGES: 2^32 - 1 ranges is E2BIG");
	a = mk_rfetch(rows, 4, r, ENGRAM_WIRE_MAX_RANGES);
	expect(fetch(&a), 0, "FETCH RANGES: 16 ranges work");
	RNG(0, sb.id, 0, 2 * ROW);
	RNG(1, sb.id, ROW, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: overlapping ranges in one buffer are EINVAL");
	RNG(1, sb.id, 2 * ROW - 1, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: ranges overlapping by one byte are EINVAL");
	RNG(1, sb.id, 0, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: the same range twice is EINVAL");
	RNG(0, sb.id, 4 * ROW, 2 * ROW);
	RNG(1, sb.id, 2 * ROW, 2 * ROW);
	RNG(2, sb.id, 3 * ROW, 8);
	a = mk_rfetch(rows, 4, r, 3);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a third range inside the second is EINVAL");
	RNG(1, sb.id, 6 * ROW, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), 0, "FETCH RANGES: adjacent ranges (touching, not overlapping) work");
	RNG(0, sb.id, 0, 2 * ROW);
	RNG(1, sb2.id, 0, 2 * ROW);
	RNG(1, sb2.id, sb2.len - ROW, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a range past the end of its buffer is EINVAL");
	RNG(1, sb2.id, sb2.len + 1, ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a range starting past its buffer is EINVAL");
	RNG(1, sb2.id, 8, UINT64_MAX);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: length 2^64 - 1 is EINVAL");
	RNG(1, sb2.id, UINT64_MAX, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: offset 2^64 - 1 is EINVAL");
	RNG(1, sb2.id, sb2.len, 0);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a zero-length range is EINVAL");
	RNG(0, sb.id, 0, 0);
	RNG(1, sb2.id, 0, 4 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a zero-length first range is EINVAL");
	RNG(0, sb.id, 0, 2 * ROW);
	RNG(1, sb2.id, 0, 2 * ROW);
	r[1].reserved = 1;
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a range's reserved nonzero is EINVAL");
	/* Ids are reused (lowest free first): take a fresh one that is gone. */
	if (reg_fd(dev_fd, sb.p, pg, &gone) || unreg_fd(dev_fd, gone))
		bail("REG/UNREG of a page failed");
	RNG(1, gone, 0, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), ENOENT, "FETCH RANGES: a range in an unregistered buffer is ENOENT");
	RNG(1, sb2.id, 0, 2 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	a.buf_id = sb.id;
	expect(fetch(&a), EINVAL, "FETCH RANGES: buf_id set as well is EINVAL");
	a = mk_rfetch(rows, 4, r, 2);
	a.offset = 8;
	expect(fetch(&a), EINVAL, "FETCH RANGES: offset set as well is EINVAL");
	a = mk_rfetch(rows, 4, r, 2);
	a.flags |= 1U << 2;
	expect(fetch(&a), EINVAL, "FETCH RANGES: with an unknown flag is EINVAL");
	RNG(0, sb.id, 0, ROW + 10);
	RNG(1, sb2.id, 0, 4 * ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a row straddling two ranges is EINVAL");
	RNG(0, sb.id, 0, 2 * ROW - 1);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), EINVAL, "FETCH RANGES: a first range one byte short of 2 rows is "
	       "EINVAL");
	RNG(0, sb.id, 0, ROW + 20);
	a = mk_rfetch(rows, 4, r, 2);
	a.stride = ROW + 20;
	expect(fetch(&a), 0, "FETCH RANGES: a range ending in a stride gap works");
	RNG(0, sb.id, 0, ROW);
	RNG(1, sb2.id, 0, ROW);
	a = mk_rfetch(rows, 4, r, 2);
	expect(fetch(&a), ENOSPC, "FETCH RANGES: ranges too small for the rows are ENOSPC");
	RNG(1, sb2.id, 0, 4 * ROW);
	a = mk_rfetch(rows, 4, NULL, 2);
	expect(fetch(&a), EFAULT, "FETCH RANGES: a NULL ranges pointer is EFAULT");
	a = mk_rfetch(rows, 4, (struct engram_ioc_range *)hole, 2);
	expect(fetch(&a), EFAULT, "FETCH RANGES: ranges on an unmapped page are EFAULT");
	memcpy(edge + pg - sizeof(r[0]), &r[0], sizeof(r[0]));
	a = mk_rfetch(rows, 4, (struct engram_ioc_range *)(edge + pg - sizeof(r[0])), 2);
	expect(fetch(&a), EFAULT, "FETCH RANGES: ranges cut by an unmapped page are EFAULT");
	a = mk_rfetch(rows, 4, (struct engram_ioc_range *)hole, 2);
	expect(submit(&a), EFAULT, "SUBMIT RANGES: ranges on an unmapped page are EFAULT");
	/* More pieces than max_ranges: 8 MiB cut into 2 MiB registrations, + 15. */
	{
		uint32_t n0 = (8u << 20) / ROW;

		if (n0 + 15 <= max_rows && big.len >= (8u << 20) + 15 * pg) {
			RNG(0, big.id, 0, (uint64_t)n0 * ROW);
			for (i = 1; i < 16; i++)
				RNG(i, big.id, (8u << 20) + (i - 1) * pg, ROW);
			a = mk_rfetch(rowbuf, n0 + 15, r, 16);
			expect(fetch(&a), E2BIG, "FETCH RANGES: 16 ranges that need more than "
			       "max_ranges registrations are E2BIG");
		} else {
			tap(true, "FETCH RANGES: more pieces than max_ranges # SKIP max_rows %u",
			    max_rows);
		}
	}
#undef RNG

	/* Rows past the end: refused by the server, nothing written. */
	xrows = calloc(4, sizeof(*xrows));
	if (!xrows)
		bail("out of memory");
	xrows[0] = 0;
	xrows[1] = 5;
	xrows[2] = (uint32_t)rows_total;
	xrows[3] = 7;
	memset(sb.p, 0x77, sb.len);
	a = mk_fetch(xrows, 4, sb.id, 0);
	expect(fetch(&a), ERANGE, "FETCH: row index rows_total at position 2 is ERANGE");
	tap(a.wire_status == ENGRAM_WIRE_ROW_OUT_OF_RANGE && a.bad_index == 2,
	    "FETCH: ... with wire_status 5 (is %u) and bad_index 2 (is %u)", a.wire_status,
	    a.bad_index);
	for (k = 0; k < sb.len && sb.p[k] == 0x77; k++)
		;
	tap(k == sb.len, "FETCH: ... and the refused fetch wrote nothing (first changed byte %zu)",
	    k);
	xrows[2] = 1;
	xrows[0] = UINT32_MAX;
	a = mk_fetch(xrows, 4, sb.id, 0);
	e = fetch(&a);
	expect(e, ERANGE, "FETCH: row index 2^32 - 1 at position 0 is ERANGE");
	tap(a.wire_status == ENGRAM_WIRE_ROW_OUT_OF_RANGE && a.bad_index == 0,
	    "FETCH: ... with wire_status 5 (is %u) and bad_index 0 (is %u)", a.wire_status,
	    a.bad_index);
	xrows[0] = 0;
	xrows[3] = (uint32_t)rows_total + 1000;
	a = mk_fetch(xrows, 4, sb.id, 0);
	e = submit(&a);
	expect(e, 0, "SUBMIT: a row past the end is sent (the server refuses it)");
	if (!e) {
		struct engram_ioc_wait w;

		e = wait_ticket(a.ticket, &w);
		tap(!e && w.error == -ERANGE && w.wire_status == ENGRAM_WIRE_ROW_OUT_OF_RANGE &&
		    w.bad_index == 3 && w.done_ticket == a.ticket,
		    "WAIT: ... reports error -ERANGE (%d), wire_status 5 (%u), bad_index 3 (%u)",
		    w.error, w.wire_status, w.bad_index);
	}
	free(xrows);
	unreg_fd(dev_fd, tiny);
}

/* ------------------------------------------------------------------ */
/* WAIT and poll()                                                     */

static int poll_in(int ms)
{
	struct pollfd p = { .fd = dev_fd, .events = POLLIN };
	int r = poll(&p, 1, ms);

	return r > 0 ? p.revents : r;
}

/*
 * A WAIT that times out first is EAGAIN and leaves the fetch to be reaped;
 * a large fetch is used so that it is still in flight (if it has ended,
 * the WAIT simply succeeds, which is reported).
 */
static void timeout_cases(void)
{
	struct engram_ioc_fetch a = mk_fetch(rowbuf, max_rows, big.id, 0);
	struct engram_ioc_wait w;
	int e, e0, e1;

	e = submit(&a);
	if (!expect(e, 0, "SUBMIT of max_rows rows for the WAIT timeouts"))
		return;
	w = mk_wait(0);
	w.timeout_ns = 1000;
	e0 = xio(dev_fd, ENGRAM_IOC_WAIT, &w);
	w = mk_wait(a.ticket);
	w.timeout_ns = 1000;
	e1 = e0 ? xio(dev_fd, ENGRAM_IOC_WAIT, &w) : ENOENT;
	if (!e0) {
		tap(w.done_ticket == a.ticket, "WAIT(0) with timeout_ns 1000: the fetch had "
		    "already ended # SKIP not in flight");
		return;
	}
	expect(e0, EAGAIN, "WAIT(0) with timeout_ns 1000 on a fetch in flight is EAGAIN");
	if (e1 == 0) {
		tap(true, "WAIT(ticket) with timeout_ns 1000 # SKIP the fetch ended meanwhile");
		return;
	}
	expect(e1, EAGAIN, "WAIT(ticket) with timeout_ns 1000 on a fetch in flight is EAGAIN");
	e = wait_ticket(a.ticket, &w);
	expect(e, 0, "... the fetch is still there: WAIT(ticket) without a timeout reaps it");
	tap(!e && !w.error, "... and it succeeded (error %d)", w.error);
}

static volatile sig_atomic_t alarmed;

static void on_alarm(int sig)
{
	(void)sig;
	alarmed = 1;
}

/* A signal during FETCH: EINTR, the ticket written back, WAIT reaps it. */
static void signal_cases(void)
{
	struct sigaction sa;
	struct itimerval it = { .it_value = { .tv_usec = 2000 } };
	struct engram_ioc_fetch a;
	struct engram_ioc_wait w;
	int busy, e;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;	/* no SA_RESTART */
	sigemptyset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL))
		bail("sigaction: %s", strerror(errno));
	for (busy = 0; busy < 2; busy++) {
		const char *how = busy ? "a busy-poll FETCH" : "a FETCH";

		a = mk_fetch(rowbuf, max_rows, big.id, 0);
		if (busy)
			a.flags = ENGRAM_FETCH_BUSY_POLL;
		alarmed = 0;
		setitimer(ITIMER_REAL, &it, NULL);
		e = fetch(&a);
		if (!e) {
			tap(true, "a signal during %s # SKIP it ended before the signal", how);
			while (!alarmed)	/* the alarm may still be due */
				usleep(1000);
			continue;
		}
		expect(e, EINTR, "a signal during %s of max_rows rows is EINTR", how);
		tap(a.ticket != 0, "... and the ticket is written back (%" PRIu64 ")",
		    (uint64_t)a.ticket);
		e = wait_ticket(a.ticket, &w);
		expect(e, 0, "... WAIT(ticket) reaps the fetch");
		tap(!e && !w.error, "... which succeeded (error %d)", w.error);
	}
	signal(SIGALRM, SIG_DFL);
	e = drain();
	if (e)
		diag("signal cases left %d fetches outstanding", e);
}

/* REPORT: counted only when everything is valid; nothing else changes. */
static void report_cases(void)
{
	struct engram_ioc_report r;
	struct {
		struct engram_ioc_report r;
		uint64_t tail;
	} big;
	int e;

#define MK_REPORT() do { memset(&r, 0, sizeof(r)); r.size = sizeof(r); \
		r.handle = handle; r.rows = 1; } while (0)
	MK_REPORT();
	r.size = ENGRAM_REPORT_SIZE_VER0 - 1;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: size below VER0");
	memset(&big, 0, sizeof(big));
	big.r.size = sizeof(big);
	big.r.handle = handle;
	big.r.rows = 1;
	big.tail = 1;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &big), E2BIG, "REPORT: longer struct, nonzero tail");
	big.tail = 0;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &big), 0, "REPORT: longer struct, zero tail");
	MK_REPORT();
	r.flags = 1;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: unknown flag");
	MK_REPORT();
	r.reserved0 = 1;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: reserved0 set");
	MK_REPORT();
	r.reserved[1] = 1;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: reserved[1] set");
	MK_REPORT();
	r.rows = 0;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: 0 rows");
	MK_REPORT();
	r.rows = (1U << 31) + 1;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: 2^31 + 1 rows");
	MK_REPORT();
	r.rows = 1U << 31;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), 0, "REPORT: 2^31 rows");
	MK_REPORT();
	r.error = 5;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: a positive error");
	MK_REPORT();
	r.error = -4096;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), EINVAL, "REPORT: error below -MAX_ERRNO");
	MK_REPORT();
	r.error = -ETIMEDOUT;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), 0, "REPORT: error -ETIMEDOUT");
	MK_REPORT();
	r.handle = 0;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), ENOENT, "REPORT: handle 0");
	MK_REPORT();
	r.handle = 4097;
	expect(xio(dev_fd, ENGRAM_IOC_REPORT, &r), ENOENT, "REPORT: handle not open on this fd");
	e = ioctl(dev_fd, ENGRAM_IOC_REPORT, NULL) < 0 ? errno : 0;
	expect(e, EFAULT, "REPORT: NULL argument");
#undef MK_REPORT
}

static void wait_cases(void)
{
	struct engram_ioc_fetch a;
	struct engram_ioc_wait w;
	uint32_t rows[16];
	uint64_t t[3];
	int e, rv, i, n;
	bool seen[3] = { false, false, false };

	n = drain();
	if (n)
		diag("%d fetches were still outstanding", n);
	expect(wait_ticket(0, NULL), ENOENT, "WAIT(0) with no fetch outstanding is ENOENT");
	expect(wait_ticket(12345678, NULL), ENOENT, "WAIT on an unknown ticket is ENOENT");
	w = mk_wait(0);
	w.flags = ENGRAM_FETCH_RANGES;
	expect(xio(dev_fd, ENGRAM_IOC_WAIT, &w), EINVAL, "WAIT: flag RANGES is EINVAL");
	w = mk_wait(0);
	w.flags = 1U << 2;
	expect(xio(dev_fd, ENGRAM_IOC_WAIT, &w), EINVAL, "WAIT: flag bit 2 is EINVAL");
	w = mk_wait(0);
	w.reserved0 = 1;
	expect(xio(dev_fd, ENGRAM_IOC_WAIT, &w), EINVAL, "WAIT: reserved0 nonzero is EINVAL");
	w = mk_wait(0);
	w.reserved[0] = 1;
	expect(xio(dev_fd, ENGRAM_IOC_WAIT, &w), EINVAL, "WAIT: reserved[0] nonzero is EINVAL");
	w = mk_wait(0);
	w.reserved[1] = 1;
	expect(xio(dev_fd, ENGRAM_IOC_WAIT, &w), EINVAL, "WAIT: reserved[1] nonzero is EINVAL");
	rv = poll_in(0);
	tap(rv == 0, "poll() with nothing outstanding reports nothing (%d)", rv);

	/* SUBMIT then WAIT(ticket): the rows are those a FETCH gives. */
	fill_rows(rows, 16);
	memset(sb.p, 0, 16 * ROW);
	a = mk_fetch(rows, 16, sb.id, 0);
	e = submit(&a);
	expect(e, 0, "SUBMIT works");
	tap(a.ticket != 0, "SUBMIT: ... and gives a ticket (%" PRIu64 ")", (uint64_t)a.ticket);
	expect(wait_ticket(12345678, NULL), ENOENT,
	       "WAIT on an unknown ticket with a fetch outstanding is ENOENT");
	e = wait_ticket(a.ticket, &w);
	expect(e, 0, "WAIT(ticket) after SUBMIT works");
	tap(!e && !w.error && w.done_ticket == a.ticket && !w.wire_status,
	    "WAIT(ticket): ... done_ticket %" PRIu64 " error %d wire_status %u", (uint64_t)w.done_ticket,
	    w.error, w.wire_status);
	{
		struct engram_ioc_fetch p = mk_fetch(rows, 16, vb.id, 0);

		e = fetch(&p);
		tap(!e && !memcmp(sb.p, vb.p, 16 * ROW),
		    "WAIT(ticket): ... and the rows are those a FETCH gives");
	}
	expect(wait_ticket(a.ticket, NULL), ENOENT, "WAIT on a ticket already reaped is ENOENT");

	a = mk_fetch(rows, 16, sb.id, 0);
	e = submit(&a);
	e = e ? e : wait_ticket(0, &w);
	expect(e, 0, "SUBMIT then WAIT(0) works");
	tap(!e && w.done_ticket == a.ticket && !w.error,
	    "WAIT(0): ... reports the ticket (%" PRIu64 ", want %" PRIu64 ")", (uint64_t)w.done_ticket,
	    (uint64_t)a.ticket);
	expect(wait_ticket(0, NULL), ENOENT, "WAIT(0) again is ENOENT");

	a = mk_fetch(rows, 16, sb.id, 0);
	a.flags = ENGRAM_FETCH_BUSY_POLL;
	e = submit(&a);
	if (!e) {
		w = mk_wait(a.ticket);
		w.flags = ENGRAM_FETCH_BUSY_POLL;
		e = xio(dev_fd, ENGRAM_IOC_WAIT, &w);
	}
	expect(e, 0, "SUBMIT and WAIT with ENGRAM_FETCH_BUSY_POLL work");

	/* poll(): POLLIN once a submitted fetch has ended. */
	a = mk_fetch(rows, 16, sb.id, 0);
	e = submit(&a);
	rv = e ? -1 : poll_in(30000);
	tap(rv > 0 && (rv & POLLIN), "poll() reports POLLIN after a SUBMIT completes (revents "
	    "0x%x)", rv);
	rv = e ? -1 : poll_in(0);
	tap(rv > 0 && (rv & POLLIN), "poll() ... still, until WAIT (0x%x)", rv);
	expect(e ? e : wait_ticket(a.ticket, NULL), 0, "WAIT after POLLIN works");
	rv = poll_in(0);
	tap(rv == 0, "poll() after the WAIT reports nothing (%d)", rv);

	/* Three at once, reaped by WAIT(0) in any order, each once. */
	for (i = 0; i < 3; i++) {
		a = mk_fetch(rows, 16, sb.id, (uint64_t)i * 16 * ROW);
		e = submit(&a);
		t[i] = e ? 0 : a.ticket;
		if (e)
			break;
	}
	expect(e, 0, "three SUBMITs at once work");
	n = 0;
	while (!wait_ticket(0, &w)) {
		for (i = 0; i < 3; i++)
			if (w.done_ticket == t[i] && !seen[i]) {
				seen[i] = true;
				n++;
			}
		if (w.error)
			diag("ticket %" PRIu64 ": error %d", (uint64_t)w.done_ticket, w.error);
	}
	tap(n == 3, "WAIT(0) reaps the three, each once (%d)", n);
	timeout_cases();
	signal_cases();
}

/* ------------------------------------------------------------------ */
/* Lifetimes                                                           */

static void lifetime_cases(void)
{
	struct engram_ioc_fetch a;
	struct engram_ioc_wait w;
	struct rbuf b2;
	long pin0 = vm_pin(), pin;
	uint32_t n = max_rows;
	int e, rv, fd2, i, sent = 0;
	uint32_t h2 = 0, id2 = 0, per = max_rows < barrier_rows ? max_rows : barrier_rows;

	/*
	 * UNREG_BUF under a fetch in flight: a barrier.  A fetch small enough
	 * to end within the 2 s UNREG_BUF waits (--barrier-rows), so the connection stays up
	 * (t_63_barriers breaks one that does not end in time).
	 */
	fill_rows(rowbuf, n);
	reg_or_bail(&b2, big.len);
	diag("VmPin %ld kB with the extra %zu-byte buffer", vm_pin(), b2.len);
	a = mk_fetch(rowbuf, per, b2.id, 0);
	e = submit(&a);
	expect(e, 0, "SUBMIT of %u rows (%zu bytes)", per, (size_t)per * ROW);
	rv = poll_in(0);
	e = unreg_fd(dev_fd, b2.id);
	diag("at UNREG_BUF the fetch had %s", rv > 0 ? "already ended" : "not ended yet");
	expect(e, 0, "UNREG_BUF of its buffer while it is in flight works");
	tap(poll_in(0) > 0, "... and returns only once the fetch has ended");
	pin = vm_pin();
	tap(pin == pin0 + (long)(b2.len / 1024), "... but the buffer stays pinned while the "
	    "fetch may write it (VmPin %ld kB)", pin);
	{
		struct engram_ioc_fetch f = mk_fetch(rowbuf, 4, b2.id, 0);

		expect(fetch(&f), ENOENT, "a new FETCH into the unregistered buffer is ENOENT");
	}
	e = wait_ticket(a.ticket, &w);
	expect(e, 0, "WAIT for the fetch after its buffer was unregistered returns");
	diag("that fetch ended with error %d wire_status %u", w.error, w.wire_status);
	tap(!e && (w.error == 0 || w.error == -ECONNRESET || w.error == -ETIMEDOUT),
	    "... and the fetch itself ended (error %d)", w.error);
	pin = vm_pin();
	tap(pin == pin0, "... and then the pages are unpinned (VmPin %ld kB, was %ld kB)", pin,
	    pin0);
	munmap(b2.p, b2.len);
	good_fetch("after UNREG_BUF under a fetch");

	/* munmap() under a fetch in flight: the pins keep the pages. */
	reg_or_bail(&b2, big.len);
	a = mk_fetch(rowbuf, n, b2.id, 0);
	e = submit(&a);
	munmap(b2.p, b2.len);
	expect(e ? e : wait_ticket(a.ticket, NULL), 0,
	       "a fetch into a buffer munmap()ed while in flight completes");
	a = mk_fetch(rowbuf, 16, b2.id, 0);
	expect(fetch(&a), 0, "a FETCH into the registered but munmap()ed buffer works");
	expect(unreg_fd(dev_fd, b2.id), 0, "and UNREG_BUF of it works");
	tap(vm_pin() == pin0, "... VmPin back to %ld kB (%ld kB)", pin0, vm_pin());

	/* Close a second fd with fetches in flight. */
	fd2 = open(dev_path, O_RDWR | O_CLOEXEC);
	if (fd2 < 0)
		bail("open %s: %s", dev_path, strerror(errno));
	{
		struct engram_ioc_open o = mk_open();

		e = xio(fd2, ENGRAM_IOC_OPEN_TABLE, &o);
		h2 = o.handle;
		b2.len = (size_t)4 * per * ROW;
		b2.p = map(b2.len, PROT_READ | PROT_WRITE);
		e = e ? e : reg_fd(fd2, b2.p, b2.len, &id2);
	}
	for (i = 0; !e && i < 4; i++) {
		a = mk_fetch(rowbuf, per, id2, (uint64_t)i * per * ROW);
		a.handle = h2;
		e = xio(fd2, ENGRAM_IOC_SUBMIT, &a);
		if (!e)
			sent++;
	}
	expect(e, 0, "a second fd: 4 SUBMITs of %u rows", per);
	{
		struct timespec t0, t1;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		close(fd2);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		diag("close() with %d fetches in flight took %ld ms", sent,
		     (long)((t1.tv_sec - t0.tv_sec) * 1000 + (t1.tv_nsec - t0.tv_nsec) / 1000000));
	}
	munmap(b2.p, b2.len);
	tap(vm_pin() == pin0, "closing it unpins its buffer (VmPin %ld kB, was %ld kB)",
	    vm_pin(), pin0);
	expect(wait_ticket(0, NULL), ENOENT, "the first fd has none of its fetches");
	good_fetch("on the first fd after the second was closed with fetches in flight");

	/* Per-fd limits. */
	fd2 = open(dev_path, O_RDWR | O_CLOEXEC);
	if (fd2 < 0)
		bail("open %s: %s", dev_path, strerror(errno));
	b2.len = 1024 * pg;
	b2.p = map(b2.len, PROT_READ | PROT_WRITE);
	for (i = 0, e = 0; i < 1024 && !e; i++)
		e = reg_fd(fd2, b2.p + (size_t)i * pg, pg, NULL);
	expect(e, 0, "1,024 buffers on one fd work");
	expect(reg_fd(fd2, b2.p, pg, NULL), EMFILE, "the 1,025th buffer is EMFILE");
	for (i = 0, e = 0; i < 4096 && !e; i++) {
		struct engram_ioc_open o = mk_open();

		e = xio(fd2, ENGRAM_IOC_OPEN_TABLE, &o);
	}
	expect(e, 0, "4,096 OPEN_TABLEs on one fd work");
	{
		struct engram_ioc_open o = mk_open();

		expect(xio(fd2, ENGRAM_IOC_OPEN_TABLE, &o), EMFILE, "the 4,097th is EMFILE");
	}
	close(fd2);
	munmap(b2.p, b2.len);
	tap(vm_pin() == pin0, "closing that fd unpins the 1,024 buffers (VmPin %ld kB)", vm_pin());
}

/* ------------------------------------------------------------------ */

static void usage(void)
{
	fprintf(stderr, "usage: ioctl_bad --table NAME --rows-total N [--dev PATH] "
		"[--barrier-rows N]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "table", required_argument, NULL, 't' },
		{ "rows-total", required_argument, NULL, 'r' },
		{ "dev", required_argument, NULL, 'd' },
		{ "barrier-rows", required_argument, NULL, 'b' },
		{ NULL, 0, NULL, 0 }
	};
	struct engram_ioc_open o;
	size_t big_len;
	uint32_t i;
	char *end;
	int c, e;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 't':
			table_name = optarg;
			break;
		case 'r':
			errno = 0;
			rows_total = strtoull(optarg, &end, 0);
			if (errno || *end || !rows_total || rows_total > UINT32_MAX)
				usage();
			break;
		case 'd':
			dev_path = optarg;
			break;
		case 'b':
			errno = 0;
			barrier_rows = strtoul(optarg, &end, 0);
			if (errno || *end || !barrier_rows)
				usage();
			break;
		default:
			usage();
		}
	}
	if (!table_name || !rows_total || optind != argc || !*table_name ||
	    strlen(table_name) >= ENGRAM_NAME_MAX)
		usage();
	setvbuf(stdout, NULL, _IOLBF, 0);
	pg = (size_t)sysconf(_SC_PAGESIZE);

	dev_fd = open(dev_path, O_RDWR | O_CLOEXEC);
	if (dev_fd < 0)
		bail("open %s: %s", dev_path, strerror(errno));
	o = mk_open();
	e = xio(dev_fd, ENGRAM_IOC_OPEN_TABLE, &o);
	if (e)
		bail("OPEN_TABLE %s: %s", table_name, strerror(e));
	if (o.rows != rows_total || o.row_bytes != ROW || !o.max_rows)
		bail("table %s: %" PRIu64 " rows of %u bytes, max_rows %u; --rows-total %" PRIu64,
		     table_name, (uint64_t)o.rows, o.row_bytes, o.max_rows, rows_total);
	handle = o.handle;
	max_rows = o.max_rows;
	link_id = o.link_out;
	memcpy(table_sha, o.sha256_out, sizeof(table_sha));
	diag("table %s: handle %u link %u rows %" PRIu64 " max_rows %u; page %zu", table_name,
	     handle, link_id, (uint64_t)o.rows, max_rows, pg);

	hole = map(2 * pg, PROT_READ | PROT_WRITE);
	edge = hole;
	hole += pg;
	munmap(hole, pg);
	argpg = map(2 * pg, PROT_READ | PROT_WRITE);
	rowbuf = calloc((size_t)max_rows + 1, sizeof(*rowbuf));
	if (!rowbuf)
		bail("out of memory");
	for (i = 0; i <= max_rows; i++)
		rowbuf[i] = (uint32_t)(rnd() % rows_total);
	reg_or_bail(&vb, ((size_t)NV * ROW + VOFF + (size_t)NV * (ROW + VGAP) + 64 + pg - 1) &
		    ~(pg - 1));
	reg_or_bail(&sb, 64 << 10);
	reg_or_bail(&sb2, 64 << 10);
	big_len = ((size_t)max_rows * ROW + pg - 1) & ~(pg - 1);
	if (big_len < (8u << 20) + 16 * pg)
		big_len = (8u << 20) + 16 * pg;
	reg_or_bail(&big, big_len);

	good_fetch("at the start");
	size_cases();
	pointer_cases();
	good_fetch("after the size and pointer cases");
	open_cases();
	reg_cases();
	good_fetch("after the OPEN_TABLE and REG_BUF cases");
	fetch_cases();
	word_cases();
	good_fetch("after the FETCH refusals");
	wait_cases();
	report_cases();
	lifetime_cases();
	good_fetch("at the end");
	e = close(dev_fd) ? errno : 0;
	expect(e, 0, "close() of the device");
	tap(vm_pin() == 0, "after close() nothing of this process is pinned (VmPin %ld kB)",
	    vm_pin());
	printf("1..%d\n", t_no);
	return t_fail ? 1 : 0;
}
