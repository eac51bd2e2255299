/*
 * s3_req: request accessors (headers, query parameters, error replies), S3 names and
 * times, object attributes, and collected (XML) request bodies.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/evp.h>

#include "s3_ops_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ small helpers */

const struct s3_hdr *
s3_rq_hdr(const struct s3_req *rq, const char *name)
{
	return s3_http_header(&rq->http, name);
}

/* Copy a header value into out (NUL-terminated); false when absent or too long. */
bool
s3_rq_hdr_str(const struct s3_req *rq, const char *name, char *out, size_t cap)
{
	const struct s3_hdr *h = s3_rq_hdr(rq, name);

	if (!h || h->val_len >= cap)
		return false;
	memcpy(out, h->val, h->val_len);
	out[h->val_len] = '\0';
	return true;
}

/* Decoded value of query parameter name into out; returns 1 found, 0 absent, <0 error. */
int
s3_rq_query(const struct s3_req *rq, const char *name, char *out, size_t cap)
{
	const char *q = rq->http.query;
	size_t qn = rq->http.query_len, nl = strlen(name), i = 0;

	while (i < qn) {
		size_t j = i, eq;

		while (j < qn && q[j] != '&')
			j++;
		eq = i;
		while (eq < j && q[eq] != '=')
			eq++;
		if (eq - i == nl && memcmp(q + i, name, nl) == 0) {
			if (eq == j) {
				if (cap)
					out[0] = '\0';
				return 1;
			}
			if (s3_uri_decode(q + eq + 1, j - eq - 1, out, cap, true) < 0)
				return -EINVAL;
			return 1;
		}
		i = j + 1;
	}
	return 0;
}

bool
s3_rq_has_query(const struct s3_req *rq, const char *name)
{
	char tmp[8];

	return s3_rq_query(rq, name, tmp, 0) != 0 || s3_rq_query(rq, name, tmp, sizeof(tmp)) != 0;
}

bool
s3_rq_method_is(const struct s3_req *rq, const char *m)
{
	return rq->http.method_len == strlen(m) &&
	       memcmp(rq->http.method, m, rq->http.method_len) == 0;
}

int
s3_rq_error(struct s3_req *rq, enum s3_err e, const char *msg)
{
	s3_resp_error(rq, e, msg);
	return 0;
}

int
s3_rq_backend_error(struct s3_req *rq, int rc)
{
	enum s3_err e = s3_err_from_errno(rc);

	if (e == S3E_INTERNAL)
		ZC_WARN("s3", "request=%s op=%s backend_err=%d", rq->id, s3_op_name(rq->op), rc);
	return s3_rq_error(rq, e, NULL);
}

void
s3_etag_hex(const uint8_t md5[16], char *out)
{
	s3_hex(md5, 16, out);
}

void
s3_http_time(uint64_t ns, char *out, size_t cap)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

bool
s3_http_time_parse(const char *s, time_t *out)
{
	long long t = s3_http_date(s, strlen(s));

	if (t < 0)
		return false;
	*out = (time_t)t;
	return true;
}

/* The key rule is common/zc_names.c's; here only its S3 error. */
enum s3_err
s3_key_check(const char *k, size_t n)
{
	switch (zc_key_check(k, n)) {
	case ZC_KEY_OK:
		return S3_OK;
	case ZC_KEY_TOO_LONG:
		return S3E_KEY_TOO_LONG;
	default:
		return S3E_INVALID_ARGUMENT;
	}
}

/* ------------------------------------------------------------------ attributes */

void
s3_attr_add(struct s3_buf *b, const char *name, size_t nl, const char *v, size_t vl)
{
	for (size_t i = 0; i < nl; i++) {
		char c = (char)tolower((unsigned char)name[i]);

		s3_buf_add(b, &c, 1);
	}
	s3_buf_add(b, ":", 1);
	s3_buf_add(b, v, vl);
	s3_buf_add(b, "\n", 1);
}

/*
 * Content-Encoding as S3 stores it: without the aws-chunked token (it describes the
 * request body's framing, not the object) and the comma that joined it, the rest as sent
 * ("deflate, gzip, aws-chunked" is stored "deflate, gzip"; "aws-chunked" alone stores
 * nothing).
 */
