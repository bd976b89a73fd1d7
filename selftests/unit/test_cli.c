// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl commands end to end against the in-process kernel stand-in
 * (mock_nl.c): what each command sends, how it follows a load or verify,
 * what it cleans up after a failure or Ctrl-C, what it prints, and its exit
 * status.  main.c is built with main renamed so it can be called repeatedly.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

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
	char line[64];
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
	snprintf(line, sizeof(line), "  sha256 %.16s", sha_hex);
	tap_contains(out, line, "load: digest line");
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

/* Writes @text to a fresh file named in @path (PATH_MAX bytes). */
static int write_conf(char *path, const char *text)
{
	const char *dir = getenv("TMPDIR");
	FILE *f;
	int fd;

	snprintf(path, PATH_MAX, "%s/engram-conf-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	if (fd < 0)
		return -1;
	f = fdopen(fd, "w");
	if (!f || fputs(text, f) < 0 || fclose(f))
		return -1;
	return 0;
}

static void test_sync(void)
{
	char conf[PATH_MAX], conf2[PATH_MAX], bad[PATH_MAX], text[12288];
	struct mock_table *t;
	json_t *j;
	int rc;

	snprintf(text, sizeof(text),
		 "# tables of this host\n\n"
		 "t1  %s  a  -   # trailing comment\n"
		 "t2\t%s\tb\t%s\r\n", real, real, sha_hex);
	if (!tap_ok(write_conf(conf, text) == 0, "sync: config written"))
		return;
	mock_reset();
	rc = run("table", "sync", "--config", conf, "--no-progress", NULL);
	tap_ok(rc == 0 && mock_find_name_ok("t1") && mock_find_name_ok("t2"),
	       "sync: both listed tables loaded, exit 0") || (show_output(), 0);
	tap_ok(!strncmp(mock.log, "DUMP LOAD ", 10), "sync: the tables dumped first, then loaded");
	tap_contains(out, "t1: loaded\nt2: loaded\n", "sync: one line per table");
	tap_ok(mock.has_sha && mock.soff == plan.scale_offset[1], "sync: t2 sent its digest and b's geometry");

	mock.log[0] = '\0';
	rc = run("table", "sync", "--config", conf, "--no-progress", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "DUMP "), "sync again: nothing but the dump sent");
	tap_contains(out, "t1: unchanged\nt2: unchanged\n", "sync again: both unchanged");

	mock_add("x", ENGRAM_TABLE_READY, 10);
	t = mock_find_table("t2");
	t->state = ENGRAM_TABLE_FAILED;
	mock.log[0] = '\0';
	rc = run("table", "sync", "--config", conf, "--no-progress", NULL);
	tap_ok(rc == 0 && mock_find_name_ok("x"), "sync: an unlisted table stays without --prune");
	tap_contains(out, "t2: replaced (it failed)", "sync: a failed table is loaded again");
	tap_ok(strstr(mock.log, "UNLOAD LOAD ") != NULL, "  ...unloaded, then loaded");

	mock.log[0] = '\0';
	rc = run("table", "sync", "--config", conf, "--prune", "--dry-run", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "DUMP ") && mock_find_name_ok("x"),
	       "sync --dry-run: nothing changed");
	tap_contains(out, "x: to unload (not listed)", "  ...but says what --prune would unload");
	mock.log[0] = '\0';
	rc = run("table", "sync", "--config", conf, "--prune", NULL);
	tap_ok(rc == 0 && !mock_find_name_ok("x") && !strncmp(mock.log, "DUMP UNLOAD ", 12),
	       "sync --prune: the unlisted table unloaded, before anything else");
	tap_contains(out, "x: unloaded (not listed)", "  ...and said so");

	snprintf(text, sizeof(text), "t1 %s b -\nt2 %s b %064d\n", real, real, 0);
	write_conf(conf2, text);
	rc = run("table", "sync", "--config", conf2, "--no-progress", NULL);
	tap_contains(out, "t1: replaced (another tensor or geometry)",
		     "sync: another tensor is a reload");
	tap_contains(out, "t2: replaced (another SHA-256)", "sync: another digest is a reload");

	snprintf(text, sizeof(text), "t1 %s b - 1-2\nt2 %s b %064d\n", real, real, 0);
	write_conf(conf2, text);
	rc = run("table", "sync", "--config", conf2, "--no-progress", NULL);
	t = mock_find_table("t1");
	tap_ok(rc == 0 && t && t->held_first == 1 && t->held_rows == 2,
	       "sync: a shard's rows are sent with its load");
	tap_contains(out, "t1: replaced (other rows held)", "sync: other rows held are a reload");
	tap_contains(out, "t2: unchanged", "  ...and the whole table next to it is unchanged");
	rc = run("table", "sync", "--config", conf2, "--no-progress", NULL);
	tap_contains(out, "t1: unchanged", "sync again: the shard is unchanged");
	snprintf(text, sizeof(text), "t1 %s b -\nt2 %s b %064d\n", real, real, 0);
	write_conf(conf2, text);
	rc = run("table", "sync", "--config", conf2, "--no-progress", NULL);
	tap_contains(out, "t1: replaced (other rows held)",
		     "sync: a shard listed whole again is a reload");

	mock.log[0] = '\0';
	rc = run("-j", "table", "sync", "--config", conf2, NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_is_array(j) && json_array_size(j) == 2 &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 1), "action")),
		       "unchanged"), "sync -j: an array of {name, action}");
	json_decref(j);

	snprintf(text, sizeof(text), "t1 %s a -\nt1 %s b -\n", real, real);
	write_conf(bad, text);
	mock.log[0] = '\0';
	rc = run("table", "sync", "--config", bad, NULL);
	tap_ok(rc == 1 && !mock.log[0], "sync: a malformed file is refused before anything is sent");
	tap_contains(err, ":2: table 't1' is listed already on line 1", "  ...naming its line");
	unlink(bad);
	rc = run("table", "sync", "--config", "/nonexistent/tables.conf", NULL);
	tap_ok(rc == 1, "sync: a missing file: exit 1");
	tap_contains(err, "/nonexistent/tables.conf: No such file or directory", "  ...says so");
	rc = run("table", "sync", "--config", conf, "extra", NULL);
	tap_ok(rc == 2, "sync: an extra argument is a usage error");

	mock_reset();
	mock.fail_load = 1;
	rc = run("table", "sync", "--config", conf, "--no-progress", NULL);
	tap_ok(rc == 1, "sync: failed loads: exit 1");
	tap_contains(out, "t1: failed\nt2: failed\n", "  ...every table tried, each reported");

	mock_reset();
	mock.interrupt_at_get = 1;
	rc = run("table", "sync", "--config", conf, "--no-progress", NULL);
	tap_ok(rc == 130 && !mock_find_name_ok("t1") && !strstr(mock.log, "LOAD GET UNLOAD LOAD"),
	       "sync: SIGTERM/SIGINT during a load cancels it and stops, exit 130");

	mock_reset();
	mock.interrupt_at_dump = 1;
	rc = run("table", "sync", "--config", conf, "--no-progress", NULL);
	tap_ok(rc == 130 && !strstr(mock.log, "LOAD"),
	       "sync: a signal before the first load is caught too: exit 130, nothing loaded");

	mock_reset();
	mock_add("t1", ENGRAM_TABLE_READY, 3);
	snprintf(text, sizeof(text), "t1 /nonexistent/engram/t1.safetensors a -\nt2 %s b -\n", real);
	write_conf(bad, text);
	rc = run("table", "sync", "--config", bad, "--no-progress", NULL);
	tap_ok(rc == 1 && mock_find_name_ok("t1") && !strstr(mock.log, "UNLOAD") &&
	       mock_find_name_ok("t2"),
	       "sync: a loaded table whose file cannot be read now is kept, the others done");
	tap_contains(out, "t1: failed (the file cannot be resolved now; kept loaded)",
		     "  ...and says so");
	unlink(bad);

	mock_reset();
	run("table", "sync", "--config", conf, "--no-progress", NULL);
	rc = run("table", "unload", "--config", conf, NULL);
	tap_ok(rc == 0 && !mock_find_name_ok("t1") && !mock_find_name_ok("t2"),
	       "unload --config: every listed table unloaded");
	tap_contains(out, "t1: unloaded\nt2: unloaded\n", "  ...one line each");
	rc = run("table", "unload", "--config", conf, NULL);
	tap_ok(rc == 0, "unload --config again: exit 0");
	tap_contains(out, "t1: not loaded\n", "  ...says not loaded");
	rc = run("table", "unload", "t1", "--config", conf, NULL);
	tap_ok(rc == 2, "unload NAME --config: usage error");
	unlink(conf);
	unlink(conf2);
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
			   "inflight 0 path /models/alpha.safetensors\nzeta: state ready gen 1 "
			   "rows 10 row_bytes 264 pinned 6.6 KiB inflight 0 verify ok sha256 5a5a") ==
	       out, "list: sorted lines with state, gen, rows, row bytes, pinned, inflight, "
	       "verify, sha256") ||
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

