/*
 * s3_bucket: bucket operations (ListBuckets, CreateBucket, DeleteBucket, HeadBucket,
 * location and versioning) and object listings (ListObjects v1 and v2).
 */
#include <ctype.h>
#include <limits.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3_ops_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ buckets */

/*
 * ListBuckets. max-buckets (1..10000) pages the list; continuation-token is the base64 of
 * the last name of the page before (opaque to clients); prefix and bucket-region filter.
 * As in S3, a request with a prefix, token or region but no max-buckets gets pages of
 * 10000, and one with none of them every bucket.
 */
#define LIST_BUCKETS_CAP 20000
#define BUCKET_NAME_MAX  ZC_BUCKET_NAME_MAX

/* S3 pages by 10000 when any of these is given without max-buckets. */
static bool
has_prefix_or_more(const struct s3_req *rq)
{
	return s3_rq_has_query(rq, "prefix") || s3_rq_has_query(rq, "continuation-token") ||
	       s3_rq_has_query(rq, "bucket-region");
}

/*
 * A bucket this ListBuckets shows: every bucket of the gateway is in its one region. Not
 * the reserved bucket, nor a name no client could have made (one a datanode took before it
 * checked names): one bad name must not spoil the XML of every client's list.
 */
static bool
bucket_listed(const struct s3_req *rq, const char *name, const char *prefix, const char *after,
              const char *region)
{
	return zc_bucket_name_valid(name) && strncmp(name, prefix, strlen(prefix)) == 0 &&
	       strcmp(name, after) > 0 && (!region[0] || strcmp(region, rq->cfg->region) == 0);
}

