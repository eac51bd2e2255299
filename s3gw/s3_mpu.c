/*
 * s3_mpu: multipart uploads: create, complete (Compose of the parts) and abort; the
 * upload records and the part objects in S3_RESERVED_BUCKET.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include <openssl/rand.h>

#include "s3_ops_internal.h"
#include "zc.h"
#include "zc_fault.h"

int
s3_mpu_rec_emit(void *arg, const uint8_t *p, size_t n)
{
	struct mpu_rec *r = arg;

	return s3_buf_add(&r->key, p, n);
}

int
s3_mpu_rec_info(void *arg, const struct s3_obj_info *info)
{
	struct mpu_rec *r = arg;

	r->info = *info;
	return 0;
}

int
s3_mpu_put_record(struct s3_req *rq, const char *rk, const void *body, size_t len, const char *etag,
                  const char *attrs, size_t attrs_len, const struct s3_cond *cond,
                  struct s3_obj_info *info)
{
	void *stream = NULL;
	struct zc_seg seg;
	int rc;

	rc = rq->be->put_open(rq->be->ctx, S3_RESERVED_BUCKET, rk, len, true, &stream);
	if (rc < 0)
		return rc;
	rc = s3_seg_dup(body, len, &seg);
	if (rc == 0) {
		rc = rq->be->put_write(stream, &seg);
		zc_ref_put(seg.ref); /* the backend holds its own while it needs the bytes */
	}
	if (rc < 0) {
		rq->be->put_abort(stream);
		return rc;
	}
	return rq->be->put_commit(stream, etag, attrs, attrs_len, cond, info);
}

int
s3_mpu_load(struct s3_req *rq, const char *upload_id, struct mpu_rec *r)
{
	int rc;

	if (strlen(upload_id) != 32 || strspn(upload_id, "0123456789abcdef") != 32) {
		s3_buf_init(&r->key, S3_MAX_KEY + 1);
		return S3_E(S3E_NO_SUCH_UPLOAD);
	}
	rc = s3_mpu_read(rq, upload_id, r);
	if (rc < 0)
		return rc;
	if (strcmp(r->key.p, rq->key) != 0)
		return S3_E(S3E_NO_SUCH_UPLOAD);
	return 0;
}

unsigned
s3_mpu_rec_ck(const struct mpu_rec *r)
{
	const char *v;
	int n = s3_attr_get(r->info.attrs, r->info.attrs_len, "zest-ck", &v);

	return n > 0 ? s3_ck_from_name(v, (size_t)n) : 0;
}

/* FULL_OBJECT or COMPOSITE, as recorded at create ("zest-ckt"); CRC64NVME is always full. */
bool
s3_mpu_rec_full(const struct mpu_rec *r)
{
	const char *v;
	int n = s3_attr_get(r->info.attrs, r->info.attrs_len, "zest-ckt", &v);

	if (n > 0)
		return n == 11 && strncmp(v, "FULL_OBJECT", 11) == 0;
	return s3_mpu_rec_ck(r) == S3_CK_CRC64NVME;
}

/* ------------------------------------------------------------------ multipart */

