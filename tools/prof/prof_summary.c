/* zest-prof's gRPC rounds into a report (prof_summary.h). */
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_flame.h"
#include "prof_summary.h"
#include "zc.h"

/*
 * The store baseline writes, per round, as many bytes as the datanode's full path stored in
 * that round ((k+m)/k x the payload), and at least this: the kernel then allocates and
 * fills as many fresh pages as the datanode did, rather than a small set it reuses.
 */
#define STORE_MIN_BYTES (1536ull << 20)

/* Median of the finite values of one metric over runs; NAN when none. */
static double
median_of(const struct prof_run *runs, unsigned n, enum prof_metric mt)
{
	double v[PROF_MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (isfinite(runs[i].v[mt]))
			v[k++] = runs[i].v[mt];
	return k ? zc_median(v, k) : NAN;
}

/* Median over rounds of mode / base; NAN where a ratio means nothing (0 / 0). */
static double
ratio_of(const struct prof_run *base, const struct prof_run *mode, unsigned n, enum prof_metric mt)
{
	double v[PROF_MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (isfinite(mode[i].v[mt]) && isfinite(base[i].v[mt]) && base[i].v[mt] != 0)
			v[k++] = mode[i].v[mt] / base[i].v[mt];
	return k ? zc_median(v, k) : NAN;
}

static int
group_desc(const void *a, const void *b)
{
	const struct prof_thread_group *x = a, *y = b;

	return x->cpu_s < y->cpu_s ? 1 : x->cpu_s > y->cpu_s ? -1 : strcmp(x->name, y->name);
}

/*
 * Per-thread medians of one mode: every group seen in any of its runs, a run without it
 * counting 0 (it had no such threads), largest first.
 */
static void
median_groups(const struct prof_run *runs, unsigned n, struct prof_mode_summary *ms)
{
	ms->n_groups = 0;
	for (unsigned i = 0; i < n; i++)
		for (unsigned g = 0; g < runs[i].n_groups; g++) {
			unsigned j;

			for (j = 0; j < ms->n_groups; j++)
				if (!strcmp(ms->groups[j].name, runs[i].groups[g].name))
					break;
			if (j == ms->n_groups && ms->n_groups < PROF_MAX_GROUPS)
				ms->groups[ms->n_groups++] = runs[i].groups[g];
		}
	for (unsigned j = 0; j < ms->n_groups; j++) {
		double v[PROF_MAX_PAIRS];

		for (unsigned i = 0; i < n; i++) {
			v[i] = 0;
			for (unsigned g = 0; g < runs[i].n_groups; g++)
				if (!strcmp(ms->groups[j].name, runs[i].groups[g].name))
					v[i] = runs[i].groups[g].cpu_s;
		}
		ms->groups[j].cpu_s = zc_median(v, n);
	}
	qsort(ms->groups, ms->n_groups, sizeof(ms->groups[0]), group_desc);
}

/*
 * The store baseline of one round into r, sized to what the round's full-path modes stored
 * (their runs in `round`); a failure is reported and leaves NANs.
 */
void
prof_summary_store_round(const struct prof_opts *o, struct prof_run (*runs)[PROF_MAX_PAIRS],
                         unsigned round, struct prof_store_result *r)
{
	uint64_t bytes = STORE_MIN_BYTES;
	int rc;

	for (unsigned i = 0; i < o->n_modes; i++) {
		double stored = runs[i][round].v[PROF_M_MIBS] * (1 << 20) * (double)o->duration_ns /
		                1e9 * (o->k + o->m) / o->k;

		if (o->modes[i] != PROF_MODE_DISCARD && stored > (double)bytes)
			bytes = (uint64_t)stored;
	}
	rc = prof_store_measure(o->drives_base, o->k + o->m, bytes, r);

	if (rc < 0) {
		fprintf(stderr, "zest-prof: store baseline in %s failed: %s\n", o->drives_base,
		        strerror(-rc));
		r->mib_per_s = r->cpu_s_per_gib = r->user_s_per_gib = r->sys_s_per_gib = NAN;
	}
}

/* Median of the finite values of one field of the store results. */
static double
store_median(const struct prof_store_result *r, unsigned n, size_t field)
{
	double v[PROF_MAX_PAIRS];
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++) {
		double x = *(const double *)((const char *)&r[i] + field);

		if (isfinite(x))
			v[k++] = x;
	}
	return k ? zc_median(v, k) : NAN;
}

/* Medians, ratios against the first mode, per-thread medians, the store and its floor. */
void
prof_summarize(const struct prof_opts *o, struct prof_run (*runs)[PROF_MAX_PAIRS],
               const struct prof_store_result *store, struct prof_summary *s)
{
	*s = (struct prof_summary){ .n_modes = o->n_modes,
		                    .rounds = o->pairs,
		                    .concurrent = o->concurrent,
		                    .k = o->k,
		                    .m = o->m,
		                    .obj_size = o->obj_size,
		                    .ec = o->ec,
		                    .drives = o->drives_base,
		                    .s3 = o->s3,
		                    .has_store = o->store_baseline,
		                    .floor = NAN };
	for (unsigned i = 0; i < o->n_modes; i++) {
		struct prof_mode_summary *ms = &s->mode[i];

		ms->mode = o->modes[i];
		for (int mt = 0; mt < PROF_M_COUNT; mt++) {
			ms->v[mt] = median_of(runs[i], o->pairs, (enum prof_metric)mt);
			ms->ratio[mt] =
			        i ? ratio_of(runs[0], runs[i], o->pairs, (enum prof_metric)mt)
			          : NAN;
		}
		median_groups(runs[i], o->pairs, ms);
	}
	if (!o->store_baseline)
		return;
	s->store.mib_per_s =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, mib_per_s));
	s->store.cpu_s_per_gib =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, cpu_s_per_gib));
	s->store.user_s_per_gib =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, user_s_per_gib));
	s->store.sys_s_per_gib =
	        store_median(store, o->pairs, offsetof(struct prof_store_result, sys_s_per_gib));
	/* The floor: what --discard costs plus what the kernel charges to store (k+m)/k bytes
	 * per payload byte; the part of the full path no user-space change removes. */
	for (unsigned i = 0; i < o->n_modes; i++)
		if (o->modes[i] == PROF_MODE_DISCARD)
			s->floor = s->mode[i].v[PROF_M_CPU] +
			           (double)(o->k + o->m) / o->k * s->store.cpu_s_per_gib;
}