static void
attr_add_content_encoding(struct s3_buf *b, const struct s3_hdr *h)
{
	char *v = malloc(h->val_len + 1);
	size_t o = 0, i = 0;

	if (!v) {
		b->err = -ENOMEM;
		return;
	}
	while (i <= h->val_len) {
		size_t j = i, s, e;

		while (j < h->val_len && h->val[j] != ',')
			j++;
		for (s = i; s < j && (h->val[s] == ' ' || h->val[s] == '\t'); s++)
			;
		for (e = j; e > s && (h->val[e - 1] == ' ' || h->val[e - 1] == '\t'); e--)
			;
		if (!(e - s == 11 && strncasecmp(h->val + s, "aws-chunked", 11) == 0)) {
			if (o) /* this token's own separator and spacing */
				v[o++] = ',';
			else
				i = s;
			memcpy(v + o, h->val + i, e - i);
			o += e - i;
		}
		i = j + 1;
	}
	while (o && (v[o - 1] == ' ' || v[o - 1] == '\t' || v[o - 1] == ','))
		o--;
	if (o)
		s3_attr_add(b, h->name, h->name_len, v, o);
	free(v);
}

/*
 * User metadata beyond US-ASCII (S3's rule, RFC 2047): a value sent as one encoded word,
 * =?UTF-8?B?...?= or =?UTF-8?Q?...?=, is stored decoded; a stored value with a byte past
 * 0x7f goes out as =?UTF-8?B?...?=, so that it survives clients that read header bytes as
 * Latin-1 (Python's http.client) and they decode it with the mail tools they have.
 */
static int
hexval(int c)
{
	if (isdigit(c))
		return c - '0';
	c = tolower(c);
	return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* The bytes one encoded word stands for into out: their count, or -1 (not one word, another
 * charset, bad encoding, or a control byte that the attribute text cannot hold). */
static int
meta_word_decode(const char *v, size_t n, char *out, size_t cap)
{
	const char *t, *end = v + n;
	size_t o = 0;
	int len;

	if (n < 12 || v[0] != '=' || v[1] != '?' || strncasecmp(v + 2, "utf-8?", 6) != 0 ||
	    v[9] != '?' || end[-2] != '?' || end[-1] != '=')
		return -1;
	t = v + 10;
	end -= 2;
	if (memchr(t, '?', (size_t)(end - t)))
		return -1;
	if (v[8] == 'B' || v[8] == 'b') {
		if ((size_t)(end - t) / 4 * 3 > cap)
			return -1;
		len = s3_b64_decode(t, (size_t)(end - t), (uint8_t *)out, cap);
		if (len < 0)
			return -1;
		o = (size_t)len;
	} else if (v[8] == 'Q' || v[8] == 'q') {
		for (; t < end; t++) {
			int c = (unsigned char)*t;

			if (c == '=') {
				int hi, lo;

				if (end - t < 3)
					return -1;
				hi = hexval((unsigned char)t[1]);
				lo = hexval((unsigned char)t[2]);
				if (hi < 0 || lo < 0)
					return -1;
				c = hi * 16 + lo;
				t += 2;
			} else if (c == '_') {
				c = ' ';
			}
			if (o == cap)
				return -1;
			out[o++] = (char)c;
		}
	} else {
		return -1;
	}
	for (size_t i = 0; i < o; i++)
		if ((unsigned char)out[i] < 0x20 || out[i] == 0x7f)
			return -1;
	return (int)o;
}

static bool
meta_needs_word(const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if ((unsigned char)v[i] > 0x7f)
			return true;
	return false;
}

enum s3_err
s3_attrs_collect(const struct s3_req *rq, struct s3_buf *b)
{
	static const char *const keep[] = { "content-type",     "content-disposition",
		                            "content-language", "cache-control",
		                            "expires",          "content-encoding" };
	size_t user = 0;

	for (unsigned i = 0; i < rq->http.nhdr; i++) {
		const struct s3_hdr *h = &rq->http.hdr[i];

		if (h->name_len > 11 && strncasecmp(h->name, "x-amz-meta-", 11) == 0) {
			char dec[S3_USER_META_MAX + 1];
			int dl = meta_word_decode(h->val, h->val_len, dec, sizeof(dec));

			if (dl >= 0) { /* stored as the text it stands for, as S3 does */
				user += h->name_len - 11 + (size_t)dl;
				s3_attr_add(b, h->name, h->name_len, dec, (size_t)dl);
				continue;
			}
			user += h->name_len - 11 + h->val_len;
			s3_attr_add(b, h->name, h->name_len, h->val, h->val_len);
			continue;
		}
		for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++) {
			if (h->name_len != strlen(keep[k]) ||
			    strncasecmp(h->name, keep[k], h->name_len))
				continue;
			if (k == 5)
				attr_add_content_encoding(b, h);
			else
				s3_attr_add(b, h->name, h->name_len, h->val, h->val_len);
		}
	}
	return user > S3_USER_META_MAX ? S3E_METADATA_TOO_LARGE : S3_OK;
}

