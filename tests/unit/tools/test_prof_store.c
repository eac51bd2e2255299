/* zest-prof's kernel store baseline: a small run in a temp folder gives sane figures and
 * leaves nothing behind; bad arguments and a missing folder are refused. */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "prof_store.h"

static unsigned
entries(const char *dir)
{
	struct dirent *e;
	unsigned n = 0;
	DIR *d = opendir(dir);

	assert_non_null(d);
	while ((e = readdir(d)) != NULL)
		n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
	closedir(d);
	return n;
}

static void
test_measure(void **state)
{
	char dir[] = "/tmp/test_prof_store.XXXXXX";
	struct prof_store_result r = { 0 };

	(void)state;
	assert_non_null(mkdtemp(dir));
	/* 3 files x 2 blocks: 7 MiB rounds down to 6 */
	assert_int_equal(prof_store_measure(dir, 3, 7u << 20, &r), 0);
	assert_true(isfinite(r.mib_per_s) && r.mib_per_s > 0);
	assert_true(isfinite(r.cpu_s_per_gib) && r.cpu_s_per_gib >= 0);
	assert_true(fabs(r.cpu_s_per_gib - r.user_s_per_gib - r.sys_s_per_gib) < 1e-9);
	assert_int_equal(entries(dir), 0);
	assert_int_equal(rmdir(dir), 0);
}

static void
test_bad_arguments(void **state)
{
	struct prof_store_result r;

	(void)state;
	assert_int_equal(prof_store_measure(NULL, 6, 64u << 20, &r), -EINVAL);
	assert_int_equal(prof_store_measure("/tmp", 0, 64u << 20, &r), -EINVAL);
	assert_int_equal(prof_store_measure("/tmp", 65, 1ull << 30, &r), -EINVAL);
	assert_int_equal(prof_store_measure("/tmp", 6, 5u << 20, &r), -EINVAL);
	assert_int_equal(prof_store_measure("/nonexistent/zest", 6, 6u << 20, &r), -ENOENT);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_measure),
		cmocka_unit_test(test_bad_arguments),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
