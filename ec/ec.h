/*
 * ec: Reed-Solomon erasure coding over ISA-L, and CRC32C chunk checksums.
 *
 * A codec RS(k, m) turns k data cells into m parity cells with a Cauchy generator
 * matrix, so that any k of the k + m cells rebuild the rest. The streaming stripe
 * encoder takes data cells as fragments exactly where they lie (gRPC receive slices:
 * any size, any alignment), so the payload is never gathered into one buffer.
 *
 * Threading: a codec is immutable after ec_codec_create() except for its decode-table
 * cache, which is locked inside; share one codec between threads freely. A stripe
 * belongs to one thread at a time.
 *
 * Errors: functions return >= 0 on success and -errno on failure (-EINVAL for bad
 * parameters, -ENOMEM).
 */
#ifndef ZEST_EC_H
#define ZEST_EC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define EC_MAX_CELLS 32 /* k + m */

struct ec_codec;

/*
 * Create a codec for RS(k, m): 1 <= k, 1 <= m, k + m <= EC_MAX_CELLS.
 * Returns 0 and stores the codec in *out, or -EINVAL / -ENOMEM.
 */
int ec_codec_create(unsigned k, unsigned m, struct ec_codec **out);

/* Free a codec; NULL is a no-op. No stripe may still use it. */
void ec_codec_destroy(struct ec_codec *codec);

unsigned ec_codec_k(const struct ec_codec *codec);
unsigned ec_codec_m(const struct ec_codec *codec);

/*
 * Full-stripe encode: k data cells of len bytes each -> m parity cells of len bytes.
 * Buffers are borrowed and need no alignment. Returns 0 or -EINVAL.
 */
int ec_codec_encode(const struct ec_codec *codec, size_t len, const uint8_t *const *data,
                    uint8_t *const *parity);

/*
 * Rebuild missing cells. cells[0..k+m) points at every cell, len bytes each; bit i of
 * erased says cell i is missing and cells[i] is where to write it. At most m bits may
 * be set; the first k cells not erased are read. Decode tables are cached per erasure
 * pattern. Returns 0, -EINVAL (too many erasures, bad arguments) or -ENOMEM.
 */
int ec_codec_decode(struct ec_codec *codec, size_t len, uint8_t *const *cells, uint32_t erased);

/*
 * Streaming encoder for one stripe. Data cells arrive as fragments, in order within a
 * cell, cells in any order; each fragment updates the parity right away with
 * ec_encode_data_update, so nothing is gathered. Cells shorter than cell_len (the end of
 * an object) count as zero-padded. Parity equals ec_codec_encode() byte for byte.
 *
 * The parity buffers are the caller's (cell_len bytes each, any alignment, any old
 * contents): the first cell to reach a parity byte writes it, later cells fold into it,
 * so no zeroing pass runs before the data. ec_stripe_finish() completes the parity.
 */
struct ec_stripe {
	const struct ec_codec *codec;
	size_t cell_len;
	uint8_t *parity[EC_MAX_CELLS];
	size_t filled[EC_MAX_CELLS]; /* bytes received per data cell */
	size_t ready;                /* parity prefix holding sums: the longest cell's fill */
};

/* Start a stripe over parity[0..m). Returns 0 or -EINVAL. */
int ec_stripe_init(struct ec_stripe *stripe, const struct ec_codec *codec, size_t cell_len,
                   uint8_t *const *parity);

/*
 * Append len bytes of data cell `cell` (0 <= cell < k) at its current fill and fold
 * them into the parity. The fragment is borrowed only for the call.
 * Returns 0, or -EINVAL when cell is out of range or the cell would overflow.
 */
int ec_stripe_add(struct ec_stripe *stripe, unsigned cell, const void *frag, size_t len);

/*
 * The data is all in (the cells not filled count as zero-padded): zero the parity past
 * the longest cell, so parity[0..m) hold the full cell_len bytes of parity. Call it
 * before the parity is read.
 */
void ec_stripe_finish(struct ec_stripe *stripe);

/*
 * Bytes of parity that hold sums: the longest data cell's fill. Past it the data is all
 * padding, so the parity is zero there and need not be stored; a caller that writes only
 * this prefix skips ec_stripe_finish().
 */
static inline size_t
ec_stripe_parity_len(const struct ec_stripe *stripe)
{
	return stripe->ready;
}

/* Bytes received so far for data cell `cell`. */
static inline size_t
ec_stripe_filled(const struct ec_stripe *stripe, unsigned cell)
{
	return stripe->filled[cell];
}

#endif
