/* SigV2: AWS's published examples (virtual-host GET and PUT, presigned GET), the
 * sub-resources and x-amz-* headers of the string to sign, and the errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "s3_sig_internal.h"

#define AK    "AKIAIOSFODNN7EXAMPLE"
#define SK    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T2007 1175023002 /* Tue, 27 Mar 2007 19:16:42 GMT */

static const struct s3_creds creds = { AK, SK, "us-east-1", "s3.amazonaws.com" };

static enum s3_err
verify(const char *raw, time_t now, struct s3_auth *auth)
{
	struct s3_http_req req;

	assert_int_equal(s3_http_parse(&req, raw, strlen(raw), 65536), 0);
	return s3_sigv4_verify(&req, &creds, now, auth);
}

static void
test_aws_examples(void **state)
{
	struct s3_auth auth;
	const char *get = "GET /photos/puppy.jpg HTTP/1.1\r\n"
	                  "Host: johnsmith.s3.amazonaws.com\r\n"
	                  "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
	                  "Authorization: AWS " AK ":bWq2s1WEIj+Ydj0vQ697zp+IXMU=\r\n\r\n";
	const char *put = "PUT /photos/puppy.jpg HTTP/1.1\r\n"
	                  "Content-Type: image/jpeg\r\n"
	                  "Content-Length: 94328\r\n"
	                  "Host: johnsmith.s3.amazonaws.com\r\n"
	                  "Date: Tue, 27 Mar 2007 21:15:45 +0000\r\n"
	                  "Authorization: AWS " AK ":MyyxeRY7whkBe+bq8fHCL/2kKUg=\r\n\r\n";
	const char *pre =
	        "GET /photos/puppy.jpg?AWSAccessKeyId=" AK
	        "&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D&Expires=1175139620 HTTP/1.1\r\n"
	        "Host: johnsmith.s3.amazonaws.com\r\n\r\n";

	(void)state;
	assert_int_equal(verify(get, T2007 + 20 * 60, &auth), S3_OK);
	assert_true(auth.v2);
	assert_int_equal(auth.payload, S3_PAYLOAD_UNSIGNED);
	assert_int_equal(verify(get, T2007 + 40 * 60, &auth), S3E_REQUEST_TIME_TOO_SKEWED);
	assert_int_equal(verify(put, T2007 + 2 * 3600, &auth), S3_OK);
	assert_int_equal(verify(pre, T2007, &auth), S3_OK);
	assert_true(auth.presigned);
	assert_int_equal(verify(pre, 1175139621, &auth), S3E_ACCESS_DENIED);
	assert_string_equal(auth.msg, "Request has expired");
}

/* Path style, Content-MD5, repeated x-amz-meta-*, sub-resources (value decoded) and a
 * query parameter that is not one. Signature computed independently (Python hmac). */
static void
test_string_to_sign(void **state)
{
	struct s3_auth auth;
	struct s3_http_req req;
	struct s3_buf b;
	const char *raw = "PUT /b/k%20x?uploadId=a%2Fb&partNumber=2&foo=bar HTTP/1.1\r\n"
	                  "Host: 127.0.0.1:9000\r\n"
	                  "Date: Tue, 27 Mar 2007 21:06:08 +0000\r\n"
	                  "x-amz-acl: public-read\r\n"
	                  "content-type: application/x-download\r\n"
	                  "Content-MD5: 4gJE4saaMU4BqNR0kLY+lw==\r\n"
	                  "X-Amz-Meta-ReviewedBy: joe@johnsmith.net\r\n"
	                  "X-Amz-Meta-ReviewedBy:  jane@johnsmith.net \r\n"
	                  "Authorization: AWS " AK ":puxPATkipibEnkxWUCfOHfRkJAg=\r\n"
	                  "Content-Length: 0\r\n\r\n";

	(void)state;
	assert_int_equal(s3_http_parse(&req, raw, strlen(raw), 4096), 0);
	s3_buf_init(&b, 4096);
	assert_int_equal(s3_sigv2_string(&req, "Tue, 27 Mar 2007 21:06:08 +0000", NULL, &b), 0);
	s3_buf_add(&b, "", 1);
	assert_string_equal(b.p, "PUT\n4gJE4saaMU4BqNR0kLY+lw==\napplication/x-download\n"
	                         "Tue, 27 Mar 2007 21:06:08 +0000\nx-amz-acl:public-read\n"
	                         "x-amz-meta-reviewedby:joe@johnsmith.net,jane@johnsmith.net\n"
	                         "/b/k%20x?partNumber=2&uploadId=a/b");
	s3_buf_fini(&b);
	assert_int_equal(verify(raw, T2007 + 6600, &auth), S3_OK);
}

