/* CRC32C over ISA-L's crc32_iscsi, plain and per fixed-size chunk. */
#include <errno.h>
#include <limits.h>

#include <isa-l/crc.h>

#include "ec.h"

uint32_t
ec_crc32c(uint32_t crc, const void *buf, size_t len)
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

int
ec_chunk_crc_init(struct ec_chunk_crc *c, size_t bytes_per_checksum, uint32_t *out,
		  size_t out_cap)
{
	if (!c || bytes_per_checksum == 0 || (!out && out_cap))
		return -EINVAL;
	*c = (struct ec_chunk_crc){ .bytes_per_checksum = bytes_per_checksum, .out = out,
				    .out_cap = out_cap };
	return 0;
}

static int
close_chunk(struct ec_chunk_crc *c)
{
	if (c->count == c->out_cap)
		return -ENOSPC;
	c->out[c->count++] = c->crc;
	c->crc = 0;
	c->in_chunk = 0;
	return 0;
}

int
ec_chunk_crc_add(struct ec_chunk_crc *c, const void *frag, size_t len)
{
	const unsigned char *p = frag;

	while (len > 0) {
		size_t room = c->bytes_per_checksum - c->in_chunk;
		size_t n = len < room ? len : room;

		c->crc = ec_crc32c(c->crc, p, n);
		c->in_chunk += n;
		p += n;
		len -= n;
		if (c->in_chunk == c->bytes_per_checksum && close_chunk(c) < 0)
			return -ENOSPC;
	}
	return 0;
}

int
ec_chunk_crc_finish(struct ec_chunk_crc *c)
{
	if (c->in_chunk > 0 && close_chunk(c) < 0)
		return -ENOSPC;
	return (int)c->count;
}
