/* zest-prof's --modes list: what parses, in order, and the precise error for what does not. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "prof_modes.h"

static void
test_good_lists(void **state)
{
	enum prof_mode m[PROF_MAX_MODES];
	char err[128] = "";

	(void)state;
	assert_int_equal(prof_modes_parse("copy,zerocopy", m, err, sizeof(err)), 2);
	assert_int_equal(m[0], PROF_MODE_COPY);
	assert_int_equal(m[1], PROF_MODE_ZEROCOPY);
	assert_int_equal(prof_modes_parse("discard,zerocopy,copy", m, err, sizeof(err)), 3);
	assert_int_equal(m[0], PROF_MODE_DISCARD);
	assert_int_equal(m[1], PROF_MODE_ZEROCOPY);
	assert_int_equal(m[2], PROF_MODE_COPY);
	assert_int_equal(prof_modes_parse("discard", m, err, sizeof(err)), 1);
	assert_int_equal(m[0], PROF_MODE_DISCARD);
	assert_string_equal(err, "");
}

static void
test_mode_meaning(void **state)
{
	(void)state;
	assert_string_equal(prof_mode_name(PROF_MODE_DISCARD), "discard");
	assert_string_equal(prof_mode_marshaller(PROF_MODE_COPY), "copy");
	assert_string_equal(prof_mode_marshaller(PROF_MODE_ZEROCOPY), "zerocopy");
	assert_string_equal(prof_mode_marshaller(PROF_MODE_DISCARD), "zerocopy");
	assert_true(prof_mode_discards(PROF_MODE_DISCARD));
	assert_false(prof_mode_discards(PROF_MODE_ZEROCOPY));
	assert_false(prof_mode_discards(PROF_MODE_COPY));
}

static void
expect_error(const char *list, const char *message)
{
	enum prof_mode m[PROF_MAX_MODES];
	char err[128] = "";

	assert_int_equal(prof_modes_parse(list, m, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, message);
}

static void
test_bad_lists(void **state)
{
	(void)state;
	expect_error("", "--modes: empty list (want e.g. copy,zerocopy)");
	expect_error(NULL, "--modes: empty list (want e.g. copy,zerocopy)");
	expect_error("copy,,zerocopy", "--modes: empty mode name in 'copy,,zerocopy'");
	expect_error("copy,", "--modes: empty mode name in 'copy,'");
	expect_error(",copy", "--modes: empty mode name in ',copy'");
	expect_error("copy,zero", "--modes: unknown mode 'zero' (known: copy, zerocopy, discard, "
	                          "direct, copy-direct)");
	expect_error("copyx", "--modes: unknown mode 'copyx' (known: copy, zerocopy, discard, "
	                      "direct, copy-direct)");
	expect_error("Copy", "--modes: unknown mode 'Copy' (known: copy, zerocopy, discard, "
	                     "direct, copy-direct)");
	expect_error("copy, zerocopy", "--modes: unknown mode ' zerocopy' (known: copy, zerocopy, "
	                               "discard, direct, copy-direct)");
	expect_error("zerocopy,discard,zerocopy", "--modes: 'zerocopy' listed twice");
}

static void
test_data_io(void **state)
{
	enum prof_mode m[PROF_MAX_MODES];
	char err[128] = "";

	(void)state;
	assert_string_equal(prof_mode_data_io(PROF_MODE_ZEROCOPY), "buffered");
	assert_string_equal(prof_mode_data_io(PROF_MODE_DIRECT), "direct");
	assert_string_equal(prof_mode_data_io(PROF_MODE_COPY_DIRECT), "direct");
	assert_string_equal(prof_mode_marshaller(PROF_MODE_DIRECT), "zerocopy");
	assert_string_equal(prof_mode_marshaller(PROF_MODE_COPY_DIRECT), "copy");
	assert_int_equal(prof_modes_parse("direct,copy-direct", m, err, sizeof(err)), 2);
	assert_int_equal(m[1], PROF_MODE_COPY_DIRECT);
	assert_int_equal(prof_modes_parse("copy,zerocopy", m, err, sizeof(err)), 2);
	assert_int_equal(prof_modes_cross_data_io(m, 2, "buffered,direct", err, sizeof(err)), 4);
	assert_int_equal(m[0], PROF_MODE_COPY);
	assert_int_equal(m[1], PROF_MODE_COPY_DIRECT);
	assert_int_equal(m[2], PROF_MODE_ZEROCOPY);
	assert_int_equal(m[3], PROF_MODE_DIRECT);
	assert_int_equal(prof_modes_parse("zerocopy", m, err, sizeof(err)), 1);
	assert_int_equal(prof_modes_cross_data_io(m, 1, "direct", err, sizeof(err)), 1);
	assert_int_equal(m[0], PROF_MODE_DIRECT);
	assert_int_equal(prof_modes_cross_data_io(m, 1, "direct,direct", err, sizeof(err)),
	                 -EINVAL);
	assert_string_equal(err, "--data-io: 'direct' listed twice");
	assert_int_equal(prof_modes_cross_data_io(m, 1, "odirect", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--data-io: unknown 'odirect' (known: buffered, direct)");
	assert_int_equal(prof_modes_cross_data_io(m, 1, "", err, sizeof(err)), -EINVAL);
	assert_int_equal(prof_modes_parse("discard", m, err, sizeof(err)), 1);
	assert_int_equal(prof_modes_cross_data_io(m, 1, "buffered,direct", err, sizeof(err)),
	                 -EINVAL);
	assert_string_equal(err, "--data-io: discard stores nothing: no direct");
	assert_int_equal(prof_modes_parse("zerocopy,direct", m, err, sizeof(err)), 2);
	assert_int_equal(prof_modes_cross_data_io(m, 2, "direct", err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--data-io: mode 'direct' would run twice");
}

/* A short error buffer is cut, never overrun. */
static void
test_short_error_buffer(void **state)
{
	enum prof_mode m[PROF_MAX_MODES];
	char err[9] = "xxxxxxxx";

	(void)state;
	assert_int_equal(prof_modes_parse("nope", m, err, sizeof(err)), -EINVAL);
	assert_string_equal(err, "--modes:");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good_lists),         cmocka_unit_test(test_mode_meaning),
		cmocka_unit_test(test_bad_lists),          cmocka_unit_test(test_data_io),
		cmocka_unit_test(test_short_error_buffer),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