/* Usage errors of drain and undrain: each exit 2, with nothing sent. */
static void test_drain_usage(void)
{
	static const struct {
		const char *args[6];
		const char *says;
	} bad[] = {
		{ { "table", "drain" }, "table drain: NAME or --all missing" },
		{ { "table", "drain", "a", "--all" }, "NAME or --all, not both" },
		{ { "table", "drain", "a", "b" }, "one NAME only" },
		{ { "table", "drain", "--all", "--wait", "30" },
		  "NAME or --all, not both (a --wait value is written --wait=SECONDS)" },
		{ { "table", "drain", "a", "--wait", "30" },
		  "one NAME only (a --wait value is written --wait=SECONDS)" },
		{ { "table", "drain", "a", "--quiet", "500" }, "--quiet is for --wait" },
		{ { "table", "drain", "a", "--wait=x" },
		  "--wait=x: not a number of seconds from 0 to 86400" },
		{ { "table", "drain", "a", "--wait=-1" }, "--wait=-1: not a number of seconds" },
		{ { "table", "drain", "a", "--wait=86401" }, "--wait=86401: not a number" },
		{ { "table", "drain", "a", "--wait", "--quiet", "3600001" },
		  "--quiet 3600001: not a number of milliseconds from 0 to 3600000" },
		{ { "table", "drain", "a", "--wait", "--quiet" }, "option '--quiet' needs an argument" },
		{ { "table", "drain", "no/slash" }, "table name 'no/slash' is not valid" },
		{ { "table", "undrain" }, "table undrain: NAME or --all missing" },
		{ { "table", "undrain", "a", "--all" }, "NAME or --all, not both" },
		{ { "table", "undrain", "a", "--wait" }, "table undrain: unknown option '--wait'" },
	};
	size_t i;
	int rc;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *const *a = bad[i].args;

		mock_reset();
		rc = run(a[0], a[1], a[2], a[3], a[4], a[5], NULL);
		tap_ok(rc == 2 && strstr(err, bad[i].says) && !mock.log[0],
		       "drain usage %zu: exit 2, '%s', nothing sent", i, bad[i].says) ||
			(show_output(), 0);
	}
	rc = run("table", "drain", "--help", NULL);
	tap_ok(rc == 0 && strstr(out, "table drain NAME | --all [--wait[=SECONDS]] [--quiet MS]") &&
	       strstr(out, "table undrain NAME | --all"), "table drain --help");
	rc = run("table", "help", NULL);
	tap_ok(rc == 0 && strstr(out, "table drain NAME | --all") && strstr(out, "undrain  "),
	       "table help names drain and undrain");
}

/* A table with @inflight requests of clients in flight. */
static struct mock_table *busy_table(const char *name, uint32_t inflight)
{
	struct mock_table *t = mock_add(name, ENGRAM_TABLE_READY, 10);

	t->inflight = inflight;
	return t;
}