static const char *const copy_frames[] = { "memcpy", "memmove", NULL };

/*
 * Folds work/perf.MODE.data (perf script) into PREFIX-MODE.folded and draws
 * PREFIX-MODE.svg. Returns the number of samples or -errno.
 */
long
prof_summary_flame(const struct prof_opts *o, enum prof_mode pm, struct prof_flame_out *fo)
{
	const char *mode = prof_mode_name(pm);
	char data[PATH_MAX + 32], title[256];
	struct prof_flame *f;
	FILE *out;
	long n;

	snprintf(data, sizeof(data), "%s/perf.%s.data", o->work, mode);
	snprintf(fo->svg, sizeof(fo->svg), "%s-%s.svg", o->flame, mode);
	snprintf(fo->folded, sizeof(fo->folded), "%s-%s.folded", o->flame, mode);
	fo->copy_share = NAN;
	n = prof_flame_create(&f);
	if (n < 0)
		goto done;
	n = prof_flame_read_perf_data(f, data);
	if (n == 0)
		n = -ENODATA;
	if (n < 0)
		goto destroy;
	fo->copy_share = prof_flame_share(f, copy_frames);
	out = fopen(fo->folded, "w");
	if (!out || prof_flame_write_folded(f, out) < 0 || fclose(out) != 0) {
		n = -EIO;
		goto destroy;
	}
	snprintf(title, sizeof(title),
	         "%s, %s marshaller, %s data cells%s: %s load, %s objects, %u streams (perf "
	         "cpu-clock, "
	         "%s unwinding)",
	         o->s3 ? "zest-datanode and zest-s3gw" : "zest-datanode", prof_mode_marshaller(pm),
	         prof_mode_data_io(pm), prof_mode_discards(pm) ? " with --discard" : "",
	         o->s3 ? "S3" : "gRPC", o->obj_size, o->concurrent, o->call_graph);
	out = fopen(fo->svg, "w");
	if (!out || prof_flame_write_svg(f, out, title, 0, copy_frames) < 0 || fclose(out) != 0)
		n = -EIO;
destroy:
	prof_flame_destroy(f);
done:
	fo->samples = n;
	if (n < 0)
		fprintf(stderr, "zest-prof: no flame graph for %s (%s); perf's output is in %s\n",
		        mode, strerror((int)-n), o->log);
	return n;
}
