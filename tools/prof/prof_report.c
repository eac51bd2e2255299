/* zest-prof's report: text tables, JSON and an SVG bar chart of one run's figures. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "prof_report.h"
#include "zc.h"

static const char *const metric_keys[PROF_M_COUNT] = {
	"mib_per_s", "cpu_s_per_gib", "copied_per_byte",      "p50_ms",
	"p99_ms",    "peak_rss_mib",  "instructions_per_byte"
};
static const char *const metric_titles[PROF_M_COUNT] = {
	"throughput MiB/s", "datanode CPU-s/GiB",    "copied bytes/byte", "latency p50 ms",
	"latency p99 ms",   "datanode peak RSS MiB", "instructions/byte"
};
/* Per-thread rows below this in every mode are summed up in one line of the text table. */
#define SMALL_CPU_S_PER_GIB 0.001

static const char *const colors[PROF_MODE_COUNT] = { "#c0504d", "#4f81bd", "#9bbb59", "#8064a2",
	                                             "#f79646" };

bool
prof_report_is_default(const struct prof_summary *s)
{
	return s->n_modes == 2 && s->mode[0].mode == PROF_MODE_COPY &&
	       s->mode[1].mode == PROF_MODE_ZEROCOPY;
}

static const char *
name_of(const struct prof_summary *s, unsigned i)
{
	return prof_mode_name(s->mode[i].mode);
}

static void
json_number(FILE *out, double v)
{
	if (isfinite(v))
		fprintf(out, "%.6g", v);
	else
		fprintf(out, "null");
}

static void
json_metrics(FILE *out, const double *v)
{
	for (int mt = 0; mt < PROF_M_COUNT; mt++) {
		fprintf(out, "%s\"%s\":", mt ? "," : "", metric_keys[mt]);
		json_number(out, v[mt]);
	}
}

static void
json_store(FILE *out, const struct prof_summary *s)
{
	fprintf(out, ",\"store\":{\"files\":%u,\"mib_per_s\":", s->k + s->m);
	json_number(out, s->store.mib_per_s);
	fprintf(out, ",\"cpu_s_per_gib\":");
	json_number(out, s->store.cpu_s_per_gib);
	fprintf(out, ",\"user_s_per_gib\":");
	json_number(out, s->store.user_s_per_gib);
	fprintf(out, ",\"sys_s_per_gib\":");
	json_number(out, s->store.sys_s_per_gib);
	fprintf(out, "}");
	if (isfinite(s->floor)) {
		fprintf(out, ",\"floor_cpu_s_per_gib\":");
		json_number(out, s->floor);
	}
}

static void
json_flames(FILE *out, const struct prof_summary *s)
{
	fprintf(out, ",\"flame\":{");
	for (unsigned i = 0; i < s->n_modes; i++) {
		const struct prof_flame_out *fl = &s->mode[i].flame;

		fprintf(out, "%s\"%s\":{\"samples\":%ld", i ? "," : "", name_of(s, i),
		        fl->samples > 0 ? fl->samples : 0);
		if (fl->samples > 0) {
			fprintf(out, ",\"svg\":");
			zc_json_string(out, fl->svg);
			fprintf(out, ",\"folded\":");
			zc_json_string(out, fl->folded);
		}
		fprintf(out, ",\"memcpy_share\":");
		json_number(out, fl->copy_share);
		fprintf(out, "}");
	}
	fprintf(out, "}");
}

void
prof_report_json(FILE *out, const struct prof_summary *s)
{
	bool legacy = prof_report_is_default(s);

	fprintf(out, "{");
	for (unsigned i = 0; i < s->n_modes; i++) {
		const struct prof_mode_summary *ms = &s->mode[i];

		fprintf(out, "%s\"%s\":{", i ? "," : "", name_of(s, i));
		json_metrics(out, ms->v);
		fprintf(out, ",\"threads_cpu_s_per_gib\":{");
		for (unsigned g = 0; g < ms->n_groups; g++) {
			fprintf(out, "%s", g ? "," : "");
			zc_json_string(out, ms->groups[g].name);
			fprintf(out, ":");
			json_number(out, ms->groups[g].cpu_s);
		}
		fprintf(out, "}}");
	}
	for (unsigned i = 1; i < s->n_modes; i++) {
		if (legacy)
			fprintf(out, ",\"ratio\":{");
		else
			fprintf(out, ",\"ratio_%s\":{", name_of(s, i));
		json_metrics(out, s->mode[i].ratio);
		fprintf(out, "}");
	}
	fprintf(out, ",\"pairs\":%u,\"via\":\"%s\",\"obj_size\":", s->rounds,
	        s->s3 ? "s3" : "grpc");
	zc_json_string(out, s->obj_size);
	fprintf(out, ",\"concurrent\":%u,\"ec\":", s->concurrent);
	zc_json_string(out, s->ec);
	fprintf(out, ",\"modes\":[");
	for (unsigned i = 0; i < s->n_modes; i++)
		fprintf(out, "%s\"%s\"", i ? "," : "", name_of(s, i));
	fprintf(out, "],\"ratio_base\":\"%s\"", name_of(s, 0));
	if (s->has_store)
		json_store(out, s);
	if (s->has_flame)
		json_flames(out, s);
	fprintf(out, "}\n");
}

