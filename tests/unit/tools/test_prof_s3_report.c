/* zest-prof --s3's pure parts: the labelled /metrics parser, the medians and ratios over
 * rounds (stages and thread groups too), the JSON and text reports, and the page-cache
 * count of a folder (a file written through the page cache in /tmp). */
#include <fcntl.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "prof_s3_report.h"

static void
test_parse_labelled(void **state)
{
	const char *text =
	        "# HELP zest_payload_copied_bytes_total Payload bytes copied in user space.\n"
	        "# TYPE zest_payload_copied_bytes_total counter\n"
	        "zest_payload_copied_bytes_total{stage=\"gather\"} 100\n"
	        "zest_payload_copied_bytes_total_other{stage=\"gather\"} 7\n"
	        "zest_payload_copied_bytes_total{stage=\"align\"} 2.5e3\n"
	        "zest_payload_copied_bytes_total{drive=\"1\",stage=\"gather\"} 11\n"
	        "zest_payload_copied_bytes_total{drive=\"1\"} 13\n"
	        "zest_payload_copied_bytes_total 17\n"
	        "zest_s3_payload_bytes_total{dir=\"in\"} 4096\n";
	struct prof_s3_named st[4];
	unsigned n;

	(void)state;
	n = prof_s3_parse_labelled(text, "zest_payload_copied_bytes_total", "stage", st, 4);
	assert_int_equal(n, 2);
	assert_string_equal(st[0].name, "gather");
	assert_true(st[0].v == 111); /* the same label value adds up; other series do not */
	assert_string_equal(st[1].name, "align");
	assert_true(st[1].v == 2500);
	n = prof_s3_parse_labelled(text, "zest_s3_payload_bytes_total", "dir", st, 4);
	assert_int_equal(n, 1);
	assert_string_equal(st[0].name, "in");
	assert_true(st[0].v == 4096);
	/* room for one: later values are dropped, not written past the end */
	n = prof_s3_parse_labelled(text, "zest_payload_copied_bytes_total", "stage", st, 1);
	assert_int_equal(n, 1);
	assert_true(st[0].v == 111);
	assert_int_equal(prof_s3_parse_labelled("", "x", "stage", st, 4), 0);
}

/* phases[mode][op][round] for 2 modes and 3 rounds */
static struct prof_s3_phase ph[2 * PROF_S3_OPS * 3];

static struct prof_s3_phase *
at(unsigned mode, unsigned op, unsigned round)
{
	return &ph[(mode * PROF_S3_OPS + op) * 3 + round];
}

static void
fill(struct prof_s3_summary *s)
{
	memset(ph, 0, sizeof(ph));
	for (unsigned m = 0; m < 2; m++)
		for (unsigned op = 0; op < PROF_S3_OPS; op++)
			for (unsigned r = 0; r < 3; r++) {
				struct prof_s3_phase *p = at(m, op, r);

				for (int mt = 0; mt < PROF_S3_METRICS; mt++)
					p->v[mt] = 10.0 * (m + 1) + r + op;
				/* copy in round 1 only has a stage; zerocopy has none */
				if (m == 0 && r == 1) {
					p->n_stages = 1;
					snprintf(p->stages[0].name, sizeof(p->stages[0].name),
					         "dn:gather");
					p->stages[0].v = 1.0;
				}
				p->n_groups = 2;
				snprintf(p->groups[0].name, sizeof(p->groups[0].name),
				         "gw:s3-worker");
				p->groups[0].v = 0.5 + r;
				snprintf(p->groups[1].name, sizeof(p->groups[1].name),
				         "dn:iou-wrk-#");
				p->groups[1].v = 2.0 + m;
			}
	/* a failed measurement is left out of the median, not counted as 0 */
	at(1, PROF_S3_PUT, 2)->v[PROF_S3_PAGECACHE] = NAN;
	*s = (struct prof_s3_summary){ .n_modes = 2,
		                       .concurrent = 8,
		                       .objects = 16,
		                       .modes = { PROF_MODE_COPY, PROF_MODE_ZEROCOPY },
		                       .ops = { true, true },
		                       .obj_size = "16MiB",
		                       .ec = "4+2",
		                       .drives = "/dev/shm/x",
		                       .load1 = 3.5 };
	prof_s3_summarize(ph, 3, s);
}

