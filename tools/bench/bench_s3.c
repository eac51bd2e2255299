/*
 * zest-bench s3: an S3 load generator in warp's shape, on libcurl (CURLOPT_AWS_SIGV4).
 *
 * Each of --concurrent worker threads owns one curl handle (one keep-alive connection)
 * and issues operations back to back until --duration ends; operations that start during
 * --warmup are not counted. get, delete and mixed first upload --objects objects to read
 * or delete. Objects this run created are deleted at the end unless --noclear. The workers
 * are bench_s3_load.h's, which zest-prof --s3 drives too.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "bench_report.h"
#include "bench_s3_load.h"
#include "zc.h"

enum op {
	OP_PUT = BENCH_S3_PUT,
	OP_GET = BENCH_S3_GET,
	OP_DELETE = BENCH_S3_DELETE,
	OP_COUNT = BENCH_S3_OPS
};

/* The command line: the load's configuration and how to run and report it. */
struct config {
	struct bench_s3_config s3;
	bool json, noclear;
	uint64_t duration_ns, warmup_ns;
	unsigned mix[OP_COUNT]; /* percent per op */
};

static const struct profile {
	const char *name;
	uint64_t size;
	unsigned get, put;
} profiles[] = {
	{ "database", 8 << 10, 70, 30 },    { "email", 4 << 10, 60, 40 },
	{ "fileserver", 64 << 10, 90, 10 }, { "streaming", 5 << 20, 80, 20 },
	{ "vdi", 4 << 10, 20, 80 },
};

static void
set_only(unsigned *mix, enum op only)
{
	for (int op = 0; op < OP_COUNT; op++)
		mix[op] = op == (int)only ? 100 : 0;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "usage: zest-bench s3 put|get|mixed|delete [options]\n" BENCH_S3_USAGE_ENDPOINT
	        "  --bucket NAME         (default zest-bench; created if missing)\n"
	        "  --obj.size SIZE       object size (default 1MiB)\n"
	        "  --concurrent N        parallel connections (default 8)\n"
	        "  --duration D          measured time (default 30s)\n"
	        "  --warmup D            uncounted time before it (default 2s)\n"
	        "  --objects N           objects preloaded for get/delete/mixed (default 100)\n"
	        "  --get-distrib P, --put-distrib P, --delete-distrib P   mixed percentages\n"
	        "                        (default 60/30/10)\n"
	        "  --profile NAME        database|email|fileserver|streaming|vdi (size and mix)\n"
	        "  --noclear             keep the objects this run created\n"
	        "  --json                one JSON object instead of the report\n");
}

