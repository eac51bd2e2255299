/* The request-head parser: good heads, every byte split, and the malformed inputs that
 * must be refused (smuggling shapes, control bytes, limits). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "s3_http_internal.h"

static void
test_good(void **state)
{
	const char *raw = "\r\nPUT /b/k%20x?uploads&x=1 HTTP/1.1\r\nHost: h:9000\r\n"
	                  "Content-Length: 12\r\nExpect: 100-continue\r\nX-Empty:\r\n"
	                  "x-amz-meta-a:  v  v \r\n\r\nBODY";
	struct s3_http_req r;
	const struct s3_hdr *h;
	size_t len = strlen(raw);

	(void)state;
	for (size_t i = 0; i < len - 4; i++)
		assert_int_equal(s3_http_parse(&r, raw, i, 4096), -EAGAIN);
	assert_int_equal(s3_http_parse(&r, raw, len, 4096), 0);
	assert_int_equal(r.head_len, len - 4);
	assert_int_equal(r.method_len, 3);
	assert_memory_equal(r.path, "/b/k%20x", r.path_len);
	assert_memory_equal(r.query, "uploads&x=1", r.query_len);
	assert_true(r.has_length && r.content_length == 12);
	assert_true(r.expect_continue && r.keep_alive && !r.chunked);
	h = s3_http_header(&r, "X-AMZ-META-A");
	assert_non_null(h);
	assert_int_equal(h->val_len, 4);
	assert_memory_equal(h->val, "v  v", 4);
	h = s3_http_header(&r, "x-empty");
	assert_non_null(h);
	assert_int_equal(h->val_len, 0);

	assert_int_equal(s3_http_parse(&r, "GET / HTTP/1.0\r\n\r\n", 18, 4096), 0);
	assert_false(r.keep_alive);
	assert_int_equal(
	        s3_http_parse(&r, "GET / HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n", 46, 4096),
	        0);
	assert_true(r.chunked);
	assert_int_equal(s3_http_parse(&r, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n", 37, 4096),
	                 0);
	assert_false(r.keep_alive);
}

static void
test_malformed(void **state)
{
	static const struct {
		const char *raw;
		int want;
	} cases[] = {
		{ "GET / HTTP/1.1\nHost: x\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nHost: x\n\r\n\r\n", -EINVAL },
		{ "GET  / HTTP/1.1\r\n\r\n", -EINVAL },
		{ "GET / HTTP/2.0\r\n\r\n", -ENOTSUP },
		{ "GET / HTTP/1.2\r\n\r\n", -ENOTSUP },
		{ "GET / FTP/1.1\r\n\r\n", -EINVAL },
		{ "G(T / HTTP/1.1\r\n\r\n", -EINVAL },
		{ "GET x HTTP/1.1\r\n\r\n", -EINVAL },
		{ "GET /\x01 HTTP/1.1\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nHost : x\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\n: x\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nNoColon\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nA: b\x7f\r\n\r\n", -EINVAL },
		{ "PUT / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", -EINVAL },
		{ "PUT / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", -EINVAL },
		{ "PUT / HTTP/1.1\r\nContent-Length: 99999999999999999999\r\n\r\n", -EINVAL },
		{ "PUT / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", -EINVAL },
		{ "PUT / HTTP/1.1\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		  -EINVAL },
		{ "PUT / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", -EINVAL },
		{ "PUT / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", -EINVAL },
		{ "GET / HTTP/1.1\r\nA: \0b\r\n\r\n", -EINVAL },
	};
	struct s3_http_req r;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n = strlen(cases[i].raw);

		if (i == sizeof(cases) / sizeof(cases[0]) - 1)
			n = 24; /* the NUL case */
		int rc = s3_http_parse(&r, cases[i].raw, n, 4096);

		if (rc != cases[i].want)
			fail_msg("case %zu: got %d want %d", i, rc, cases[i].want);
	}
}

static void
test_limits(void **state)
{
	char big[9000];
	struct s3_http_req r;
	size_t o;

	(void)state;
	o = (size_t)sprintf(big, "GET / HTTP/1.1\r\n");
	while (o < 8500)
		o += (size_t)sprintf(big + o,
		                     "X-Pad: 0123456789012345678901234567890123456789\r\n");
	assert_int_equal(s3_http_parse(&r, big, o, 8192), -EMSGSIZE);
	/* too many headers */
	o = (size_t)sprintf(big, "GET / HTTP/1.1\r\n");
	for (int i = 0; i < S3_HTTP_MAX_HEADERS + 1; i++)
		o += (size_t)sprintf(big + o, "X-%d: 1\r\n", i);
	o += (size_t)sprintf(big + o, "\r\n");
	assert_int_equal(s3_http_parse(&r, big, o, 8192), -EMSGSIZE);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_good),
		cmocka_unit_test(test_malformed),
		cmocka_unit_test(test_limits),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
