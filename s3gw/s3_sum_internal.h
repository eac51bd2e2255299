/*
 * s3_sum_internal: the payload digests of the gateway. Private to s3gw/; tests and
 * zest-bench's `sums` reach it through s3_internal_dep.
 *   s3_sum.c    one-pass checksums of a payload: MD5 (ETag), SHA-1, SHA-256, CRC32, CRC32C
 *               (zc_crc32c), CRC64NVME, and the flexible-checksum names and values
 *   s3_md5x8.c  MD5 of 8 messages in AVX2 lanes
 *   s3_md5mb.c  the service that hashes the concurrent uploads' ETags through s3_md5x8
 * Threading: a struct s3_sum belongs to one thread at a time (an upload's MD5 may be queued
 * to s3_md5mb's one hasher thread, which works on its state while the upload has spans
 * queued; s3_md5mb.c says who runs what).
 */
#ifndef ZEST_S3_SUM_INTERNAL_H
#define ZEST_S3_SUM_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "s3.h"

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

#endif
