/*
 * s3_object: object operations: GET and HEAD (ranges, preconditions), DELETE, the
 * streamed PUT of objects and multipart parts (every digest in one pass, s3_sum), DeleteObjects.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "s3_ops_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ GET / HEAD */

struct get_ctx {
	struct s3_req *rq;
	bool has_range, suffix;
	uint64_t first, last; /* inclusive; last UINT64_MAX: to the end */
	uint64_t off, len;
	bool not_modified;
	unsigned part_count; /* ?partNumber= of a multipart object: its x-amz-mp-parts-count */
	char part_etag[S3_ETAG_MAX]; /* ?partNumber=: the object the part table came from */
};

/* Parse "bytes=a-b" / "bytes=a-" / "bytes=-n". Returns 1 valid single range, 0 ignore. */
static int
parse_range(const char *v, struct get_ctx *g)
{
	char *end;

	if (strncmp(v, "bytes=", 6) != 0 || strchr(v, ','))
		return 0;
	v += 6;
	if (*v == '-') {
		if (!isdigit((unsigned char)v[1]))
			return 0;
		g->last = strtoull(v + 1, &end, 10);
		if (*end)
			return 0;
		g->suffix = true;
		return 1;
	}
	if (!isdigit((unsigned char)*v))
		return 0;
	g->first = strtoull(v, &end, 10);
	if (*end != '-')
		return 0;
	v = end + 1;
	if (!*v) {
		g->last = UINT64_MAX;
		return 1;
	}
	if (!isdigit((unsigned char)*v))
		return 0;
	g->last = strtoull(v, &end, 10);
	if (*end || g->last < g->first)
		return 0;
	return 1;
}

static void
object_headers(const struct s3_req *rq, const struct s3_obj_info *info, bool ranged,
               struct s3_buf *ex)
{
	char t[64];

	s3_http_time(info->mtime_ns, t, sizeof(t));
	s3_buf_printf(ex, "ETag: \"%s\"\r\nLast-Modified: %s\r\nAccept-Ranges: bytes\r\n",
	              info->etag, t);
	s3_attrs_to_headers(rq, info, ranged, ex);
}

static int
get_on_info(void *arg, const struct s3_obj_info *info)
{
	struct get_ctx *g = arg;
	struct s3_req *rq = g->rq;
	enum s3_err e = s3_preconditions(rq, "", info, S3E_NOT_MODIFIED);
	struct s3_buf ex;
	int status = 200, rc;

	if (e == S3E_NOT_MODIFIED) {
		char t[64];

		/* the validators only (RFC 9110 15.4.5): no body, so no content headers and no
		 * x-amz-checksum-* (botocore validates one against the empty body and fails) */
		g->not_modified = true;
		s3_buf_init(&ex, 1024);
		s3_http_time(info->mtime_ns, t, sizeof(t));
		s3_buf_printf(&ex, "ETag: \"%s\"\r\nLast-Modified: %s\r\n", info->etag, t);
		s3_resp_xml(rq, 304, &ex, NULL);
		s3_buf_fini(&ex);
		return S3_E(S3E_NOT_MODIFIED);
	}
	if (e)
		return S3_E(e);
	if (g->part_etag[0] && strcmp(g->part_etag, info->etag) != 0)
		return ZC_E(ZC_CHANGED); /* replaced since the Stat: retry (SlowDown) */
	g->off = 0;
	g->len = info->size;
	if (g->has_range) {
		uint64_t first = g->first, last = g->last;

		if (g->suffix) {
			if (last == 0)
				return S3_E(S3E_INVALID_RANGE);
			first = last >= info->size ? 0 : info->size - last;
			last = info->size ? info->size - 1 : 0;
		}
		if (first >= info->size)
			return S3_E(S3E_INVALID_RANGE);
		if (last >= info->size)
			last = info->size - 1;
		g->off = first;
		g->len = last - first + 1;
		status = 206;
	}
	s3_buf_init(&ex, 16 * 1024);
	object_headers(rq, info, status == 206, &ex);
	if (status == 206)
		s3_buf_printf(&ex, "Content-Range: bytes %lu-%lu/%lu\r\n", (unsigned long)g->off,
		              (unsigned long)(g->off + g->len - 1), (unsigned long)info->size);
	if (g->part_count)
		s3_buf_printf(&ex, "x-amz-mp-parts-count: %u\r\n", g->part_count);
	rc = s3_resp_head(rq, status, &ex, g->len);
	s3_buf_fini(&ex);
	return rc < 0 ? rc : 0;
}

