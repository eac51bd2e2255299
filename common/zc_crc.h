/*
 * zc_crc: CRC32C (Castagnoli), the checksum every payload byte carries through zest: on
 * the wire (each WriteChunk's data), per stored chunk on the drives, and for S3's
 * x-amz-checksum-crc32c. Plain, combined without the bytes, and per fixed-size chunk.
 * Pure functions of their arguments; a chunker belongs to one thread at a time.
 */
#ifndef ZEST_ZC_CRC_H
#define ZEST_ZC_CRC_H

#include <stddef.h>
#include <stdint.h>

/*
 * CRC32C (Castagnoli, as iSCSI and S3's x-amz-checksum-crc32c), over ISA-L's
 * crc32_iscsi. Chain calls by passing the previous result: zc_crc32c(0, buf, n) is the
 * CRC of buf; zc_crc32c(zc_crc32c(0, a, n), b, p) is the CRC of a followed by b.
 */
uint32_t zc_crc32c(uint32_t crc, const void *buf, size_t len);

/*
 * The CRC32C of A followed by B from crc_a = CRC(A), crc_b = CRC(B) and B's length,
 * without touching the bytes: one small GF(2) product per bit set in len_b. With
 * crc_b = 0 it is CRC(A)'s share of CRC(A || B), hence
 * CRC(B) = CRC(A || B) ^ zc_crc32c_combine(CRC(A), 0, |B|).
 */
uint32_t zc_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b);

/*
 * Per-chunk checksums: one CRC32C for every bytes_per_checksum bytes of a stream (the
 * last chunk may be short). Feed fragments of any size in order.
 */
struct zc_chunk_crc {
	size_t bytes_per_checksum;
	size_t in_chunk; /* bytes folded into the current chunk */
	uint32_t crc;    /* CRC of the current, unfinished chunk */
	uint32_t *out;   /* caller's array, one entry per chunk */
	size_t out_cap;
	size_t count; /* finished chunks written to out */
};

/* Start a chunker that writes up to out_cap CRCs to out. Returns 0 or -EINVAL. */
int zc_chunk_crc_init(struct zc_chunk_crc *c, size_t bytes_per_checksum, uint32_t *out,
                      size_t out_cap);

/* Fold a fragment in. Returns 0, or -ENOSPC when out would overflow. */
int zc_chunk_crc_add(struct zc_chunk_crc *c, const void *frag, size_t len);

/*
 * The same, and also chain the fragment into *crc, as *crc = zc_crc32c(*crc, frag, len)
 * would, but from the chunk CRCs of the same pass: a caller that checks or keeps the CRC
 * of the whole stream (or of one message of it) reads the bytes once, not twice.
 */
int zc_chunk_crc_add_chain(struct zc_chunk_crc *c, const void *frag, size_t len, uint32_t *crc);

/* Close the last, short chunk if any. Returns the number of CRCs in out, or -ENOSPC. */
int zc_chunk_crc_finish(struct zc_chunk_crc *c);

/* Number of chunks a stream of len bytes has: ceil(len / bytes_per_checksum). */
static inline size_t
zc_chunk_count(size_t len, size_t bytes_per_checksum)
{
	return (len + bytes_per_checksum - 1) / bytes_per_checksum;
}

#endif
