/* CRC32C over ISA-L's crc32_iscsi, plain and per fixed-size chunk. */
#include <errno.h>
#include <limits.h>

#include <isa-l/crc.h>

#include "zc_crc.h"

uint32_t
zc_crc32c(uint32_t crc, const void *buf, size_t len)
{
	const unsigned char *p = buf;

	/* crc32_iscsi neither pre- nor post-inverts; the standard CRC32C does both. */
	crc = ~crc;
	while (len > 0) {
		int n = len > INT_MAX ? INT_MAX : (int)len;

		crc = crc32_iscsi((unsigned char *)p, n, crc);
		p += n;
		len -= (size_t)n;
	}
	return ~crc;
}

/*
 * Combining works in GF(2)[x] modulo the reflected Castagnoli polynomial, as zlib's
 * crc32_combine does for CRC-32: crc(A || B) = crc(A) * x^(8 |B|) + crc(B). In the
 * reflected representation x^0 is bit 31.
 */
#define CRC32C_POLY 0x82f63b78u

static uint32_t
multmodp(uint32_t a, uint32_t b)
{
	uint32_t m = 1u << 31, p = 0;

	for (;;) {
		if (a & m) {
			p ^= b;
			if ((a & (m - 1)) == 0)
				break;
		}
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ CRC32C_POLY : b >> 1;
	}
	return p;
}

/* x^(2^k) modulo the polynomial, k = 0..31 (x^(2^31) is x again). */
static const uint32_t x2n_table[32] = {
	0x40000000, 0x20000000, 0x08000000, 0x00800000, 0x00008000, 0x82f63b78, 0x6ea2d55c,
	0x18b8ea18, 0x510ac59a, 0xb82be955, 0xb8fdb1e7, 0x88e56f72, 0x74c360a4, 0xe4172b16,
	0x0d65762a, 0x35d73a62, 0x28461564, 0xbf455269, 0xe2ea32dc, 0xfe7740e6, 0xf946610b,
	0x3c204f8f, 0x538586e3, 0x59726915, 0x734d5309, 0xbc1ac763, 0x7d0722cc, 0xd289cabe,
	0xe94ca9bc, 0x05b74f3f, 0xa51e1f42, 0x40000000,
};

/* x^(8 len) modulo the polynomial: one multiplication per bit set in len. */
static uint32_t
x8nmodp(uint64_t len)
{
	uint32_t p = 1u << 31; /* x^0 */
	unsigned k = 3;        /* 8 len = len * 2^3 */

	for (; len; len >>= 1, k++)
		if (len & 1)
			p = multmodp(x2n_table[k & 31], p);
	return p;
}

uint32_t
zc_crc32c_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	if (crc_a == 0 || len_b == 0)
		return crc_a ^ crc_b;
	return multmodp(x8nmodp(len_b), crc_a) ^ crc_b;
}

/* crc * x^(8n) for the xn = x8nmodp(n) the caller already has; 0 stays 0. */
static uint32_t
shift_by(uint32_t crc, uint32_t xn)
{
	return crc ? multmodp(xn, crc) : 0;
}

int
zc_chunk_crc_init(struct zc_chunk_crc *c, size_t bytes_per_checksum, uint32_t *out, size_t out_cap)
{
	if (!c || bytes_per_checksum == 0 || (!out && out_cap))
		return -EINVAL;
	*c = (struct zc_chunk_crc){ .bytes_per_checksum = bytes_per_checksum,
		                    .out = out,
		                    .out_cap = out_cap };
	return 0;
}

static int
close_chunk(struct zc_chunk_crc *c)
{
	if (c->count == c->out_cap)
		return -ENOSPC;
	c->out[c->count++] = c->crc;
	c->crc = 0;
	c->in_chunk = 0;
	return 0;
}

int
zc_chunk_crc_add_chain(struct zc_chunk_crc *c, const void *frag, size_t len, uint32_t *crc)
{
	const unsigned char *p = frag;

	while (len > 0) {
		size_t room = c->bytes_per_checksum - c->in_chunk;
		size_t n = len < room ? len : room;
		uint32_t before = c->crc;

		c->crc = zc_crc32c(c->crc, p, n);
		if (crc) {
			/* The piece's own CRC falls out of the chunk's, then extends *crc: one
			 * power of x per piece serves both, and the bytes are read once. */
			uint32_t xn = before || *crc ? x8nmodp(n) : 0;
			uint32_t piece = c->crc ^ shift_by(before, xn);

			*crc = shift_by(*crc, xn) ^ piece;
		}
		c->in_chunk += n;
		p += n;
		len -= n;
		if (c->in_chunk == c->bytes_per_checksum && close_chunk(c) < 0)
			return -ENOSPC;
	}
	return 0;
}

int
zc_chunk_crc_add(struct zc_chunk_crc *c, const void *frag, size_t len)
{
	return zc_chunk_crc_add_chain(c, frag, len, NULL);
}

int
zc_chunk_crc_finish(struct zc_chunk_crc *c)
{
	if (c->in_chunk > 0 && close_chunk(c) < 0)
		return -ENOSPC;
	return (int)c->count;
}
