/*
 * s3_copy: CopyObject and UploadPartCopy (a PUT with x-amz-copy-source).
 *
 * Server-side where it can be: the backend composes the target from the source by
 * reference (one part, the source kept), so no byte moves and the datanode checks the
 * target's condition (If-None-Match / If-Match) in its commit transaction. Where it cannot
 * -- the source lives on another datanode (compose says -EXDEV), or a part copy takes a
 * range or needs the part's own MD5 or checksum -- the bytes stream through the gateway:
 * backend get -> put_open / put_write / put_commit, in refcounted 1 MiB chunks.
 *
 * The copy keeps the source's ETag (a multipart source keeps its "-N" ETag); a copied part
 * gets the MD5 of its bytes. Attributes: COPY (the default) takes the source's, REPLACE
 * the request's headers; the source's x-amz-checksum-* stay in both (same bytes).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "s3_ops_internal.h"
#include "zc.h"

#define COPY_MAX   (5ull << 30) /* largest source CopyObject takes, as AWS */
#define COPY_CHUNK (1u << 20)   /* bytes per put_write of a streamed copy */

static const char copy_too_large[] = "The specified copy source is larger than the maximum "
                                     "allowable size for a copy source: 5368709120";

struct copy {
	char bucket[64]; /* the source */
	char *key;
	struct s3_obj_info info; /* the source as stat'ed */
	struct s3_obj_info out;  /* the target as committed */
	struct s3_wcond cond;    /* on the target */
};

/* ------------------------------------------------------------------ the request */

/*
 * x-amz-copy-source: URL-encoded "bucket/key", optionally with a leading '/' and a
 * "?versionId=". Buckets here are unversioned: "null" (the only version such an object
 * has) is taken, any other id is refused as AWS refuses it.
 */
static enum s3_err
parse_source(const struct s3_req *rq, struct copy *c, const char **msg)
{
	const struct s3_hdr *h = s3_rq_hdr(rq, "x-amz-copy-source");
	const char *v = h->val, *q = memchr(h->val, '?', h->val_len), *p, *slash;
	size_t n = q ? (size_t)(q - v) : h->val_len;
	char *dec;
	int dl;

	*msg = "Copy Source must mention the source bucket and key: sourcebucket/sourcekey";
	if (q) {
		size_t ql = h->val_len - n - 1;

		if (!(ql == 14 && memcmp(q + 1, "versionId=null", 14) == 0)) {
			*msg = "Invalid version id specified";
			return S3E_INVALID_ARGUMENT;
		}
	}
	dec = malloc(n + 1);
	if (!dec)
		return S3E_INTERNAL;
	dl = s3_uri_decode(v, n, dec, n + 1, false);
	if (dl < 0 || (size_t)dl != strlen(dec)) {
		free(dec);
		return S3E_INVALID_ARGUMENT;
	}
	p = dec[0] == '/' ? dec + 1 : dec;
	slash = strchr(p, '/');
	if (!slash || slash == p || !slash[1] || (size_t)(slash - p) >= sizeof(c->bucket)) {
		free(dec);
		return S3E_INVALID_ARGUMENT;
	}
	memcpy(c->bucket, p, (size_t)(slash - p));
	c->bucket[slash - p] = '\0';
	c->key = strdup(slash + 1);
	free(dec);
	if (!c->key)
		return S3E_INTERNAL;
	*msg = NULL;
	if (!zc_bucket_name_valid(c->bucket))
		return S3E_INVALID_BUCKET_NAME;
	return s3_key_check(c->key, strlen(c->key));
}

