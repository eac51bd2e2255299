/* Load-test statistics and their warp-shaped report. */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench_report.h"
#include "zc.h"

#define MIB (1024.0 * 1024.0)

void
bench_stats_init(struct bench_stats *s, const char *op)
{
	memset(s, 0, sizeof(*s));
	s->op = op;
}

void
bench_stats_fini(struct bench_stats *s)
{
	free(s->lat_ms);
	s->lat_ms = NULL;
}

static int
reserve(struct bench_stats *s, size_t more)
{
	double *p;
	size_t cap;

	if (s->nlat + more <= s->cap)
		return 0;
	cap = s->cap ? s->cap * 2 : 4096;
	while (cap < s->nlat + more)
		cap *= 2;
	p = realloc(s->lat_ms, cap * sizeof(*p));
	if (!p)
		return -ENOMEM;
	s->lat_ms = p;
	s->cap = cap;
	return 0;
}

void
bench_stats_ok(struct bench_stats *s, uint64_t start_rel_ns, uint64_t lat_ns, uint64_t bytes)
{
	uint64_t w = start_rel_ns / BENCH_WINDOW_NS;

	s->ops++;
	s->bytes += bytes;
	if (w < BENCH_MAX_WINDOWS) {
		s->win_ops[w]++;
		s->win_bytes[w] += bytes;
	}
	if (reserve(s, 1) == 0)
		s->lat_ms[s->nlat++] = (double)lat_ns / 1e6;
}

void
bench_stats_error(struct bench_stats *s, const char *fmt, ...)
{
	va_list ap;

	if (s->errors < BENCH_KEEP_ERRORS) {
		va_start(ap, fmt);
		vsnprintf(s->first_errors[s->errors], sizeof(s->first_errors[0]), fmt, ap);
		va_end(ap);
	}
	s->errors++;
}

int
bench_stats_merge(struct bench_stats *dst, const struct bench_stats *src)
{
	for (uint64_t i = 0; i < src->errors && i < BENCH_KEEP_ERRORS; i++)
		if (dst->errors + i < BENCH_KEEP_ERRORS)
			memcpy(dst->first_errors[dst->errors + i], src->first_errors[i],
			       sizeof(src->first_errors[i]));
	dst->ops += src->ops;
	dst->bytes += src->bytes;
	dst->errors += src->errors;
	for (unsigned w = 0; w < BENCH_MAX_WINDOWS; w++) {
		dst->win_ops[w] += src->win_ops[w];
		dst->win_bytes[w] += src->win_bytes[w];
	}
	if (reserve(dst, src->nlat) < 0)
		return -ENOMEM;
	if (src->nlat) /* an op nobody ran has no array to copy from (memcpy(NULL) is UB) */
		memcpy(dst->lat_ms + dst->nlat, src->lat_ms, src->nlat * sizeof(double));
	dst->nlat += src->nlat;
	return 0;
}

struct figures {
	double mib_s, ops_s, avg, stddev, p50, p90, p99, p999, max;
	double win_fast_mib, win_fast_ops, win_med_mib, win_med_ops, win_slow_mib, win_slow_ops;
	unsigned windows;
};

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Nearest-rank percentile of sorted v. */
static double
pct(const double *v, size_t n, double p)
{
	size_t r;

	if (n == 0)
		return 0;
	r = (size_t)ceil(p / 100.0 * (double)n);
	return v[r ? r - 1 : 0];
}

static void
compute(const struct bench_stats *cs, uint64_t period_ns, struct figures *f)
{
	struct bench_stats *s = (struct bench_stats *)cs; /* sorting in place is harmless */
	double secs = (double)period_ns / 1e9, sum = 0, sq = 0;
	double wm[BENCH_MAX_WINDOWS];
	unsigned order[BENCH_MAX_WINDOWS];

	memset(f, 0, sizeof(*f));
	if (secs > 0) {
		f->mib_s = (double)s->bytes / MIB / secs;
		f->ops_s = (double)s->ops / secs;
	}
	qsort(s->lat_ms, s->nlat, sizeof(double), cmp_double);
	for (size_t i = 0; i < s->nlat; i++)
		sum += s->lat_ms[i];
	if (s->nlat) {
		f->avg = sum / (double)s->nlat;
		for (size_t i = 0; i < s->nlat; i++)
			sq += (s->lat_ms[i] - f->avg) * (s->lat_ms[i] - f->avg);
		f->stddev = sqrt(sq / (double)s->nlat);
		f->max = s->lat_ms[s->nlat - 1];
	}
	f->p50 = pct(s->lat_ms, s->nlat, 50);
	f->p90 = pct(s->lat_ms, s->nlat, 90);
	f->p99 = pct(s->lat_ms, s->nlat, 99);
	f->p999 = pct(s->lat_ms, s->nlat, 99.9);

	/* Windows ordered by bytes (by ops when no bytes move, as for DELETE). */
	f->windows = bench_windows(period_ns);
	for (unsigned w = 0; w < f->windows; w++) {
		wm[w] = s->bytes ? (double)s->win_bytes[w] : (double)s->win_ops[w];
		order[w] = w;
	}
	for (unsigned i = 1; i < f->windows; i++)
		for (unsigned j = i; j > 0 && wm[order[j]] < wm[order[j - 1]]; j--) {
			unsigned t = order[j];

			order[j] = order[j - 1];
			order[j - 1] = t;
		}
	if (f->windows) {
		double ws = (double)BENCH_WINDOW_NS / 1e9;
		unsigned slow = order[0], med = order[f->windows / 2], fast = order[f->windows - 1];

		f->win_fast_mib = (double)s->win_bytes[fast] / MIB / ws;
		f->win_fast_ops = (double)s->win_ops[fast] / ws;
		f->win_med_mib = (double)s->win_bytes[med] / MIB / ws;
		f->win_med_ops = (double)s->win_ops[med] / ws;
		f->win_slow_mib = (double)s->win_bytes[slow] / MIB / ws;
		f->win_slow_ops = (double)s->win_ops[slow] / ws;
	}
}

