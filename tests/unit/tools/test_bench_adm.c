/* zest-bench admission's pure parts: nearest-rank percentiles, a run's summary, the CSV
 * round trip and its refusals, the side-by-side table, and the SVG chart (well-formed XML,
 * one dot per point, a mean line per series, escaped labels, log and linear axes). */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <libxml/parser.h>

#include "bench_adm_stats.h"
#include "bench_svg.h"

static void
test_pct(void **state)
{
	double one[] = { 7 }, ten[10], hundred[100];

	(void)state;
	for (int i = 0; i < 10; i++)
		ten[i] = i + 1;
	for (int i = 0; i < 100; i++)
		hundred[i] = i + 1;
	assert_true(bench_adm_pct(NULL, 0, 50) == 0);
	assert_true(bench_adm_pct(one, 1, 50) == 7);
	assert_true(bench_adm_pct(one, 1, 99) == 7);
	/* nearest rank: ceil(p/100 n), 1-based */
	assert_true(bench_adm_pct(ten, 10, 50) == 5);
	assert_true(bench_adm_pct(ten, 10, 99) == 10);
	assert_true(bench_adm_pct(ten, 10, 100) == 10);
	assert_true(bench_adm_pct(ten, 10, 0) == 1);
	assert_true(bench_adm_pct(hundred, 100, 50) == 50);
	assert_true(bench_adm_pct(hundred, 100, 99) == 99);
	assert_true(bench_adm_pct(hundred, 100, 99.5) == 100);
}

static void
test_dist(void **state)
{
	double v[] = { 5, 1, 4, 2, 3 };
	struct bench_adm_dist d;

	(void)state;
	bench_adm_dist_of(v, 5, &d);
	assert_true(d.avg == 3);
	assert_true(d.p50 == 3);
	assert_true(d.p99 == 5);
	assert_true(d.max == 5);
	assert_true(v[0] == 1 && v[4] == 5); /* sorted in place */
	bench_adm_dist_of(v, 0, &d);
	assert_true(d.avg == 0 && d.max == 0);
}

static struct bench_adm_job sample[] = {
	/* start, last, end, attempts, 503s, transport, status */
	{ 0.0, 0.0, 1.0, 1, 0, 0, 200 },
	{ 0.0, 2.0, 3.0, 3, 2, 0, 200 },
	{ 1.0, 1.5, 2.0, 2, 0, 1, 200 },
	{ 0.5, 3.5, 4.0, 5, 4, 0, 503 }, /* gave up: counted in 503s, not in durations */
};

static void
test_summarize(void **state)
{
	struct bench_adm_run r = {
		.label = "on", .obj_size = 1 << 20, .concurrent = 4, .jobs = sample, .njobs = 4
	};
	struct bench_adm_summary s;

	(void)state;
	assert_int_equal(bench_adm_summarize(&r, &s), 0);
	assert_int_equal(s.jobs, 4);
	assert_int_equal(s.ok, 3);
	assert_int_equal(s.slowdowns, 6);
	assert_int_equal(s.transport, 1);
	assert_int_equal(s.jobs_slowed, 2);
	assert_true(s.wall_s == 4.0);
	assert_true(fabs(s.jobs_per_s - 0.75) < 1e-12);
	assert_true(fabs(s.mib_per_s - 0.75) < 1e-12);
	/* job: 1, 3, 1 -> sorted 1, 1, 3; last attempt: 1, 1, 0.5 */
	assert_true(fabs(s.job.avg - 5.0 / 3) < 1e-12);
	assert_true(s.job.p50 == 1 && s.job.p99 == 3 && s.job.max == 3);
	assert_true(s.put.p50 == 1 && s.put.max == 1);
	assert_true(fabs(s.put.avg - 2.5 / 3) < 1e-12);
	r.njobs = 0;
	assert_int_equal(bench_adm_summarize(&r, &s), 0);
	assert_int_equal(s.ok, 0);
	assert_true(s.jobs_per_s == 0 && s.job.max == 0);
}

