/*
 * s3gw: the S3 protocol core of the zest gateway.
 *
 * Pieces, each in its own file:
 *   s3_util.c     growable bounded buffers, hex/base64, the S3 error table
 *   s3_sum.c      one-pass checksums of a payload: MD5 (ETag), SHA-1, SHA-256, CRC32,
 *                 CRC32C (zc_crc32c), CRC64NVME
 *   s3_md5x8.c, s3_md5mb.c
 *                 MD5 of 8 messages in AVX2 lanes, and the service that hashes the
 *                 concurrent uploads' ETags through it
 *   s3_sigv4.c    SigV4 verification (Authorization header and presigned URLs), chunk and
 *                 trailer signatures
 *   s3_sigv2.c    SigV2 verification (header and presigned), for older clients
 *   s3_chunked.c  streaming decoders: HTTP Transfer-Encoding chunked and aws-chunked; both
 *                 yield payload as spans INTO the caller's input (framing is skipped by
 *                 slicing, never copied)
 *   s3_http.c     incremental HTTP/1.1 request-head parser
 *   s3_xml.c      response XML writers and request body parsers (libxml2)
 *   s3_server.c, s3_conn.c, s3_conn_io.c, s3_metrics.c
 *                 the HTTP server: epoll loops + worker pool (keep-alive, 100-continue,
 *                 pipelining, TLS, header/idle timeouts, /metrics)
 *   s3_place.c    rendezvous placement over the datanodes and the listing merge
 *   s3_req.c, s3_route.c, s3_bucket.c, s3_object.c, s3_mpu.c, s3_copy.c, s3_cond.c
 *                 the S3 operations on top of a struct s3_backend: routing (path style
 *                 and virtual host), validation, buckets and listings, objects, multipart,
 *                 copies, write conditions (s3_ops_internal.h says which file holds what)
 *   s3_cli.c      the zest-s3gw command line (s3_main)
 *
 * Datanode access goes only through struct s3_backend (function pointers), so the rpc
 * client plugs in without touching the protocol code. Backend calls are made from the
 * server's worker threads and may block (s3_backend_rpc.c: the datanodes over gRPC;
 * tests/unit/s3gw/mem_backend.c: an in-memory test double).
 *
 * Threading: parsers, decoders and checksum states belong to one thread at a time (an
 * upload's MD5 may be queued to s3_md5mb's one hasher thread, which works on its state while
 * the upload has spans queued; s3_md5mb.c says who runs what). The
 * server runs a few epoll loops (accept, readiness, timeouts) and a pool of workers; a
 * readable connection is served by one worker at a time (EPOLLONESHOT), which may block on
 * the backend without stalling any other connection; a GET body is pulled from the
 * backend (get_open/get_next) and a connection whose socket is full parks instead of
 * holding its worker.
 * Errors: >= 0 success, -errno failure (-EINVAL malformed input, -EBADMSG checksum or
 * signature mismatch, -ENOMEM, -EMSGSIZE over a limit, -EAGAIN need more input).
 */
#ifndef ZEST_S3_H
#define ZEST_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "zc_err.h"
#include "zc_names.h"
#include "zc_ref.h"

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

/* ---------------------------------------------------------------- checksums */

enum s3_ck {
	S3_CK_CRC32 = 1u << 0,
	S3_CK_CRC32C = 1u << 1,
	S3_CK_CRC64NVME = 1u << 2,
	S3_CK_SHA1 = 1u << 3,
	S3_CK_SHA256 = 1u << 4,
	S3_CK_MD5 = 1u << 5,
	/* Not a stored checksum: the CRC32C of each span alone, the CRC the datanode checks on
	 * each message (s3_sum.seg_crc32c after every update). */
	S3_CK_SEG_CRC32C = 1u << 6,
};

/* The flexible-checksum algorithms, in x-amz-checksum-<name> order. */
#define S3_CK_FLEXIBLE (S3_CK_CRC32 | S3_CK_CRC32C | S3_CK_CRC64NVME | S3_CK_SHA1 | S3_CK_SHA256)