int
s3_op_mpu_create(struct s3_req *rq)
{
	uint8_t rnd[16];
	char uid[33], rk[160], v[64], retag[33];
	struct s3_buf attrs, x;
	struct s3_obj_info *info;
	int rc;
	struct s3_bucket_info bi;
	unsigned ck = 0;
	bool full;

	rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	if (s3_rq_hdr_str(rq, "x-amz-checksum-algorithm", v, sizeof(v))) {
		ck = s3_ck_from_name(v, strlen(v));
		if (!ck)
			return s3_rq_error(rq, S3E_INVALID_ARGUMENT, "Unknown checksum algorithm");
	}
	/* S3's default type: COMPOSITE, except CRC64NVME which only has FULL_OBJECT; SHA-1
	 * and SHA-256 cannot be combined, so they have no FULL_OBJECT */
	full = ck == S3_CK_CRC64NVME;
	if (s3_rq_hdr_str(rq, "x-amz-checksum-type", v, sizeof(v))) {
		if (strcasecmp(v, "FULL_OBJECT") == 0)
			full = true;
		else if (strcasecmp(v, "COMPOSITE") == 0)
			full = false;
		else
			return s3_rq_error(rq, S3E_INVALID_REQUEST,
			                   "Value for x-amz-checksum-type header is invalid.");
		if (!ck)
			return s3_rq_error(rq, S3E_INVALID_REQUEST,
			                   "The x-amz-checksum-type header can only be used with "
			                   "the x-amz-checksum-algorithm header.");
	}
	if (ck && full != (ck == S3_CK_CRC64NVME) && ck != S3_CK_CRC32 && ck != S3_CK_CRC32C) {
		char msg[128];

		snprintf(msg, sizeof(msg),
		         "The %s checksum type cannot be used with the %s checksum algorithm.",
		         full ? "FULL_OBJECT" : "COMPOSITE", s3_ck_label(ck));
		return s3_rq_error(rq, S3E_INVALID_REQUEST, msg);
	}
	if (RAND_bytes(rnd, 8) != 1 || s3_mpu_rec_etag(retag) < 0)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	/* 16 random hex digits, then the target's placement hash (see s3_obj_hash) */
	{
		uint64_t h = s3_obj_hash(rq->bucket, rq->key);

		for (int i = 0; i < 8; i++)
			rnd[8 + i] = (uint8_t)(h >> (56 - 8 * i));
	}
	s3_hex(rnd, 16, uid);
	snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, uid);
	/* room left for what Complete adds: checksum, its type, zest-upload, zest-parts */
	s3_buf_init(&attrs, S3_ATTRS_MAX - 256);
	if (s3_attrs_collect(rq, &attrs) != S3_OK) {
		s3_buf_fini(&attrs);
		return s3_rq_error(rq, S3E_METADATA_TOO_LARGE, NULL);
	}
	if (ck) {
		s3_attr_add(&attrs, "zest-ck", 7, s3_ck_name(ck), strlen(s3_ck_name(ck)));
		s3_attr_add(&attrs, "zest-ckt", 8, full ? "FULL_OBJECT" : "COMPOSITE",
		            full ? 11 : 9);
	}
	if (attrs.err) {
		s3_buf_fini(&attrs);
		return s3_rq_error(rq, S3E_METADATA_TOO_LARGE, NULL);
	}
	info = malloc(sizeof(*info));
	/* a random ETag: what the Abort's or Complete's mark fences on */
	rc = info ? s3_mpu_put_record(rq, rk, rq->key, strlen(rq->key), retag,
	                              attrs.p ? attrs.p : "", attrs.len, NULL, info)
	          : -ENOMEM;
	free(info);
	s3_buf_fini(&attrs);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	s3_buf_init(&x, 8192);
	s3_buf_adds(&x, XML_DECL "<InitiateMultipartUploadResult xmlns=\"" S3_NS "\"><Bucket>");
	s3_buf_add_xml(&x, rq->bucket, strlen(rq->bucket));
	s3_buf_adds(&x, "</Bucket>");
	s3_xml_key(&x, "Key", rq->key, false);
	s3_buf_printf(&x, "<UploadId>%s</UploadId></InitiateMultipartUploadResult>", uid);
	{
		struct s3_buf ex;

		s3_buf_init(&ex, 256);
		if (ck)
			s3_buf_printf(&ex,
			              "x-amz-checksum-algorithm: %s\r\nx-amz-checksum-type: %s\r\n",
			              s3_ck_label(ck), full ? "FULL_OBJECT" : "COMPOSITE");
		s3_resp_xml(rq, 200, &ex, &x);
		s3_buf_fini(&ex);
	}
	s3_buf_fini(&x);
	return 0;
}

