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
	for (unsigned i = 0; i < c->m; i++) {
		s->parity[i] = parity[i];
		/* ec_encode_data_update XORs into parity, so it starts at zero. */
		memset(parity[i], 0, cell_len);
	}
	return 0;
}

int
ec_stripe_add(struct ec_stripe *s, unsigned cell, const void *frag, size_t len)
{
	const struct ec_codec *c = s->codec;
	unsigned char *dst[EC_MAX_CELLS];
	size_t at = 0;

	if (cell >= c->k || len > s->cell_len - s->filled[cell])
		return -EINVAL;
	while (at < len) {
		size_t n = len - at < EC_STEP ? len - at : EC_STEP;

		/* Parity byte i depends only on byte i of each data cell: update in place. */
		for (unsigned p = 0; p < c->m; p++)
			dst[p] = s->parity[p] + s->filled[cell];
		ec_encode_data_update((int)n, (int)c->k, (int)c->m, (int)cell, c->enc_tables,
				      (unsigned char *)frag + at, dst);
		s->filled[cell] += n;
		at += n;
	}
	return 0;
}
