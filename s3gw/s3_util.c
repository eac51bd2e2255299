/* s3_util: bounded buffers, encodings, the S3 error table, list results. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "s3_util_internal.h"

static const struct s3_err_info err_table[S3E_COUNT] = {
	[S3_OK] = { 200, "OK", "OK" },
	[S3E_ACCESS_DENIED] = { 403, "AccessDenied", "Access Denied" },
	[S3E_ACCESS_FORBIDDEN] = { 403, "AccessForbidden",
	                           "CORSResponse: This CORS request is not allowed." },
	[S3E_BAD_DIGEST] = { 400, "BadDigest",
	                     "The Content-MD5 or checksum you specified did not match what we "
	                     "received." },
	[S3E_BUCKET_EXISTS_OWNED] = { 409, "BucketAlreadyOwnedByYou",
	                              "Your previous request to create the named bucket succeeded "
	                              "and you already own it." },
	[S3E_BUCKET_NOT_EMPTY] = { 409, "BucketNotEmpty",
	                           "The bucket you tried to delete is not empty" },
	[S3E_ENTITY_TOO_LARGE] = { 400, "EntityTooLarge",
	                           "Your proposed upload exceeds the maximum allowed object "
	                           "size." },
	[S3E_ENTITY_TOO_SMALL] = { 400, "EntityTooSmall",
	                           "Your proposed upload is smaller than the minimum allowed "
	                           "object size." },
	[S3E_INCOMPLETE_BODY] = { 400, "IncompleteBody",
	                          "You did not provide the number of bytes specified by the "
	                          "Content-Length HTTP header." },
	[S3E_INTERNAL] = { 500, "InternalError",
	                   "We encountered an internal error. Please try again." },
	[S3E_INVALID_ARGUMENT] = { 400, "InvalidArgument", "Invalid Argument" },
	[S3E_INVALID_BUCKET_NAME] = { 400, "InvalidBucketName",
	                              "The specified bucket is not valid." },
	[S3E_INVALID_DIGEST] = { 400, "InvalidDigest",
	                         "The Content-MD5 you specified is not valid." },
	[S3E_INVALID_PART] = { 400, "InvalidPart",
	                       "One or more of the specified parts could not be found." },
	[S3E_INVALID_PART_ORDER] = { 400, "InvalidPartOrder",
	                             "The list of parts was not in ascending order." },
	[S3E_INVALID_RANGE] = { 416, "InvalidRange", "The requested range is not satisfiable" },
	[S3E_INVALID_REQUEST] = { 400, "InvalidRequest", "Invalid Request" },
	[S3E_KEY_TOO_LONG] = { 400, "KeyTooLongError", "Your key is too long" },
	[S3E_MALFORMED_XML] = { 400, "MalformedXML",
	                        "The XML you provided was not well-formed or did not validate "
	                        "against our published schema." },
	[S3E_METHOD_NOT_ALLOWED] = { 405, "MethodNotAllowed",
	                             "The specified method is not allowed against this resource." },
	[S3E_MISSING_CONTENT_LENGTH] = { 411, "MissingContentLength",
	                                 "You must provide the Content-Length HTTP header." },
	[S3E_NO_SUCH_BUCKET] = { 404, "NoSuchBucket", "The specified bucket does not exist" },
	[S3E_NO_SUCH_KEY] = { 404, "NoSuchKey", "The specified key does not exist." },
	[S3E_NO_SUCH_UPLOAD] = { 404, "NoSuchUpload", "The specified upload does not exist." },
	[S3E_NOT_IMPLEMENTED] = { 501, "NotImplemented",
	                          "A header you provided implies functionality that is not "
	                          "implemented." },
	[S3E_PRECONDITION_FAILED] = { 412, "PreconditionFailed",
	                              "At least one of the preconditions you specified did not "
	                              "hold." },
	[S3E_NOT_MODIFIED] = { 304, "NotModified", "Not Modified" },
	[S3E_CONDITIONAL_CONFLICT] = { 409, "ConditionalRequestConflict",
	                               "A conflicting conditional operation is currently in "
	                               "progress against this resource. Please try again." },
	[S3E_REQUEST_TIME_TOO_SKEWED] = { 403, "RequestTimeTooSkewed",
	                                  "The difference between the request time and the "
	                                  "server's time is too large." },
	[S3E_SIGNATURE_DOES_NOT_MATCH] = { 403, "SignatureDoesNotMatch",
	                                   "The request signature we calculated does not match the "
	                                   "signature you provided." },
	[S3E_SLOW_DOWN] = { 503, "SlowDown", "Please reduce your request rate." },
	[S3E_SERVICE_UNAVAILABLE] = { 503, "ServiceUnavailable", "Reduce your request rate." },
	[S3E_AUTH_HEADER_MALFORMED] = { 400, "AuthorizationHeaderMalformed",
	                                "The authorization header is malformed." },
	[S3E_INVALID_ACCESS_KEY] = { 403, "InvalidAccessKeyId",
	                             "The AWS Access Key Id you provided does not exist in our "
	                             "records." },
	[S3E_BAD_REQUEST] = { 400, "BadRequest", "Malformed HTTP request" },
	[S3E_HEADER_TOO_LARGE] = { 400, "RequestHeaderSectionTooLarge",
	                           "Your request header section exceeds the maximum allowed "
	                           "size." },
	[S3E_REQUEST_TIMEOUT] = { 400, "RequestTimeout",
	                          "Your socket connection to the server was not read from or "
	                          "written to within the timeout period." },
	[S3E_XAMZ_CONTENT_SHA256_MISMATCH] = { 400, "XAmzContentSHA256Mismatch",
	                                       "The provided 'x-amz-content-sha256' header does "
	                                       "not match what was computed." },
	[S3E_MALFORMED_TRAILER] = { 400, "MalformedTrailerError",
	                            "The request contained trailing data that was not "
	                            "well-formed." },
	[S3E_HTTP_VERSION] = { 505, "HTTPVersionNotSupported",
	                       "The HTTP version of the request is not supported." },
	[S3E_INVALID_URI] = { 400, "InvalidURI", "Couldn't parse the specified URI." },
	[S3E_INVALID_STORAGE_CLASS] = { 400, "InvalidStorageClass",
	                                "The storage class you specified is not valid" },
	[S3E_ACL_NOT_SUPPORTED] = { 400, "AccessControlListNotSupported",
	                            "The bucket does not allow ACLs" },
	[S3E_INVALID_BUCKET_ACL] = { 400, "InvalidBucketAclWithObjectOwnership",
	                             "Bucket cannot have ACLs set with ObjectOwnership's "
	                             "BucketOwnerEnforced setting" },
	[S3E_AUTH_QUERY_PARAMS] = { 400, "AuthorizationQueryParametersError",
	                            "Query-string authentication requires the X-Amz-Algorithm, "
	                            "X-Amz-Credential, X-Amz-Signature, X-Amz-Date, "
	                            "X-Amz-SignedHeaders, and X-Amz-Expires parameters." },
	[S3E_METADATA_TOO_LARGE] = { 400, "MetadataTooLarge",
	                             "Your metadata headers exceed the maximum allowed metadata "
	                             "size." },
};

const struct s3_err_info *
s3_err_info(enum s3_err e)
{
	if ((unsigned)e >= S3E_COUNT || !err_table[e].code)
		return &err_table[S3E_INTERNAL];
	return &err_table[e];
}

_Static_assert(S3_ERR_BASE + S3E_COUNT <= ZC_ERR_BASE, "S3_E() must not reach ZC_E()");

enum s3_err
s3_err_from_errno(int err)
{
	/* The one table from zest's error codes (the datanodes') to S3. */
	static const enum s3_err from_zc[ZC_CODE_COUNT] = {
		[ZC_OK] = S3_OK,
		[ZC_NO_BUCKET] = S3E_NO_SUCH_BUCKET,
		[ZC_NO_KEY] = S3E_NO_SUCH_KEY,
		[ZC_BUCKET_EXISTS] = S3E_BUCKET_EXISTS_OWNED,
		[ZC_BUCKET_NOT_EMPTY] = S3E_BUCKET_NOT_EMPTY,
		[ZC_INVALID] = S3E_INVALID_ARGUMENT,
		[ZC_BAD_DIGEST] = S3E_BAD_DIGEST,
		[ZC_PRECONDITION] = S3E_PRECONDITION_FAILED,
		[ZC_SLOW_DOWN] = S3E_SLOW_DOWN,
		[ZC_NO_SPACE] = S3E_SLOW_DOWN,
		[ZC_NO_QUORUM] = S3E_SERVICE_UNAVAILABLE,
		[ZC_CHANGED] = S3E_SLOW_DOWN,
		[ZC_CANCELED] = S3E_INTERNAL,
		[ZC_NOT_IMPLEMENTED] = S3E_NOT_IMPLEMENTED,
		[ZC_UNAVAILABLE] = S3E_SLOW_DOWN,
		[ZC_INTERNAL] = S3E_INTERNAL,
		[ZC_CELL_EXISTS] = S3E_INTERNAL, /* datanode to datanode only */
	};

	if (err <= -S3_ERR_BASE && err > -(S3_ERR_BASE + S3E_COUNT))
		return (enum s3_err)(-err - S3_ERR_BASE);
	if (err <= -ZC_ERR_BASE && err > -(ZC_ERR_BASE + ZC_CODE_COUNT))
		return from_zc[zc_err_code(err)];
	switch (err) {
	case -ENOENT:
		return S3E_NO_SUCH_KEY;
	case -EINVAL:
		return S3E_INVALID_ARGUMENT;
	case -EBADMSG:
		return S3E_BAD_DIGEST;
	case -EAGAIN:
	case -EBUSY:
		return S3E_SLOW_DOWN;
	case -EMSGSIZE:
	case -EFBIG:
		return S3E_ENTITY_TOO_LARGE;
	case -EEXIST:
		return S3E_BUCKET_EXISTS_OWNED;
	case -ENOTEMPTY:
		return S3E_BUCKET_NOT_EMPTY;
	case -EPIPE:
		return S3E_INCOMPLETE_BODY;
	default:
		/* the nearest code (-ETIMEDOUT, -ECONNREFUSED: unavailable, SlowDown) */
		return from_zc[zc_err_code(err)];
	}
}

