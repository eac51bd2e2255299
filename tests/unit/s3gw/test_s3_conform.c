/*
 * Issue 26's S3 conformance points over the in-memory TEST DOUBLE backend, by raw HTTP:
 * If-None-Match: <etag> on PutObject, CompleteMultipartUpload and CopyObject (412 when it
 * is the current ETag, else written), If-Match: * on a missing key (NoSuchKey); a 304 that
 * carries the validators only; a part listed twice in a Complete (the stored upload's entry
 * wins); user metadata past US-ASCII out as an RFC 2047 word, an encoded word in stored
 * decoded. The real clients do the same in tests/integration/test_s3_conform.py.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "mem_backend.h"
#include "raw_http.h"
#include "s3_util_internal.h"
#include "zc.h"

#define AK "testkey"
#define SK "testsecret"

static struct s3_backend *be;
static struct raw_gw gw;

static int
setup(void **state)
{
	struct s3_config cfg = { .listen = "127.0.0.1:0",
		                 .access_key = AK,
		                 .secret_key = SK,
		                 .region = "us-east-1",
		                 .threads = 2,
		                 .header_timeout_ms = 800,
		                 .idle_timeout_ms = 1500,
		                 .max_header = 8192,
		                 .domain = "s3.test" };

	(void)state;
	be = mem_backend_create();
	raw_gw_start(&gw, &cfg, be);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	raw_gw_stop(&gw);
	mem_backend_destroy(be);
	assert_int_equal(zc_ref_live(), 0);
	return 0;
}

static void
request(const char *method, const char *target, const char *extra, const void *body, size_t blen,
        struct raw_resp *r)
{
	struct raw_signer sg = { gw.port, "us-east-1", AK, SK };
	char hash[65], ex[4096];
	char *h;
	int fd = raw_dial(gw.port, 0);

	raw_sha_hex(body ? body : "", blen, hash);
	snprintf(ex, sizeof(ex), "%sContent-Length: %zu\r\n", extra ? extra : "", blen);
	h = raw_sign(&sg, method, target, ex, hash, 0, false, NULL);
	raw_send_all(fd, h, strlen(h));
	if (blen)
		raw_send_all(fd, body, blen);
	assert_int_equal(raw_recv_resp(fd, r, strcmp(method, "HEAD") == 0), 0);
	free(h);
	close(fd);
}

static void
expect(const char *method, const char *target, const char *extra, const char *body, int status,
       const char *code)
{
	struct raw_resp r;
	char want[128];

	request(method, target, extra, body, body ? strlen(body) : 0, &r);
	if (r.status != status)
		fail_msg("%s %s: status %d want %d: %s %s", method, target, r.status, status,
		         r.head, r.body ? r.body : "");
	snprintf(want, sizeof(want), "<Code>%s</Code>", code ? code : "");
	if (code && (!r.body || !strstr(r.body, want)))
		fail_msg("%s %s: want %s in %s", method, target, code, r.body ? r.body : "(null)");
	raw_resp_free(&r);
}

static void
md5_hex(const void *p, size_t n, char out[33])
{
	uint8_t d[16];

	assert_int_equal(EVP_Digest(p, n, d, NULL, EVP_md5(), NULL), 1);
	s3_hex(d, 16, out);
}

static void
expect_body(const char *target, const char *want)
{
	struct raw_resp r;

	request("GET", target, NULL, NULL, 0, &r);
	assert_int_equal(r.status, 200);
	assert_int_equal(r.blen, strlen(want));
	assert_memory_equal(r.body, want, r.blen);
	raw_resp_free(&r);
}

static void
test_if_none_match_etag(void **state)
{
	char ex[128], e1[33], other[] = "If-None-Match: \"0123456789abcdef0123456789abcdef\"\r\n";

	(void)state;
	expect("PUT", "/cnd", NULL, NULL, 200, NULL);
	/* a missing key: If-Match: * and an If-Match ETag are NoSuchKey, nothing stored */
	expect("PUT", "/cnd/k", "If-Match: *\r\n", "x", 404, "NoSuchKey");
	expect("PUT", "/cnd/k", "If-Match: \"abc\"\r\n", "x", 404, "NoSuchKey");
	expect("GET", "/cnd/k", NULL, NULL, 404, "NoSuchKey");
	/* If-None-Match: <etag> on a missing key, then with another ETag: written */
	expect("PUT", "/cnd/k", other, "first", 200, NULL);
	expect_body("/cnd/k", "first");
	md5_hex("first", 5, e1);
	snprintf(ex, sizeof(ex), "If-None-Match: \"%s\"\r\n", e1);
	expect("PUT", "/cnd/k", ex, "second", 412, "PreconditionFailed");
	snprintf(ex, sizeof(ex), "If-None-Match: %s\r\n", e1); /* unquoted, as curl users type */
	expect("PUT", "/cnd/k", ex, "second", 412, "PreconditionFailed");
	expect_body("/cnd/k", "first");
	expect("PUT", "/cnd/k", other, "second", 200, NULL);
	expect_body("/cnd/k", "second");
	/* CopyObject onto it under the same rule */
	md5_hex("second", 6, e1);
	snprintf(ex, sizeof(ex), "x-amz-copy-source: cnd/k\r\nIf-None-Match: \"%s\"\r\n", e1);
	expect("PUT", "/cnd/k2", ex, NULL, 200, NULL); /* k2 is missing */
	expect("PUT", "/cnd/k2", ex, NULL, 412, "PreconditionFailed");
	/* If-Match: * on an existing key writes */
	expect("PUT", "/cnd/k", "If-Match: *\r\n", "third", 200, NULL);
	expect_body("/cnd/k", "third");
}

