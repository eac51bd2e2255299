/*
 * s3_bucket: bucket operations (ListBuckets, CreateBucket, DeleteBucket, HeadBucket,
 * location and versioning) and object listings (ListObjects v1 and v2).
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

/* ------------------------------------------------------------------ buckets */

int
s3_op_list_buckets(struct s3_req *rq)
{
	struct s3_bucket_info *bi = calloc(1024, sizeof(*bi));
	struct s3_buf x;
	int n;

	if (!bi)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	n = rq->be->bucket_list(rq->be->ctx, bi, 1024);
	if (n < 0) {
		free(bi);
		return s3_rq_backend_error(rq, n);
	}
	s3_buf_init(&x, 1 << 20);
	s3_buf_adds(&x, XML_DECL "<ListAllMyBucketsResult xmlns=\"" S3_NS "\"><Owner><ID>zest</ID>"
	                         "<DisplayName>zest</DisplayName></Owner><Buckets>");
	for (int i = 0; i < n; i++) {
		char t[32];

		if (strcmp(bi[i].name, S3_RESERVED_BUCKET) == 0)
			continue;
		s3_xml_time(bi[i].ctime_ns, t);
		s3_buf_adds(&x, "<Bucket><Name>");
		s3_buf_add_xml(&x, bi[i].name, strlen(bi[i].name));
		s3_buf_printf(&x, "</Name><CreationDate>%s</CreationDate></Bucket>", t);
	}
	s3_buf_adds(&x, "</Buckets></ListAllMyBucketsResult>");
	free(bi);
	s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
	return 0;
}

int
s3_bucket_create_end(struct s3_req *rq)
{
	char loc[64];
	struct s3_buf ex;
	int rc;

	if (rq->body.err)
		return s3_rq_error(rq, S3E_MALFORMED_XML, NULL);
	if (s3_xml_parse_create_bucket(rq->body.p ? rq->body.p : "", rq->body.len, loc,
	                               sizeof(loc)))
		return s3_rq_error(rq, S3E_MALFORMED_XML, NULL);
	if (loc[0] && strcmp(loc, rq->cfg->region) != 0 &&
	    !(strcmp(loc, "us-east-1") == 0 && strcmp(rq->cfg->region, "us-east-1") == 0))
		return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
		                   "The specified location-constraint is not valid");
	rc = rq->be->bucket_create(rq->be->ctx, rq->bucket);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	s3_buf_init(&ex, 256);
	s3_buf_printf(&ex, "Location: /%s\r\n", rq->bucket);
	s3_resp_xml(rq, 200, &ex, NULL);
	s3_buf_fini(&ex);
	return 0;
}

int
s3_op_bucket_simple(struct s3_req *rq)
{
	struct s3_bucket_info bi;
	int rc;

	if (s3_rq_method_is(rq, "HEAD")) {
		rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
		if (rc < 0)
			return s3_rq_backend_error(rq, rc);
		struct s3_buf ex;

		s3_buf_init(&ex, 256);
		s3_buf_printf(&ex, "x-amz-bucket-region: %s\r\n", rq->cfg->region);
		s3_resp_xml(rq, 200, &ex, NULL);
		s3_buf_fini(&ex);
		return 0;
	}
	if (s3_rq_method_is(rq, "DELETE")) {
		struct s3_list_result lr = { 0 };
		char prefix[80];

		rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
		if (rc < 0)
			return s3_rq_backend_error(rq, rc);
		/* uploads in progress keep a bucket from being deleted, as in S3 */
		snprintf(prefix, sizeof(prefix), MPU_REC "%s/", rq->bucket);
		rc = rq->be->list(rq->be->ctx, S3_RESERVED_BUCKET, prefix, "", "", 1, &lr);
		if (rc == 0 && lr.n) {
			s3_list_result_fini(&lr);
			return s3_rq_error(rq, S3E_BUCKET_NOT_EMPTY, NULL);
		}
		s3_list_result_fini(&lr);
		rc = rq->be->bucket_delete(rq->be->ctx, rq->bucket);
		if (rc < 0)
			return s3_rq_backend_error(rq, rc);
		s3_resp_xml(rq, 204, NULL, NULL);
		return 0;
	}
	return s3_rq_error(rq, S3E_METHOD_NOT_ALLOWED, NULL);
}