/* The CPU-s/GiB of group name in mode i, or NAN when that mode has no such threads. */
static double
group_value(const struct prof_mode_summary *ms, const char *name)
{
	for (unsigned g = 0; g < ms->n_groups; g++)
		if (!strcmp(ms->groups[g].name, name))
			return ms->groups[g].cpu_s;
	return NAN;
}

/* Per-thread CPU: one row per thread group seen in any mode, largest first. */
static void
table_threads(FILE *out, const struct prof_summary *s)
{
	struct prof_thread_group rows[PROF_MAX_GROUPS * PROF_MAX_MODES];
	unsigned n = 0;

	for (unsigned i = 0; i < s->n_modes; i++) {
		const struct prof_mode_summary *ms = &s->mode[i];

		for (unsigned g = 0; g < ms->n_groups; g++) {
			unsigned r;

			for (r = 0; r < n && strcmp(rows[r].name, ms->groups[g].name); r++)
				;
			if (r == n) {
				rows[n] = ms->groups[g];
				n++;
			} else if (ms->groups[g].cpu_s > rows[r].cpu_s) {
				rows[r].cpu_s = ms->groups[g].cpu_s;
			}
		}
	}
	if (n == 0)
		return;
	/* Insertion sort by the largest value in any mode: a few dozen rows at most. */
	for (unsigned a = 1; a < n; a++)
		for (unsigned b = a; b > 0 && rows[b].cpu_s > rows[b - 1].cpu_s; b--) {
			struct prof_thread_group t = rows[b];

			rows[b] = rows[b - 1];
			rows[b - 1] = t;
		}
	fprintf(out, "# datanode CPU-s per payload GiB by thread (medians; trailing digits "
	             "folded to #)\n");
	fprintf(out, "%-24s", "thread");
	for (unsigned i = 0; i < s->n_modes; i++)
		fprintf(out, " %12s", name_of(s, i));
	fprintf(out, "\n");
	for (unsigned r = 0; r < n; r++) {
		/* Sorted: the rest are idle threads (gRPC's timers, metrics, heal). */
		if (rows[r].cpu_s < SMALL_CPU_S_PER_GIB) {
			fprintf(out, "# %u more thread groups under %.3g CPU-s/GiB in every mode\n",
			        n - r, SMALL_CPU_S_PER_GIB);
			break;
		}
		fprintf(out, "%-24s", rows[r].name);
		for (unsigned i = 0; i < s->n_modes; i++) {
			double v = group_value(&s->mode[i], rows[r].name);

			if (isfinite(v))
				fprintf(out, " %12.3f", v);
			else
				fprintf(out, " %12s", "-");
		}
		fprintf(out, "\n");
	}
}

static void
table_store(FILE *out, const struct prof_summary *s)
{
	fprintf(out,
	        "# kernel store baseline: %u files, 1 MiB write()s from a 64 MiB buffer, "
	        "fdatasync, "
	        "in %s (median of %u)\n",
	        s->k + s->m, s->drives, s->rounds);
	fprintf(out, "%-24s %12.4g\n", "store MiB/s", s->store.mib_per_s);
	fprintf(out, "%-24s %12.4g  (user %.3g, sys %.3g)\n", "store CPU-s/GiB",
	        s->store.cpu_s_per_gib, s->store.user_s_per_gib, s->store.sys_s_per_gib);
	if (!isfinite(s->floor))
		return;
	fprintf(out, "# CPU floor of the full path: discard + %u/%u x store = %.3g CPU-s/GiB",
	        s->k + s->m, s->k, s->floor);
	for (unsigned i = 0; i < s->n_modes; i++)
		if (s->mode[i].mode != PROF_MODE_DISCARD)
			fprintf(out, "; %s measured %.3g", name_of(s, i), s->mode[i].v[PROF_M_CPU]);
	fprintf(out, "\n");
}