static int
get_emit(void *arg, const uint8_t *p, size_t n)
{
	struct get_ctx *g = arg;

	return s3_resp_data(g->rq, p, n);
}

/*
 * ?partNumber=N: part N of a multipart object as a range (206, Content-Range and
 * x-amz-mp-parts-count), from the part table Complete recorded. On an object of one
 * PUT, part 1 is the whole object (206 too, as S3 answers) and there is no other part.
 * Returns 0 with g set, 1 when answered (an error), < 0 a backend error.
 */
static int
get_part_range(struct s3_req *rq, const char *num, struct get_ctx *g)
{
	unsigned long pn;
	struct s3_obj_info *info;
	uint64_t off, len;
	unsigned count;
	int rc;

	if (s3_parse_uint(num, 100000, &pn) < 0 || pn < 1 || pn > S3_PARTS_MAX) {
		s3_rq_error(rq, S3E_INVALID_ARGUMENT,
		            "Part number must be an integer between 1 and 10000, inclusive");
		return 1;
	}
	if (s3_rq_hdr(rq, "range")) {
		s3_rq_error(rq, S3E_INVALID_REQUEST,
		            "Cannot specify both Range header and partNumber query parameter");
		return 1;
	}
	info = malloc(sizeof(*info));
	if (!info)
		return -ENOMEM;
	rc = rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info);
	if (rc == 0)
		rc = s3_ptab_locate(rq, info, (unsigned)pn, &off, &len, &count);
	if (rc == -ERANGE) {
		struct s3_buf x;

		free(info);
		s3_buf_init(&x, 4096);
		s3_xml_error(&x, "InvalidPartNumber", "The requested partnumber is not satisfiable",
		             rq->resource, rq->id);
		s3_resp_xml(rq, 416, NULL, &x);
		s3_buf_fini(&x);
		return 1;
	}
	if (rc < 0) {
		free(info);
		return rc;
	}
	snprintf(g->part_etag, sizeof(g->part_etag), "%s", info->etag);
	free(info);
	g->part_count = rc == 0 ? count : 0;
	if (len) { /* an empty object has no range to give: 200 */
		g->has_range = true;
		g->first = off;
		g->last = off + len - 1;
	}
	return 0;
}

/* Open the read pulled, answer the head, and hand the body to the server, which sends it
 * without ever waiting on the client (a slow reader parks its connection, not a worker). */
static int
get_pulled(struct s3_req *rq, struct get_ctx *g, uint64_t off, uint64_t len, bool has_len)
{
	struct s3_obj_info *info = malloc(sizeof(*info));
	void *st = NULL;
	int rc;

	if (!info)
		return -ENOMEM;
	rc = rq->be->get_open(rq->be->ctx, rq->bucket, rq->key, off, len, has_len, info, &st);
	if (rc == 0)
		rc = get_on_info(g, info);
	free(info);
	if (rc == 0 && st)
		return s3_resp_stream(rq, st);
	if (st)
		rq->be->get_close(st);
	return rc;
}

/* The backend's read, pulled when it can be. */
static int
get_read(struct s3_req *rq, struct get_ctx *g, uint64_t off, uint64_t len, bool has_len)
{
	if (rq->be->get_open)
		return get_pulled(rq, g, off, len, has_len);
	return s3_backend_get(rq->be, rq->bucket, rq->key, off, len, has_len, get_on_info, get_emit,
	                      g);
}

