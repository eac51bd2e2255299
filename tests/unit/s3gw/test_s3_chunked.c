/* Body decoders: AWS's streaming-upload example (66560 bytes, seed and chunk signatures),
 * trailers, HTTP chunked, every split of the input, and malformed framing. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3_chunked_internal.h"
#include "s3_sum_internal.h"

#define AK    "AKIAIOSFODNN7EXAMPLE"
#define SK    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define T2013 1369353600
#define SEED  "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"
#define SIG1  "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
#define SIG2  "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
#define SIG3  "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"

static const struct s3_creds creds = { AK, SK, "us-east-1", NULL };

struct sink {
	const uint8_t *lo, *hi; /* the input: spans must point inside it */
	uint64_t bytes;
	unsigned spans;
	bool all_a;
};

static int
sink_emit(void *arg, const uint8_t *p, size_t n)
{
	struct sink *s = arg;

	assert_true(p >= s->lo && p + n <= s->hi); /* zero copy: a slice of the input */
	for (size_t i = 0; i < n; i++)
		if (p[i] != 'a')
			s->all_a = false;
	s->bytes += n;
	s->spans++;
	return 0;
}

static char *
example_body(size_t *len, const char *s1, const char *s2, const char *s3)
{
	char *b = malloc(70000);
	size_t o = 0;

	o += (size_t)sprintf(b + o, "10000;chunk-signature=%s\r\n", s1);
	memset(b + o, 'a', 65536);
	o += 65536;
	o += (size_t)sprintf(b + o, "\r\n400;chunk-signature=%s\r\n", s2);
	memset(b + o, 'a', 1024);
	o += 1024;
	o += (size_t)sprintf(b + o, "\r\n0;chunk-signature=%s\r\n\r\n", s3);
	*len = o;
	return b;
}

static void
example_auth(struct s3_auth *auth)
{
	const char *raw = "PUT /examplebucket/chunkObject.txt HTTP/1.1\r\n"
	                  "Host: s3.amazonaws.com\r\n"
	                  "x-amz-date: 20130524T000000Z\r\n"
	                  "x-amz-storage-class: REDUCED_REDUNDANCY\r\n"
	                  "Authorization: AWS4-HMAC-SHA256 Credential=" AK
	                  "/20130524/us-east-1/s3/aws4_request,"
	                  "SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;"
	                  "x-amz-date;"
	                  "x-amz-decoded-content-length;x-amz-storage-class,Signature=" SEED "\r\n"
	                  "x-amz-content-sha256: STREAMING-AWS4-HMAC-SHA256-PAYLOAD\r\n"
	                  "Content-Encoding: aws-chunked\r\n"
	                  "x-amz-decoded-content-length: 66560\r\n"
	                  "Content-Length: 66824\r\n\r\n";
	struct s3_http_req req;

	assert_int_equal(s3_http_parse(&req, raw, strlen(raw), 65536), 0);
	assert_int_equal(s3_sigv4_verify(&req, &creds, T2013, auth), S3_OK);
	assert_int_equal(auth->payload, S3_PAYLOAD_STREAMING);
	assert_string_equal(auth->seed_sig, SEED);
}

/* Feed body in pieces of `step` bytes; returns the final result. */
static long
run(struct s3_chunked *d, const char *body, size_t len, size_t step, struct sink *s)
{
	size_t pos = 0;

	while (pos < len) {
		size_t n = len - pos < step ? len - pos : step;
		long rc = s3_chunked_feed(d, (const uint8_t *)body + pos, n, sink_emit, s);

		if (rc < 0)
			return rc;
		assert_int_equal(rc, n);
		pos += n;
	}
	return 0;
}

static void
test_aws_example(void **state)
{
	struct s3_auth auth;
	size_t len;
	char *body;
	static const size_t steps[] = { 1, 2, 3, 7, 64, 100, 4096, 65536, 70000 };

	(void)state;
	example_auth(&auth);
	body = example_body(&len, SIG1, SIG2, SIG3);
	assert_int_equal(len, 66824);
	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		struct s3_chunked d;
		struct sink s = { (uint8_t *)body, (uint8_t *)body + len, 0, 0, true };

		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_STREAMING, &auth), 0);
		assert_int_equal(run(&d, body, len, steps[i], &s), 0);
		assert_true(d.done);
		assert_int_equal(s.bytes, 66560);
		assert_int_equal(d.decoded, 66560);
		assert_true(s.all_a);
		s3_chunked_fini(&d);
	}
	free(body);
}