struct s3_sum_out {
	unsigned mask;
	uint32_t crc32, crc32c;
	uint64_t crc64nvme;
	uint8_t sha1[20], sha256[32], md5[16];
};

struct evp_md_ctx_st;
struct s3_md5mb;
struct s3_md5mb_stream;

/*
 * Running checksums over one payload, in one pass: a span is cut into S3_SUM_BLOCK blocks
 * and each block goes through every selected digest while it is in L1/L2, so the worker
 * reads each payload byte from memory once for all of them. The digests: MD5 (the ETag;
 * serial, or s3_md5mb's inline path while its stream is alone), the flexible checksum,
 * SHA-256 of a signed payload, the aws-chunk signature's SHA-256 (chunk_sha, borrowed from
 * the chunk decoder) and the span's own CRC32C (S3_CK_SEG_CRC32C, for the backend's
 * message). The exception is MD5 queued to s3_md5mb with company: the hasher thread reads
 * those spans again, later, on its own core (see s3_md5mb.c).
 */
#define S3_SUM_BLOCK (32u * 1024u)

struct s3_sum {
	unsigned mask;
	uint32_t crc32, crc32c;
	uint64_t crc64nvme;
	struct evp_md_ctx_st *md5, *sha1, *sha256;
	struct s3_md5mb_stream *md5mb;   /* MD5 through the service instead of md5 */
	struct evp_md_ctx_st *chunk_sha; /* NULL, or fed too (borrowed: s3_chunked.sha) */
	uint32_t seg_crc32c;             /* S3_CK_SEG_CRC32C: of the last span */
	size_t block;                    /* bytes per block; 0: S3_SUM_BLOCK (benchmarks) */
	uint64_t bytes;
};

int s3_sum_init(struct s3_sum *s, unsigned mask); /* 0 or -ENOMEM */
/* The same, with MD5 through the multi-buffer service mb (NULL: serial, as s3_sum_init). */
int s3_sum_init_mb(struct s3_sum *s, unsigned mask, struct s3_md5mb *mb);
void s3_sum_update(struct s3_sum *s, const void *p, size_t n);
/* The same for a span with its reference: MD5 may queue it by reference (s3_md5mb). */
void s3_sum_update_seg(struct s3_sum *s, const struct zc_seg *seg);
void s3_sum_final(struct s3_sum *s, struct s3_sum_out *out); /* may be called once */
void s3_sum_fini(struct s3_sum *s);

/*
 * MD5 of eight messages of the same length at once (AVX2, one message per lane): the
 * multi-buffer kernel for hashing concurrent uploads together. -ENOTSUP without AVX2.
 * s3_md5x8_blocks runs nblocks 64-byte blocks of each lane over the raw states st[word][lane]
 * (no padding); only when s3_md5x8_supported(). The PUT path uses it through s3_md5mb.
 */
int s3_md5x8(const uint8_t *const data[8], size_t len, uint8_t out[8][16]);
void s3_md5x8_blocks(uint32_t st[4][8], const uint8_t *const p[8], size_t nblocks);
bool s3_md5x8_supported(void);

/*
 * s3_md5mb: one MD5 service for all concurrent uploads. A hasher thread runs the 8 AVX2
 * lanes of s3_md5x8 over the queued blocks of up to 8 streams at once; a stream alone for
 * alone_us is hashed serially (OpenSSL). Spans are queued by reference (the service takes
 * and drops its own zc_ref), so update() returns at once unless the stream has max_queued
 * bytes waiting (then it blocks: backpressure). A stream belongs to one thread at a time;
 * final() or abort() ends it. s3_md5mb.c's header says which thread runs what.
 */
struct s3_md5mb;
struct s3_md5mb_stream;

struct s3_md5mb_opts {
	size_t max_queued;  /* bytes queued per stream before update() waits; 0: 1 MiB */
	unsigned alone_us;  /* how long a lone stream waits for company; 0: 50 us */
	unsigned min_lanes; /* fewer streams with data than this run serially; 0: 2 */
};