/* Find attribute value; returns length or -1. */
int
s3_attr_get(const char *attrs, size_t len, const char *name, const char **val)
{
	size_t nl = strlen(name), i = 0;

	while (i < len) {
		const char *eol = memchr(attrs + i, '\n', len - i);
		size_t ll = eol ? (size_t)(eol - attrs - i) : len - i;

		if (ll > nl && attrs[i + nl] == ':' && memcmp(attrs + i, name, nl) == 0) {
			*val = attrs + i + nl + 1;
			return (int)(ll - nl - 1);
		}
		i += ll + 1;
	}
	return -1;
}

/* Object attributes as response headers. */
void
s3_attrs_to_headers(const struct s3_req *rq, const struct s3_obj_info *info, bool ranged,
                    struct s3_buf *b)
{
	const struct s3_hdr *cm = s3_rq_hdr(rq, "x-amz-checksum-mode");
	/* a whole-object checksum would not match a range: S3 leaves it out there */
	bool want_ck = !ranged && cm && cm->val_len == 7 && strncasecmp(cm->val, "ENABLED", 7) == 0;
	/* response-* query parameters override stored headers (presigned downloads) */
	static const char *const ovr[][2] = {
		{ "response-content-type", "content-type" },
		{ "response-content-language", "content-language" },
		{ "response-expires", "expires" },
		{ "response-cache-control", "cache-control" },
		{ "response-content-disposition", "content-disposition" },
		{ "response-content-encoding", "content-encoding" },
	};
	bool overridden[6] = { false };
	size_t i = 0;
	bool ctype = false;

	for (size_t k = 0; k < 6; k++) {
		char v[1024];
		bool clean = true;

		if (s3_rq_query(rq, ovr[k][0], v, sizeof(v)) != 1)
			continue;
		for (const char *c = v; *c; c++)
			if ((unsigned char)*c < 0x20 || *c == 0x7f)
				clean = false; /* no header injection through %0D%0A */
		if (!clean)
			continue;
		overridden[k] = true;
		ctype |= k == 0;
		s3_buf_printf(b, "%s: %s\r\n", ovr[k][1], v);
	}
	while (i < info->attrs_len) {
		const char *line = info->attrs + i;
		const char *eol = memchr(line, '\n', info->attrs_len - i);
		size_t ll = eol ? (size_t)(eol - line) : info->attrs_len - i;
		const char *colon = memchr(line, ':', ll);
		bool skip = false;
		size_t vl;

		i += ll + 1;
		if (!colon)
			continue;
		if (strncmp(line, "zest-", 5) == 0)
			continue;
		for (size_t k = 0; k < 6; k++)
			if (overridden[k] && (size_t)(colon - line) == strlen(ovr[k][1]) &&
			    strncmp(line, ovr[k][1], (size_t)(colon - line)) == 0)
				skip = true;
		if (skip)
			continue;
		if (strncmp(line, "x-amz-checksum-", 15) == 0 && !want_ck)
			continue;
		if (strncmp(line, "content-type:", 13) == 0)
			ctype = true;
		s3_buf_add(b, line, (size_t)(colon - line));
		s3_buf_add(b, ": ", 2);
		vl = ll - (size_t)(colon - line) - 1;
		if (strncmp(line, "x-amz-meta-", 11) == 0 && meta_needs_word(colon + 1, vl)) {
			char w[(S3_USER_META_MAX + 2) / 3 * 4 + 1];

			if (vl > S3_USER_META_MAX)
				vl = S3_USER_META_MAX; /* never: the PUT kept the sum under it */
			s3_b64_encode((const uint8_t *)colon + 1, vl, w);
			s3_buf_printf(b, "=?UTF-8?B?%s?=", w);
		} else {
			s3_buf_add(b, colon + 1, vl);
		}
		s3_buf_add(b, "\r\n", 2);
	}
	if (!ctype)
		s3_buf_adds(b, "Content-Type: binary/octet-stream\r\n");
}

