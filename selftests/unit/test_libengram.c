// SPDX-License-Identifier: GPL-2.0
/*
 * Unit tests for tools/libengram, linked against libengram.so.0 itself (so
 * every function used here must be exported), without the kernel module:
 *
 * - arguments the library refuses itself come back as -EINVAL (or
 *   -ENAMETOOLONG) before any system call: the context is opened on
 *   /dev/null, where every ioctl fails with ENOTTY, so a call that reached
 *   the kernel would say -ENOTTY instead;
 * - valid calls do reach the ioctl, and its errno comes back unchanged, in
 *   the return value and in struct engram_result;
 * - engram_open() refuses what is not a character device;
 * - status names are the module's own (kmod/wire.c), errors are described.
 *
 * `test_libengram --layout` prints the public structs' sizes and offsets
 * for the Python binding's test.
 */
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libengram.h"
#include "tap.h"
#include "wire.h"

#define F(type, field)	printf(" %s %zu", #field, offsetof(struct type, field))

static int layout(void)
{
	printf("engram_table_info %zu", sizeof(struct engram_table_info));
	F(engram_table_info, handle); F(engram_table_info, link); F(engram_table_info, rows);
	F(engram_table_info, generation); F(engram_table_info, row_bytes);
	F(engram_table_info, max_rows); F(engram_table_info, sha256);
	F(engram_table_info, name); F(engram_table_info, weight_offset);
	F(engram_table_info, scale_offset); F(engram_table_info, reserved);
	printf("\nengram_result %zu", sizeof(struct engram_result));
	F(engram_result, ticket); F(engram_result, error); F(engram_result, wire_status);
	F(engram_result, bad_index); F(engram_result, flags); F(engram_result, rtt_ns);
	F(engram_result, remote_error); F(engram_result, reserved0);
	F(engram_result, local_ns); F(engram_result, reserved);
	printf("\nengram_range %zu", sizeof(struct engram_range));
	F(engram_range, buf_id); F(engram_range, reserved); F(engram_range, offset);
	F(engram_range, length);
	printf("\nengram_word %zu", sizeof(struct engram_word));
	F(engram_word, buf_id); F(engram_word, reserved); F(engram_word, offset);
	F(engram_word, value);
	printf("\n");
	return 0;
}

static void is(long got, long want, const char *what)
{
	if (!tap_ok(got == want, "%s", what))
		tap_diag("got %ld (%s), want %ld (%s)", got, got < 0 ? strerror((int)-got) : "-",
			 want, want < 0 ? strerror((int)-want) : "-");
}

static void test_open(void)
{
	char tmpl[] = "/tmp/test_libengram.XXXXXX";
	struct engram *e = (struct engram *)&e;
	int fd;

	is(engram_open("/dev/null", NULL), -EINVAL, "engram_open: NULL out is -EINVAL");
	is(engram_open("/nonexistent/engram_rdma", &e), -ENOENT,
	   "engram_open: a missing device is open(2)'s -ENOENT");
	tap_ok(e == NULL, "engram_open: out is NULL after a failure");
	fd = mkstemp(tmpl);
	if (fd >= 0) {
		close(fd);
		is(engram_open(tmpl, &e), -ENODEV, "engram_open: a regular file is -ENODEV");
		unlink(tmpl);
	} else {
		tap_ok(0, "mkstemp: %s", strerror(errno));
	}
	is(engram_open("/dev/null", &e), 0, "engram_open: a character device opens");
	tap_ok(engram_fd(e) >= 0 && fcntl(engram_fd(e), F_GETFD) == FD_CLOEXEC,
	       "engram_fd: an open descriptor with FD_CLOEXEC");
	engram_close(e);
	is(engram_fd(NULL), -EINVAL, "engram_fd(NULL) is -EINVAL");
	engram_close(NULL);
	tap_ok(1, "engram_close(NULL) does nothing");
}

static void test_table(struct engram *e)
{
	char name[LIBENGRAM_NAME_MAX + 1];
	struct engram_table_info info;
	uint8_t sha[LIBENGRAM_SHA256_LEN] = { 1 };

	is(engram_table_open(NULL, 0, "t", NULL, &info), -EINVAL,
	   "table_open: NULL context is -EINVAL");
	is(engram_table_open(e, 0, NULL, NULL, &info), -EINVAL,
	   "table_open: neither name nor sha256 is -EINVAL");
	memset(name, 'a', LIBENGRAM_NAME_MAX);
	name[LIBENGRAM_NAME_MAX] = 0;
	is(engram_table_open(e, 0, name, NULL, &info), -ENAMETOOLONG,
	   "table_open: a 64-byte name is -ENAMETOOLONG");
	name[LIBENGRAM_NAME_MAX - 1] = 0;
	is(engram_table_open(e, 0, name, NULL, &info), -ENOTTY,
	   "table_open: a 63-byte name reaches the ioctl");
	is(engram_table_open(e, 3, NULL, sha, NULL), -ENOTTY,
	   "table_open: by sha256 alone, without info, reaches the ioctl");
}

