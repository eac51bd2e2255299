/* Geometry of block groups and cell-file names (no bucket or key ever reaches a path). */
#include "dn_internal.h"
#include "dn_test.h"

static uint8_t *
slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *p;
	long n;

	CHECK(f);
	fseek(f, 0, SEEK_END);
	n = ftell(f);
	fseek(f, 0, SEEK_SET);
	p = malloc((size_t)n + 1);
	CHECK(fread(p, 1, (size_t)n, f) == (size_t)n);
	fclose(f);
	*len = (size_t)n;
	return p;
}

/* A parity file holds dn_geom_file_len bytes; an O_DIRECT write may round its last cell
 * up to a whole block, with zeros. */
static void
check_file_len(const struct dn_extent *x, uint32_t g, unsigned c, const uint8_t *file, size_t flen)
{
	uint64_t want = dn_geom_file_len(&x->g, g, c);

	if (c < x->g.k || flen == want) {
		CHECK_EQ(flen, want);
		return;
	}
	CHECK(flen > want &&
	      flen == (want + DN_DIRECT_ALIGN - 1) / DN_DIRECT_ALIGN * DN_DIRECT_ALIGN);
	for (size_t i = want; i < flen; i++)
		CHECK_EQ(file[i], 0);
}

/*
 * The files on disk are exactly the layout: data file j of a group is cell j of each
 * stripe back to back (their concatenation in stripe order is the object), parity files
 * hold a plain full-stripe encode of those cells, as long as each stripe's longest data
 * cell, and every chunk CRC matches.
 */
static void
on_disk(unsigned k, unsigned m)
{
	struct t_env e;
	struct dn_obj o;
	struct dn_extent x;
	struct ec_codec *codec;
	size_t size = 2 * 16384 * k * 4 + 3 * 16384 + 77; /* 2 full groups + a short one */
	uint8_t *buf = malloc(size), *rebuilt = calloc(1, size);
	size_t at = 0;

	t_fill(buf, size);
	t_env_init(&e, k + m + 1, k, m);
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	CHECK_EQ(t_put(e.s, "b", "k", buf, size), 0);
	CHECK_EQ(dn_meta_get_obj(e.s->meta, "b", "k", &o), 0);
	CHECK_EQ(o.npieces, 1);
	CHECK_EQ(dn_meta_get_extent(e.s->meta, o.pieces[0].ext_id, &x), 0);
	CHECK_EQ(x.ngroups, 3);
	CHECK_EQ(ec_codec_create(k, m, &codec), 0);
	for (uint32_t g = 0; g < x.ngroups; g++) {
		uint8_t *file[EC_MAX_CELLS];
		size_t flen[EC_MAX_CELLS];
		uint32_t ns = dn_geom_nstripes(&x.g, g);

		CHECK_EQ(x.groups[g].missing, 0);
		for (unsigned c = 0; c < k + m; c++) {
			char path[4096];

			flen[c] = 0;
			file[c] = NULL;
			if (dn_geom_file_len(&x.g, g, c) == 0)
				continue;
			CHECK_EQ(dn_layout_path(e.dirs[x.groups[g].drives[c]], x.id, g, c, path,
			                        sizeof(path)),
			         0);
			file[c] = slurp(path, &flen[c]);
			check_file_len(&x, g, c, file[c], flen[c]);
			flen[c] = dn_geom_file_len(&x.g, g, c);
			for (size_t i = 0; i < dn_extent_ncrc(&x, g, c); i++) {
				size_t n = flen[c] - i * x.g.chunk < x.g.chunk
				                   ? flen[c] - i * x.g.chunk
				                   : x.g.chunk;

				CHECK_EQ(zc_crc32c(0, file[c] + i * x.g.chunk, n),
				         dn_extent_crcs(&x, g, c)[i]);
			}
		}
		/* The drives of a group are distinct. */
		for (unsigned a = 0; a < k + m; a++)
			for (unsigned b = a + 1; b < k + m; b++)
				CHECK(x.groups[g].drives[a] != x.groups[g].drives[b]);
		for (uint32_t st = 0; st < ns; st++) {
			uint8_t *data[EC_MAX_CELLS], *par[EC_MAX_CELLS];

			for (unsigned j = 0; j < k; j++) {
				uint32_t len = dn_geom_cell_len(&x.g, g, st, j);

				data[j] = calloc(1, x.g.cell);
				if (len)
					memcpy(data[j], file[j] + (size_t)st * x.g.cell, len);
				memcpy(rebuilt + at, data[j], len);
				at += len;
			}
			for (unsigned p = 0; p < m; p++)
				par[p] = malloc(x.g.cell);
			CHECK_EQ(
			        ec_codec_encode(codec, x.g.cell, (const uint8_t *const *)data, par),
			        0);
			for (unsigned p = 0; p < m; p++) {
				uint32_t plen = dn_geom_cell_len(&x.g, g, st, k + p);

				CHECK_EQ(plen, dn_geom_cell_len(&x.g, g, st, 0));
				CHECK(memcmp(par[p], file[k + p] + (size_t)st * x.g.cell, plen) ==
				      0);
				for (size_t i = plen; i < x.g.cell; i++)
					CHECK_EQ(par[p][i], 0); /* what is not stored is zero */
				free(par[p]);
			}
			for (unsigned j = 0; j < k; j++)
				free(data[j]);
		}
		for (unsigned c = 0; c < k + m; c++)
			free(file[c]);
	}
	CHECK_EQ(at, size);
	CHECK(memcmp(rebuilt, buf, size) == 0);
	ec_codec_destroy(codec);
	dn_extent_free(&x);
	dn_obj_fini(&o);
	free(buf);
	free(rebuilt);
	t_env_fini(&e);
}

