// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl commands end to end against the in-process kernel stand-in
 * (mock_nl.c): what each command sends, how it follows a load or verify,
 * what it cleans up after a failure or Ctrl-C, what it prints, and its exit
 * status.  main.c is built with main renamed so it can be called repeatedly.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jansson.h>

#include "engramctl.h"
#include "gen.h"
#include "mock_nl.h"
#include "tap.h"

int engramctl_main(int argc, char **argv);

static char out[65536], err[65536];
static char file[4096], real[PATH_MAX], sha_hex[65];
static struct gen_plan plan;

static void slurp(FILE *f, char *buf, size_t len)
{
	size_t n;

	rewind(f);
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
}

/* Runs "engramctl ARGS..." with stdout and stderr captured; returns the exit status. */
static int run(const char *first, ...)
{
	char *argv[32] = { "engramctl" };
	int argc = 1, so, se, rc;
	const char *a;
	FILE *fo = tmpfile(), *fe = tmpfile();
	va_list ap;

	va_start(ap, first);
	for (a = first; a && argc < 31; a = va_arg(ap, const char *))
		argv[argc++] = (char *)a;
	va_end(ap);
	argv[argc] = NULL;

	fflush(stdout);
	fflush(stderr);
	so = dup(1);
	se = dup(2);
	dup2(fileno(fo), 1);
	dup2(fileno(fe), 2);
	memset(&opts, 0, sizeof(opts));
	optind = 0;
	rc = engramctl_main(argc, argv);
	fflush(stdout);
	fflush(stderr);
	dup2(so, 1);
	dup2(se, 2);
	close(so);
	close(se);
	slurp(fo, out, sizeof(out));
	slurp(fe, err, sizeof(err));
	return rc;
}

static void show_output(void)
{
	if (out[0])
		tap_diag("stdout: %s", out);
	if (err[0])
		tap_diag("stderr: %s", err);
}