static void test_buf(struct engram *e)
{
	static char mem[4096];
	uint32_t id = 77;

	is(engram_buf_register(NULL, mem, sizeof(mem), &id), -EINVAL,
	   "buf_register: NULL context is -EINVAL");
	is(engram_buf_register(e, NULL, sizeof(mem), &id), -EINVAL,
	   "buf_register: NULL address is -EINVAL");
	is(engram_buf_register(e, mem, 0, &id), -EINVAL, "buf_register: zero length is -EINVAL");
	is(engram_buf_register(e, mem, sizeof(mem), NULL), -EINVAL,
	   "buf_register: NULL buf_id is -EINVAL");
	is(engram_buf_register(e, mem, sizeof(mem), &id), -ENOTTY,
	   "buf_register: valid arguments reach the ioctl");
	is(id, 77, "buf_register: buf_id untouched on failure");
	is(engram_buf_unregister(NULL, 1), -EINVAL, "buf_unregister: NULL context is -EINVAL");
	is(engram_buf_unregister(e, 1), -ENOTTY, "buf_unregister: reaches the ioctl");
}

static void test_fetch(struct engram *e)
{
	uint32_t rows[3] = { 0, 1, 2 };
	struct engram_range r[2] = { { .buf_id = 1, .length = 264 }, { .buf_id = 1, .length = 528 } };
	struct engram_result res;

	is(engram_fetch(NULL, 1, rows, 3, 1, 0, 264, 0, 0, &res), -EINVAL,
	   "fetch: NULL context is -EINVAL");
	is(engram_fetch(e, 1, NULL, 3, 1, 0, 264, 0, 0, &res), -EINVAL,
	   "fetch: NULL rows is -EINVAL");
	is(engram_fetch(e, 1, rows, 0, 1, 0, 264, 0, 0, &res), -EINVAL,
	   "fetch: zero rows is -EINVAL");
	is(engram_fetch(e, 1, rows, 3, 1, 0, 264, 0, 1U << 1, &res), -EINVAL,
	   "fetch: an unknown flag is -EINVAL");
	is(engram_fetch(e, 1, rows, 3, 1, 0, 264, 0, 1U << 16, &res), -EINVAL,
	   "fetch: a reserved library flag is -EINVAL");
	memset(&res, 0xff, sizeof(res));
	is(engram_fetch(e, 1, rows, 3, 1, 0, 0, 0, LIBENGRAM_BUSY_POLL, &res), -ENOTTY,
	   "fetch: valid arguments (stride 0, busy poll) reach the ioctl");
	tap_ok(res.error == -ENOTTY && res.wire_status == 0 && res.bad_index == 0 &&
	       res.ticket == 0 && res.flags == 0 && res.rtt_ns == 0,
	       "fetch: the result carries the ioctl's error and nothing else");
	is(engram_fetch(e, 1, rows, 3, 1, 0, 100, 0, 0, NULL), -ENOTTY,
	   "fetch: a small stride is left to the kernel; NULL result is fine");

	is(engram_fetch_ranges(e, 1, rows, 3, NULL, 2, 264, 0, 0, &res), -EINVAL,
	   "fetch_ranges: NULL ranges is -EINVAL");
	is(engram_fetch_ranges(e, 1, rows, 3, r, 0, 264, 0, 0, &res), -EINVAL,
	   "fetch_ranges: zero ranges is -EINVAL");
	is(engram_fetch_ranges(e, 1, NULL, 3, r, 2, 264, 0, 0, &res), -EINVAL,
	   "fetch_ranges: NULL rows is -EINVAL");
	is(engram_fetch_ranges(e, 1, rows, 3, r, 2, 264, 0, 0, &res), -ENOTTY,
	   "fetch_ranges: valid arguments reach the ioctl");
	is(engram_fetch_ranges(e, 1, rows, 3, r, 17, 264, 0, 0, &res), -ENOTTY,
	   "fetch_ranges: more ranges than the wire allows are left to the kernel");

	is(engram_submit(e, 1, rows, 3, 1, 0, 264, 0, LIBENGRAM_BUSY_POLL, &res), -EINVAL,
	   "submit: busy poll (a wait flag) is -EINVAL");
	is(engram_submit(e, 1, NULL, 3, 1, 0, 264, 0, 0, &res), -EINVAL,
	   "submit: NULL rows is -EINVAL");
	is(engram_submit(e, 1, rows, 3, 1, 0, 264, 0, 0, &res), -ENOTTY,
	   "submit: valid arguments reach the ioctl");
	is(engram_submit_ranges(e, 1, rows, 3, NULL, 1, 264, 0, 0, &res), -EINVAL,
	   "submit_ranges: NULL ranges is -EINVAL");
	is(engram_submit_ranges(e, 1, rows, 3, r, 2, 264, 0, 0, &res), -ENOTTY,
	   "submit_ranges: valid arguments reach the ioctl");

	{
		struct engram_word w = { .buf_id = 1, .offset = 8, .value = 1 };

		is(engram_submit_word(e, 1, rows, 3, NULL, 0, 1, 0, 264, 0, NULL, 0, &res),
		   -EINVAL, "submit_word: NULL word is -EINVAL");
		is(engram_submit_word(e, 1, rows, 3, NULL, 0, 1, 0, 264, 0, &w,
				      LIBENGRAM_BUSY_POLL, &res),
		   -EINVAL, "submit_word: busy poll (a wait flag) is -EINVAL");
		is(engram_submit_word(e, 1, rows, 3, r, 2, 1, 0, 264, 0, &w, 0, &res), -EINVAL,
		   "submit_word: ranges with a buf_id is -EINVAL");
		w.value = LIBENGRAM_WORD_FAILED | 1;
		is(engram_submit_word(e, 1, rows, 3, NULL, 0, 1, 0, 264, 0, &w, 0, &res), -EINVAL,
		   "submit_word: a value with bit 63 set is -EINVAL");
		w.value = 1;
		w.reserved = 1;
		is(engram_submit_word(e, 1, rows, 3, NULL, 0, 1, 0, 264, 0, &w, 0, &res), -EINVAL,
		   "submit_word: reserved nonzero is -EINVAL");
		w.reserved = 0;
		is(engram_submit_word(e, 1, rows, 3, NULL, 0, 1, 0, 264, 0, &w, 0, &res), -ENOENT,
		   "submit_word: a word in a buffer the context does not know is -ENOENT");
	}

	is(engram_wait(NULL, 0, 0, 0, &res), -EINVAL, "wait: NULL context is -EINVAL");
	is(engram_wait(e, 0, 0, 1U << 3, &res), -EINVAL, "wait: an unknown flag is -EINVAL");
	memset(&res, 0xff, sizeof(res));
	is(engram_wait(e, 5, 1000, LIBENGRAM_BUSY_POLL, &res), -ENOTTY,
	   "wait: valid arguments reach the ioctl");
	tap_ok(res.ticket == 0 && res.error == -ENOTTY,
	       "wait: a failed wait reports no completed ticket");
}

