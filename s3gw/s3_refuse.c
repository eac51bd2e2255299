/*
 * s3_refuse: requests that ask for a feature zest does not have get the S3 error AWS
 * answers for it (MinIO's where AWS has no such case) before any operation runs, so
 * nothing is stored and no client goes on believing the feature is in effect: an object
 * it thinks encrypted, locked, tagged or public, or a bucket it thinks versioned.
 *
 * Two tables, applied by s3_refuse_unsupported():
 *   subs   query sub-resources with a method their operation does not take, which the
 *          dispatch would otherwise read as CreateBucket, DeleteBucket, PutObject or
 *          DeleteObject (PUT /b?versioning used to create the bucket)
 *   hdrs   request headers -> which operations -> which values pass -> the S3 error
 * and the versionId rule (buckets are never versioned, so only "null" names a version).
 */
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "s3_ops_internal.h"

/* ------------------------------------------------------------------ classification */

/* Methods, as bits for the tables. */
enum {
	M_GET = 1u << 0, /* HEAD too */
	M_PUT = 1u << 1,
	M_POST = 1u << 2,
	M_DELETE = 1u << 3,
	M_ANY = M_GET | M_PUT | M_POST | M_DELETE,
};

/* What the dispatch will run, as bits for the header table. */
enum {
	OP_PUT = 1u << 0,      /* PutObject, CopyObject */
	OP_PART = 1u << 1,     /* UploadPart, UploadPartCopy */
	OP_CREATE = 1u << 2,   /* CreateMultipartUpload */
	OP_COMPLETE = 1u << 3, /* CompleteMultipartUpload */
	OP_READ = 1u << 4,     /* GetObject, HeadObject */
	OP_DELETE = 1u << 5,   /* DeleteObject */
	OP_MPU = 1u << 6,      /* ListParts, AbortMultipartUpload */
	OP_MKBUCKET = 1u << 7, /* CreateBucket */
	OP_WRITE = OP_PUT | OP_CREATE,
	OP_OBJECT = OP_PUT | OP_PART | OP_CREATE | OP_COMPLETE | OP_READ | OP_MPU,
};

static unsigned
method_bit(const struct s3_req *rq)
{
	if (rq->is_head || s3_rq_method_is(rq, "GET"))
		return M_GET;
	if (s3_rq_method_is(rq, "PUT"))
		return M_PUT;
	if (s3_rq_method_is(rq, "POST"))
		return M_POST;
	if (s3_rq_method_is(rq, "DELETE"))
		return M_DELETE;
	return 0;
}

/* Only parameters that name no sub-resource: the presigned X-Amz-* ones and the SDKs'
 * "x-id=<Operation>" hint. A bucket PUT with anything else is not a CreateBucket. */
static bool
query_plain(const struct s3_req *rq)
{
	const char *q = rq->http.query;
	size_t n = rq->http.query_len, i = 0;

	while (i < n) {
		size_t j = i;

		while (j < n && q[j] != '&')
			j++;
		if (j > i && !(j - i >= 6 && strncasecmp(q + i, "X-Amz-", 6) == 0) &&
		    !(j - i >= 4 && strncmp(q + i, "x-id", 4) == 0 &&
		      (j - i == 4 || q[i + 4] == '=')))
			return false;
		i = j + 1;
	}
	return true;
}

static unsigned
op_bits(const struct s3_req *rq, unsigned m)
{
	bool upload = s3_rq_has_query(rq, "uploadId");

	if (!rq->key)
		return m == M_PUT && query_plain(rq) ? OP_MKBUCKET : 0;
	switch (m) {
	case M_PUT:
		return upload || s3_rq_has_query(rq, "partNumber") ? OP_PART : OP_PUT;
	case M_POST:
		if (s3_rq_has_query(rq, "uploads"))
			return OP_CREATE;
		return upload ? OP_COMPLETE : 0;
	case M_GET:
		return upload ? OP_MPU : OP_READ;
	case M_DELETE:
		return upload ? OP_MPU : OP_DELETE;
	default:
		return 0;
	}
}

/* ------------------------------------------------------------------ sub-resources */

enum { AT_BUCKET = 1, AT_OBJECT = 2, AT_ANY = 3 };