struct s3_md5mb_stats {
	uint64_t x8_runs;        /* kernel calls */
	uint64_t x8_blocks;      /* lane blocks with data */
	uint64_t x8_idle_blocks; /* lane blocks run empty */
	uint64_t serial_blocks;  /* blocks the hasher hashed serially (alone, or waited for) */
	uint64_t inline_bytes;   /* bytes the owners hashed themselves (one stream open) */
	uint64_t carry_bytes;    /* bytes copied into carry blocks (span heads/tails < 64 B) */
	uint64_t waits;          /* update() calls that waited for room */
};

/* -ENOTSUP without AVX2 (use s3_sum's serial MD5 then), -ENOMEM, or 0. */
int s3_md5mb_create(const struct s3_md5mb_opts *o, struct s3_md5mb **out);
/* Every stream must have ended. NULL: no-op. */
void s3_md5mb_destroy(struct s3_md5mb *mb);
void s3_md5mb_stats(struct s3_md5mb *mb, struct s3_md5mb_stats *out);
int s3_md5mb_open(struct s3_md5mb *mb, struct s3_md5mb_stream **out); /* 0 or -ENOMEM */
/* Queue seg's bytes (a reference is taken; seg->ref NULL: the bytes are borrowed for this
 * call, which then hashes them before returning). Returns 0. */
int s3_md5mb_update(struct s3_md5mb_stream *s, const struct zc_seg *seg);
/* Whether update(s, seg) would queue seg for the hasher (a reference, and company) rather
 * than hash it on this thread; a hint: update decides again under its lock. */
bool s3_md5mb_would_queue(const struct s3_md5mb_stream *s, const struct zc_seg *seg);
/* Wait for the queued blocks, pad, write the digest and free the stream. */
void s3_md5mb_final(struct s3_md5mb_stream *s, uint8_t md5[16]);
/* Drop what is queued (the references too) and free the stream; NULL: no-op. */
void s3_md5mb_abort(struct s3_md5mb_stream *s);

uint32_t s3_crc32(uint32_t crc, const void *p, size_t n);     /* zlib/gzip CRC-32 */
uint64_t s3_crc64nvme(uint64_t crc, const void *p, size_t n); /* CRC-64/NVME */
/* CRC of A || B from CRC(A), CRC(B) and |B|, without the bytes (CRC32C: zc_crc32c_combine). */
uint32_t s3_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);
uint64_t s3_crc64nvme_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b);

/* "crc32" -> S3_CK_CRC32 ... ("CRC32C" too, any case); 0 when unknown. */
unsigned s3_ck_from_name(const char *name, size_t n);
const char *s3_ck_name(unsigned ck);  /* lower case: "crc32", "crc64nvme", ... */
const char *s3_ck_label(unsigned ck); /* as S3 names it on the wire: "CRC32C", "SHA256" */
unsigned s3_ck_bytes(unsigned ck);    /* digest length: 4, 4, 8, 20, 32; 0 unknown */
/* The S3 header value (base64 of the big-endian digest) of one algorithm; out >= 48 bytes. */
void s3_ck_value(const struct s3_sum_out *o, unsigned ck, char *out);

/* ---------------------------------------------------------------- HTTP head */

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

/* ---------------------------------------------------------------- SigV4 */

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
/* An RFC 1123 date ("Fri, 24 May 2013 00:00:00 GMT", or "+0000" for the zone) as epoch
 * seconds, or -1. */
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

/* ---------------------------------------------------------------- body decoders */

/* Receives payload spans; they point into the input given to the feed call. */
typedef int (*s3_span_fn)(void *arg, const uint8_t *p, size_t n);

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

/* ---------------------------------------------------------------- XML bodies */

#define S3_MAX_KEY   ZC_KEY_MAX
#define S3_ETAG_MAX  72
#define S3_ATTRS_MAX 4096

#define S3_XML_BODY_MAX (2u << 20) /* request bodies we parse */
#define S3_DELETE_MAX   1000
#define S3_PARTS_MAX    10000

/* DeleteObjects request: keys owned by the struct. */
struct s3_delete_req {
	char **keys;
	size_t n;
	bool quiet;
};