/* All parts of an upload, in part-number order. */
int
s3_mpu_list_parts(struct s3_req *rq, const char *uid, struct s3_list_result *all)
{
	char prefix[64], after[64] = "";

	snprintf(prefix, sizeof(prefix), MPU_PART "%s/", uid);
	memset(all, 0, sizeof(*all));
	for (;;) {
		struct s3_list_result lr = { 0 };
		int rc =
		        rq->be->list(rq->be->ctx, S3_RESERVED_BUCKET, prefix, after, "", 1000, &lr);

		if (rc < 0) {
			s3_list_result_fini(all);
			return rc;
		}
		for (size_t i = 0; i < lr.n; i++) {
			rc = s3_list_result_add(all, lr.entries[i].key, lr.entries[i].size,
			                        lr.entries[i].etag, lr.entries[i].mtime_ns);
			if (rc < 0) {
				s3_list_result_fini(&lr);
				s3_list_result_fini(all);
				return rc;
			}
		}
		if (!lr.truncated || !lr.next_start_after || all->n > S3_PARTS_MAX) {
			s3_list_result_fini(&lr);
			return 0;
		}
		snprintf(after, sizeof(after), "%s", lr.next_start_after);
		s3_list_result_fini(&lr);
	}
}

/*
 * The end of an upload: its parts (those listed in parts, NULL: list them now; none in
 * skip, the parts a Compose already took), then its record, only once every part delete
 * succeeded. 0 all gone; < 0 the first error, and the record stays: a retried Complete
 * or an Abort finds the upload and finishes. Parts are never left without their record.
 */
static int
mpu_remove(struct s3_req *rq, const char *uid, const struct s3_list_result *parts,
           char *const *skip, size_t nskip)
{
	struct s3_list_result own = { 0 };
	char rk[160];
	bool existed;
	int rc = 0;

	if (!parts) {
		rc = s3_mpu_list_parts(rq, uid, &own);
		if (rc < 0)
			return rc;
		parts = &own;
	}
	for (size_t j = 0; j < parts->n; j++) {
		bool used = false;
		int d;

		for (size_t i = 0; i < nskip && !used; i++)
			used = skip[i] == parts->entries[j].key;
		if (used)
			continue;
		d = rq->be->del(rq->be->ctx, S3_RESERVED_BUCKET, parts->entries[j].key, &existed);
		if (d < 0 && rc == 0)
			rc = d;
	}
	s3_list_result_fini(&own);
	if (rc == 0) {
		snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, uid);
		rc = rq->be->del(rq->be->ctx, S3_RESERVED_BUCKET, rk, &existed);
	}
	if (rc < 0)
		ZC_WARN("s3",
		        "mpu_leftovers upload=%s err=%d record=kept (a retry or Abort ends it)",
		        uid, rc);
	return rc;
}

/*
 * Test builds' fault points (zc_fault.h) in the windows of a Complete and an Abort:
 * "mpu.after-compose", between a Complete's Compose and its part deletes (an outage there
 * must leave a state a retry or Abort finishes); "mpu.complete-marked" and
 * "mpu.abort-marked", right after each one's mark (the other request then runs against the
 * mark, deterministically); "mpu.complete-listed", after a Complete listed the parts (a
 * part uploaded again there must not slip in). The tests arm pause:PATH there through
 * ZEST_FAULTS. Without -Dtest_faults: nothing.
 */
unsigned
s3_mpu_part_number(const char *key)
{
	const char *s = strrchr(key, '/');

	return s ? (unsigned)strtoul(s + 1, NULL, 10) : 0;
}

/*
 * Part list checks that need no backend: part numbers never go down. A number named twice
 * in a row with the same ETag counts once; with different ETags (the client sent the part
 * again and lists both uploads) the loop in s3_op_complete_end keeps the one that matches
 * the part as stored, the last upload of it that completed, as S3 does.
 */
static enum s3_err
complete_normalize(struct s3_complete_req *cr)
{
	size_t o = 1;

	for (size_t i = 1; i < cr->n; i++) {
		const struct s3_complete_part *prev = &cr->parts[o - 1];

		if (cr->parts[i].number < prev->number)
			return S3E_INVALID_PART_ORDER;
		if (cr->parts[i].number == prev->number && strcmp(cr->parts[i].etag, prev->etag) == 0)
			continue;
		cr->parts[o++] = cr->parts[i];
	}
	cr->n = o;
	return S3_OK;
}