static void test_drain(void)
{
	struct mock_table *a, *b;
	json_t *j, *o;
	int rc;

	/* drain NAME: the one table, said once. */
	mock_reset();
	a = busy_table("a", 0);
	b = busy_table("b", 0);
	rc = run("table", "drain", "a", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "DRAIN GET ") && mock.drain_named && a->draining &&
	       !b->draining && !strcmp(out, "a: draining\n") && !err[0],
	       "drain NAME: TABLE_DRAIN of that table, 'a: draining'") || (show_output(), 0);
	rc = run("-j", "table", "drain", "a", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_object_size(j) == 1 &&
	       json_array_size(json_object_get(j, "draining")) == 1 &&
	       !strcmp(json_string_value(json_array_get(json_object_get(j, "draining"), 0)), "a"),
	       "drain -j without --wait: {\"draining\": [NAME]}") || (show_output(), 0);
	json_decref(j);

	/* list, show: the marker, the count, the quiet time. */
	a->quiet_ns = 1200000000;
	a->inflight = 3;
	rc = run("list", NULL);
	tap_ok(rc == 0 && strstr(out, "a: state ready draining (quiet 1.2 s) gen 1 rows 10 ") &&
	       strstr(out, " inflight 2 ") && strstr(out, "\nb: state ready gen 2 rows 10 ") &&
	       strstr(out, " inflight 0 "),
	       "list: 'draining (quiet ...)' after the state, inflight after pinned") ||
		(show_output(), 0);
	rc = run("-j", "list", NULL);
	j = json_loads(out, 0, NULL);
	o = json_array_get(j, 0);
	tap_ok(rc == 0 && json_is_true(json_object_get(o, "draining")) &&
	       json_integer_value(json_object_get(o, "inflight")) == 1 &&
	       json_integer_value(json_object_get(o, "drain_quiet_ms")) == 1200 &&
	       !strcmp(json_string_value(json_object_get(o, "state")), "ready") &&
	       json_is_false(json_object_get(json_array_get(j, 1), "draining")) &&
	       json_integer_value(json_object_get(json_array_get(j, 1), "inflight")) == 0 &&
	       !json_object_get(json_array_get(j, 1), "drain_quiet_ms"),
	       "list -j: draining (bool), inflight, drain_quiet_ms only while draining") ||
		(show_output(), 0);
	json_decref(j);
	rc = run("show", "a", NULL);
	tap_ok(rc == 0 && strstr(out, "  state           ready\n"
				     "  draining        yes, quiet 1.2 s\n"
				     "  inflight        0\n"),
	       "show NAME: draining and inflight lines") || (show_output(), 0);
	rc = run("show", "b", NULL);
	tap_ok(rc == 0 && !strstr(out, "draining") && strstr(out, "  inflight        0\n"),
	       "show NAME of a table not draining: no draining line");

	/* drain --all --wait: every table, followed by dumps until quiet. */
	mock_reset();
	a = busy_table("a", 2);
	b = busy_table("b", 1);
	mock_add("f", ENGRAM_TABLE_FAILED, 10);
	mock.drain_step_ns = 400000000;
	rc = run("-j", "table", "drain", "--all", "--wait", "--no-progress", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && !mock.drain_named && a->draining && b->draining &&
	       !strcmp(mock.log, "DRAIN DUMP DUMP DUMP DUMP DUMP ") && !err[0],
	       "drain --all --wait: one TABLE_DRAIN without a name, dumps until each is quiet") ||
		(show_output(), 0);
	tap_ok(j && json_object_size(j) == 4 &&
	       json_array_size(json_object_get(j, "draining")) == 2 &&
	       !strcmp(json_string_value(json_array_get(json_object_get(j, "draining"), 1)), "b") &&
	       json_is_true(json_object_get(j, "drained")) &&
	       json_integer_value(json_object_get(j, "waited_ms")) >= 300 &&
	       json_array_size(json_object_get(j, "busy")) == 0,
	       "drain --wait -j: {draining: [a, b], drained: true, waited_ms, busy: []}, "
	       "the failed table left out") || (show_output(), 0);
	json_decref(j);

	/* NAME --wait --quiet: TABLE_GET of that table only; text; progress on stderr. */
	mock_reset();
	a = busy_table("a", 2);
	busy_table("b", 5);
	mock.drain_step_ns = 300000000;
	rc = run("table", "drain", "a", "--wait", "--quiet", "500", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "DRAIN GET GET GET GET ") &&
	       !strcmp(out, "a: drained\n"),
	       "drain NAME --wait --quiet 500: GET until quiet 0.6 s, 'a: drained'") ||
		(show_output(), 0);
	tap_ok(!strcmp(err, "draining: 1 of 1 busy: a (1 in flight); waited 0.0 s of 300 s\n"),
	       "drain --wait: a progress line on stderr, not more than one every 5 s off a "
	       "terminal") || (show_output(), 0);
	rc = run("table", "drain", "a", "--wait=0", "--quiet", "500", NULL);
	tap_ok(rc == 0 && !strcmp(out, "a: drained\n") && !err[0],
	       "drain again of a quiet table, --wait=0: drained at once") || (show_output(), 0);

	/* The time runs out. */
	mock_reset();
	busy_table("a", 1000);
	b = busy_table("b", 0);
	mock.drain_step_ns = 2000000000;
	rc = run("table", "drain", "--all", "--wait=0", NULL);
	tap_ok(rc == 1 && !strcmp(out, "a: busy (999 in flight)\nb: drained\n") &&
	       strstr(err, "engramctl: drain: timed out after 0 s: a (999 in flight); still "
		      "draining (table undrain serves them as before)\n"),
	       "drain --wait=0 of a busy table: exit 1, per table lines, the busy one named") ||
		(show_output(), 0);
	mock.drain_step_ns = 100000000;
	b->quiet_ns = 0;
	rc = run("-j", "table", "drain", "--all", "--wait=1", "--quiet", "3000", NULL);
	j = json_loads(out, 0, NULL);
	o = json_array_get(json_object_get(j, "busy"), 1);
	tap_ok(rc == 1 && json_is_false(json_object_get(j, "drained")) &&
	       json_integer_value(json_object_get(j, "waited_ms")) >= 1000 &&
	       json_integer_value(json_object_get(j, "waited_ms")) < 3000 &&
	       json_array_size(json_object_get(j, "busy")) == 2 &&
	       !strcmp(json_string_value(json_object_get(o, "name")), "b") &&
	       json_integer_value(json_object_get(o, "inflight")) == 0 &&
	       json_integer_value(json_object_get(o, "drain_quiet_ms")) < 3000 &&
	       strstr(err, "timed out after 1 s: a (") && strstr(err, "b (quiet ") &&
	       strstr(err, " of 3.0 s)"),
	       "drain --wait=1 --quiet 3000 -j: gives up after a second, busy lists each table "
	       "with inflight and drain_quiet_ms") || (show_output(), 0);
	json_decref(j);
	tap_ok(b->draining && mock_find_table("a")->draining,
	       "  ...and the tables stay draining");

	/* Unloaded while waited for: drained; undrained meanwhile: an error. */
	mock_reset();
	busy_table("a", 100);
	mock.unload_at_get = 3;
	rc = run("table", "drain", "a", "--wait", NULL);
	tap_ok(rc == 0 && !strcmp(out, "a: drained (unloaded)\n"),
	       "a table unloaded during the wait counts as drained") || (show_output(), 0);
	mock_reset();
	busy_table("a", 100);
	mock.undrain_at_get = 3;
	rc = run("table", "drain", "a", "--wait", "--no-progress", NULL);
	tap_ok(rc == 1 && !out[0] &&
	       !strcmp(err, "engramctl: a: no longer draining (undrained, or loaded again)\n"),
	       "a table undrained during the wait: exit 1, says so") || (show_output(), 0);

	/* Ctrl-C during the wait stops waiting, the tables stay draining. */
	mock_reset();
	a = busy_table("a", 100);
	mock.interrupt_at_get = 2;
	rc = run("table", "drain", "a", "--wait", "--no-progress", NULL);
	tap_ok(rc == 130 && a->draining && strstr(err, "drain: stopped waiting: a (") &&
	       !strstr(mock.log, "UNDRAIN"), "SIGINT during the wait: exit 130, still draining") ||
		(show_output(), 0);

	/* What the kernel refuses. */
	mock_reset();
	busy_table("a", 0);
	rc = run("table", "drain", "nope", NULL);
	tap_ok(rc == 1 && !strcmp(mock.log, "DRAIN ") &&
	       strstr(err, "engramctl: drain nope: No such file or directory: engram_rdma: no table "
		      "named 'nope' (attribute TABLE_NAME)"),
	       "drain of an unknown table: exit 1, the kernel's ENOENT and message") ||
		(show_output(), 0);
	mock.eperm = 1;
	rc = run("table", "drain", "--all", NULL);
	tap_ok(rc == 1 && strstr(err, "drain --all: Operation not permitted (needs CAP_NET_ADMIN)"),
	       "drain without CAP_NET_ADMIN: exit 1, with the hint") || (show_output(), 0);
	mock.eperm = 0;
	mock.no_drain = 1;
	rc = run("table", "drain", "a", NULL);
	tap_ok(rc == 1 && strstr(err, "cannot drain tables (a module older than this engramctl)"),
	       "drain on a module without TABLE_DRAIN: says the module is older") ||
		(show_output(), 0);
	rc = run("-j", "list", NULL);
	j = json_loads(out, 0, NULL);
	o = json_array_get(j, 0);
	tap_ok(rc == 0 && json_is_false(json_object_get(o, "draining")) &&
	       !json_object_get(o, "inflight"),
	       "list -j of an older module: draining false, no inflight") || (show_output(), 0);
	json_decref(j);
	rc = run("list", NULL);
	tap_ok(rc == 0 && !strstr(out, "inflight"), "list of an older module: no inflight");

	/* undrain */
	mock_reset();
	a = busy_table("a", 0);
	b = busy_table("b", 0);
	busy_table("c", 0);
	run("table", "drain", "a", NULL);
	run("table", "drain", "b", NULL);
	mock.log[0] = '\0';
	rc = run("-j", "table", "undrain", "--all", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "DUMP UNDRAIN ") && !mock.drain_named &&
	       !a->draining && !b->draining && json_object_size(j) == 1 &&
	       json_array_size(json_object_get(j, "undrained")) == 2,
	       "undrain --all -j: {\"undrained\": [those that were draining]}") || (show_output(), 0);
	json_decref(j);
	run("table", "drain", "a", NULL);
	mock.log[0] = '\0';
	rc = run("table", "undrain", "a", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "UNDRAIN ") && mock.drain_named && !a->draining &&
	       !strcmp(out, "a: undrained\n"), "undrain NAME: 'a: undrained'") || (show_output(), 0);
	rc = run("table", "undrain", "nope", NULL);
	tap_ok(rc == 1 && strstr(err, "undrain nope: No such file or directory"),
	       "undrain of an unknown table: exit 1");

	/* Prefixes: "u" is still unload, "d" drain. */
	mock_reset();
	busy_table("a", 0);
	tap_ok(run("table", "d", "a", NULL) == 0 && !strcmp(mock.log, "DRAIN GET "),
	       "table d is table drain");
	tap_ok(run("table", "und", "a", NULL) == 0 && strstr(mock.log, "UNDRAIN "),
	       "table und is table undrain");
	tap_ok(run("table", "u", "a", NULL) == 0 && !mock_find_name_ok("a"),
	       "table u is still table unload");
}

