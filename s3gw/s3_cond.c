/*
 * s3_cond: conditions of S3 requests that write (PutObject, CompleteMultipartUpload,
 * CopyObject): If-None-Match: * and If-Match: <etag> or *, which the backend checks
 * atomically with the commit (struct s3_cond), and If-None-Match: <etag>, turned into one of
 * those by a stat just before the commit; the read conditions (If-Match, If-None-Match,
 * If-[Un]Modified-Since) of GET/HEAD and of a copy's source, and their ETag lists.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_ops_internal.h"
#include "zc_fault.h"

/* [s, e) without surrounding blanks. */
static void
trim(const char **s, const char **e)
{
	while (*s < *e && (**s == ' ' || **s == '\t'))
		(*s)++;
	while (*e > *s && (e[0][-1] == ' ' || e[0][-1] == '\t'))
		(*e)--;
}

bool
s3_etag_list_match(const char *list, size_t n, const char *etag)
{
	const char *p = list, *end = list + n;

	while (p < end) {
		const char *s = p, *e;

		while (p < end && *p != ',')
			p++;
		e = p++;
		trim(&s, &e);
		if (e - s == 1 && *s == '*')
			return true;
		if (e - s >= 2 && *s == '"' && e[-1] == '"') {
			s++;
			e--;
		}
		if (e > s && (size_t)(e - s) == strlen(etag) &&
		    memcmp(s, etag, (size_t)(e - s)) == 0)
			return true;
	}
	return false;
}

/* The header prefix + name, e.g. "x-amz-copy-source-" "if-match". */
static bool
hdr_of(const struct s3_req *rq, const char *prefix, const char *name, char *v, size_t cap)
{
	char full[64];

	snprintf(full, sizeof(full), "%s%s", prefix, name);
	return s3_rq_hdr_str(rq, full, v, cap);
}

enum s3_err
s3_preconditions(const struct s3_req *rq, const char *prefix, const struct s3_obj_info *info,
                 enum s3_err not_modified)
{
	char v[512];
	time_t t, mt = (time_t)(info->mtime_ns / 1000000000u);
	bool has_im = hdr_of(rq, prefix, "if-match", v, sizeof(v));

	/* If-Match that holds overrides If-Unmodified-Since; If-None-Match, when given,
	 * decides alone (If-Modified-Since is then not looked at), as S3 does. */
	if (has_im && !s3_etag_list_match(v, strlen(v), info->etag))
		return S3E_PRECONDITION_FAILED;
	if (!has_im && hdr_of(rq, prefix, "if-unmodified-since", v, sizeof(v)) &&
	    s3_http_time_parse(v, &t) && mt > t)
		return S3E_PRECONDITION_FAILED;
	if (hdr_of(rq, prefix, "if-none-match", v, sizeof(v))) {
		if (s3_etag_list_match(v, strlen(v), info->etag))
			return not_modified;
	} else if (hdr_of(rq, prefix, "if-modified-since", v, sizeof(v)) &&
	           s3_http_time_parse(v, &t) && mt <= t) {
		return not_modified;
	}
	return S3_OK;
}

/* One ETag of a write condition, quotes and blanks off, into out (cap bytes): false when
 * it is empty or longer than any ETag we store (no object can have it). */
static bool
etag_of(const struct s3_hdr *h, char *out, size_t cap)
{
	const char *s = h->val, *e = h->val + h->val_len;

	trim(&s, &e);
	if (e - s >= 2 && *s == '"' && e[-1] == '"') {
		s++;
		e--;
	}
	if (e == s || (size_t)(e - s) >= cap)
		return false;
	memcpy(out, s, (size_t)(e - s));
	out[e - s] = '\0';
	return true;
}

enum s3_err
s3_cond_parse(const struct s3_req *rq, struct s3_wcond *out)
{
	const struct s3_hdr *inm = s3_rq_hdr(rq, "if-none-match"), *im = s3_rq_hdr(rq, "if-match");

	memset(out, 0, sizeof(*out));
	if (inm) {
		const char *s = inm->val, *e = inm->val + inm->val_len;

		trim(&s, &e);
		if (e - s == 1 && *s == '*')
			out->c.if_none_match = true;
		else if (!etag_of(inm, out->none_match, sizeof(out->none_match)))
			out->none_match[0] = '\0'; /* no object has that ETag: the write goes on */
	}
	/* If-Match: * is "the key exists", and the backend takes "*" so */
	if (im && !etag_of(im, out->c.if_match, sizeof(out->c.if_match)))
		return S3E_PRECONDITION_FAILED;
	return S3_OK;
}

enum s3_err
s3_cond_resolve(struct s3_req *rq, const char *bucket, const char *key, struct s3_wcond *w)
{
	struct s3_obj_info *info;
	enum s3_err e = S3_OK;
	int rc;

	if (!w->none_match[0])
		return S3_OK;
	info = malloc(sizeof(*info));
	if (!info)
		return S3E_INTERNAL;
	rc = rq->be->stat(rq->be->ctx, bucket, key, info);
	if (rc == 0 && strcmp(info->etag, w->none_match) == 0) {
		e = S3E_PRECONDITION_FAILED;
	} else if (rc == 0) {
		/* the object seen must still be there at the commit; If-Match given wins */
		if (!w->c.if_match[0]) {
			snprintf(w->c.if_match, sizeof(w->c.if_match), "%s", info->etag);
			w->seen = true;
		}
	} else if (s3_err_from_errno(rc) == S3E_NO_SUCH_KEY) {
		/* with If-Match the commit answers NoSuchKey itself */
		if (!w->c.if_match[0]) {
			w->c.if_none_match = true;
			w->seen = true;
		}
	} else {
		e = s3_err_from_errno(rc);
	}
	free(info);
	if (!e)
		(void)ZC_FAULT(ZC_FP_S3_COND_SEEN, NULL, 0);
	return e;
}

int
s3_rq_commit_error(struct s3_req *rq, const struct s3_wcond *w, int rc)
{
	enum s3_err e = s3_cond_error(w, rc);

	return e == S3E_CONDITIONAL_CONFLICT ? s3_rq_error(rq, e, NULL)
	                                     : s3_rq_backend_error(rq, rc);
}

enum s3_err
s3_cond_error(const struct s3_wcond *w, int rc)
{
	enum s3_err e = s3_err_from_errno(rc);

	/* what the stat saw changed before the commit: another write won the race */
	if (w->seen && (e == S3E_PRECONDITION_FAILED || e == S3E_NO_SUCH_KEY))
		return S3E_CONDITIONAL_CONFLICT;
	return e;
}
