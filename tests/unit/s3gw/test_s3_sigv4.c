/* SigV4: AWS's published S3 examples (header auth, presigned URL, streaming chunk
 * signatures) and the errors a bad request must get. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "s3_sig_internal.h"

#define AK    "AKIAIOSFODNN7EXAMPLE"
#define SK    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T2013 1369353600 /* 2013-05-24T00:00:00Z */
#define EMPTY "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

static const struct s3_creds creds = { AK, SK, "us-east-1", NULL };

static enum s3_err
verify(const char *raw, time_t now, struct s3_auth *auth)
{
	struct s3_http_req req;

	assert_int_equal(s3_http_parse(&req, raw, strlen(raw), 65536), 0);
	return s3_sigv4_verify(&req, &creds, now, auth);
}

static void
test_get_object(void **state)
{
	struct s3_auth auth;
	const char *raw =
	        "GET /test.txt HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "Range: bytes=0-9\r\n"
	        "x-amz-content-sha256: " EMPTY "\r\n"
	        "x-amz-date: 20130524T000000Z\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	        "/20130524/us-east-1/s3/aws4_request,"
	        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
	        "Signature="
	        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41\r\n\r\n";

	(void)state;
	assert_int_equal(verify(raw, T2013, &auth), S3_OK);
	assert_int_equal(auth.payload, S3_PAYLOAD_HASH);
	/* 16 minutes later: skewed */
	assert_int_equal(verify(raw, T2013 + 16 * 60, &auth), S3E_REQUEST_TIME_TOO_SKEWED);
}

static void
test_put_object(void **state)
{
	struct s3_auth auth;
	const char *raw =
	        "PUT /test%24file.text HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "Date: Fri, 24 May 2013 00:00:00 GMT\r\n"
	        "x-amz-date: 20130524T000000Z\r\n"
	        "x-amz-storage-class: REDUCED_REDUNDANCY\r\n"
	        "x-amz-content-sha256: "
	        "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	        "/20130524/us-east-1/s3/aws4_request, "
	        "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class, "
	        "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd\r\n"
	        "Content-Length: 21\r\n\r\n";

	(void)state;
	assert_int_equal(verify(raw, T2013, &auth), S3_OK);
}

static void
test_get_lifecycle_and_list(void **state)
{
	struct s3_auth auth;
	const char *lc = "GET /?lifecycle HTTP/1.1\r\n"
	                 "Host: examplebucket.s3.amazonaws.com\r\n"
	                 "x-amz-date: 20130524T000000Z\r\n"
	                 "x-amz-content-sha256: " EMPTY "\r\n"
	                 "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	                 "/20130524/us-east-1/s3/aws4_request,"
	                 "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
	                 "Signature="
	                 "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543\r\n\r\n";
	const char *ls = "GET /?max-keys=2&prefix=J HTTP/1.1\r\n"
	                 "Host: examplebucket.s3.amazonaws.com\r\n"
	                 "x-amz-date: 20130524T000000Z\r\n"
	                 "x-amz-content-sha256: " EMPTY "\r\n"
	                 "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	                 "/20130524/us-east-1/s3/aws4_request,"
	                 "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
	                 "Signature="
	                 "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7\r\n\r\n";
	/* query order must not matter */
	const char *ls2 =
	        "GET /?prefix=J&max-keys=2 HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "x-amz-date: 20130524T000000Z\r\n"
	        "x-amz-content-sha256: " EMPTY "\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	        "/20130524/us-east-1/s3/aws4_request,"
	        "SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
	        "Signature="
	        "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7\r\n\r\n";

	(void)state;
	assert_int_equal(verify(lc, T2013, &auth), S3_OK);
	assert_int_equal(verify(ls, T2013, &auth), S3_OK);
	assert_int_equal(verify(ls2, T2013, &auth), S3_OK);
}

static void
test_presigned(void **state)
{
	struct s3_auth auth;
	const char *raw =
	        "GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AK
	        "%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
	        "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
	        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	        " HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n\r\n";

	(void)state;
	assert_int_equal(verify(raw, T2013 + 3600, &auth), S3_OK);
	assert_true(auth.presigned);
	assert_int_equal(auth.payload, S3_PAYLOAD_UNSIGNED);
	/* expired after 86400 s */
	assert_int_equal(verify(raw, T2013 + 86401, &auth), S3E_ACCESS_DENIED);
}