struct s3_complete_part {
	unsigned number;
	char etag[S3_ETAG_MAX]; /* quotes stripped */
	char checksum[64];      /* ChecksumCRC32 etc. when given */
	unsigned ck;            /* which one */
};

struct s3_complete_req {
	struct s3_complete_part *parts;
	size_t n;
};

/* Parse a DeleteObjects body (1..1000 Object/Key, optional Quiet). 0, -EINVAL (MalformedXML),
 * -EMSGSIZE (too many keys or a key over S3_MAX_KEY), -ENOMEM. */
int s3_xml_parse_delete(const char *body, size_t len, struct s3_delete_req *out);
void s3_delete_req_fini(struct s3_delete_req *r);
/* Parse a CompleteMultipartUpload body (1..10000 Part with PartNumber and ETag). */
int s3_xml_parse_complete(const char *body, size_t len, struct s3_complete_req *out);
void s3_complete_req_fini(struct s3_complete_req *r);
/* Parse a CreateBucketConfiguration; LocationConstraint copied to loc ("" if absent).
 * An empty body is fine. */
int s3_xml_parse_create_bucket(const char *body, size_t len, char *loc, size_t cap);

/* Writers append a whole document (with the XML declaration) to b. */
void s3_xml_error(struct s3_buf *b, const char *code, const char *message, const char *resource,
                  const char *request_id);
/* ISO 8601 with milliseconds, as S3 lists it: 2006-02-03T16:45:09.000Z (out >= 32). */
void s3_xml_time(uint64_t ns, char *out);
/* Key or prefix, percent-encoded when url (encoding-type=url), then XML-escaped. */
void s3_xml_key(struct s3_buf *b, const char *tag, const char *key, bool url);

/* ---------------------------------------------------------------- backend */

/* multipart records; not a legal S3 bucket name (common/zc_names.h: the datanode takes it) */
#define S3_RESERVED_BUCKET ZC_RESERVED_BUCKET

/*
 * Multipart parts are objects of S3_RESERVED_BUCKET too, "p/<upload-id>/<nnnnn>", never
 * keys of a client's bucket: a client listing is a plain backend listing. Placement puts
 * them on the datanode of their target object (s3_place), where Compose joins objects of
 * any buckets into the target.
 */

struct s3_obj_info {
	char key[S3_MAX_KEY + 1];
	uint64_t size;
	char etag[S3_ETAG_MAX]; /* without quotes */
	uint64_t mtime_ns;
	char attrs[S3_ATTRS_MAX]; /* "name:value\n" lines (content-type, x-amz-meta-*, ...) */
	size_t attrs_len;
};

struct s3_list_entry {
	char *key; /* owned by the result */
	uint64_t size;
	char etag[S3_ETAG_MAX];
	uint64_t mtime_ns;
};

struct s3_list_result {
	struct s3_list_entry *entries;
	size_t n, cap;
	char **prefixes;
	size_t nprefix, prefix_cap;
	bool truncated;
	char *next_start_after; /* owned; NULL when not truncated */
};

void s3_list_result_fini(struct s3_list_result *r);
int s3_list_result_add(struct s3_list_result *r, const char *key, uint64_t size, const char *etag,
                       uint64_t mtime_ns);
int s3_list_result_add_prefix(struct s3_list_result *r, const char *prefix);

struct s3_bucket_info {
	char name[64];
	uint64_t ctime_ns;
};

struct s3_objref {
	const char *bucket, *key;
	const char *etag; /* compose: NULL/"" any, else the part must still have this ETag
	                   * (ZC_E(ZC_CHANGED) otherwise: overwritten since the caller looked) */
};

typedef int (*s3_info_fn)(void *arg, const struct s3_obj_info *info);

/*
 * A condition on the object a write replaces (S3 conditional writes), checked by the
 * backend atomically with the commit: if_none_match, the key must not exist; if_match
 * ("" : none), it must exist with this ETag (no quotes; "*": any). A condition that does
 * not hold fails the commit with ZC_E(ZC_PRECONDITION), or ZC_E(ZC_NO_KEY) for if_match
 * on a missing key, and nothing changes.
 */
struct s3_cond {
	bool if_none_match;
	char if_match[S3_ETAG_MAX];
};

