/*
 * zest-bench admission: the storage-aware admission experiment (issue 15, item 7).
 *
 *   zest-bench admission put [options]          run --jobs write jobs with --concurrent
 *                                               writers against one S3 endpoint
 *   zest-bench admission report [options] CSV...   the runs side by side, and a chart
 *
 * A job is one PUT of --obj.size bytes, retried on 503 SlowDown (and on transport errors)
 * with capped exponential backoff and full jitter, as AWS SDKs do, until it succeeds or
 * --max-attempts run out. Each of --concurrent threads owns one curl handle (a keep-alive
 * connection) and takes the next job as soon as its last one is done: a closed loop of many
 * more writers than the drives absorb. `put` records every job (first attempt, last
 * attempt, end, attempts, 503s) and writes them as CSV (--csv); the datanode behind the
 * gateway is started with admission on or off by the caller (tools/bench/admission.py),
 * and `report` reads the runs' CSVs, prints them side by side and draws the chart.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_adm_stats.h"
#include "bench_s3_load.h"
#include "bench_svg.h"
#include "zc.h"

struct config {
	struct bench_s3_config s3; /* the endpoint, the objects, the writers (its handles) */
	const char *label, *csv;
	uint64_t backoff_base_ns, backoff_cap_ns;
	unsigned jobs, max_attempts;
	char prefix[64];
};

struct worker {
	pthread_t thread;
	unsigned id; /* the load's handle this writer owns */
	const struct config *cfg;
	struct bench_s3_load *load;
	uint64_t rng;
};

static struct bench_adm_job *jobs;
static atomic_uint next_job, jobs_done;
static atomic_ullong slowdowns_seen;
static atomic_bool all_done;
static uint64_t t0_ns;

static double
secs_since_t0(uint64_t ns)
{
	return (double)(ns - t0_ns) / 1e9;
}

static double
since_t0(void)
{
	return secs_since_t0(zc_now_ns());
}

/* Full jitter (AWS's "exponential backoff and jitter"): uniform in [0, min(cap, base 2^n)). */
static void
backoff(struct worker *w, unsigned retry)
{
	const struct config *cfg = w->cfg;
	uint64_t ceil_ns = cfg->backoff_base_ns << (retry < 30 ? retry : 30), ns;
	struct timespec ts;

	if (ceil_ns > cfg->backoff_cap_ns || ceil_ns < cfg->backoff_base_ns)
		ceil_ns = cfg->backoff_cap_ns;
	w->rng ^= w->rng << 13;
	w->rng ^= w->rng >> 7;
	w->rng ^= w->rng << 17;
	ns = ceil_ns ? w->rng % ceil_ns : 0;
	ts.tv_sec = (time_t)(ns / 1000000000u);
	ts.tv_nsec = (long)(ns % 1000000000u);
	nanosleep(&ts, NULL);
}

static void
run_job(struct worker *w, unsigned id)
{
	struct bench_adm_job *j = &jobs[id];
	struct bench_s3_reply rep;
	char key[128];

	snprintf(key, sizeof(key), "%s/%u", w->cfg->prefix, id);
	j->start_s = since_t0();
	for (;;) {
		long status;

		j->attempts++;
		status = bench_s3_load_request(w->load, w->id, BENCH_S3_PUT, key, &rep);
		j->last_s = secs_since_t0(rep.start_ns);
		j->status = (int)status;
		if (status == 503)
			j->slowdowns++, atomic_fetch_add(&slowdowns_seen, 1);
		else if (status == 0)
			j->transport++;
		if ((status != 503 && status != 0) || j->attempts >= w->cfg->max_attempts)
			break;
		backoff(w, j->attempts - 1);
	}
	j->end_s = secs_since_t0(rep.end_ns);
	if (j->status != 200)
		fprintf(stderr, "zest-bench admission: job %u: HTTP %d after %u attempts: %.100s\n",
		        id, j->status, j->attempts, rep.err);
	atomic_fetch_add(&jobs_done, 1);
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;

	for (;;) {
		unsigned id = atomic_fetch_add(&next_job, 1);

		if (id >= w->cfg->jobs)
			break;
		run_job(w, id);
	}
	return NULL;
}

static void *
progress_main(void *arg)
{
	const struct config *cfg = arg;

	while (!atomic_load(&all_done)) {
		for (int i = 0; i < 50 && !atomic_load(&all_done); i++)
			usleep(100000);
		fprintf(stderr, "admission %s: %6.1fs  jobs done %u/%u  503s %llu\n", cfg->label,
		        since_t0(), atomic_load(&jobs_done), cfg->jobs,
		        (unsigned long long)atomic_load(&slowdowns_seen));
	}
	return NULL;
}

