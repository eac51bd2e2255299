/*
 * zest-bench admission's figures: one record per write job (a PUT retried on 503 SlowDown
 * until done, as S3 clients do), the summary of a run (average, p50, p99, max of the job's
 * whole time and of its last, successful attempt; throughput; 503s retried), and a run's
 * records as CSV, so runs made against differently started datanodes can be put side by
 * side afterwards (`zest-bench admission report`).
 *
 * Pure code, no I/O but the FILE * it is given; no threads. The unit tests
 * (tests/unit/tools/test_bench_adm.c) cover it.
 */
#ifndef ZEST_BENCH_ADM_STATS_H
#define ZEST_BENCH_ADM_STATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* One write job; times in seconds since the run started. */
struct bench_adm_job {
	double start_s;     /* its first attempt was sent */
	double last_s;      /* its last attempt was sent */
	double end_s;       /* the last attempt's answer came (or the job gave up) */
	unsigned attempts;  /* 1 + retries */
	unsigned slowdowns; /* 503 answers among the attempts (each one retried) */
	unsigned transport; /* attempts that failed below HTTP (reset, timeout), retried */
	int status;         /* the last attempt's HTTP status; 0 when it failed below HTTP */
};

/* One run: what it was, and its jobs (the caller's array unless read by csv_read). */
struct bench_adm_run {
	char label[64];
	uint64_t obj_size;
	unsigned concurrent;
	struct bench_adm_job *jobs;
	size_t njobs;
};

struct bench_adm_dist {
	double avg, p50, p99, max;
};

struct bench_adm_summary {
	size_t jobs, ok;              /* ok: ended with a 2xx */
	uint64_t slowdowns;           /* 503s retried, all jobs */
	uint64_t transport;           /* transport errors retried, all jobs */
	size_t jobs_slowed;           /* jobs that got at least one 503 */
	double wall_s;                /* 0 to the last job's end */
	double jobs_per_s, mib_per_s; /* ok jobs (and their bytes) over wall_s */
	struct bench_adm_dist job;    /* ok jobs, first attempt to done (backoffs included) */
	struct bench_adm_dist put;    /* ok jobs, the successful attempt alone */
};

/* Nearest-rank percentile p (0..100] of v, sorted ascending; 0 when n is 0. */
double bench_adm_pct(const double *v, size_t n, double p);

/* Sorts v (n values) and fills d; all zero when n is 0. */
void bench_adm_dist_of(double *v, size_t n, struct bench_adm_dist *d);

/* The summary of a run. Returns 0 or -ENOMEM. */
int bench_adm_summarize(const struct bench_adm_run *r, struct bench_adm_summary *s);

/* Writes the run as CSV: a "# zest-bench admission" line with label, object size and
 * writers, a header, one line per job. Returns 0 or -EIO. */
int bench_adm_csv_write(FILE *out, const struct bench_adm_run *r);

/* Reads what csv_write wrote into r (r->jobs allocated: free with bench_adm_run_fini).
 * Returns 0, -EINVAL (line number in *line) or -ENOMEM; on error r holds nothing. */
int bench_adm_csv_read(FILE *in, struct bench_adm_run *r, unsigned *line);

void bench_adm_run_fini(struct bench_adm_run *r);

/* Prints the runs side by side as a Markdown table, one column per run. */
void bench_adm_table(FILE *out, const struct bench_adm_run *runs,
                     const struct bench_adm_summary *sums, unsigned n);

#endif