static int make_file(void)
{
	static const char *const prefixes[] = { "a", "b" };
	struct gen_params p = { .rows = 3, .prefixes = prefixes, .nprefixes = 2,
				.pad_before = 5 };
	const char *dir = getenv("TMPDIR");
	char errbuf[256], cmd[8300];
	FILE *pp;
	int fd;

	snprintf(file, sizeof(file), "%s/engram-cli-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(file);
	if (fd < 0 || gen_plan(&p, &plan, errbuf, sizeof(errbuf)) ||
	    gen_write(fd, &p, &plan, errbuf, sizeof(errbuf)))
		return -1;
	close(fd);
	if (!realpath(file, real))
		return -1;
	snprintf(cmd, sizeof(cmd), "sha256sum '%s'", file);
	pp = popen(cmd, "r");
	if (!pp || fread(sha_hex, 1, 64, pp) != 64)
		return -1;
	sha_hex[64] = '\0';
	pclose(pp);
	return 0;
}

static void test_load(void)
{
	json_t *j;
	int rc;

	mock_reset();
	rc = run("table", "load", file, "--tensor", "b", "--sha256", sha_hex, "--no-progress",
		 NULL);
	tap_ok(rc == 0, "load: exit 0") || (show_output(), 0);
	tap_ok(!strcmp(mock.log, "LOAD GET GET GET GET "), "load: LOAD, then GET until ready");
	tap_ok(mock.rows == 3 && mock.woff == plan.weight_offset[1] &&
	       mock.soff == plan.scale_offset[1] && mock.wbytes == 256 && mock.sbytes == 8 &&
	       mock.has_sha, "load: rows, both absolute offsets, row geometry, digest sent");
	tap_ok(mock.fd_ok, "load: fd is O_RDONLY|O_CLOEXEC on the file");
	tap_ok(!strcmp(mock.path, real), "load: path is the realpath");
	tap_contains(out, "b: loaded, generation 1, 3 rows, ", "load: summary line");
	tap_contains(out, "  sha256 5a5a5a5a", "load: digest line");
	tap_ok(!err[0], "load --no-progress: nothing on stderr");

	mock_reset();
	rc = run("load", file, "-t", "a", "--name", "engram1", NULL);
	tap_ok(rc == 0 && mock_find_name_ok("engram1"), "load shortcut with --name");
	tap_contains(err, "loading engram1: 25% (", "load: plain progress lines when not a tty");

	mock_reset();
	rc = run("-j", "load", file, "--tensor", "a", "--no-progress", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && j && !strcmp(json_string_value(json_object_get(j, "state")), "ready") &&
	       json_integer_value(json_object_get(j, "rows")) == 3 &&
	       json_integer_value(json_object_get(j, "weight_offset")) ==
	       (json_int_t)plan.weight_offset[0], "load -j: final table object");
	json_decref(j);
}

static void test_load_errors(void)
{
	int rc;

	mock_reset();
	mock.no_module = 1;
	rc = run("load", file, "--tensor", "a", NULL);
	tap_ok(rc == 1, "module not loaded: exit 1");
	tap_contains(err, "engramctl: engram_rdma module not loaded", "  ...says so");

	mock_reset();
	mock.refuse_load = 1;
	rc = run("load", file, "--tensor", "a", NULL);
	tap_ok(rc == 1 && !strcmp(mock.log, "LOAD "), "refused load: exit 1, nothing more sent");
	tap_contains(err, "engramctl: load a: Invalid argument: rows do not fit the file "
		     "(attribute TABLE_ROWS)\n", "  ...strerror, extack, attribute");

	mock_reset();
	mock.eperm = 1;
	rc = run("load", file, "--tensor", "a", NULL);
	tap_ok(rc == 1, "EPERM: exit 1");
	tap_contains(err, "Operation not permitted (needs CAP_NET_ADMIN)", "  ...with the hint");

	mock_reset();
	mock.fail_load = 1;
	rc = run("load", file, "--tensor", "a", "--no-progress", NULL);
	tap_ok(rc == 1 && strstr(mock.log, "GET UNLOAD ") && !mock_find_name_ok("a"),
	       "failed load: exit 1 and the failed table is unloaded");
	tap_contains(err,
		     "engramctl: a: load failed: Input/output error: read error at offset 4096",
		     "  ...with the kernel's errno and message");

	mock_reset();
	mock.interrupt_at_get = 2;
	rc = run("load", file, "--tensor", "a", "--no-progress", NULL);
	tap_ok(rc == 130 && !strcmp(mock.log, "LOAD GET GET UNLOAD ") && !mock_find_name_ok("a"),
	       "SIGINT while loading: unload, exit 130");
	tap_contains(err, "load cancelled", "  ...says load cancelled");

	mock_reset();
	rc = run("load", file, "--tensor", "c", NULL);
	tap_ok(rc == 1 && !mock.log[0], "unknown prefix: refused before any netlink");
	tap_contains(err, "tensor 'c.weight' not found (Engram tables in this file: a, b)",
		     "  ...names the tables the file has");

	rc = run("load", file, "--tensor", "a", "--sha256", "12", NULL);
	tap_ok(rc == 2, "short --sha256: usage error");
	tap_contains(err, "--sha256: expected 64 hex digits, got 2", "  ...with the reason");
	rc = run("load", file, "--tensor", "a", "--name", "no/slash", NULL);
	tap_ok(rc == 2, "bad --name: usage error");
	rc = run("load", "/nonexistent/x.safetensors", "--tensor", "a", NULL);
	tap_ok(rc == 1, "missing file: exit 1");
	tap_contains(err, "/nonexistent/x.safetensors: No such file or directory", "  ...says so");
	rc = run("load", "--tensor", "a", NULL);
	tap_ok(rc == 2, "load without FILE: usage error");
	tap_contains(err, "FILE missing", "  ...says FILE missing");
}

static void test_list_show(void)
{
	json_t *j;
	int rc;

	mock_reset();
	mock_add("zeta", ENGRAM_TABLE_READY, 10)->verify = ENGRAM_VERIFY_OK;
	mock_add("alpha", ENGRAM_TABLE_LOADING, 10);
	rc = run("list", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "DUMP "), "list: one dump");
	tap_ok(strstr(out, "alpha: state loading 0.0% gen 2 rows 10 row_bytes 264 pinned 0 B "
			   "path /models/alpha.safetensors\nzeta: state ready gen 1 rows 10 "
			   "row_bytes 264 pinned 6.6 KiB verify ok sha256 5a5a") == out,
	       "list: sorted lines with state, gen, rows, row bytes, pinned, verify, sha256") ||
		(show_output(), 0);
	rc = run("-j", "table", "list", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(j) == 2 &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 1), "sha256")),
		       "5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a5a") &&
	       json_integer_value(json_object_get(json_array_get(j, 1), "pinned_bytes")) == 6736,
	       "list -j: array, hex digest, exact bytes");
	json_decref(j);
	rc = run("table", NULL);
	tap_ok(rc == 0 && strstr(out, "zeta: state ready"), "bare 'table' lists");
	rc = run("show", "zeta", NULL);
	tap_ok(rc == 0 && strstr(out, "table zeta\n  state           ready\n") &&
	       strstr(out, "  pinned          6.6 KiB (6736)\n"), "show NAME: detail block") ||
		(show_output(), 0);
	rc = run("show", "nope", NULL);
	tap_ok(rc == 1, "show unknown: exit 1");
	tap_contains(err, "engramctl: table nope: No such file or directory: no table named 'nope'",
		     "  ...with the kernel's message");
	rc = run("list", "extra", NULL);
	tap_ok(rc == 2, "list with an argument: usage error");
}