/* A compose's NoSuchKey under If-Match: the target's (NoSuchKey stays) or a part's? */
static bool
target_missing(struct s3_req *rq, const struct s3_wcond *w)
{
	struct s3_obj_info *info;
	bool missing;

	if (!w->c.if_match[0] || w->seen)
		return false;
	info = malloc(sizeof(*info));
	if (!info)
		return false;
	missing = s3_err_from_errno(rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info)) ==
	          S3E_NO_SUCH_KEY;
	free(info);
	return missing;
}

static void
complete_reply(struct s3_req *rq, const char *etag, unsigned ck, const char *ckval, bool full)
{
	struct s3_buf x, loc;
	const struct s3_hdr *host = s3_rq_hdr(rq, "host");

	s3_buf_init(&x, 16384);
	s3_buf_adds(&x, XML_DECL "<CompleteMultipartUploadResult xmlns=\"" S3_NS "\"><Location>");
	s3_buf_init(&loc, 8192);
	s3_buf_printf(&loc, "%s://", rq->cfg->tls_cert ? "https" : "http");
	if (host)
		s3_buf_add(&loc, host->val, host->val_len);
	else
		s3_buf_adds(&loc, "localhost");
	s3_buf_printf(&loc, "/%s/", rq->bucket);
	s3_buf_add_uri(&loc, rq->key, strlen(rq->key), true);
	s3_buf_add_xml(&x, loc.p, loc.len);
	s3_buf_fini(&loc);
	s3_buf_adds(&x, "</Location><Bucket>");
	s3_buf_add_xml(&x, rq->bucket, strlen(rq->bucket));
	s3_buf_adds(&x, "</Bucket>");
	s3_xml_key(&x, "Key", rq->key, false);
	s3_buf_printf(&x, "<ETag>&quot;%s&quot;</ETag>", etag);
	if (ck)
		s3_buf_printf(&x, "<Checksum%s>%s</Checksum%s><ChecksumType>%s</ChecksumType>",
		              s3_ck_label(ck), ckval, s3_ck_label(ck),
		              full ? "FULL_OBJECT" : "COMPOSITE");
	s3_buf_adds(&x, "</CompleteMultipartUploadResult>");
	s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
}

/*
 * A Complete of an upload that is already complete -- a client retrying after a lost
 * reply, or the loser of two concurrent Completes -- gets the first one's reply, as in
 * S3, when the object is still the one that upload made ("zest-upload:<id>") from the
 * same parts (same ETag). Returns 0 answered, ZC_E(ZC_NO_KEY) not that case. With leftovers (the
 * upload record is still there: the first Complete could not delete everything), they
 * are removed first; the object is whole, so the answer is 200 even if that fails again.
 */
static int
complete_retry(struct s3_req *rq, const char *uid, const struct s3_complete_req *cr, bool leftovers)
{
	struct s3_obj_info *info = malloc(sizeof(*info));
	char etag[48], ckval[80] = "", tname[16] = "";
	const char *v;
	unsigned ck = 0;
	int vl;

	if (!info)
		return -ENOMEM;
	if (rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info) < 0 ||
	    (vl = s3_attr_get(info->attrs, info->attrs_len, "zest-upload", &v)) != 32 ||
	    strncmp(v, uid, 32) != 0 || s3_mpu_etag(cr, etag) < 0 ||
	    strcmp(etag, info->etag) != 0) {
		free(info);
		return ZC_E(ZC_NO_KEY);
	}
	for (unsigned c = S3_CK_CRC32; c <= S3_CK_SHA256 && !ck; c <<= 1) {
		char name[48];

		snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(c));
		vl = s3_attr_get(info->attrs, info->attrs_len, name, &v);
		if (vl > 0 && (size_t)vl < sizeof(ckval)) {
			ck = c;
			memcpy(ckval, v, (size_t)vl);
			ckval[vl] = '\0';
		}
	}
	vl = s3_attr_get(info->attrs, info->attrs_len, "x-amz-checksum-type", &v);
	if (vl > 0 && (size_t)vl < sizeof(tname))
		memcpy(tname, v, (size_t)vl);
	free(info);
	if (leftovers)
		mpu_remove(rq, uid, NULL, NULL, 0);
	complete_reply(rq, etag, ck, ckval, strcmp(tname, "FULL_OBJECT") == 0);
	return 0;
}