/* A catalog entry of a host that drains the table (protocol version 6): "draining". */
static void test_catalog_draining(void)
{
	struct mock_table *t;
	json_t *j, *l;
	int rc;

	mock_reset();
	mock_add_link("rdma://192.0.2.1:18515@192.0.2.9", ENGRAM_LINK_UP);
	t = mock_add("emb", ENGRAM_TABLE_READY, 1000);
	memset(t->sha256, 0xab, sizeof(t->sha256));
	t->draining = 1;
	rc = run("link", "tables", NULL);
	tap_ok(rc == 0 && !strcmp(out, "emb sha256 abababababababab rows 1000: link 1 (up, draining)\n"),
	       "link tables: a draining entry says draining") || (show_output(), 0);
	rc = run("link", "show", "1", NULL);
	tap_ok(rc == 0 && strstr(out, "  serves          emb (draining)\n"),
	       "link show: serves NAME (draining)") || (show_output(), 0);
	rc = run("-j", "link", "tables", NULL);
	j = json_loads(out, 0, NULL);
	l = json_array_get(json_object_get(json_array_get(j, 0), "links"), 0);
	tap_ok(rc == 0 && !strcmp(json_string_value(json_object_get(l, "state")), "draining"),
	       "link tables -j: state \"draining\"") || (show_output(), 0);
	json_decref(j);
	rc = run("-j", "link", "show", NULL);
	j = json_loads(out, 0, NULL);
	l = json_array_get(json_object_get(json_array_get(j, 0), "serves"), 0);
	tap_ok(rc == 0 && !strcmp(json_string_value(json_object_get(l, "state")), "draining"),
	       "link show -j: serves[].state \"draining\"") || (show_output(), 0);
	json_decref(j);
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
	tap_ok(strstr(out, "module\n  tables                                    2\n") &&
	       strstr(out, "\ntable a generation 1\n  lookups                                  10\n") &&
	       strstr(out, "  bytes                                  2640  (2.6 KiB)\n"),
	       "stats text: aligned blocks") || (show_output(), 0);
	rc = run("-j", "stats", "show", NULL);
	j = json_loads(out, 0, NULL);
	t = json_array_get(json_object_get(j, "tables"), 1);
	tap_ok(rc == 0 && json_integer_value(json_object_get(json_object_get(j, "global"),
							     "loads_started")) == 3 &&
	       !strcmp(json_string_value(json_object_get(t, "name")), "b") &&
	       json_integer_value(json_object_get(t, "generation")) == 2 &&
	       json_integer_value(json_object_get(t, "lookups")) == 11 &&
	       json_integer_value(json_object_get(t, "refused_busy")) == 1 &&
	       json_object_get(t, "latency") &&
	       json_object_size(t) == 8, "stats -j: global, tables, unknown counter dropped") ||
		(show_output(), 0);
	json_decref(j);
	rc = run("stats", "b", NULL);
	tap_ok(rc == 0 && !strstr(out, "module") && strstr(out, "table b generation 2"),
	       "stats NAME: only that table");
	rc = run("stats", "zz", NULL);
	tap_ok(rc == 1 && strstr(err, "no table named 'zz'"), "stats unknown NAME: exit 1");
}

/* stats --prometheus --output FILE: what the textfile timer runs. */
static void test_prometheus_output(void)
{
	static char want[sizeof(out)], got[sizeof(out)];
	const char *tmp = getenv("TMPDIR");
	char dir[PATH_MAX], file[PATH_MAX + 32];
	struct stat st;
	struct dirent *de;
	int rc, others = 0;
	DIR *d;
	FILE *f;

	snprintf(dir, sizeof(dir), "%s/engram-textfile-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!tap_ok(mkdtemp(dir) != NULL, "stats --output: a scratch directory"))
		return;
	snprintf(file, sizeof(file), "%s/engram_rdma.prom", dir);
	run("stats", "--prometheus", NULL);
	memcpy(want, out, sizeof(want));
	f = fopen(file, "w");
	if (f) {
		fputs("stale\n", f);
		fclose(f);
	}
	rc = run("stats", "--prometheus", "--output", file, NULL);
	got[0] = '\0';
	f = fopen(file, "r");
	if (f)
		slurp(f, got, sizeof(got));
	tap_ok(rc == 0 && !out[0] && !strcmp(got, want),
	       "stats --prometheus --output: the file replaced by what stdout gets, stdout empty") ||
		(show_output(), 0);
	tap_ok(!stat(file, &st) && (st.st_mode & 0777) == 0644,
	       "  ...readable by node_exporter's user (0644)");
	d = opendir(dir);
	while (d && (de = readdir(d)))
		if (de->d_name[0] != '.' && strcmp(de->d_name, "engram_rdma.prom"))
			others++;
	if (d)
		closedir(d);
	tap_ok(d && !others, "  ...and no temporary file left beside it");
	unlink(file);
	rmdir(dir);

	rc = run("stats", "--prometheus", "--output", file, NULL);
	tap_ok(rc == 1 && strstr(err, "cannot create a file beside it: No such file or directory"),
	       "stats --output into a directory that is gone: exit 1, says why") || (show_output(), 0);
	rc = run("stats", "--output", file, NULL);
	tap_ok(rc == 2 && strstr(err, "--output is for --prometheus"),
	       "stats --output without --prometheus: usage error");
}

/*
 * stats --prometheus, read back by prometheus_client's own parser (Debian's
 * python3-prometheus-client), which checks the format; then the values.
 */
static void test_prometheus(void)
{
	static const char check[] =
		"import sys\n"
		"from prometheus_client.parser import text_string_to_metric_families as parse\n"
		"fams = {f.name: f for f in parse(open(sys.argv[1]).read())}\n"
		"def v(fam, name, **labels):\n"
		"    for s in fams[fam].samples:\n"
		"        if s.name == name and s.labels == labels:\n"
		"            return s.value\n"
		"    raise KeyError((name, labels))\n"
		"assert fams['engram_rdma_served_requests'].type == 'counter'\n"
		"assert v('engram_rdma_table_served_requests', 'engram_rdma_table_served_requests_total',"
		" table='a') == 10\n"
		"r = 'engram_rdma_table_refused_requests'\n"
		"assert v(r, r + '_total', table='a', reason='row_out_of_range') == 2\n"
		"r = 'engram_rdma_link_refused_requests'\n"
		"assert v(r, r + '_total', link='1', reason='busy') == 3\n"
		"assert v('engram_rdma_table_served_bytes', 'engram_rdma_table_served_bytes_total',"
		" table='a') == 10 * 264\n"
		"generic = {'rows', 'bytes', 'lookups', 'connections', 'refused', 'splits',"
		" 'catalogs', 'requests_refused', 'idle_closes', 'peer_timeouts'}\n"
		"bad = [n for n in fams for g in generic for sc in ('', 'table_', 'link_', 'link_table_')"
		" if n == 'engram_rdma_' + sc + g]\n"
		"assert not bad, bad\n"
		"h = 'engram_rdma_table_latency_seconds'\n"
		"assert fams[h].type == 'histogram'\n"
		"assert v(h, h + '_bucket', table='a', le='0.000002') == 2\n"
		"assert v(h, h + '_bucket', table='a', le='0.000016') == 9\n"
		"assert v(h, h + '_bucket', table='a', le='+Inf') == 10\n"
		"assert v(h, h + '_count', table='a') == 10\n"
		"assert abs(v(h, h + '_sum', table='a') - 8.400123456) < 1e-9\n"
		"assert v('engram_rdma_link_up', 'engram_rdma_link_up', link='1') == 1\n"
		"assert v('engram_rdma_link_up', 'engram_rdma_link_up', link='2') == 0\n"
		"assert v('engram_rdma_link_info', 'engram_rdma_link_info', link='1',"
		" url='rdma://192.0.2.1:18515@192.0.2.9', transport='rdma') == 1\n"
		"assert v('engram_rdma_link_info', 'engram_rdma_link_info', link='2',"
		" url='tcp://192.0.2.2:18515@192.0.2.9', transport='tcp') == 1\n"
		"assert fams['engram_rdma_tables'].type == 'gauge'\n"
		"assert v('engram_rdma_table_info', 'engram_rdma_table_info', table='a',"
		" generation='1', sha256='5a' * 32, rows='10', weight_offset='0',"
		" scale_offset='0', held_first='0', held_rows='10') == 1\n"
		"s = 'engram_rdma_table_state'\n"
		"assert v(s, s, table='a', state='ready') == 1\n"
		"assert v(s, s, table='a', state='loading') == 0\n"
		"assert v(s, s, table='a', state='failed') == 0\n"
		"print('ok', len(fams))\n";
	char path[PATH_MAX], cmd[PATH_MAX + 64], got[256] = "";
	const char *dir = getenv("TMPDIR");
	FILE *f, *pp;
	int rc, fd;

	rc = run("stats", "--prometheus", NULL);
	tap_ok(rc == 0 && strstr(out, "# TYPE engram_rdma_table_latency_seconds histogram\n"),
	       "stats --prometheus: exit 0, families with TYPE lines") || (show_output(), 0);
	tap_contains(out, "engram_rdma_table_refused_requests_total{table=\"a\",reason=\"busy\"} 0\n",
		     "  ...refusals as one family with a reason label");
	tap_contains(out, "engram_rdma_load_seconds_total 1.500000007\n",
		     "  ...nanoseconds as seconds");
	snprintf(path, sizeof(path), "%s/engram-prom-XXXXXX", dir && *dir ? dir : "/tmp");
	fd = mkstemp(path);
	f = fd >= 0 ? fdopen(fd, "w") : NULL;
	if (f) {
		fputs(out, f);
		fclose(f);
	}
	snprintf(cmd, sizeof(cmd), "/usr/bin/python3 -c \"$CHECK\" '%s' 2>&1 | tail -n 1", path);
	setenv("CHECK", check, 1);
	pp = popen(cmd, "r");
	if (pp) {
		if (!fgets(got, sizeof(got), pp))
			got[0] = '\0';
		got[strcspn(got, "\n")] = '\0';
		pclose(pp);
	}
	if (strstr(got, "No module named 'prometheus_client'"))
		tap_ok(1, "stats --prometheus parses # SKIP python3-prometheus-client missing");
	else
		tap_ok(!strncmp(got, "ok ", 3),
		       "stats --prometheus: prometheus_client parses it, values as -j (%s)", got);
	unlink(path);
	rc = run("-j", "stats", "--prometheus", NULL);
	tap_ok(rc == 2, "stats -j --prometheus: usage error");
	rc = run("stats", "a", "--prometheus", NULL);
	tap_ok(rc == 0 && strstr(out, "engram_rdma_table_state{table=\"a\",state=\"ready\"} 1\n") &&
	       strstr(out, "engram_rdma_table_info{table=\"a\",generation=\"1\",") &&
	       strstr(out, "engram_rdma_table_draining{table=\"a\"} 0\n") &&
	       strstr(out, "engram_rdma_table_inflight_requests{table=\"a\"} ") &&
	       !strstr(out, "engram_rdma_link_"),
	       "stats NAME --prometheus: that table's state, info, drain and requests in flight, no links") ||
		(show_output(), 0);
	test_prometheus_output();
}

static void test_stats_links(void)
{
	json_t *j, *k, *lat, *b;
	struct mock_link *lk;
	int rc;

	mock_reset();
	mock_add("a", ENGRAM_TABLE_READY, 10);
	lk = mock_add_link("rdma://192.0.2.1:18515@192.0.2.9", ENGRAM_LINK_UP);
	lk->fetches = 40;
	lk->refused_busy = 3;
	lk->lat[3] = 30;	/* [8, 16) us */
	lk->lat[6] = 10;	/* [64, 128) us */
	mock_add_link("tcp://192.0.2.2:18515@192.0.2.9", ENGRAM_LINK_DOWN);
	rc = run("stats", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "STATS STATSDUMP "), "stats with links: still do + dump");
	tap_contains(out, "\nlink 1 rdma://192.0.2.1:18515@192.0.2.9\n"
		     "  fetches                                  40\n"
		     "  fetch_bytes                           10560  (10.3 KiB)\n"
		     "  refused                                   3  (busy 3)\n"
		     "  latency                                  40  (p50 14 us, p99 126 us)\n"
		     "    <16us: 30  <128us: 10\n\nlink 2 tcp://",
		     "stats text: a section per link, refusals folded by reason, histogram");
	tap_contains(out, "table a generation 1\n  lookups                                  10\n"
		     "  bytes                                  2640  (2.6 KiB)\n"
		     "  refused                                   2  (row_out_of_range 2)\n"
		     "  latency                                  10  (p50 12 us, p99 8388608 us)\n"
		     "    <2us: 2  <16us: 7  >=8.4s: 1\n",
		     "stats text: table refusals by reason, only nonzero buckets");
	tap_contains(out, "link 2 tcp://192.0.2.2:18515@192.0.2.9\n  fetches                                   0\n"
		     "  fetch_bytes                               0\n  refused                                   0\n"
		     "  latency                          no samples\n",
		     "stats text: an idle link says so");

	rc = run("-j", "stats", NULL);
	j = json_loads(out, 0, NULL);
	k = json_array_get(json_object_get(j, "links"), 0);
	lat = json_object_get(k, "latency");
	b = json_array_get(json_object_get(lat, "buckets"), 3);
	tap_ok(rc == 0 && json_array_size(json_object_get(j, "links")) == 2 &&
	       json_integer_value(json_object_get(k, "id")) == 1 &&
	       !strcmp(json_string_value(json_object_get(k, "url")),
		       "rdma://192.0.2.1:18515@192.0.2.9") &&
	       json_integer_value(json_object_get(k, "fetches")) == 40 &&
	       json_integer_value(json_object_get(k, "refused_busy")) == 3 &&
	       !json_object_get(k, "state"),
	       "stats -j: links array with id, url and counters") || (show_output(), 0);
	tap_ok(json_integer_value(json_object_get(lat, "count")) == 40 &&
	       json_integer_value(json_object_get(lat, "p50_us")) == 14 &&
	       json_integer_value(json_object_get(lat, "p99_us")) == 126 &&
	       json_array_size(json_object_get(lat, "buckets")) == ENGRAM_LAT_BUCKETS &&
	       json_integer_value(json_object_get(b, "ge_us")) == 8 &&
	       json_integer_value(json_object_get(b, "lt_us")) == 16 &&
	       json_integer_value(json_object_get(b, "count")) == 30,
	       "stats -j: latency with count, p50, p99 and every bucket's bounds");
	b = json_array_get(json_object_get(lat, "buckets"), ENGRAM_LAT_BUCKETS - 1);
	tap_ok(json_integer_value(json_object_get(b, "ge_us")) == 1 << 23 &&
	       !json_object_get(b, "lt_us") &&
	       json_integer_value(json_object_get(json_array_get(json_object_get(lat, "buckets"), 0),
						  "ge_us")) == 0,
	       "stats -j: first bucket from 0, last one open-ended");
	json_decref(j);

	rc = run("-j", "stats", "a", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(json_object_get(j, "links")) == 0 &&
	       json_array_size(json_object_get(j, "tables")) == 1,
	       "stats NAME -j: that table, no links");
	tap_ok(json_integer_value(json_object_get(json_object_get(json_array_get(
		json_object_get(j, "tables"), 0), "latency"), "sum_ns")) == 8400123456LL,
	       "stats -j: the histogram's sum_ns");
	json_decref(j);
	test_prometheus();
}

