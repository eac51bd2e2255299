/*
 * s3_route: routing (path style and virtual host), authentication and dispatch of
 * each request to its operation; the s3_ops_* entry points of s3_internal.h.
 *
 * Addressing: virtual-host style when the Host header ends in ".<domain>" (cfg->domain),
 * path style otherwise. Keys are percent-decoded once (no '+' to space in paths).
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3_ops_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ routing */

static enum s3_err
route(struct s3_req *rq)
{
	const struct s3_hdr *host = s3_rq_hdr(rq, "host");
	size_t plen = rq->http.path_len;
	char *path = malloc(plen + 1);
	int n;
	const char *p;
	size_t vb = 0; /* virtual-host bucket length */

	if (!path)
		return S3E_INTERNAL;
	n = s3_uri_decode(rq->http.path, plen, path, plen + 1, false);
	if (n < 0) { /* a bad %-escape: S3 cannot parse the URI */
		free(path);
		return S3E_INVALID_URI;
	}
	if ((size_t)n != strlen(path)) { /* %00 */
		rq->resource = path;
		return S3E_INVALID_ARGUMENT;
	}
	rq->resource = path;
	if (!zc_utf8_valid(path, (size_t)n))
		return S3E_INVALID_URI; /* S3: "Couldn't parse the specified URI." */
	if (host && rq->cfg->domain) {
		size_t dl = strlen(rq->cfg->domain), hl = host->val_len;
		const char *colon = memchr(host->val, ':', hl);

		if (colon)
			hl = (size_t)(colon - host->val);
		if (hl > dl + 1 && host->val[hl - dl - 1] == '.' &&
		    strncasecmp(host->val + hl - dl, rq->cfg->domain, dl) == 0) {
			vb = hl - dl - 1;
			if (vb >= sizeof(rq->bucket))
				return S3E_INVALID_BUCKET_NAME;
			memcpy(rq->bucket, host->val, vb);
			rq->bucket[vb] = '\0';
		}
	}
	p = path;
	if (*p == '/')
		p++;
	if (!vb) {
		const char *slash = strchr(p, '/');
		size_t bl = slash ? (size_t)(slash - p) : strlen(p);

		if (bl >= sizeof(rq->bucket))
			return S3E_INVALID_BUCKET_NAME;
		memcpy(rq->bucket, p, bl);
		rq->bucket[bl] = '\0';
		p = slash ? slash + 1 : p + bl;
	}
	if (*p) {
		rq->key = strdup(p);
		if (!rq->key)
			return S3E_INTERNAL;
	}
	if (rq->bucket[0] && !zc_bucket_name_valid(rq->bucket))
		return S3E_INVALID_BUCKET_NAME;
	if (rq->key) {
		enum s3_err e = s3_key_check(rq->key, strlen(rq->key));

		if (e)
			return e;
	}
	return S3_OK;
}

/* ------------------------------------------------------------------ dispatch */

static const char *const unsupported_sub[] = {
	"acl",
	"policy",
	"lifecycle",
	"cors",
	"tagging",
	"website",
	"logging",
	"notification",
	"replication",
	"encryption",
	"object-lock",
	"retention",
	"legal-hold",
	"torrent",
	"accelerate",
	"requestPayment",
	"inventory",
	"analytics",
	"metrics",
	"intelligent-tiering",
	"ownershipControls",
	"publicAccessBlock",
	"restore",
	"select",
	"versions",
	"attributes",
	"policyStatus",
};