static void
test_errors(void **state)
{
	struct s3_auth auth;
	const char *badsig = "GET /photos/puppy.jpg HTTP/1.1\r\n"
	                     "Host: johnsmith.s3.amazonaws.com\r\n"
	                     "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
	                     "Authorization: AWS " AK ":bWq2s1WEIj+Ydj0vQ697zp+IXMA=\r\n\r\n";
	const char *badkey = "GET /photos/puppy.jpg HTTP/1.1\r\n"
	                     "Host: johnsmith.s3.amazonaws.com\r\n"
	                     "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
	                     "Authorization: AWS AKIDWRONG:bWq2s1WEIj+Ydj0vQ697zp+IXMU=\r\n\r\n";
	/* an x-amz-* header added on the way changes the string to sign */
	const char *added = "GET /photos/puppy.jpg HTTP/1.1\r\n"
	                    "Host: johnsmith.s3.amazonaws.com\r\n"
	                    "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
	                    "x-amz-meta-x: y\r\n"
	                    "Authorization: AWS " AK ":bWq2s1WEIj+Ydj0vQ697zp+IXMU=\r\n\r\n";
	const char *nodate = "GET /photos/puppy.jpg HTTP/1.1\r\n"
	                     "Host: johnsmith.s3.amazonaws.com\r\n"
	                     "Authorization: AWS " AK ":bWq2s1WEIj+Ydj0vQ697zp+IXMU=\r\n\r\n";
	const char *nocolon = "GET / HTTP/1.1\r\nHost: h\r\n"
	                      "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
	                      "Authorization: AWS " AK "\r\n\r\n";
	const char *streaming = "PUT /photos/puppy.jpg HTTP/1.1\r\n"
	                        "Host: johnsmith.s3.amazonaws.com\r\n"
	                        "Date: Tue, 27 Mar 2007 19:36:42 +0000\r\n"
	                        "x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD\r\n"
	                        "Authorization: AWS " AK ":bWq2s1WEIj+Ydj0vQ697zp+IXMU=\r\n\r\n";
	const char *pre_nosig =
	        "GET /photos/puppy.jpg?AWSAccessKeyId=" AK
	        "&Expires=1175139620 HTTP/1.1\r\nHost: johnsmith.s3.amazonaws.com\r\n\r\n";
	const char *pre_badexp = "GET /photos/puppy.jpg?AWSAccessKeyId=" AK
	                         "&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D&Expires=11751396x "
	                         "HTTP/1.1\r\nHost: johnsmith.s3.amazonaws.com\r\n\r\n";
	const char *pre_badsig = "GET /photos/puppy.jpg?AWSAccessKeyId=" AK
	                         "&Signature=NpgCjnDzrM%2BWFzoENXmpNDUsSn8%3D&Expires=1175139621 "
	                         "HTTP/1.1\r\nHost: johnsmith.s3.amazonaws.com\r\n\r\n";

	(void)state;
	assert_int_equal(verify(badsig, T2007 + 1200, &auth), S3E_SIGNATURE_DOES_NOT_MATCH);
	assert_int_equal(verify(badkey, T2007 + 1200, &auth), S3E_INVALID_ACCESS_KEY);
	assert_int_equal(verify(added, T2007 + 1200, &auth), S3E_SIGNATURE_DOES_NOT_MATCH);
	assert_int_equal(verify(nodate, T2007 + 1200, &auth), S3E_ACCESS_DENIED);
	assert_int_equal(verify(nocolon, T2007 + 1200, &auth), S3E_AUTH_HEADER_MALFORMED);
	assert_int_equal(verify(streaming, T2007 + 1200, &auth), S3E_INVALID_REQUEST);
	assert_int_equal(verify(pre_nosig, T2007, &auth), S3E_ACCESS_DENIED);
	assert_int_equal(verify(pre_badexp, T2007, &auth), S3E_ACCESS_DENIED);
	assert_int_equal(verify(pre_badsig, T2007, &auth), S3E_SIGNATURE_DOES_NOT_MATCH);
}

static void
test_http_date(void **state)
{
	(void)state;
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00 GMT", 29), 1369353600);
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00 +0000", 31), 1369353600);
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00 PST", 29), -1);
	assert_int_equal(s3_sigv2_time("20130524T000000Z", 16), -1);
	/* what botocore writes when it signs with Date (email.utils.formatdate) */
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00 -0000", 31), 1369353600);
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 02:00:00 +0200", 31), 1369353600);
	assert_int_equal(s3_sigv2_time("Thu, 23 May 2013 19:00:00 -0500", 31), 1369353600);
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00 UTC", 29), 1369353600);
	/* RFC 850 and asctime, the other forms RFC 9110 has recipients take */
	assert_int_equal(s3_sigv2_time("Friday, 24-May-13 00:00:00 GMT", 30), 1369353600);
	assert_int_equal(s3_sigv2_time("Fri May 24 00:00:00 2013", 24), 1369353600);
	assert_int_equal(s3_sigv2_time("Fri May  4 00:00:00 2013", 24), 1367625600);
	/* trailing bytes, a zone out of range, no zone */
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00 GMTx", 30), -1);
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00 +2500", 31), -1);
	assert_int_equal(s3_sigv2_time("Fri, 24 May 2013 00:00:00", 25), -1);
	assert_int_equal(s3_sigv2_time("Fri May 24 00:00:00 2013 GMT", 28), -1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aws_examples),
		cmocka_unit_test(test_string_to_sign),
		cmocka_unit_test(test_errors),
		cmocka_unit_test(test_http_date),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