static _Thread_local uint64_t rq_key;

void
s3_rq_enter(uint64_t key)
{
	rq_key = key;
}

uint64_t
s3_rq_current(void)
{
	return rq_key;
}

void
s3_buf_init(struct s3_buf *b, size_t max)
{
	memset(b, 0, sizeof(*b));
	b->max = max;
}

void
s3_buf_fini(struct s3_buf *b)
{
	free(b->p);
	memset(b, 0, sizeof(*b));
}

int
s3_buf_add(struct s3_buf *b, const void *p, size_t n)
{
	if (b->err)
		return b->err;
	if (b->len + n + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 256;
		char *np;

		if (b->len + n + 1 > b->max) {
			b->err = -EMSGSIZE;
			return b->err;
		}
		while (cap < b->len + n + 1)
			cap *= 2;
		if (cap > b->max)
			cap = b->max;
		np = realloc(b->p, cap);
		if (!np) {
			b->err = -ENOMEM;
			return b->err;
		}
		b->p = np;
		b->cap = cap;
	}
	if (n)
		memcpy(b->p + b->len, p, n);
	b->len += n;
	b->p[b->len] = '\0';
	return 0;
}

int
s3_buf_adds(struct s3_buf *b, const char *s)
{
	return s3_buf_add(b, s, strlen(s));
}