void
bench_report_table_header(FILE *out)
{
	fprintf(out, "%-9s %14s %9s %10s %10s %10s %10s %9s %9s %9s %9s %9s\n", "Operation",
	        "Bytes", "Ops", "MiB/s", "ops/s", "AvgLat", "LatStdDev", "p50", "p90", "p99",
	        "p99.9", "max");
}

void
bench_report_text(FILE *out, const struct bench_stats *s, unsigned concurrency, uint64_t period_ns)
{
	struct figures f;

	compute(s, period_ns, &f);
	fprintf(out, "Operation: %s. Concurrency: %u\n", s->op, concurrency);
	fprintf(out, "* Average: %.2f MiB/s, %.2f obj/s\n", f.mib_s, f.ops_s);
	if (s->errors)
		fprintf(out, "* Errors: %llu\n", (unsigned long long)s->errors);
	if (f.windows >= 1) {
		fprintf(out, "\nThroughput, split into %u x 5s:\n", f.windows);
		fprintf(out, " * Fastest: %.2fMiB/s, %.2f obj/s\n", f.win_fast_mib, f.win_fast_ops);
		fprintf(out, " * 50%% Median: %.2fMiB/s, %.2f obj/s\n", f.win_med_mib,
		        f.win_med_ops);
		fprintf(out, " * Slowest: %.2fMiB/s, %.2f obj/s\n", f.win_slow_mib, f.win_slow_ops);
	} else {
		fprintf(out, "\nThroughput: run shorter than one 5s window, no split.\n");
	}
	for (uint64_t i = 0; i < s->errors && i < BENCH_KEEP_ERRORS; i++)
		fprintf(out, " ! error: %s\n", s->first_errors[i]);
	fprintf(out, "\n");
	bench_report_table_header(out);
	fprintf(out,
	        "%-9s %14llu %9llu %10.2f %10.2f %8.2fms %8.2fms %7.2fms %7.2fms %7.2fms "
	        "%7.2fms %7.2fms\n\n",
	        s->op, (unsigned long long)s->bytes, (unsigned long long)s->ops, f.mib_s, f.ops_s,
	        f.avg, f.stddev, f.p50, f.p90, f.p99, f.p999, f.max);
}

void
bench_report_json(FILE *out, const struct bench_stats *s, uint64_t period_ns)
{
	struct figures f;

	compute(s, period_ns, &f);
	fprintf(out,
	        "{\"operation\":\"%s\",\"objects\":%llu,\"bytes\":%llu,\"seconds\":%.3f,"
	        "\"mib_per_s\":%.3f,\"obj_per_s\":%.3f,\"errors\":%llu,"
	        "\"latency_ms\":{\"avg\":%.3f,\"stddev\":%.3f,\"p50\":%.3f,\"p90\":%.3f,"
	        "\"p99\":%.3f,\"p99.9\":%.3f,\"max\":%.3f},"
	        "\"windows\":{\"count\":%u,\"fastest_mib_per_s\":%.3f,\"median_mib_per_s\":%.3f,"
	        "\"slowest_mib_per_s\":%.3f},\"first_errors\":[",
	        s->op, (unsigned long long)s->ops, (unsigned long long)s->bytes,
	        (double)period_ns / 1e9, f.mib_s, f.ops_s, (unsigned long long)s->errors, f.avg,
	        f.stddev, f.p50, f.p90, f.p99, f.p999, f.max, f.windows, f.win_fast_mib,
	        f.win_med_mib, f.win_slow_mib);
	/* the first errors, so that a failed run says why */
	for (uint64_t i = 0; i < s->errors && i < BENCH_KEEP_ERRORS; i++) {
		if (i)
			fputc(',', out);
		zc_json_string(out, s->first_errors[i]);
	}
	fprintf(out, "]}");
}