/* Bytes in every cell file of key's extent. */
static uint64_t
stored(struct t_env *e, const char *key, uint64_t *parity)
{
	struct dn_obj o;
	struct dn_extent x;
	uint64_t total = 0;

	*parity = 0;
	CHECK_EQ(dn_meta_get_obj(e->s->meta, "b", key, &o), 0);
	if (o.npieces == 0) {
		dn_obj_fini(&o);
		return 0;
	}
	CHECK_EQ(dn_meta_get_extent(e->s->meta, o.pieces[0].ext_id, &x), 0);
	for (uint32_t g = 0; g < x.ngroups; g++)
		for (unsigned c = 0; c < x.g.k + x.g.m; c++) {
			char path[4096];
			struct stat st;

			if (dn_geom_file_len(&x.g, g, c) == 0)
				continue;
			CHECK_EQ(dn_layout_path(e->dirs[x.groups[g].drives[c]], x.id, g, c, path,
			                        sizeof(path)),
			         0);
			CHECK_EQ(stat(path, &st), 0);
			total += (uint64_t)st.st_size;
			if (c >= x.g.k)
				*parity += (uint64_t)st.st_size;
		}
	dn_extent_free(&x);
	dn_obj_fini(&o);
	return total;
}

/*
 * A short stripe stores no padding: data cells hold exactly the object's bytes and each
 * parity cell is as long as its stripe's longest data cell (an O_DIRECT write rounds that
 * up to one block). Whole and degraded reads of such stripes give the object back, and
 * heal rebuilds the short cells.
 */
static void
stored_bytes(void)
{
	const unsigned k = 4, m = 2;
	const size_t cell = 16384, stripe = k * cell;
	const size_t sizes[] = { 0,
		                 1,
		                 4096,
		                 cell - 1,
		                 cell + 1,
		                 2 * stripe + cell + 5,
		                 9 * stripe + 3 * cell + 77 /* 3 groups of 4 stripes */ };
	const size_t n = sizeof(sizes) / sizeof(sizes[0]);
	uint8_t *buf[sizeof(sizes) / sizeof(sizes[0])];
	struct t_env e;
	char key[32];

	t_env_open(&e, k + m, k, m, "b");
	for (size_t i = 0; i < n; i++) {
		uint64_t total, parity, want_parity = 0;
		size_t left = sizes[i];

		buf[i] = malloc(sizes[i] + 1);
		t_fill(buf[i], sizes[i]);
		snprintf(key, sizeof(key), "s%zu", i);
		CHECK_EQ(t_put(e.s, "b", key, buf[i], sizes[i]), 0);
		total = stored(&e, key, &parity);
		while (left) { /* per stripe: m parity cells as long as its first data cell */
			size_t c0 = left < cell ? left : cell;

			want_parity += m * c0;
			left -= left < stripe ? left : stripe;
		}
		CHECK_EQ(total - parity, sizes[i]);
		CHECK(parity >= want_parity);
		CHECK(parity <=
		      want_parity + (uint64_t)m * 3 * DN_DIRECT_ALIGN); /* a block per group */
	}
	/* Lose a data and a parity drive: every read is degraded; then heal both. */
	t_close(&e);
	t_rmrf(e.dirs[0]);
	t_rmrf(e.dirs[5]);
	t_open(&e);
	for (int pass = 0; pass < 2; pass++) {
		for (size_t i = 0; i < n; i++) {
			snprintf(key, sizeof(key), "s%zu", i);
			CHECK_EQ(t_check_read(e.s, "b", key, 0, 0, false, buf[i], sizes[i]), 0);
			if (sizes[i] > 3)
				CHECK_EQ(t_check_read(e.s, "b", key, 1, sizes[i] - 2, true,
				                      buf[i] + 1, sizes[i] - 2),
				         0);
		}
		if (pass == 0) {
			CHECK(dn_heal(e.s, 0) > 0);
			CHECK(dn_heal(e.s, 5) > 0);
			t_close(&e);
			t_rmrf(e.dirs[1]);
			t_rmrf(e.dirs[4]);
			t_open(&e);
		}
	}
	for (size_t i = 0; i < n; i++)
		free(buf[i]);
	t_env_fini(&e);
}