int
s3_op_get_object(struct s3_req *rq)
{
	struct get_ctx g = { .rq = rq };
	char rv[128];
	int rc;

	rc = s3_rq_query(rq, "partNumber", rv, sizeof(rv));
	if (rc != 0) {
		if (rc < 0)
			rv[0] = '\0'; /* undecodable: refused as not a number */
		rc = get_part_range(rq, rv, &g);
		if (rc > 0)
			return 0;
		if (rc < 0)
			return s3_rq_backend_error(rq, rc);
	} else if (s3_rq_hdr_str(rq, "range", rv, sizeof(rv))) {
		g.has_range = parse_range(rv, &g) == 1;
	}
	if (rq->is_head) {
		struct s3_obj_info *info = malloc(sizeof(*info));

		if (!info)
			return s3_rq_error(rq, S3E_INTERNAL, NULL);
		rc = rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info);
		if (rc == 0)
			rc = get_on_info(&g, info);
		free(info);
	} else if (g.has_range && g.suffix) {
		/* the offset depends on the size: learn it first */
		struct s3_obj_info *info = malloc(sizeof(*info));

		if (!info)
			return s3_rq_error(rq, S3E_INTERNAL, NULL);
		rc = rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info);
		if (rc == 0) {
			uint64_t last = g.last;

			g.suffix = false;
			g.first = last >= info->size ? 0 : info->size - last;
			g.last = UINT64_MAX;
			if (last == 0)
				rc = S3_E(S3E_INVALID_RANGE);
			else if (info->size == 0)
				g.has_range = false;
		}
		free(info);
		if (rc == 0)
			rc = get_read(rq, &g, g.first,
			              g.last == UINT64_MAX ? 0 : g.last - g.first + 1,
			              g.last != UINT64_MAX);
	} else {
		rc = get_read(rq, &g, g.has_range ? g.first : 0,
		              g.has_range && g.last != UINT64_MAX ? g.last - g.first + 1 : 0,
		              g.has_range && g.last != UINT64_MAX);
	}
	if (rc < 0 && !rq->head_sent) {
		enum s3_err e = s3_err_from_errno(rc);

		if (e == S3E_INVALID_RANGE) {
			struct s3_obj_info *info = malloc(sizeof(*info));
			struct s3_buf x, ex;

			s3_buf_init(&x, 4096);
			s3_buf_init(&ex, 256);
			if (info && rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info) == 0)
				s3_buf_printf(&ex, "Content-Range: bytes */%lu\r\n",
				              (unsigned long)info->size);
			free(info);
			s3_xml_error(&x, "InvalidRange", s3_err_info(e)->message, rq->resource,
			             rq->id);
			s3_resp_xml(rq, 416, &ex, &x);
			s3_buf_fini(&x);
			s3_buf_fini(&ex);
			return 0;
		}
		return s3_rq_error(rq, e, NULL);
	}
	if (rc < 0)
		rq->close = true; /* the body stopped short: the client must see it */
	else if (!rq->head_sent)
		s3_rq_error(rq, S3E_INTERNAL, NULL);
	return 0;
}

int
s3_op_delete_object(struct s3_req *rq)
{
	bool existed = false;
	int rc = rq->be->del(rq->be->ctx, rq->bucket, rq->key, &existed);

	if (rc < 0 && s3_err_from_errno(rc) != S3E_NO_SUCH_KEY)
		return s3_rq_backend_error(rq, rc);
	s3_resp_xml(rq, 204, NULL, NULL);
	return 0;
}

/* ------------------------------------------------------------------ PUT (object, part) */

void
s3_put_free(struct s3_req *rq)
{
	struct s3_put *p = rq->put;

	if (!p)
		return;
	if (p->stream)
		rq->be->put_abort(p->stream);
	s3_sum_fini(&p->sum);
	s3_buf_fini(&p->attrs);
	free(p);
	rq->put = NULL;
}