/* The object checksum a Complete request names: x-amz-checksum-<alg>, if any. */
static unsigned
complete_hdr_ck(const struct s3_req *rq, char val[80])
{
	for (unsigned i = 0; i < rq->http.nhdr; i++) {
		const struct s3_hdr *h = &rq->http.hdr[i];
		unsigned ck;

		if (h->name_len <= 15 || strncasecmp(h->name, "x-amz-checksum-", 15) != 0)
			continue;
		ck = s3_ck_from_name(h->name + 15, h->name_len - 15);
		if (ck && h->val_len < 80) {
			memcpy(val, h->val, h->val_len);
			val[h->val_len] = '\0';
			return ck;
		}
	}
	return 0;
}

int
s3_mpu_complete_end(struct s3_req *rq)
{
	struct s3_complete_req cr;
	struct s3_list_result parts = { 0 };
	struct mpu_rec *r;
	char uid[64], msg[160] = "";
	struct s3_objref *refs = NULL;
	char **pkeys = NULL;
	struct s3_mpu_sum ms;
	struct s3_ptab pt;
	unsigned ck, hck;
	bool full;
	char etag[48], ckval[80] = "", hval[80] = "", tv[32];
	struct s3_obj_info *info = NULL;
	struct s3_buf attrs;
	struct s3_wcond cond;
	bool loaded = false; /* the upload record and its parts were read */
	size_t kept = 0;     /* entries of the list that count (one per part number) */
	enum s3_err e;
	int rc, taken = 0;

	if (rq->body.err)
		return s3_rq_error(rq, S3E_MALFORMED_XML, NULL);
	e = s3_body_collect_verify(rq);
	if (e)
		return s3_rq_error(rq, e, NULL);
	if (s3_rq_query(rq, "uploadId", uid, sizeof(uid)) != 1)
		return s3_rq_error(rq, S3E_NO_SUCH_UPLOAD, NULL);
	r = calloc(1, sizeof(*r));
	if (!r)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	rc = s3_mpu_load(rq, uid, r);
	ck = s3_mpu_rec_ck(r);
	full = s3_mpu_rec_full(r);
	s3_mpu_sum_init(&ms, 0, false);
	s3_ptab_init(&pt);
	s3_buf_init(&attrs, S3_ATTRS_MAX);
	memset(&cr, 0, sizeof(cr));
	e = s3_xml_parse_complete(rq->body.p ? rq->body.p : "", rq->body.len, &cr) < 0
	            ? S3E_MALFORMED_XML
	            : complete_normalize(&cr);
	if (rc < 0) {
		if (s3_err_from_errno(rc) == S3E_NO_SUCH_UPLOAD && !e &&
		    complete_retry(rq, uid, &cr, false) == 0)
			goto done;
		e = s3_err_from_errno(rc);
		goto fail;
	}
	if (e)
		goto fail;
	if (s3_mpu_rec_state(r) == S3_MPU_ABORTING) {
		e = S3E_NO_SUCH_UPLOAD; /* an Abort took it first: it ends aborted */
		goto fail;
	}
	hck = complete_hdr_ck(rq, hval);
	if (hck && hck != ck) {
		e = S3E_INVALID_REQUEST;
		snprintf(msg, sizeof(msg),
		         ck ? "The upload was created using the %s checksum algorithm."
		            : "The upload was created without a checksum algorithm.%s",
		         ck ? s3_ck_label(ck) : "");
		goto fail;
	}
	if (s3_rq_hdr_str(rq, "x-amz-checksum-type", tv, sizeof(tv)) &&
	    (!ck || strcasecmp(tv, full ? "FULL_OBJECT" : "COMPOSITE") != 0)) {
		e = S3E_INVALID_REQUEST;
		snprintf(msg, sizeof(msg), "The upload was created using the %s checksum type.",
		         !ck    ? "no"
		         : full ? "FULL_OBJECT"
		                : "COMPOSITE");
		goto fail;
	}
	rc = s3_mpu_list_parts(rq, uid, &parts);
	if (rc < 0) {
		e = s3_err_from_errno(rc);
		goto fail;
	}
	(void)ZC_FAULT(ZC_FP_MPU_LISTED, NULL, 0);
	loaded = true;
	refs = calloc(cr.n, sizeof(*refs));
	pkeys = calloc(cr.n, sizeof(*pkeys));
	if (!refs || !pkeys || s3_mpu_sum_init(&ms, ck, full) < 0) {
		e = S3E_INTERNAL;
		goto fail;
	}
	for (size_t in = 0, i = 0, j = 0; in < cr.n; i++) {
		const struct s3_complete_part *cp;
		unsigned want;
		char stored[64];
		size_t run = in, pick = cr.n;

		while (j < parts.n && s3_mpu_part_number(parts.entries[j].key) < cr.parts[in].number)
			j++;
		/* entries of one part number: the one naming the stored upload counts */
		for (; run < cr.n && cr.parts[run].number == cr.parts[in].number; run++)
			if (j < parts.n &&
			    s3_mpu_part_number(parts.entries[j].key) == cr.parts[run].number &&
			    strcmp(parts.entries[j].etag, cr.parts[run].etag) == 0)
				pick = run;
		if (pick == cr.n) {
			e = S3E_INVALID_PART;
			goto fail;
		}
		cr.parts[i] = cr.parts[pick]; /* compacted: the ETag below is of these */
		kept = i + 1;
		in = run;
		cp = &cr.parts[i];
		want = ck ? ck : cp->ck;
		if (in < cr.n && parts.entries[j].size < MIN_PART) {
			e = S3E_ENTITY_TOO_SMALL;
			goto fail;
		}
		pkeys[i] = parts.entries[j].key;
		refs[i].bucket = S3_RESERVED_BUCKET;
		refs[i].key = pkeys[i];
		/* the version listed, whose size, ETag and checksum the object is built from:
		 * a part uploaded again since fails the compose (ZC_CHANGED), never slips in */
		refs[i].etag = parts.entries[j].etag;
		s3_ptab_add(&pt, parts.entries[j].size);
		if (!want)
			continue;
		/* the part's stored checksum: what a ChecksumXXX in the list must equal, and
		 * what the object checksum is made of */
		rc = s3_mpu_part_checksum(rq, pkeys[i], want, stored);
		if (rc < 0 || (ck && rc == 0) || (ck && cp->ck && cp->ck != ck) ||
		    (rc == 1 && cp->ck && strcmp(cp->checksum, stored) != 0)) {
			e = rc < 0 && s3_err_from_errno(rc) != S3E_NO_SUCH_KEY
			            ? s3_err_from_errno(rc)
			            : S3E_INVALID_PART;
			if (e == S3E_INVALID_PART && rc >= 0)
				snprintf(
				        msg, sizeof(msg),
				        "The checksum of part %u does not match the uploaded part.",
				        cp->number);
			goto fail;
		}
		if (ck && s3_mpu_sum_add(&ms, stored, parts.entries[j].size) < 0) {
			e = S3E_INVALID_PART;
			goto fail;
		}
	}
	cr.n = kept;
	if (s3_mpu_etag(&cr, etag) < 0) {
		e = S3E_INVALID_PART;
		goto fail;
	}
	s3_mpu_sum_value(&ms, ckval);
	if (hck && !s3_mpu_ck_matches(ckval, hval, !full)) {
		e = S3E_BAD_DIGEST;
		snprintf(msg, sizeof(msg),
		         "The %s you specified did not match the calculated checksum.",
		         s3_ck_label(hck));
		goto fail;
	}
	{
		size_t i = 0;
		const char *a = r->info.attrs;

		while (i < r->info.attrs_len) {
			const char *eol = memchr(a + i, '\n', r->info.attrs_len - i);
			size_t ll = eol ? (size_t)(eol - a - i) : r->info.attrs_len - i;

			if (strncmp(a + i, "zest-", 5) != 0) {
				s3_buf_add(&attrs, a + i, ll);
				s3_buf_add(&attrs, "\n", 1);
			}
			i += ll + 1;
		}
	}
	if (ck) {
		char name[48];

		snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(ck));
		s3_attr_add(&attrs, name, strlen(name), ckval, strlen(ckval));
		s3_attr_add(&attrs, "x-amz-checksum-type", 19, full ? "FULL_OBJECT" : "COMPOSITE",
		            full ? 11 : 9);
	}
	s3_attr_add(&attrs, "zest-upload", 11, uid, strlen(uid));
	e = s3_cond_parse(rq, &cond); /* If-None-Match / If-Match, checked in the commit */
	if (!e)
		e = s3_cond_resolve(rq, rq->bucket, rq->key, &cond);
	if (e)
		goto fail;
	rc = s3_ptab_store(rq, uid, &pt, &attrs);
	if (rc < 0) {
		e = s3_err_from_errno(rc);
		goto fail;
	}
	/* The mark: from here no Abort deletes a part (s3_mpu_state.c); one that marked
	 * first makes this NoSuchUpload, and nothing was composed. */
	taken = s3_mpu_take(rq, uid, r, S3_MPU_COMPLETING);
	(void)ZC_FAULT(ZC_FP_MPU_MARKED, NULL, 0);
	if (taken < 0) {
		/* the record went: a concurrent Complete finished the upload */
		if (s3_err_from_errno(taken) == S3E_NO_SUCH_UPLOAD &&
		    complete_retry(rq, uid, &cr, false) == 0)
			goto done;
		e = s3_err_from_errno(taken);
		goto fail;
	}
	info = malloc(sizeof(*info));
	rc = info ? rq->be->compose(rq->be->ctx, rq->bucket, rq->key, refs, cr.n, true, etag,
	                            attrs.p ? attrs.p : "", attrs.len, &cond.c, info)
	          : -ENOMEM;
	if (rc < 0) {
		/* a concurrent Complete of the same upload won the race for the parts */
		if (s3_err_from_errno(rc) == S3E_INVALID_PART &&
		    complete_retry(rq, uid, &cr, true) == 0)
			goto done;
		e = s3_cond_error(&cond, rc);
		/* a listed part is gone, or was uploaded again since it was listed (the
		 * compose's ZC_CHANGED: its ETag is no longer the one the client named) */
		if ((e == S3E_NO_SUCH_KEY && !target_missing(rq, &cond)) ||
		    zc_err_is(rc, ZC_CHANGED))
			e = S3E_INVALID_PART;
		/* nothing composed: the upload is open again for a retry or an Abort */
		if (taken == 1)
			s3_mpu_release(rq, uid, r);
		goto fail;
	}
	(void)ZC_FAULT(ZC_FP_MPU_COMPOSED, NULL, 0);
	/* the parts not named in the list (Compose took the others), then the upload record;
	 * the object is complete whatever remains, so the answer is 200 either way */
	mpu_remove(rq, uid, &parts, pkeys, cr.n);
	complete_reply(rq, etag, ck, ckval, full);