static void
usage_put(FILE *out)
{
	fprintf(out,
	        "usage: zest-bench admission put [options]\n" BENCH_S3_USAGE_ENDPOINT
	        "  --bucket NAME         (default zest-adm; created if missing)\n"
	        "  --obj.size SIZE       bytes per job's PUT (default 1MiB)\n"
	        "  --jobs N              write jobs (default 1000)\n"
	        "  --concurrent N        writers, each one connection, 1..1024 (default 128)\n"
	        "  --backoff-base D      first retry's backoff ceiling (default 50ms)\n"
	        "  --backoff-cap D       largest backoff ceiling (default 2s)\n"
	        "  --max-attempts N      attempts per job before it fails (default 1000)\n"
	        "  --label NAME          the run's name in CSV and report (default run)\n"
	        "  --csv FILE            write every job's record here\n"
	        "Objects are left in place (tools/bench/admission.py starts each run on empty\n"
	        "drive folders).\n");
}

static int
parse_put(int argc, char **argv, struct config *c)
{
	static const struct option opts[] = {
		BENCH_S3_OPTIONS,
		{ "jobs", required_argument, NULL, 'n' },
		{ "backoff-base", required_argument, NULL, 'B' },
		{ "backoff-cap", required_argument, NULL, 'C' },
		{ "max-attempts", required_argument, NULL, 'm' },
		{ "label", required_argument, NULL, 'l' },
		{ "csv", required_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, idx = 0;
	char *end;

	while ((opt = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		int own = bench_s3_parse_opt(opt, optarg, &c->s3);
		unsigned long v = 0;

		if (own < 0 || (opt == 'z' && c->s3.obj_size == 0))
			goto bad;
		if (own)
			continue;
		if (opt == 'n' || opt == 'm') {
			errno = 0;
			v = strtoul(optarg, &end, 10);
			if (errno || end == optarg || *end || v == 0 || v > 10000000)
				goto bad;
		}
		switch (opt) {
		case 'l':
			if (!*optarg || strlen(optarg) > 63 || strpbrk(optarg, " \t\n,"))
				goto bad;
			c->label = optarg;
			break;
		case 'o':
			c->csv = optarg;
			break;
		case 'n':
			c->jobs = (unsigned)v;
			break;
		case 'm':
			c->max_attempts = (unsigned)v;
			break;
		case 'B':
			if (zc_parse_duration_ns(optarg, &c->backoff_base_ns) < 0)
				goto bad;
			break;
		case 'C':
			if (zc_parse_duration_ns(optarg, &c->backoff_cap_ns) < 0)
				goto bad;
			break;
		case 'h':
			usage_put(stdout);
			exit(0);
		default:
			usage_put(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "zest-bench admission put: unexpected argument '%s'\n",
		        argv[optind]);
		return -EINVAL;
	}
	if (c->backoff_cap_ns < c->backoff_base_ns) {
		fprintf(stderr, "zest-bench admission put: --backoff-cap below --backoff-base\n");
		return -EINVAL;
	}
	return 0;
bad:
	fprintf(stderr, "zest-bench admission put: bad value '%s' for --%s\n", optarg,
	        opts[idx].name);
	return -EINVAL;
}

static int
write_csv(const struct config *c, const struct bench_adm_run *r)
{
	FILE *f = fopen(c->csv, "w");
	int rc;

	if (!f) {
		fprintf(stderr, "zest-bench admission: cannot write %s: %s\n", c->csv,
		        strerror(errno));
		return -errno;
	}
	rc = bench_adm_csv_write(f, r);
	if (fclose(f) || rc) {
		fprintf(stderr, "zest-bench admission: writing %s failed\n", c->csv);
		return -EIO;
	}
	return 0;
}

static int
cmd_put(int argc, char **argv)
{
	struct config c = { .label = "run",
		            .jobs = 1000,
		            .max_attempts = 1000,
		            .backoff_base_ns = 50000000,
		            .backoff_cap_ns = 2000000000 };
	struct bench_adm_run run;
	struct bench_adm_summary sum;
	struct bench_s3_load *load = NULL;
	struct worker *ws = NULL;
	pthread_t progress;
	int rc = 1, err;
	unsigned started = 0;

	bench_s3_config_defaults(&c.s3);
	c.s3.bucket = "zest-adm";
	c.s3.concurrent = 128;
	c.s3.name = "zest-bench admission";
	c.s3.timeout_s = 600; /* a job's PUT may wait behind a slowed drive's queue */
	if (parse_put(argc, argv, &c))
		return 2;
	jobs = calloc(c.jobs, sizeof(*jobs));
	ws = calloc(c.s3.concurrent, sizeof(*ws));
	if (!jobs || !ws) {
		fprintf(stderr, "zest-bench admission: out of memory\n");
		goto out;
	}
	/* the payload, a handle per writer, and the bucket (a failure to create it is printed) */
	err = bench_s3_load_create(&c.s3, &load);
	if (err == -ENOMEM)
		fprintf(stderr, "zest-bench admission: out of memory\n");
	if (err < 0)
		goto out;
	snprintf(c.prefix, sizeof(c.prefix), "adm-%lx-%d", (long)time(NULL), getpid());
	for (unsigned i = 0; i < c.s3.concurrent; i++) {
		ws[i].id = i;
		ws[i].cfg = &c;
		ws[i].load = load;
		ws[i].rng = 0x9e3779b97f4a7c15ull * (i + 1) ^ (uint64_t)zc_now_ns();
	}
	bench_print_context(stdout, argc + 1, argv - 1); /* from "admission": the caller's argv */
	t0_ns = zc_now_ns();
	pthread_create(&progress, NULL, progress_main, &c);
	for (; started < c.s3.concurrent; started++)
		if (pthread_create(&ws[started].thread, NULL, worker_main, &ws[started]))
			break;
	for (unsigned i = 0; i < started; i++)
		pthread_join(ws[i].thread, NULL);
	atomic_store(&all_done, true);
	pthread_join(progress, NULL);
	run = (struct bench_adm_run){ .obj_size = c.s3.obj_size,
		                      .concurrent = c.s3.concurrent,
		                      .jobs = jobs,
		                      .njobs = c.jobs };
	snprintf(run.label, sizeof(run.label), "%s", c.label);
	if (bench_adm_summarize(&run, &sum))
		goto out;
	printf("# %u jobs of %llu bytes, %u writers (%u started), backoff %.0f ms .. %.0f ms\n",
	       c.jobs, (unsigned long long)c.s3.obj_size, c.s3.concurrent, started,
	       (double)c.backoff_base_ns / 1e6, (double)c.backoff_cap_ns / 1e6);
	bench_adm_table(stdout, &run, &sum, 1);
	rc = sum.ok == c.jobs ? 0 : 1;
	if (c.csv && write_csv(&c, &run))
		rc = 1;
out:
	bench_s3_load_destroy(load); /* the objects stay (see --help) */
	free(ws);
	free(jobs);
	return rc;
}

static void
usage_report(FILE *out)
{
	fprintf(out,
	        "usage: zest-bench admission report [options] RUN.csv...\n"
	        "  --svg FILE            write the latency-over-time chart of the runs here\n"
	        "  --chart N,N...        which runs (1-based, in argument order) the chart shows\n"
	        "                        (default all)\n"
	        "  --title TEXT          the chart's title\n"
	        "  --y job|attempt       chart the job's whole time (default) or its last attempt\n"
	        "  --linear              linear y axis (default log10)\n"
	        "  --bin D               the mean line's bin width (default 1s; 0 none)\n");
}

static const char *const colors[] = { "#1f77b4", "#d62728", "#2ca02c",
	                              "#ff7f0e", "#9467bd", "#8c564b" };

static int
chart(const char *path, const char *title, bool attempt, bool linear, double bin,
      const struct bench_adm_run *runs, const struct bench_adm_summary *sums, const unsigned *which,
      unsigned nw)
{
	struct bench_svg_series s[16];
	char labels[16][160];
	double *xy[16] = { 0 };
	struct bench_svg_opts o = { .title = title,
		                    .xlabel = "time since the run started (s), at the job's end",
		                    .ylabel = attempt ? "last attempt's duration (s)"
		                                      : "job duration, 503 retries included (s)",
		                    .logy = !linear,
		                    .bin = bin };
	FILE *f = fopen(path, "w");
	int rc = -ENOMEM;

	if (!f) {
		fprintf(stderr, "zest-bench admission: cannot write %s: %s\n", path,
		        strerror(errno));
		return -errno;
	}
	for (unsigned i = 0; i < nw; i++) {
		const struct bench_adm_run *r = &runs[which[i]];
		const struct bench_adm_summary *m = &sums[which[i]];
		size_t n = 0;

		xy[i] = malloc(2 * (r->njobs ? r->njobs : 1) * sizeof(double));
		if (!xy[i])
			goto out;
		for (size_t j = 0; j < r->njobs; j++) {
			if (r->jobs[j].status != 200)
				continue;
			xy[i][n] = r->jobs[j].end_s;
			xy[i][r->njobs + n] = r->jobs[j].end_s -
			                      (attempt ? r->jobs[j].last_s : r->jobs[j].start_s);
			n++;
		}
		snprintf(labels[i], sizeof(labels[i]),
		         "%s: job avg %.2f s, p99 %.2f s; %.1f jobs/s; %llu 503s retried", r->label,
		         m->job.avg, m->job.p99, m->jobs_per_s, (unsigned long long)m->slowdowns);
		s[i] = (struct bench_svg_series){ .label = labels[i],
			                          .color = colors[i % 6],
			                          .x = xy[i],
			                          .y = xy[i] + r->njobs,
			                          .n = n };
	}
	rc = bench_svg_chart(f, &o, s, nw);
out:
	for (unsigned i = 0; i < nw; i++)
		free(xy[i]);
	if (fclose(f) && !rc)
		rc = -EIO;
	if (rc)
		fprintf(stderr, "zest-bench admission: chart %s failed: %d\n", path, rc);
	return rc;
}

static int
cmd_report(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "svg", required_argument, NULL, 's' },
		{ "chart", required_argument, NULL, 'c' },
		{ "title", required_argument, NULL, 't' },
		{ "y", required_argument, NULL, 'y' },
		{ "linear", no_argument, NULL, 'l' },
		{ "bin", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *svg = NULL, *title = "zest-bench admission: job duration over time",
	           *pick = NULL;
	bool attempt = false, linear = false;
	uint64_t bin_ns = 1000000000;
	struct bench_adm_run runs[16];
	struct bench_adm_summary sums[16];
	unsigned n = 0, which[16], nw = 0;
	int opt, idx = 0, rc = 1;

	while ((opt = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (opt) {
		case 's':
			svg = optarg;
			break;
		case 'c':
			pick = optarg;
			break;
		case 't':
			title = optarg;
			break;
		case 'l':
			linear = true;
			break;
		case 'y':
			if (strcmp(optarg, "job") && strcmp(optarg, "attempt"))
				goto bad;
			attempt = !strcmp(optarg, "attempt");
			break;
		case 'b':
			if (zc_parse_duration_ns(optarg, &bin_ns) < 0)
				goto bad;
			break;
		case 'h':
			usage_report(stdout);
			exit(0);
		default:
			usage_report(stderr);
			return 2;
		}
	}
	if (optind >= argc || argc - optind > 16) {
		fprintf(stderr, "zest-bench admission report: give 1..16 run CSVs\n");
		return 2;
	}
	for (int i = optind; i < argc; i++, n++) {
		FILE *f = fopen(argv[i], "r");
		unsigned line;
		int err;

		if (!f) {
			fprintf(stderr, "zest-bench admission: %s: %s\n", argv[i], strerror(errno));
			goto out;
		}
		err = bench_adm_csv_read(f, &runs[n], &line);
		fclose(f);
		if (!err)
			err = bench_adm_summarize(&runs[n], &sums[n]);
		if (err) {
			fprintf(stderr, "zest-bench admission: %s:%u: not a run's CSV (%d)\n",
			        argv[i], line, err);
			bench_adm_run_fini(&runs[n]);
			goto out;
		}
	}
	for (const char *p = pick; p && *p;) {
		char *end;
		unsigned long v = strtoul(p, &end, 10);

		if (end == p || v < 1 || v > n || nw == 16 || (*end && *end != ',')) {
			fprintf(stderr, "zest-bench admission report: bad --chart '%s'\n", pick);
			goto out;
		}
		which[nw++] = (unsigned)v - 1;
		p = *end ? end + 1 : end;
	}
	if (!pick)
		for (nw = 0; nw < n; nw++)
			which[nw] = nw;
	bench_adm_table(stdout, runs, sums, n);
	rc = svg && chart(svg, title, attempt, linear, (double)bin_ns / 1e9, runs, sums, which, nw);
out:
	for (unsigned i = 0; i < n; i++)
		bench_adm_run_fini(&runs[i]);
	return rc;
bad:
	fprintf(stderr, "zest-bench admission report: bad value '%s' for --%s\n", optarg,
	        opts[idx].name);
	return 2;
}

int
bench_adm_main(int argc, char **argv)
{
	if (argc >= 2 && !strcmp(argv[1], "put"))
		return cmd_put(argc - 1, argv + 1);
	if (argc >= 2 && !strcmp(argv[1], "report"))
		return cmd_report(argc - 1, argv + 1);
	fprintf(argc >= 2 && strcmp(argv[1], "--help") ? stderr : stdout,
	        "usage: zest-bench admission put|report [options]   (put --help, report --help)\n"
	        "  put     run write jobs (PUTs retried on 503 SlowDown with backoff) against an\n"
	        "          S3 endpoint and record each one\n"
	        "  report  the recorded runs side by side, and a latency-over-time SVG chart\n"
	        "tools/bench/admission.py runs the whole experiment (admission on and off,\n"
	        "plain overload and a slowed drive).\n");
	return argc >= 2 && !strcmp(argv[1], "--help") ? 0 : 2;
}