int
s3_op_put_begin(struct s3_req *rq, bool is_part)
{
	struct s3_put *p;
	char v[128];
	uint64_t size = 0;
	bool size_known = false;
	const struct s3_hdr *h;
	int rc;
	char store_key[160];
	const char *sbucket = rq->bucket, *skey = rq->key;

	if (s3_rq_hdr(rq, "x-amz-copy-source"))
		return s3_op_copy(rq, is_part);
	p = calloc(1, sizeof(*p));
	if (!p)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	rq->put = p;
	p->is_part = is_part;
	if (!is_part) { /* checked by the backend in the commit */
		enum s3_err ce = s3_cond_parse(rq, &p->cond);

		if (ce)
			return s3_rq_error(rq, ce, NULL);
	}
	s3_buf_init(&p->attrs, S3_ATTRS_MAX - 64);

	/* framing: aws-chunked or plain */
	if (rq->auth.payload == S3_PAYLOAD_STREAMING ||
	    rq->auth.payload == S3_PAYLOAD_STREAMING_TRAILER ||
	    rq->auth.payload == S3_PAYLOAD_UNSIGNED_TRAILER) {
		if (!s3_rq_hdr_str(rq, "x-amz-decoded-content-length", v, sizeof(v))) {
			if (!rq->http.chunked)
				return s3_rq_error(rq, S3E_MISSING_CONTENT_LENGTH, NULL);
		} else {
			unsigned long long d;
			char *end;

			errno = 0;
			d = strtoull(v, &end, 10);
			if (!*v || *end || errno || !isdigit((unsigned char)*v))
				return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
				                   "Invalid x-amz-decoded-content-length");
			size = d;
			size_known = true;
		}
		if (s3_chunked_init(&rq->aws, rq->auth.payload, &rq->auth) < 0)
			return s3_rq_error(rq, S3E_INTERNAL, NULL);
		rq->aws_chunked = true;
	} else if (rq->http.has_length) {
		size = rq->http.content_length;
		size_known = true;
	} else if (!rq->http.chunked) {
		return s3_rq_error(rq, S3E_MISSING_CONTENT_LENGTH, NULL);
	}
	if (size_known && size > (is_part ? MAX_PART : rq->cfg->max_object))
		return s3_rq_error(rq, S3E_ENTITY_TOO_LARGE, NULL);
	rq->body_expected = size;
	rq->body_size_known = size_known;

	if (s3_rq_hdr_str(rq, "content-md5", v, sizeof(v))) {
		if (s3_b64_decode(v, strlen(v), p->content_md5, 16) != 16)
			return s3_rq_error(rq, S3E_INVALID_DIGEST, NULL);
		p->has_md5 = true;
	}
	/* flexible checksums: a header with the value, the SDK's algorithm, or the trailer */
	for (unsigned i = 0; i < rq->http.nhdr; i++) {
		h = &rq->http.hdr[i];
		if (h->name_len > 15 && strncasecmp(h->name, "x-amz-checksum-", 15) == 0) {
			unsigned ck = s3_ck_from_name(h->name + 15, h->name_len - 15);

			if (!ck) {
				if (h->name_len == 24 &&
				    strncasecmp(h->name, "x-amz-checksum-algorithm", 24) == 0)
					continue;
				if (h->name_len == 19 &&
				    strncasecmp(h->name, "x-amz-checksum-type", 19) == 0)
					continue;
				if (h->name_len == 19 &&
				    strncasecmp(h->name, "x-amz-checksum-mode", 19) == 0)
					continue;
				return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
				                   "Unknown checksum algorithm");
			}
			if (p->hdr_ck || h->val_len >= sizeof(p->hdr_ck_val))
				return s3_rq_error(rq, S3E_INVALID_REQUEST,
				                   "Expecting a single x-amz-checksum- header");
			p->hdr_ck = ck;
			memcpy(p->hdr_ck_val, h->val, h->val_len);
			p->hdr_ck_val[h->val_len] = '\0';
		}
	}
	p->want_ck = p->hdr_ck;
	if (!p->want_ck && s3_rq_hdr_str(rq, "x-amz-sdk-checksum-algorithm", v, sizeof(v)))
		p->want_ck = s3_ck_from_name(v, strlen(v));
	if (s3_rq_hdr_str(rq, "x-amz-trailer", v, sizeof(v))) {
		if (strncasecmp(v, "x-amz-checksum-", 15) != 0 ||
		    !s3_ck_from_name(v + 15, strlen(v + 15)))
			return s3_rq_error(rq, S3E_INVALID_ARGUMENT, "Unsupported x-amz-trailer");
		if (!rq->aws_chunked)
			return s3_rq_error(rq, S3E_INVALID_REQUEST,
			                   "x-amz-trailer needs an aws-chunked body");
		p->want_ck = s3_ck_from_name(v + 15, strlen(v + 15));
	}

	if (is_part) {
		char num[16], uid[64];
		unsigned long pn;
		struct mpu_rec *r = calloc(1, sizeof(*r));

		if (!r)
			return s3_rq_error(rq, S3E_INTERNAL, NULL);
		if (s3_rq_query(rq, "partNumber", num, sizeof(num)) != 1 ||
		    s3_parse_uint(num, 100000, &pn) < 0 || pn < 1 || pn > 10000 ||
		    s3_rq_query(rq, "uploadId", uid, sizeof(uid)) != 1) {
			free(r);
			return s3_rq_error(
			        rq, S3E_INVALID_ARGUMENT,
			        "Part number must be an integer between 1 and 10000, inclusive");
		}
		rc = s3_mpu_load(rq, uid, r);
		/* an Abort or a Complete took the upload: no more parts (S3_MPU_OPEN only) */
		if (rc == 0 && s3_mpu_rec_state(r) != S3_MPU_OPEN)
			rc = S3_E(S3E_NO_SUCH_UPLOAD);
		if (rc == 0) {
			unsigned ck = s3_mpu_rec_ck(r);

			if (ck && p->want_ck && ck != p->want_ck)
				rc = S3_E(S3E_INVALID_REQUEST);
			if (ck)
				p->want_ck = ck;
		}
		s3_buf_fini(&r->key);
		free(r);
		if (rc < 0)
			return s3_rq_backend_error(rq, rc);
		p->part = (unsigned)pn;
		snprintf(p->upload_id, sizeof(p->upload_id), "%s", uid);
		snprintf(store_key, sizeof(store_key), MPU_PART "%s/%05u", uid, p->part);
		sbucket = S3_RESERVED_BUCKET;
		skey = store_key;
	} else if (s3_attrs_collect(rq, &p->attrs) != S3_OK) {
		return s3_rq_error(rq, S3E_METADATA_TOO_LARGE, NULL);
	}
	{
		unsigned mask = S3_CK_MD5 | p->want_ck;

		if (rq->auth.payload == S3_PAYLOAD_HASH)
			mask |= S3_CK_SHA256;
		if (rq->be->put_write_crc)
			mask |= S3_CK_SEG_CRC32C;
		if (s3_sum_init_mb(&p->sum, mask, rq->md5mb) < 0)
			return s3_rq_error(rq, S3E_INTERNAL, NULL);
	}
	rc = rq->be->put_open(rq->be->ctx, sbucket, skey, size, size_known, &p->stream);
	if (rc < 0) {
		p->stream = NULL;
		return s3_rq_backend_error(rq, rc);
	}
	/* From here every decoded byte reaches s3_put_body: the chunk signatures' SHA-256
	 * joins its one pass */
	if (rq->aws_chunked && rq->aws.sha) {
		p->sum.chunk_sha = rq->aws.sha;
		rq->aws.sha_by_emit = true;
	}
	rq->body_mode = S3_BODY_STREAM;
	s3_metric_payload(rq->auth.payload);
	return 0;
}

