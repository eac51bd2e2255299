/* Streaming stripe encoder: parity folded in fragment by fragment, nothing gathered. */
#include <errno.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "ec_internal.h"

int
ec_stripe_init(struct ec_stripe *s, const struct ec_codec *c, size_t cell_len,
               uint8_t *const *parity)
{
	if (!s || !c || !parity || cell_len == 0)
		return -EINVAL;
	memset(s, 0, sizeof(*s));
	s->codec = c;
	s->cell_len = cell_len;
	for (unsigned i = 0; i < c->m; i++)
		s->parity[i] = parity[i];
	return 0;
}

/*
 * Fold n bytes of data cell `cell` into parity bytes [off, off + n). The first cell to
 * reach a parity byte writes it (a one-source encode with that column's coefficients);
 * later ones XOR into it. So parity needs no zeroing pass before the stream starts.
 */
static void
fold(struct ec_stripe *s, unsigned cell, size_t off, const unsigned char *src, size_t n, bool first)
{
	const struct ec_codec *c = s->codec;
	unsigned char *dst[EC_MAX_CELLS];

	for (unsigned p = 0; p < c->m; p++)
		dst[p] = s->parity[p] + off;
	if (first)
		ec_encode_data((int)n, 1, (int)c->m, c->col_tables + (size_t)32 * c->m * cell,
		               (unsigned char **)&src, dst);
	else
		ec_encode_data_update((int)n, (int)c->k, (int)c->m, (int)cell, c->enc_tables,
		                      (unsigned char *)src, dst);
}

int
ec_stripe_add(struct ec_stripe *s, unsigned cell, const void *frag, size_t len)
{
	const struct ec_codec *c = s->codec;
	const unsigned char *src = frag;

	if (cell >= c->k || len > s->cell_len - s->filled[cell])
		return -EINVAL;
	while (len > 0) {
		size_t off = s->filled[cell], n = len < EC_STEP ? len : EC_STEP;

		/* ready is the longest cell's fill, so off <= ready. */
		if (off < s->ready) {
			size_t upd = s->ready - off < n ? s->ready - off : n;

			fold(s, cell, off, src, upd, false);
			if (upd < n)
				fold(s, cell, off + upd, src + upd, n - upd, true);
		} else {
			fold(s, cell, off, src, n, true);
		}
		if (off + n > s->ready)
			s->ready = off + n;
		s->filled[cell] += n;
		src += n;
		len -= n;
	}
	return 0;
}

void
ec_stripe_finish(struct ec_stripe *s)
{
	/* Past the longest cell every data byte is padding, so parity is zero there. */
	for (unsigned p = 0; p < s->codec->m; p++)
		memset(s->parity[p] + s->ready, 0, s->cell_len - s->ready);
	s->ready = s->cell_len;
}
