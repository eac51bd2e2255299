/* The name rules the gateway and the datanode share: buckets, keys, UTF-8. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "zc_names.h"

static void
test_utf8(void **state)
{
	(void)state;
	assert_true(zc_utf8_valid("", 0));
	assert_true(zc_utf8_valid("plain/ascii", 11));
	assert_true(zc_utf8_valid("caf\xc3\xa9", 5));      /* U+00E9 */
	assert_true(zc_utf8_valid("\xe2\x82\xac", 3));     /* U+20AC */
	assert_true(zc_utf8_valid("\xf0\x9f\x98\x80", 4)); /* U+1F600 */
	assert_true(zc_utf8_valid("\xf4\x8f\xbf\xbf", 4)); /* U+10FFFF, the last */
	assert_true(zc_utf8_valid("a\0b", 3));             /* NUL is UTF-8 */
	assert_false(zc_utf8_valid("\xff", 1));
	assert_false(zc_utf8_valid("\x80", 1)); /* lone continuation */
	assert_false(zc_utf8_valid("\xc3", 1)); /* cut short */
	assert_false(zc_utf8_valid("\xe2\x82", 2));
	assert_false(zc_utf8_valid("\xc3\x28", 2)); /* bad continuation */
	assert_false(zc_utf8_valid("\xc0\xaf", 2)); /* overlong '/' */
	assert_false(zc_utf8_valid("\xe0\x80\xaf", 3));
	assert_false(zc_utf8_valid("\xf0\x80\x80\xaf", 4));
	assert_false(zc_utf8_valid("\xed\xa0\x80", 3));         /* surrogate U+D800 */
	assert_false(zc_utf8_valid("\xf4\x90\x80\x80", 4));     /* past U+10FFFF */
	assert_false(zc_utf8_valid("\xf8\x88\x80\x80\x80", 5)); /* 5-byte form */
	/* the length counts, not a NUL */
	assert_true(zc_utf8_valid("\xc3\xa9\xff", 2));
}

static void
test_bucket_names(void **state)
{
	static const char *const good[] = {
		"abc",
		"my-bucket",
		"my.bucket",
		"1bucket",
		"bucket1",
		"a-b.c-d",
		"192.168.1",
		"1.2.3.4.5",
		"a.1.2.3",
		"xn-a",
		"b-s3alias1",
		"abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij123", /* 63 */
	};
	static const struct {
		const char *name, *why;
	} bad[] = {
		{ "", "is shorter than 3 bytes" },
		{ "ab", "is shorter than 3 bytes" },
		{ "abcdefghijabcdefghijabcdefghijabcdefghijabcdefghijabcdefghij1234",
		  "is longer than 63 bytes" },
		{ "Abc", "has a byte other than a-z, 0-9, '.' and '-'" },
		{ "ab_c", "has a byte other than a-z, 0-9, '.' and '-'" },
		{ "ab c", "has a byte other than a-z, 0-9, '.' and '-'" },
		{ "b\xc3\xa9z", "has a byte other than a-z, 0-9, '.' and '-'" },
		{ "b\xff\xfe", "has a byte other than a-z, 0-9, '.' and '-'" },
		{ "a..b", "has '..', '.-' or '-.'" },
		{ "a.-b", "has '..', '.-' or '-.'" },
		{ "a-.b", "has '..', '.-' or '-.'" },
		{ "-abc", "does not start and end with a letter or digit" },
		{ "abc-", "does not start and end with a letter or digit" },
		{ ".abc", "does not start and end with a letter or digit" },
		{ "abc.", "does not start and end with a letter or digit" },
		{ "192.168.1.1", "is formatted as an IP address" },
		{ "xn--abc", "starts with 'xn--'" },
		{ "abc-s3alias", "ends with '-s3alias'" },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_null(zc_bucket_name_fault(good[i], false));
		assert_null(zc_bucket_name_fault(good[i], true));
		assert_true(zc_bucket_name_valid(good[i]));
		assert_false(zc_bucket_name_reserved(good[i]));
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *why = zc_bucket_name_fault(bad[i].name, false);

		assert_non_null(why);
		assert_string_equal(why, bad[i].why);
		assert_non_null(zc_bucket_name_fault(bad[i].name, true));
		assert_false(zc_bucket_name_valid(bad[i].name));
	}
}

