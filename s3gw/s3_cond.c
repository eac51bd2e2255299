/*
 * s3_cond: conditions of S3 requests that write (PutObject, CompleteMultipartUpload,
 * CopyObject): If-None-Match: * and If-Match: <etag>, which the backend checks atomically
 * with the commit (struct s3_cond); the read conditions (If-Match, If-None-Match,
 * If-[Un]Modified-Since) of GET/HEAD and of a copy's source, and their ETag lists.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "s3_ops_internal.h"

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

enum s3_err
s3_cond_parse(const struct s3_req *rq, struct s3_cond *out)
{
	const struct s3_hdr *inm = s3_rq_hdr(rq, "if-none-match"), *im = s3_rq_hdr(rq, "if-match");

	memset(out, 0, sizeof(*out));
	if (inm) {
		const char *s = inm->val, *e = inm->val + inm->val_len;

		trim(&s, &e);
		/* AWS takes only "*" on a write: an ETag there is not implemented */
		if (e - s != 1 || *s != '*')
			return S3E_NOT_IMPLEMENTED;
		out->if_none_match = true;
	}
	if (im) {
		const char *s = im->val, *e = im->val + im->val_len;

		trim(&s, &e);
		if (e - s >= 2 && *s == '"' && e[-1] == '"') {
			s++;
			e--;
		}
		if (e == s)
			return S3E_PRECONDITION_FAILED; /* no ETag is ever empty */
		if ((size_t)(e - s) >= sizeof(out->if_match))
			return S3E_PRECONDITION_FAILED; /* longer than any ETag we store */
		memcpy(out->if_match, s, (size_t)(e - s));
		out->if_match[e - s] = '\0';
	}
	return S3_OK;
}
