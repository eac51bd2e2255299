/*
 * s3_mpu_list: ListParts and ListMultipartUploads.
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

int
s3_op_list_parts(struct s3_req *rq)
{
	char uid[64], v[32];
	struct mpu_rec *r = calloc(1, sizeof(*r));
	struct s3_list_result parts;
	unsigned long max_parts = 1000, marker = 0;
	struct s3_buf x;
	size_t shown = 0;
	unsigned last = 0, ck;
	bool truncated = false, full;
	int rc;

	if (!r)
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	if (s3_rq_query(rq, "uploadId", uid, sizeof(uid)) != 1)
		uid[0] = '\0';
	if ((s3_rq_query(rq, "max-parts", v, sizeof(v)) == 1 &&
	     s3_parse_uint(v, 1000, &max_parts) < 0) ||
	    (s3_rq_query(rq, "part-number-marker", v, sizeof(v)) == 1 &&
	     s3_parse_uint(v, 10000, &marker) < 0)) {
		free(r);
		return s3_rq_error(rq, S3E_INVALID_ARGUMENT, NULL);
	}
	rc = s3_mpu_load(rq, uid, r);
	ck = s3_mpu_rec_ck(r);
	full = s3_mpu_rec_full(r);
	s3_buf_fini(&r->key);
	free(r);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	rc = s3_mpu_list_parts(rq, uid, &parts);
	if (rc < 0)
		return s3_rq_backend_error(rq, rc);
	s3_buf_init(&x, 16u << 20);
	s3_buf_adds(&x, XML_DECL "<ListPartsResult xmlns=\"" S3_NS "\"><Bucket>");
	s3_buf_add_xml(&x, rq->bucket, strlen(rq->bucket));
	s3_buf_adds(&x, "</Bucket>");
	s3_xml_key(&x, "Key", rq->key, false);
	s3_buf_printf(&x,
	              "<UploadId>%s</UploadId><PartNumberMarker>%lu</PartNumberMarker>"
	              "<Initiator><ID>zest</ID><DisplayName>zest</DisplayName></Initiator>"
	              "<Owner><ID>zest</ID><DisplayName>zest</DisplayName></Owner>"
	              "<StorageClass>STANDARD</StorageClass><MaxParts>%lu</MaxParts>",
	              uid, marker, max_parts);
	if (ck)
		s3_buf_printf(&x,
		              "<ChecksumAlgorithm>%s</ChecksumAlgorithm>"
		              "<ChecksumType>%s</ChecksumType>",
		              s3_ck_label(ck), full ? "FULL_OBJECT" : "COMPOSITE");
	for (size_t j = 0; j < parts.n; j++) {
		unsigned pn = s3_mpu_part_number(parts.entries[j].key);
		char t[32];

		if (pn <= marker)
			continue;
		if (shown == max_parts) {
			truncated = true;
			break;
		}
		s3_xml_time(parts.entries[j].mtime_ns, t);
		s3_buf_printf(&x,
		              "<Part><PartNumber>%u</PartNumber><LastModified>%s</LastModified>"
		              "<ETag>&quot;%s&quot;</ETag><Size>%lu</Size>",
		              pn, t, parts.entries[j].etag, (unsigned long)parts.entries[j].size);
		if (ck) {
			char v[64];

			/* the listing has no attributes: one Stat per part shown */
			if (s3_mpu_part_checksum(rq, parts.entries[j].key, ck, v) == 1)
				s3_buf_printf(&x, "<Checksum%s>%s</Checksum%s>", s3_ck_label(ck), v,
				              s3_ck_label(ck));
		}
		s3_buf_adds(&x, "</Part>");
		shown++;
		last = pn;
	}
	s3_buf_printf(&x,
	              "<NextPartNumberMarker>%u</NextPartNumberMarker><IsTruncated>%s</IsTruncated>"
	              "</ListPartsResult>",
	              last, truncated ? "true" : "false");
	s3_list_result_fini(&parts);
	s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
	return 0;
}

struct upl {
	char *key;
	char uid[33];
	uint64_t mtime_ns;
	unsigned ck;
	bool full;
};

/* Open uploads per bucket we list; more is 500, never a short list. */
#define UPLOADS_MAX 10000

static int
upl_cmp(const void *a, const void *b)
{
	const struct upl *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : strcmp(x->uid, y->uid);
}

