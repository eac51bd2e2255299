/*
 * Load-test reporting shared by zest-bench's load commands (grpc, s3): per-operation
 * counters, exact latency percentiles, throughput split into fixed windows, and the
 * output in MinIO warp's shape plus a diskspd-style latency table, or one JSON object.
 *
 * Threading: each worker owns one struct bench_stats per operation and records into it
 * without locks; bench_stats_merge() folds them together after the workers stop.
 */
#ifndef ZEST_BENCH_REPORT_H
#define ZEST_BENCH_REPORT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define BENCH_WINDOW_NS   (5ull * 1000000000ull) /* throughput windows, as warp's 5 s */
#define BENCH_MAX_WINDOWS 4096
#define BENCH_KEEP_ERRORS 3

struct bench_stats {
	const char *op; /* "PUT", "GET", ... */
	uint64_t ops, bytes, errors;
	double *lat_ms; /* one entry per successful op */
	size_t nlat, cap;
	uint64_t win_bytes[BENCH_MAX_WINDOWS], win_ops[BENCH_MAX_WINDOWS];
	char first_errors[BENCH_KEEP_ERRORS][160];
};

void bench_stats_init(struct bench_stats *s, const char *op);
void bench_stats_fini(struct bench_stats *s);

/* One finished op: its start time relative to the measured period, latency, bytes. */
void bench_stats_ok(struct bench_stats *s, uint64_t start_rel_ns, uint64_t lat_ns, uint64_t bytes);

/* One failed op; the first few messages are kept for the report. */
void bench_stats_error(struct bench_stats *s, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* dst += src (same op). Returns 0 or -ENOMEM. */
int bench_stats_merge(struct bench_stats *dst, const struct bench_stats *src);

/* Whole windows inside the measured period. */
static inline unsigned
bench_windows(uint64_t period_ns)
{
	uint64_t n = period_ns / BENCH_WINDOW_NS;

	return n > BENCH_MAX_WINDOWS ? BENCH_MAX_WINDOWS : (unsigned)n;
}

/* warp-shaped summary and the latency table for one operation. */
void bench_report_text(FILE *out, const struct bench_stats *s, unsigned concurrency,
                       uint64_t period_ns);

/* The operation's figures as a JSON object (no trailing newline). */
void bench_report_json(FILE *out, const struct bench_stats *s, uint64_t period_ns);

/* The table header shared by every operation's row. */
void bench_report_table_header(FILE *out);

#endif