/*
 * A sub-resource present in the query, where (bucket or object level): the writing methods
 * its operations take (others are 405 MethodNotAllowed: never fall through to a write or a
 * delete), and the methods naming an operation zest lacks (501 NotImplemented). GET/HEAD
 * not named fall through to the read they are. The sub-resources of s3_route.c's
 * unsupported_sub list are refused there for every method.
 */
static const struct sub_rule {
	const char *name;
	unsigned at;
	unsigned writes_ok;
	unsigned not_impl;
	const char *msg; /* for not_impl */
} subs[] = {
	{ "versioning", AT_BUCKET, 0, M_PUT, "Bucket versioning is not implemented" },
	{ "versioning", AT_OBJECT, 0, 0, NULL },
	{ "location", AT_ANY, 0, 0, NULL },
	{ "uploads", AT_BUCKET, 0, 0, NULL },
	{ "uploads", AT_OBJECT, M_POST, 0, NULL },
	{ "delete", AT_BUCKET, M_POST, 0, NULL },
	{ "delete", AT_OBJECT, 0, 0, NULL },
	{ "uploadId", AT_BUCKET, 0, 0, NULL },
	{ "partNumber", AT_BUCKET, 0, 0, NULL },
	{ "session", AT_BUCKET, 0, M_ANY, "CreateSession is not implemented" },
	{ "metadataTable", AT_BUCKET, 0, M_ANY, "S3 Metadata is not implemented" },
	{ "metadataConfiguration", AT_BUCKET, 0, M_ANY, "S3 Metadata is not implemented" },
};

/* Answer the request with error e; 1: the caller stops there. */
static int
refused(struct s3_req *rq, enum s3_err e, const char *msg)
{
	s3_rq_error(rq, e, msg);
	return 1;
}

static int
refuse_sub(struct s3_req *rq, unsigned m)
{
	unsigned at = rq->key ? AT_OBJECT : AT_BUCKET;

	for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++) {
		const struct sub_rule *s = &subs[i];

		if (!(s->at & at) || !s3_rq_has_query(rq, s->name))
			continue;
		if (s->not_impl & m)
			return refused(rq, S3E_NOT_IMPLEMENTED, s->msg);
		if (m != M_GET && !(s->writes_ok & m))
			return refused(rq, S3E_METHOD_NOT_ALLOWED, NULL);
	}
	return 0;
}

/* ------------------------------------------------------------------ headers */

enum hdr_kind {
	H_ANY,      /* refused whatever its value */
	H_NONEMPTY, /* refused unless empty */
	H_VALUES,   /* refused unless one of ok[] */
	H_SSE_C,    /* SSE-C: over plain HTTP S3 refuses it before anything else */
};

/* Canned ACLs that give the owner, the only principal zest has, full control: what a
 * bucket with S3's default ObjectOwnership (BucketOwnerEnforced) behaves as. */
static const char *const acl_ok[] = { "private", "bucket-owner-full-control", NULL };
/* MinIO's set: REDUCED_REDUNDANCY is stored (and listed) as STANDARD, which is more
 * durable than asked; archive and infrequent-access classes promise other semantics. */
static const char *const class_ok[] = { "STANDARD", "REDUCED_REDUNDANCY", NULL };
static const char *const false_ok[] = { "false", NULL };

