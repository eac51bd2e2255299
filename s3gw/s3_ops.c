/*
 * s3_ops: routing, validation and the S3 operations over struct s3_backend.
 *
 * Addressing: virtual-host style when the Host header ends in ".<domain>" (cfg->domain),
 * path style otherwise. Keys are percent-decoded once (no '+' to space in paths).
 *
 * Multipart state lives in the backend as ordinary objects in S3_RESERVED_BUCKET (a name
 * no client can create or address, since it starts with a dot):
 *   u/<bucket>/<upload-id>       upload record: content = the object key, attrs = the
 *                                object's attributes + "zest-ck:<algorithm>"
 *   p/<upload-id>/<00001>        part objects; attrs carry the part checksum
 * Complete asks the backend to Compose the parts into the target object.
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
#include <openssl/rand.h>

#include "s3_internal.h"
#include "zc.h"

#define S3_NS    "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_DECL "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define MIN_PART (5ull << 20)
#define MAX_PART (5ull << 30)
#define MPU_REC  "u/"

struct s3_put {
	bool is_part;
	void *stream;
	struct s3_sum sum;
	uint64_t got;
	bool has_md5;
	uint8_t content_md5[16];
	unsigned hdr_ck; /* algorithm of an x-amz-checksum-<alg> header */
	char hdr_ck_val[64];
	unsigned want_ck; /* algorithm whose value we store and return */
	struct s3_buf attrs;
	unsigned part;
	char upload_id[64];
};

/* ------------------------------------------------------------------ small helpers */

static const struct s3_hdr *
hdr(const struct s3_req *rq, const char *name)
{
	return s3_http_header(&rq->http, name);
}

/* Copy a header value into out (NUL-terminated); false when absent or too long. */
static bool
hdr_str(const struct s3_req *rq, const char *name, char *out, size_t cap)
{
	const struct s3_hdr *h = hdr(rq, name);

	if (!h || h->val_len >= cap)
		return false;
	memcpy(out, h->val, h->val_len);
	out[h->val_len] = '\0';
	return true;
}

/* Decoded value of query parameter name into out; returns 1 found, 0 absent, <0 error. */
static int
qparam(const struct s3_req *rq, const char *name, char *out, size_t cap)
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

static bool
has_q(const struct s3_req *rq, const char *name)
{
	char tmp[8];

	return qparam(rq, name, tmp, 0) != 0 || qparam(rq, name, tmp, sizeof(tmp)) != 0;
}

static bool
method_is(const struct s3_req *rq, const char *m)
{
	return rq->http.method_len == strlen(m) &&
	       memcmp(rq->http.method, m, rq->http.method_len) == 0;
}

static int
err_reply(struct s3_req *rq, enum s3_err e, const char *msg)
{
	s3_resp_error(rq, e, msg);
	return 0;
}

static int
be_err_reply(struct s3_req *rq, int rc)
{
	enum s3_err e = s3_err_from_errno(rc);

	if (e == S3E_INTERNAL)
		ZC_WARN("s3", "request=%s op=%s backend_err=%d", rq->id, s3_op_name(rq->op), rc);
	return err_reply(rq, e, NULL);
}

static void
etag_hex(const uint8_t md5[16], char *out)
{
	s3_hex(md5, 16, out);
}

static void
http_time(uint64_t ns, char *out, size_t cap)
{
	time_t t = (time_t)(ns / 1000000000u);
	struct tm tm;

	gmtime_r(&t, &tm);
	strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm);
}

static bool
parse_http_time(const char *s, time_t *out)
{
	struct tm tm;
	const char *end;

	memset(&tm, 0, sizeof(tm));
	end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm);
	if (!end || *end)
		return false;
	*out = timegm(&tm);
	return true;
}

/* UTF-8 well-formedness (no overlongs, no surrogates). */
static bool
utf8_ok(const unsigned char *s, size_t n)
{
	size_t i = 0;

	while (i < n) {
		unsigned char c = s[i];
		size_t len;
		uint32_t cp;

		if (c < 0x80) {
			i++;
			continue;
		}
		if ((c & 0xE0) == 0xC0) {
			len = 2;
			cp = c & 0x1F;
		} else if ((c & 0xF0) == 0xE0) {
			len = 3;
			cp = c & 0x0F;
		} else if ((c & 0xF8) == 0xF0) {
			len = 4;
			cp = c & 0x07;
		} else {
			return false;
		}
		if (i + len > n)
			return false;
		for (size_t k = 1; k < len; k++) {
			if ((s[i + k] & 0xC0) != 0x80)
				return false;
			cp = cp << 6 | (s[i + k] & 0x3F);
		}
		if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
		    (len == 4 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
			return false;
		i += len;
	}
	return true;
}

/* S3 bucket naming rules (the strict, DNS-compatible set). */
static bool
bucket_name_ok(const char *b)
{
	size_t n = strlen(b);
	bool all_ip = true;
	int dots = 0;

	if (n < 3 || n > 63)
		return false;
	if (!islower((unsigned char)b[0]) && !isdigit((unsigned char)b[0]))
		return false;
	if (!islower((unsigned char)b[n - 1]) && !isdigit((unsigned char)b[n - 1]))
		return false;
	for (size_t i = 0; i < n; i++) {
		char c = b[i];

		if (!(islower((unsigned char)c) || isdigit((unsigned char)c) || c == '.' ||
		      c == '-'))
			return false;
		if (c == '.' && (b[i + 1] == '.' || b[i + 1] == '-' || (i && b[i - 1] == '-')))
			return false;
		if (c == '.')
			dots++;
		else if (!isdigit((unsigned char)c))
			all_ip = false;
	}
	if (all_ip && dots == 3)
		return false;
	if (strncmp(b, "xn--", 4) == 0 || (n > 8 && strcmp(b + n - 8, "-s3alias") == 0))
		return false;
	return true;
}

/* Keys: 1..1024 bytes of UTF-8 without NUL; no "." or ".." path segment (they would
 * not survive path normalisation in clients and proxies). */
static enum s3_err
key_check(const char *k, size_t n)
{
	if (n == 0)
		return S3E_INVALID_ARGUMENT;
	if (n > S3_MAX_KEY)
		return S3E_KEY_TOO_LONG;
	if (memchr(k, '\0', n) || !utf8_ok((const unsigned char *)k, n))
		return S3E_INVALID_ARGUMENT;
	if (n >= S3_PART_PREFIX_LEN && memcmp(k, S3_PART_PREFIX, S3_PART_PREFIX_LEN) == 0)
		return S3E_INVALID_ARGUMENT; /* the gateway's multipart part keys */
	for (size_t i = 0; i < n;) {
		size_t j = i;

		while (j < n && k[j] != '/')
			j++;
		if ((j - i == 1 && k[i] == '.') || (j - i == 2 && k[i] == '.' && k[i + 1] == '.'))
			return S3E_INVALID_ARGUMENT;
		i = j + 1;
	}
	return S3_OK;
}

/* ------------------------------------------------------------------ routing */

static enum s3_err
route(struct s3_req *rq)
{
	const struct s3_hdr *host = hdr(rq, "host");
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
	if (rq->bucket[0] && !bucket_name_ok(rq->bucket))
		return S3E_INVALID_BUCKET_NAME;
	if (rq->key) {
		enum s3_err e = key_check(rq->key, strlen(rq->key));

		if (e)
			return e;
	}
	return S3_OK;
}

/* ------------------------------------------------------------------ attributes */

static void
attr_add(struct s3_buf *b, const char *name, size_t nl, const char *v, size_t vl)
{
	for (size_t i = 0; i < nl; i++) {
		char c = (char)tolower((unsigned char)name[i]);

		s3_buf_add(b, &c, 1);
	}
	s3_buf_add(b, ":", 1);
	s3_buf_add(b, v, vl);
	s3_buf_add(b, "\n", 1);
}

/* Headers S3 stores with an object. */
static void
collect_attrs(const struct s3_req *rq, struct s3_buf *b)
{
	static const char *const keep[] = { "content-type",     "content-disposition",
		                            "content-language", "cache-control",
		                            "expires",          "content-encoding" };

	for (unsigned i = 0; i < rq->http.nhdr; i++) {
		const struct s3_hdr *h = &rq->http.hdr[i];

		if (h->name_len > 11 && strncasecmp(h->name, "x-amz-meta-", 11) == 0) {
			attr_add(b, h->name, h->name_len, h->val, h->val_len);
			continue;
		}
		for (size_t k = 0; k < sizeof(keep) / sizeof(keep[0]); k++) {
			if (h->name_len != strlen(keep[k]) ||
			    strncasecmp(h->name, keep[k], h->name_len))
				continue;
			if (k == 5) { /* content-encoding without the aws-chunked token */
				char v[256];
				size_t o = 0, i2 = 0;

				while (i2 < h->val_len) {
					size_t j = i2, s, e;

					while (j < h->val_len && h->val[j] != ',')
						j++;
					s = i2;
					e = j;
					while (s < e && h->val[s] == ' ')
						s++;
					while (e > s && h->val[e - 1] == ' ')
						e--;
					if (!(e - s == 11 &&
					      strncasecmp(h->val + s, "aws-chunked", 11) == 0) &&
					    e > s && o + (e - s) + 1 < sizeof(v)) {
						if (o)
							v[o++] = ',';
						memcpy(v + o, h->val + s, e - s);
						o += e - s;
					}
					i2 = j + 1;
				}
				if (o)
					attr_add(b, h->name, h->name_len, v, o);
			} else {
				attr_add(b, h->name, h->name_len, h->val, h->val_len);
			}
		}
	}
}

/* Find attribute value; returns length or -1. */
static int
attr_get(const char *attrs, size_t len, const char *name, const char **val)
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
static void
attrs_to_headers(const struct s3_req *rq, const struct s3_obj_info *info, bool ranged,
                 struct s3_buf *b)
{
	const struct s3_hdr *cm = hdr(rq, "x-amz-checksum-mode");
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

		if (qparam(rq, ovr[k][0], v, sizeof(v)) != 1)
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
		s3_buf_add(b, colon + 1, ll - (size_t)(colon - line) - 1);
		s3_buf_add(b, "\r\n", 2);
	}
	if (!ctype)
		s3_buf_adds(b, "Content-Type: binary/octet-stream\r\n");
}