int
s3_put_body(struct s3_req *rq, const uint8_t *b, size_t n)
{
	struct s3_put *p = rq->put;
	struct zc_seg seg = { b, n, rq->cur_ref };

	if (rq->body_size_known && p->got + n > rq->body_expected)
		return -EMSGSIZE;
	p->got += n;
	s3_sum_update_seg(&p->sum, &seg);
	if (p->sum.mask & S3_CK_SEG_CRC32C)
		return rq->be->put_write_crc(p->stream, &seg, p->sum.seg_crc32c);
	return rq->be->put_write(p->stream, &seg);
}

int
s3_put_end(struct s3_req *rq)
{
	struct s3_put *p = rq->put;
	struct s3_sum_out o;
	char etag[40], ckv[64];
	struct s3_obj_info *info;
	struct s3_buf ex;
	int rc;

	if (rq->body_size_known && p->got != rq->body_expected)
		return s3_rq_error(rq, S3E_INCOMPLETE_BODY, NULL);
	s3_sum_final(&p->sum, &o);
	if (rq->auth.payload == S3_PAYLOAD_HASH &&
	    CRYPTO_memcmp(o.sha256, rq->auth.payload_sha256, 32) != 0)
		return s3_rq_error(rq, S3E_XAMZ_CONTENT_SHA256_MISMATCH, NULL);
	if (p->has_md5 && memcmp(o.md5, p->content_md5, 16) != 0)
		return s3_rq_error(rq, S3E_BAD_DIGEST, NULL);
	if (p->want_ck)
		s3_ck_value(&o, p->want_ck, ckv);
	if (p->hdr_ck && strcmp(ckv, p->hdr_ck_val) != 0) {
		char msg[96];

		snprintf(msg, sizeof(msg),
		         "The %s you specified did not match the calculated checksum.",
		         s3_ck_label(p->hdr_ck));
		return s3_rq_error(rq, S3E_BAD_DIGEST, msg);
	}
	if (rq->aws_chunked && !rq->aws.trailer_ck && s3_rq_hdr(rq, "x-amz-trailer"))
		return s3_rq_error(rq, S3E_MALFORMED_TRAILER,
		                   "The trailing checksum named in x-amz-trailer was not sent.");
	if (rq->aws_chunked && rq->aws.trailer_ck) {
		if (rq->aws.trailer_ck != p->want_ck || strcmp(rq->aws.trailer_val, ckv) != 0) {
			char msg[96];

			snprintf(msg, sizeof(msg),
			         "The %s you specified did not match the calculated checksum.",
			         s3_ck_label(rq->aws.trailer_ck));
			return s3_rq_error(rq, S3E_BAD_DIGEST, msg);
		}
	}
	if (p->want_ck) {
		char name[48];

		snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(p->want_ck));
		s3_attr_add(&p->attrs, name, strlen(name), ckv, strlen(ckv));
		/* a single-request object's checksum covers the whole object */
		if (!p->is_part)
			s3_attr_add(&p->attrs, "x-amz-checksum-type", 19, "FULL_OBJECT", 11);
	}
	if (p->attrs.err)
		return s3_rq_error(
		        rq, S3E_INVALID_ARGUMENT,
		        "Your metadata headers exceed the maximum allowed metadata size.");
	s3_etag_hex(o.md5, etag);
	info = malloc(sizeof(*info));
	if (!info)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	{
		enum s3_err ce = s3_cond_resolve(rq, rq->bucket, rq->key, &p->cond);

		if (ce) { /* nothing committed: s3_put_free aborts the stream */
			free(info);
			return s3_rq_error(rq, ce, NULL);
		}
	}
	rc = rq->be->put_commit(p->stream, etag, p->attrs.p ? p->attrs.p : "", p->attrs.len,
	                        &p->cond.c, info);
	p->stream = NULL;
	free(info);
	if (rc < 0)
		return s3_rq_commit_error(rq, &p->cond, rc);
	s3_buf_init(&ex, 1024);
	s3_buf_printf(&ex, "ETag: \"%s\"\r\n", etag);
	if (p->want_ck)
		s3_buf_printf(&ex, "x-amz-checksum-%s: %s\r\n", s3_ck_name(p->want_ck), ckv);
	s3_resp_xml(rq, 200, &ex, NULL);
	s3_buf_fini(&ex);
	return 0;
}