static void
upload(const char *key, char uid[40])
{
	struct raw_resp r;
	char target[128];
	const char *e;

	snprintf(target, sizeof(target), "%s?uploads", key);
	request("POST", target, NULL, NULL, 0, &r);
	assert_int_equal(r.status, 200);
	e = strstr(r.body, "<UploadId>");
	assert_non_null(e);
	snprintf(uid, 40, "%.32s", e + 10);
	raw_resp_free(&r);
}

static void
part(const char *key, const char *uid, unsigned n, const char *body, char etag[33])
{
	char target[160];

	snprintf(target, sizeof(target), "%s?partNumber=%u&uploadId=%s", key, n, uid);
	expect("PUT", target, NULL, body, 200, NULL);
	md5_hex(body, strlen(body), etag);
}

static void
test_complete(void **state)
{
	char uid[40], e1[33], e1b[33], target[160], body[1024], ex[128], cur[48];

	(void)state;
	expect("PUT", "/mpc", NULL, NULL, 200, NULL);
	upload("/mpc/k", uid);
	part("/mpc/k", uid, 1, "one", e1);
	part("/mpc/k", uid, 1, "again", e1b); /* sent again: this upload is part 1 now */
	snprintf(target, sizeof(target), "/mpc/k?uploadId=%s", uid);
	/* two entries of part 1, neither the stored one: InvalidPart, nothing made */
	snprintf(body, sizeof(body),
	         "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"%s\"</ETag>"
	         "</Part><Part><PartNumber>1</PartNumber><ETag>\"%032d\"</ETag></Part>"
	         "</CompleteMultipartUpload>",
	         e1, 0);
	expect("POST", target, NULL, body, 400, "InvalidPart");
	expect("GET", "/mpc/k", NULL, NULL, 404, "NoSuchKey");
	/* If-Match: * on the missing target: NoSuchKey (not InvalidPart) */
	snprintf(body, sizeof(body),
	         "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"%s\"</ETag>"
	         "</Part><Part><PartNumber>1</PartNumber><ETag>\"%s\"</ETag></Part>"
	         "</CompleteMultipartUpload>",
	         e1, e1b);
	expect("POST", target, "If-Match: *\r\n", body, 404, "NoSuchKey");
	/* the entry naming the stored upload wins */
	expect("POST", target, NULL, body, 200, NULL);
	expect_body("/mpc/k", "again");
	/* If-None-Match with the object's ETag: 412, the upload stays for a retry */
	upload("/mpc/k", uid);
	part("/mpc/k", uid, 1, "new", e1);
	snprintf(target, sizeof(target), "/mpc/k?uploadId=%s", uid);
	snprintf(body, sizeof(body),
	         "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\"%s\"</ETag>"
	         "</Part></CompleteMultipartUpload>",
	         e1);
	{
		struct raw_resp r;
		const char *e;

		request("HEAD", "/mpc/k", NULL, NULL, 0, &r);
		e = strcasestr(r.head, "ETag: \"");
		assert_non_null(e);
		snprintf(cur, sizeof(cur), "%.*s", (int)strcspn(e + 7, "\""), e + 7);
		raw_resp_free(&r);
	}
	snprintf(ex, sizeof(ex), "If-None-Match: \"%s\"\r\n", cur);
	expect("POST", target, ex, body, 412, "PreconditionFailed");
	expect_body("/mpc/k", "again");
	expect("POST", target, "If-None-Match: \"ffffffffffffffffffffffffffffffff\"\r\n", body, 200,
	       NULL);
	expect_body("/mpc/k", "new");
}

