/* RS(k, m) codec: Cauchy generator, full-stripe encode, decode with cached tables. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "ec_internal.h"

int
ec_codec_create(unsigned k, unsigned m, struct ec_codec **out)
{
	struct ec_codec *c;

	if (!out || k < 1 || m < 1 || k + m > EC_MAX_CELLS)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->k = k;
	c->m = m;
	c->matrix = malloc((size_t)(k + m) * k);
	c->enc_tables = malloc((size_t)32 * k * m);
	c->col_tables = malloc((size_t)32 * k * m);
	if (!c->matrix || !c->enc_tables || !c->col_tables) {
		ec_codec_destroy(c);
		return -ENOMEM;
	}
	/* Cauchy rather than Vandermonde: every k-row subset of it is invertible. */
	gf_gen_cauchy1_matrix(c->matrix, (int)(k + m), (int)k);
	ec_init_tables((int)k, (int)m, c->matrix + (size_t)k * k, c->enc_tables);
	for (unsigned i = 0; i < k; i++) {
		unsigned char col[EC_MAX_CELLS];

		for (unsigned j = 0; j < m; j++)
			col[j] = c->matrix[(size_t)(k + j) * k + i];
		ec_init_tables(1, (int)m, col, c->col_tables + (size_t)32 * m * i);
	}
	pthread_mutex_init(&c->cache_lock, NULL);
	*out = c;
	return 0;
}

void
ec_codec_destroy(struct ec_codec *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < EC_DECODE_CACHE; i++)
		free(c->cache[i].tables);
	if (c->matrix && c->enc_tables)
		pthread_mutex_destroy(&c->cache_lock);
	free(c->col_tables);
	free(c->enc_tables);
	free(c->matrix);
	free(c);
}

unsigned
ec_codec_k(const struct ec_codec *c)
{
	return c->k;
}

unsigned
ec_codec_m(const struct ec_codec *c)
{
	return c->m;
}

/* ec_encode_data over buffers of any size_t length, in int-sized steps. */
static void
encode_steps(size_t len, unsigned srcs, unsigned dests, unsigned char *tables,
             unsigned char *const *src, unsigned char *const *dst)
{
	unsigned char *s[EC_MAX_CELLS], *d[EC_MAX_CELLS];

	for (size_t off = 0; off < len; off += EC_STEP) {
		size_t n = len - off < EC_STEP ? len - off : EC_STEP;

		for (unsigned i = 0; i < srcs; i++)
			s[i] = src[i] + off;
		for (unsigned i = 0; i < dests; i++)
			d[i] = dst[i] + off;
		ec_encode_data((int)n, (int)srcs, (int)dests, tables, s, d);
	}
}

int
ec_codec_encode(const struct ec_codec *c, size_t len, const uint8_t *const *data,
                uint8_t *const *parity)
{
	if (!c || !data || !parity)
		return -EINVAL;
	/* ISA-L's prototype lacks const; it only reads data. */
	encode_steps(len, c->k, c->m, c->enc_tables, (unsigned char *const *)data, parity);
	return 0;
}

/* Indices of the cells to read: the first k not erased. */
static void
pick_survivors(const struct ec_codec *c, uint32_t erased, unsigned *survivors)
{
	unsigned n = 0;

	for (unsigned i = 0; n < c->k; i++)
		if (!(erased & (1u << i)))
			survivors[n++] = i;
}

/*
 * Decode rows for an erasure pattern: invert the survivors' k x k submatrix; a lost
 * data cell is its row of the inverse, a lost parity cell its generator row times the
 * inverse. Returns the expanded ISA-L tables, or NULL when out of memory.
 */
static unsigned char *
build_decode_tables(const struct ec_codec *c, uint32_t erased)
{
	unsigned k = c->k, survivors[EC_MAX_CELLS], p = 0;
	unsigned char b[EC_MAX_CELLS * EC_MAX_CELLS], inv[EC_MAX_CELLS * EC_MAX_CELLS];
	unsigned char rows[EC_MAX_CELLS * EC_MAX_CELLS];
	unsigned char *tables;

	pick_survivors(c, erased, survivors);
	for (unsigned i = 0; i < k; i++)
		memcpy(b + i * k, c->matrix + (size_t)survivors[i] * k, k);
	if (gf_invert_matrix(b, inv, (int)k) < 0)
		return NULL; /* cannot happen with a Cauchy matrix */

	for (unsigned e = 0; e < c->k + c->m; e++) {
		if (!(erased & (1u << e)))
			continue;
		if (e < k) {
			memcpy(rows + p * k, inv + e * k, k);
		} else {
			for (unsigned i = 0; i < k; i++) {
				unsigned char s = 0;

				for (unsigned j = 0; j < k; j++)
					s ^= gf_mul(inv[j * k + i], c->matrix[(size_t)e * k + j]);
				rows[p * k + i] = s;
			}
		}
		p++;
	}
	tables = malloc((size_t)32 * k * p);
	if (tables)
		ec_init_tables((int)k, (int)p, rows, tables);
	return tables;
}

/* Copy the pattern's tables into out (cached, or built and cached). */
static int
decode_tables(struct ec_codec *c, uint32_t erased, unsigned char *out, size_t size)
{
	unsigned char *t;
	int rc = 0;

	pthread_mutex_lock(&c->cache_lock);
	for (unsigned i = 0; i < EC_DECODE_CACHE; i++) {
		if (c->cache[i].erased == erased) {
			memcpy(out, c->cache[i].tables, size);
			goto unlock;
		}
	}
	t = build_decode_tables(c, erased);
	if (!t) {
		rc = -ENOMEM;
		goto unlock;
	}
	memcpy(out, t, size);
	free(c->cache[c->cache_next].tables);
	c->cache[c->cache_next] = (struct ec_decode_entry){ .erased = erased, .tables = t };
	c->cache_next = (c->cache_next + 1) % EC_DECODE_CACHE;
unlock:
	pthread_mutex_unlock(&c->cache_lock);
	return rc;
}

int
ec_codec_decode(struct ec_codec *c, size_t len, uint8_t *const *cells, uint32_t erased)
{
	/* Copied out of the cache so that eviction never frees tables in use. */
	unsigned char tables[32 * (EC_MAX_CELLS / 2) * (EC_MAX_CELLS / 2)];
	unsigned char *src[EC_MAX_CELLS], *dst[EC_MAX_CELLS];
	unsigned survivors[EC_MAX_CELLS], nerr = 0;
	int rc;

	if (!c || !cells)
		return -EINVAL;
	if (c->k + c->m < 32 && erased >> (c->k + c->m))
		return -EINVAL;
	for (unsigned i = 0; i < c->k + c->m; i++)
		if (erased & (1u << i))
			dst[nerr++] = cells[i];
	if (nerr > c->m)
		return -EINVAL;
	if (nerr == 0)
		return 0;

	rc = decode_tables(c, erased, tables, (size_t)32 * c->k * nerr);
	if (rc < 0)
		return rc;
	pick_survivors(c, erased, survivors);
	for (unsigned i = 0; i < c->k; i++)
		src[i] = cells[survivors[i]];
	encode_steps(len, c->k, nerr, tables, src, dst);
	return 0;
}