static void
test_aws_example_bad_sigs(void **state)
{
	struct s3_auth auth;
	const char *bad = "0000000000000000000000000000000000000000000000000000000000000000";
	const char *sets[3][3] = { { bad, SIG2, SIG3 }, { SIG1, bad, SIG3 }, { SIG1, SIG2, bad } };

	(void)state;
	example_auth(&auth);
	for (int i = 0; i < 3; i++) {
		struct s3_chunked d;
		size_t len;
		char *body = example_body(&len, sets[i][0], sets[i][1], sets[i][2]);
		struct sink s = { (uint8_t *)body, (uint8_t *)body + len, 0, 0, true };

		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_STREAMING, &auth), 0);
		assert_int_equal(run(&d, body, len, 1000, &s), -EBADMSG);
		s3_chunked_fini(&d);
		free(body);
	}
	/* a body whose data was changed fails the chunk signature */
	{
		struct s3_chunked d;
		size_t len;
		char *body = example_body(&len, SIG1, SIG2, SIG3);
		struct sink s = { (uint8_t *)body, (uint8_t *)body + len, 0, 0, true };

		body[1000] = 'b';
		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_STREAMING, &auth), 0);
		assert_int_equal(run(&d, body, len, 4096, &s), -EBADMSG);
		s3_chunked_fini(&d);
		free(body);
	}
}

/* Signed trailer built with our own signer, verified by the decoder. */
static void
test_signed_trailer(void **state)
{
	struct s3_auth auth;
	struct s3_chunked d;
	char body[1024], sig1[65], sig0[65], tsig[65];
	uint8_t h[32];
	struct s3_sum sum;
	struct s3_sum_out o;
	char crc[48], trailer[128];
	size_t len;

	(void)state;
	example_auth(&auth);
	s3_sum_init(&sum, S3_CK_SHA256 | S3_CK_CRC32C);
	s3_sum_update(&sum, "hello world", 11);
	s3_sum_final(&sum, &o);
	s3_sum_fini(&sum);
	s3_sigv4_chunk_sig(&auth, auth.seed_sig, o.sha256, sig1);
	s3_sum_init(&sum, S3_CK_SHA256);
	s3_sum_final(&sum, &(struct s3_sum_out){ 0 });
	s3_sum_fini(&sum);
	{
		struct s3_sum e;
		struct s3_sum_out eo;

		s3_sum_init(&e, S3_CK_SHA256);
		s3_sum_final(&e, &eo);
		s3_sum_fini(&e);
		memcpy(h, eo.sha256, 32);
	}
	s3_sigv4_chunk_sig(&auth, sig1, h, sig0);
	s3_ck_value(&o, S3_CK_CRC32C, crc);
	snprintf(trailer, sizeof(trailer), "x-amz-checksum-crc32c:%s\n", crc);
	s3_sigv4_trailer_sig(&auth, sig0, trailer, strlen(trailer), tsig);
	len = (size_t)snprintf(body, sizeof(body),
	                       "b;chunk-signature=%s\r\nhello world\r\n0;chunk-signature=%s\r\n"
	                       "x-amz-checksum-crc32c:%s\r\nx-amz-trailer-signature:%s\r\n\r\n",
	                       sig1, sig0, crc, tsig);
	for (size_t step = 1; step <= len; step += 13) {
		struct sink s = { (uint8_t *)body, (uint8_t *)body + len, 0, 0, false };

		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_STREAMING_TRAILER, &auth), 0);
		assert_int_equal(run(&d, body, len, step, &s), 0);
		assert_true(d.done);
		assert_int_equal(d.trailer_ck, S3_CK_CRC32C);
		assert_string_equal(d.trailer_val, crc);
		assert_int_equal(s.bytes, 11);
		s3_chunked_fini(&d);
	}
	/* minio-go's layout: LF after each trailer header, a CRLF line before the signature */
	len = (size_t)snprintf(body, sizeof(body),
	                       "b;chunk-signature=%s\r\nhello world\r\n0;chunk-signature=%s\r\n"
	                       "x-amz-checksum-crc32c:%s\n\r\nx-amz-trailer-signature:%s\r\n\r\n",
	                       sig1, sig0, crc, tsig);
	for (size_t step = 1; step <= len; step += 5) {
		struct sink s = { (uint8_t *)body, (uint8_t *)body + len, 0, 0, false };

		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_STREAMING_TRAILER, &auth), 0);
		assert_int_equal(run(&d, body, len, step, &s), 0);
		assert_true(d.done);
		assert_string_equal(d.trailer_val, crc);
		assert_int_equal(s.bytes, 11);
		s3_chunked_fini(&d);
	}
	/* a tampered trailer value fails its signature */
	{
		char *p = strstr(body, "crc32c:") + 7;
		struct sink s = { (uint8_t *)body, (uint8_t *)body + len, 0, 0, false };

		*p = *p == 'A' ? 'B' : 'A';
		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_STREAMING_TRAILER, &auth), 0);
		assert_int_equal(run(&d, body, len, len, &s), -EBADMSG);
		s3_chunked_fini(&d);
	}
}

