/* zest-bench: benchmarks that report medians and ratios against same-run baselines. */
#include <stdio.h>
#include <string.h>
#include <sys/utsname.h>

#include "bench.h"

static const struct {
	const char *name;
	int (*main)(int, char **);
	const char *what;
} commands[] = {
	{ "admission", bench_adm_main, "write jobs retried on 503, admission on vs off, + chart" },
	{ "ec", bench_ec_main, "Reed-Solomon codec vs raw ISA-L ec_encode_data" },
	{ "etcd", bench_etcd_main, "metadata Txn rate of an etcd through cl_etcd, N callers" },
	{ "grpc", bench_grpc_main, "stream objects to a datanode's Write RPC (throughput)" },
	{ "s3", bench_s3_main, "S3 load in warp's shape: put, get, mixed, delete" },
	{ "sums", bench_sums_main, "the gateway's checksums (MD5 ETag, CRCs, SHA) vs memcpy" },
};

static void
usage(FILE *out)
{
	fprintf(out, "usage: zest-bench COMMAND [options]   (zest-bench COMMAND --help)\n\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-9s %s\n", commands[i].name, commands[i].what);
}

void
bench_print_context(FILE *out, int argc, char **argv)
{
	char model[256] = "unknown";
	struct utsname u;
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];

	while (f && fgets(line, sizeof(line), f)) {
		if (strncmp(line, "model name", 10) == 0) {
			char *v = strchr(line, ':');

			if (v) {
				snprintf(model, sizeof(model), "%s", v + 2);
				model[strcspn(model, "\n")] = 0;
			}
			break;
		}
	}
	if (f)
		fclose(f);
	uname(&u);
	fprintf(out, "# zest %s, %s, kernel %s\n# command: zest-bench", ZEST_VERSION, model,
	        u.release);
	for (int i = 0; i < argc; i++)
		fprintf(out, " %s", argv[i]);
	fprintf(out, "\n");
}

int
main(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
		usage(argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	if (!strcmp(argv[1], "--version")) {
		printf("zest-bench %s\n", ZEST_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name))
			return commands[i].main(argc - 1, argv + 1);
	fprintf(stderr, "zest-bench: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