static void
test_csv_round_trip(void **state)
{
	struct bench_adm_run r = { .label = "off-slow",
		                   .obj_size = 4096,
		                   .concurrent = 64,
		                   .jobs = sample,
		                   .njobs = 4 },
	                     back;
	FILE *f = tmpfile();
	unsigned line;

	(void)state;
	assert_non_null(f);
	assert_int_equal(bench_adm_csv_write(f, &r), 0);
	rewind(f);
	assert_int_equal(bench_adm_csv_read(f, &back, &line), 0);
	assert_string_equal(back.label, "off-slow");
	assert_int_equal(back.obj_size, 4096);
	assert_int_equal(back.concurrent, 64);
	assert_int_equal(back.njobs, 4);
	for (size_t i = 0; i < 4; i++) {
		assert_true(back.jobs[i].start_s == sample[i].start_s);
		assert_true(back.jobs[i].end_s == sample[i].end_s);
		assert_int_equal(back.jobs[i].attempts, sample[i].attempts);
		assert_int_equal(back.jobs[i].slowdowns, sample[i].slowdowns);
		assert_int_equal(back.jobs[i].transport, sample[i].transport);
		assert_int_equal(back.jobs[i].status, sample[i].status);
	}
	bench_adm_run_fini(&back);
	fclose(f);
}

static int
read_text(const char *text, struct bench_adm_run *r, unsigned *line)
{
	FILE *f = tmpfile();
	int rc;

	assert_non_null(f);
	fputs(text, f);
	rewind(f);
	rc = bench_adm_csv_read(f, r, line);
	fclose(f);
	return rc;
}

#define HEAD                                                              \
	"# zest-bench admission label=x obj_size=1 concurrent=2 jobs=1\n" \
	"start_s,last_s,end_s,attempts,slowdowns,transport,status\n"

static void
test_csv_refusals(void **state)
{
	struct bench_adm_run r;
	unsigned line;

	(void)state;
	assert_int_equal(read_text("", &r, &line), -EINVAL);
	assert_int_equal(line, 1);
	assert_int_equal(read_text("a,b,c\n", &r, &line), -EINVAL);
	assert_int_equal(line, 1);
	assert_int_equal(read_text("# zest-bench admission label=x obj_size=1 concurrent=2\n"
	                           "start_s,end_s\n",
	                           &r, &line),
	                 -EINVAL);
	assert_int_equal(line, 2);
	assert_int_equal(read_text(HEAD "0,0,1,1,0,0,200\n0,0,1,1,0,0\n", &r, &line), -EINVAL);
	assert_int_equal(line, 4);
	assert_null(r.jobs); /* nothing left behind */
	assert_int_equal(read_text(HEAD "0,0,1,1,0,0,200x\n", &r, &line), -EINVAL);
	assert_int_equal(read_text(HEAD "2,1,3,1,0,0,200\n", &r, &line), -EINVAL); /* last<start */
	assert_int_equal(read_text(HEAD "0,0,1,0,0,0,200\n", &r, &line), -EINVAL); /* 0 attempts */
	assert_int_equal(read_text(HEAD, &r, &line), 0); /* a run without jobs is a run */
	assert_int_equal(r.njobs, 0);
	bench_adm_run_fini(&r);
}

/* What fn writes, as a NUL-terminated heap string (through a tmpfile: gcc 12 warns about
 * open_memstream's buffer pointer as dangling). */
static char *
capture(void (*fn)(FILE *, void *), void *arg, size_t *len)
{
	FILE *f = tmpfile();
	char *buf;
	long n;

	assert_non_null(f);
	fn(f, arg);
	n = ftell(f);
	assert_true(n >= 0);
	buf = malloc((size_t)n + 1);
	assert_non_null(buf);
	rewind(f);
	assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
	buf[n] = 0;
	fclose(f);
	*len = (size_t)n;
	return buf;
}

static void
table_fn(FILE *f, void *arg)
{
	struct bench_adm_run *r = arg;
	struct bench_adm_summary s[2];

	assert_int_equal(bench_adm_summarize(&r[0], &s[0]), 0);
	assert_int_equal(bench_adm_summarize(&r[1], &s[1]), 0);
	bench_adm_table(f, r, s, 2);
}

static void
test_table(void **state)
{
	struct bench_adm_job slow[] = { { 0, 0, 167.2, 1, 0, 0, 200 } };
	struct bench_adm_run r[2] = {
		{ .label = "on", .obj_size = 1 << 20, .jobs = sample, .njobs = 4 },
		{ .label = "off", .obj_size = 1 << 20, .jobs = slow, .njobs = 1 },
	};
	size_t len;
	char *t = capture(table_fn, r, &len);

	(void)state;
	assert_non_null(strstr(t, "| | on | off |\n|---|---|---|\n"));
	assert_non_null(strstr(t, "| jobs done / run | 3 / 4 | 1 / 1 |"));
	assert_non_null(strstr(t, "| job p99 | 3.00 s | 2 min 47 s |"));
	assert_non_null(strstr(t, "| last attempt avg | 833 ms |"));
	assert_non_null(strstr(t, "| 503s retried (jobs hit) | 6 (2) | 0 (0) |"));
	assert_non_null(strstr(t, "| throughput | 0.8 jobs/s, 0.8 MiB/s |"));
	free(t);
}

