/* zest-bench admission's figures and CSV (bench_adm_stats.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench_adm_stats.h"

#define CSV_MAGIC  "# zest-bench admission"
#define CSV_HEADER "start_s,last_s,end_s,attempts,slowdowns,transport,status"

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

double
bench_adm_pct(const double *v, size_t n, double p)
{
	size_t r;

	if (n == 0)
		return 0;
	r = (size_t)ceil(p / 100.0 * (double)n);
	if (r > n)
		r = n;
	return v[r ? r - 1 : 0];
}

void
bench_adm_dist_of(double *v, size_t n, struct bench_adm_dist *d)
{
	double sum = 0;

	*d = (struct bench_adm_dist){ 0 };
	if (n == 0)
		return;
	qsort(v, n, sizeof(*v), cmp_double);
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	d->avg = sum / (double)n;
	d->p50 = bench_adm_pct(v, n, 50);
	d->p99 = bench_adm_pct(v, n, 99);
	d->max = v[n - 1];
}

int
bench_adm_summarize(const struct bench_adm_run *r, struct bench_adm_summary *s)
{
	double *job = malloc((r->njobs ? r->njobs : 1) * sizeof(*job));
	double *put = malloc((r->njobs ? r->njobs : 1) * sizeof(*put));
	size_t ok = 0;

	*s = (struct bench_adm_summary){ .jobs = r->njobs };
	if (!job || !put) {
		free(job);
		free(put);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->njobs; i++) {
		const struct bench_adm_job *j = &r->jobs[i];

		s->slowdowns += j->slowdowns;
		s->transport += j->transport;
		s->jobs_slowed += j->slowdowns > 0;
		if (j->end_s > s->wall_s)
			s->wall_s = j->end_s;
		if (j->status < 200 || j->status > 299)
			continue;
		job[ok] = j->end_s - j->start_s;
		put[ok] = j->end_s - j->last_s;
		ok++;
	}
	s->ok = ok;
	if (s->wall_s > 0) {
		s->jobs_per_s = (double)ok / s->wall_s;
		s->mib_per_s = (double)ok * (double)r->obj_size / 1048576.0 / s->wall_s;
	}
	bench_adm_dist_of(job, ok, &s->job);
	bench_adm_dist_of(put, ok, &s->put);
	free(job);
	free(put);
	return 0;
}

int
bench_adm_csv_write(FILE *out, const struct bench_adm_run *r)
{
	fprintf(out, "%s label=%s obj_size=%llu concurrent=%u jobs=%zu\n%s\n", CSV_MAGIC, r->label,
	        (unsigned long long)r->obj_size, r->concurrent, r->njobs, CSV_HEADER);
	for (size_t i = 0; i < r->njobs; i++) {
		const struct bench_adm_job *j = &r->jobs[i];

		fprintf(out, "%.6f,%.6f,%.6f,%u,%u,%u,%d\n", j->start_s, j->last_s, j->end_s,
		        j->attempts, j->slowdowns, j->transport, j->status);
	}
	return ferror(out) ? -EIO : 0;
}

/* The "# zest-bench admission k=v ..." line; labels hold no spaces (csv_write's own). */
static int
parse_magic(const char *line, struct bench_adm_run *r)
{
	unsigned long long size;
	int n = 0;

	if (strncmp(line, CSV_MAGIC " label=", sizeof(CSV_MAGIC " label=") - 1))
		return -EINVAL;
	line += sizeof(CSV_MAGIC " label=") - 1;
	if (sscanf(line, "%63s obj_size=%llu concurrent=%u%n", r->label, &size, &r->concurrent,
	           &n) != 3 ||
	    n == 0)
		return -EINVAL;
	r->obj_size = size;
	return 0;
}

