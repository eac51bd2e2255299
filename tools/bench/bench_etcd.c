/*
 * zest-bench etcd: the rate of metadata transactions one etcd sustains through
 * cl_etcd, in the shape a small-object PUT will need: a Txn "create the key if absent"
 * (compare version == 0, then put a value of --value bytes), from N callers at once,
 * each blocking on its own call. No baseline exists for a remote store, so the report
 * gives the median rate of the trials and the p50/p99/p99.9 latency of all calls in them.
 * The keys go under --prefix and are deleted after each trial.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "cl_etcd.h"

#define MAX_CLIENTS 256
#define MAX_SAMPLES (1u << 20) /* per caller and trial */

struct caller {
	struct cl_etcd *c;
	unsigned id, trial;
	double seconds;
	size_t value_len;
	const char *prefix;
	pthread_t thread;
	uint32_t *lat_us;
	size_t n, errors;
};

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *
caller_run(void *arg)
{
	struct caller *w = arg;
	char *value = malloc(w->value_len + 1), key[256];
	double end = now_s() + w->seconds;

	memset(value, 'v', w->value_len);
	while (now_s() < end && w->n < MAX_SAMPLES) {
		int kl =
		        snprintf(key, sizeof(key), "%s%u/%u/%zu", w->prefix, w->trial, w->id, w->n);
		struct cl_etcd_cmp cmp = { .key = key,
			                   .key_len = (size_t)kl,
			                   .target = CL_ETCD_CMP_VERSION,
			                   .op = CL_ETCD_EQUAL };
		struct cl_etcd_op put = { .type = CL_ETCD_OP_PUT,
			                  .r = { .key = key, .key_len = (size_t)kl },
			                  .value = value,
			                  .value_len = w->value_len };
		struct cl_etcd_txn txn = { .cmp = &cmp, .n_cmp = 1, .then = &put, .n_then = 1 };
		struct cl_etcd_txn_result res;
		double t0 = now_s();

		if (cl_etcd_txn(w->c, &txn, &res, 0) || !res.succeeded)
			w->errors++;
		cl_etcd_txn_result_fini(&res);
		w->lat_us[w->n++] = (uint32_t)((now_s() - t0) * 1e6);
	}
	free(value);
	return NULL;
}

static int
cmp_u32(const void *a, const void *b)
{
	uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

	return x < y ? -1 : x > y;
}

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static void
usage(FILE *out)
{
	fprintf(out, "usage: zest-bench etcd --endpoints H:P[,H:P...] [options]\n"
	             "  --endpoints LIST  etcd client endpoints (required)\n"
	             "  --clients LIST    concurrent callers per run, comma-separated (1,4,16,64)\n"
	             "  --seconds N       length of one trial (3)\n"
	             "  --trials N        trials per client count, after a 1 s warm-up (5)\n"
	             "  --value BYTES     value size of each put (300)\n"
	             "  --prefix P        key prefix, deleted after each trial (/zest-bench/)\n");
}

int
bench_etcd_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "endpoints", required_argument, NULL, 'e' },
		{ "clients", required_argument, NULL, 'c' },
		{ "seconds", required_argument, NULL, 's' },
		{ "trials", required_argument, NULL, 't' },
		{ "value", required_argument, NULL, 'v' },
		{ "prefix", required_argument, NULL, 'p' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *endpoints = NULL, *clients = "1,4,16,64", *prefix = "/zest-bench/";
	double seconds = 3;
	int trials = 5, ch;
	size_t value_len = 300;
	struct caller *w;
	struct cl_etcd *c;
	char list[256];
	unsigned trial_no = 0;
	int rc;

	optind = 1;
	while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (ch) {
		case 'e':
			endpoints = optarg;
			break;
		case 'c':
			clients = optarg;
			break;
		case 's':
			seconds = atof(optarg);
			break;
		case 't':
			trials = atoi(optarg);
			break;
		case 'v':
			value_len = strtoul(optarg, NULL, 10);
			break;
		case 'p':
			prefix = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!endpoints || seconds <= 0 || trials < 1 || trials > 32 || value_len > (1u << 20) ||
	    !*prefix || strlen(clients) >= sizeof(list)) {
		usage(stderr);
		return 2;
	}
	rc = cl_etcd_create(endpoints, NULL, &c);
	if (rc) {
		fprintf(stderr, "zest-bench etcd: bad --endpoints (%d)\n", rc);
		return 2;
	}
	w = calloc(MAX_CLIENTS, sizeof(*w));
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		w[i].lat_us = malloc(MAX_SAMPLES * sizeof(uint32_t));
	bench_print_context(stdout, argc, argv);
	printf("# Txn(compare version == 0, put %zu B) per second; latency in ms over all calls\n",
	       value_len);
	printf("%8s %10s %10s %8s %8s %8s %7s\n", "clients", "txn/s", "min..max", "p50", "p99",
	       "p99.9", "errors");
	snprintf(list, sizeof(list), "%s", clients);
	for (char *save, *tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		unsigned n = (unsigned)atoi(tok);
		double rate[33];
		uint32_t *all;
		size_t n_all = 0, errors = 0;

		if (n < 1 || n > MAX_CLIENTS) {
			fprintf(stderr, "zest-bench etcd: --clients 1..%d\n", MAX_CLIENTS);
			return 2;
		}
		all = malloc((size_t)trials * n * 4096 * sizeof(*all));
		for (int t = -1; t < trials; t++) { /* trial -1 warms up */
			struct cl_etcd_range r = { .key = prefix,
				                   .key_len = strlen(prefix),
				                   .prefix = true };
			double t0 = now_s(), el;
			size_t ops = 0;

			for (unsigned i = 0; i < n; i++) {
				w[i] = (struct caller){ c,         i,
					                trial_no,  t < 0 ? 1 : seconds,
					                value_len, prefix,
					                0,         w[i].lat_us,
					                0,         0 };
				pthread_create(&w[i].thread, NULL, caller_run, &w[i]);
			}
			for (unsigned i = 0; i < n; i++)
				pthread_join(w[i].thread, NULL);
			el = now_s() - t0;
			trial_no++;
			for (unsigned i = 0; i < n; i++) {
				ops += w[i].n;
				if (t < 0)
					continue;
				errors += w[i].errors;
				/* a bounded sample per caller keeps the pooled percentiles cheap */
				for (size_t j = 0; j < w[i].n && j < 4096; j++)
					all[n_all++] =
					        w[i].lat_us[j *
					                    (w[i].n > 4096 ? w[i].n / 4096 : 1) %
					                    w[i].n];
			}
			if (t >= 0)
				rate[t] = (double)ops / el;
			cl_etcd_delete(c, &r, NULL, NULL, 30000);
		}
		qsort(rate, (size_t)trials, sizeof(double), cmp_double);
		qsort(all, n_all, sizeof(*all), cmp_u32);
		printf("%8u %10.0f %4.0f..%-5.0f %8.2f %8.2f %8.2f %7zu\n", n, rate[trials / 2],
		       rate[0], rate[trials - 1], n_all ? all[n_all / 2] / 1e3 : 0,
		       n_all ? all[n_all * 99 / 100] / 1e3 : 0,
		       n_all ? all[n_all * 999 / 1000] / 1e3 : 0, errors);
		fflush(stdout);
		free(all);
	}
	for (unsigned i = 0; i < MAX_CLIENTS; i++)
		free(w[i].lat_us);
	free(w);
	cl_etcd_destroy(c);
	return 0;
}