done:
	e = S3_OK;
fail:
	/* parts gone but the record kept: an earlier Complete made the object and could not
	 * delete every leftover; this one (a retry) finishes the job */
	if (e == S3E_INVALID_PART && loaded && complete_retry(rq, uid, &cr, true) == 0)
		e = S3_OK;
	s3_list_result_fini(&parts);
	s3_buf_fini(&attrs);
	s3_ptab_fini(&pt);
	s3_mpu_sum_fini(&ms);
	free(info);
	free(refs);
	free(pkeys);
	s3_complete_req_fini(&cr);
	s3_buf_fini(&r->key);
	free(r);
	if (e)
		return s3_rq_error(rq, e, msg[0] ? msg : NULL);
	return 0;
}

/* Is rq->key the object upload uid composed ("zest-upload")? */
static bool
mpu_composed(struct s3_req *rq, const char *uid)
{
	struct s3_obj_info *info = malloc(sizeof(*info));
	const char *v;
	bool yes;

	yes = info && rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info) == 0 &&
	      s3_attr_get(info->attrs, info->attrs_len, "zest-upload", &v) == 32 &&
	      strncmp(v, uid, 32) == 0;
	free(info);
	return yes;
}

/* DeleteBucket's Abort of one upload: marked, then removed; one a Complete holds is left
 * to it (its object then keeps the bucket from going). */
