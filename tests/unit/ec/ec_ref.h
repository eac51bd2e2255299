/*
 * Test helpers for ec/: a plain GF(2^8) reference written from the field's definition
 * (polynomial 0x11d, as ISA-L), independent of ISA-L's tables; the seeded PRNG is t_rand.h.
 */
#ifndef ZEST_TEST_EC_REF_H
#define ZEST_TEST_EC_REF_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "t_rand.h"

static inline uint8_t
ref_gf_mul(uint8_t a, uint8_t b)
{
	uint8_t p = 0;

	while (b) {
		if (b & 1)
			p ^= a;
		a = (uint8_t)((a << 1) ^ ((a & 0x80) ? 0x1d : 0));
		b >>= 1;
	}
	return p;
}

static inline uint8_t
ref_gf_inv(uint8_t a)
{
	for (unsigned x = 1; x < 256; x++)
		if (ref_gf_mul(a, (uint8_t)x) == 1)
			return (uint8_t)x;
	return 0;
}

/*
 * The Cauchy generator as ISA-L's gf_gen_cauchy1_matrix defines it: identity on top,
 * then row i, column j = 1 / (i ^ j) for k <= i < k + m.
 */
static inline void
ref_cauchy(unsigned k, unsigned m, uint8_t *a)
{
	memset(a, 0, (size_t)(k + m) * k);
	for (unsigned i = 0; i < k; i++)
		a[i * k + i] = 1;
	for (unsigned i = k; i < k + m; i++)
		for (unsigned j = 0; j < k; j++)
			a[i * k + j] = ref_gf_inv((uint8_t)(i ^ j));
}

/* parity[p][b] = sum_j a[k + p][j] * data[j][b], byte by byte. */
static inline void
ref_encode(unsigned k, unsigned m, size_t len, uint8_t *const *data, uint8_t **parity)
{
	uint8_t a[64 * 32];

	ref_cauchy(k, m, a);
	for (unsigned p = 0; p < m; p++)
		for (size_t b = 0; b < len; b++) {
			uint8_t s = 0;

			for (unsigned j = 0; j < k; j++)
				s ^= ref_gf_mul(a[(k + p) * k + j], data[j][b]);
			parity[p][b] = s;
		}
}

#endif
