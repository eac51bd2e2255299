/*
 * Requests naming features zest does not have (s3gw/s3_refuse.c): the real server on
 * loopback over the in-memory TEST DOUBLE backend, raw signed HTTP. Each refusal must be
 * the S3 error AWS (or MinIO) answers, with nothing stored: the backend's object count and
 * HEAD of the key or bucket show it. Also ListMultipartUploads with a delimiter.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "mem_backend.h"
#include "raw_http.h"
#include "zc.h"

#define AK "testkey"
#define SK "testsecret"

static struct s3_backend *be;
static struct raw_gw gw;
static int port;

static int
setup(void **state)
{
	struct s3_config cfg = { .listen = "127.0.0.1:0",
		                 .access_key = AK,
		                 .secret_key = SK,
		                 .region = "us-east-1",
		                 .threads = 1,
		                 .header_timeout_ms = 2000,
		                 .idle_timeout_ms = 2000,
		                 .max_header = 8192 };

	(void)state;
	be = mem_backend_create();
	raw_gw_start(&gw, &cfg, be);
	port = gw.port;
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

/* ------------------------------------------------------------ client */

/* One request signed with SigV4 (raw_sign: host and every x-amz-* header signed; other
 * extra header lines are sent unsigned), with body; the response in r (free r->body). */
static void
request_ex(const char *method, const char *target, const char *extra, const char *body,
           bool send_body, struct raw_resp *r)
{
	struct raw_signer sg = { port, "us-east-1", AK, SK };
	size_t blen = body ? strlen(body) : 0;
	char phash[65], ex[4096], *head;
	int fd;

	raw_sha_hex(body ? body : "", blen, phash);
	snprintf(ex, sizeof(ex), "%sContent-Length: %zu\r\n", extra ? extra : "", blen);
	head = raw_sign(&sg, method, target, ex, phash, 0, false, NULL);
	fd = raw_dial(port, 0);
	raw_send_all(fd, head, strlen(head));
	if (blen && send_body)
		raw_send_all(fd, body, blen);
	assert_int_equal(raw_recv_resp(fd, r, strcmp(method, "HEAD") == 0), 0);
	close(fd);
	free(head);
}

static void
request(const char *method, const char *target, const char *extra, const char *body,
        struct raw_resp *r)
{
	request_ex(method, target, extra, body, true, r);
}

/* The request answers status (and, with a body, <Code>code</Code> and msg when given). */
static void
expect(const char *method, const char *target, const char *extra, const char *body, int status,
       const char *code, const char *msg)
{
	struct raw_resp r;
	char want[160];

	request(method, target, extra, body, &r);
	if (r.status != status)
		fail_msg("%s %s [%s]: status %d want %d: %s", method, target, extra ? extra : "",
		         r.status, status, r.body);
	if (code && strcmp(method, "HEAD") != 0) {
		snprintf(want, sizeof(want), "<Code>%s</Code>", code);
		if (!strstr(r.body, want))
			fail_msg("%s %s: want %s in %s", method, target, code, r.body);
	}
	if (msg && !strstr(r.body, msg))
		fail_msg("%s %s: want message '%s' in %s", method, target, msg, r.body);
	free(r.body);
}

/* Each test runs alone too: the bucket "rbk" whether or not an earlier test made it. */
static void
need_bucket(void)
{
	struct raw_resp r;

	request("PUT", "/rbk", NULL, NULL, &r);
	assert_true(r.status == 200 || r.status == 409);
	free(r.body);
}