/* ------------------------------------------------------------------ buckets */

static int
op_list_buckets(struct s3_req *rq)
{
	struct s3_bucket_info *bi = calloc(1024, sizeof(*bi));
	struct s3_buf x;
	int n;

	if (!bi)
		return err_reply(rq, S3E_INTERNAL, NULL);
	n = rq->be->bucket_list(rq->be->ctx, bi, 1024);
	if (n < 0) {
		free(bi);
		return be_err_reply(rq, n);
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

static int
end_create_bucket(struct s3_req *rq)
{
	char loc[64];
	struct s3_buf ex;
	int rc;

	if (rq->body.err)
		return err_reply(rq, S3E_MALFORMED_XML, NULL);
	if (s3_xml_parse_create_bucket(rq->body.p ? rq->body.p : "", rq->body.len, loc,
	                               sizeof(loc)))
		return err_reply(rq, S3E_MALFORMED_XML, NULL);
	if (loc[0] && strcmp(loc, rq->cfg->region) != 0 &&
	    !(strcmp(loc, "us-east-1") == 0 && strcmp(rq->cfg->region, "us-east-1") == 0))
		return err_reply(rq, S3E_INVALID_ARGUMENT,
		                 "The specified location-constraint is not valid");
	rc = rq->be->bucket_create(rq->be->ctx, rq->bucket);
	if (rc < 0)
		return be_err_reply(rq, rc);
	s3_buf_init(&ex, 256);
	s3_buf_printf(&ex, "Location: /%s\r\n", rq->bucket);
	s3_resp_xml(rq, 200, &ex, NULL);
	s3_buf_fini(&ex);
	return 0;
}

static int
op_bucket_simple(struct s3_req *rq)
{
	struct s3_bucket_info bi;
	int rc;

	if (method_is(rq, "HEAD")) {
		rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
		if (rc < 0)
			return be_err_reply(rq, rc);
		struct s3_buf ex;

		s3_buf_init(&ex, 256);
		s3_buf_printf(&ex, "x-amz-bucket-region: %s\r\n", rq->cfg->region);
		s3_resp_xml(rq, 200, &ex, NULL);
		s3_buf_fini(&ex);
		return 0;
	}
	if (method_is(rq, "DELETE")) {
		struct s3_list_result lr = { 0 };
		char prefix[80];

		rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
		if (rc < 0)
			return be_err_reply(rq, rc);
		/* uploads in progress keep a bucket from being deleted, as in S3 */
		snprintf(prefix, sizeof(prefix), MPU_REC "%s/", rq->bucket);
		rc = rq->be->list(rq->be->ctx, S3_RESERVED_BUCKET, prefix, "", "", 1, &lr);
		if (rc == 0 && lr.n) {
			s3_list_result_fini(&lr);
			return err_reply(rq, S3E_BUCKET_NOT_EMPTY, NULL);
		}
		s3_list_result_fini(&lr);
		rc = rq->be->bucket_delete(rq->be->ctx, rq->bucket);
		if (rc < 0)
			return be_err_reply(rq, rc);
		s3_resp_xml(rq, 204, NULL, NULL);
		return 0;
	}
	return err_reply(rq, S3E_METHOD_NOT_ALLOWED, NULL);
}

static int
op_bucket_meta(struct s3_req *rq, bool location)
{
	struct s3_bucket_info bi;
	struct s3_buf x;
	int rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);

	if (rc < 0)
		return be_err_reply(rq, rc);
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

static int
parse_uint(const char *s, unsigned long max, unsigned long *out)
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

static int
op_list_objects(struct s3_req *rq, bool v2)
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
		rc = err_reply(rq, S3E_INTERNAL, NULL);
		goto out;
	}
	if (qparam(rq, "prefix", prefix, cap) < 0 || qparam(rq, "delimiter", delim, cap) < 0 ||
	    qparam(rq, "continuation-token", token, cap) < 0 ||
	    qparam(rq, "start-after", start_after, cap) < 0 ||
	    qparam(rq, "marker", marker, cap) < 0 ||
	    qparam(rq, "encoding-type", enc, sizeof(enc)) < 0 ||
	    qparam(rq, "fetch-owner", owner, sizeof(owner)) < 0) {
		rc = err_reply(rq, S3E_INVALID_ARGUMENT, NULL);
		goto out;
	}
	if (qparam(rq, "max-keys", mk, sizeof(mk)) == 1 && parse_uint(mk, 1000, &max_keys) < 0) {
		rc = err_reply(rq, S3E_INVALID_ARGUMENT, "max-keys must be a non-negative integer");
		goto out;
	}
	if (enc[0] && strcmp(enc, "url") != 0) {
		rc = err_reply(rq, S3E_INVALID_ARGUMENT,
		               "Invalid Encoding Method specified in Request");
		goto out;
	}
	url = enc[0] != '\0';
	after = v2 ? start_after : marker;
	if (v2 && token[0]) {
		int n = s3_b64_decode(token, strlen(token), (uint8_t *)tok_key, cap - 1);

		if (n < 0) {
			rc = err_reply(rq, S3E_INVALID_ARGUMENT,
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
			rc = be_err_reply(rq, rc);
			goto out;
		}
	} else {
		struct s3_bucket_info bi;

		rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
		if (rc < 0) {
			rc = be_err_reply(rq, rc);
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
		err_reply(rq, S3E_INTERNAL, NULL);
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

/* ------------------------------------------------------------------ GET / HEAD */

struct get_ctx {
	struct s3_req *rq;
	bool has_range, suffix;
	uint64_t first, last; /* inclusive; last UINT64_MAX: to the end */
	uint64_t off, len;
	bool not_modified;
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

static bool
etag_matches(const char *list, const char *etag)
{
	const char *p = list;

	while (*p) {
		const char *s, *e;

		while (*p == ' ' || *p == ',')
			p++;
		if (!*p)
			break;
		s = p;
		while (*p && *p != ',')
			p++;
		e = p;
		while (e > s && e[-1] == ' ')
			e--;
		if (e - s == 1 && *s == '*')
			return true;
		if (e - s >= 2 && *s == '"' && e[-1] == '"') {
			s++;
			e--;
		}
		if ((size_t)(e - s) == strlen(etag) && memcmp(s, etag, (size_t)(e - s)) == 0)
			return true;
	}
	return false;
}

/* Preconditions; returns S3_OK, S3E_PRECONDITION_FAILED or S3E_NOT_MODIFIED. */
static enum s3_err
preconditions(const struct s3_req *rq, const struct s3_obj_info *info)
{
	char v[512];
	time_t t, mt = (time_t)(info->mtime_ns / 1000000000u);
	bool has_im = hdr_str(rq, "if-match", v, sizeof(v));

	if (has_im && !etag_matches(v, info->etag))
		return S3E_PRECONDITION_FAILED;
	if (!has_im && hdr_str(rq, "if-unmodified-since", v, sizeof(v)) && parse_http_time(v, &t) &&
	    mt > t)
		return S3E_PRECONDITION_FAILED;
	if (hdr_str(rq, "if-none-match", v, sizeof(v))) {
		if (etag_matches(v, info->etag))
			return S3E_NOT_MODIFIED;
	} else if (hdr_str(rq, "if-modified-since", v, sizeof(v)) && parse_http_time(v, &t) &&
	           mt <= t) {
		return S3E_NOT_MODIFIED;
	}
	return S3_OK;
}

static void
object_headers(const struct s3_req *rq, const struct s3_obj_info *info, bool ranged,
               struct s3_buf *ex)
{
	char t[64];

	http_time(info->mtime_ns, t, sizeof(t));
	s3_buf_printf(ex, "ETag: \"%s\"\r\nLast-Modified: %s\r\nAccept-Ranges: bytes\r\n",
	              info->etag, t);
	attrs_to_headers(rq, info, ranged, ex);
}

static int
get_on_info(void *arg, const struct s3_obj_info *info)
{
	struct get_ctx *g = arg;
	struct s3_req *rq = g->rq;
	enum s3_err e = preconditions(rq, info);
	struct s3_buf ex;
	int status = 200, rc;

	if (e == S3E_NOT_MODIFIED) {
		g->not_modified = true;
		s3_buf_init(&ex, 16 * 1024);
		object_headers(rq, info, false, &ex);
		s3_resp_xml(rq, 304, &ex, NULL);
		s3_buf_fini(&ex);
		return s3_backend_err(S3E_NOT_MODIFIED);
	}
	if (e)
		return s3_backend_err(e);
	g->off = 0;
	g->len = info->size;
	if (g->has_range) {
		uint64_t first = g->first, last = g->last;

		if (g->suffix) {
			if (last == 0)
				return s3_backend_err(S3E_INVALID_RANGE);
			first = last >= info->size ? 0 : info->size - last;
			last = info->size ? info->size - 1 : 0;
		}
		if (first >= info->size)
			return s3_backend_err(S3E_INVALID_RANGE);
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

static int
op_get_object(struct s3_req *rq)
{
	struct get_ctx g = { .rq = rq };
	char rv[128];
	int rc;

	if (hdr_str(rq, "range", rv, sizeof(rv)))
		g.has_range = parse_range(rv, &g) == 1;
	if (rq->is_head) {
		struct s3_obj_info *info = malloc(sizeof(*info));

		if (!info)
			return err_reply(rq, S3E_INTERNAL, NULL);
		rc = rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info);
		if (rc == 0)
			rc = get_on_info(&g, info);
		free(info);
	} else if (g.has_range && g.suffix) {
		/* the offset depends on the size: learn it first */
		struct s3_obj_info *info = malloc(sizeof(*info));

		if (!info)
			return err_reply(rq, S3E_INTERNAL, NULL);
		rc = rq->be->stat(rq->be->ctx, rq->bucket, rq->key, info);
		if (rc == 0) {
			uint64_t last = g.last;

			g.suffix = false;
			g.first = last >= info->size ? 0 : info->size - last;
			g.last = UINT64_MAX;
			if (last == 0)
				rc = s3_backend_err(S3E_INVALID_RANGE);
			else if (info->size == 0)
				g.has_range = false;
		}
		free(info);
		if (rc == 0)
			rc = rq->be->get(rq->be->ctx, rq->bucket, rq->key, g.first,
			                 g.last == UINT64_MAX ? 0 : g.last - g.first + 1,
			                 g.last != UINT64_MAX, get_on_info, get_emit, &g);
	} else {
		rc = rq->be->get(rq->be->ctx, rq->bucket, rq->key, g.has_range ? g.first : 0,
		                 g.has_range && g.last != UINT64_MAX ? g.last - g.first + 1 : 0,
		                 g.has_range && g.last != UINT64_MAX, get_on_info, get_emit, &g);
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
		return err_reply(rq, e, NULL);
	}
	if (rc < 0)
		rq->close = true; /* the body stopped short: the client must see it */
	else if (!rq->head_sent)
		err_reply(rq, S3E_INTERNAL, NULL);
	return 0;
}

static int
op_delete_object(struct s3_req *rq)
{
	bool existed = false;
	int rc = rq->be->del(rq->be->ctx, rq->bucket, rq->key, &existed);

	if (rc < 0 && s3_err_from_errno(rc) != S3E_NO_SUCH_KEY)
		return be_err_reply(rq, rc);
	s3_resp_xml(rq, 204, NULL, NULL);
	return 0;
}

/* ------------------------------------------------------------------ PUT (object, part) */

static void
put_free(struct s3_req *rq)
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

/* Load the upload record: the object key it was created for and its attributes. */
struct mpu_rec {
	struct s3_buf key;
	struct s3_obj_info info;
};

static int
rec_emit(void *arg, const uint8_t *p, size_t n)
{
	struct mpu_rec *r = arg;

	return s3_buf_add(&r->key, p, n);
}

static int
rec_info(void *arg, const struct s3_obj_info *info)
{
	struct mpu_rec *r = arg;

	r->info = *info;
	return 0;
}

static int
mpu_load(struct s3_req *rq, const char *upload_id, struct mpu_rec *r)
{
	char rk[160];
	int rc;

	s3_buf_init(&r->key, S3_MAX_KEY + 1);
	if (strlen(upload_id) != 32 || strspn(upload_id, "0123456789abcdef") != 32)
		return s3_backend_err(S3E_NO_SUCH_UPLOAD);
	snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, upload_id);
	rc = rq->be->get(rq->be->ctx, S3_RESERVED_BUCKET, rk, 0, 0, false, rec_info, rec_emit, r);
	if (rc < 0)
		return s3_err_from_errno(rc) == S3E_NO_SUCH_KEY ? s3_backend_err(S3E_NO_SUCH_UPLOAD)
		                                                : rc;
	if (!r->key.p || strcmp(r->key.p, rq->key) != 0)
		return s3_backend_err(S3E_NO_SUCH_UPLOAD);
	return 0;
}

static unsigned
mpu_rec_ck(const struct mpu_rec *r)
{
	const char *v;
	int n = attr_get(r->info.attrs, r->info.attrs_len, "zest-ck", &v);

	return n > 0 ? s3_ck_from_name(v, (size_t)n) : 0;
}

static int
op_put_begin(struct s3_req *rq, bool is_part)
{
	struct s3_put *p;
	char v[128];
	uint64_t size = 0;
	bool size_known = false;
	const struct s3_hdr *h;
	int rc;
	char store_key[160];
	const char *sbucket = rq->bucket, *skey = rq->key;

	if (hdr(rq, "x-amz-copy-source"))
		return err_reply(rq, S3E_NOT_IMPLEMENTED, "CopyObject is not implemented");
	p = calloc(1, sizeof(*p));
	if (!p)
		return err_reply(rq, S3E_INTERNAL, NULL);
	rq->put = p;
	p->is_part = is_part;
	s3_buf_init(&p->attrs, S3_ATTRS_MAX - 64);

	/* framing: aws-chunked or plain */
	if (rq->auth.payload == S3_PAYLOAD_STREAMING ||
	    rq->auth.payload == S3_PAYLOAD_STREAMING_TRAILER ||
	    rq->auth.payload == S3_PAYLOAD_UNSIGNED_TRAILER) {
		if (!hdr_str(rq, "x-amz-decoded-content-length", v, sizeof(v))) {
			if (!rq->http.chunked)
				return err_reply(rq, S3E_MISSING_CONTENT_LENGTH, NULL);
		} else {
			unsigned long long d;
			char *end;

			errno = 0;
			d = strtoull(v, &end, 10);
			if (!*v || *end || errno || !isdigit((unsigned char)*v))
				return err_reply(rq, S3E_INVALID_ARGUMENT,
				                 "Invalid x-amz-decoded-content-length");
			size = d;
			size_known = true;
		}
		if (s3_chunked_init(&rq->aws, rq->auth.payload, &rq->auth) < 0)
			return err_reply(rq, S3E_INTERNAL, NULL);
		rq->aws_chunked = true;
	} else if (rq->http.has_length) {
		size = rq->http.content_length;
		size_known = true;
	} else if (!rq->http.chunked) {
		return err_reply(rq, S3E_MISSING_CONTENT_LENGTH, NULL);
	}
	if (size_known && size > (is_part ? MAX_PART : rq->cfg->max_object))
		return err_reply(rq, S3E_ENTITY_TOO_LARGE, NULL);
	rq->body_expected = size;
	rq->body_size_known = size_known;

	if (hdr_str(rq, "content-md5", v, sizeof(v))) {
		if (s3_b64_decode(v, strlen(v), p->content_md5, 16) != 16)
			return err_reply(rq, S3E_INVALID_DIGEST, NULL);
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
				return err_reply(rq, S3E_INVALID_ARGUMENT,
				                 "Unknown checksum algorithm");
			}
			if (p->hdr_ck || h->val_len >= sizeof(p->hdr_ck_val))
				return err_reply(rq, S3E_INVALID_REQUEST,
				                 "Expecting a single x-amz-checksum- header");
			p->hdr_ck = ck;
			memcpy(p->hdr_ck_val, h->val, h->val_len);
			p->hdr_ck_val[h->val_len] = '\0';
		}
	}
	p->want_ck = p->hdr_ck;
	if (!p->want_ck && hdr_str(rq, "x-amz-sdk-checksum-algorithm", v, sizeof(v)))
		p->want_ck = s3_ck_from_name(v, strlen(v));
	if (hdr_str(rq, "x-amz-trailer", v, sizeof(v))) {
		if (strncasecmp(v, "x-amz-checksum-", 15) != 0 ||
		    !s3_ck_from_name(v + 15, strlen(v + 15)))
			return err_reply(rq, S3E_INVALID_ARGUMENT, "Unsupported x-amz-trailer");
		if (!rq->aws_chunked)
			return err_reply(rq, S3E_INVALID_REQUEST,
			                 "x-amz-trailer needs an aws-chunked body");
		p->want_ck = s3_ck_from_name(v + 15, strlen(v + 15));
	}

	if (is_part) {
		char num[16], uid[64];
		unsigned long pn;
		struct mpu_rec *r = calloc(1, sizeof(*r));

		if (!r)
			return err_reply(rq, S3E_INTERNAL, NULL);
		if (qparam(rq, "partNumber", num, sizeof(num)) != 1 ||
		    parse_uint(num, 100000, &pn) < 0 || pn < 1 || pn > 10000 ||
		    qparam(rq, "uploadId", uid, sizeof(uid)) != 1) {
			free(r);
			return err_reply(
			        rq, S3E_INVALID_ARGUMENT,
			        "Part number must be an integer between 1 and 10000, inclusive");
		}
		rc = mpu_load(rq, uid, r);
		if (rc == 0) {
			unsigned ck = mpu_rec_ck(r);

			if (ck && p->want_ck && ck != p->want_ck)
				rc = s3_backend_err(S3E_INVALID_REQUEST);
			if (ck)
				p->want_ck = ck;
		}
		s3_buf_fini(&r->key);
		free(r);
		if (rc < 0)
			return be_err_reply(rq, rc);
		p->part = (unsigned)pn;
		snprintf(p->upload_id, sizeof(p->upload_id), "%s", uid);
		snprintf(store_key, sizeof(store_key), S3_PART_PREFIX "%s/%05u", uid, p->part);
		sbucket = rq->bucket;
		skey = store_key;
	} else {
		collect_attrs(rq, &p->attrs);
	}
	{
		unsigned mask = S3_CK_MD5 | p->want_ck;

		if (rq->auth.payload == S3_PAYLOAD_HASH)
			mask |= S3_CK_SHA256;
		if (s3_sum_init(&p->sum, mask) < 0)
			return err_reply(rq, S3E_INTERNAL, NULL);
	}
	rc = rq->be->put_open(rq->be->ctx, sbucket, skey, size, size_known, &p->stream);
	if (rc < 0) {
		p->stream = NULL;
		return be_err_reply(rq, rc);
	}
	rq->body_mode = S3_BODY_STREAM;
	s3_metric_payload(rq->auth.payload);
	return 0;
}

static int
put_body(struct s3_req *rq, const uint8_t *b, size_t n)
{
	struct s3_put *p = rq->put;
	struct zc_seg seg = { b, n, rq->cur_ref };

	if (rq->body_size_known && p->got + n > rq->body_expected)
		return -EMSGSIZE;
	p->got += n;
	s3_sum_update(&p->sum, b, n);
	return rq->be->put_write(p->stream, &seg);
}

static int
put_end(struct s3_req *rq)
{
	struct s3_put *p = rq->put;
	struct s3_sum_out o;
	char etag[40], ckv[64];
	struct s3_obj_info *info;
	struct s3_buf ex;
	int rc;

	if (rq->body_size_known && p->got != rq->body_expected)
		return err_reply(rq, S3E_INCOMPLETE_BODY, NULL);
	s3_sum_final(&p->sum, &o);
	if (rq->auth.payload == S3_PAYLOAD_HASH &&
	    CRYPTO_memcmp(o.sha256, rq->auth.payload_sha256, 32) != 0)
		return err_reply(rq, S3E_XAMZ_CONTENT_SHA256_MISMATCH, NULL);
	if (p->has_md5 && memcmp(o.md5, p->content_md5, 16) != 0)
		return err_reply(rq, S3E_BAD_DIGEST, NULL);
	if (p->want_ck)
		s3_ck_value(&o, p->want_ck, ckv);
	if (p->hdr_ck && strcmp(ckv, p->hdr_ck_val) != 0) {
		char msg[96];

		snprintf(msg, sizeof(msg),
		         "The %s you specified did not match the calculated checksum.",
		         s3_ck_name(p->hdr_ck));
		return err_reply(rq, S3E_BAD_DIGEST, msg);
	}
	if (rq->aws_chunked && !rq->aws.trailer_ck && hdr(rq, "x-amz-trailer"))
		return err_reply(rq, S3E_MALFORMED_TRAILER,
		                 "The trailing checksum named in x-amz-trailer was not sent.");
	if (rq->aws_chunked && rq->aws.trailer_ck) {
		if (rq->aws.trailer_ck != p->want_ck || strcmp(rq->aws.trailer_val, ckv) != 0) {
			char msg[96];

			snprintf(msg, sizeof(msg),
			         "The %s you specified did not match the calculated checksum.",
			         s3_ck_name(rq->aws.trailer_ck));
			return err_reply(rq, S3E_BAD_DIGEST, msg);
		}
	}
	if (p->want_ck) {
		char name[48];

		snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(p->want_ck));
		attr_add(&p->attrs, name, strlen(name), ckv, strlen(ckv));
	}
	if (p->attrs.err)
		return err_reply(rq, S3E_INVALID_ARGUMENT,
		                 "Your metadata headers exceed the maximum allowed metadata size.");
	etag_hex(o.md5, etag);
	info = malloc(sizeof(*info));
	if (!info)
		return err_reply(rq, S3E_INTERNAL, NULL);
	rc = rq->be->put_commit(p->stream, etag, p->attrs.p ? p->attrs.p : "", p->attrs.len, info);
	p->stream = NULL;
	free(info);
	if (rc < 0)
		return be_err_reply(rq, rc);
	s3_buf_init(&ex, 1024);
	s3_buf_printf(&ex, "ETag: \"%s\"\r\n", etag);
	if (p->want_ck)
		s3_buf_printf(&ex, "x-amz-checksum-%s: %s\r\n", s3_ck_name(p->want_ck), ckv);
	s3_resp_xml(rq, 200, &ex, NULL);
	s3_buf_fini(&ex);
	return 0;
}

/* ------------------------------------------------------------------ DeleteObjects */

static int
collect_begin(struct s3_req *rq)
{
	if (!rq->http.has_length && !rq->http.chunked)
		return err_reply(rq, S3E_MISSING_CONTENT_LENGTH, NULL);
	if (rq->http.has_length && rq->http.content_length > S3_XML_BODY_MAX)
		return err_reply(rq, S3E_ENTITY_TOO_LARGE, NULL);
	if (rq->auth.payload != S3_PAYLOAD_HASH && rq->auth.payload != S3_PAYLOAD_UNSIGNED)
		return err_reply(rq, S3E_NOT_IMPLEMENTED,
		                 "aws-chunked request bodies are only accepted for uploads");
	s3_buf_init(&rq->body, S3_XML_BODY_MAX);
	rq->body_mode = S3_BODY_COLLECT;
	return 0;
}

/* Checks a collected body against x-amz-content-sha256, Content-MD5, x-amz-checksum-*. */
static enum s3_err
collect_verify(struct s3_req *rq)
{
	struct s3_sum s;
	struct s3_sum_out o;
	char v[128];
	unsigned ck = 0;
	char ckname[64] = "";

	for (unsigned i = 0; i < rq->http.nhdr; i++) {
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
	if (hdr_str(rq, "content-md5", v, sizeof(v))) {
		uint8_t md5[16];

		if (s3_b64_decode(v, strlen(v), md5, 16) != 16)
			return S3E_INVALID_DIGEST;
		if (memcmp(md5, o.md5, 16) != 0)
			return S3E_BAD_DIGEST;
	}
	if (ck && hdr_str(rq, ckname, v, sizeof(v))) {
		char mine[64];

		s3_ck_value(&o, ck, mine);
		if (strcmp(mine, v) != 0)
			return S3E_BAD_DIGEST;
	}
	return S3_OK;
}

/* DeleteObjects must carry Content-MD5 or an x-amz-checksum-<alg> header, as in S3: a
 * multi-delete body damaged in transit must never delete other keys. */
static bool
has_integrity_header(const struct s3_req *rq)
{
	if (hdr(rq, "content-md5"))
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

static int
end_delete_objects(struct s3_req *rq)
{
	struct s3_delete_req d;
	struct s3_bucket_info bi;
	struct s3_buf x;
	enum s3_err e;
	int rc;

	if (rq->body.err)
		return err_reply(rq, S3E_MALFORMED_XML, NULL);
	e = collect_verify(rq);
	if (e)
		return err_reply(rq, e, NULL);
	rc = s3_xml_parse_delete(rq->body.p ? rq->body.p : "", rq->body.len, &d);
	if (rc < 0)
		return err_reply(rq, S3E_MALFORMED_XML, NULL);
	if (!has_integrity_header(rq)) {
		s3_delete_req_fini(&d);
		return err_reply(rq, S3E_INVALID_REQUEST,
		                 "Missing required header for this request: Content-MD5 or "
		                 "x-amz-checksum-*");
	}
	rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
	if (rc < 0) {
		s3_delete_req_fini(&d);
		return be_err_reply(rq, rc);
	}
	s3_buf_init(&x, 8u << 20);
	s3_buf_adds(&x, XML_DECL "<DeleteResult xmlns=\"" S3_NS "\">");
	for (size_t i = 0; i < d.n; i++) {
		bool existed;
		enum s3_err ke = key_check(d.keys[i], strlen(d.keys[i]));

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

/* ------------------------------------------------------------------ multipart */

static int
op_mpu_create(struct s3_req *rq)
{
	uint8_t rnd[16];
	char uid[33], rk[160], v[64];
	struct s3_buf attrs, x;
	void *stream = NULL;
	struct s3_obj_info *info;
	struct zc_seg seg;
	int rc;
	struct s3_bucket_info bi;
	unsigned ck = 0;

	rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
	if (rc < 0)
		return be_err_reply(rq, rc);
	if (hdr_str(rq, "x-amz-checksum-algorithm", v, sizeof(v))) {
		ck = s3_ck_from_name(v, strlen(v));
		if (!ck)
			return err_reply(rq, S3E_INVALID_ARGUMENT, "Unknown checksum algorithm");
	}
	if (RAND_bytes(rnd, 8) != 1)
		return err_reply(rq, S3E_INTERNAL, NULL);
	/* 16 random hex digits, then the target's placement hash (see s3_obj_hash) */
	{
		uint64_t h = s3_obj_hash(rq->bucket, rq->key);

		for (int i = 0; i < 8; i++)
			rnd[8 + i] = (uint8_t)(h >> (56 - 8 * i));
	}
	s3_hex(rnd, 16, uid);
	snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, uid);
	s3_buf_init(&attrs, S3_ATTRS_MAX - 64);
	collect_attrs(rq, &attrs);
	if (ck)
		attr_add(&attrs, "zest-ck", 7, s3_ck_name(ck), strlen(s3_ck_name(ck)));
	if (attrs.err) {
		s3_buf_fini(&attrs);
		return err_reply(rq, S3E_INVALID_ARGUMENT, "Metadata too large");
	}
	info = malloc(sizeof(*info));
	rc = info ? rq->be->put_open(rq->be->ctx, S3_RESERVED_BUCKET, rk, strlen(rq->key), true,
	                             &stream)
	          : -ENOMEM;
	if (rc == 0) {
		seg = (struct zc_seg){ (const uint8_t *)rq->key, strlen(rq->key), NULL };
		rc = rq->be->put_write(stream, &seg);
		if (rc < 0)
			rq->be->put_abort(stream);
		else
			rc = rq->be->put_commit(stream, "", attrs.p ? attrs.p : "", attrs.len,
			                        info);
	}
	free(info);
	s3_buf_fini(&attrs);
	if (rc < 0)
		return be_err_reply(rq, rc);
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
			s3_buf_printf(&ex, "x-amz-checksum-algorithm: %s\r\n", s3_ck_name(ck));
		s3_resp_xml(rq, 200, &ex, &x);
		s3_buf_fini(&ex);
	}
	s3_buf_fini(&x);
	return 0;
}

/* All parts of an upload, in part-number order. */
static int
mpu_list_parts(struct s3_req *rq, const char *uid, struct s3_list_result *all)
{
	char prefix[64], after[64] = "";

	snprintf(prefix, sizeof(prefix), S3_PART_PREFIX "%s/", uid);
	memset(all, 0, sizeof(*all));
	for (;;) {
		struct s3_list_result lr = { 0 };
		int rc = rq->be->list(rq->be->ctx, rq->bucket, prefix, after, "", 1000, &lr);

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

static unsigned
part_number(const char *key)
{
	const char *s = strrchr(key, '/');

	return s ? (unsigned)strtoul(s + 1, NULL, 10) : 0;
}

static int
end_complete(struct s3_req *rq)
{
	struct s3_complete_req cr;
	struct s3_list_result parts;
	struct mpu_rec *r;
	char uid[64];
	struct s3_objref *refs = NULL;
	char **pkeys = NULL;
	EVP_MD_CTX *md = NULL;
	uint8_t *cks = NULL;
	size_t ckl = 0;
	unsigned ck;
	char etag[48], ckval[64] = "";
	struct s3_obj_info *info = NULL;
	enum s3_err e;
	int rc;

	if (rq->body.err)
		return err_reply(rq, S3E_MALFORMED_XML, NULL);
	e = collect_verify(rq);
	if (e)
		return err_reply(rq, e, NULL);
	if (qparam(rq, "uploadId", uid, sizeof(uid)) != 1)
		return err_reply(rq, S3E_NO_SUCH_UPLOAD, NULL);
	r = calloc(1, sizeof(*r));
	if (!r)
		return err_reply(rq, S3E_INTERNAL, NULL);
	rc = mpu_load(rq, uid, r);
	ck = mpu_rec_ck(r);
	if (rc < 0) {
		s3_buf_fini(&r->key);
		free(r);
		return be_err_reply(rq, rc);
	}
	if (s3_xml_parse_complete(rq->body.p ? rq->body.p : "", rq->body.len, &cr) < 0) {
		s3_buf_fini(&r->key);
		free(r);
		return err_reply(rq, S3E_MALFORMED_XML, NULL);
	}
	for (size_t i = 1; i < cr.n; i++)
		if (cr.parts[i].number <= cr.parts[i - 1].number) {
			e = S3E_INVALID_PART_ORDER;
			goto fail;
		}
	rc = mpu_list_parts(rq, uid, &parts);
	if (rc < 0) {
		e = s3_err_from_errno(rc);
		goto fail;
	}
	refs = calloc(cr.n, sizeof(*refs));
	pkeys = calloc(cr.n, sizeof(*pkeys));
	md = EVP_MD_CTX_new();
	cks = malloc(cr.n * 32 + 1);
	if (!refs || !pkeys || !md || !cks || !EVP_DigestInit_ex(md, EVP_md5(), NULL)) {
		e = S3E_INTERNAL;
		goto fail_parts;
	}
	{
		size_t j = 0;

		for (size_t i = 0; i < cr.n; i++) {
			uint8_t bin[16];
			int n;

			while (j < parts.n &&
			       part_number(parts.entries[j].key) < cr.parts[i].number)
				j++;
			if (j == parts.n ||
			    part_number(parts.entries[j].key) != cr.parts[i].number ||
			    strcmp(parts.entries[j].etag, cr.parts[i].etag) != 0) {
				e = S3E_INVALID_PART;
				goto fail_parts;
			}
			if (i + 1 < cr.n && parts.entries[j].size < MIN_PART) {
				e = S3E_ENTITY_TOO_SMALL;
				goto fail_parts;
			}
			n = 0;
			for (int k = 0; k < 16; k++) {
				unsigned v;

				if (sscanf(parts.entries[j].etag + 2 * k, "%2x", &v) != 1)
					break;
				bin[k] = (uint8_t)v;
				n++;
			}
			if (n != 16) {
				e = S3E_INVALID_PART;
				goto fail_parts;
			}
			EVP_DigestUpdate(md, bin, 16);
			pkeys[i] = parts.entries[j].key;
			refs[i].bucket = rq->bucket;
			refs[i].key = pkeys[i];
			if (ck) {
				struct s3_obj_info *pi = malloc(sizeof(*pi));
				const char *v;
				char name[48];
				int vl;

				snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(ck));
				if (!pi ||
				    rq->be->stat(rq->be->ctx, rq->bucket, pkeys[i], pi) < 0 ||
				    (vl = attr_get(pi->attrs, pi->attrs_len, name, &v)) <= 0 ||
				    vl >= 64) {
					free(pi);
					e = S3E_INVALID_PART;
					goto fail_parts;
				}
				{
					char tmp[64];
					int dl;

					memcpy(tmp, v, (size_t)vl);
					tmp[vl] = '\0';
					dl = s3_b64_decode(tmp, (size_t)vl, cks + ckl, 32);
					free(pi);
					if (dl < 0) {
						e = S3E_INVALID_PART;
						goto fail_parts;
					}
					if (cr.parts[i].ck == ck &&
					    strcmp(cr.parts[i].checksum, tmp) != 0) {
						e = S3E_INVALID_PART;
						goto fail_parts;
					}
					ckl += (size_t)dl;
				}
			}
		}
	}
	{
		uint8_t d[16];

		EVP_DigestFinal_ex(md, d, NULL);
		s3_hex(d, 16, etag);
		snprintf(etag + 32, sizeof(etag) - 32, "-%zu", cr.n);
	}
	{
		struct s3_buf attrs;
		size_t i = 0;
		const char *a = r->info.attrs;

		s3_buf_init(&attrs, S3_ATTRS_MAX);
		while (i < r->info.attrs_len) {
			const char *eol = memchr(a + i, '\n', r->info.attrs_len - i);
			size_t ll = eol ? (size_t)(eol - a - i) : r->info.attrs_len - i;

			if (strncmp(a + i, "zest-", 5) != 0) {
				s3_buf_add(&attrs, a + i, ll);
				s3_buf_add(&attrs, "\n", 1);
			}
			i += ll + 1;
		}
		if (ck) {
			struct s3_sum s;
			struct s3_sum_out o;
			char name[48];
			size_t l;

			s3_sum_init(&s, ck);
			s3_sum_update(&s, cks, ckl);
			s3_sum_final(&s, &o);
			s3_sum_fini(&s);
			s3_ck_value(&o, ck, ckval);
			l = strlen(ckval);
			snprintf(ckval + l, sizeof(ckval) - l, "-%zu", cr.n);
			snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(ck));
			attr_add(&attrs, name, strlen(name), ckval, strlen(ckval));
		}
		info = malloc(sizeof(*info));
		rc = info ? rq->be->compose(rq->be->ctx, rq->bucket, rq->key, refs, cr.n, true,
		                            etag, attrs.p ? attrs.p : "", attrs.len, info)
		          : -ENOMEM;
		s3_buf_fini(&attrs);
		if (rc < 0) {
			e = s3_err_from_errno(rc);
			goto fail_parts;
		}
	}
	/* parts uploaded but not named in the list, then the upload record */
	for (size_t j = 0; j < parts.n; j++) {
		bool used = false, existed;

		for (size_t i = 0; i < cr.n && !used; i++)
			used = pkeys[i] == parts.entries[j].key;
		if (!used)
			rq->be->del(rq->be->ctx, rq->bucket, parts.entries[j].key, &existed);
	}
	{
		char rk[160];
		bool existed;
		struct s3_buf x;
		const struct s3_hdr *host = hdr(rq, "host");

		snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, uid);
		rq->be->del(rq->be->ctx, S3_RESERVED_BUCKET, rk, &existed);
		s3_buf_init(&x, 16384);
		s3_buf_adds(&x, XML_DECL "<CompleteMultipartUploadResult xmlns=\"" S3_NS
		                         "\"><Location>");
		{
			struct s3_buf loc;

			s3_buf_init(&loc, 8192);
			s3_buf_printf(&loc, "%s://", rq->cfg->tls_cert ? "https" : "http");
			if (host)
				s3_buf_add(&loc, host->val, host->val_len);
			s3_buf_printf(&loc, "/%s/", rq->bucket);
			s3_buf_add_uri(&loc, rq->key, strlen(rq->key), true);
			s3_buf_add_xml(&x, loc.p, loc.len);
			s3_buf_fini(&loc);
		}
		s3_buf_adds(&x, "</Location><Bucket>");
		s3_buf_add_xml(&x, rq->bucket, strlen(rq->bucket));
		s3_buf_adds(&x, "</Bucket>");
		s3_xml_key(&x, "Key", rq->key, false);
		s3_buf_printf(&x, "<ETag>&quot;%s&quot;</ETag>", etag);
		if (ck)
			s3_buf_printf(&x, "<Checksum%s>%s</Checksum%s>",
			              ck == S3_CK_CRC32       ? "CRC32"
			              : ck == S3_CK_CRC32C    ? "CRC32C"
			              : ck == S3_CK_CRC64NVME ? "CRC64NVME"
			              : ck == S3_CK_SHA1      ? "SHA1"
			                                      : "SHA256",
			              ckval,
			              ck == S3_CK_CRC32       ? "CRC32"
			              : ck == S3_CK_CRC32C    ? "CRC32C"
			              : ck == S3_CK_CRC64NVME ? "CRC64NVME"
			              : ck == S3_CK_SHA1      ? "SHA1"
			                                      : "SHA256");
		s3_buf_adds(&x, "</CompleteMultipartUploadResult>");
		s3_resp_xml(rq, 200, NULL, &x);
		s3_buf_fini(&x);
	}
	e = S3_OK;
fail_parts:
	s3_list_result_fini(&parts);
fail:
	free(info);
	free(refs);
	free(pkeys);
	free(cks);
	EVP_MD_CTX_free(md);
	s3_complete_req_fini(&cr);
	s3_buf_fini(&r->key);
	free(r);
	if (e)
		return err_reply(rq, e, NULL);
	return 0;
}

static int
op_mpu_abort(struct s3_req *rq)
{
	char uid[64], rk[160];
	struct mpu_rec *r = calloc(1, sizeof(*r));
	struct s3_list_result parts;
	bool existed;
	int rc;

	if (!r)
		return err_reply(rq, S3E_INTERNAL, NULL);
	if (qparam(rq, "uploadId", uid, sizeof(uid)) != 1)
		uid[0] = '\0';
	rc = mpu_load(rq, uid, r);
	s3_buf_fini(&r->key);
	free(r);
	if (rc < 0)
		return be_err_reply(rq, rc);
	rc = mpu_list_parts(rq, uid, &parts);
	if (rc == 0) {
		for (size_t j = 0; j < parts.n; j++)
			rq->be->del(rq->be->ctx, rq->bucket, parts.entries[j].key, &existed);
		s3_list_result_fini(&parts);
	}
	snprintf(rk, sizeof(rk), MPU_REC "%s/%s", rq->bucket, uid);
	rq->be->del(rq->be->ctx, S3_RESERVED_BUCKET, rk, &existed);
	s3_resp_xml(rq, 204, NULL, NULL);
	return 0;
}

static int
op_list_parts(struct s3_req *rq)
{
	char uid[64], v[32];
	struct mpu_rec *r = calloc(1, sizeof(*r));
	struct s3_list_result parts;
	unsigned long max_parts = 1000, marker = 0;
	struct s3_buf x;
	size_t shown = 0;
	unsigned last = 0;
	bool truncated = false;
	int rc;

	if (!r)
		return err_reply(rq, S3E_INTERNAL, NULL);
	if (qparam(rq, "uploadId", uid, sizeof(uid)) != 1)
		uid[0] = '\0';
	if ((qparam(rq, "max-parts", v, sizeof(v)) == 1 && parse_uint(v, 1000, &max_parts) < 0) ||
	    (qparam(rq, "part-number-marker", v, sizeof(v)) == 1 &&
	     parse_uint(v, 10000, &marker) < 0)) {
		free(r);
		return err_reply(rq, S3E_INVALID_ARGUMENT, NULL);
	}
	rc = mpu_load(rq, uid, r);
	s3_buf_fini(&r->key);
	free(r);
	if (rc < 0)
		return be_err_reply(rq, rc);
	rc = mpu_list_parts(rq, uid, &parts);
	if (rc < 0)
		return be_err_reply(rq, rc);
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
	for (size_t j = 0; j < parts.n; j++) {
		unsigned pn = part_number(parts.entries[j].key);
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
		              "<ETag>&quot;%s&quot;</ETag><Size>%lu</Size></Part>",
		              pn, t, parts.entries[j].etag, (unsigned long)parts.entries[j].size);
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
};

static int
upl_cmp(const void *a, const void *b)
{
	const struct upl *x = a, *y = b;
	int c = strcmp(x->key, y->key);

	return c ? c : strcmp(x->uid, y->uid);
}

static int
op_list_uploads(struct s3_req *rq)
{
	char prefix[80];
	char *kprefix = calloc(1, 4 * S3_MAX_KEY + 1);
	char *kmarker = calloc(1, 4 * S3_MAX_KEY + 1);
	char umarker[64] = "", mu[16];
	unsigned long max_uploads = 1000;
	struct s3_list_result lr = { 0 };
	struct upl *u = NULL;
	size_t nu = 0, shown = 0, first = 0;
	bool truncated = false;
	struct s3_buf x;
	struct s3_bucket_info bi;
	int rc;

	if (!kprefix || !kmarker) {
		free(kprefix);
		free(kmarker);
		return err_reply(rq, S3E_INTERNAL, NULL);
	}
	rc = rq->be->bucket_head(rq->be->ctx, rq->bucket, &bi);
	if (rc < 0) {
		free(kprefix);
		free(kmarker);
		return be_err_reply(rq, rc);
	}
	qparam(rq, "prefix", kprefix, 4 * S3_MAX_KEY + 1);
	if (qparam(rq, "key-marker", kmarker, 4 * S3_MAX_KEY + 1) < 0 ||
	    qparam(rq, "upload-id-marker", umarker, sizeof(umarker)) < 0 ||
	    (qparam(rq, "max-uploads", mu, sizeof(mu)) == 1 &&
	     parse_uint(mu, 1000, &max_uploads) < 0)) {
		free(kprefix);
		free(kmarker);
		return err_reply(rq, S3E_INVALID_ARGUMENT, NULL);
	}
	snprintf(prefix, sizeof(prefix), MPU_REC "%s/", rq->bucket);
	rc = rq->be->list(rq->be->ctx, S3_RESERVED_BUCKET, prefix, "", "", 10000, &lr);
	if (rc < 0) {
		free(kprefix);
		free(kmarker);
		return be_err_reply(rq, rc);
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
		if (rq->be->get(rq->be->ctx, S3_RESERVED_BUCKET, lr.entries[i].key, 0, 0, false,
		                rec_info, rec_emit, r) == 0 &&
		    r->key.p && strncmp(r->key.p, kprefix, strlen(kprefix)) == 0) {
			u[nu].key = strdup(r->key.p);
			snprintf(u[nu].uid, sizeof(u[nu].uid), "%s", id + 1);
			u[nu].mtime_ns = lr.entries[i].mtime_ns;
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
	s3_buf_init(&x, 16u << 20);
	s3_buf_adds(&x, XML_DECL "<ListMultipartUploadsResult xmlns=\"" S3_NS "\"><Bucket>");
	s3_buf_add_xml(&x, rq->bucket, strlen(rq->bucket));
	s3_buf_adds(&x, "</Bucket>");
	s3_xml_key(&x, "KeyMarker", kmarker, false);
	s3_buf_printf(&x, "<UploadIdMarker>%s</UploadIdMarker>", umarker);
	s3_xml_key(&x, "Prefix", kprefix, false);
	shown = nu - first < max_uploads ? nu - first : max_uploads;
	truncated = first + shown < nu;
	if (truncated && shown) {
		s3_xml_key(&x, "NextKeyMarker", u[first + shown - 1].key, false);
		s3_buf_printf(&x, "<NextUploadIdMarker>%s</NextUploadIdMarker>",
		              u[first + shown - 1].uid);
	}
	s3_buf_printf(&x, "<MaxUploads>%lu</MaxUploads><IsTruncated>%s</IsTruncated>", max_uploads,
	              truncated ? "true" : "false");
	for (size_t i = 0; i < nu; i++) {
		char t[32];

		if (i < first || i >= first + shown) {
			free(u[i].key);
			continue;
		}

		s3_xml_time(u[i].mtime_ns, t);
		s3_buf_adds(&x, "<Upload>");
		s3_xml_key(&x, "Key", u[i].key, false);
		s3_buf_printf(&x,
		              "<UploadId>%s</UploadId><Initiator><ID>zest</ID><DisplayName>zest"
		              "</DisplayName></Initiator><Owner><ID>zest</ID><DisplayName>zest"
		              "</DisplayName></Owner><StorageClass>STANDARD</StorageClass>"
		              "<Initiated>%s</Initiated></Upload>",
		              u[i].uid, t);
		free(u[i].key);
	}
	s3_buf_adds(&x, "</ListMultipartUploadsResult>");
	s3_resp_xml(rq, 200, NULL, &x);
	s3_buf_fini(&x);
	free(u);
	s3_list_result_fini(&lr);
	free(kprefix);
	free(kmarker);
	return 0;
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
	bool get = method_is(rq, "GET") || rq->is_head, put = method_is(rq, "PUT"),
	     del = method_is(rq, "DELETE"), post = method_is(rq, "POST");

	for (size_t i = 0; i < sizeof(unsupported_sub) / sizeof(unsupported_sub[0]); i++)
		if (has_q(rq, unsupported_sub[i]))
			return err_reply(rq, S3E_NOT_IMPLEMENTED,
			                 "This subresource is not implemented");
	if (!rq->bucket[0]) {
		if (get && !rq->is_head) {
			rq->op = S3_OP_LIST_BUCKETS;
			return op_list_buckets(rq);
		}
		return err_reply(rq, S3E_METHOD_NOT_ALLOWED, NULL);
	}
	if (!rq->key) {
		if (get && has_q(rq, "location")) {
			rq->op = S3_OP_BUCKET_META;
			return op_bucket_meta(rq, true);
		}
		if (get && has_q(rq, "versioning")) {
			rq->op = S3_OP_BUCKET_META;
			return op_bucket_meta(rq, false);
		}
		if (get && has_q(rq, "uploads")) {
			rq->op = S3_OP_MPU_LIST;
			return op_list_uploads(rq);
		}
		if (rq->is_head || del) {
			rq->op = rq->is_head ? S3_OP_HEAD_BUCKET : S3_OP_DELETE_BUCKET;
			return op_bucket_simple(rq);
		}
		if (get) {
			char lt[8] = "";

			rq->op = S3_OP_LIST_OBJECTS;
			qparam(rq, "list-type", lt, sizeof(lt));
			return op_list_objects(rq, strcmp(lt, "2") == 0);
		}
		if (put) {
			rq->op = S3_OP_CREATE_BUCKET;
			if (!bucket_name_ok(rq->bucket))
				return err_reply(rq, S3E_INVALID_BUCKET_NAME, NULL);
			if (!rq->http.has_length && !rq->http.chunked)
				return end_create_bucket(rq);
			return collect_begin(rq);
		}
		if (post && has_q(rq, "delete")) {
			rq->op = S3_OP_DELETE_OBJECTS;
			return collect_begin(rq);
		}
		return err_reply(rq, S3E_METHOD_NOT_ALLOWED, NULL);
	}
	if (put) {
		bool part = has_q(rq, "uploadId") || has_q(rq, "partNumber");

		rq->op = part ? S3_OP_MPU_PART : S3_OP_PUT_OBJECT;
		return op_put_begin(rq, part);
	}
	if (get && has_q(rq, "uploadId")) {
		rq->op = S3_OP_MPU_LIST;
		return op_list_parts(rq);
	}
	if (get) {
		rq->op = rq->is_head ? S3_OP_HEAD_OBJECT : S3_OP_GET_OBJECT;
		return op_get_object(rq);
	}
	if (del && has_q(rq, "uploadId")) {
		rq->op = S3_OP_MPU_ABORT;
		return op_mpu_abort(rq);
	}
	if (del) {
		rq->op = S3_OP_DELETE_OBJECT;
		return op_delete_object(rq);
	}
	if (post && has_q(rq, "uploads")) {
		rq->op = S3_OP_MPU_CREATE;
		return op_mpu_create(rq);
	}
	if (post && has_q(rq, "uploadId")) {
		rq->op = S3_OP_MPU_COMPLETE;
		return collect_begin(rq);
	}
	return err_reply(rq, S3E_METHOD_NOT_ALLOWED, NULL);
}

int
s3_ops_begin(struct s3_req *rq)
{
	enum s3_err e;

	e = s3_sigv4_verify(&rq->http, &rq->creds, time(NULL), &rq->auth);
	if (e) {
		if (!rq->resource)
			route(rq); /* for the Resource of the error body */
		return err_reply(
		        rq, e,
		        e == S3E_INVALID_REQUEST
		                ? "Missing required header for this request: x-amz-content-sha256"
		                : NULL);
	}
	e = route(rq);
	if (e)
		return err_reply(rq, e, NULL);
	if (strcmp(rq->bucket, S3_RESERVED_BUCKET) == 0)
		return err_reply(rq, S3E_INVALID_BUCKET_NAME, NULL);
	return dispatch(rq);
}

int
s3_ops_body(struct s3_req *rq, const uint8_t *p, size_t n)
{
	if (rq->body_mode == S3_BODY_STREAM && rq->put)
		return put_body(rq, p, n);
	if (rq->body_mode == S3_BODY_COLLECT) {
		s3_metric_copied(S3_COPY_COLLECT, n);
		if (s3_buf_add(&rq->body, p, n) < 0)
			return s3_backend_err(S3E_ENTITY_TOO_LARGE);
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
		return put_end(rq);
	case S3_OP_CREATE_BUCKET:
		return end_create_bucket(rq);
	case S3_OP_DELETE_OBJECTS:
		return end_delete_objects(rq);
	case S3_OP_MPU_COMPLETE:
		return end_complete(rq);
	default:
		return err_reply(rq, S3E_INTERNAL, NULL);
	}
}

void
s3_ops_abort(struct s3_req *rq, enum s3_err err)
{
	put_free(rq);
	if (err != S3_OK && !rq->head_sent)
		s3_resp_error(rq, err, NULL);
}

void
s3_req_fini(struct s3_req *rq)
{
	put_free(rq);
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