static int
mpu_abort_one(struct s3_req *rq, const char *uid)
{
	struct mpu_rec *r = calloc(1, sizeof(*r));
	int rc = r ? s3_mpu_read(rq, uid, r) : -ENOMEM;

	if (rc == 0)
		rc = s3_mpu_take(rq, uid, r, S3_MPU_ABORTING);
	if (r)
		s3_buf_fini(&r->key);
	free(r);
	if (rc >= 0)
		return mpu_remove(rq, uid, NULL, NULL, 0);
	return s3_err_from_errno(rc) == S3E_NO_SUCH_UPLOAD ? 0 : rc;
}

int
s3_mpu_drop_bucket(struct s3_req *rq)
{
	char prefix[80], after[160] = "";
	size_t pl;
	int rc;

	pl = (size_t)snprintf(prefix, sizeof(prefix), MPU_REC "%s/", rq->bucket);
	for (;;) {
		struct s3_list_result lr = { 0 };

		rc = rq->be->list(rq->be->ctx, S3_RESERVED_BUCKET, prefix, after, "", 1000, &lr);
		for (size_t i = 0; i < lr.n && rc == 0; i++)
			if (strlen(lr.entries[i].key) == pl + 32)
				rc = mpu_abort_one(rq, lr.entries[i].key + pl);
		if (rc == 0 && lr.truncated && lr.next_start_after)
			snprintf(after, sizeof(after), "%s", lr.next_start_after);
		else
			after[0] = '\0';
		s3_list_result_fini(&lr);
		if (rc < 0 || !after[0])
			return rc;
	}
}