/* "bytes=first-last", both given, within size. 1 valid, 0 malformed, -1 out of range. */
static int
parse_copy_range(const char *v, uint64_t size, uint64_t *first, uint64_t *last)
{
	char *end;

	if (strncmp(v, "bytes=", 6) != 0 || v[6] < '0' || v[6] > '9')
		return 0;
	*first = strtoull(v + 6, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return 0;
	*last = strtoull(end + 1, &end, 10);
	if (*end || *last < *first)
		return 0;
	return *last < size ? 1 : -1;
}

/* The reply: <tag><LastModified/><ETag/> and the source's plain checksums. The ETag also
 * goes in a header: minio-go (7.0.46) reads a CopyObject's ETag there, as MinIO sends it. */
static void
reply_result(struct s3_req *rq, const char *tag, const char *etag, uint64_t mtime_ns,
             const char *attrs, size_t attrs_len)
{
	static const char *const names[] = { "CRC32", "CRC32C", "CRC64NVME", "SHA1", "SHA256" };
	struct s3_buf x, hdrs;
	char t[32];

	s3_xml_time(mtime_ns, t);
	s3_buf_init(&hdrs, 128);
	s3_buf_printf(&hdrs, "ETag: \"%s\"\r\n", etag);
	s3_buf_init(&x, 8192);
	s3_buf_printf(&x, XML_DECL "<%s xmlns=\"" S3_NS "\"><LastModified>%s</LastModified><ETag>",
	              tag, t);
	s3_buf_adds(&x, "&quot;");
	s3_buf_add_xml(&x, etag, strlen(etag));
	s3_buf_adds(&x, "&quot;</ETag>");
	for (unsigned i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		char name[48];
		const char *v;
		int vl;

		snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(1u << i));
		vl = s3_attr_get(attrs, attrs_len, name, &v);
		if (vl <= 0 || memchr(v, '-', (size_t)vl)) /* a multipart composite: left out */
			continue;
		s3_buf_printf(&x, "<Checksum%s>", names[i]);
		s3_buf_add_xml(&x, v, (size_t)vl);
		s3_buf_printf(&x, "</Checksum%s>", names[i]);
	}
	s3_buf_printf(&x, "</%s>", tag);
	s3_resp_xml(rq, 200, &hdrs, &x);
	s3_buf_fini(&x);
	s3_buf_fini(&hdrs);
}

/* ------------------------------------------------------------------ streamed copy */

struct chunk {
	struct zc_ref ref; /* first: the release callback frees the chunk */
	size_t len;
	uint8_t data[COPY_CHUNK];
};

struct pump {
	const struct s3_backend *be;
	const char *want_etag;
	void *stream;
	struct s3_sum sum;
	struct chunk *cur;
	uint64_t got;
};

static void
chunk_release(struct zc_ref *ref)
{
	free((struct chunk *)ref);
}

/* Hand the current chunk to the backend, which takes its own reference if it keeps it. */
static int
pump_flush(struct pump *pp)
{
	struct chunk *ch = pp->cur;
	struct zc_seg seg;
	int rc;

	if (!ch)
		return 0;
	pp->cur = NULL;
	seg = (struct zc_seg){ ch->data, ch->len, &ch->ref };
	s3_sum_update_seg(&pp->sum, &seg); /* the chunk's bytes, by reference */
	rc = ch->len ? pp->be->put_write(pp->stream, &seg) : 0;
	zc_ref_put(&ch->ref);
	return rc;
}

static int
pump_info(void *arg, const struct s3_obj_info *info)
{
	struct pump *pp = arg;

	/* overwritten since its stat: the etag and attributes in hand are not its own;
	 * SlowDown, and the client's retry copies the new version */
	return strcmp(info->etag, pp->want_etag) == 0 ? 0 : ZC_E(ZC_CHANGED);
}

static int
pump_emit(void *arg, const uint8_t *p, size_t n)
{
	struct pump *pp = arg;

	pp->got += n;
	while (n) {
		size_t take;

		if (!pp->cur) {
			pp->cur = malloc(sizeof(*pp->cur));
			if (!pp->cur)
				return -ENOMEM;
			zc_ref_init(&pp->cur->ref, chunk_release);
			pp->cur->len = 0;
		}
		take = COPY_CHUNK - pp->cur->len;
		if (take > n)
			take = n;
		memcpy(pp->cur->data + pp->cur->len, p, take);
		pp->cur->len += take;
		p += take;
		n -= take;
		if (pp->cur->len == COPY_CHUNK) {
			int rc = pump_flush(pp);

			if (rc < 0)
				return rc;
		}
	}
	return 0;
}

