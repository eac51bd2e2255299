/* zest-prof --s3's medians, ratios and reports (prof_s3_report.h). */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof_s3_report.h"
#include "zc.h"

static const char *const metric_names[PROF_S3_METRICS] = {
	[PROF_S3_MIBS] = "mib_per_s",
	[PROF_S3_OBJS] = "obj_per_s",
	[PROF_S3_P50] = "p50_ms",
	[PROF_S3_P99] = "p99_ms",
	[PROF_S3_P999] = "p99.9_ms",
	[PROF_S3_CPU_ALL] = "cpu_s_per_gib_all",
	[PROF_S3_CPU_GW] = "cpu_s_per_gib_gateway",
	[PROF_S3_CPU_DN] = "cpu_s_per_gib_datanode",
	[PROF_S3_CPU_MS_OBJ] = "cpu_ms_per_object",
	[PROF_S3_COPIED_GW] = "copied_per_byte_gateway",
	[PROF_S3_COPIED_DN] = "copied_per_byte_datanode",
	[PROF_S3_PAGECACHE] = "pagecache_per_byte",
	[PROF_S3_RSS_GW] = "peak_rss_mib_gateway",
	[PROF_S3_RSS_DN] = "peak_rss_mib_datanode",
	[PROF_S3_ERRORS] = "errors",
};

const char *
prof_s3_op_name(enum prof_s3_op op)
{
	return op == PROF_S3_PUT ? "put" : op == PROF_S3_GET ? "get" : "?";
}

unsigned
prof_s3_parse_labelled(const char *text, const char *name, const char *label,
                       struct prof_s3_named *out, unsigned max)
{
	size_t nl = strlen(name), ll = strlen(label);
	unsigned n = 0;

	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
		const char *q = p + nl, *v, *end;
		char value[PROF_S3_STAGE_MAX];
		size_t vl;
		unsigned i;

		if (strncmp(p, name, nl) || *q != '{')
			continue;
		end = strchr(q, '}');
		/* the label among the braces: {a="x",stage="y"} */
		for (v = q + 1; v && v < end; v = strchr(v, ','), v = v ? v + 1 : NULL)
			if (!strncmp(v, label, ll) && v[ll] == '=' && v[ll + 1] == '"')
				break;
		if (!end || !v || v >= end)
			continue;
		v += ll + 2;
		vl = strcspn(v, "\"");
		if (vl >= sizeof(value))
			vl = sizeof(value) - 1;
		memcpy(value, v, vl);
		value[vl] = 0;
		for (i = 0; i < n; i++)
			if (!strcmp(out[i].name, value))
				break;
		if (i == n) {
			if (n == max)
				continue;
			snprintf(out[n].name, sizeof(out[n].name), "%s", value);
			out[n++].v = 0;
		}
		out[i].v += strtod(end + 1, NULL);
	}
	return n;
}

static const struct prof_s3_phase *
phase_at(const struct prof_s3_phase *ph, unsigned rounds, unsigned mode, unsigned op,
         unsigned round)
{
	return &ph[((size_t)mode * PROF_S3_OPS + op) * rounds + round];
}

static double
median_finite(double *v, unsigned n)
{
	unsigned k = 0;

	for (unsigned i = 0; i < n; i++)
		if (isfinite(v[i]))
			v[k++] = v[i];
	return k ? zc_median(v, k) : NAN;
}

static int
group_desc(const void *a, const void *b)
{
	const struct prof_s3_named *x = a, *y = b;

	return x->v < y->v ? 1 : x->v > y->v ? -1 : strcmp(x->name, y->name);
}

/*
 * Medians over rounds of the named values of one mode and op (at[r], n_at[r] per round) into
 * out: every name seen in any round, a round without it counting 0. Returns the count.
 */
static unsigned
median_named(const struct prof_s3_named *const *at, const unsigned *n_at, unsigned rounds,
             struct prof_s3_named *out, unsigned max)
{
	unsigned n = 0;

	for (unsigned r = 0; r < rounds; r++)
		for (unsigned g = 0; g < n_at[r]; g++) {
			unsigned j;

			for (j = 0; j < n; j++)
				if (!strcmp(out[j].name, at[r][g].name))
					break;
			if (j == n && n < max)
				out[n++] = at[r][g];
		}
	for (unsigned j = 0; j < n; j++) {
		double v[64];

		for (unsigned r = 0; r < rounds; r++) {
			v[r] = 0;
			for (unsigned g = 0; g < n_at[r]; g++)
				if (!strcmp(out[j].name, at[r][g].name))
					v[r] = at[r][g].v;
		}
		out[j].v = zc_median(v, rounds);
	}
	return n;
}