/* The upload id of a new multipart upload of /b/key. */
static void
mpu_create(const char *key, char uid[64])
{
	struct raw_resp r;
	char target[256];
	const char *s, *e;

	snprintf(target, sizeof(target), "/rbk/%s?uploads", key);
	request("POST", target, NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	s = strstr(r.body, "<UploadId>");
	assert_non_null(s);
	s += 10;
	e = strchr(s, '<');
	assert_true(e && e - s < 64);
	memcpy(uid, s, (size_t)(e - s));
	uid[e - s] = '\0';
	free(r.body);
}

/* ------------------------------------------------------------ tests */

#define NOTIMPL    "NotImplemented"
#define NOTALLOWED "MethodNotAllowed"

static void
test_bucket_subresources(void **state)
{
	size_t n0;
	struct raw_resp r;

	(void)state;
	/* PutBucketVersioning on an unused name used to create the bucket */
	expect("PUT", "/vbk?versioning", NULL,
	       "<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>", 501,
	       NOTIMPL, "versioning");
	expect("HEAD", "/vbk", NULL, NULL, 404, NULL, NULL);
	expect("PUT", "/rbk", NULL, NULL, 200, NULL, NULL);
	expect("PUT", "/rbk/keep", NULL, "kept", 200, NULL, NULL);
	n0 = mem_backend_count(be);
	/* ... and answered MalformedXML on an existing one */
	expect("PUT", "/rbk?versioning", NULL,
	       "<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>", 501,
	       NOTIMPL, NULL);
	request("GET", "/rbk?versioning", NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "<VersioningConfiguration"));
	assert_null(strstr(r.body, "<Status>"));
	free(r.body);
	/* methods a sub-resource does not take never fall through to Create/DeleteBucket */
	expect("PUT", "/nbk?location", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("PUT", "/nbk?uploads", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("PUT", "/nbk?delete", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("PUT", "/nbk?uploadId=1", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("HEAD", "/nbk", NULL, NULL, 404, NULL, NULL);
	expect("DELETE", "/rbk?versioning", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("DELETE", "/rbk?location", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("DELETE", "/rbk?uploads", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("DELETE", "/rbk?delete", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("DELETE", "/rbk?tagging", NULL, NULL, 501, NOTIMPL, NULL);
	expect("PUT", "/rbk?tagging", NULL, "<Tagging/>", 501, NOTIMPL, NULL);
	expect("PUT", "/rbk?acl", NULL, NULL, 501, NOTIMPL, NULL);
	expect("PUT", "/rbk?policy", NULL, "{}", 501, NOTIMPL, NULL);
	expect("PUT", "/rbk?lifecycle", NULL, NULL, 501, NOTIMPL, NULL);
	expect("PUT", "/rbk?cors", NULL, NULL, 501, NOTIMPL, NULL);
	expect("PUT", "/rbk?encryption", NULL, NULL, 501, NOTIMPL, NULL);
	expect("PUT", "/rbk?object-lock", NULL, NULL, 501, NOTIMPL, NULL);
	expect("DELETE", "/rbk?policy", NULL, NULL, 501, NOTIMPL, NULL);
	expect("DELETE", "/rbk?cors", NULL, NULL, 501, NOTIMPL, NULL);
	expect("GET", "/rbk?session", NULL, NULL, 501, NOTIMPL, NULL);
	expect("HEAD", "/rbk", NULL, NULL, 200, NULL, NULL);
	/* object level: never PutObject/DeleteObject */
	expect("PUT", "/rbk/k?uploads", NULL, "data", 405, NOTALLOWED, NULL);
	expect("PUT", "/rbk/k?versioning", NULL, "data", 405, NOTALLOWED, NULL);
	expect("PUT", "/rbk/k?delete", NULL, "data", 405, NOTALLOWED, NULL);
	expect("PUT", "/rbk/k?tagging", NULL, "<Tagging/>", 501, NOTIMPL, NULL);
	expect("PUT", "/rbk/k?acl", NULL, NULL, 501, NOTIMPL, NULL);
	expect("HEAD", "/rbk/k", NULL, NULL, 404, NULL, NULL);
	expect("DELETE", "/rbk/keep?uploads", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("DELETE", "/rbk/keep?versioning", NULL, NULL, 405, NOTALLOWED, NULL);
	expect("DELETE", "/rbk/keep?tagging", NULL, NULL, 501, NOTIMPL, NULL);
	expect("HEAD", "/rbk/keep", NULL, NULL, 200, NULL, NULL);
	assert_int_equal(mem_backend_count(be), n0);
	/* parameters that are no sub-resource still create (the SDKs' x-id hint) */
	expect("PUT", "/xbk?x-id=CreateBucket", NULL, NULL, 200, NULL, NULL);
	expect("DELETE", "/xbk?x-id=DeleteBucket", NULL, NULL, 204, NULL, NULL);
}

static const char *const sse_c =
        "x-amz-server-side-encryption-customer-algorithm: AES256\r\n"
        "x-amz-server-side-encryption-customer-key: "
        "MzIgYnl0ZXMgb2Yga2V5IG1hdGVyaWFsIGhlcmUhIQ==\r\n"
        "x-amz-server-side-encryption-customer-key-MD5: 3Vu0j8vpj6VdKHeT5HLbAA==\r\n";
#define SSEC_MSG "must be made over a secure connection"

static void
test_server_side_encryption(void **state)
{
	char uid[64], target[512], ex[512];
	size_t n0;

	(void)state;
	need_bucket();
	mpu_create("mpu", uid);
	n0 = mem_backend_count(be);
	expect("PUT", "/rbk/e1", "x-amz-server-side-encryption: AES256\r\n", "secret", 501, NOTIMPL,
	       NULL);
	expect("PUT", "/rbk/e1",
	       "x-amz-server-side-encryption: aws:kms\r\n"
	       "x-amz-server-side-encryption-aws-kms-key-id: k1\r\n",
	       "secret", 501, NOTIMPL, NULL);
	expect("PUT", "/rbk/e1", "x-amz-server-side-encryption-aws-kms-key-id: k1\r\n", "secret",
	       501, NOTIMPL, NULL);
	expect("PUT", "/rbk/e1", sse_c, "secret", 400, "InvalidRequest", SSEC_MSG);
	expect("POST", "/rbk/e1?uploads", "x-amz-server-side-encryption: AES256\r\n", NULL, 501,
	       NOTIMPL, NULL);
	expect("POST", "/rbk/e1?uploads", sse_c, NULL, 400, "InvalidRequest", SSEC_MSG);
	snprintf(target, sizeof(target), "/rbk/mpu?partNumber=1&uploadId=%s", uid);
	expect("PUT", target, sse_c, "part", 400, "InvalidRequest", SSEC_MSG);
	snprintf(ex, sizeof(ex),
	         "x-amz-copy-source: /rbk/keep\r\n"
	         "x-amz-copy-source-server-side-encryption-customer-algorithm: AES256\r\n");
	expect("PUT", "/rbk/e1", ex, NULL, 400, "InvalidRequest", SSEC_MSG);
	expect("PUT", target, ex, NULL, 400, "InvalidRequest", SSEC_MSG);
	snprintf(target, sizeof(target), "/rbk/mpu?uploadId=%s", uid);
	expect("POST", target, sse_c, "<CompleteMultipartUpload/>", 400, "InvalidRequest",
	       SSEC_MSG);
	expect("GET", "/rbk/keep", sse_c, NULL, 400, "InvalidRequest", SSEC_MSG);
	expect("HEAD", "/rbk/keep", sse_c, NULL, 400, NULL, NULL);
	expect("GET", "/rbk/keep", "x-amz-server-side-encryption: AES256\r\n", NULL, 501, NOTIMPL,
	       NULL);
	expect("HEAD", "/rbk/e1", NULL, NULL, 404, NULL, NULL);
	assert_int_equal(mem_backend_count(be), n0);
	expect("DELETE", target, NULL, NULL, 204, NULL, NULL);
}

static void
test_storage_class(void **state)
{
	static const char *const refused[] = { "GLACIER",         "DEEP_ARCHIVE",
		                               "STANDARD_IA",     "ONEZONE_IA",
		                               "GLACIER_IR",      "INTELLIGENT_TIERING",
		                               "EXPRESS_ONEZONE", "standard",
		                               "BOGUS",           "" };
	char ex[128];
	struct raw_resp r;
	size_t n0;

	(void)state;
	need_bucket();
	expect("PUT", "/rbk/std", "x-amz-storage-class: STANDARD\r\n", "x", 200, NULL, NULL);
	request("HEAD", "/rbk/std", NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_null(strcasestr(r.head, "x-amz-storage-class")); /* S3 omits it for STANDARD */
	free(r.body);
	expect("PUT", "/rbk/rrs", "x-amz-storage-class: REDUCED_REDUNDANCY\r\n", "x", 200, NULL,
	       NULL);
	n0 = mem_backend_count(be);
	for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
		snprintf(ex, sizeof(ex), "x-amz-storage-class: %s\r\n", refused[i]);
		expect("PUT", "/rbk/sc", ex, "x", 400, "InvalidStorageClass",
		       "The storage class you specified is not valid");
		expect("POST", "/rbk/sc?uploads", ex, NULL, 400, "InvalidStorageClass", NULL);
	}
	expect("HEAD", "/rbk/sc", NULL, NULL, 404, NULL, NULL);
	assert_int_equal(mem_backend_count(be), n0);
	expect("DELETE", "/rbk/std", NULL, NULL, 204, NULL, NULL);
	expect("DELETE", "/rbk/rrs", NULL, NULL, 204, NULL, NULL);
}

static void
test_acl_tagging_lock(void **state)
{
	size_t n0;

	(void)state;
	need_bucket();
	expect("PUT", "/rbk/a1", "x-amz-acl: private\r\n", "x", 200, NULL, NULL);
	expect("PUT", "/rbk/a2", "x-amz-acl: bucket-owner-full-control\r\n", "x", 200, NULL, NULL);
	expect("PUT", "/rbk/a3", "x-amz-tagging: \r\n", "x", 200, NULL, NULL);
	n0 = mem_backend_count(be);
	expect("PUT", "/rbk/x", "x-amz-acl: public-read\r\n", "x", 400,
	       "AccessControlListNotSupported", "The bucket does not allow ACLs");
	expect("PUT", "/rbk/x", "x-amz-acl: public-read-write\r\n", "x", 400,
	       "AccessControlListNotSupported", NULL);
	expect("PUT", "/rbk/x", "x-amz-acl: authenticated-read\r\n", "x", 400,
	       "AccessControlListNotSupported", NULL);
	expect("POST", "/rbk/x?uploads", "x-amz-acl: public-read\r\n", NULL, 400,
	       "AccessControlListNotSupported", NULL);
	expect("PUT", "/rbk/x",
	       "x-amz-grant-read: uri=\"http://acs.amazonaws.com/groups/global/AllUsers\"\r\n", "x",
	       400, "AccessControlListNotSupported", NULL);
	expect("PUT", "/rbk/x", "x-amz-tagging: project=zest&tier=1\r\n", "x", 501, NOTIMPL,
	       "tagging");
	expect("POST", "/rbk/x?uploads", "x-amz-tagging: a=b\r\n", NULL, 501, NOTIMPL, NULL);
	expect("PUT", "/rbk/x",
	       "x-amz-object-lock-mode: COMPLIANCE\r\n"
	       "x-amz-object-lock-retain-until-date: 2030-01-01T00:00:00Z\r\n",
	       "x", 400, "InvalidRequest", "Bucket is missing Object Lock Configuration");
	expect("PUT", "/rbk/x", "x-amz-object-lock-legal-hold: ON\r\n", "x", 400, "InvalidRequest",
	       "Object Lock");
	expect("POST", "/rbk/x?uploads", "x-amz-object-lock-legal-hold: ON\r\n", NULL, 400,
	       "InvalidRequest", NULL);
	expect("HEAD", "/rbk/x", NULL, NULL, 404, NULL, NULL);
	assert_int_equal(mem_backend_count(be), n0);
	/* CreateBucket */
	expect("PUT", "/pbk", "x-amz-acl: public-read\r\n", NULL, 400,
	       "InvalidBucketAclWithObjectOwnership", NULL);
	expect("PUT", "/pbk", "x-amz-grant-full-control: id=someone\r\n", NULL, 400,
	       "InvalidBucketAclWithObjectOwnership", NULL);
	expect("PUT", "/pbk", "x-amz-bucket-object-lock-enabled: true\r\n", NULL, 501, NOTIMPL,
	       "Object Lock");
	expect("HEAD", "/pbk", NULL, NULL, 404, NULL, NULL);
	expect("PUT", "/pbk", "x-amz-acl: private\r\nx-amz-bucket-object-lock-enabled: false\r\n",
	       NULL, 200, NULL, NULL);
	expect("DELETE", "/pbk", NULL, NULL, 204, NULL, NULL);
	for (int i = 1; i <= 3; i++) {
		char t[32];

		snprintf(t, sizeof(t), "/rbk/a%d", i);
		expect("DELETE", t, NULL, NULL, 204, NULL, NULL);
	}
}

static void
test_version_id(void **state)
{
	(void)state;
	need_bucket();
	expect("PUT", "/rbk/v", NULL, "versioned?", 200, NULL, NULL);
	expect("GET", "/rbk/v?versionId=null", NULL, NULL, 200, NULL, NULL);
	expect("HEAD", "/rbk/v?versionId=null", NULL, NULL, 200, NULL, NULL);
	expect("GET", "/rbk/v?versionId=3HL4kqtJlcpXroDTDmJ.rmSpXd3dIbrHY", NULL, NULL, 400,
	       "InvalidArgument", "Invalid version id specified");
	expect("HEAD", "/rbk/v?versionId=abc", NULL, NULL, 400, NULL, NULL);
	expect("GET", "/rbk/v?versionId=", NULL, NULL, 400, "InvalidArgument",
	       "Version id cannot be the empty string");
	expect("DELETE", "/rbk/v?versionId=abc", NULL, NULL, 400, "InvalidArgument",
	       "Invalid version id specified");
	expect("HEAD", "/rbk/v", NULL, NULL, 200, NULL, NULL);
	expect("DELETE", "/rbk/v?versionId=null", NULL, NULL, 204, NULL, NULL);
	expect("HEAD", "/rbk/v", NULL, NULL, 404, NULL, NULL);
}

static void
test_list_uploads_delimiter(void **state)
{
	static const char *const keys[] = { "a/1", "a/2", "a/b/3", "b/1", "c", "d/1" };
	char uid[6][64], target[512];
	struct raw_resp r;

	(void)state;
	need_bucket();
	for (int i = 0; i < 6; i++)
		mpu_create(keys[i], uid[i]);
	request("GET", "/rbk?uploads&delimiter=%2F", NULL, NULL, &r);
	assert_int_equal(r.status, 200);
	assert_non_null(strstr(r.body, "<Delimiter>/</Delimiter>"));
	assert_non_null(strstr(r.body, "<CommonPrefixes><Prefix>a/</Prefix></CommonPrefixes>"
	                               "<CommonPrefixes><Prefix>b/</Prefix></CommonPrefixes>"
	                               "<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes>"));
	assert_non_null(strstr(r.body, "<Key>c</Key>"));
	assert_null(strstr(r.body, "<Key>a/1</Key>"));
	assert_non_null(strstr(r.body, "<IsTruncated>false</IsTruncated>"));
	free(r.body);
	request("GET", "/rbk?uploads&delimiter=%2F&prefix=a%2F", NULL, NULL, &r);
	assert_non_null(strstr(r.body, "<Key>a/1</Key>"));
	assert_non_null(strstr(r.body, "<Key>a/2</Key>"));
	assert_non_null(strstr(r.body, "<CommonPrefixes><Prefix>a/b/</Prefix></CommonPrefixes>"));
	assert_null(strstr(r.body, "<Key>a/b/3</Key>"));
	free(r.body);
	/* pages of 2: a prefix counts once and its NextKeyMarker skips the rest of it */
	request("GET", "/rbk?uploads&delimiter=%2F&max-uploads=2", NULL, NULL, &r);
	assert_non_null(strstr(r.body, "<IsTruncated>true</IsTruncated>"));
	assert_non_null(strstr(r.body, "<NextKeyMarker>b/</NextKeyMarker>"));
	assert_non_null(strstr(r.body, "<Prefix>a/</Prefix></CommonPrefixes>"));
	assert_non_null(strstr(r.body, "<Prefix>b/</Prefix></CommonPrefixes>"));
	assert_null(strstr(r.body, "<Key>"));
	free(r.body);
	request("GET", "/rbk?uploads&delimiter=%2F&max-uploads=2&key-marker=b%2F", NULL, NULL, &r);
	assert_non_null(strstr(r.body, "<IsTruncated>false</IsTruncated>"));
	assert_non_null(strstr(r.body, "<Key>c</Key>"));
	assert_non_null(strstr(r.body, "<Prefix>d/</Prefix></CommonPrefixes>"));
	assert_null(strstr(r.body, "<Prefix>b/</Prefix></CommonPrefixes>"));
	free(r.body);
	/* without a delimiter: every upload, as before */
	request("GET", "/rbk?uploads", NULL, NULL, &r);
	assert_non_null(strstr(r.body, "<Key>a/b/3</Key>"));
	assert_null(strstr(r.body, "<CommonPrefixes>"));
	free(r.body);
	for (int i = 0; i < 6; i++) {
		snprintf(target, sizeof(target), "/rbk/%s?uploadId=%s", keys[i], uid[i]);
		expect("DELETE", target, NULL, NULL, 204, NULL, NULL);
	}
}

/* A refusal of a PUT whose client waits for 100 ends the connection, and must say so: a
 * client that reuses it races the FIN (botocore then reports "400 None"). */
static void
test_refusal_before_body_closes(void **state)
{
	struct raw_resp r;

	(void)state;
	need_bucket();
	request_ex("PUT", "/rbk/x", "Expect: 100-continue\r\nx-amz-acl: public-read\r\n", "body",
	           false, &r);
	assert_int_equal(r.status, 400);
	assert_non_null(strcasestr(r.head, "\r\nConnection: close\r\n"));
	assert_null(strstr(r.head, "100 Continue"));
	free(r.body);
	request_ex("PUT", "/rbk/x", "x-amz-acl: public-read\r\n", "body", true, &r);
	assert_int_equal(r.status, 400);
	assert_null(strcasestr(r.head, "Connection: close")); /* drained: the connection stays */
	free(r.body);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bucket_subresources),
		cmocka_unit_test(test_server_side_encryption),
		cmocka_unit_test(test_storage_class),
		cmocka_unit_test(test_acl_tagging_lock),
		cmocka_unit_test(test_version_id),
		cmocka_unit_test(test_list_uploads_delimiter),
		cmocka_unit_test(test_refusal_before_body_closes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