/*
 * Binding the rpc client (phase 2), call by call, to rpc/zest.proto:
 *   put_open/put_write/put_commit/put_abort  one Write stream: WriteOpen{bucket,key,size,
 *       size_known} in the first WriteChunk, each segment as data (+ its CRC32C) at the
 *       running offset, commit with etag and attrs ("name:value\n" lines -> Attr), abort by
 *       cancelling the call. A segment kept past put_write is held with zc_ref_get().
 *   get -> Read (info from the first ReadChunk, then data in order); stat -> Stat;
 *   del -> Delete; list -> List on every datanode, merged with s3_list_merge();
 *   compose -> Compose (delete_parts = true for multipart Complete; one part kept for a
 *       server-side copy); a condition (struct s3_cond) goes in the commit chunk's and
 *       ComposeRequest's WriteCondition;
 *   bucket_* -> CreateBucket/DeleteBucket/HeadBucket/ListBuckets on every datanode.
 * Placement: s3_place() over the --datanode list, for every call including those on
 * S3_RESERVED_BUCKET: it places multipart parts ("p/<upload-id>/...") with the TARGET
 * object (the upload id carries its hash), so Compose finds every part on one datanode.
 * Errors: a datanode's error comes back as the zest code it sent (ZC_E(code), zc_err.h),
 * never parsed out of a status message; s3_err_from_errno() maps it to S3.
 *
 * The datanode interface. Every call returns >= 0, -errno, or ZC_E(code) for an error a
 * datanode named (a test double must answer the same way). The gateway's own S3-only
 * answers (NoSuchUpload, InvalidRange, ...) are S3_E(enum s3_err), never a backend's.
 * put_write's segment is borrowed: a backend that keeps the bytes past the call takes
 * zc_ref_get(seg->ref) and puts it when done (the bytes live in the connection's read
 * buffer). -EAGAIN from any call is backpressure (503 SlowDown).
 */
struct s3_backend {
	void *ctx;
	int (*put_open)(void *ctx, const char *bucket, const char *key, uint64_t size,
	                bool size_known, void **stream);
	int (*put_write)(void *stream, const struct zc_seg *seg);
	/* Optional (NULL: put_write): the same with the span's CRC32C, computed in the
	 * gateway's one pass over it, so the backend need not read the bytes again. */
	int (*put_write_crc)(void *stream, const struct zc_seg *seg, uint32_t crc32c);
	/* Commit: the object becomes visible (if cond, NULL: none, holds); frees the stream
	 * whatever the result. */
	int (*put_commit)(void *stream, const char *etag, const char *attrs, size_t attrs_len,
	                  const struct s3_cond *cond, struct s3_obj_info *out);
	void (*put_abort)(void *stream); /* frees the stream */
	/* Read [off, off+len) (has_len false: to the end). on_info first (may fail the call with
	 * its return value, e.g. for preconditions), then emit with the bytes in order. NULL
	 * when the backend has the pulled form below; callers use s3_backend_get(). */
	int (*get)(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
	           bool has_len, s3_info_fn on_info, s3_span_fn emit, void *arg);
	/* The same read, pulled, for a caller that must not wait on its own consumer (the
	 * server's GET: a slow client parks its connection instead of holding a worker).
	 * get_open learns the object facts (the first chunk, or a stat) into *info: 0 and
	 * *stream, NULL when off >= info->size (nothing to read; the caller decides), or
	 * -errno. get_next hands out the next segment with a ref taken for the caller (put
	 * it): 1, 0 at the end, -errno; it may wait on the datanode, never on a client.
	 * get_close frees the stream, done or not. At most ~3 MiB are buffered per stream.
	 * All three NULL: callers use get. */
	int (*get_open)(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
	                bool has_len, struct s3_obj_info *info, void **stream);
	int (*get_next)(void *stream, struct zc_seg *seg);
	void (*get_close)(void *stream);
	int (*stat)(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out);
	int (*del)(void *ctx, const char *bucket, const char *key, bool *existed);
	int (*list)(void *ctx, const char *bucket, const char *prefix, const char *start_after,
	            const char *delimiter, unsigned limit, struct s3_list_result *out);
	/* bucket/key = the parts' contents in order, by reference (no bytes move), under cond
	 * (NULL: none). -EXDEV: some part is held where the target is not (another datanode);
	 * the caller copies the bytes itself. */
	int (*compose)(void *ctx, const char *bucket, const char *key,
	               const struct s3_objref *parts, size_t nparts, bool delete_parts,
	               const char *etag, const char *attrs, size_t attrs_len,
	               const struct s3_cond *cond, struct s3_obj_info *out);
	int (*bucket_create)(void *ctx, const char *bucket);
	int (*bucket_delete)(void *ctx, const char *bucket);
	int (*bucket_head)(void *ctx, const char *bucket, struct s3_bucket_info *out);
	/* Fills up to cap entries; returns the count (the reserved bucket included). */
	int (*bucket_list)(void *ctx, struct s3_bucket_info *out, size_t cap);
	/* Optional (NULL: none): the backend's own lines of /metrics, appended to buf. */
	void (*metrics)(void *ctx, struct s3_buf *buf);
};