static void test_listen(void)
{
	json_t *j;
	int rc;

	mock_reset();
	rc = run("listen", "add", "rdma://192.0.2.1", NULL);
	tap_ok(rc == 0 && !out[0] && !err[0] && !strcmp(mock.log, "LISTENADD ") &&
	       mock.l[0].used && !strcmp(mock.l[0].url, "rdma://192.0.2.1"),
	       "listen add: quiet, URL sent as given") || (show_output(), 0);
	rc = run("listen", "add", "rdma://192.0.2.1:18515", NULL);
	tap_ok(rc == 1, "listen add of the same address: exit 1");
	tap_contains(err, "engramctl: listen add rdma://192.0.2.1:18515: File exists: "
		     "engram_rdma: already listening on that address (attribute URL)\n",
		     "  ...EEXIST with the kernel's message");
	rc = run("listen", "add", "rdma://0.0.0.0", NULL);
	tap_ok(rc == 1 && mock.l[1].used == 0, "listen add of a wildcard: exit 1");
	tap_contains(err, "engramctl: listen add rdma://0.0.0.0: Invalid argument: "
		     "engram_rdma: bad listen URL (attribute URL)\n"
		     "engramctl: rdma://0.0.0.0: wildcard listen address '0.0.0.0' is not allowed",
		     "  ...the kernel's message, then the parser's reason");
	rc = run("listen", "add", "rdma://192.0.2.1:1@192.0.2.2", NULL);
	tap_contains(err, "a listen URL takes no '@LOCAL' part", "listen add of a remote URL refused");
	rc = run("listen", "add", NULL);
	tap_ok(rc == 2 && strstr(err, "listen add: URL missing"), "listen add without URL: usage");
	rc = run("listen", "add", "a", "b", NULL);
	tap_ok(rc == 2 && strstr(err, "unexpected argument 'b'"), "listen add with 2 URLs: usage");

	mock_add_listen("tcp://[2001:db8::1]:9000", ENGRAM_LISTEN_WAITING)->error = EADDRNOTAVAIL;
	mock.l[0].connections = 2;
	snprintf(mock.l[0].device, sizeof(mock.l[0].device), "mlx5_0");
	rc = run("listen", NULL);
	tap_ok(rc == 0 && !strcmp(out, "rdma://192.0.2.1: state active device mlx5_0 connections 2\n"
				       "tcp://[2001:db8::1]:9000: state waiting connections 0 "
				       "error \"Cannot assign requested address\"\n"
				       "allow: any (no allow-list: any peer may connect)\n"),
	       "listen (show): one line each, in the kernel's order, error as text, allow: any") ||
		(show_output(), 0);
	rc = run("-j", "listen", "list", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(j) == 2 &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 0), "state")), "active") &&
	       json_integer_value(json_object_get(json_array_get(j, 0), "connections")) == 2 &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 0), "device")), "mlx5_0") &&
	       !json_object_get(json_array_get(j, 0), "error") &&
	       json_integer_value(json_object_get(json_array_get(j, 1), "error")) == EADDRNOTAVAIL &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 1), "error_str")),
		       "Cannot assign requested address"),
	       "listen list -j: array of url, state, device, connections, error") ||
		(show_output(), 0);
	json_decref(j);

	rc = run("listen", "del", "rdma://192.0.2.1:18515", NULL);
	tap_ok(rc == 0 && !mock.l[0].used, "listen del by an equal URL");
	rc = run("listen", "del", "rdma://192.0.2.1", NULL);
	tap_ok(rc == 1, "listen del of an unknown URL: exit 1");
	tap_contains(err, "listen del rdma://192.0.2.1: No such file or directory: "
		     "engram_rdma: no listener on that URL", "  ...ENOENT with the message");
	mock.eperm = 1;
	rc = run("listen", "add", "rdma://192.0.2.5", NULL);
	tap_ok(rc == 1, "listen add without CAP_NET_ADMIN: exit 1");
	tap_contains(err, "Operation not permitted (needs CAP_NET_ADMIN): "
		     "engram_rdma: changing listeners needs CAP_NET_ADMIN", "  ...says so");
	rc = run("listen", "bogus", NULL);
	tap_ok(rc == 2 && strstr(err, "listen: unknown command 'bogus'"), "listen bogus: usage");
	tap_ok(run("listen", "help", NULL) == 0 && strstr(out, "listen add URL"), "listen help");
}