static void
test_bad_requests(void **state)
{
	struct s3_auth auth;
	char raw[2048];
	const char *fmt =
	        "GET /test.txt HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "Range: bytes=0-9\r\n"
	        "x-amz-content-sha256: " EMPTY "\r\n"
	        "x-amz-date: 20130524T000000Z\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=%s/20130524/%s/s3/aws4_request,"
	        "SignedHeaders=%s,Signature=%s\r\n\r\n";
	const char *good = "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41";
	const char *sh = "host;range;x-amz-content-sha256;x-amz-date";

	(void)state;
	snprintf(raw, sizeof(raw), fmt, AK, "us-east-1", sh,
	         "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb40");
	assert_int_equal(verify(raw, T2013, &auth), S3E_SIGNATURE_DOES_NOT_MATCH);
	snprintf(raw, sizeof(raw), fmt, "AKIDWRONG", "us-east-1", sh, good);
	assert_int_equal(verify(raw, T2013, &auth), S3E_INVALID_ACCESS_KEY);
	snprintf(raw, sizeof(raw), fmt, AK, "eu-west-1", sh, good);
	assert_int_equal(verify(raw, T2013, &auth), S3E_AUTH_HEADER_MALFORMED);
	/* a signed header that is not there */
	snprintf(raw, sizeof(raw), fmt, AK, "us-east-1",
	         "host;range;x-amz-content-sha256;x-amz-date;x-foo", good);
	assert_int_equal(verify(raw, T2013, &auth), S3E_SIGNATURE_DOES_NOT_MATCH);
	assert_int_equal(verify("GET / HTTP/1.1\r\nHost: x\r\n\r\n", T2013, &auth),
	                 S3E_ACCESS_DENIED);
	assert_int_equal(
	        verify("GET / HTTP/1.1\r\nHost: x\r\nAuthorization: AWS4-HMAC-SHA256 junk\r\n\r\n",
	               T2013, &auth),
	        S3E_AUTH_HEADER_MALFORMED);
}

/* host and every x-amz-* header must be signed, or anyone on the path could add some. */
static void
test_unsigned_headers(void **state)
{
	struct s3_auth auth;
	const char *extra =
	        "GET /test.txt HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "Range: bytes=0-9\r\n"
	        "x-amz-content-sha256: " EMPTY "\r\n"
	        "x-amz-date: 20130524T000000Z\r\n"
	        "X-Amz-Meta-Added: by someone on the path\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	        "/20130524/us-east-1/s3/aws4_request,"
	        "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
	        "Signature="
	        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41\r\n\r\n";
	const char *nohost =
	        "GET /test.txt HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "x-amz-content-sha256: " EMPTY "\r\n"
	        "x-amz-date: 20130524T000000Z\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	        "/20130524/us-east-1/s3/aws4_request,"
	        "SignedHeaders=x-amz-content-sha256;x-amz-date,"
	        "Signature="
	        "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41\r\n\r\n";
	const char *presigned =
	        "GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AK
	        "%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z"
	        "&X-Amz-Expires=86400&X-Amz-SignedHeaders=host"
	        "&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	        " HTTP/1.1\r\nHost: examplebucket.s3.amazonaws.com\r\n"
	        "x-amz-copy-source: /other/key\r\n\r\n";

	(void)state;
	assert_int_equal(verify(extra, T2013, &auth), S3E_ACCESS_DENIED);
	assert_string_equal(auth.msg,
	                    "There were headers present in the request which were not signed");
	assert_int_equal(verify(nohost, T2013, &auth), S3E_ACCESS_DENIED);
	assert_string_equal(auth.msg,
	                    "There were headers present in the request which were not signed");
	assert_int_equal(verify(presigned, T2013 + 3600, &auth), S3E_ACCESS_DENIED);
	assert_string_equal(auth.msg,
	                    "There were headers present in the request which were not signed");
}

/* Without X-Amz-Date the (signed) Date header is the request time; the string to sign has
 * it as 20130524T000000Z. Signature computed independently (Python hmac). */
static void
test_date_header(void **state)
{
	struct s3_auth auth;
	const char *raw =
	        "GET /test.txt HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "Date: Fri, 24 May 2013 00:00:00 GMT\r\n"
	        "x-amz-content-sha256: " EMPTY "\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	        "/20130524/us-east-1/s3/aws4_request,"
	        "SignedHeaders=date;host;x-amz-content-sha256,"
	        "Signature="
	        "f51e643fca75b7c8fd918b44dd7f5de20a60f46a456fd2170e1e8248a77144e1\r\n\r\n";
	const char *unsigned_date =
	        "GET /test.txt HTTP/1.1\r\n"
	        "Host: examplebucket.s3.amazonaws.com\r\n"
	        "Date: Fri, 24 May 2013 00:00:00 GMT\r\n"
	        "x-amz-content-sha256: " EMPTY "\r\n"
	        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	        "/20130524/us-east-1/s3/aws4_request,"
	        "SignedHeaders=host;x-amz-content-sha256,"
	        "Signature="
	        "f51e643fca75b7c8fd918b44dd7f5de20a60f46a456fd2170e1e8248a77144e1\r\n\r\n";

	(void)state;
	assert_int_equal(verify(raw, T2013 + 60, &auth), S3_OK);
	assert_string_equal(auth.amz_date, "20130524T000000Z");
	assert_int_equal(verify(raw, T2013 + 16 * 60, &auth), S3E_REQUEST_TIME_TOO_SKEWED);
	assert_int_equal(verify(unsigned_date, T2013, &auth), S3E_ACCESS_DENIED);
	assert_int_equal(verify("GET / HTTP/1.1\r\nHost: h\r\nDate: yesterday\r\n"
	                        "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	                        "/20130524/us-east-1/s3/aws4_request,SignedHeaders=date;host,"
	                        "Signature=00\r\n\r\n",
	                        T2013, &auth),
	                 S3E_ACCESS_DENIED);
}

