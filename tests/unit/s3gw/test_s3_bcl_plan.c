/*
 * test_s3_bcl_plan: the pure part of the cluster GET (s3gw/s3_bcl_plan.c) against a plain
 * reference: objects laid out byte by byte into cell files by the layout's definition
 * (group of spg stripes, stripe of k cells, cell file c = cell c of every stripe in turn),
 * parity from ec_codec_encode per stripe, stored as the datanode stores it (as long as
 * the stripe's first data cell). Checked: the pieces a range is cut into name exactly the
 * reference's bytes; cell lengths; the sources a rebuild picks; every rebuild of every
 * window under every erasure pattern of up to m cells (plus reads that fail unannounced)
 * gives the original bytes, and more than m lost cells give -EIO. No read goes past a
 * cell's stored length.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "s3_bcl_internal.h"

struct obj {
	struct s3_bcl_geom g;
	uint8_t *data;
	uint32_t ngroups;
	uint8_t **cells; /* [group * (k + m) + c] */
	uint64_t *len;   /* stored bytes of each cell file */
};

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t
rnd(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

/* Where object byte `at` lies, by the definition. */
static void
ref_locate(const struct s3_bcl_geom *g, uint64_t at, uint32_t *group, unsigned *cell, uint64_t *off)
{
	uint64_t stripe_bytes = g->k * g->cell, group_bytes = stripe_bytes * g->spg;
	uint64_t in_group = at % group_bytes, stripe = in_group / stripe_bytes;

	*group = (uint32_t)(at / group_bytes);
	*cell = (unsigned)(in_group % stripe_bytes / g->cell);
	*off = stripe * g->cell + in_group % g->cell;
}

static void
obj_build(struct obj *o, uint64_t size, unsigned k, unsigned m, uint64_t cell, unsigned spg)
{
	unsigned n = k + m;
	struct ec_codec *codec;
	uint64_t gb = k * cell * spg;

	o->g = (struct s3_bcl_geom){ size, k, m, cell, spg };
	o->ngroups = (uint32_t)((size + gb - 1) / gb);
	o->data = malloc(size ? size : 1);
	o->cells = calloc((size_t)o->ngroups * n, sizeof(*o->cells));
	o->len = calloc((size_t)o->ngroups * n, sizeof(*o->len));
	for (uint64_t i = 0; i < size; i++)
		o->data[i] = (uint8_t)rnd();
	for (size_t i = 0; i < (size_t)o->ngroups * n; i++)
		o->cells[i] = calloc(1, cell * spg);
	for (uint64_t i = 0; i < size; i++) {
		uint32_t gr;
		unsigned c;
		uint64_t off;

		ref_locate(&o->g, i, &gr, &c, &off);
		o->cells[gr * n + c][off] = o->data[i];
		if (off + 1 > o->len[gr * n + c])
			o->len[gr * n + c] = off + 1;
	}
	assert_int_equal(ec_codec_create(k, m, &codec), 0);
	for (uint32_t gr = 0; gr < o->ngroups; gr++)
		for (unsigned s = 0; s < spg; s++) {
			const uint8_t *d[EC_MAX_CELLS];
			uint8_t *p[EC_MAX_CELLS];

			if (o->len[gr * n] <= s * cell)
				break; /* no stripe s in this group */
			for (unsigned j = 0; j < k; j++)
				d[j] = o->cells[gr * n + j] + s * cell;
			for (unsigned j = 0; j < m; j++)
				p[j] = o->cells[gr * n + k + j] + s * cell;
			assert_int_equal(ec_codec_encode(codec, cell, d, p), 0);
			/* stored as long as the stripe's first data cell */
			for (unsigned j = 0; j < m; j++)
				o->len[gr * n + k + j] = o->len[gr * n];
		}
	ec_codec_destroy(codec);
}

static void
obj_free(struct obj *o)
{
	for (size_t i = 0; i < (size_t)o->ngroups * (o->g.k + o->g.m); i++)
		free(o->cells[i]);
	free(o->cells);
	free(o->len);
	free(o->data);
}

static const uint64_t sizes[] = {
	1,     4095, 4096, 4097, 4 * 4096, 4 * 4096 * 3, 4 * 4096 * 3 + 1, 2 * 4 * 4096 * 3 + 5000,
	100000
};

static void
test_pieces(void **state)
{
	(void)state;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		struct obj o;

		obj_build(&o, sizes[si], 4, 2, 4096, 3);
		for (int t = 0; t < 200; t++) {
			uint64_t a = rnd() % o.g.size, b = a + 1 + rnd() % (o.g.size - a);

			if (t == 0) {
				a = 0;
				b = o.g.size;
			}
			for (uint64_t at = a; at < b;) {
				struct s3_bcl_piece p;
				uint32_t gr;
				unsigned c;
				uint64_t off;

				s3_bcl_piece_at(&o.g, at, b, &p);
				assert_true(p.len > 0 && at + p.len <= b);
				assert_true(p.x + p.len <= o.g.cell);
				assert_int_equal(p.off, (uint64_t)p.stripe * o.g.cell + p.x);
				/* first and last byte where the definition puts them */
				ref_locate(&o.g, at, &gr, &c, &off);
				assert_int_equal(gr, p.group);
				assert_int_equal(c, p.cell);
				assert_int_equal(off, p.off);
				ref_locate(&o.g, at + p.len - 1, &gr, &c, &off);
				assert_int_equal(gr, p.group);
				assert_int_equal(c, p.cell);
				assert_int_equal(off, p.off + p.len - 1);
				assert_true(p.off + p.len <= o.len[p.group * 6 + p.cell]);
				assert_memory_equal(o.cells[p.group * 6 + p.cell] + p.off,
				                    o.data + at, p.len);
				at += p.len;
			}
		}
		obj_free(&o);
	}
}

