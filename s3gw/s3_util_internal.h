/*
 * s3_util_internal: the gateway's S3 error table and its small helpers (s3_util.c):
 * bounded growable buffers, hex, base64 and percent-encoding. Private to s3gw/; tests reach
 * it through s3_internal_dep. Pure functions and caller-owned state: any thread.
 */
#ifndef ZEST_S3_UTIL_INTERNAL_H
#define ZEST_S3_UTIL_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3.h"

/* ---------------------------------------------------------------- errors */

enum s3_err {
	S3_OK = 0,
	S3E_ACCESS_DENIED,
	S3E_ACCESS_FORBIDDEN, /* CORS preflight refused (403 AccessForbidden) */
	S3E_BAD_DIGEST,
	S3E_BUCKET_EXISTS_OWNED,
	S3E_BUCKET_NOT_EMPTY,
	S3E_ENTITY_TOO_LARGE,
	S3E_ENTITY_TOO_SMALL,
	S3E_INCOMPLETE_BODY,
	S3E_INTERNAL,
	S3E_INVALID_ARGUMENT,
	S3E_INVALID_BUCKET_NAME,
	S3E_INVALID_DIGEST,
	S3E_INVALID_PART,
	S3E_INVALID_PART_ORDER,
	S3E_INVALID_RANGE,
	S3E_INVALID_REQUEST,
	S3E_KEY_TOO_LONG,
	S3E_MALFORMED_XML,
	S3E_METHOD_NOT_ALLOWED,
	S3E_MISSING_CONTENT_LENGTH,
	S3E_NO_SUCH_BUCKET,
	S3E_NO_SUCH_KEY,
	S3E_NO_SUCH_UPLOAD,
	S3E_NOT_IMPLEMENTED,
	S3E_PRECONDITION_FAILED,
	S3E_NOT_MODIFIED,
	S3E_REQUEST_TIME_TOO_SKEWED,
	S3E_SIGNATURE_DOES_NOT_MATCH,
	S3E_SLOW_DOWN,
	S3E_SERVICE_UNAVAILABLE, /* the datanode cannot take the request (write quorum) */
	S3E_AUTH_HEADER_MALFORMED,
	S3E_INVALID_ACCESS_KEY,
	S3E_BAD_REQUEST,      /* malformed HTTP */
	S3E_HEADER_TOO_LARGE, /* request head over the limit */
	S3E_REQUEST_TIMEOUT,
	S3E_XAMZ_CONTENT_SHA256_MISMATCH,
	S3E_MALFORMED_TRAILER,
	S3E_HTTP_VERSION,
	S3E_INVALID_URI,
	S3E_INVALID_STORAGE_CLASS,
	S3E_ACL_NOT_SUPPORTED,  /* object ACLs other than owner-only (s3_refuse.c) */
	S3E_INVALID_BUCKET_ACL, /* the same on CreateBucket */
	S3E_AUTH_QUERY_PARAMS,  /* a presigned URL's X-Amz-* parameters are malformed */
	S3E_METADATA_TOO_LARGE, /* user metadata over S3_USER_META_MAX */
	S3E_CONDITIONAL_CONFLICT, /* a conditional write raced another write of the key */
	S3E_COUNT
};

struct s3_err_info {
	int http;            /* HTTP status */
	const char *code;    /* S3 code word */
	const char *message; /* default message */
};

/* Static description of an error; never NULL (unknown values map to InternalError). */
const struct s3_err_info *s3_err_info(enum s3_err e);

/* Map an error from a backend (ZC_E(code), common/zc_err.h) or a decoder (-errno) to an
 * S3 error: the edge translation, one table. */
enum s3_err s3_err_from_errno(int err);

/*
 * The request a server worker is running now: a key (its start time, never 0) set by the
 * connection code before each step of a request (s3_ops_begin, s3_ops_end), read by a
 * backend that shares one budget between the calls of one request (s3_bcl's etcd
 * deadline). Per thread; 0 outside a request.
 */
void s3_rq_enter(uint64_t key);
uint64_t s3_rq_current(void);

/*
 * An S3 answer the gateway decides itself (NoSuchUpload, InvalidRange, NotModified, ...),
 * returned by s3gw's own functions beside -errno and ZC_E(code): a third, disjoint range
 * (errno < S3_ERR_BASE <= S3_E < ZC_ERR_BASE) that never leaves the gateway and never
 * comes from a backend. s3_err_from_errno() gives the enum back.
 */
#define S3_ERR_BASE 1000
#define S3_E(e)     (-(S3_ERR_BASE + (int)(e)))

/* ---------------------------------------------------------------- buffers */

/* A growable byte buffer with a hard cap; a failed append sets err and sticks. */
struct s3_buf {
	char *p;
	size_t len, cap, max;
	int err; /* 0 or -ENOMEM / -EMSGSIZE from the first failed append */
};

void s3_buf_init(struct s3_buf *b, size_t max);
void s3_buf_fini(struct s3_buf *b);
int s3_buf_add(struct s3_buf *b, const void *p, size_t n);
int s3_buf_adds(struct s3_buf *b, const char *s);
int s3_buf_printf(struct s3_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append with the five XML entities escaped; control bytes other than tab/CR/LF as &#xN;. */
int s3_buf_add_xml(struct s3_buf *b, const char *s, size_t n);
/* Append percent-encoded as SigV4/S3 wants: unreserved A-Za-z0-9-_.~ kept, '/' kept when
 * keep_slash, every other byte %XX upper case. */
int s3_buf_add_uri(struct s3_buf *b, const char *s, size_t n, bool keep_slash);

void s3_hex(const uint8_t *in, size_t n, char *out); /* writes 2n chars + NUL */
/* A heap copy of p[0..n) as a segment holding the one reference on it (the caller puts
 * seg->ref when done): for small bodies the gateway writes itself (upload records, part
 * tables), since a backend may keep a segment past put_write. 0 or -ENOMEM. */
int s3_seg_dup(const void *p, size_t n, struct zc_seg *out);
/* Decode standard base64 (with padding); returns decoded length or -EINVAL. */
int s3_b64_decode(const char *in, size_t n, uint8_t *out, size_t cap);
/* Encode standard base64 with padding; out needs 4*ceil(n/3)+1 bytes. */
void s3_b64_encode(const uint8_t *in, size_t n, char *out);
/* Percent-decode into out (cap bytes, NUL terminated); plus_space turns '+' into ' '.
 * Returns length or -EINVAL (bad escape) / -EMSGSIZE. */
int s3_uri_decode(const char *in, size_t n, char *out, size_t cap, bool plus_space);

#endif