static void
test_unsigned_trailer(void **state)
{
	const char *body =
	        "5\r\nhello\r\n6\r\n world\r\n0\r\nx-amz-checksum-crc32:DUoRhQ==\r\n\r\n";
	struct s3_chunked d;
	size_t len = strlen(body);

	(void)state;
	for (size_t step = 1; step <= len; step++) {
		struct sink s = { (const uint8_t *)body, (const uint8_t *)body + len, 0, 0, false };

		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_UNSIGNED_TRAILER, NULL), 0);
		assert_int_equal(run(&d, body, len, step, &s), 0);
		assert_true(d.done);
		assert_int_equal(s.bytes, 11);
		assert_int_equal(d.trailer_ck, S3_CK_CRC32);
		assert_string_equal(d.trailer_val, "DUoRhQ==");
		s3_chunked_fini(&d);
	}
}

static void
test_malformed(void **state)
{
	static const char *bad[] = {
		"zz\r\nhello\r\n0\r\n\r\n",             /* not hex */
		"5\r\nhelloXX0\r\n\r\n",                /* missing CRLF after data */
		"5\nhello\r\n0\r\n\r\n",                /* bare LF */
		"fffffffffffffffff\r\n",                /* overflow */
		"0\r\nx-amz-checksum-md7:AAAA\r\n\r\n", /* unknown checksum */
		"0\r\nnocolon\r\n\r\n",
		/* the same checksum trailer twice */
		("5\r\nhello\r\n0\r\nx-amz-checksum-crc32:AAAAAA==\r\nx-amz-checksum-crc32:AAAAAA=="
		 "\r\n\r\n"),
	};

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct s3_chunked d;
		struct sink s = { (const uint8_t *)bad[i], (const uint8_t *)bad[i] + strlen(bad[i]),
			          0, 0, false };

		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_UNSIGNED_TRAILER, NULL), 0);
		assert_true(s3_chunked_feed(&d, (const uint8_t *)bad[i], strlen(bad[i]), sink_emit,
		                            &s) < 0);
		s3_chunked_fini(&d);
	}
	/* an overlong size line */
	{
		struct s3_chunked d;
		char line[2000];
		struct sink s = { (uint8_t *)line, (uint8_t *)line + sizeof(line), 0, 0, false };

		memset(line, '1', sizeof(line));
		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_UNSIGNED_TRAILER, NULL), 0);
		assert_int_equal(s3_chunked_feed(&d, (uint8_t *)line, sizeof(line), sink_emit, &s),
		                 -EMSGSIZE);
		s3_chunked_fini(&d);
	}
	/* signed mode demands a signature on every chunk */
	{
		struct s3_auth auth;
		struct s3_chunked d;
		const char *b = "5\r\nhello\r\n0\r\n\r\n";
		struct sink s = { (const uint8_t *)b, (const uint8_t *)b + strlen(b), 0, 0, false };

		example_auth(&auth);
		assert_int_equal(s3_chunked_init(&d, S3_PAYLOAD_STREAMING, &auth), 0);
		assert_int_equal(s3_chunked_feed(&d, (const uint8_t *)b, strlen(b), sink_emit, &s),
		                 -EBADMSG);
		s3_chunked_fini(&d);
	}
}

static void
test_http_chunked(void **state)
{
	const char *body = "5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
	size_t len = strlen(body) - 4;

	(void)state;
	for (size_t step = 1; step <= len; step++) {
		struct s3_http_chunked d;
		struct sink s = { (const uint8_t *)body, (const uint8_t *)body + len + 4, 0, 0,
			          false };
		size_t pos = 0;

		s3_http_chunked_init(&d);
		while (pos < len + 4 && !d.done) {
			size_t n = len + 4 - pos < step ? len + 4 - pos : step;
			long rc = s3_http_chunked_feed(&d, (const uint8_t *)body + pos, n,
			                               sink_emit, &s);

			assert_true(rc >= 0);
			pos += (size_t)rc;
		}
		assert_true(d.done);
		assert_int_equal(pos, len); /* stops exactly at the end of the body */
		assert_int_equal(s.bytes, 11);
	}
	{
		struct s3_http_chunked d;
		const char *b = "5\r\nhelloX\r\n";
		struct sink s = { (const uint8_t *)b, (const uint8_t *)b + strlen(b), 0, 0, false };

		s3_http_chunked_init(&d);
		assert_int_equal(
		        s3_http_chunked_feed(&d, (const uint8_t *)b, strlen(b), sink_emit, &s),
		        -EINVAL);
	}
}

/* Feeds b in pieces of step bytes to either decoder, its payload capped at max (0: no
 * cap); the first error, or what was used. *bytes (if not NULL): the payload emitted. */