int
s3_op_list_buckets(struct s3_req *rq)
{
	char mb[16] = "", prefix[S3_MAX_KEY + 1] = "", region[64] = "";
	char token[128] = "", after[BUCKET_NAME_MAX + 1] = "";
	unsigned long max = LIST_BUCKETS_CAP;
	struct s3_bucket_info *bi;
	bool has_prefix, more = false;
	int n, rc, shown = 0, last = -1;
	struct s3_buf x;

	if (s3_rq_query(rq, "max-buckets", mb, sizeof(mb)) != 0) {
		if (s3_parse_uint(mb, ULONG_MAX, &max) < 0 || max < 1 || max > 10000)
			return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
			                   "Argument max-buckets must be an integer between 1 and "
			                   "10000.");
	} else if (has_prefix_or_more(rq)) {
		max = 10000;
	}
	rc = s3_rq_query(rq, "prefix", prefix, sizeof(prefix));
	has_prefix = rc == 1;
	if (rc < 0 || s3_rq_query(rq, "bucket-region", region, sizeof(region)) < 0)
		return s3_rq_error(rq, S3E_INVALID_ARGUMENT, NULL);
	rc = s3_rq_query(rq, "continuation-token", token, sizeof(token));
	if (rc < 0)
		return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
		                   "The continuation token provided is incorrect");
	if (token[0]) {
		int tl = s3_b64_decode(token, strlen(token), (uint8_t *)after, sizeof(after) - 1);

		if (tl < 0)
			return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
			                   "The continuation token provided is incorrect");
		after[tl] = '\0';
		if ((size_t)tl != strlen(after) || !zc_bucket_name_valid(after))
			return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
			                   "The continuation token provided is incorrect");
	}
	bi = calloc(LIST_BUCKETS_CAP, sizeof(*bi));
	if (!bi)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	n = rq->be->bucket_list(rq->be->ctx, bi, LIST_BUCKETS_CAP);
	if (n < 0) {
		free(bi);
		return s3_rq_backend_error(rq, n);
	}
	s3_buf_init(&x, 4u << 20);
	s3_buf_adds(&x, XML_DECL "<ListAllMyBucketsResult xmlns=\"" S3_NS "\"><Buckets>");
	for (int i = 0; i < n; i++) {
		char t[32];

		if (!bucket_listed(rq, bi[i].name, prefix, after, region))
			continue;
		if ((unsigned long)shown == max) {
			more = true;
			break;
		}
		s3_xml_time(bi[i].ctime_ns, t);
		s3_buf_adds(&x, "<Bucket><Name>");
		s3_buf_add_xml(&x, bi[i].name, strlen(bi[i].name));
		s3_buf_printf(&x, "</Name><CreationDate>%s</CreationDate><BucketRegion>", t);
		s3_buf_add_xml(&x, rq->cfg->region, strlen(rq->cfg->region));
		s3_buf_adds(&x, "</BucketRegion></Bucket>");
		shown++;
		last = i;
	}
	s3_buf_adds(&x, "</Buckets><Owner><ID>zest</ID><DisplayName>zest</DisplayName></Owner>");
	if (more) { /* a token only when a bucket follows this page */
		char t[4 * ((BUCKET_NAME_MAX + 2) / 3) + 1];

		s3_b64_encode((const uint8_t *)bi[last].name, strlen(bi[last].name), t);
		s3_buf_printf(&x, "<ContinuationToken>%s</ContinuationToken>", t);
	}
	if (has_prefix) {
		s3_buf_adds(&x, "<Prefix>");
		s3_buf_add_xml(&x, prefix, strlen(prefix));
		s3_buf_adds(&x, "</Prefix>");
	}
	s3_buf_adds(&x, "</ListAllMyBucketsResult>");
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
	/* For legacy compatibility us-east-1 answers 200 to re-creating a bucket one owns;
	 * every other region answers 409 BucketAlreadyOwnedByYou. */
	if (rc < 0 && s3_err_from_errno(rc) == S3E_BUCKET_EXISTS_OWNED &&
	    strcmp(rq->cfg->region, "us-east-1") == 0)
		rc = 0;
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

		/* S3 deletes a bucket that holds no object even with multipart uploads in
		 * progress: they go with it. Objects first (BucketNotEmpty leaves the uploads
		 * alone), then the uploads as Abort removes them (parts, then record: a
		 * failure is retried whole), then the bucket. */
		rc = rq->be->list(rq->be->ctx, rq->bucket, "", "", "", 1, &lr);
		if (rc == 0 && (lr.n || lr.nprefix))
			rc = ZC_E(ZC_BUCKET_NOT_EMPTY);
		s3_list_result_fini(&lr);
		if (rc == 0)
			rc = s3_mpu_drop_bucket(rq);
		if (rc == 0)
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

/* The datanode's rule for a listing's arguments (zc_names.h), with a message: the listing
 * echoes them, and an invalid UTF-8 prefix would make the XML unreadable. */
static bool
list_args_refused(struct s3_req *rq, const char *prefix, const char *delim, const char *after,
                  int *rc)
{
	const char *const args[] = { prefix, delim, after };
	static const char *const names[] = { "prefix", "delimiter",
		                             "start-after, marker or continuation token" };

	for (size_t i = 0; i < 3; i++) {
		const char *why = zc_list_arg_fault(args[i], strlen(args[i]));
		char msg[128];

		if (why) {
			snprintf(msg, sizeof(msg), "The %s %s.", names[i], why);
			*rc = s3_rq_error(rq, S3E_INVALID_ARGUMENT, msg);
			return true;
		}
	}
	return false;
}

int
s3_op_list_objects(struct s3_req *rq, bool v2)
{
	char *prefix = NULL, *delim = NULL, *token = NULL, *start_after = NULL, *marker = NULL;
	char enc[16] = "", mk[16] = "", owner[8] = "";
	unsigned long max_keys = 1000;
	struct s3_list_result lr = { 0 };
	struct s3_buf x;
	bool url, has_token;
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
	has_token = s3_rq_query(rq, "continuation-token", tok_key, cap) == 1;
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
	if (list_args_refused(rq, prefix, delim, after, &rc))
		goto out;
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
		if (has_token) { /* an empty one too, as S3 */
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
