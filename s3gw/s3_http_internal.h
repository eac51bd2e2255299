/*
 * s3_http_internal: the incremental HTTP/1.1 request-head parser (s3_http.c). Private to
 * s3gw/; tests and fuzzers reach it through s3_internal_dep. Pure: any thread.
 */
#ifndef ZEST_S3_HTTP_INTERNAL_H
#define ZEST_S3_HTTP_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define S3_HTTP_MAX_HEADERS 64

struct s3_hdr {
	const char *name, *val;
	size_t name_len, val_len;
};

/* A parsed request head; every pointer points into the caller's input. */
struct s3_http_req {
	const char *method, *target, *path, *query; /* path/query: raw (percent-encoded) */
	size_t method_len, target_len, path_len, query_len;
	int minor; /* HTTP/1.minor */
	struct s3_hdr hdr[S3_HTTP_MAX_HEADERS];
	unsigned nhdr;
	size_t head_len;         /* bytes of the head, CRLFCRLF included */
	uint64_t content_length; /* valid when has_length */
	bool has_length, chunked, expect_continue, keep_alive;
};

/*
 * Parse a request head from buf[0..len). Returns 0 with req filled, -EAGAIN when the head
 * is not complete yet (and fits max_head), -EMSGSIZE when it is longer than max_head (or has
 * more than S3_HTTP_MAX_HEADERS headers), -EINVAL for malformed input (bad request line,
 * control bytes, a header without a colon, obs-fold, conflicting or bad Content-Length,
 * Transfer-Encoding other than chunked, ...), -ENOTSUP for an HTTP version other than 1.x.
 */
int s3_http_parse(struct s3_http_req *req, const char *buf, size_t len, size_t max_head);

/* First header of that name (case-insensitive) or NULL. */
const struct s3_hdr *s3_http_header(const struct s3_http_req *req, const char *name);

/*
 * An HTTP date (RFC 9110 5.6.7) as epoch seconds, or -1: IMF-fixdate / RFC 1123
 * ("Sun, 06 Nov 1994 08:49:37 GMT", the zone also UT, UTC, Z or a numeric offset such as
 * the "-0000" Python's email.utils.formatdate writes), RFC 850 ("Sunday, 06-Nov-94
 * 08:49:37 GMT") and asctime ("Sun Nov  6 08:49:37 1994"). Any other zone name: -1.
 */
long long s3_http_date(const char *s, size_t n);

#endif