int
main(void)
{
	on_disk(4, 2);
	on_disk(3, 3);
	stored_bytes();
	struct dn_geom g = { 0, 4, 2, 1000, 3, 100, true };
	char path[4096];
	uint64_t id;

	/* Empty object: no groups, no files. */
	CHECK_EQ(dn_geom_ngroups(&g), 0);
	/* 1 byte: one group, one stripe; cell 0 and each parity cell have 1 byte. */
	g.size = 1;
	CHECK_EQ(dn_geom_ngroups(&g), 1);
	CHECK_EQ(dn_geom_nstripes(&g, 0), 1);
	CHECK_EQ(dn_geom_file_len(&g, 0, 0), 1);
	CHECK_EQ(dn_geom_file_len(&g, 0, 1), 0);
	CHECK_EQ(dn_geom_file_len(&g, 0, 4), 1);
	/* Extents written before short parity (EXT_VER 1) keep whole parity cells. */
	g.short_parity = false;
	CHECK_EQ(dn_geom_file_len(&g, 0, 4), 1000);
	CHECK_EQ(dn_geom_cell_len(&g, 0, 0, 5), 1000);
	CHECK_EQ(dn_geom_cell_len(&g, 0, 1, 5), 0);
	g.short_parity = true;
	/* Group = 3 stripes x 4000 bytes. 12000 + 4001 bytes: 2 groups, the second 2 stripes. */
	g.size = 16001;
	CHECK_EQ(dn_geom_ngroups(&g), 2);
	CHECK_EQ(dn_geom_nstripes(&g, 0), 3);
	CHECK_EQ(dn_geom_nstripes(&g, 1), 2);
	CHECK_EQ(dn_geom_file_len(&g, 0, 3), 3000);
	CHECK_EQ(dn_geom_file_len(&g, 1, 0), 1001);
	CHECK_EQ(dn_geom_file_len(&g, 1, 1), 1000);
	CHECK_EQ(dn_geom_file_len(&g, 1, 5), 1001);
	CHECK_EQ(dn_geom_cell_len(&g, 1, 0, 4), 1000);
	CHECK_EQ(dn_geom_cell_len(&g, 1, 1, 4), 1);
	CHECK_EQ(dn_geom_cell_len(&g, 1, 1, 0), 1);
	CHECK_EQ(dn_geom_cell_len(&g, 1, 1, 1), 0);
	/* Names come from the id alone and parse back; temp names do not parse. */
	CHECK_EQ(dn_layout_path("/d", 0x1234abcdull, 7, 5, path, sizeof(path)), 0);
	CHECK(strcmp(path, "/d/data/cd/000000001234abcd.7.5") == 0);
	CHECK_EQ(dn_layout_parse("000000001234abcd.7.5", &id), 0);
	CHECK_EQ(id, 0x1234abcdull);
	CHECK_EQ(dn_layout_parse("000000001234abcd.7.5.heal", &id), -EINVAL);
	CHECK_EQ(dn_layout_parse("000000001234abcd.7", &id), -EINVAL);
	CHECK_EQ(dn_layout_parse("../../etc/passwd", &id), -EINVAL);
	CHECK_EQ(dn_layout_path("/d", 1, 0, 0, path, 10), -ENAMETOOLONG);
	printf("ok\n");
	return 0;
}