int
s3_delete_objects_end(struct s3_req *rq)
{
	struct s3_delete_req d;
	struct s3_bucket_info bi;
	struct s3_buf x;
	enum s3_err e;
	int rc;

	if (rq->body.err)
		return s3_rq_error(rq, S3E_MALFORMED_XML, NULL);
	e = s3_body_collect_verify(rq);
	if (e)
		return s3_rq_error(rq, e, NULL);
	rc = s3_xml_parse_delete(rq->body.p ? rq->body.p : "", rq->body.len, &d);
	if (rc < 0)
		return s3_rq_error(rq, S3E_MALFORMED_XML, NULL);
	if (!s3_rq_has_integrity_header(rq)) {
		s3_delete_req_fini(&d);
		return s3_rq_error(rq, S3E_INVALID_REQUEST,
		                   "Missing required header for this request: Content-MD5 or "
		                   "x-amz-checksum-*");
	}
	rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
	if (rc < 0) {
		s3_delete_req_fini(&d);
		return s3_rq_backend_error(rq, rc);
	}
	s3_buf_init(&x, 8u << 20);
	s3_buf_adds(&x, XML_DECL "<DeleteResult xmlns=\"" S3_NS "\">");
	for (size_t i = 0; i < d.n; i++) {
		bool existed;
		enum s3_err ke = s3_key_check(d.keys[i], strlen(d.keys[i]));

		if (!ke) {
			rc = rq->be->del(rq->be->ctx, rq->bucket, d.keys[i], &existed);
			if (rc < 0 && s3_err_from_errno(rc) != S3E_NO_SUCH_KEY)
				ke = s3_err_from_errno(rc);
		}
		if (ke) {
			s3_buf_adds(&x, "<Error>");
			s3_xml_key(&x, "Key", d.keys[i], false);
			s3_buf_printf(&x, "<Code>%s</Code><Message>", s3_err_info(ke)->code);
			s3_buf_add_xml(&x, s3_err_info(ke)->message,
			               strlen(s3_err_info(ke)->message));
			s3_buf_adds(&x, "</Message></Error>");
		} else if (!d.quiet) {
			s3_buf_adds(&x, "<Deleted>");
			s3_xml_key(&x, "Key", d.keys[i], false);
			s3_buf_adds(&x, "</Deleted>");
		}
	}
	s3_buf_adds(&x, "</DeleteResult>");
	s3_delete_req_fini(&d);
	s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
	return 0;
}