static int
dispatch(struct s3_req *rq)
{
	bool get = s3_rq_method_is(rq, "GET") || rq->is_head, put = s3_rq_method_is(rq, "PUT"),
	     del = s3_rq_method_is(rq, "DELETE"), post = s3_rq_method_is(rq, "POST");

	for (size_t i = 0; i < sizeof(unsupported_sub) / sizeof(unsupported_sub[0]); i++)
		if (s3_rq_has_query(rq, unsupported_sub[i]))
			return s3_rq_error(rq, S3E_NOT_IMPLEMENTED,
			                   "This subresource is not implemented");
	if (!rq->bucket[0]) {
		if (get && !rq->is_head) {
			rq->op = S3_OP_LIST_BUCKETS;
			return s3_op_list_buckets(rq);
		}
		return s3_rq_error(rq, S3E_METHOD_NOT_ALLOWED, NULL);
	}
	if (!rq->key) {
		if (get && s3_rq_has_query(rq, "location")) {
			rq->op = S3_OP_BUCKET_META;
			return s3_op_bucket_meta(rq, true);
		}
		if (get && s3_rq_has_query(rq, "versioning")) {
			rq->op = S3_OP_BUCKET_META;
			return s3_op_bucket_meta(rq, false);
		}
		if (get && s3_rq_has_query(rq, "uploads")) {
			rq->op = S3_OP_MPU_LIST;
			return s3_op_list_uploads(rq);
		}
		if (rq->is_head || del) {
			rq->op = rq->is_head ? S3_OP_HEAD_BUCKET : S3_OP_DELETE_BUCKET;
			return s3_op_bucket_simple(rq);
		}
		if (get) {
			char lt[8] = "";

			rq->op = S3_OP_LIST_OBJECTS;
			s3_rq_query(rq, "list-type", lt, sizeof(lt));
			return s3_op_list_objects(rq, strcmp(lt, "2") == 0);
		}
		if (put) {
			rq->op = S3_OP_CREATE_BUCKET;
			if (!zc_bucket_name_valid(rq->bucket))
				return s3_rq_error(rq, S3E_INVALID_BUCKET_NAME, NULL);
			if (!rq->http.has_length && !rq->http.chunked)
				return s3_bucket_create_end(rq);
			return s3_body_collect_begin(rq);
		}
		if (post && s3_rq_has_query(rq, "delete")) {
			rq->op = S3_OP_DELETE_OBJECTS;
			return s3_body_collect_begin(rq);
		}
		return s3_rq_error(rq, S3E_METHOD_NOT_ALLOWED, NULL);
	}
	if (put) {
		bool part = s3_rq_has_query(rq, "uploadId") || s3_rq_has_query(rq, "partNumber");

		rq->op = part ? S3_OP_MPU_PART : S3_OP_PUT_OBJECT;
		return s3_op_put_begin(rq, part);
	}
	if (get && s3_rq_has_query(rq, "uploadId")) {
		rq->op = S3_OP_MPU_LIST;
		return s3_op_list_parts(rq);
	}
	if (get) {
		rq->op = rq->is_head ? S3_OP_HEAD_OBJECT : S3_OP_GET_OBJECT;
		return s3_op_get_object(rq);
	}
	if (del && s3_rq_has_query(rq, "uploadId")) {
		rq->op = S3_OP_MPU_ABORT;
		return s3_op_mpu_abort(rq);
	}
	if (del) {
		rq->op = S3_OP_DELETE_OBJECT;
		return s3_op_delete_object(rq);
	}
	if (post && s3_rq_has_query(rq, "uploads")) {
		rq->op = S3_OP_MPU_CREATE;
		return s3_op_mpu_create(rq);
	}
	if (post && s3_rq_has_query(rq, "uploadId")) {
		rq->op = S3_OP_MPU_COMPLETE;
		return s3_body_collect_begin(rq);
	}
	return s3_rq_error(rq, S3E_METHOD_NOT_ALLOWED, NULL);
}

/*
 * CORS preflight (OPTIONS). S3 answers it without a signature. No bucket has a CORS
 * configuration here, so after S3's own checks (an Origin, then a method CORS knows) it
 * is always refused as S3 refuses a bucket without one.
 */