int
s3_buf_printf(struct s3_buf *b, const char *fmt, ...)
{
	char small[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		return -EINVAL;
	if ((size_t)n < sizeof(small))
		return s3_buf_add(b, small, (size_t)n);
	{
		char *big = malloc((size_t)n + 1);
		int rc;

		if (!big)
			return b->err = -ENOMEM;
		va_start(ap, fmt);
		vsnprintf(big, (size_t)n + 1, fmt, ap);
		va_end(ap);
		rc = s3_buf_add(b, big, (size_t)n);
		free(big);
		return rc;
	}
}

int
s3_buf_add_xml(struct s3_buf *b, const char *s, size_t n)
{
	size_t start = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		const char *rep = NULL;
		char num[16];

		switch (c) {
		case '&':
			rep = "&amp;";
			break;
		case '<':
			rep = "&lt;";
			break;
		case '>':
			rep = "&gt;";
			break;
		case '"':
			rep = "&quot;";
			break;
		case '\'':
			rep = "&apos;";
			break;
		default:
			if (c < 0x20 && c != '\t' && c != '\n' && c != '\r') {
				snprintf(num, sizeof(num), "&#x%X;", c);
				rep = num;
			}
		}
		if (rep) {
			s3_buf_add(b, s + start, i - start);
			s3_buf_adds(b, rep);
			start = i + 1;
		}
	}
	return s3_buf_add(b, s + start, n - start);
}

static bool
unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '-' || c == '_' || c == '.' || c == '~';
}

int
s3_buf_add_uri(struct s3_buf *b, const char *s, size_t n, bool keep_slash)
{
	static const char hx[] = "0123456789ABCDEF";
	size_t start = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[3];

		if (unreserved(c) || (keep_slash && c == '/'))
			continue;
		s3_buf_add(b, s + start, i - start);
		esc[0] = '%';
		esc[1] = hx[c >> 4];
		esc[2] = hx[c & 15];
		s3_buf_add(b, esc, 3);
		start = i + 1;
	}
	return s3_buf_add(b, s + start, n - start);
}

void
s3_hex(const uint8_t *in, size_t n, char *out)
{
	static const char hx[] = "0123456789abcdef";

	for (size_t i = 0; i < n; i++) {
		out[2 * i] = hx[in[i] >> 4];
		out[2 * i + 1] = hx[in[i] & 15];
	}
	out[2 * n] = '\0';
}

static const char b64chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