/*
 * The blocking read of a backend (multipart records, copies, GET's own path): the pulled
 * form when the backend has it (get_open/get_next/get_close, each segment's ref put after
 * emit), else be->get. Same arguments and returns as be->get.
 */
int s3_backend_get(const struct s3_backend *be, const char *bucket, const char *key, uint64_t off,
                   uint64_t len, bool has_len, s3_info_fn on_info, s3_span_fn emit, void *arg);

/*
 * An S3 answer the gateway decides itself (NoSuchUpload, InvalidRange, NotModified, ...),
 * returned by s3gw's own functions beside -errno and ZC_E(code): a third, disjoint range
 * (errno < S3_ERR_BASE <= S3_E < ZC_ERR_BASE) that never leaves the gateway and never
 * comes from a backend. s3_err_from_errno() gives the enum back.
 */
#define S3_ERR_BASE 1000
#define S3_E(e)     (-(S3_ERR_BASE + (int)(e)))

/*
 * A datanode stream of the gateway (a PUT's Write, a GET's Read or ReadCell) whose node makes
 * no progress this long is cancelled (rpc_client_opts.progress_timeout_ms): the PUT fails
 * with ZC_UNAVAILABLE (503 SlowDown), a cluster GET reads around the node. The default is
 * above a coordinator's peer timeout (10 s), so that a coordinator writing around a hung
 * peer answers before the gateway gives up on it.
 */
#define S3_STREAM_TIMEOUT_MS 15000

/*
 * The real backend: one rpc client per datanode address ("HOST:PORT", n >= 1, no
 * duplicates), objects placed with s3_place() over the list in this order, bucket calls
 * sent to every node, listings merged (s3_backend_rpc.c). Connects lazily, over mutual
 * TLS with tls's cluster CA and client certificate (or plaintext when tls->insecure;
 * rpc_tls.h), streams cut after stream_timeout_ms without progress (0:
 * S3_STREAM_TIMEOUT_MS). Returns 0 and *out, -EINVAL (no nodes, bad TLS files: logged),
 * -EEXIST (a node twice) or -ENOMEM. Destroy after the server that uses it; every stream must be
 * over. NULL: no-op.
 */
struct rpc_tls;
int s3_backend_rpc_create(const char *const *nodes, unsigned n, const struct rpc_tls *tls,
                          unsigned stream_timeout_ms, struct s3_backend **out);
void s3_backend_rpc_destroy(struct s3_backend *be);

/*
 * Cluster mode (docs/cluster.md): records, buckets and listings in etcd at endpoints
 * ("host:port,...", https:// for TLS with tls's CA and certificate), the datanodes from
 * the membership view, one rpc client per node address (made on first use, mutual TLS as
 * s3_backend_rpc_create's). PUT goes to the first node of zc_place_rank(bucket/key) that
 * connects (the coordinator), GET reads the record's cells (ReadCell) and rebuilds what is
 * missing from parity (counted in /metrics as zest_degraded_reads_total); streams time
 * out as s3_backend_rpc_create's, a ReadCell at most after 5 s (a GET reads around a
 * silent node). Creates the reserved bucket in etcd if absent. Returns 0 and *out,
 * -EINVAL (bad endpoints or TLS files: logged), an etcd error (unreachable: logged) or
 * -ENOMEM. Destroy after the server; NULL: no-op.
 */