static void test_names(void)
{
	unsigned int s, t;
	int distinct = 1, same = 1;
	char ver[32];

	for (s = 0; s <= ENGRAM_WIRE_STATUS_MAX; s++) {
		if (strcmp(engram_status_name(s), engram_wire_status_name(s))) {
			same = 0;
			tap_diag("status %u: libengram '%s', module '%s'", s,
				 engram_status_name(s), engram_wire_status_name(s));
		}
		for (t = 0; t < s; t++)
			if (!strcmp(engram_status_name(s), engram_status_name(t)))
				distinct = 0;
	}
	tap_ok(same, "status names are the module's (kmod/wire.c) for 0..%d",
	       ENGRAM_WIRE_STATUS_MAX);
	tap_ok(distinct, "status names are distinct");
	tap_ok(!strcmp(engram_status_name(ENGRAM_WIRE_STATUS_MAX + 1), "unknown") &&
	       !strcmp(engram_status_name(UINT32_MAX), "unknown"),
	       "statuses outside the protocol are \"unknown\"");

	tap_contains(engram_strerror(-ERANGE), "out of range", "strerror(-ERANGE) names the row range");
	tap_ok(engram_strerror(ERANGE) == engram_strerror(-ERANGE), "strerror takes either sign");
	tap_contains(engram_strerror(-ESTALE), "generation", "strerror(-ESTALE) names the generation");
	tap_contains(engram_strerror(-ENOENT), "No such file", "strerror of other errnos is strerror()'s");
	tap_ok(engram_strerror(-123456) != NULL, "strerror of an unknown errno is not NULL");
	snprintf(ver, sizeof(ver), "%d.%d.%d", LIBENGRAM_VERSION_MAJOR, LIBENGRAM_VERSION_MINOR,
		 LIBENGRAM_VERSION_PATCH);
	tap_ok(!strcmp(engram_version(), ver), "engram_version() is the header's version (%s)",
	       engram_version());
}

int main(int argc, char **argv)
{
	struct engram *e = NULL;

	if (argc > 1 && !strcmp(argv[1], "--layout"))
		return layout();
	test_open();
	if (engram_open("/dev/null", &e)) {
		tap_ok(0, "cannot open /dev/null");
		return tap_done();
	}
	test_table(e);
	test_buf(e);
	test_fetch(e);
	engram_close(e);
	test_names();
	return tap_done();
}
