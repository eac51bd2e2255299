/*
 * s3_chunked_internal: the streaming body decoders (s3_chunked.c), HTTP Transfer-Encoding
 * chunked and aws-chunked. Both yield payload as spans INTO the caller's input (framing is
 * skipped by slicing, never copied). Private to s3gw/; tests and fuzzers reach it through
 * s3_internal_dep. A decoder belongs to one thread at a time.
 */
#ifndef ZEST_S3_CHUNKED_INTERNAL_H
#define ZEST_S3_CHUNKED_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "s3_sig_internal.h"

struct evp_md_ctx_st;

/* HTTP/1.1 Transfer-Encoding: chunked (extensions ignored, trailers skipped). */
struct s3_http_chunked {
	int state;
	uint64_t left;
	char line[256];
	size_t line_len;
	bool done;
	uint64_t max;   /* payload cap, set after init (0: none) */
	uint64_t total; /* payload bytes so far */
};

void s3_http_chunked_init(struct s3_http_chunked *d);
/* Consume in[0..n): returns bytes consumed (stops right after the final CRLF), or -EINVAL
 * for malformed framing / -EMSGSIZE for an overlong line / -EOVERFLOW for a chunk size past
 * 64 bits / -EFBIG for a chunk that takes the payload past max / an error from emit. */
long s3_http_chunked_feed(struct s3_http_chunked *d, const uint8_t *in, size_t n, s3_span_fn emit,
                          void *arg);

/* aws-chunked, signed or unsigned, with or without trailers. */
struct s3_chunked {
	const struct s3_auth *auth; /* NULL or unsigned mode: no chunk signatures */
	bool sigs, trailer;         /* chunk signatures expected; trailer expected */
	int state;
	uint64_t left, decoded;
	char line[512];
	size_t line_len;
	char prev_sig[65], want_sig[65];
	struct evp_md_ctx_st *sha; /* SHA-256 of the current chunk */
	bool sha_by_emit;          /* emit() feeds sha itself, in its one pass (s3_sum) */
	struct s3_buf trail;       /* canonical trailer lines "name:value\n" */
	unsigned trailer_ck;       /* S3_CK_* named by the trailer, 0 if none */
	char trailer_val[64];      /* its base64 value */
	bool done;
	uint64_t max; /* decoded payload cap, set after init (0: none) */
};

/* mode: the request's payload mode; auth (borrowed for the decoder's life) for signatures.
 * Returns 0, -EINVAL (not a streaming mode) or -ENOMEM. */
int s3_chunked_init(struct s3_chunked *d, enum s3_payload mode, const struct s3_auth *auth);
void s3_chunked_fini(struct s3_chunked *d);
/* Consume in[0..n). Returns bytes consumed (stops after the final CRLF), -EINVAL for bad
 * framing, -EBADMSG for a wrong chunk or trailer signature, -EMSGSIZE for an overlong
 * line, -EOVERFLOW / -EFBIG for a chunk size past 64 bits / past max, or an error
 * returned by emit. */
long s3_chunked_feed(struct s3_chunked *d, const uint8_t *in, size_t n, s3_span_fn emit, void *arg);

#endif