/*
 * Stream [off, off+len) of the source into a new write of db/dk and commit it with etag
 * (NULL: the MD5 of the bytes) and attrs; ck (0: none) is computed too and its value
 * appended to attrs as x-amz-checksum-<ck> (ckv gets it). Returns 0 or -errno; the
 * target is untouched on failure.
 */
static int
copy_stream(struct s3_req *rq, struct copy *c, uint64_t off, uint64_t len, const char *db,
            const char *dk, const char *etag, struct s3_buf *attrs, unsigned ck, char *ckv,
            char *etag_out)
{
	const struct s3_backend *be = rq->be;
	struct pump pp = { .be = be, .want_etag = c->info.etag };
	struct s3_sum_out o;
	int rc;

	if (s3_sum_init_mb(&pp.sum, (etag ? 0 : S3_CK_MD5) | ck, rq->md5mb) < 0)
		return -ENOMEM;
	rc = be->put_open(be->ctx, db, dk, len, true, &pp.stream);
	if (rc < 0) {
		s3_sum_fini(&pp.sum);
		return rc;
	}
	rc = s3_backend_get(be, c->bucket, c->key, off, len, true, pump_info, pump_emit, &pp);
	if (rc == 0)
		rc = pump_flush(&pp);
	if (rc == 0 && pp.got != len)
		rc = ZC_E(ZC_CHANGED); /* the source changed size under us */
	if (rc < 0) {
		if (pp.cur)
			zc_ref_put(&pp.cur->ref);
		be->put_abort(pp.stream);
		s3_sum_fini(&pp.sum);
		return rc;
	}
	s3_sum_final(&pp.sum, &o);
	s3_sum_fini(&pp.sum);
	if (etag)
		snprintf(etag_out, S3_ETAG_MAX, "%s", etag);
	else
		s3_etag_hex(o.md5, etag_out);
	if (ck) {
		char name[48];

		s3_ck_value(&o, ck, ckv);
		snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(ck));
		s3_attr_add(attrs, name, strlen(name), ckv, strlen(ckv));
	}
	if (attrs->err) {
		be->put_abort(pp.stream);
		return attrs->err;
	}
	return be->put_commit(pp.stream, etag_out, attrs->p ? attrs->p : "", attrs->len, &c->cond.c,
	                      &c->out);
}

/* ------------------------------------------------------------------ CopyObject */

/* Attributes of the copy: the source's (COPY) or the request's (REPLACE) + its checksums.
 * Returns S3_OK or S3E_METADATA_TOO_LARGE (REPLACE's user metadata over the limit). */
static enum s3_err
copy_attrs(const struct s3_req *rq, const struct copy *c, bool replace, struct s3_buf *b)
{
	const char *a = c->info.attrs;
	enum s3_err e = S3_OK;
	size_t i = 0;

	if (replace)
		e = s3_attrs_collect(rq, b);
	while (i < c->info.attrs_len) {
		const char *eol = memchr(a + i, '\n', c->info.attrs_len - i);
		size_t ll = eol ? (size_t)(eol - a - i) : c->info.attrs_len - i;

		if (!replace || (ll > 15 && strncmp(a + i, "x-amz-checksum-", 15) == 0)) {
			s3_buf_add(b, a + i, ll);
			s3_buf_add(b, "\n", 1);
		}
		i += ll + 1;
	}
	return e;
}

/* Stat the copy source into c->info and check its x-amz-copy-source-if-* conditions:
 * true to go on, false when the request has been answered with the error. */