static int
cors_preflight(struct s3_req *rq)
{
	static const char *const methods[] = { "GET", "HEAD", "PUT", "POST", "DELETE" };
	const struct s3_hdr *m = s3_rq_hdr(rq, "access-control-request-method");
	struct s3_bucket_info bi;
	bool known = false;
	char msg[128];
	enum s3_err e;

	e = route(rq);
	if (e)
		return s3_rq_error(rq, e, NULL);
	if (!s3_rq_hdr(rq, "origin"))
		return s3_rq_error(rq, S3E_BAD_REQUEST,
		                   "Insufficient information. Origin request header needed.");
	for (size_t i = 0; m && i < sizeof(methods) / sizeof(methods[0]); i++)
		known = known || (m->val_len == strlen(methods[i]) &&
		                  memcmp(m->val, methods[i], m->val_len) == 0);
	if (!known) {
		snprintf(msg, sizeof(msg), "Invalid Access-Control-Request-Method: %.*s",
		         m ? (int)(m->val_len > 64 ? 64 : m->val_len) : 4, m ? m->val : "null");
		return s3_rq_error(rq, S3E_BAD_REQUEST, msg);
	}
	if (!rq->bucket[0] || strcmp(rq->bucket, S3_RESERVED_BUCKET) == 0 ||
	    rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi) < 0)
		return s3_rq_error(rq, S3E_ACCESS_FORBIDDEN, "CORSResponse: Bucket not found");
	return s3_rq_error(rq, S3E_ACCESS_FORBIDDEN,
	                   "CORSResponse: CORS is not enabled for this bucket.");
}

int
s3_ops_begin(struct s3_req *rq)
{
	enum s3_err e;

	if (s3_rq_method_is(rq, "OPTIONS"))
		return cors_preflight(rq);

	e = s3_sigv4_verify(&rq->http, &rq->creds, time(NULL), &rq->auth);
	if (e) {
		if (!rq->resource)
			route(rq); /* for the Resource of the error body */
		return s3_rq_error(rq, e, rq->auth.msg);
	}
	e = route(rq);
	if (e)
		return s3_rq_error(rq, e, NULL);
	if (strcmp(rq->bucket, S3_RESERVED_BUCKET) == 0)
		return s3_rq_error(rq, S3E_INVALID_BUCKET_NAME, NULL);
	if (s3_refuse_unsupported(rq))
		return 0;
	return dispatch(rq);
}

int
s3_ops_body(struct s3_req *rq, const uint8_t *p, size_t n)
{
	if (rq->body_mode == S3_BODY_STREAM && rq->put)
		return s3_put_body(rq, p, n);
	if (rq->body_mode == S3_BODY_COLLECT) {
		s3_metric_copied(S3_COPY_COLLECT, n);
		if (s3_buf_add(&rq->body, p, n) < 0)
			return S3_E(S3E_ENTITY_TOO_LARGE);
		return 0;
	}
	return 0;
}

int
s3_ops_end(struct s3_req *rq)
{
	switch (rq->op) {
	case S3_OP_PUT_OBJECT:
	case S3_OP_MPU_PART:
		return s3_put_end(rq);
	case S3_OP_CREATE_BUCKET:
		return s3_bucket_create_end(rq);
	case S3_OP_DELETE_OBJECTS:
		return s3_delete_objects_end(rq);
	case S3_OP_MPU_COMPLETE:
		return s3_mpu_complete_end(rq);
	default:
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	}
}

void
s3_ops_abort(struct s3_req *rq, enum s3_err err)
{
	s3_put_free(rq);
	if (err != S3_OK && !rq->head_sent)
		s3_resp_error(rq, err, NULL);
}

void
s3_req_fini(struct s3_req *rq)
{
	s3_put_free(rq);
	if (rq->aws_chunked)
		s3_chunked_fini(&rq->aws);
	rq->aws_chunked = false;
	s3_buf_fini(&rq->body);
	free(rq->key);
	free(rq->resource);
	free(rq->head_copy);
	rq->key = rq->resource = rq->head_copy = NULL;
}

int
s3_ops_init_backend(const struct s3_backend *be)
{
	int rc = be->bucket_create(be->ctx, S3_RESERVED_BUCKET);

	if (rc < 0 && s3_err_from_errno(rc) != S3E_BUCKET_EXISTS_OWNED)
		return rc;
	return 0;
}
