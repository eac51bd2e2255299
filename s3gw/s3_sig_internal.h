/*
 * s3_sig_internal: request signatures. Private to s3gw/; tests and fuzzers reach it
 * through s3_internal_dep.
 *   s3_sigv4.c  SigV4 verification (Authorization header and presigned URLs), chunk and
 *               trailer signatures
 *   s3_sigv2.c  SigV2 verification (header and presigned), for older clients
 * Pure functions over the caller's request: any thread.
 */
#ifndef ZEST_S3_SIG_INTERNAL_H
#define ZEST_S3_SIG_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include "s3_http_internal.h"
#include "s3_util_internal.h"

struct s3_creds {
	const char *access_key, *secret_key, *region;
	const char *domain; /* virtual-host base or NULL: SigV2 signs "/bucket" of a vhost */
};

enum s3_payload {
	S3_PAYLOAD_HASH,              /* x-amz-content-sha256: hex digest, verified at the end */
	S3_PAYLOAD_UNSIGNED,          /* UNSIGNED-PAYLOAD (or presigned) */
	S3_PAYLOAD_STREAMING,         /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD */
	S3_PAYLOAD_STREAMING_TRAILER, /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
	S3_PAYLOAD_UNSIGNED_TRAILER,  /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
};

/* What a verified request proved; the chunk decoder continues the signature chain. */
struct s3_auth {
	bool anonymous;
	bool presigned;
	bool v2;         /* Signature Version 2 (payload unsigned, no chunk signatures) */
	const char *msg; /* with an error: the message for its body (NULL: the default) */
	enum s3_payload payload;
	uint8_t payload_sha256[32]; /* S3_PAYLOAD_HASH */
	char amz_date[17];          /* 20130524T000000Z */
	char scope[128];            /* 20130524/us-east-1/s3/aws4_request */
	uint8_t key[32];            /* the signing key */
	char seed_sig[65];          /* the request signature, hex */
};

/*
 * Verify a request's signature against creds, with now for the skew check (15 minutes;
 * presigned: the expiry window): SigV4 (Authorization header or X-Amz-* query), or SigV2
 * ("Authorization: AWS ..." or an AWSAccessKeyId/Signature query), handed to
 * s3_sigv2_verify(). creds->access_key NULL: anonymous access allowed, every request
 * passes. Returns S3_OK with *auth filled, or the S3 error (AccessDenied for no auth at
 * all, unsigned host/x-amz-* headers or an expired URL, AuthorizationHeaderMalformed,
 * AuthorizationQueryParametersError, InvalidAccessKeyId, RequestTimeTooSkewed,
 * SignatureDoesNotMatch, InvalidArgument for a bad x-amz-content-sha256), with
 * auth->msg the message when it is not the code's default.
 */
enum s3_err s3_sigv4_verify(const struct s3_http_req *req, const struct s3_creds *creds, time_t now,
                            struct s3_auth *auth);

/* SigV2 (s3_sigv2.c): header "AWS AKID:sig" or presigned AWSAccessKeyId/Expires/Signature;
 * the payload is unsigned. Same contract as s3_sigv4_verify. */
enum s3_err s3_sigv2_verify(const struct s3_http_req *req, const struct s3_creds *creds, time_t now,
                            struct s3_auth *auth);
/* The SigV2 StringToSign of req with date (the Date header, "" or Expires); domain as in
 * struct s3_creds. 0 or -EINVAL (a bad %-escape in a sub-resource) / -ENOMEM. */
int s3_sigv2_string(const struct s3_http_req *req, const char *date, const char *domain,
                    struct s3_buf *out);
/* The Date header's time as epoch seconds, or -1: any HTTP date form (s3_http_date). */
time_t s3_sigv2_time(const char *s, size_t n);

/* kSigning = HMAC chain over date (YYYYMMDD), region, service, "aws4_request". */
void s3_sigv4_key(const char *secret, const char *date8, const char *region, const char *service,
                  uint8_t out[32]);

/*
 * The canonical request of req: method, canonical URI (path as sent, S3 style: no
 * re-encoding of what is already encoded), sorted canonical query (presigned: without
 * X-Amz-Signature), the signed headers (';'-separated lower-case names) and payload_hash.
 * Returns 0 or -EINVAL (a signed header missing) / -ENOMEM.
 */
int s3_sigv4_canonical(const struct s3_http_req *req, const char *signed_headers, size_t sh_len,
                       const char *payload_hash, bool presigned, struct s3_buf *out);

/* Hex signature of string_to_sign under key. */
void s3_sigv4_sign(const uint8_t key[32], const char *sts, size_t n, char out[65]);

/* Chunk signature: AWS4-HMAC-SHA256-PAYLOAD over prev_sig and the chunk's SHA-256. */
void s3_sigv4_chunk_sig(const struct s3_auth *auth, const char *prev_sig,
                        const uint8_t chunk_sha256[32], char out[65]);
/* Trailer signature: AWS4-HMAC-SHA256-TRAILER over prev_sig and SHA-256 of the trailer. */
void s3_sigv4_trailer_sig(const struct s3_auth *auth, const char *prev_sig, const void *trailer,
                          size_t n, char out[65]);

#endif