static void test_verify_unload(void)
{
	int rc;

	mock_reset();
	mock_add("t", ENGRAM_TABLE_READY, 10);
	rc = run("verify", "t", "--no-progress", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "VERIFY GET GET "), "verify ok: exit 0");
	tap_contains(out, "t: verify ok (sha256 5a5a5a5a", "  ...prints the digest");
	mock.verify_outcome = ENGRAM_VERIFY_MISMATCH;
	rc = run("table", "verify", "t", "--no-progress", NULL);
	tap_ok(rc == 1, "verify mismatch: exit 1");
	tap_contains(out, "t: verify MISMATCH", "  ...says MISMATCH");
	mock.t[0].state = ENGRAM_TABLE_LOADING;
	rc = run("verify", "t", NULL);
	tap_ok(rc == 1, "verify of a loading table: exit 1");
	tap_contains(err, "verify t: Device or resource busy: table is not ready", "  ...says why");
	rc = run("unload", "t", NULL);
	tap_ok(rc == 0 && !out[0] && !err[0] && !mock_find_name_ok("t"), "unload: quiet, exit 0");
	rc = run("unload", "t", NULL);
	tap_ok(rc == 1 && strstr(err, "unload t: No such file or directory"), "unload unknown: 1");
	rc = run("unload", NULL);
	tap_ok(rc == 2, "unload without NAME: usage error");
}

static void test_stats(void)
{
	json_t *j, *t;
	int rc;

	mock_reset();
	mock_add("a", ENGRAM_TABLE_READY, 10);
	mock_add("b", ENGRAM_TABLE_READY, 10);
	rc = run("stats", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "STATS STATSDUMP "), "stats: do then dump");
	tap_ok(strstr(out, "module\n  tables                                2\n") &&
	       strstr(out, "\ntable a generation 1\n  lookups                              10\n") &&
	       strstr(out, "  bytes                              2640  (2.6 KiB)\n"),
	       "stats text: aligned blocks") || (show_output(), 0);
	rc = run("-j", "stats", "show", NULL);
	j = json_loads(out, 0, NULL);
	t = json_array_get(json_object_get(j, "tables"), 1);
	tap_ok(rc == 0 && json_integer_value(json_object_get(json_object_get(j, "global"),
							     "loads_started")) == 3 &&
	       !strcmp(json_string_value(json_object_get(t, "name")), "b") &&
	       json_integer_value(json_object_get(t, "generation")) == 2 &&
	       json_integer_value(json_object_get(t, "lookups")) == 11 &&
	       json_object_size(t) == 4, "stats -j: global, tables, unknown counter dropped");
	json_decref(j);
	rc = run("stats", "b", NULL);
	tap_ok(rc == 0 && !strstr(out, "module") && strstr(out, "table b generation 2"),
	       "stats NAME: only that table");
	rc = run("stats", "zz", NULL);
	tap_ok(rc == 1 && strstr(err, "no table named 'zz'"), "stats unknown NAME: exit 1");
}

static void test_usage(void)
{
	tap_ok(run("bogus", NULL) == 2 && strstr(err, "unknown object 'bogus'") &&
	       strstr(err, "Usage:"), "unknown object: usage, exit 2");
	tap_ok(run("table", "bogus", NULL) == 2 && strstr(err, "unknown command 'bogus'"),
	       "unknown command: exit 2");
	tap_ok(run(NULL) == 2, "no object: exit 2");
	tap_ok(run("-h", NULL) == 0 && strstr(out, "mktable FILE --rows N"), "-h: usage, exit 0");
	tap_ok(run("help", NULL) == 0 && strstr(out, "Usage:"), "help: exit 0");
	tap_ok(run("load", "-h", NULL) == 0 && strstr(out, "table load FILE"), "load -h");
	tap_ok(run("stats", "help", NULL) == 0 && strstr(out, "stats [show] [NAME]"), "stats help");
	tap_ok(run("mktable", "--help", NULL) == 0 && strstr(out, "--pad-before"),
	       "mktable --help");
	tap_ok(run("load", file, "--tensor", "a", "--frobnicate", NULL) == 2 &&
	       strstr(err, "unknown option '--frobnicate'"), "unknown option: exit 2");
	tap_ok(run("-x", "list", NULL) == 2, "unknown global option: exit 2");
	tap_ok(run("-V", NULL) == 0 && strstr(out, "engramctl "), "-V prints the version");
	tap_ok(run("mktable", "/dev/null", "--rows", "1", NULL) == 1 &&
	       strstr(err, "/dev/null: exists and is not a regular file"),
	       "mktable refuses to replace a non-regular file");
	tap_ok(run("mktable", "/tmp/x", "--rows", "0", NULL) == 2 &&
	       strstr(err, "--rows: '0' is not a positive count"), "mktable --rows 0: usage error");
}

int main(void)
{
	if (!tap_ok(make_file() == 0, "test file written and hashed"))
		return tap_done();
	test_load();
	test_load_errors();
	test_list_show();
	test_verify_unload();
	test_stats();
	test_usage();
	unlink(file);
	gen_plan_free(&plan);
	return tap_done();
}