static void
test_304_and_meta(void **state)
{
	struct raw_resp r;
	char ex[256], e[33];

	(void)state;
	expect("PUT", "/nmx", NULL, NULL, 200, NULL);
	/* UTF-8 "Hello World\xc3\xa9" sent raw, "caf\xc3\xa9" as an encoded word (Q) */
	request("PUT", "/nmx/k",
	        "Content-Type: text/x-nm\r\nx-amz-checksum-crc32: NhCmhg==\r\n"
	        "x-amz-meta-a: Hello World\xc3\xa9\r\nx-amz-meta-b: =?utf-8?q?caf=C3=A9_x?=\r\n"
	        "x-amz-meta-c: plain\r\nx-amz-meta-d: =?UTF-8?B?YWJj?=\r\n",
	        "hello", 5, &r);
	assert_int_equal(r.status, 200);
	raw_resp_free(&r);
	request("HEAD", "/nmx/k", NULL, NULL, 0, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strcasestr(r.head, "x-amz-meta-a: =?UTF-8?B?SGVsbG8gV29ybGTDqQ==?=\r\n"));
	assert_non_null(strcasestr(r.head, "x-amz-meta-b: =?UTF-8?B?Y2Fmw6kgeA==?=\r\n"));
	assert_non_null(strcasestr(r.head, "x-amz-meta-c: plain\r\n"));
	assert_non_null(strcasestr(r.head, "x-amz-meta-d: abc\r\n")); /* ASCII: as is */
	raw_resp_free(&r);
	/* 304: ETag and Last-Modified, no checksum, no content or metadata headers */
	md5_hex("hello", 5, e);
	snprintf(ex, sizeof(ex), "If-None-Match: \"%s\"\r\nx-amz-checksum-mode: ENABLED\r\n", e);
	request("GET", "/nmx/k", ex, NULL, 0, &r);
	assert_int_equal(r.status, 304);
	assert_non_null(strcasestr(r.head, "\r\nETag: \""));
	assert_non_null(strcasestr(r.head, "\r\nLast-Modified: "));
	assert_null(strcasestr(r.head, "x-amz-checksum"));
	assert_null(strcasestr(r.head, "content-type"));
	assert_null(strcasestr(r.head, "content-length"));
	assert_null(strcasestr(r.head, "x-amz-meta-"));
	assert_int_equal(r.blen, 0);
	raw_resp_free(&r);
	/* the same GET without the condition carries them */
	request("GET", "/nmx/k", "x-amz-checksum-mode: ENABLED\r\n", NULL, 0, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strcasestr(r.head, "x-amz-checksum-crc32: NhCmhg=="));
	raw_resp_free(&r);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_if_none_match_etag),
		cmocka_unit_test(test_complete),
		cmocka_unit_test(test_304_and_meta),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