/* X-Amz-Expires: a decimal count of seconds in 1..604800, AWS's error for each other. */
static void
test_presigned_expires(void **state)
{
	static const struct {
		const char *v;
		enum s3_err want;
		const char *msg;
	} cases[] = {
		{ "86400", S3_OK, NULL },
		{ "604800", S3_OK, NULL },
		{ "0", S3E_ACCESS_DENIED, "Request has expired" },
		{ "-5", S3E_AUTH_QUERY_PARAMS, "X-Amz-Expires must be non-negative" },
		{ "604801", S3E_AUTH_QUERY_PARAMS,
		  "X-Amz-Expires must be less than a week (in seconds); that is, the given "
		  "X-Amz-Expires must be less than 604800 seconds" },
		{ "99999999999999999999999", S3E_AUTH_QUERY_PARAMS, NULL },
		{ "60abc", S3E_AUTH_QUERY_PARAMS, "X-Amz-Expires should be a number" },
		{ "+60", S3E_AUTH_QUERY_PARAMS, "X-Amz-Expires should be a number" },
		{ "", S3E_AUTH_QUERY_PARAMS, "X-Amz-Expires should be a number" },
	};
	char raw[1024];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct s3_auth auth;
		enum s3_err e;

		snprintf(raw, sizeof(raw),
		         "GET /test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=" AK
		         "%%2F20130524%%2Fus-east-1%%2Fs3%%2Faws4_request&X-Amz-Date="
		         "20130524T000000Z"
		         "&X-Amz-Expires=%s&X-Amz-SignedHeaders=host&X-Amz-Signature="
		         "aeeed9bbccd4d02e"
		         "e5c0109b86d86835f995330da4c265957d157751f604d404 HTTP/1.1\r\n"
		         "Host: examplebucket.s3.amazonaws.com\r\n\r\n",
		         cases[i].v);
		e = verify(raw, T2013 + 1, &auth);
		/* the signature covers 86400: any other valid value fails only there */
		if (cases[i].want == S3_OK && strcmp(cases[i].v, "86400") != 0)
			assert_int_equal(e, S3E_SIGNATURE_DOES_NOT_MATCH);
		else
			assert_int_equal(e, cases[i].want);
		if (cases[i].msg)
			assert_string_equal(auth.msg, cases[i].msg);
	}
}

/* Encoding: the canonical URI of a decoded-then-encoded path equals the SDK's form. */
static void
test_canonical_uri_encoding(void **state)
{
	struct s3_http_req req;
	struct s3_buf b;
	const char *raw =
	        "GET "
	        "/b/a%28b%29%20c+d/%E2%82%AC~x?list-type=2&prefix=a%2Fb&encoding-type=url&empty "
	        "HTTP/1.1\r\nHost: h\r\n\r\n";

	(void)state;
	assert_int_equal(s3_http_parse(&req, raw, strlen(raw), 4096), 0);
	s3_buf_init(&b, 4096);
	assert_int_equal(s3_sigv4_canonical(&req, "host", 4, "UNSIGNED-PAYLOAD", false, &b), 0);
	assert_string_equal(b.p, "GET\n/b/a%28b%29%20c%2Bd/%E2%82%AC~x\n"
	                         "empty=&encoding-type=url&list-type=2&prefix=a%2Fb\n"
	                         "host:h\n\nhost\nUNSIGNED-PAYLOAD");
	s3_buf_fini(&b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_get_object),
		cmocka_unit_test(test_put_object),
		cmocka_unit_test(test_get_lifecycle_and_list),
		cmocka_unit_test(test_presigned),
		cmocka_unit_test(test_bad_requests),
		cmocka_unit_test(test_canonical_uri_encoding),
		cmocka_unit_test(test_unsigned_headers),
		cmocka_unit_test(test_date_header),
		cmocka_unit_test(test_presigned_expires),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