void
prof_s3_summarize(const struct prof_s3_phase *ph, unsigned rounds, struct prof_s3_summary *s)
{
	if (rounds > 64)
		rounds = 64;
	s->rounds = rounds;
	for (unsigned m = 0; m < s->n_modes; m++)
		for (unsigned op = 0; op < PROF_S3_OPS; op++) {
			struct prof_s3_cell *c = &s->cell[m][op];
			const struct prof_s3_named *st[64], *gr[64];
			unsigned n_st[64], n_gr[64];

			for (int mt = 0; mt < PROF_S3_METRICS; mt++) {
				double v[64], q[64];

				for (unsigned r = 0; r < rounds; r++) {
					double x = phase_at(ph, rounds, m, op, r)->v[mt];
					double b = phase_at(ph, rounds, 0, op, r)->v[mt];

					v[r] = x;
					/* every figure is >= 0; a negative one (pages evicted
					 * during the phase) or a 0 base has no ratio */
					q[r] = isfinite(x) && isfinite(b) && b > 0 && x >= 0 ? x / b
					                                                     : NAN;
				}
				c->v[mt] = median_finite(v, rounds);
				c->ratio[mt] = m ? median_finite(q, rounds) : NAN;
			}
			/* stages and thread groups */
			for (unsigned r = 0; r < rounds; r++) {
				const struct prof_s3_phase *p = phase_at(ph, rounds, m, op, r);

				st[r] = p->stages;
				n_st[r] = p->n_stages;
				gr[r] = p->groups;
				n_gr[r] = p->n_groups;
			}
			c->n_stages = median_named(st, n_st, rounds, c->stages, PROF_S3_MAX_STAGES);
			c->n_groups = median_named(gr, n_gr, rounds, c->groups, PROF_S3_MAX_GROUPS);
			qsort(c->groups, c->n_groups, sizeof(c->groups[0]), group_desc);
		}
}

/* ------------------------------------------------------------------ reports */

static void
json_num(FILE *out, double v)
{
	if (isfinite(v))
		fprintf(out, "%.6g", v);
	else
		fputs("null", out);
}

static void
json_cell(FILE *out, const struct prof_s3_cell *c, bool ratio)
{
	fputc('{', out);
	for (int mt = 0; mt < PROF_S3_METRICS; mt++) {
		fprintf(out, "%s\"%s\":", mt ? "," : "", metric_names[mt]);
		json_num(out, ratio ? c->ratio[mt] : c->v[mt]);
	}
	if (!ratio) {
		fputs(",\"copied_per_byte_by_stage\":{", out);
		for (unsigned i = 0; i < c->n_stages; i++) {
			fprintf(out, "%s\"%s\":", i ? "," : "", c->stages[i].name);
			json_num(out, c->stages[i].v);
		}
		fputs("},\"threads_cpu_s_per_gib\":{", out);
		for (unsigned i = 0; i < c->n_groups; i++) {
			fprintf(out, "%s\"%s\":", i ? "," : "", c->groups[i].name);
			json_num(out, c->groups[i].v);
		}
		fputc('}', out);
	}
	fputc('}', out);
}

void
prof_s3_report_json(FILE *out, const struct prof_s3_summary *s)
{
	fprintf(out,
	        "{\"s3\":true,\"rounds\":%u,\"ec\":\"%s\",\"obj_size\":\"%s\","
	        "\"concurrent\":%u,\"objects\":%u,\"grpc_tls\":%s,\"grpc_link\":\"%s\","
	        "\"load1\":",
	        s->rounds, s->ec, s->obj_size, s->concurrent, s->objects,
	        s->plaintext || s->unix_link ? "false" : "true",
	        s->unix_link   ? "unix"
	        : s->plaintext ? "plain"
	                       : "mtls");
	json_num(out, s->load1);
	fputs(",\"modes\":[", out);
	for (unsigned m = 0; m < s->n_modes; m++)
		fprintf(out, "%s\"%s\"", m ? "," : "", prof_mode_name(s->modes[m]));
	fputc(']', out);
	for (unsigned op = 0; op < PROF_S3_OPS; op++) {
		if (!s->ops[op])
			continue;
		fprintf(out, ",\"%s\":{", prof_s3_op_name(op));
		for (unsigned m = 0; m < s->n_modes; m++) {
			fprintf(out, "%s\"%s\":", m ? "," : "", prof_mode_name(s->modes[m]));
			json_cell(out, &s->cell[m][op], false);
		}
		for (unsigned m = 1; m < s->n_modes; m++) {
			fprintf(out, ",\"ratio_%s\":", prof_mode_name(s->modes[m]));
			json_cell(out, &s->cell[m][op], true);
		}
		fputc('}', out);
	}
	fputs("}\n", out);
}

static const struct {
	enum prof_s3_metric m;
	const char *head, *fmt;
} columns[] = {
	{ PROF_S3_MIBS, "MiB/s", "%8.1f" },        { PROF_S3_OBJS, "obj/s", "%8.1f" },
	{ PROF_S3_CPU_ALL, "CPU/GiB", "%8.2f" },   { PROF_S3_CPU_GW, "gw", "%6.2f" },
	{ PROF_S3_CPU_DN, "dn", "%6.2f" },         { PROF_S3_CPU_MS_OBJ, "ms/obj", "%7.2f" },
	{ PROF_S3_COPIED_GW, "cp.gw", "%6.3f" },   { PROF_S3_COPIED_DN, "cp.dn", "%6.3f" },
	{ PROF_S3_PAGECACHE, "pgcache", "%7.3f" }, { PROF_S3_P50, "p50ms", "%7.1f" },
	{ PROF_S3_P99, "p99ms", "%7.1f" },         { PROF_S3_P999, "p99.9ms", "%8.1f" },
	{ PROF_S3_RSS_GW, "rss.gw", "%7.0f" },     { PROF_S3_RSS_DN, "rss.dn", "%7.0f" },
	{ PROF_S3_ERRORS, "errors", "%6.0f" },
};