int
s3_parse_uint(const char *s, unsigned long max, unsigned long *out)
{
	char *end;
	unsigned long v;

	if (!*s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	v = strtoul(s, &end, 10);
	if (*end || errno)
		return -EINVAL;
	*out = v > max ? max : v;
	return 0;
}

/* ------------------------------------------------------------------ DeleteObjects */

int
s3_body_collect_begin(struct s3_req *rq)
{
	if (!rq->http.has_length && !rq->http.chunked)
		return s3_rq_error(rq, S3E_MISSING_CONTENT_LENGTH, NULL);
	if (rq->http.has_length && rq->http.content_length > S3_XML_BODY_MAX)
		return s3_rq_error(rq, S3E_ENTITY_TOO_LARGE, NULL);
	if (rq->auth.payload != S3_PAYLOAD_HASH && rq->auth.payload != S3_PAYLOAD_UNSIGNED)
		return s3_rq_error(rq, S3E_NOT_IMPLEMENTED,
		                   "aws-chunked request bodies are only accepted for uploads");
	s3_buf_init(&rq->body, S3_XML_BODY_MAX);
	rq->body_mode = S3_BODY_COLLECT;
	return 0;
}

/* Checks a collected body against x-amz-content-sha256, Content-MD5, x-amz-checksum-*. */
enum s3_err
s3_body_collect_verify(struct s3_req *rq)
{
	struct s3_sum s;
	struct s3_sum_out o;
	char v[128];
	unsigned ck = 0;
	char ckname[64] = "";

	/* a CompleteMultipartUpload's x-amz-checksum-<alg> is the OBJECT's checksum, not the
	 * XML body's: s3_mpu.c checks it */
	for (unsigned i = 0; i < rq->http.nhdr && rq->op != S3_OP_MPU_COMPLETE; i++) {
		const struct s3_hdr *h = &rq->http.hdr[i];

		if (h->name_len > 15 && h->name_len < 40 &&
		    strncasecmp(h->name, "x-amz-checksum-", 15) == 0 &&
		    s3_ck_from_name(h->name + 15, h->name_len - 15)) {
			ck = s3_ck_from_name(h->name + 15, h->name_len - 15);
			memcpy(ckname, h->name, h->name_len);
			ckname[h->name_len] = '\0';
		}
	}
	if (s3_sum_init(&s, S3_CK_MD5 | S3_CK_SHA256 | ck) < 0)
		return S3E_INTERNAL;
	s3_sum_update(&s, rq->body.p ? rq->body.p : "", rq->body.len);
	s3_sum_final(&s, &o);
	s3_sum_fini(&s);
	if (rq->auth.payload == S3_PAYLOAD_HASH &&
	    memcmp(o.sha256, rq->auth.payload_sha256, 32) != 0)
		return S3E_XAMZ_CONTENT_SHA256_MISMATCH;
	if (s3_rq_hdr_str(rq, "content-md5", v, sizeof(v))) {
		uint8_t md5[16];

		if (s3_b64_decode(v, strlen(v), md5, 16) != 16)
			return S3E_INVALID_DIGEST;
		if (memcmp(md5, o.md5, 16) != 0)
			return S3E_BAD_DIGEST;
	}
	if (ck && s3_rq_hdr_str(rq, ckname, v, sizeof(v))) {
		char mine[64];

		s3_ck_value(&o, ck, mine);
		if (strcmp(mine, v) != 0)
			return S3E_BAD_DIGEST;
	}
	return S3_OK;
}

/* DeleteObjects must carry Content-MD5 or an x-amz-checksum-<alg> header, as in S3: a
 * multi-delete body damaged in transit must never delete other keys. */
bool
s3_rq_has_integrity_header(const struct s3_req *rq)
{
	if (s3_rq_hdr(rq, "content-md5"))
		return true;
	for (unsigned i = 0; i < rq->http.nhdr; i++) {
		const struct s3_hdr *h = &rq->http.hdr[i];

		if (h->name_len > 15 && h->name_len < 40 &&
		    strncasecmp(h->name, "x-amz-checksum-", 15) == 0 &&
		    s3_ck_from_name(h->name + 15, h->name_len - 15))
			return true;
	}
	return false;
}