int
bench_adm_csv_read(FILE *in, struct bench_adm_run *r, unsigned *line)
{
	char buf[512];
	size_t cap = 0;
	int err = -EINVAL;

	*r = (struct bench_adm_run){ 0 };
	*line = 1;
	if (!fgets(buf, sizeof(buf), in) || parse_magic(buf, r))
		goto fail;
	*line = 2;
	if (!fgets(buf, sizeof(buf), in) || strncmp(buf, CSV_HEADER "\n", sizeof(CSV_HEADER)))
		goto fail;
	while (fgets(buf, sizeof(buf), in)) {
		struct bench_adm_job j;
		int n = 0;

		(*line)++;
		if (sscanf(buf, "%lf,%lf,%lf,%u,%u,%u,%d%n", &j.start_s, &j.last_s, &j.end_s,
		           &j.attempts, &j.slowdowns, &j.transport, &j.status, &n) != 7 ||
		    (buf[n] != '\n' && buf[n] != 0) || !(j.start_s <= j.last_s) ||
		    !(j.last_s <= j.end_s) || j.attempts == 0)
			goto fail;
		if (r->njobs == cap) {
			size_t ncap = cap ? 2 * cap : 1024;
			struct bench_adm_job *nj = realloc(r->jobs, ncap * sizeof(*nj));

			if (!nj) {
				err = -ENOMEM;
				goto fail;
			}
			r->jobs = nj;
			cap = ncap;
		}
		r->jobs[r->njobs++] = j;
	}
	if (ferror(in))
		goto fail;
	return 0;
fail:
	bench_adm_run_fini(r);
	return err;
}

void
bench_adm_run_fini(struct bench_adm_run *r)
{
	free(r->jobs);
	*r = (struct bench_adm_run){ 0 };
}

/* Seconds as a person reads them: 12 ms, 1.42 s, 2 min 47 s. */
static void
fmt_dur(char *out, size_t n, double s)
{
	if (s < 1)
		snprintf(out, n, "%.0f ms", s * 1000);
	else if (s < 60)
		snprintf(out, n, "%.2f s", s);
	else
		snprintf(out, n, "%d min %02.0f s", (int)(s / 60), fmod(s, 60));
}

static void
row_dur(FILE *out, const char *name, const struct bench_adm_summary *sums, unsigned n, size_t off)
{
	fprintf(out, "| %s |", name);
	for (unsigned i = 0; i < n; i++) {
		char b[32];

		fmt_dur(b, sizeof(b), *(const double *)((const char *)&sums[i] + off));
		fprintf(out, " %s |", b);
	}
	fprintf(out, "\n");
}

void
bench_adm_table(FILE *out, const struct bench_adm_run *runs, const struct bench_adm_summary *sums,
                unsigned n)
{
	static const struct {
		const char *name;
		size_t off;
	} durs[] = {
		{ "job avg", offsetof(struct bench_adm_summary, job.avg) },
		{ "job p50", offsetof(struct bench_adm_summary, job.p50) },
		{ "job p99", offsetof(struct bench_adm_summary, job.p99) },
		{ "job max", offsetof(struct bench_adm_summary, job.max) },
		{ "last attempt avg", offsetof(struct bench_adm_summary, put.avg) },
		{ "last attempt p50", offsetof(struct bench_adm_summary, put.p50) },
		{ "last attempt p99", offsetof(struct bench_adm_summary, put.p99) },
		{ "last attempt max", offsetof(struct bench_adm_summary, put.max) },
	};

	fprintf(out, "| |");
	for (unsigned i = 0; i < n; i++)
		fprintf(out, " %s |", runs[i].label);
	fprintf(out, "\n|---|");
	for (unsigned i = 0; i < n; i++)
		fprintf(out, "---|");
	fprintf(out, "\n| jobs done / run |");
	for (unsigned i = 0; i < n; i++)
		fprintf(out, " %zu / %zu |", sums[i].ok, sums[i].jobs);
	fprintf(out, "\n");
	for (size_t d = 0; d < sizeof(durs) / sizeof(durs[0]); d++)
		row_dur(out, durs[d].name, sums, n, durs[d].off);
	row_dur(out, "wall time", sums, n, offsetof(struct bench_adm_summary, wall_s));
	fprintf(out, "| throughput |");
	for (unsigned i = 0; i < n; i++)
		fprintf(out, " %.1f jobs/s, %.1f MiB/s |", sums[i].jobs_per_s, sums[i].mib_per_s);
	fprintf(out, "\n| 503s retried (jobs hit) |");
	for (unsigned i = 0; i < n; i++)
		fprintf(out, " %llu (%zu) |", (unsigned long long)sums[i].slowdowns,
		        sums[i].jobs_slowed);
	fprintf(out, "\n| transport errors retried |");
	for (unsigned i = 0; i < n; i++)
		fprintf(out, " %llu |", (unsigned long long)sums[i].transport);
	fprintf(out, "\n");
}