static long
feed_capped(bool http, const char *b, size_t step, uint64_t max, uint64_t *bytes)
{
	struct s3_http_chunked h;
	struct s3_chunked a;
	size_t len = strlen(b), pos = 0;
	struct sink s = { (const uint8_t *)b, (const uint8_t *)b + len, 0, 0, false };
	long rc = 0;

	s3_http_chunked_init(&h);
	assert_int_equal(s3_chunked_init(&a, S3_PAYLOAD_UNSIGNED_TRAILER, NULL), 0);
	h.max = a.max = max;
	while (pos < len && rc >= 0) {
		size_t n = len - pos < step ? len - pos : step;

		rc = http ? s3_http_chunked_feed(&h, (const uint8_t *)b + pos, n, sink_emit, &s)
		          : s3_chunked_feed(&a, (const uint8_t *)b + pos, n, sink_emit, &s);
		if (rc >= 0)
			pos += (size_t)rc;
		if (rc >= 0 && (size_t)rc < n)
			break;
	}
	s3_chunked_fini(&a);
	if (bytes)
		*bytes = s.bytes;
	return rc < 0 ? rc : (long)pos;
}

static long
feed_steps(bool http, const char *b, size_t step)
{
	return feed_capped(http, b, step, 0, NULL);
}

/* Both decoders share one size-line and data-CRLF step: the same framing errors from
 * each, whole or split at every byte. */
static void
test_shared_framing(void **state)
{
	static const struct {
		const char *body;
		long rc;
	} cases[] = {
		{ "zz\r\nhello\r\n0\r\n\r\n", -EINVAL },              /* not hex */
		{ "5;x\r\nhelloXX\r\n0\r\n\r\n", -EINVAL },           /* no CRLF after data */
		{ "5\r\nhello\r\r\n0\r\n\r\n", -EINVAL },             /* a CR before the CRLF */
		{ "5\nhello\r\n0\r\n\r\n", -EINVAL },                 /* bare LF in the size line */
		{ "5\r\nhello\n0\r\n\r\n", -EINVAL },                 /* bare LF after the data */
		{ "10000000000000000\r\n", -EOVERFLOW },              /* 2^64 */
		{ "fffffffffffffffff\r\n", -EOVERFLOW },              /* 17 digits */
		{ "00000000000000000005\r\nhello\r\n0\r\n\r\n", 34 }, /* leading zeros */
		{ "\r\nhello\r\n", -EINVAL },                         /* empty size line */
		{ "5 ;x\r\nhello\r\n0\r\n\r\n", 18 },                 /* BWS before an extension */
	};
	char big[600];

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		for (size_t step = 1; step <= strlen(cases[i].body); step++) {
			assert_int_equal(feed_steps(true, cases[i].body, step), cases[i].rc);
			assert_int_equal(feed_steps(false, cases[i].body, step), cases[i].rc);
		}
	memset(big, '1', sizeof(big) - 1);
	big[sizeof(big) - 1] = 0;
	for (size_t step = 1; step <= sizeof(big); step *= 3) {
		assert_int_equal(feed_steps(true, big, step), -EMSGSIZE);
		assert_int_equal(feed_steps(false, big, step), -EMSGSIZE);
	}
}

/* A chunked body is capped like a Content-Length one: a size line that would take the
 * payload past the cap is refused before a byte of that chunk is emitted. */
static void
test_caps(void **state)
{
	const char *two = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
	const char *huge = "ffffffffffffffff\r\n";

	(void)state;
	for (int http = 0; http < 2; http++)
		for (size_t step = 1; step <= strlen(two); step++) {
			uint64_t bytes;

			assert_int_equal(feed_capped(http, two, step, 10, &bytes), -EFBIG);
			assert_int_equal(bytes, 5); /* the first chunk only */
			assert_int_equal(feed_capped(http, two, step, 11, &bytes),
			                 (long)strlen(two));
			assert_int_equal(bytes, 11);
			assert_int_equal(feed_capped(http, huge, step, 5ull << 40, NULL), -EFBIG);
			/* the running total cannot wrap past the cap */
			assert_int_equal(feed_capped(http, "5\r\nhello\r\nfffffffffffffffc\r\n",
			                             step, UINT64_MAX, NULL),
			                 -EFBIG);
			/* uncapped, the largest 64-bit size is a size line like another */
			assert_int_equal(feed_capped(http, huge, step, 0, NULL),
			                 (long)strlen(huge));
		}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_aws_example),    cmocka_unit_test(test_aws_example_bad_sigs),
		cmocka_unit_test(test_signed_trailer), cmocka_unit_test(test_unsigned_trailer),
		cmocka_unit_test(test_malformed),      cmocka_unit_test(test_http_chunked),
		cmocka_unit_test(test_shared_framing), cmocka_unit_test(test_caps),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