/* One row of the table; ratios get three decimals whatever the column's figure is. */
static void
row(FILE *out, const char *label, const double *v, bool ratio)
{
	fprintf(out, "%-15s", label);
	for (size_t i = 0; i < sizeof(columns) / sizeof(columns[0]); i++) {
		char cell[32];
		int w = atoi(columns[i].fmt + 1);

		if (!isfinite(v[columns[i].m]))
			snprintf(cell, sizeof(cell), "%*s", w, "-");
		else if (ratio)
			snprintf(cell, sizeof(cell), "%*.3f", w, v[columns[i].m]);
		else
			snprintf(cell, sizeof(cell), columns[i].fmt, v[columns[i].m]);
		fprintf(out, " %s", cell);
	}
	fputc('\n', out);
}

void
prof_s3_report_table(FILE *out, const struct prof_s3_summary *s)
{
	fprintf(out,
	        "# zest-prof --s3: zest-s3gw + zest-datanode (RS %s, gRPC %s), %s objects, %u "
	        "streams, median of %u alternating rounds; load average %.1f at the end\n"
	        "# CPU-s per payload GiB from /proc (gw = gateway, dn = datanode); cp = "
	        "user-space\n"
	        "# payload copies per byte (/metrics); pgcache = drive-file bytes added to the "
	        "page\n"
	        "# cache per byte; rss = peak RSS MiB in the phase; ratio = median of MODE / %s\n",
	        s->ec,
	        s->unix_link   ? "over the Unix socket"
	        : s->plaintext ? "in plaintext"
	                       : "over mTLS",
	        s->obj_size, s->concurrent, s->rounds, s->load1,
	        s->n_modes ? prof_mode_name(s->modes[0]) : "-");
	for (unsigned op = 0; op < PROF_S3_OPS; op++) {
		if (!s->ops[op])
			continue;
		fprintf(out, "\n%s %-11s", op == PROF_S3_PUT ? "PUT" : "GET", "");
		for (size_t i = 0; i < sizeof(columns) / sizeof(columns[0]); i++)
			fprintf(out, " %*s", atoi(columns[i].fmt + 1), columns[i].head);
		fputc('\n', out);
		for (unsigned m = 0; m < s->n_modes; m++)
			row(out, prof_mode_name(s->modes[m]), s->cell[m][op].v, false);
		for (unsigned m = 1; m < s->n_modes; m++) {
			char label[40];

			snprintf(label, sizeof(label), "ratio %s", prof_mode_name(s->modes[m]));
			row(out, label, s->cell[m][op].ratio, true);
		}
	}
	for (unsigned op = 0; op < PROF_S3_OPS; op++)
		for (unsigned m = 0; m < s->n_modes && s->ops[op]; m++) {
			const struct prof_s3_cell *c = &s->cell[m][op];

			fprintf(out, "\n%s %s: copies per payload byte by stage:",
			        op == PROF_S3_PUT ? "PUT" : "GET", prof_mode_name(s->modes[m]));
			for (unsigned i = 0; i < c->n_stages; i++)
				if (c->stages[i].v != 0)
					fprintf(out, " %s %.3f", c->stages[i].name, c->stages[i].v);
			fprintf(out, "\n  CPU-s per payload GiB by thread:");
			for (unsigned i = 0; i < c->n_groups; i++)
				if (c->groups[i].v >= 0.005)
					fprintf(out, " %s %.2f", c->groups[i].name, c->groups[i].v);
			fputc('\n', out);
		}
}

/* ------------------------------------------------------------------ page cache */

static int64_t resident_sum;
static long page_size;

static int
count_file(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	unsigned char *vec;
	size_t pages;
	void *map;
	int fd;

	(void)ftw;
	if (type != FTW_F || !S_ISREG(st->st_mode) || st->st_size == 0)
		return 0;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0; /* removed meanwhile */
	map = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return 0;
	pages = ((size_t)st->st_size + (size_t)page_size - 1) / (size_t)page_size;
	vec = malloc(pages);
	if (vec && mincore(map, (size_t)st->st_size, vec) == 0)
		for (size_t i = 0; i < pages; i++)
			if (vec[i] & 1)
				resident_sum += i + 1 == pages
				                        ? st->st_size - (off_t)(i * page_size)
				                        : page_size;
	free(vec);
	munmap(map, (size_t)st->st_size);
	return 0;
}

int64_t
prof_s3_pagecache_bytes(const char *dir)
{
	page_size = sysconf(_SC_PAGESIZE);
	resident_sum = 0;
	if (nftw(dir, count_file, 16, FTW_PHYS) < 0)
		return -errno;
	return resident_sum;
}