static size_t
count(const char *s, const char *what)
{
	size_t n = 0;

	for (const char *p = strstr(s, what); p; p = strstr(p + 1, what))
		n++;
	return n;
}

struct chart_args {
	struct bench_svg_opts o;
	struct bench_svg_series s[2];
	unsigned n;
	int rc;
};

static void
chart_fn(FILE *f, void *arg)
{
	struct chart_args *a = arg;

	a->rc = bench_svg_chart(f, &a->o, a->s, a->n);
}

static void
test_svg(void **state)
{
	double x1[] = { 0.5, 1.2, 1.7, 9.9 }, y1[] = { 0.02, 0.05, 0.04, 0.9 };
	double x2[] = { 3, 60 }, y2[] = { 12, 167 };
	struct chart_args a = {
		.o = { .title = "on & off <test>",
		       .xlabel = "t (s)",
		       .ylabel = "d (s)",
		       .logy = true,
		       .bin = 1 },
		.s = { { "admission on", "#1f77b4", x1, y1, 4 },
		       { "off \"5 s\"", "#d62728", x2, y2, 2 } },
		.n = 2,
	};
	size_t len;
	char *svg = capture(chart_fn, &a, &len);
	xmlDocPtr doc;

	(void)state;
	assert_int_equal(a.rc, 0);
	assert_int_equal(count(svg, "<circle"), 6);
	assert_int_equal(count(svg, "<polyline"), 2);
	assert_non_null(strstr(svg, "on &amp; off &lt;test&gt;"));
	assert_non_null(strstr(svg, "off &quot;5 s&quot;"));
	/* log10 axis from 0.01 to 1000: a tick per decade */
	assert_non_null(strstr(svg, ">0.01</text>"));
	assert_non_null(strstr(svg, ">1000</text>"));
	/* series 1's bins 0, 1 (two points, mean 0.045) and 9 */
	assert_int_equal(count(strstr(svg, "<polyline"), ","), 3 + 2);
	doc = xmlReadMemory(svg, (int)len, "chart.svg", NULL, XML_PARSE_NONET);
	assert_non_null(doc);
	assert_string_equal((const char *)xmlDocGetRootElement(doc)->name, "svg");
	xmlFreeDoc(doc);
	free(svg);

	a.o.logy = false;
	a.o.bin = 0;
	svg = capture(chart_fn, &a, &len);
	assert_int_equal(a.rc, 0);
	assert_int_equal(count(svg, "<polyline"), 0);
	assert_non_null(strstr(svg, ">180</text>")); /* linear: 0..180 in steps of 20 */
	assert_non_null(strstr(svg, ">20</text>"));
	doc = xmlReadMemory(svg, (int)len, "chart.svg", NULL, XML_PARSE_NONET);
	assert_non_null(doc);
	xmlFreeDoc(doc);
	free(svg);

	a.s[0].n = 0; /* an empty series still charts; no series at all is refused */
	svg = capture(chart_fn, &a, &len);
	assert_int_equal(a.rc, 0);
	free(svg);
	a.n = 0;
	svg = capture(chart_fn, &a, &len);
	assert_int_equal(a.rc, -EINVAL);
	free(svg);
}

static void
test_step(void **state)
{
	(void)state;
	assert_true(bench_svg_step(10, 5) == 2);
	assert_true(bench_svg_step(167, 6) == 20);
	assert_true(bench_svg_step(300, 6) == 50);
	assert_true(bench_svg_step(1, 8) == 0.1);
	assert_true(fabs(bench_svg_step(0.3, 6) - 0.05) < 1e-15);
	assert_true(bench_svg_step(0, 6) == 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pct),          cmocka_unit_test(test_dist),
		cmocka_unit_test(test_summarize),    cmocka_unit_test(test_csv_round_trip),
		cmocka_unit_test(test_csv_refusals), cmocka_unit_test(test_table),
		cmocka_unit_test(test_svg),          cmocka_unit_test(test_step),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
