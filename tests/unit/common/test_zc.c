/* common/: size and duration parsing, median, JSON strings, zc_ref counting. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "zc.h"
#include "zc_net.h"
#include "zc_ref.h"

static void
test_sizes(void **state)
{
	static const struct {
		const char *s;
		uint64_t v;
	} good[] = { { "0", 0 },
		     { "1", 1 },
		     { "4096", 4096 },
		     { "64KiB", 65536 },
		     { "64k", 65536 },
		     { "1MiB", 1048576 },
		     { "1.5MiB", 1572864 },
		     { "2GiB", 2147483648ULL },
		     { "1MB", 1000000 },
		     { "3mb", 3000000 },
		     { "1TiB", 1ULL << 40 },
		     { "7B", 7 } };
	static const char *const bad[] = { "",       "x",     "-1",  "1XB", "1.5",
		                           "0.3KB!", "1e400", "KiB", "nan" };
	uint64_t v;

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_int_equal(zc_parse_size(good[i].s, &v), 0);
		assert_int_equal(v, good[i].v);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(zc_parse_size(bad[i], &v), -EINVAL);
	assert_int_equal(zc_parse_size(NULL, &v), -EINVAL);
}

static void
test_durations(void **state)
{
	uint64_t v;

	(void)state;
	assert_int_equal(zc_parse_duration_ns("10", &v), 0);
	assert_int_equal(v, 10000000000ULL);
	assert_int_equal(zc_parse_duration_ns("250ms", &v), 0);
	assert_int_equal(v, 250000000ULL);
	assert_int_equal(zc_parse_duration_ns("2m", &v), 0);
	assert_int_equal(v, 120000000000ULL);
	assert_int_equal(zc_parse_duration_ns("1h", &v), 0);
	assert_int_equal(v, 3600000000000ULL);
	assert_int_equal(zc_parse_duration_ns("5x", &v), -EINVAL);
	assert_int_equal(zc_parse_duration_ns("", &v), -EINVAL);
}

static void
test_median(void **state)
{
	double odd[] = { 5, 1, 3 }, even[] = { 4, 1, 3, 2 };

	(void)state;
	assert_true(zc_median(odd, 3) == 3);
	assert_true(zc_median(even, 4) == 2.5);
}

struct holder {
	struct zc_ref ref;
	int *released;
};

static void
holder_release(struct zc_ref *ref)
{
	struct holder *h = (struct holder *)ref;

	(*h->released)++;
	free(h);
}

static void
test_ref_counting(void **state)
{
	struct holder *h = malloc(sizeof(*h));
	long base = zc_ref_live();
	int released = 0;

	(void)state;
	h->released = &released;
	zc_ref_init(&h->ref, holder_release);
	zc_ref_get(&h->ref);
	zc_ref_get(&h->ref);
	assert_int_equal(zc_ref_live(), base + 3);
	zc_ref_put(&h->ref);
	zc_ref_put(&h->ref);
	assert_int_equal(released, 0);
	zc_ref_put(&h->ref);
	assert_int_equal(released, 1);
	assert_int_equal(zc_ref_live(), base);
}

static void
test_hostport(void **state)
{
	char host[64];
	unsigned port = 7;
	int fd;

	(void)state;
	assert_int_equal(zc_hostport_split("127.0.0.1:9000", host, sizeof(host), &port), 0);
	assert_string_equal(host, "127.0.0.1");
	assert_int_equal(port, 9000);
	assert_int_equal(zc_hostport_split("[::1]:0", host, sizeof(host), &port), 0);
	assert_string_equal(host, "::1");
	assert_int_equal(port, 0);
	assert_int_equal(zc_hostport_split(":80", host, sizeof(host), &port), 0);
	assert_string_equal(host, "");
	assert_int_equal(zc_hostport_split("localhost", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(zc_hostport_split("h:65536", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(zc_hostport_split("h:12x", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(zc_hostport_split("h:", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(zc_hostport_split("[::1:80", host, sizeof(host), &port), -EINVAL);
	assert_int_equal(zc_hostport_split("averyveryverylonghostname:1", host, 8, &port), -EINVAL);
	fd = zc_listen("127.0.0.1:0", 4, true, &port);
	assert_true(fd >= 0);
	assert_true(port > 0);
	close(fd);
	assert_int_equal(zc_listen("no-colon", 4, false, &port), -EINVAL);
}

static void
test_json_string(void **state)
{
	char buf[128];
	FILE *f = fmemopen(buf, sizeof(buf), "w");

	(void)state;
	assert_non_null(f);
	zc_json_string(f, "a\"b\\c\n\x01"
	                  "d");
	fclose(f);
	assert_string_equal(buf, "\"a\\\"b\\\\c\\u000a\\u0001d\"");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_sizes),    cmocka_unit_test(test_durations),
		cmocka_unit_test(test_median),   cmocka_unit_test(test_json_string),
		cmocka_unit_test(test_hostport), cmocka_unit_test(test_ref_counting),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