static void test_listen_allow(void)
{
	json_t *j;
	int rc;

	mock_reset();
	rc = run("listen", "allow", "show", NULL);
	tap_ok(rc == 0 && !strcmp(out, "any\n") && !strcmp(mock.log, "ALLOWDUMP "),
	       "listen allow show, empty: any") || (show_output(), 0);
	rc = run("listen", "allow", "add", "192.0.2.0/24", NULL);
	tap_ok(rc == 0 && !out[0] && !err[0] && mock.n_allow == 1 &&
	       !strcmp(mock.allow[0], "192.0.2.0/24"), "listen allow add: quiet") ||
		(show_output(), 0);
	rc = run("listen", "allow", "add", "2001:DB8:0::1", NULL);
	tap_ok(rc == 0 && mock.n_allow == 2, "listen allow add of an IPv6 address");
	rc = run("listen", "allow", "add", "192.0.2.0/24", NULL);
	tap_ok(rc == 1, "listen allow add of an entry already there: exit 1");
	tap_contains(err, "engramctl: listen allow add 192.0.2.0/24: File exists: "
		     "engram_rdma: the entry is already on the allow-list (attribute ALLOW)",
		     "  ...EEXIST with the kernel's message");
	rc = run("listen", "allow", "add", "192.0.2.1/24", NULL);
	tap_ok(rc == 1 && mock.n_allow == 2, "listen allow add with address bits past the length: exit 1");
	tap_contains(err, "engramctl: listen allow add 192.0.2.1/24: Invalid argument: "
		     "engram_rdma: bad allow-list entry (attribute ALLOW)\n"
		     "engramctl: 192.0.2.1/24: '192.0.2.1/24' has address bits set past the prefix "
		     "length: did you mean 192.0.2.0/24?",
		     "  ...the kernel's message, then the parser's reason");
	rc = run("listen", "allow", "add", "[2001:db8::1]", NULL);
	tap_contains(err, "write IPv6 addresses without brackets", "listen allow add [v6]: refused");
	rc = run("listen", "show", NULL);
	tap_ok(rc == 0 && !strcmp(out, "allow: 192.0.2.0/24 2001:db8::1\n"),
	       "listen show ends with the allow-list") || (show_output(), 0);
	rc = run("listen", "allow", NULL);
	tap_ok(rc == 0 && !strcmp(out, "192.0.2.0/24\n2001:db8::1\n"),
	       "listen allow (show): one entry per line, canonical, in order") ||
		(show_output(), 0);
	rc = run("-j", "listen", "allow", "list", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(j) == 2 &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 0), "prefix")),
		       "192.0.2.0/24") &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 0), "family")), "ipv4") &&
	       json_integer_value(json_object_get(json_array_get(j, 0), "length")) == 24 &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 1), "family")), "ipv6") &&
	       json_integer_value(json_object_get(json_array_get(j, 1), "length")) == 128,
	       "listen allow show -j: prefix, family, length") || (show_output(), 0);
	json_decref(j);
	rc = run("listen", "allow", "del", "2001:db8:0:0:0:0:0:1/128", NULL);
	tap_ok(rc == 0 && mock.n_allow == 1, "listen allow del by an equal entry");
	rc = run("listen", "allow", "del", "10.0.0.0/8", NULL);
	tap_ok(rc == 1, "listen allow del of an entry not there: exit 1");
	tap_contains(err, "listen allow del 10.0.0.0/8: No such file or directory: "
		     "engram_rdma: no such entry on the allow-list", "  ...ENOENT with the message");
	rc = run("listen", "allow", "add", NULL);
	tap_ok(rc == 2 && strstr(err, "listen allow add: PREFIX missing"),
	       "listen allow add without PREFIX: usage");
	rc = run("listen", "allow", "del", "a", "b", NULL);
	tap_ok(rc == 2 && strstr(err, "unexpected argument 'b'"), "listen allow del with 2: usage");
	rc = run("listen", "allow", "bogus", NULL);
	tap_ok(rc == 2 && strstr(err, "listen allow: unknown command 'bogus'"),
	       "listen allow bogus: usage");
	tap_ok(run("listen", "allow", "help", NULL) == 0 && strstr(out, "listen allow add PREFIX"),
	       "listen allow help");
	mock.eperm = 1;
	rc = run("listen", "allow", "del", "192.0.2.0/24", NULL);
	tap_ok(rc == 1 && mock.n_allow == 1, "listen allow del without CAP_NET_ADMIN: exit 1");
	tap_contains(err, "Operation not permitted (needs CAP_NET_ADMIN): "
		     "engram_rdma: changing the allow-list needs CAP_NET_ADMIN", "  ...says so");
}

