/*
 * s3_bcl_plan: the pure part of a cluster GET: where a range's bytes lie in an extent's
 * cells (the datanode's layout, datanode/dn_layout.c: a group of stripes_per_group
 * stripes, cell file c holding cell c of every stripe back to back), which cells rebuild
 * a lost one, and the rebuild over a reader the caller gives (ReadCell in the backend,
 * memory in the unit test).
 */
#include <errno.h>
#include <string.h>

#include "s3_bcl_internal.h"

void
s3_bcl_geom_of(const struct cl_rec_extent *e, struct s3_bcl_geom *g)
{
	g->size = e->size;
	g->k = e->k;
	g->m = e->m;
	g->cell = e->cell_size;
	g->spg = e->stripes_per_group;
}

uint64_t
s3_bcl_cell_len(const struct s3_bcl_geom *g, uint32_t group, uint32_t stripe, unsigned c)
{
	uint64_t sb = (uint64_t)g->k * g->cell, gb = sb * g->spg, off;

	if (c >= g->k)
		c = 0; /* parity: as long as the longest data cell (see the header) */
	off = (uint64_t)group * gb + (uint64_t)stripe * sb + (uint64_t)c * g->cell;
	if (off >= g->size)
		return 0;
	return g->size - off < g->cell ? g->size - off : g->cell;
}

void
s3_bcl_piece_at(const struct s3_bcl_geom *g, uint64_t at, uint64_t end, struct s3_bcl_piece *p)
{
	uint64_t sb = (uint64_t)g->k * g->cell, gb = sb * g->spg, r = at % gb, n;

	if (end > g->size)
		end = g->size;
	p->group = (uint32_t)(at / gb);
	p->stripe = (uint32_t)(r / sb);
	p->cell = (unsigned)(r % sb / g->cell);
	p->x = r % sb % g->cell;
	p->off = (uint64_t)p->stripe * g->cell + p->x;
	n = g->cell - p->x;
	p->len = end - at < n ? end - at : n;
}

int
s3_bcl_sources(const struct s3_bcl_geom *g, uint32_t group, uint32_t stripe, unsigned target,
               uint64_t x, uint32_t unavail, uint32_t *src)
{
	unsigned have = 0;
	uint32_t s = 0;

	/* data cells first: a read of theirs is a read the client wanted anyway */
	for (unsigned i = 0; i < g->k + g->m && have < g->k; i++) {
		bool zero = i < g->k && s3_bcl_cell_len(g, group, stripe, i) <= x;

		if (i == target || (!zero && (unavail & (1u << i))))
			continue;
		s |= 1u << i;
		have++;
	}
	if (have < g->k)
		return -EIO;
	*src = s;
	return 0;
}

size_t
s3_bcl_window(unsigned k, unsigned m)
{
	size_t w = BCL_REBUILD_BYTES / (k + m);

	w -= w % 4096;
	if (w > (256u << 10))
		w = 256u << 10;
	return w ? w : 4096;
}

int
s3_bcl_rebuild(struct ec_codec *codec, const struct s3_bcl_geom *g, uint32_t group, uint32_t stripe,
               unsigned target, uint64_t x, uint64_t y, uint32_t *unavail, s3_bcl_read_fn read,
               void *arg, uint8_t *scratch, uint8_t *out)
{
	unsigned n = g->k + g->m;
	size_t w = (size_t)(y - x);
	uint32_t all = n == 32 ? 0xffffffffu : (1u << n) - 1;

	/* each failed read removes a cell, so this ends after at most m rounds */
	for (;;) {
		struct s3_bcl_cread rq[CL_REC_MAX_CELLS];
		uint8_t *cells[CL_REC_MAX_CELLS];
		uint32_t src, failed = 0;
		size_t nr = 0;
		int rc;

		rc = s3_bcl_sources(g, group, stripe, target, x, *unavail, &src);
		if (rc < 0)
			return rc;
		for (unsigned i = 0; i < n; i++) {
			uint64_t len = s3_bcl_cell_len(g, group, stripe, i), got;

			cells[i] = scratch + (size_t)i * w;
			if (!(src & (1u << i)))
				continue;
			got = len <= x ? 0 : (len < y ? len : y) - x;
			/* past a cell's end the stripe counts it as zeros */
			memset(cells[i] + got, 0, w - got);
			if (got)
				rq[nr++] =
				        (struct s3_bcl_cread){ .cell = i,
					                       .off = (uint64_t)stripe * g->cell +
					                              x,
					                       .len = got,
					                       .buf = cells[i],
					                       .res = 0 };
		}
		if (nr)
			read(arg, rq, nr);
		for (size_t i = 0; i < nr; i++)
			if (rq[i].res < 0)
				failed |= 1u << rq[i].cell;
		if (failed) {
			*unavail |= failed;
			continue;
		}
		rc = ec_codec_decode(codec, w, cells, all & ~src);
		if (rc < 0)
			return rc;
		memcpy(out, cells[target], w);
		return 0;
	}
}