int
s3_op_mpu_abort(struct s3_req *rq)
{
	char uid[64];
	struct mpu_rec *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	if (s3_rq_query(rq, "uploadId", uid, sizeof(uid)) != 1)
		uid[0] = '\0';
	rc = s3_mpu_load(rq, uid, r);
	/* The mark first: from here no Complete composes (one that marked first makes this
	 * NoSuchUpload: its object is whole, as S3 answers an Abort after a Complete) */
	if (rc == 0)
		rc = s3_mpu_take(rq, uid, r, S3_MPU_ABORTING);
	/* a Complete's mark whose object exists: its Compose is done and what is left (its
	 * record, the parts it did not list) is what that Complete could not delete; the
	 * Abort finishes that, as a retried Complete would, and the object stays whole */
	if (s3_err_from_errno(rc) == S3E_NO_SUCH_UPLOAD &&
	    s3_mpu_rec_state(r) == S3_MPU_COMPLETING && mpu_composed(rq, uid))
		rc = 0;
	(void)ZC_FAULT(ZC_FP_MPU_ABORT, NULL, 0);
	s3_buf_fini(&r->key);
	free(r);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	/* parts first, the record last: a failed Abort can be retried */
	rc = mpu_remove(rq, uid, NULL, NULL, 0);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	s3_resp_xml(rq, 204, NULL, NULL);
	return 0;
}