static void
test_cell_len(void **state)
{
	(void)state;
	for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
		struct obj o;

		obj_build(&o, sizes[si], 4, 2, 4096, 3);
		for (uint32_t gr = 0; gr < o.ngroups; gr++)
			for (unsigned c = 0; c < 6; c++) {
				uint64_t total = 0, l;

				for (unsigned s = 0; s < 3; s++) {
					l = s3_bcl_cell_len(&o.g, gr, s, c);
					assert_true(l <= o.g.cell);
					if (l)
						total = s * o.g.cell + l;
				}
				assert_int_equal(total, o.len[gr * 6 + c]);
			}
		obj_free(&o);
	}
}

static void
test_sources(void **state)
{
	struct s3_bcl_geom g = { 4 * 4096 * 2, 4, 2, 4096, 2 };
	struct s3_bcl_geom tail = { 4096 + 10, 4, 2, 4096, 2 }; /* cells 2, 3 empty */
	uint32_t src;

	(void)state;
	/* data first */
	assert_int_equal(s3_bcl_sources(&g, 0, 0, 1, 0, 1u << 1, &src), 0);
	assert_int_equal(src, 0x1d); /* 0, 2, 3, and parity 4 */
	assert_int_equal(s3_bcl_sources(&g, 0, 0, 1, 0, 1u << 1 | 1u << 3, &src), 0);
	assert_int_equal(src, 0x35);
	/* m + 1 lost: none */
	assert_int_equal(s3_bcl_sources(&g, 0, 0, 1, 0, 1u << 1 | 1u << 3 | 1u << 4, &src), -EIO);
	/* an empty data cell counts, even on a node that is gone */
	assert_int_equal(s3_bcl_sources(&tail, 0, 0, 0, 0, 0x3e, &src), -EIO);
	assert_int_equal(s3_bcl_sources(&tail, 0, 0, 0, 0, 0x2f, &src), -EIO);
	assert_int_equal(s3_bcl_sources(&tail, 0, 0, 0, 0, 0x0f, &src), 0);
	assert_int_equal(src, 0x3c); /* 2, 3 (zeros) + both parities */
}