int
s3_op_list_uploads(struct s3_req *rq)
{
	char prefix[80];
	char *kprefix = calloc(1, 4 * S3_MAX_KEY + 1);
	char *kmarker = calloc(1, 4 * S3_MAX_KEY + 1);
	char umarker[64] = "", mu[16], delim[256] = "";
	unsigned long max_uploads = 1000;
	struct s3_list_result lr = { 0 };
	struct upl *u = NULL;
	size_t nu = 0, shown = 0, first = 0, i, dl, next = 0, next_cpl = 0, cpl = 0;
	const char *cp = NULL; /* the last CommonPrefixes entry: cpl bytes of a key */
	bool truncated = false;
	struct s3_buf x, ux, cx;
	struct s3_bucket_info bi;
	int rc;

	if (!kprefix || !kmarker) {
		free(kprefix);
		free(kmarker);
		return s3_rq_error(rq, S3E_INTERNAL, NULL);
	}
	rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
	if (rc < 0) {
		free(kprefix);
		free(kmarker);
		return s3_rq_backend_error(rq, rc);
	}
	s3_rq_query(rq, "prefix", kprefix, 4 * S3_MAX_KEY + 1);
	if (s3_rq_query(rq, "key-marker", kmarker, 4 * S3_MAX_KEY + 1) < 0 ||
	    s3_rq_query(rq, "upload-id-marker", umarker, sizeof(umarker)) < 0 ||
	    s3_rq_query(rq, "delimiter", delim, sizeof(delim)) < 0 ||
	    (s3_rq_query(rq, "max-uploads", mu, sizeof(mu)) == 1 &&
	     s3_parse_uint(mu, 1000, &max_uploads) < 0)) {
		free(kprefix);
		free(kmarker);
		return s3_rq_error(rq, S3E_INVALID_ARGUMENT, NULL);
	}
	dl = strlen(delim);
	snprintf(prefix, sizeof(prefix), MPU_REC "%s/", rq->bucket);
	rc = rq->be->list(rq->be->ctx, S3_RESERVED_BUCKET, prefix, "", "", UPLOADS_MAX, &lr);
	if (rc >= 0 && lr.truncated)
		rc = ZC_E(ZC_INTERNAL); /* never a silently short list */
	if (rc < 0) {
		s3_list_result_fini(&lr);
		free(kprefix);
		free(kmarker);
		return s3_rq_backend_error(rq, rc);
	}
	u = calloc(lr.n + 1, sizeof(*u));
	for (size_t i = 0; u && i < lr.n; i++) {
		struct mpu_rec *r = calloc(1, sizeof(*r));
		const char *id = strrchr(lr.entries[i].key, '/');

		if (!r || !id) {
			free(r);
			continue;
		}
		s3_buf_init(&r->key, S3_MAX_KEY + 1);
		rc = s3_backend_get(rq->be, S3_RESERVED_BUCKET, lr.entries[i].key, 0, 0, false,
		                    s3_mpu_rec_info, s3_mpu_rec_emit, r);
		if (rc < 0 && s3_err_from_errno(rc) != S3E_NO_SUCH_KEY) {
			/* A record we cannot read is an upload we would silently leave out. */
			s3_buf_fini(&r->key);
			free(r);
			for (size_t j = 0; j < nu; j++)
				free(u[j].key);
			free(u);
			s3_list_result_fini(&lr);
			free(kprefix);
			free(kmarker);
			return s3_rq_backend_error(rq, rc);
		}
		if (rc == 0 && r->key.p && strncmp(r->key.p, kprefix, strlen(kprefix)) == 0) {
			u[nu].key = strdup(r->key.p);
			snprintf(u[nu].uid, sizeof(u[nu].uid), "%s", id + 1);
			u[nu].mtime_ns = lr.entries[i].mtime_ns;
			u[nu].ck = s3_mpu_rec_ck(r);
			u[nu].full = s3_mpu_rec_full(r);
			if (u[nu].key)
				nu++;
		}
		s3_buf_fini(&r->key);
		free(r);
	}
	if (nu)
		qsort(u, nu, sizeof(*u), upl_cmp);
	/* markers: uploads strictly after (key-marker, upload-id-marker) */
	while (first < nu && kmarker[0] &&
	       (strcmp(u[first].key, kmarker) < 0 ||
	        (strcmp(u[first].key, kmarker) == 0 &&
	         (!umarker[0] || strcmp(u[first].uid, umarker) <= 0))))
		first++;
	/* A delimiter after the prefix rolls the keys that have it into one CommonPrefixes
	 * entry, counted once toward max-uploads; a key-marker equal to such a prefix (the
	 * NextKeyMarker of a page that ended on it) skips all of it. */
	s3_buf_init(&ux, 16u << 20);
	s3_buf_init(&cx, 16u << 20);
	for (i = first; i < nu; i++) {
		const char *d = dl ? strstr(u[i].key + strlen(kprefix), delim) : NULL;
		char t[32];

		if (d) {
			size_t cl = (size_t)(d - u[i].key) + dl;

			if ((cp && cl == cpl && memcmp(u[i].key, cp, cl) == 0) ||
			    (strlen(kmarker) == cl && memcmp(u[i].key, kmarker, cl) == 0))
				continue;
			if (shown == max_uploads)
				break;
			cp = u[i].key;
			cpl = cl;
			s3_buf_adds(&cx, "<CommonPrefixes><Prefix>");
			s3_buf_add_xml(&cx, cp, cpl);
			s3_buf_adds(&cx, "</Prefix></CommonPrefixes>");
			next = i;
			next_cpl = cl;
			shown++;
			continue;
		}
		if (shown == max_uploads)
			break;
		s3_xml_time(u[i].mtime_ns, t);
		s3_buf_adds(&ux, "<Upload>");
		s3_xml_key(&ux, "Key", u[i].key, false);
		s3_buf_printf(&ux,
		              "<UploadId>%s</UploadId><Initiator><ID>zest</ID><DisplayName>zest"
		              "</DisplayName></Initiator><Owner><ID>zest</ID><DisplayName>zest"
		              "</DisplayName></Owner><StorageClass>STANDARD</StorageClass>"
		              "<Initiated>%s</Initiated>",
		              u[i].uid, t);
		if (u[i].ck)
			s3_buf_printf(&ux,
			              "<ChecksumAlgorithm>%s</ChecksumAlgorithm>"
			              "<ChecksumType>%s</ChecksumType>",
			              s3_ck_label(u[i].ck),
			              u[i].full ? "FULL_OBJECT" : "COMPOSITE");
		s3_buf_adds(&ux, "</Upload>");
		next = i;
		next_cpl = 0;
		shown++;
	}
	truncated = i < nu;
	s3_buf_init(&x, 32u << 20);
	s3_buf_adds(&x, XML_DECL "<ListMultipartUploadsResult xmlns=\"" S3_NS "\"><Bucket>");
	s3_buf_add_xml(&x, rq->bucket, strlen(rq->bucket));
	s3_buf_adds(&x, "</Bucket>");
	s3_xml_key(&x, "KeyMarker", kmarker, false);
	s3_buf_printf(&x, "<UploadIdMarker>%s</UploadIdMarker>", umarker);
	s3_xml_key(&x, "Prefix", kprefix, false);
	if (dl)
		s3_xml_key(&x, "Delimiter", delim, false);
	if (truncated && shown && next_cpl) {
		s3_buf_adds(&x, "<NextKeyMarker>");
		s3_buf_add_xml(&x, u[next].key, next_cpl);
		s3_buf_adds(&x, "</NextKeyMarker>");
	} else if (truncated && shown) {
		s3_xml_key(&x, "NextKeyMarker", u[next].key, false);
		s3_buf_printf(&x, "<NextUploadIdMarker>%s</NextUploadIdMarker>", u[next].uid);
	}
	s3_buf_printf(&x, "<MaxUploads>%lu</MaxUploads><IsTruncated>%s</IsTruncated>", max_uploads,
	              truncated ? "true" : "false");
	s3_buf_add(&x, ux.p ? ux.p : "", ux.len);
	s3_buf_add(&x, cx.p ? cx.p : "", cx.len);
	s3_buf_fini(&ux);
	s3_buf_fini(&cx);
	for (i = 0; i < nu; i++)
		free(u[i].key);
	s3_buf_adds(&x, "</ListMultipartUploadsResult>");
	s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
	free(u);
	s3_list_result_fini(&lr);
	free(kprefix);
	free(kmarker);
	return 0;
}
