/* zest-prof's report: the default modes keep the JSON keys and text lines zest-prof has
 * always printed; other modes get one object per mode, "ratio_MODE", the store and floor. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "prof_report.h"

static void
fill(struct prof_summary *s, const enum prof_mode *modes, unsigned n)
{
	*s = (struct prof_summary){ .n_modes = n,
		                    .rounds = 3,
		                    .concurrent = 4,
		                    .k = 4,
		                    .m = 2,
		                    .obj_size = "4MiB",
		                    .ec = "4+2",
		                    .drives = "/dev/shm/x",
		                    .floor = NAN };
	for (unsigned i = 0; i < n; i++) {
		struct prof_mode_summary *ms = &s->mode[i];

		ms->mode = modes[i];
		for (int mt = 0; mt < PROF_M_COUNT; mt++) {
			ms->v[mt] = mt == PROF_M_IPB ? NAN : 1.0 + i + mt;
			ms->ratio[mt] = i ? ms->v[mt] / s->mode[0].v[mt] : NAN;
		}
		ms->n_groups = 2;
		snprintf(ms->groups[0].name, sizeof(ms->groups[0].name), "iou-wrk-#");
		ms->groups[0].cpu_s = 0.9 + i;
		snprintf(ms->groups[1].name, sizeof(ms->groups[1].name), "dn-heal");
		ms->groups[1].cpu_s = 0.0001;
	}
}

static char *
capture(const struct prof_summary *s, bool json)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	if (json)
		prof_report_json(out, s);
	else
		prof_report_table(out, s);
	fclose(out);
	return buf;
}

static void
test_default_modes(void **state)
{
	static const enum prof_mode modes[] = { PROF_MODE_COPY, PROF_MODE_ZEROCOPY };
	struct prof_summary s;
	char *out;

	(void)state;
	fill(&s, modes, 2);
	assert_true(prof_report_is_default(&s));
	out = capture(&s, true);
	assert_true(!strncmp(out, "{\"copy\":{\"mib_per_s\":1,\"cpu_s_per_gib\":2,", 40));
	assert_non_null(strstr(out, "},\"zerocopy\":{\"mib_per_s\":2,"));
	assert_non_null(strstr(out, "},\"ratio\":{\"mib_per_s\":2,"));
	assert_non_null(strstr(out, ",\"pairs\":3,\"via\":\"grpc\",\"obj_size\":\"4MiB\","
	                            "\"concurrent\":4,\"ec\":\"4+2\""));
	assert_non_null(strstr(out, "\"instructions_per_byte\":null"));
	assert_non_null(strstr(out, "\"threads_cpu_s_per_gib\":{\"iou-wrk-#\":0.9,"));
	assert_null(strstr(out, "\"ratio_zerocopy\""));
	assert_null(strstr(out, "\"store\""));
	free(out);
	out = capture(&s, false);
	assert_non_null(strstr(out,
	                       "# zest-prof: 3 pairs, gRPC load, 4MiB objects, 4 streams, "
	                       "RS 4+2, drives in /dev/shm/x\n"
	                       "# medians over the pairs; ratio = median of per-pair "
	                       "zerocopy / copy\n"
	                       "                                 copy     zerocopy      "
	                       "ratio\n"
	                       "throughput MiB/s                    1            2          2\n"));
	assert_null(strstr(out, "instructions/byte"));
	assert_non_null(strstr(out, "iou-wrk-#                       0.900        1.900\n"
	                            "# 1 more thread groups under"));
	free(out);
}

static void
test_discard_with_store(void **state)
{
	static const enum prof_mode modes[] = { PROF_MODE_DISCARD, PROF_MODE_ZEROCOPY,
		                                PROF_MODE_COPY };
	struct prof_summary s;
	char *out;

	(void)state;
	fill(&s, modes, 3);
	assert_false(prof_report_is_default(&s));
	s.has_store = true;
	s.store = (struct prof_store_result){
		.mib_per_s = 2000, .cpu_s_per_gib = 0.5, .user_s_per_gib = 0, .sys_s_per_gib = 0.5
	};
	s.floor = s.mode[0].v[PROF_M_CPU] + 1.5 * 0.5;
	out = capture(&s, true);
	assert_true(!strncmp(out, "{\"discard\":{\"mib_per_s\":1,", 26));
	assert_non_null(strstr(out, ",\"zerocopy\":{"));
	assert_non_null(strstr(out, ",\"copy\":{"));
	assert_non_null(strstr(out, ",\"ratio_zerocopy\":{\"mib_per_s\":2,"));
	assert_non_null(strstr(out, ",\"ratio_copy\":{\"mib_per_s\":3,"));
	assert_null(strstr(out, "\"ratio\":"));
	assert_non_null(strstr(out, "\"modes\":[\"discard\",\"zerocopy\",\"copy\"],"
	                            "\"ratio_base\":\"discard\""));
	assert_non_null(strstr(out, "\"store\":{\"files\":6,\"mib_per_s\":2000,"
	                            "\"cpu_s_per_gib\":0.5,"));
	assert_non_null(strstr(out, "\"floor_cpu_s_per_gib\":2.75"));
	free(out);
	out = capture(&s, false);
	assert_non_null(strstr(out, "# zest-prof: 3 rounds of discard/zerocopy/copy, gRPC load"));
	assert_non_null(strstr(out, "ratios are against the first mode, discard"));
	assert_non_null(strstr(out, "zerocopy/discard"));
	assert_non_null(strstr(out, "store CPU-s/GiB"));
	assert_non_null(strstr(out, "discard + 6/4 x store = 2.75 CPU-s/GiB; zerocopy measured "
	                            "3; copy measured 4\n"));
	free(out);
}

static void
test_svg(void **state)
{
	static const enum prof_mode modes[] = { PROF_MODE_DISCARD, PROF_MODE_ZEROCOPY };
	char path[] = "/tmp/test_prof_report.XXXXXX";
	struct prof_summary s;
	char text[8192];
	size_t n;
	FILE *f;
	int fd;

	(void)state;
	fill(&s, modes, 2);
	fd = mkstemp(path);
	assert_true(fd >= 0);
	close(fd);
	assert_int_equal(prof_report_svg(path, &s), 0);
	f = fopen(path, "r");
	assert_non_null(f);
	n = fread(text, 1, sizeof(text) - 1, f);
	text[n] = 0;
	fclose(f);
	unlink(path);
	assert_non_null(strstr(text, "zest-prof: discard vs zerocopy (bars scaled per metric)"));
	assert_non_null(strstr(text, "<text x='536' y='19'>discard</text>"));
	assert_non_null(strstr(text, "</svg>\n"));
	assert_true(prof_report_svg("/nonexistent/x.svg", &s) < 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_default_modes),
		cmocka_unit_test(test_discard_with_store),
		cmocka_unit_test(test_svg),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