void
s3_b64_encode(const uint8_t *in, size_t n, char *out)
{
	size_t o = 0, i;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)in[i] << 16 | (uint32_t)in[i + 1] << 8 | in[i + 2];

		out[o++] = b64chars[v >> 18];
		out[o++] = b64chars[(v >> 12) & 63];
		out[o++] = b64chars[(v >> 6) & 63];
		out[o++] = b64chars[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)in[i] << 16 | (i + 1 < n ? (uint32_t)in[i + 1] << 8 : 0);

		out[o++] = b64chars[v >> 18];
		out[o++] = b64chars[(v >> 12) & 63];
		out[o++] = i + 1 < n ? b64chars[(v >> 6) & 63] : '=';
		out[o++] = '=';
	}
	out[o] = '\0';
}

static int
b64val(char c)
{
	const char *p = c ? strchr(b64chars, c) : NULL;

	return p ? (int)(p - b64chars) : -1;
}

int
s3_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap)
{
	size_t o = 0;

	if (n % 4)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 4) {
		int v[4], pad = 0;

		for (int j = 0; j < 4; j++) {
			if (in[i + j] == '=' && i + 4 == n && j >= 2) {
				v[j] = 0;
				pad++;
			} else {
				if (pad)
					return -EINVAL;
				v[j] = b64val(in[i + j]);
				if (v[j] < 0)
					return -EINVAL;
			}
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
		             (uint32_t)v[3];
		uint8_t bytes[3] = { (uint8_t)(w >> 16), (uint8_t)(w >> 8), (uint8_t)w };

		for (int j = 0; j < 3 - pad; j++) {
			if (o >= cap)
				return -EMSGSIZE;
			out[o++] = bytes[j];
		}
	}
	return (int)o;
}

static int
hexval(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int
s3_uri_decode(const char *in, size_t n, char *out, size_t cap, bool plus_space)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		char c = in[i];

		if (c == '%') {
			int h, l;

			if (i + 2 >= n)
				return -EINVAL;
			h = hexval(in[i + 1]);
			l = hexval(in[i + 2]);
			if (h < 0 || l < 0)
				return -EINVAL;
			c = (char)(h << 4 | l);
			i += 2;
		} else if (c == '+' && plus_space) {
			c = ' ';
		}
		if (o + 1 >= cap)
			return -EMSGSIZE;
		out[o++] = c;
	}
	out[o] = '\0';
	return (int)o;
}

void
s3_list_result_fini(struct s3_list_result *r)
{
	for (size_t i = 0; i < r->n; i++)
		free(r->entries[i].key);
	for (size_t i = 0; i < r->nprefix; i++)
		free(r->prefixes[i]);
	free(r->entries);
	free(r->prefixes);
	free(r->next_start_after);
	memset(r, 0, sizeof(*r));
}

int
s3_list_result_add(struct s3_list_result *r, const char *key, uint64_t size, const char *etag,
                   uint64_t mtime_ns)
{
	struct s3_list_entry *e;

	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		void *p = realloc(r->entries, cap * sizeof(*r->entries));

		if (!p)
			return -ENOMEM;
		r->entries = p;
		r->cap = cap;
	}
	e = &r->entries[r->n];
	e->key = strdup(key);
	if (!e->key)
		return -ENOMEM;
	e->size = size;
	snprintf(e->etag, sizeof(e->etag), "%s", etag ? etag : "");
	e->mtime_ns = mtime_ns;
	r->n++;
	return 0;
}

int
s3_list_result_add_prefix(struct s3_list_result *r, const char *prefix)
{
	if (r->nprefix == r->prefix_cap) {
		size_t cap = r->prefix_cap ? r->prefix_cap * 2 : 16;
		void *p = realloc(r->prefixes, cap * sizeof(*r->prefixes));

		if (!p)
			return -ENOMEM;
		r->prefixes = p;
		r->prefix_cap = cap;
	}
	r->prefixes[r->nprefix] = strdup(prefix);
	if (!r->prefixes[r->nprefix])
		return -ENOMEM;
	r->nprefix++;
	return 0;
}

struct seg_copy {
	struct zc_ref ref;
	uint8_t data[];
};

static void
seg_copy_release(struct zc_ref *ref)
{
	free((struct seg_copy *)((char *)ref - offsetof(struct seg_copy, ref)));
}

int
s3_seg_dup(const void *p, size_t n, struct zc_seg *out)
{
	struct seg_copy *c = malloc(sizeof(*c) + (n ? n : 1));

	if (!c)
		return -ENOMEM;
	memcpy(c->data, p, n);
	zc_ref_init(&c->ref, seg_copy_release);
	*out = (struct zc_seg){ c->data, n, &c->ref };
	return 0;
}