static bool
source_ready(struct s3_req *rq, struct copy *c)
{
	int rc = rq->be->stat(rq->be->ctx, c->bucket, c->key, &c->info);
	enum s3_err e;

	if (rc < 0) {
		s3_rq_backend_error(rq, rc);
		return false;
	}
	e = s3_preconditions(rq, "x-amz-copy-source-", &c->info, S3E_PRECONDITION_FAILED);
	if (e) {
		s3_rq_error(rq, e, NULL);
		return false;
	}
	return true;
}

static int
copy_object(struct s3_req *rq, struct copy *c)
{
	struct s3_objref src = { c->bucket, c->key, c->info.etag };
	struct s3_buf attrs;
	char v[32], etag[S3_ETAG_MAX];
	bool replace = false;
	enum s3_err e;
	int rc;

	if (s3_rq_hdr_str(rq, "x-amz-metadata-directive", v, sizeof(v))) {
		if (strcasecmp(v, "REPLACE") == 0)
			replace = true;
		else if (strcasecmp(v, "COPY") != 0)
			return s3_rq_error(rq, S3E_INVALID_ARGUMENT, "Unknown metadata directive.");
	} else if (s3_rq_hdr(rq, "x-amz-metadata-directive")) {
		return s3_rq_error(rq, S3E_INVALID_ARGUMENT, "Unknown metadata directive.");
	}
	e = s3_cond_parse(rq, &c->cond);
	if (e)
		return s3_rq_error(rq, e, NULL);
	if (!source_ready(rq, c))
		return 0;
	if (!replace && strcmp(c->bucket, rq->bucket) == 0 && strcmp(c->key, rq->key) == 0)
		return s3_rq_error(
		        rq, S3E_INVALID_REQUEST,
		        "This copy request is illegal because it is trying to copy an "
		        "object to itself without changing the object's metadata, storage "
		        "class, website redirect location or encryption attributes.");
	if (c->info.size > COPY_MAX)
		return s3_rq_error(rq, S3E_INVALID_REQUEST, copy_too_large);
	s3_buf_init(&attrs, S3_ATTRS_MAX - 64);
	if (copy_attrs(rq, c, replace, &attrs) != S3_OK || attrs.err) {
		s3_buf_fini(&attrs);
		return s3_rq_error(rq, S3E_METADATA_TOO_LARGE, NULL);
	}
	snprintf(etag, sizeof(etag), "%s", c->info.etag);
	{
		enum s3_err ce = s3_cond_resolve(rq, rq->bucket, rq->key, &c->cond);

		if (ce) {
			s3_buf_fini(&attrs);
			return s3_rq_error(rq, ce, NULL);
		}
	}
	rc = rq->be->compose(rq->be->ctx, rq->bucket, rq->key, &src, 1, false, etag,
	                     attrs.p ? attrs.p : "", attrs.len, &c->cond.c, &c->out);
	if (rc == -EXDEV)
		rc = copy_stream(rq, c, 0, c->info.size, rq->bucket, rq->key, c->info.etag, &attrs,
		                 0, NULL, etag);
	if (rc < 0) {
		s3_buf_fini(&attrs);
		return s3_rq_commit_error(rq, &c->cond, rc);
	}
	reply_result(rq, "CopyObjectResult", etag, c->out.mtime_ns, attrs.p ? attrs.p : "",
	             attrs.len);
	s3_buf_fini(&attrs);
	return 0;
}

/* ------------------------------------------------------------------ UploadPartCopy */

static bool
is_md5_hex(const char *etag)
{
	if (strlen(etag) != 32)
		return false;
	for (int i = 0; i < 32; i++)
		if (!((etag[i] >= '0' && etag[i] <= '9') || (etag[i] >= 'a' && etag[i] <= 'f')))
			return false;
	return true;
}