static void
test_summarize(void **state)
{
	static struct prof_s3_summary s;
	const struct prof_s3_cell *copy_put, *zc_put, *zc_get;

	(void)state;
	fill(&s);
	copy_put = &s.cell[0][PROF_S3_PUT];
	zc_put = &s.cell[1][PROF_S3_PUT];
	zc_get = &s.cell[1][PROF_S3_GET];
	assert_int_equal(s.rounds, 3);
	assert_true(copy_put->v[PROF_S3_MIBS] == 11); /* 10, 11, 12 */
	assert_true(zc_put->v[PROF_S3_MIBS] == 21);   /* 20, 21, 22 */
	assert_true(zc_get->v[PROF_S3_MIBS] == 22);   /* 21, 22, 23 */
	assert_true(isnan(copy_put->ratio[PROF_S3_MIBS]));
	/* median of 20/10, 21/11, 22/12 */
	assert_true(fabs(zc_put->ratio[PROF_S3_MIBS] - 21.0 / 11) < 1e-12);
	/* two finite rounds: 20 and 21 */
	assert_true(zc_put->v[PROF_S3_PAGECACHE] == 20.5);
	/* the stage of one round: median of 0, 1, 0 */
	assert_int_equal(copy_put->n_stages, 1);
	assert_string_equal(copy_put->stages[0].name, "dn:gather");
	assert_true(copy_put->stages[0].v == 0);
	assert_int_equal(zc_put->n_stages, 0);
	/* groups: medians, largest first */
	assert_int_equal(zc_put->n_groups, 2);
	assert_string_equal(zc_put->groups[0].name, "dn:iou-wrk-#");
	assert_true(zc_put->groups[0].v == 3.0);
	assert_string_equal(zc_put->groups[1].name, "gw:s3-worker");
	assert_true(zc_put->groups[1].v == 1.5);
}

static char *
capture(const struct prof_s3_summary *s, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	if (json)
		prof_s3_report_json(out, s);
	else
		prof_s3_report_table(out, s);
	fclose(out);
	return buf;
}

static void
test_json(void **state)
{
	static struct prof_s3_summary s;
	char *j;

	(void)state;
	fill(&s);
	j = capture(&s, true);
	assert_non_null(strstr(j, "{\"s3\":true,\"rounds\":3,\"ec\":\"4+2\""));
	assert_non_null(strstr(j, "\"modes\":[\"copy\",\"zerocopy\"]"));
	assert_non_null(strstr(j, "\"grpc_tls\":true,"));
	assert_non_null(strstr(j, ",\"put\":{\"copy\":{\"mib_per_s\":11,"));
	assert_non_null(strstr(j, ",\"get\":{\"copy\":{\"mib_per_s\":12,"));
	assert_non_null(strstr(j, "\"ratio_zerocopy\":{\"mib_per_s\":1.9"));
	assert_non_null(strstr(j, "\"p99.9_ms\":"));
	assert_non_null(strstr(j, "\"cpu_s_per_gib_all\":"));
	assert_non_null(strstr(j, "\"cpu_ms_per_object\":"));
	assert_non_null(strstr(j, "\"copied_per_byte_by_stage\":{\"dn:gather\":0}"));
	assert_non_null(strstr(j, "\"threads_cpu_s_per_gib\":{\"dn:iou-wrk-#\":3,"));
	assert_null(strstr(j, "nan"));
	assert_int_equal(j[strlen(j) - 1], '\n');
	free(j);
}

static void
test_table(void **state)
{
	static struct prof_s3_summary s;
	char *t;

	(void)state;
	fill(&s);
	t = capture(&s, false);
	assert_non_null(strstr(t, "median of 3 alternating rounds; load average 3.5"));
	assert_non_null(strstr(t, "\nPUT "));
	assert_non_null(strstr(t, "\nGET "));
	assert_non_null(strstr(t, "p99.9ms"));
	assert_non_null(strstr(t, "\nratio zerocopy "));
	assert_non_null(strstr(t, "GET zerocopy: copies per payload byte by stage:"));
	assert_non_null(strstr(t, "dn:iou-wrk-# 3.00"));
	free(t);
	/* a phase not run is left out */
	s.ops[PROF_S3_GET] = false;
	t = capture(&s, false);
	assert_null(strstr(t, "\nGET "));
	free(t);
	t = capture(&s, true);
	assert_null(strstr(t, "\"get\":"));
	assert_non_null(strstr(t, "\"put\":"));
	free(t);
}

static void
test_pagecache(void **state)
{
	char dir[] = "/tmp/test_prof_s3.XXXXXX", sub[64], file[96];
	static char buf[1 << 20];
	int64_t n;
	int fd;

	(void)state;
	assert_non_null(mkdtemp(dir));
	assert_int_equal(prof_s3_pagecache_bytes(dir), 0);
	snprintf(sub, sizeof(sub), "%s/d0", dir);
	assert_int_equal(mkdir(sub, 0755), 0);
	snprintf(file, sizeof(file), "%s/cell", sub);
	fd = open(file, O_WRONLY | O_CREAT, 0644);
	assert_true(fd >= 0);
	memset(buf, 7, sizeof(buf));
	/* a buffered write leaves its pages in the page cache (1 MiB + a partial page) */
	assert_int_equal(write(fd, buf, sizeof(buf)), sizeof(buf));
	assert_int_equal(write(fd, buf, 100), 100);
	close(fd);
	n = prof_s3_pagecache_bytes(dir);
	if (n == 0) {
		/* a file system that drops clean pages at once would be odd; say so, not fail */
		fprintf(stderr, "no page-cache residency seen in /tmp; skipping the check\n");
	} else {
		assert_true(n == (1 << 20) + 100);
	}
	assert_true(prof_s3_pagecache_bytes("/nonexistent/zest") < 0);
	unlink(file);
	rmdir(sub);
	rmdir(dir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_labelled), cmocka_unit_test(test_summarize),
		cmocka_unit_test(test_json),           cmocka_unit_test(test_table),
		cmocka_unit_test(test_pagecache),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
