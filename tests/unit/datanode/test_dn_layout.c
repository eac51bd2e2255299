/* Geometry of block groups and cell-file names (no bucket or key ever reaches a path). */
#include "../../../datanode/dn_internal.h"
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

/*
 * The files on disk are exactly the layout: data file j of a group is cell j of each
 * stripe back to back (their concatenation in stripe order is the object), parity files
 * hold a plain full-stripe encode of those cells, and every chunk CRC matches.
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
			CHECK_EQ(flen[c], dn_geom_file_len(&x.g, g, c));
			for (size_t i = 0; i < dn_extent_ncrc(&x, g, c); i++) {
				size_t n = flen[c] - i * x.g.chunk < x.g.chunk
				                   ? flen[c] - i * x.g.chunk
				                   : x.g.chunk;

				CHECK_EQ(ec_crc32c(0, file[c] + i * x.g.chunk, n),
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
				CHECK(memcmp(par[p], file[k + p] + (size_t)st * x.g.cell,
				             x.g.cell) == 0);
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

int
main(void)
{
	on_disk(4, 2);
	on_disk(3, 3);
	struct dn_geom g = { 0, 4, 2, 1000, 3, 100 };
	char path[4096];
	uint64_t id;

	/* Empty object: no groups, no files. */
	CHECK_EQ(dn_geom_ngroups(&g), 0);
	/* 1 byte: one group, one stripe; cell 0 has 1 byte, parity a whole cell. */
	g.size = 1;
	CHECK_EQ(dn_geom_ngroups(&g), 1);
	CHECK_EQ(dn_geom_nstripes(&g, 0), 1);
	CHECK_EQ(dn_geom_file_len(&g, 0, 0), 1);
	CHECK_EQ(dn_geom_file_len(&g, 0, 1), 0);
	CHECK_EQ(dn_geom_file_len(&g, 0, 4), 1000);
	/* Group = 3 stripes x 4000 bytes. 12000 + 4001 bytes: 2 groups, the second 2 stripes. */
	g.size = 16001;
	CHECK_EQ(dn_geom_ngroups(&g), 2);
	CHECK_EQ(dn_geom_nstripes(&g, 0), 3);
	CHECK_EQ(dn_geom_nstripes(&g, 1), 2);
	CHECK_EQ(dn_geom_file_len(&g, 0, 3), 3000);
	CHECK_EQ(dn_geom_file_len(&g, 1, 0), 1001);
	CHECK_EQ(dn_geom_file_len(&g, 1, 1), 1000);
	CHECK_EQ(dn_geom_file_len(&g, 1, 5), 2000);
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