struct mem_reader {
	struct obj *o;
	uint32_t group;
	uint32_t fail; /* cells whose reads fail without warning */
	unsigned reads;
};

static void
mem_read(void *arg, struct s3_bcl_cread *r, size_t n)
{
	struct mem_reader *mr = arg;
	unsigned nc = mr->o->g.k + mr->o->g.m;

	for (size_t i = 0; i < n; i++) {
		size_t idx = mr->group * nc + r[i].cell;

		assert_true(r[i].len > 0);
		assert_true(r[i].off + r[i].len <= mr->o->len[idx]); /* never past a cell */
		mr->reads++;
		if (mr->fail & (1u << r[i].cell)) {
			r[i].res = -EBADMSG;
			memset(r[i].buf, 0xee, r[i].len);
			continue;
		}
		memcpy(r[i].buf, mr->o->cells[idx] + r[i].off, r[i].len);
		r[i].res = 0;
	}
}

static unsigned
popcount(uint32_t v)
{
	return (unsigned)__builtin_popcount(v);
}

static void
rebuild_all(unsigned k, unsigned m, uint64_t size)
{
	struct obj o;
	struct ec_codec *codec;
	unsigned n = k + m;
	size_t w = 4096 + 512;
	uint8_t *scratch = malloc(n * w), *out = malloc(w);

	obj_build(&o, size, k, m, 8192, 2);
	assert_int_equal(ec_codec_create(k, m, &codec), 0);
	for (uint64_t at = 0; at < size;) {
		struct s3_bcl_piece p;

		s3_bcl_piece_at(&o.g, at, size, &p);
		for (uint64_t x = p.x; x < p.x + p.len; x += w) {
			uint64_t y = x + w < p.x + p.len ? x + w : p.x + p.len;
			const uint8_t *want = o.data + at + (x - p.x);

			/* every pattern of lost cells that includes the target */
			for (uint32_t lost = 0; lost < (1u << n); lost++) {
				struct mem_reader mr = { &o, p.group, 0, 0 };
				uint32_t un = lost | 1u << p.cell;
				int rc;

				if (!(lost & (1u << p.cell)))
					continue;
				/* half the time one lost cell is a read that fails unannounced */
				if (popcount(lost) > 1 && (rnd() & 1)) {
					uint32_t f = lost & ~(1u << p.cell);

					f &= -f;
					mr.fail = f;
					un &= ~f;
				}
				memset(out, 0x55, w);
				rc = s3_bcl_rebuild(codec, &o.g, p.group, p.stripe, p.cell, x, y,
				                    &un, mem_read, &mr, scratch, out);
				if (popcount(lost) > m) {
					/* unless the extra cells hold no bytes there (zeros) */
					if (rc == 0)
						assert_memory_equal(out, want, y - x);
					else
						assert_int_equal(rc, -EIO);
					continue;
				}
				assert_int_equal(rc, 0);
				assert_memory_equal(out, want, y - x);
			}
		}
		at += p.len;
	}
	ec_codec_destroy(codec);
	obj_free(&o);
	free(scratch);
	free(out);
}

static void
test_rebuild(void **state)
{
	(void)state;
	rebuild_all(4, 2, 4 * 8192 * 2 + 3 * 8192 + 100); /* a full group, a short one */
	rebuild_all(2, 1, 8192 + 1);
	rebuild_all(3, 3, 5000);
}

static void
test_window(void **state)
{
	(void)state;
	assert_int_equal(s3_bcl_window(4, 2), 256u << 10);
	assert_int_equal(s3_bcl_window(16, 16), 64u << 10);
	assert_true(s3_bcl_window(4, 2) % 4096 == 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pieces),  cmocka_unit_test(test_cell_len),
		cmocka_unit_test(test_sources), cmocka_unit_test(test_rebuild),
		cmocka_unit_test(test_window),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