/* First match wins: a name with prefix true matches every header it begins. */
static const struct hdr_rule {
	const char *name;
	bool prefix;
	unsigned ops;
	enum hdr_kind kind;
	const char *const *ok;
	enum s3_err err;
	const char *msg;
} hdrs[] = {
	{ "x-amz-server-side-encryption-customer-", true, OP_OBJECT, H_SSE_C, NULL,
	  S3E_NOT_IMPLEMENTED,
	  "Server-side encryption with customer-provided keys is not implemented" },
	{ "x-amz-copy-source-server-side-encryption-customer-", true, OP_PUT | OP_PART, H_SSE_C,
	  NULL, S3E_NOT_IMPLEMENTED,
	  "Server-side encryption with customer-provided keys is not implemented" },
	/* x-amz-server-side-encryption, -aws-kms-key-id, -context, -bucket-key-enabled */
	{ "x-amz-server-side-encryption", true, OP_OBJECT, H_ANY, NULL, S3E_NOT_IMPLEMENTED,
	  "Server side encryption specified but KMS is not configured" },
	{ "x-amz-storage-class", false, OP_WRITE, H_VALUES, class_ok, S3E_INVALID_STORAGE_CLASS,
	  NULL },
	{ "x-amz-tagging", false, OP_WRITE, H_NONEMPTY, NULL, S3E_NOT_IMPLEMENTED,
	  "Object tagging is not implemented" },
	{ "x-amz-acl", false, OP_WRITE, H_VALUES, acl_ok, S3E_ACL_NOT_SUPPORTED, NULL },
	{ "x-amz-grant-", true, OP_WRITE, H_ANY, NULL, S3E_ACL_NOT_SUPPORTED, NULL },
	{ "x-amz-acl", false, OP_MKBUCKET, H_VALUES, acl_ok, S3E_INVALID_BUCKET_ACL, NULL },
	{ "x-amz-grant-", true, OP_MKBUCKET, H_ANY, NULL, S3E_INVALID_BUCKET_ACL, NULL },
	/* -mode, -retain-until-date, -legal-hold */
	{ "x-amz-object-lock-", true, OP_WRITE, H_ANY, NULL, S3E_INVALID_REQUEST,
	  "Bucket is missing Object Lock Configuration" },
	{ "x-amz-bucket-object-lock-enabled", false, OP_MKBUCKET, H_VALUES, false_ok,
	  S3E_NOT_IMPLEMENTED, "Object Lock is not implemented" },
};

static bool
name_matches(const struct hdr_rule *r, const struct s3_hdr *h)
{
	size_t n = strlen(r->name);

	if (r->prefix ? h->name_len < n : h->name_len != n)
		return false;
	return strncasecmp(h->name, r->name, n) == 0;
}

static bool
value_passes(const struct hdr_rule *r, const struct s3_hdr *h)
{
	switch (r->kind) {
	case H_NONEMPTY:
		return h->val_len == 0;
	case H_VALUES:
		for (const char *const *v = r->ok; *v; v++)
			if (h->val_len == strlen(*v) && memcmp(h->val, *v, h->val_len) == 0)
				return true;
		return false;
	default:
		return false;
	}
}

static int
refuse_hdr(struct s3_req *rq, unsigned op)
{
	for (unsigned i = 0; i < rq->http.nhdr; i++) {
		const struct s3_hdr *h = &rq->http.hdr[i];

		for (size_t k = 0; k < sizeof(hdrs) / sizeof(hdrs[0]); k++) {
			const struct hdr_rule *r = &hdrs[k];

			if (!(r->ops & op) || !name_matches(r, h))
				continue;
			if (value_passes(r, h))
				break;
			if (r->kind == H_SSE_C && !rq->cfg->tls_cert)
				return refused(rq, S3E_INVALID_REQUEST,
				               "Requests specifying Server Side Encryption with "
				               "Customer provided keys must be made over a secure "
				               "connection.");
			return refused(rq, r->err, r->msg);
		}
	}
	return 0;
}

/* ------------------------------------------------------------------ versionId */

static int
refuse_version(struct s3_req *rq)
{
	char v[8];
	int n = s3_rq_query(rq, "versionId", v, sizeof(v));

	if (n == 0 || (n == 1 && strcmp(v, "null") == 0))
		return 0;
	if (n == 1 && !v[0])
		return refused(rq, S3E_INVALID_ARGUMENT, "Version id cannot be the empty string");
	return refused(rq, S3E_INVALID_ARGUMENT, "Invalid version id specified");
}

/* ------------------------------------------------------------------ entry */

int
s3_refuse_unsupported(struct s3_req *rq)
{
	unsigned m = method_bit(rq), op;

	if (!rq->bucket[0] || !m)
		return 0;
	if (refuse_sub(rq, m))
		return 1;
	op = op_bits(rq, m);
	if (op && refuse_hdr(rq, op))
		return 1;
	if ((op & (OP_READ | OP_DELETE)) && refuse_version(rq))
		return 1;
	return 0;
}
