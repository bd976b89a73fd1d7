// SPDX-License-Identifier: GPL-2.0
/*
 * engramctl mktable: write a synthetic Engram table file for tests and demos.
 *
 * The file is written under a temporary name next to FILE and renamed into
 * place when complete, so a crash or Ctrl-C never leaves a plausible-looking
 * truncated table behind.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engramctl.h"
#include "fmt.h"
#include "gen.h"
#include "jsonout.h"
#include "progress.h"

/* For the signal handler: unlink() is async-signal-safe, the path is static. */
static char tmp_path[4096 + 32];

static void on_signal(int sig)
{
	unlink(tmp_path);
	signal(sig, SIG_DFL);
	raise(sig);
}

void usage_mktable(FILE *f)
{
	fputs("Usage: engramctl [-j] mktable FILE --rows N [--seed S] [--prefix P]...\n"
	      "                 [--pad-before BYTES] [--pad-after BYTES] [--meta KEY=VALUE]...\n"
	      "                 [--no-progress]\n"
	      "\n"
	      "Writes a safetensors file holding, for each prefix P (default\n"
	      GEN_DEFAULT_PREFIX "), P.weight [N,256] F8_E4M3 and P.scale [N,8] F8_E8M0\n"
	      "with contents a pure function of (seed, prefix index, row).  --pad-before and\n"
	      "--pad-after add U8 tensors \"pad.before\"/\"pad.after\" around them so offsets are\n"
	      "not trivially aligned.  BYTES and N take K, M, G, T (binary) suffixes.\n", f);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

struct mk_progress {
	struct progress pg;
	uint64_t start_ns;
};

static void mk_progress(uint64_t done, uint64_t total, void *arg)
{
	struct mk_progress *mp = arg;

	progress_update(&mp->pg, done, total, now_ns() - mp->start_ns);
}

static int print_result(const char *file, const struct gen_params *p, const struct gen_plan *plan,
			uint64_t ns)
{
	char sz[32];
	json_t *root, *arr, *t;
	int ret;
	size_t i;

	if (!opts.json) {
		printf("%s: %" PRIu64 " bytes (%s), header %" PRIu64 " bytes, seed %" PRIu64
		       ", written in %.2f s\n", file, plan->file_size,
		       fmt_bytes(sz, sizeof(sz), plan->file_size), plan->header_len, p->seed,
		       (double)ns / 1e9);
		for (i = 0; i < p->nprefixes; i++)
			printf("  %s: rows %" PRIu64 " weight_offset %" PRIu64 " scale_offset %"
			       PRIu64 "\n", p->prefixes[i], p->rows, plan->weight_offset[i],
			       plan->scale_offset[i]);
		return EXIT_OK;
	}
	root = json_object();
	arr = json_array();
	ret = !root || !arr ||
	      json_set(root, "file", json_string(file)) ||
	      json_set(root, "file_bytes", json_u64(plan->file_size)) ||
	      json_set(root, "header_bytes", json_u64(plan->header_len)) ||
	      json_set(root, "seed", json_u64(p->seed)) ||
	      json_set(root, "tables", json_incref(arr));
	for (i = 0; !ret && i < p->nprefixes; i++) {
		t = json_object();
		ret = !t || json_array_append_new(arr, t) ||
		      json_set(t, "prefix", json_string(p->prefixes[i])) ||
		      json_set(t, "rows", json_u64(p->rows)) ||
		      json_set(t, "weight_offset", json_u64(plan->weight_offset[i])) ||
		      json_set(t, "scale_offset", json_u64(plan->scale_offset[i]));
	}
	json_decref(arr);
	if (ret) {
		json_decref(root);
		root = NULL;
	}
	return json_print(root, opts.pretty) ? EXIT_FAIL : EXIT_OK;
}

static int parse_size_arg(const char *opt, const char *arg, uint64_t *v)
{
	if (!parse_u64(arg, v, 1))
		return 0;
	usage_error("mktable", "%s: '%s' is not a byte count", opt, arg);
	return -1;
}

int cmd_mktable(int argc, char **argv)
{
	static const struct option longopts[] = {
		{ "rows", required_argument, NULL, 'r' },
		{ "seed", required_argument, NULL, 's' },
		{ "prefix", required_argument, NULL, 'P' },
		{ "pad-before", required_argument, NULL, 'b' },
		{ "pad-after", required_argument, NULL, 'a' },
		{ "meta", required_argument, NULL, 'm' },
		{ "no-progress", no_argument, NULL, 'N' },
		COMMON_LONGOPTS_JSON,
		COMMON_LONGOPTS_PRETTY,
		COMMON_LONGOPTS_HELP,
		{ NULL, 0, NULL, 0 },
	};
	const char *default_prefix = GEN_DEFAULT_PREFIX, *file;
	const char **prefixes = NULL, **meta = NULL;
	struct gen_params p = { 0 };
	struct gen_plan plan = { 0 };
	struct mk_progress mp;
	int c, fd = -1, rc = EXIT_USAGE, show_progress = 1;
	char err[256] = "";
	struct stat sb;
	uint64_t start;
	mode_t mask;

	prefixes = calloc(argc, sizeof(*prefixes));
	meta = calloc(argc, sizeof(*meta));
	if (!prefixes || !meta) {
		err_msg("out of memory");
		rc = EXIT_FAIL;
		goto out;
	}
	optind = 0;
	while ((c = getopt_long(argc, argv, COMMON_SHORTOPTS "r:s:P:b:a:m:", longopts,
				NULL)) != -1) {
		switch (common_opt(c, argv, "mktable", usage_mktable, &rc)) {
		case 1:
			continue;
		case -1:
			goto out;
		}
		switch (c) {
		case 'r':
			if (parse_u64(optarg, &p.rows, 1) || !p.rows) {
				usage_error("mktable", "--rows: '%s' is not a positive count",
					    optarg);
				goto out;
			}
			break;
		case 's':
			if (parse_u64(optarg, &p.seed, 0)) {
				usage_error("mktable", "--seed: '%s' is not a number", optarg);
				goto out;
			}
			break;
		case 'P':
			prefixes[p.nprefixes++] = optarg;
			break;
		case 'b':
			if (parse_size_arg("--pad-before", optarg, &p.pad_before))
				goto out;
			break;
		case 'a':
			if (parse_size_arg("--pad-after", optarg, &p.pad_after))
				goto out;
			break;
		case 'm':
			meta[p.nmeta++] = optarg;
			break;
		case 'N':
			show_progress = 0;
			break;
		}
	}
	if (optind != argc - 1) {
		usage_error("mktable", optind >= argc ? "FILE missing" : "one FILE only");
		goto out;
	}
	file = argv[optind];
	if (!p.rows) {
		usage_error("mktable", "--rows N missing");
		goto out;
	}
	if (!p.nprefixes) {
		prefixes[0] = default_prefix;
		p.nprefixes = 1;
	}
	p.prefixes = prefixes;
	p.meta = meta;
	rc = EXIT_FAIL;
	/* The rename would replace a device node or a symlink, not write through it. */
	if (!lstat(file, &sb) && !S_ISREG(sb.st_mode)) {
		err_msg("%s: exists and is not a regular file", file);
		goto out;
	}
	if (gen_plan(&p, &plan, err, sizeof(err))) {
		err_msg("mktable: %s", err);
		goto out;
	}

	if (snprintf(tmp_path, sizeof(tmp_path), "%s.tmp.XXXXXX", file) >= (int)sizeof(tmp_path)) {
		err_msg("%s: path too long", file);
		goto out;
	}
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fd = mkostemp(tmp_path, O_CLOEXEC);
	if (fd < 0) {
		err_msg("%s: cannot create temporary file: %s", file, strerror(errno));
		tmp_path[0] = '\0';
		goto out;
	}
	/* mkstemp makes 0600; the result should be an ordinary 0666 & ~umask file. */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask)) {
		err_msg("%s: chmod: %s", tmp_path, strerror(errno));
		goto out;
	}

	progress_init(&mp.pg, "writing", file, show_progress && plan.file_size >= (256u << 20));
	start = now_ns();
	mp.start_ns = start;
	p.progress = mk_progress;
	p.progress_arg = &mp;
	if (gen_write(fd, &p, &plan, err, sizeof(err))) {
		progress_end(&mp.pg);
		err_msg("%s: %s", tmp_path, err);
		goto out;
	}
	progress_end(&mp.pg);
	if (close(fd)) {
		fd = -1;
		err_msg("%s: close: %s", tmp_path, strerror(errno));
		goto out;
	}
	fd = -1;
	if (rename(tmp_path, file)) {
		err_msg("%s: rename from %s: %s", file, tmp_path, strerror(errno));
		goto out;
	}
	tmp_path[0] = '\0';
	rc = print_result(file, &p, &plan, now_ns() - start);
out:
	if (fd >= 0)
		close(fd);
	if (tmp_path[0])
		unlink(tmp_path);
	gen_plan_free(&plan);
	free(prefixes);
	free(meta);
	return rc;
}