static int
copy_part(struct s3_req *rq, struct copy *c)
{
	char num[16], uid[64], rv[96], store_key[160], etag[S3_ETAG_MAX], ckv[64] = "";
	struct s3_objref src = { c->bucket, c->key, c->info.etag };
	uint64_t first = 0, last = 0, len;
	unsigned long pn;
	bool ranged = false;
	struct s3_buf attrs;
	struct mpu_rec *r;
	unsigned ck = 0;
	int rc;

	if (s3_rq_query(rq, "partNumber", num, sizeof(num)) != 1 ||
	    s3_parse_uint(num, 100000, &pn) < 0 || pn < 1 || pn > 10000 ||
	    s3_rq_query(rq, "uploadId", uid, sizeof(uid)) != 1)
		return s3_rq_error(rq, S3E_INVALID_ARGUMENT,
		                   "Part number must be an integer between 1 and 10000, inclusive");
	r = calloc(1, sizeof(*r));
	if (!r)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	rc = s3_mpu_load(rq, uid, r);
	if (rc == 0 && s3_mpu_rec_state(r) != S3_MPU_OPEN)
		rc = S3_E(S3E_NO_SUCH_UPLOAD); /* an Abort or a Complete took the upload */
	if (rc == 0)
		ck = s3_mpu_rec_ck(r);
	s3_buf_fini(&r->key);
	free(r);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	if (!source_ready(rq, c))
		return 0;
	len = c->info.size;
	if (s3_rq_hdr(rq, "x-amz-copy-source-range")) {
		int pr = s3_rq_hdr_str(rq, "x-amz-copy-source-range", rv, sizeof(rv))
		                 ? parse_copy_range(rv, c->info.size, &first, &last)
		                 : 0;
		char msg[96];

		if (pr == 0)
			return s3_rq_error(
			        rq, S3E_INVALID_ARGUMENT,
			        "The x-amz-copy-source-range value must be of the form "
			        "bytes=first-last where first and last are the zero-based "
			        "offsets of the first and last bytes to copy");
		if (pr < 0) {
			snprintf(msg, sizeof(msg),
			         "Range specified is not valid for source object of size: %llu",
			         (unsigned long long)c->info.size);
			return s3_rq_error(rq, S3E_INVALID_ARGUMENT, msg);
		}
		ranged = true;
		len = last - first + 1;
	}
	if (len > MAX_PART)
		return s3_rq_error(rq, S3E_INVALID_REQUEST, copy_too_large);
	snprintf(store_key, sizeof(store_key), MPU_PART "%s/%05lu", uid, pn);
	s3_buf_init(&attrs, S3_ATTRS_MAX - 64);
	rc = -EXDEV;
	/* The part's ETag is the MD5 of its bytes: the source's own when it is the whole
	 * of a single-part object, and no part checksum is wanted */
	snprintf(etag, sizeof(etag), "%s", c->info.etag);
	if (!ranged && !ck && is_md5_hex(c->info.etag))
		rc = rq->be->compose(rq->be->ctx, S3_RESERVED_BUCKET, store_key, &src, 1, false,
		                     etag, "", 0, NULL, &c->out);
	if (rc == -EXDEV)
		rc = copy_stream(rq, c, first, len, S3_RESERVED_BUCKET, store_key, NULL, &attrs, ck,
		                 ckv, etag);
	if (rc < 0) {
		s3_buf_fini(&attrs);
		return s3_rq_backend_error(rq, rc);
	}
	reply_result(rq, "CopyPartResult", etag, c->out.mtime_ns, attrs.p ? attrs.p : "",
	             attrs.len);
	s3_buf_fini(&attrs);
	return 0;
}

int
s3_op_copy(struct s3_req *rq, bool is_part)
{
	struct copy *c = calloc(1, sizeof(*c));
	const char *msg;
	enum s3_err e;
	int rc;

	if (!c)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	e = parse_source(rq, c, &msg);
	if (e)
		rc = s3_rq_error(rq, e, msg);
	else
		rc = is_part ? copy_part(rq, c) : copy_object(rq, c);
	free(c->key);
	free(c);
	return rc;
}