/* The gateway's own bucket: no client may name it, the datanode must take it. */
static void
test_reserved_bucket(void **state)
{
	(void)state;
	assert_true(zc_bucket_name_reserved(ZC_RESERVED_BUCKET));
	assert_false(zc_bucket_name_valid(ZC_RESERVED_BUCKET));
	assert_non_null(zc_bucket_name_fault(ZC_RESERVED_BUCKET, false));
	assert_null(zc_bucket_name_fault(ZC_RESERVED_BUCKET, true));
	/* exactly that name: nothing near it */
	assert_false(zc_bucket_name_reserved(".zest-mpu2"));
	assert_false(zc_bucket_name_reserved(".zest-mp"));
	assert_false(zc_bucket_name_reserved("zest-mpu"));
	assert_non_null(zc_bucket_name_fault(".zest-mpu2", true));
	assert_non_null(zc_bucket_name_fault(".other", true));
}

static void
test_keys(void **state)
{
	char k[ZC_KEY_MAX + 2];

	(void)state;
	assert_int_equal(zc_key_check("k", 1), ZC_KEY_OK);
	assert_int_equal(zc_key_check("a/b/c.txt", 9), ZC_KEY_OK);
	assert_int_equal(zc_key_check("a/.b/..c/...", 12), ZC_KEY_OK);
	assert_int_equal(zc_key_check("/lead//double/", 14), ZC_KEY_OK);
	assert_int_equal(zc_key_check("caf\xc3\xa9", 5), ZC_KEY_OK);
	assert_int_equal(zc_key_check("", 0), ZC_KEY_EMPTY);
	assert_int_equal(zc_key_check("a\0b", 3), ZC_KEY_NUL);
	assert_int_equal(zc_key_check("\0", 1), ZC_KEY_NUL);
	assert_int_equal(zc_key_check("a\xff", 2), ZC_KEY_BAD_UTF8);
	assert_int_equal(zc_key_check("a\xc3", 2), ZC_KEY_BAD_UTF8);
	assert_int_equal(zc_key_check(".", 1), ZC_KEY_DOT_SEGMENT);
	assert_int_equal(zc_key_check("..", 2), ZC_KEY_DOT_SEGMENT);
	assert_int_equal(zc_key_check("a/./b", 5), ZC_KEY_DOT_SEGMENT);
	assert_int_equal(zc_key_check("a/../b", 6), ZC_KEY_DOT_SEGMENT);
	assert_int_equal(zc_key_check("a/..", 4), ZC_KEY_DOT_SEGMENT);
	assert_int_equal(zc_key_check("./a", 3), ZC_KEY_DOT_SEGMENT);
	memset(k, 'k', sizeof(k));
	assert_int_equal(zc_key_check(k, ZC_KEY_MAX), ZC_KEY_OK);
	assert_int_equal(zc_key_check(k, ZC_KEY_MAX + 1), ZC_KEY_TOO_LONG);
	assert_true(zc_key_valid(k, ZC_KEY_MAX));
	assert_false(zc_key_valid(k, ZC_KEY_MAX + 1));
	/* the gateway's internal keys pass the same rule */
	assert_true(zc_key_valid("u/my-bucket/0123abcd", 20));
	assert_true(zc_key_valid("p/0123abcd/00001", 16));
	assert_string_equal(zc_key_fault_text(ZC_KEY_NUL), "contains NUL");
	assert_string_equal(zc_key_fault_text(ZC_KEY_TOO_LONG), "is longer than 1024 bytes");
	assert_string_equal(zc_key_fault_text(ZC_KEY_OK), "");
}

static void
test_list_args(void **state)
{
	char k[ZC_KEY_MAX + 1];

	(void)state;
	memset(k, 'p', sizeof(k));
	assert_null(zc_list_arg_fault("", 0));
	assert_null(zc_list_arg_fault("/", 1));
	assert_null(zc_list_arg_fault("photos/2026/", 12));
	assert_null(zc_list_arg_fault(k, ZC_KEY_MAX));
	assert_string_equal(zc_list_arg_fault(k, ZC_KEY_MAX + 1), "is longer than 1024 bytes");
	assert_string_equal(zc_list_arg_fault("a\xff", 2), "is not valid UTF-8");
	assert_string_equal(zc_list_arg_fault("a\0", 2), "contains NUL");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_utf8),
		cmocka_unit_test(test_bucket_names),
		cmocka_unit_test(test_reserved_bucket),
		cmocka_unit_test(test_keys),
		cmocka_unit_test(test_list_args),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
