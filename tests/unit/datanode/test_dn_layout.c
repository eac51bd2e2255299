/* Geometry of block groups and cell-file names (no bucket or key ever reaches a path). */
#include "../../../datanode/dn_internal.h"
#include "dn_test.h"

int
main(void)
{
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
	/* CRC32C combine equals the CRC of the concatenation. */
	{
		uint8_t a[1000], b[777];

		t_fill(a, sizeof(a));
		t_fill(b, sizeof(b));
		CHECK_EQ(dn_crc32c_combine(ec_crc32c(0, a, sizeof(a)), ec_crc32c(0, b, sizeof(b)),
		                           sizeof(b)),
		         ec_crc32c(ec_crc32c(0, a, sizeof(a)), b, sizeof(b)));
	}
	printf("ok\n");
	return 0;
}