static void test_link(void)
{
	struct mock_table *tt, *tt2;
	json_t *j;
	int rc;

	mock_reset();
	rc = run("link", "add", "rdma://192.0.2.1@192.0.2.9", NULL);
	tap_ok(rc == 0 && !strcmp(out, "1\n") && !err[0] && !strcmp(mock.log, "LINKADD "),
	       "link add: prints the new id alone") || (show_output(), 0);
	rc = run("-j", "link", "add", "tcp://[2001:db8::1]:9000@[2001:db8::2]", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_integer_value(json_object_get(j, "id")) == 2 &&
	       !strcmp(json_string_value(json_object_get(j, "state")), "connecting") &&
	       !strcmp(json_string_value(json_object_get(j, "url")),
		       "tcp://[2001:db8::1]:9000@[2001:db8::2]") &&
	       !json_object_get(j, "fetches"),
	       "link add -j: the link object") || (show_output(), 0);
	json_decref(j);
	rc = run("link", "add", "rdma://192.0.2.1", NULL);
	tap_ok(rc == 1 && !mock.k[2].used, "link add without @LOCAL: exit 1");
	tap_contains(err, "Invalid argument: engram_rdma: bad remote URL (attribute URL)\n"
		     "engramctl: rdma://192.0.2.1: a remote URL needs the local address",
		     "  ...kernel message and the parser's reason");
	mock.link_reply_empty = 1;
	rc = run("link", "add", "rdma://192.0.2.3@192.0.2.9", NULL);
	tap_ok(rc == 1 && strstr(err, "reply carried no link id"),
	       "link add whose reply has no id: exit 1, says where to look");
	mock.link_reply_empty = 0;

	mock.k[0].state = ENGRAM_LINK_UP;
	mock.k[0].tables = 2;
	mock.k[0].max_rows = 65536;
	mock.k[0].max_inflight = 32;
	mock.k[0].connects = 1;
	mock.k[0].since_ns = 185000000000ULL;
	snprintf(mock.k[0].device, sizeof(mock.k[0].device), "mlx5_0");
	mock.k[1].state = ENGRAM_LINK_DOWN;
	mock.k[1].error = ECONNREFUSED;
	mock.log[0] = '\0';
	rc = run("link", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "LINKDUMP ") &&
	       !strcmp(out, "link 1: state up for 3:05 url rdma://192.0.2.1@192.0.2.9 device mlx5_0 "
			    "tables 2 max_rows 65536 max_inflight 32 connects 1\n"
			    "link 2: state down for 1.5 s url tcp://[2001:db8::1]:9000@[2001:db8::2] "
			    "tables 0 connects 0 error \"Connection refused\"\n"
			    "link 3: state connecting for 1.5 s url rdma://192.0.2.3@192.0.2.9 "
			    "tables 0 connects 0\n"),
	       "link (list): one line each, by id") || (show_output(), 0);
	mock.log[0] = '\0';
	rc = run("link", "show", "2", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "LINKGET CATALOGDUMP ") && mock.last_link_id == 2 &&
	       !strcmp(out, "link 2\n  state           down for 1.5 s\n"
			    "  url             tcp://[2001:db8::1]:9000@[2001:db8::2]\n"
			    "  last error      Connection refused (111)\n"
			    "  tables          0\n  limits          not negotiated yet\n"
			    "  connects        0\n"),
	       "link show ID: detail block with the last error as text") || (show_output(), 0);
	rc = run("link", "show", NULL);
	tap_ok(rc == 0 && strstr(out, "link 1\n  state           up for 3:05\n") &&
	       strstr(out, "  device          mlx5_0\n  tables          2\n"
			   "  max rows        65536\n  max inflight    32\n") &&
	       strstr(out, "\n\nlink 2\n"), "link show: every link's block");
	rc = run("-j", "link", "show", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(j) == 3 &&
	       json_integer_value(json_object_get(json_array_get(j, 0), "since_ns")) ==
	       185000000000LL &&
	       json_integer_value(json_object_get(json_array_get(j, 0), "max_rows")) == 65536 &&
	       !strcmp(json_string_value(json_object_get(json_array_get(j, 1), "error_str")),
		       "Connection refused") &&
	       json_integer_value(json_object_get(json_array_get(j, 1), "error")) == ECONNREFUSED,
	       "link show -j: array of link objects") || (show_output(), 0);
	json_decref(j);

	/* Two links up serving one table: its replicas. */
	mock.k[2].state = ENGRAM_LINK_UP;
	tt = mock_add("emb", ENGRAM_TABLE_READY, 1000);
	memset(tt->sha256, 0xab, sizeof(tt->sha256));
	mock.log[0] = '\0';
	rc = run("link", "tables", NULL);
	tap_ok(rc == 0 && !strcmp(mock.log, "CATALOGDUMP ") &&
	       !strcmp(out, "emb sha256 abababababababab rows 1000: link 1 (up, ready) "
			    "link 3 (up, ready)\n"),
	       "link tables: a table and the links that serve it") || (show_output(), 0);
	rc = run("link", "tables", "3", NULL);
	tap_ok(rc == 0 && !strcmp(out, "emb sha256 abababababababab rows 1000: link 3 (up, ready)\n"),
	       "link tables ID: that link's only") || (show_output(), 0);
	rc = run("-j", "link", "tables", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(j) == 1 &&
	       json_array_size(json_object_get(json_array_get(j, 0), "links")) == 2 &&
	       json_integer_value(json_object_get(json_array_get(json_object_get(
			json_array_get(j, 0), "links"), 1), "link")) == 3 &&
	       !strncmp(json_string_value(json_object_get(json_array_get(j, 0), "sha256")),
			"abab", 4),
	       "link tables -j: the table with an array of its links") || (show_output(), 0);
	json_decref(j);
	/*
	 * Two tables of one file (one digest, other tensors) are two tables,
	 * never one table's replicas.
	 */
	tt->woff = 4096;
	tt->soff = 4096 + 1000 * 256;
	tt2 = mock_add("emb14", ENGRAM_TABLE_READY, 1000);
	memcpy(tt2->sha256, tt->sha256, sizeof(tt2->sha256));
	tt2->woff = tt->soff + 1000 * 8;
	tt2->soff = tt2->woff + 1000 * 256;
	rc = run("link", "tables", NULL);
	tap_ok(rc == 0 && !strcmp(out, "emb sha256 abababababababab rows 1000 weight@4096 scale@260096: "
			    "link 1 (up, ready) link 3 (up, ready)\n"
			    "emb14 sha256 abababababababab rows 1000 weight@268096 scale@524096: "
			    "link 1 (up, ready) link 3 (up, ready)\n"),
	       "link tables: two tables of one file are told apart by their tensors") ||
		(show_output(), 0);
	rc = run("-j", "link", "tables", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(j) == 2 &&
	       json_integer_value(json_object_get(json_array_get(j, 1), "weight_offset")) == 268096,
	       "link tables -j: each with its weight_offset") || (show_output(), 0);
	json_decref(j);
	tt2->used = 0;
	rc = run("link", "show", "1", NULL);
	tap_ok(rc == 0 && strstr(out, "  serves          emb (ready)\n"),
	       "link show: the tables the link's host serves") || (show_output(), 0);
	rc = run("-j", "link", "show", NULL);
	j = json_loads(out, 0, NULL);
	tap_ok(rc == 0 && json_array_size(json_object_get(json_array_get(j, 0), "serves")) == 1 &&
	       json_array_size(json_object_get(json_array_get(j, 1), "serves")) == 0,
	       "link show -j: serves, per link") || (show_output(), 0);
	json_decref(j);
	tt->used = 0;
	mock.k[2].state = ENGRAM_LINK_CONNECTING;

	rc = run("link", "show", "9", NULL);
	tap_ok(rc == 1, "link show of an unknown id: exit 1");
	tap_contains(err, "engramctl: link 9: No such file or directory: engram_rdma: no link with "
		     "that id (attribute LINK_ID)", "  ...ENOENT, message, attribute");
	mock.log[0] = '\0';
	rc = run("link", "show", "0", NULL);
	tap_ok(rc == 2 && strstr(err, "link ID '0' is not a number from 1 to 4294967295") &&
	       !strstr(mock.log, "LINKGET"), "link show 0: usage error, nothing sent");
	rc = run("link", "del", "4294967296", NULL);
	tap_ok(rc == 2, "link del of an id above 32 bits: usage error");
	rc = run("link", "del", "1x", NULL);
	tap_ok(rc == 2, "link del of a non-number: usage error");
	rc = run("link", "del", "1", NULL);
	tap_ok(rc == 0 && !out[0] && !mock_find_name_ok("x") && !mock.k[0].used,
	       "link del: quiet, link gone");
	rc = run("link", "del", "1", NULL);
	tap_ok(rc == 1 && strstr(err, "link del 1: No such file or directory"), "link del again: 1");
	rc = run("link", "list", "3", NULL);
	tap_ok(rc == 2, "link list takes no ID");
	mock.eperm = 1;
	rc = run("link", "del", "2", NULL);
	tap_ok(rc == 1 && strstr(err, "(needs CAP_NET_ADMIN): engram_rdma: changing links needs") &&
	       mock.k[1].used, "link del without CAP_NET_ADMIN: refused, link kept");
	rc = run("link", "list", NULL);
	tap_ok(rc == 0, "link list works without CAP_NET_ADMIN");
	mock.no_module = 1;
	rc = run("link", "list", NULL);
	tap_ok(rc == 1 && strstr(err, "module not loaded"), "link list without the module: exit 1");
	tap_ok(run("link", "-h", NULL) == 0 && strstr(out, "link show [ID]"), "link -h");
}

/* "engramctl ARGS" prints what "engramctl FULL" prints, with the same status. */
static int same_as(const char *what, const char *const *args, const char *const *full)
{
	static char want[sizeof(out)], want_err[sizeof(err)];
	int rc_full, rc;

	rc_full = run(full[0], full[1], full[2], full[3], NULL);
	memcpy(want, out, sizeof(want));
	memcpy(want_err, err, sizeof(want_err));
	rc = run(args[0], args[1], args[2], args[3], NULL);
	return tap_ok(rc == rc_full && !strcmp(out, want) && !strcmp(err, want_err) &&
		      (out[0] || err[0]), "%s (exit %d)", what, rc);
}