int s3_backend_cluster_create(const char *endpoints, const struct rpc_tls *tls,
                              const char *local_node, unsigned stream_timeout_ms,
                              struct s3_backend **out);
void s3_backend_cluster_destroy(struct s3_backend *be);

/* ---------------------------------------------------------------- placement */

/*
 * Rendezvous (highest-random-weight) hashing: the index in [0, n) of the datanode that owns
 * bucket/key, nodes named by their --datanode address. Adding or removing one node moves
 * only the keys that node gains or owned. n must be >= 1. Pure function, any thread.
 */
unsigned s3_place(const char *const *nodes, unsigned n, const char *bucket, const char *key);

/* The 64-bit placement hash of bucket/key. Multipart upload ids end with the target's
 * hash (16 hex digits), so s3_place() puts the parts "p/<upload-id>/<n>" of
 * S3_RESERVED_BUCKET on the datanode that will hold the completed object. */
uint64_t s3_obj_hash(const char *bucket, const char *key);

/*
 * Merge per-datanode listings (each in key order, each cut at `limit` items) into out: at
 * most limit keys + common prefixes in key order, a prefix reported by several nodes once.
 * A node whose listing was truncated bounds the merge at its last item (beyond it, that
 * node may hold smaller keys not yet seen); out is then truncated with next_start_after
 * the last item emitted. Inputs are borrowed; out gets copies. 0 or -ENOMEM.
 */
int s3_list_merge(const struct s3_list_result *const *parts, unsigned n, unsigned limit,
                  struct s3_list_result *out);

/* ---------------------------------------------------------------- server */

struct s3_config {
	const char *listen;     /* host:port, port 0 picks one */
	const char *metrics;    /* host:port of /metrics (its own port); NULL: none */
	const char *access_key; /* NULL: anonymous */
	const char *secret_key;
	const char *region;
	const char *domain; /* virtual-host base ("s3.example.com"), NULL: path style only */
	const char *tls_cert, *tls_key;
	unsigned threads;           /* event loops (accept, readiness, timeouts); 0: 2 */
	unsigned workers;           /* threads that serve requests (may block); 0: 16 */
	size_t max_header;          /* request head limit; 0: 16 KiB */
	unsigned header_timeout_ms; /* 0: 10 s */
	unsigned idle_timeout_ms;   /* 0: 60 s */
	uint64_t max_object;        /* 0: 5 TiB */
	unsigned max_conns;         /* open connections; more are refused. 0: 4096 */
	enum s3_md5_mode {
		S3_MD5_AUTO,   /* multi where the CPU has AVX2, else serial */
		S3_MD5_SERIAL, /* each upload's MD5 on its worker thread (OpenSSL) */
		S3_MD5_MULTI,  /* concurrent uploads' MD5 in AVX2 lanes (s3_md5mb) */
	} md5;
};

struct s3_server;

/* Bind and prepare; the backend is borrowed for the server's life. 0 or -errno. */
int s3_server_create(const struct s3_config *cfg, const struct s3_backend *be,
                     struct s3_server **out);
/* The bound port (useful with port 0). */
int s3_server_port(const struct s3_server *srv);
int s3_server_metrics_port(const struct s3_server *srv);
/* Serve until s3_server_stop(); runs the event loops on this thread and helper threads. */
int s3_server_run(struct s3_server *srv);
/* Ask run() to return; safe from a signal handler or any thread. */
void s3_server_stop(struct s3_server *srv);
void s3_server_destroy(struct s3_server *srv);

/* The zest-s3gw program: parse flags, build the server over be (NULL: the rpc backend
 * over the --datanode list, or the cluster backend with --cluster; one is required). */
int s3_main(int argc, char **argv, const struct s3_backend *be);

#endif