void
prof_report_table(FILE *out, const struct prof_summary *s)
{
	bool legacy = prof_report_is_default(s);
	char title[32];

	if (legacy) {
		fprintf(out, "# zest-prof: %u pairs, ", s->rounds);
	} else {
		fprintf(out, "# zest-prof: %u rounds of ", s->rounds);
		for (unsigned i = 0; i < s->n_modes; i++)
			fprintf(out, "%s%s", i ? "/" : "", name_of(s, i));
		fprintf(out, ", ");
	}
	fprintf(out, "%s load, %s objects, %u streams, RS %s, drives in %s\n",
	        s->s3 ? "S3 (through zest-s3gw)" : "gRPC", s->obj_size, s->concurrent, s->ec,
	        s->drives);
	if (legacy)
		fprintf(out,
		        "# medians over the pairs; ratio = median of per-pair zerocopy / copy\n");
	else if (s->n_modes > 1)
		fprintf(out,
		        "# medians over the rounds; ratios are against the first mode, %s: "
		        "the median of per-round MODE / %s\n",
		        name_of(s, 0), name_of(s, 0));
	else
		fprintf(out, "# medians over the rounds\n");
	fprintf(out, "%-24s", "");
	for (unsigned i = 0; i < s->n_modes; i++)
		fprintf(out, " %12s", name_of(s, i));
	for (unsigned i = 1; i < s->n_modes; i++) {
		if (s->n_modes == 2)
			snprintf(title, sizeof(title), "ratio");
		else
			snprintf(title, sizeof(title), "%s/%s", name_of(s, i), name_of(s, 0));
		fprintf(out, " %*s", s->n_modes == 2 ? 10 : 16, title);
	}
	fprintf(out, "\n");
	for (int mt = 0; mt < PROF_M_COUNT; mt++) {
		bool any = false;

		for (unsigned i = 0; i < s->n_modes; i++)
			any |= isfinite(s->mode[i].v[mt]);
		if (!any)
			continue;
		fprintf(out, "%-24s", metric_titles[mt]);
		for (unsigned i = 0; i < s->n_modes; i++)
			fprintf(out, " %12.4g", s->mode[i].v[mt]);
		for (unsigned i = 1; i < s->n_modes; i++)
			fprintf(out, " %*.3g", s->n_modes == 2 ? 10 : 16, s->mode[i].ratio[mt]);
		fprintf(out, "\n");
	}
	table_threads(out, s);
	if (s->has_store)
		table_store(out, s);
	for (unsigned i = 0; s->has_flame && i < s->n_modes; i++) {
		const struct prof_flame_out *fl = &s->mode[i].flame;

		if (fl->samples > 0)
			fprintf(out,
			        "# flame graph, %s: %s (%ld samples, %.1f%% of them in a "
			        "user-space "
			        "memcpy/memmove)\n",
			        name_of(s, i), fl->svg, fl->samples, 100 * fl->copy_share);
	}
}

int
prof_report_svg(const char *path, const struct prof_summary *s)
{
	const int w = 760, top = 40, row = 12 + 22 * (int)s->n_modes;
	FILE *f = fopen(path, "w");
	int y = top;

	if (!f)
		return -errno;
	fprintf(f,
	        "<svg xmlns='http://www.w3.org/2000/svg' width='%d' height='%d' "
	        "font-family='sans-serif' font-size='12'>\n",
	        w, top + row * PROF_M_COUNT + 30);
	if (prof_report_is_default(s)) {
		fprintf(f, "<text x='10' y='20' font-size='15'>zest-prof: copy vs zero-copy "
		           "(bars scaled per metric)</text>\n");
	} else {
		fprintf(f, "<text x='10' y='20' font-size='15'>zest-prof:");
		for (unsigned i = 0; i < s->n_modes; i++)
			fprintf(f, "%s %s", i ? " vs" : "", name_of(s, i));
		fprintf(f, " (bars scaled per metric)</text>\n");
	}
	/* The legend ends at the same place however many modes there are. */
	for (unsigned i = 0; i < s->n_modes; i++) {
		int x = 520 - 70 * ((int)s->n_modes - 2) + 70 * (int)i;

		fprintf(f,
		        "<rect x='%d' y='8' width='12' height='12' fill='%s'/>"
		        "<text x='%d' y='19'>%s</text>",
		        x, colors[s->mode[i].mode], x + 16, name_of(s, i));
	}
	fprintf(f, "\n");
	for (int mt = 0; mt < PROF_M_COUNT; mt++) {
		double max = 0;
		bool all = true;

		for (unsigned i = 0; i < s->n_modes; i++) {
			all &= isfinite(s->mode[i].v[mt]);
			if (isfinite(s->mode[i].v[mt]) && s->mode[i].v[mt] > max)
				max = s->mode[i].v[mt];
		}
		if (!all)
			continue;
		fprintf(f, "<text x='10' y='%d'>%s</text>\n", y + 14, metric_titles[mt]);
		for (unsigned b = 0; b < s->n_modes; b++) {
			double v = s->mode[b].v[mt];
			int len = max > 0 ? (int)(v / max * 380) : 0;

			fprintf(f,
			        "<rect x='200' y='%d' width='%d' height='18' fill='%s'/>"
			        "<text x='%d' y='%d'>%.4g</text>\n",
			        y + (int)b * 22, len, colors[s->mode[b].mode], 206 + len,
			        y + (int)b * 22 + 14, v);
		}
		y += row;
	}
	fprintf(f, "</svg>\n");
	return fclose(f) == 0 ? 0 : -EIO;
}