/* Words may be cut to a prefix: the first command, in each table's order, that it begins. */
static void test_prefixes(void)
{
	static const char *const tl[] = { "t", "l", NULL, NULL };
	static const char *const table_list[] = { "table", "list", NULL, NULL };
	static const char *const tsh[] = { "ta", "sh", NULL, NULL };
	static const char *const table_show[] = { "table", "show", NULL, NULL };
	static const char *const l[] = { "l", NULL, NULL, NULL };
	static const char *const link_list[] = { "link", "list", NULL, NULL };
	static const char *const lis[] = { "lis", "al", "s", NULL };
	static const char *const allow_show[] = { "listen", "allow", "show", NULL };
	static const char *const sh[] = { "sh", NULL, NULL, NULL };
	static const char *const show[] = { "show", NULL, NULL, NULL };
	static const char *const lisp[] = { "listen", "show", NULL, NULL };
	static const char *const lis_[] = { "list", NULL, NULL, NULL };

	same_as("engramctl t l is table list", tl, table_list);
	same_as("engramctl ta sh is table show", tsh, table_show);
	same_as("engramctl l is link list", l, link_list);
	same_as("engramctl lis al s is listen allow show", lis, allow_show);
	same_as("engramctl sh is show", sh, show);
	same_as("engramctl listen with no command is listen show", (const char *const[]){
		"listen", NULL, NULL, NULL }, lisp);
	same_as("engramctl list is the table list, not listen", lis_, table_list);
	mock_reset();
	tap_ok(run("lo", file, "--tensor", "a", "--name", "p", "--no-progress", NULL) == 0 &&
	       strstr(mock.log, "LOAD "), "engramctl lo FILE is load");
	tap_ok(run("table", "z", NULL) == 2 && strstr(err, "table: unknown command 'z'"),
	       "a prefix of nothing: unknown command, exit 2");
	tap_ok(run("link", "h", NULL) == 0 && strstr(out, "link show [ID]"), "link h is help");
	tap_ok(run("x", NULL) == 2 && strstr(err, "unknown object 'x'"), "x: unknown object");
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

/*
 * systemd's side of a Type=notify unit, in a child: every datagram on the
 * socket at @path appended to @log (a "--" line after each), the fd of a
 * BARRIER=1 closed as systemd closes it, until "END" or 20 s.
 */
static pid_t notify_listener(const char *path, const char *log)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct timeval tv = { .tv_sec = 20 };
	char buf[4096], cbuf[CMSG_SPACE(sizeof(int) * 4)];
	struct cmsghdr *cm;
	struct msghdr mh;
	struct iovec iov;
	FILE *f;
	ssize_t n;
	pid_t pid;
	int s, i;

	s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	unlink(path);
	if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) ||
	    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)))
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid) {
		close(s);
		return pid;
	}
	f = fopen(log, "w");
	for (i = 0; f && i < 1000; i++) {
		iov = (struct iovec){ buf, sizeof(buf) - 1 };
		mh = (struct msghdr){ .msg_iov = &iov, .msg_iovlen = 1,
				      .msg_control = cbuf, .msg_controllen = sizeof(cbuf) };
		n = recvmsg(s, &mh, MSG_CMSG_CLOEXEC);
		if (n < 0)
			break;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
				int *fds = (int *)CMSG_DATA(cm);
				size_t k;

				for (k = 0; k < (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int); k++)
					close(fds[k]);
			}
		}
		buf[n] = '\0';
		if (!strcmp(buf, "END"))
			break;
		fprintf(f, "%s\n--\n", buf);
		fflush(f);
	}
	if (f)
		fclose(f);
	_exit(0);
}

/* Ends the listener and returns what it heard, in @heard. */
static void notify_collect(const char *path, const char *log, pid_t pid, char *heard, size_t len)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int s = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	FILE *f;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (s >= 0) {
		sendto(s, "END", 3, 0, (struct sockaddr *)&sa, sizeof(sa));
		close(s);
	}
	waitpid(pid, NULL, 0);
	heard[0] = '\0';
	f = fopen(log, "r");
	if (f)
		slurp(f, heard, len);
	unlink(path);
	unlink(log);
}

/* engram-rdma-tables.service is Type=notify: what sync tells systemd. */
static void test_sync_notify(void)
{
	char conf[PATH_MAX], sock[sizeof(((struct sockaddr_un *)0)->sun_path)], log[PATH_MAX];
	char text[12288];
	static char heard[65536];
	const char *dir = getenv("TMPDIR");
	char *ready;
	pid_t pid;
	int rc;

	snprintf(sock, sizeof(sock), "%s/engram-notify-%d", dir && *dir ? dir : "/tmp", getpid());
	snprintf(log, sizeof(log), "%s.log", sock);
	snprintf(text, sizeof(text), "t1 %s a -\nt2 %s b %s\n", real, real, sha_hex);
	if (!tap_ok(write_conf(conf, text) == 0, "notify: config written"))
		return;

	mock_reset();
	pid = notify_listener(sock, log);
	if (!tap_ok(pid > 0, "notify: a socket stands in for systemd's"))
		return;
	setenv("NOTIFY_SOCKET", sock, 1);
	rc = run("table", "sync", "--config", conf, NULL);
	unsetenv("NOTIFY_SOCKET");
	notify_collect(sock, log, pid, heard, sizeof(heard));
	tap_ok(rc == 0, "notify: sync under NOTIFY_SOCKET loads both, exit 0") || (show_output(), 0);
	tap_contains(heard, "STATUS=2 tables listed in ", "notify: status names the tables listed");
	tap_contains(heard, "STATUS=loading t1 from ", "notify: status names each table as it loads");
	tap_contains(heard, "STATUS=loading t2: ", "notify: a running load's progress is the status");
	tap_contains(heard, "\nEXTEND_TIMEOUT_USEC=90000000\n",
		     "notify: a running load extends the start timeout");
	ready = strstr(heard, "READY=1\nSTATUS=2 tables serving (2 loaded now, 0 unchanged)\n--\n");
	if (!tap_ok(ready != NULL, "notify: READY=1 once both serve, with a last status line"))
		tap_diag("heard: %s", heard);
	tap_ok(ready && !strstr(ready, "STATUS=loading"), "notify: nothing of a load after READY=1");
	tap_contains(heard, "BARRIER=1", "notify: READY=1 waits until systemd has read it");

	/* Again: nothing to load, ready at once. */
	pid = notify_listener(sock, log);
	setenv("NOTIFY_SOCKET", sock, 1);
	rc = run("table", "sync", "--config", conf, NULL);
	unsetenv("NOTIFY_SOCKET");
	notify_collect(sock, log, pid, heard, sizeof(heard));
	tap_ok(rc == 0 && strstr(heard, "READY=1\nSTATUS=2 tables serving (0 loaded now, 2 unchanged)"),
	       "notify: a start with both loaded already is ready at once");

	/* A table that fails: no READY=1 (the start fails on the exit status). */
	mock_reset();
	mock.fail_load = 1;
	pid = notify_listener(sock, log);
	setenv("NOTIFY_SOCKET", sock, 1);
	rc = run("table", "sync", "--config", conf, NULL);
	unsetenv("NOTIFY_SOCKET");
	notify_collect(sock, log, pid, heard, sizeof(heard));
	tap_ok(rc == 1 && !strstr(heard, "READY=1"), "notify: a failed load sends no READY=1, exit 1");
	tap_contains(heard, "STATUS=2 of 2 tables failed", "  ...and its status says how many failed");
	unlink(conf);
}

int main(void)
{
	if (!tap_ok(make_file() == 0, "test file written and hashed"))
		return tap_done();
	test_load();
	test_load_errors();
	test_sync();
	test_sync_notify();
	test_list_show();
	test_verify_unload();
	test_drain_usage();
	test_drain();
	test_catalog_draining();
	test_stats();
	test_stats_links();
	test_listen();
	test_listen_allow();
	test_link();
	test_prefixes();
	test_usage();
	unlink(file);
	gen_plan_free(&plan);
	return tap_done();
}
