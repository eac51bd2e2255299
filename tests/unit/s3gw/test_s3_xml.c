/* XML bodies: DeleteObjects, CompleteMultipartUpload, CreateBucketConfiguration (good,
 * malformed, over the limits, hostile) and the writers' escaping. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3_sum_internal.h"
#include "s3_xml_internal.h"

static int
parse_delete(const char *x, struct s3_delete_req *d)
{
	return s3_xml_parse_delete(x, strlen(x), d);
}

static void
test_delete(void **state)
{
	struct s3_delete_req d;
	const char *good =
	        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
	        "<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>"
	        "<Object><Key>a&amp;b</Key></Object><Object><Key>c/d (1).txt</Key>"
	        "<VersionId>x</VersionId></Object></Delete>";

	(void)state;
	assert_int_equal(parse_delete(good, &d), 0);
	assert_int_equal(d.n, 2);
	assert_true(d.quiet);
	assert_string_equal(d.keys[0], "a&b");
	assert_string_equal(d.keys[1], "c/d (1).txt");
	s3_delete_req_fini(&d);

	assert_int_equal(parse_delete("<Delete><Object><Key>k</Key></Object>", &d), -EINVAL);
	assert_int_equal(parse_delete("<Delete></Delete>", &d), -EINVAL);
	assert_int_equal(parse_delete("<Other><Object><Key>k</Key></Object></Other>", &d), -EINVAL);
	assert_int_equal(parse_delete("<Delete><Object><Key></Key></Object></Delete>", &d),
	                 -EINVAL);
	assert_int_equal(parse_delete("<Delete><Object><Key><b>x</b></Key></Object></Delete>", &d),
	                 -EINVAL);
	assert_int_equal(parse_delete("", &d), -EINVAL);
	/* an entity bomb is not expanded */
	assert_true(parse_delete("<?xml version=\"1.0\"?><!DOCTYPE d [<!ENTITY a \"aaaaaaaa\">"
	                         "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;\">]>"
	                         "<Delete><Object><Key>&b;</Key></Object></Delete>",
	                         &d) <= 0);
	if (d.n)
		s3_delete_req_fini(&d);
}

static void
test_delete_limits(void **state)
{
	struct s3_delete_req d;
	struct s3_buf b;
	char key[1100];

	(void)state;
	s3_buf_init(&b, 4 << 20);
	s3_buf_adds(&b, "<Delete>");
	for (int i = 0; i < 1000; i++)
		s3_buf_printf(&b, "<Object><Key>k%d</Key></Object>", i);
	s3_buf_adds(&b, "</Delete>");
	assert_int_equal(s3_xml_parse_delete(b.p, b.len, &d), 0);
	assert_int_equal(d.n, 1000);
	s3_delete_req_fini(&d);
	b.len -= strlen("</Delete>");
	s3_buf_adds(&b, "<Object><Key>one-more</Key></Object></Delete>");
	assert_int_equal(s3_xml_parse_delete(b.p, b.len, &d), -EMSGSIZE);
	s3_buf_fini(&b);

	memset(key, 'k', sizeof(key));
	key[1025] = '\0';
	s3_buf_init(&b, 1 << 20);
	s3_buf_printf(&b, "<Delete><Object><Key>%s</Key></Object></Delete>", key);
	assert_int_equal(s3_xml_parse_delete(b.p, b.len, &d), -EMSGSIZE);
	s3_buf_fini(&b);
}

static void
test_complete(void **state)
{
	struct s3_complete_req c;
	const char *good =
	        "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	        "<Part><ETag>\"0123456789abcdef0123456789abcdef\"</ETag><PartNumber>1</PartNumber>"
	        "<ChecksumCRC32C>AAAAAA==</ChecksumCRC32C></Part>"
	        "<Part><PartNumber>2</PartNumber><ETag>fedcba9876543210fedcba9876543210</ETag></"
	        "Part>"
	        "</CompleteMultipartUpload>";
	static const char *bad[] = {
		"<CompleteMultipartUpload></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber></Part></"
		"CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><ETag>x</ETag></Part></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>0</PartNumber><ETag>x</ETag></Part></"
		"CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>10001</PartNumber><ETag>x</ETag></"
		"Part></CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>1x</PartNumber><ETag>x</ETag></Part></"
		"CompleteMultipartUpload>",
		"<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>x</ETag></Part>",
		"<Complete/>",
	};

	(void)state;
	assert_int_equal(s3_xml_parse_complete(good, strlen(good), &c), 0);
	assert_int_equal(c.n, 2);
	assert_int_equal(c.parts[0].number, 1);
	assert_string_equal(c.parts[0].etag, "0123456789abcdef0123456789abcdef");
	assert_int_equal(c.parts[0].ck, S3_CK_CRC32C);
	assert_string_equal(c.parts[0].checksum, "AAAAAA==");
	assert_string_equal(c.parts[1].etag, "fedcba9876543210fedcba9876543210");
	s3_complete_req_fini(&c);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(s3_xml_parse_complete(bad[i], strlen(bad[i]), &c), -EINVAL);
}

static void
test_create_bucket(void **state)
{
	char loc[64];
	const char *x =
	        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
	        "<LocationConstraint>eu-west-1</LocationConstraint></CreateBucketConfiguration>";

	(void)state;
	assert_int_equal(s3_xml_parse_create_bucket("", 0, loc, sizeof(loc)), 0);
	assert_string_equal(loc, "");
	assert_int_equal(s3_xml_parse_create_bucket(x, strlen(x), loc, sizeof(loc)), 0);
	assert_string_equal(loc, "eu-west-1");
	assert_int_equal(s3_xml_parse_create_bucket("<Nope/>", 7, loc, sizeof(loc)), -EINVAL);
	assert_int_equal(s3_xml_parse_create_bucket("<<<", 3, loc, sizeof(loc)), -EINVAL);
}

static void
test_writers(void **state)
{
	struct s3_buf b;
	char t[32];

	(void)state;
	s3_buf_init(&b, 4096);
	s3_xml_error(&b, "NoSuchKey", "The <key> & co", "/b/k", "REQ1");
	assert_non_null(strstr(b.p,
	                       "<Code>NoSuchKey</Code><Message>The &lt;key&gt; &amp; co</Message>"
	                       "<Resource>/b/k</Resource><RequestId>REQ1</RequestId>"));
	s3_buf_fini(&b);
	s3_buf_init(&b, 4096);
	s3_xml_key(&b, "Key", "a b(1)/é&", true);
	assert_string_equal(b.p, "<Key>a%20b%281%29/%C3%A9%26</Key>");
	s3_buf_fini(&b);
	s3_xml_time(1369353600123456789ull, t);
	assert_string_equal(t, "2013-05-24T00:00:00.123Z");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_delete),   cmocka_unit_test(test_delete_limits),
		cmocka_unit_test(test_complete), cmocka_unit_test(test_create_bucket),
		cmocka_unit_test(test_writers),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