static int
parse_args(int argc, char **argv, struct config *cfg, const char **mode)
{
	static const struct option opts[] = {
		BENCH_S3_OPTIONS,
		{ "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "objects", required_argument, NULL, 'o' },
		{ "get-distrib", required_argument, NULL, 'G' },
		{ "put-distrib", required_argument, NULL, 'P' },
		{ "delete-distrib", required_argument, NULL, 'D' },
		{ "profile", required_argument, NULL, 'p' },
		{ "noclear", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, idx = 0;

	while ((opt = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		int own = bench_s3_parse_opt(opt, optarg, &cfg->s3);

		if (own < 0)
			goto bad;
		if (own)
			continue;
		switch (opt) {
		case 'n':
			cfg->noclear = true;
			break;
		case 'j':
			cfg->json = true;
			break;
		case 'd':
			if (zc_parse_duration_ns(optarg, &cfg->duration_ns) < 0)
				goto bad;
			break;
		case 'w':
			if (zc_parse_duration_ns(optarg, &cfg->warmup_ns) < 0)
				goto bad;
			break;
		case 'o':
			cfg->s3.objects = (unsigned)atoi(optarg);
			if (cfg->s3.objects < 1)
				goto bad;
			break;
		case 'G':
			cfg->mix[OP_GET] = (unsigned)atoi(optarg);
			break;
		case 'P':
			cfg->mix[OP_PUT] = (unsigned)atoi(optarg);
			break;
		case 'D':
			cfg->mix[OP_DELETE] = (unsigned)atoi(optarg);
			break;
		case 'p': {
			size_t i;

			for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
				if (!strcmp(optarg, profiles[i].name))
					break;
			if (i == sizeof(profiles) / sizeof(profiles[0]))
				goto bad;
			cfg->s3.obj_size = profiles[i].size;
			cfg->mix[OP_GET] = profiles[i].get;
			cfg->mix[OP_PUT] = profiles[i].put;
			cfg->mix[OP_DELETE] = 0;
			*mode = "mixed";
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc)
		*mode = argv[optind];
	return 0;
bad:
	fprintf(stderr, "zest-bench s3: bad value '%s' for --%s\n", optarg, opts[idx].name);
	return -EINVAL;
}

int
bench_s3_main(int argc, char **argv)
{
	struct config cfg = {
		.duration_ns = 30000000000ull,
		.warmup_ns = 2000000000ull,
		.mix = { [OP_GET] = 60, [OP_PUT] = 30, [OP_DELETE] = 10 },
	};
	struct bench_stats total[OP_COUNT];
	struct bench_s3_load *load;
	const char *mode = NULL;
	bool first = true;
	int rc = 0;

	bench_s3_config_defaults(&cfg.s3);
	cfg.s3.bucket = "zest-bench";
	cfg.s3.concurrent = 8;
	cfg.s3.objects = 100;
	if (parse_args(argc, argv, &cfg, &mode) < 0)
		return 2;
	if (!mode) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(mode, "put")) {
		set_only(cfg.mix, OP_PUT);
		cfg.s3.objects = 0;
	} else if (!strcmp(mode, "get")) {
		set_only(cfg.mix, OP_GET);
	} else if (!strcmp(mode, "delete")) {
		set_only(cfg.mix, OP_DELETE);
		cfg.warmup_ns = 0;
	} else if (strcmp(mode, "mixed") != 0) {
		fprintf(stderr, "zest-bench s3: unknown mode '%s'\n", mode);
		return 2;
	}
	if (cfg.mix[OP_GET] + cfg.mix[OP_PUT] + cfg.mix[OP_DELETE] != 100) {
		fprintf(stderr, "zest-bench s3: the distribution must add up to 100\n");
		return 2;
	}
	if (cfg.mix[OP_PUT] == 100)
		cfg.s3.objects = 0;

	if (bench_s3_load_create(&cfg.s3, &load) < 0)
		return 1;
	if (cfg.s3.objects && bench_s3_load_preload(load) < 0) {
		rc = 1;
		goto out;
	}
	if (bench_s3_load_run(load, cfg.mix, cfg.warmup_ns, cfg.duration_ns,
	                      !cfg.json && isatty(STDERR_FILENO), total) < 0)
		rc = 1;
	if (cfg.json) {
		printf("{\"mode\":\"%s\",\"concurrent\":%u,\"obj_size\":%llu,\"ops\":[", mode,
		       cfg.s3.concurrent, (unsigned long long)cfg.s3.obj_size);
		for (int op = 0; op < OP_COUNT; op++) {
			if (!cfg.mix[op])
				continue;
			printf("%s", first ? "" : ",");
			bench_report_json(stdout, &total[op], cfg.duration_ns);
			first = false;
		}
		printf("]}\n");
	} else {
		bench_print_context(stdout, argc, argv);
		for (int op = 0; op < OP_COUNT; op++)
			if (cfg.mix[op])
				bench_report_text(stdout, &total[op], cfg.s3.concurrent,
				                  cfg.duration_ns);
	}
	for (int op = 0; op < OP_COUNT; op++) {
		if (total[op].errors)
			rc = 1;
		bench_stats_fini(&total[op]);
	}
out:
	if (!cfg.noclear)
		bench_s3_load_clear(load);
	bench_s3_load_destroy(load);
	return rc;
}