int
s3_op_bucket_meta(struct s3_req *rq, bool location)
{
	struct s3_bucket_info bi;
	struct s3_buf x;
	int rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);

	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	s3_buf_init(&x, 4096);
	if (location) {
		if (strcmp(rq->cfg->region, "us-east-1") == 0)
			s3_buf_adds(&x, XML_DECL "<LocationConstraint xmlns=\"" S3_NS "\"/>");
		else
			s3_buf_printf(&x,
			              XML_DECL "<LocationConstraint xmlns=\"" S3_NS
			                       "\">%s</LocationConstraint>",
			              rq->cfg->region);
	} else {
		s3_buf_adds(&x, XML_DECL "<VersioningConfiguration xmlns=\"" S3_NS "\"/>");
	}
	s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
	return 0;
}

/* ------------------------------------------------------------------ listing */
int
s3_op_list_objects(struct s3_req *rq, bool v2)
{
	char *prefix = NULL, *delim = NULL, *token = NULL, *start_after = NULL, *marker = NULL;
	char enc[16] = "", mk[16] = "", owner[8] = "";
	unsigned long max_keys = 1000;
	struct s3_list_result lr = { 0 };
	struct s3_buf x;
	bool url;
	int rc = 0;
	const char *after;
	char *tok_key = NULL;
	size_t cap = 4 * S3_MAX_KEY + 1;

	prefix = calloc(1, cap);
	delim = calloc(1, cap);
	token = calloc(1, cap);
	start_after = calloc(1, cap);
	marker = calloc(1, cap);
	tok_key = calloc(1, cap);
	if (!prefix || !delim || !token || !start_after || !marker || !tok_key) {
		rc = s3_rq_error(rq, S3E_INTERNAL, NULL);
		goto out;
	}
	if (s3_rq_query(rq, "prefix", prefix, cap) < 0 ||
	    s3_rq_query(rq, "delimiter", delim, cap) < 0 ||
	    s3_rq_query(rq, "continuation-token", token, cap) < 0 ||
	    s3_rq_query(rq, "start-after", start_after, cap) < 0 ||
	    s3_rq_query(rq, "marker", marker, cap) < 0 ||
	    s3_rq_query(rq, "encoding-type", enc, sizeof(enc)) < 0 ||
	    s3_rq_query(rq, "fetch-owner", owner, sizeof(owner)) < 0) {
		rc = s3_rq_error(rq, S3E_INVALID_ARGUMENT, NULL);
		goto out;
	}
	if (s3_rq_query(rq, "max-keys", mk, sizeof(mk)) == 1 &&
	    s3_parse_uint(mk, 1000, &max_keys) < 0) {
		rc = s3_rq_error(rq, S3E_INVALID_ARGUMENT,
		                 "max-keys must be a non-negative integer");
		goto out;
	}
	if (enc[0] && strcmp(enc, "url") != 0) {
		rc = s3_rq_error(rq, S3E_INVALID_ARGUMENT,
		                 "Invalid Encoding Method specified in Request");
		goto out;
	}
	url = enc[0] != '\0';
	after = v2 ? start_after : marker;
	if (v2 && token[0]) {
		int n = s3_b64_decode(token, strlen(token), (uint8_t *)tok_key, cap - 1);

		if (n < 0) {
			rc = s3_rq_error(rq, S3E_INVALID_ARGUMENT,
			                 "The continuation token provided is incorrect");
			goto out;
		}
		tok_key[n] = '\0';
		if (strcmp(tok_key, after) > 0)
			after = tok_key;
	}
	if (max_keys > 0) {
		rc = rq->be->list(rq->be->ctx, rq->bucket, prefix, after, delim, (unsigned)max_keys,
		                  &lr);
		if (rc < 0) {
			rc = s3_rq_backend_error(rq, rc);
			goto out;
		}
	} else {
		struct s3_bucket_info bi;

		rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
		if (rc < 0) {
			rc = s3_rq_backend_error(rq, rc);
			goto out;
		}
	}
	s3_buf_init(&x, 64u << 20);
	s3_buf_adds(&x, XML_DECL "<ListBucketResult xmlns=\"" S3_NS "\"><Name>");
	s3_buf_add_xml(&x, rq->bucket, strlen(rq->bucket));
	s3_buf_adds(&x, "</Name>");
	s3_xml_key(&x, "Prefix", prefix, url);
	if (delim[0])
		s3_xml_key(&x, "Delimiter", delim, url);
	s3_buf_printf(&x, "<MaxKeys>%lu</MaxKeys>", max_keys);
	if (url)
		s3_buf_adds(&x, "<EncodingType>url</EncodingType>");
	s3_buf_printf(&x, "<IsTruncated>%s</IsTruncated>", lr.truncated ? "true" : "false");
	if (v2) {
		s3_buf_printf(&x, "<KeyCount>%zu</KeyCount>", lr.n + lr.nprefix);
		if (token[0]) {
			s3_buf_adds(&x, "<ContinuationToken>");
			s3_buf_add_xml(&x, token, strlen(token));
			s3_buf_adds(&x, "</ContinuationToken>");
		}
		if (start_after[0])
			s3_xml_key(&x, "StartAfter", start_after, url);
		if (lr.truncated && lr.next_start_after) {
			size_t kl = strlen(lr.next_start_after);
			char *t = malloc(4 * ((kl + 2) / 3) + 1);

			if (t) {
				s3_b64_encode((const uint8_t *)lr.next_start_after, kl, t);
				s3_buf_printf(
				        &x, "<NextContinuationToken>%s</NextContinuationToken>", t);
				free(t);
			}
		}
	} else {
		s3_xml_key(&x, "Marker", marker, url);
		if (lr.truncated && lr.next_start_after)
			s3_xml_key(&x, "NextMarker", lr.next_start_after, url);
	}
	for (size_t i = 0; i < lr.n; i++) {
		char t[32];

		s3_xml_time(lr.entries[i].mtime_ns, t);
		s3_buf_adds(&x, "<Contents>");
		s3_xml_key(&x, "Key", lr.entries[i].key, url);
		s3_buf_printf(&x,
		              "<LastModified>%s</LastModified><ETag>&quot;%s&quot;</ETag>"
		              "<Size>%lu</Size><StorageClass>STANDARD</StorageClass>",
		              t, lr.entries[i].etag, (unsigned long)lr.entries[i].size);
		if (!v2 || strcmp(owner, "true") == 0)
			s3_buf_adds(&x,
			            "<Owner><ID>zest</ID><DisplayName>zest</DisplayName></Owner>");
		s3_buf_adds(&x, "</Contents>");
	}
	for (size_t i = 0; i < lr.nprefix; i++) {
		s3_buf_adds(&x, "<CommonPrefixes>");
		s3_xml_key(&x, "Prefix", lr.prefixes[i], url);
		s3_buf_adds(&x, "</CommonPrefixes>");
	}
	s3_buf_adds(&x, "</ListBucketResult>");
	if (x.err)
		s3_rq_error(rq, S3E_INTERNAL, NULL);
	else
		s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
	rc = 0;
out:
	s3_list_result_fini(&lr);
	free(prefix);
	free(delim);
	free(token);
	free(start_after);
	free(marker);
	free(tok_key);
	return rc;
}
