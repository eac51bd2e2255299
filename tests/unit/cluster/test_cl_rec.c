/* Cluster records (cluster/cl_rec.h): round trips, the rules on both sides, what an older
 * reader does with a newer writer's field, and precise messages for bad values. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cl_rec.h"

static char *nodes6[] = { "dn-a", "dn-b", "dn-c", "dn-d", "dn-e", "dn-f" };

/* An RS(4,2) extent of size bytes (1 MiB cells, 16 stripes per group: 64 MiB per group). */
static void
make_extent(struct cl_rec_extent *e, uint64_t id, uint64_t size, struct cl_rec_group *groups)
{
	memset(e, 0, sizeof(*e));
	e->id = id;
	e->size = size;
	e->k = 4;
	e->m = 2;
	e->cell_size = 1 << 20;
	e->stripes_per_group = 16;
	e->nodes = nodes6;
	e->nnodes = 6;
	e->groups = groups;
	e->ngroups = cl_rec_extent_groups(e);
	for (size_t g = 0; g < e->ngroups; g++) {
		memset(&groups[g], 0, sizeof(groups[g]));
		for (unsigned c = 0; c < 6; c++)
			groups[g].cell[c] = (uint16_t)((c + g) % 6);
	}
}

static void
test_node_roundtrip(void **state)
{
	struct cl_rec_drive drives[2] = { { 0, "s1/0", 1000, 600, false },
		                          { 1, "s1/1", 1000, 400, true } };
	struct cl_rec_node n = { .name = "dn-1",
		                 .address = "127.0.0.2:7000",
		                 .incarnation = 0x1234567890abcdefull,
		                 .state = CL_REC_NODE_UP,
		                 .drives = drives,
		                 .ndrives = 2,
		                 .capacity_bytes = 2000,
		                 .free_bytes = 1000,
		                 .started_ns = 42,
		                 .version = "0.1.0" },
	                   d;
	char why[CL_REC_WHY_MAX];
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(cl_rec_node_encode(&n, &buf, &len, why, sizeof(why)), 0);
	assert_int_equal(cl_rec_node_decode(buf, len, &d, why, sizeof(why)), 0);
	assert_string_equal(d.name, "dn-1");
	assert_string_equal(d.address, "127.0.0.2:7000");
	assert_true(d.incarnation == n.incarnation);
	assert_int_equal(d.state, CL_REC_NODE_UP);
	assert_int_equal(d.ndrives, 2);
	assert_string_equal(d.drives[1].id, "s1/1");
	assert_true(d.drives[1].failed);
	assert_int_equal(d.drives[0].free_bytes, 600);
	assert_int_equal(d.free_bytes, 1000);
	assert_string_equal(d.version, "0.1.0");
	/* no zone written: the node is a zone of its own; weight = free above the reserve */
	assert_string_equal(cl_rec_node_zone(&d), "dn-1");
	assert_int_equal(cl_rec_node_weight(&d), 1000);
	cl_rec_node_fini(&d);
	cl_rec_node_fini(&d); /* a fini'd struct is zeroed */
	n.zone = "rack-1";
	free(buf);
	assert_int_equal(cl_rec_node_encode(&n, &buf, &len, why, sizeof(why)), 0);
	assert_int_equal(cl_rec_node_decode(buf, len, &d, why, sizeof(why)), 0);
	assert_string_equal(d.zone, "rack-1");
	assert_string_equal(cl_rec_node_zone(&d), "rack-1");
	d.capacity_bytes = 0; /* an older writer, no capacity: a nominal weight */
	assert_true(cl_rec_node_weight(&d) == CL_REC_WEIGHT_UNKNOWN);
	cl_rec_node_fini(&d);

	/* a newer writer's field 99 (varint 7) is skipped */
	{
		uint8_t *more = malloc(len + 3);

		memcpy(more, buf, len);
		more[len] = 0x98; /* field 99, wire type 0 */
		more[len + 1] = 0x06;
		more[len + 2] = 7;
		assert_int_equal(cl_rec_node_decode(more, len + 3, &d, why, sizeof(why)), 0);
		assert_string_equal(d.name, "dn-1");
		cl_rec_node_fini(&d);
		free(more);
	}
	free(buf);

	/* the rules, on encode and on decode */
	n.zone = "rack/1";
	assert_int_equal(cl_rec_node_encode(&n, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "NodeInfo.zone \"rack/1\" is not a zone name");
	n.zone = NULL;
	n.name = "a/b";
	assert_int_equal(cl_rec_node_encode(&n, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "NodeInfo.name \"a/b\" is not a node name");
	n.name = "dn-1";
	n.address = "127.0.0.1";
	assert_int_equal(cl_rec_node_encode(&n, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "NodeInfo.address \"127.0.0.1\" is not host:port");
	n.address = "h:70000";
	assert_int_equal(cl_rec_node_encode(&n, &buf, &len, NULL, 0), -EINVAL);
	n.address = "[::1]:7000";
	n.incarnation = 0;
	assert_int_equal(cl_rec_node_encode(&n, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "NodeInfo.incarnation is 0");
	n.incarnation = 1;
	{
		/* state 3 written by hand: name "x", address "h:1", incarnation 1, state 3 */
		static const uint8_t v[] = { 0x0a, 1, 'x', 0x12, 3, 'h', ':', '1',  0x19, 1,
			                     0,    0, 0,   0,    0, 0,   0,   0x20, 3 };

		assert_int_equal(cl_rec_node_decode(v, sizeof(v), &d, why, sizeof(why)), -EBADMSG);
		assert_string_equal(why, "NodeInfo.state 3 is not UP or DRAINING");
		assert_null(d.name);
		/* and the same value with state UP decodes */
		{
			uint8_t ok[sizeof(v)];

			memcpy(ok, v, sizeof(v));
			ok[sizeof(v) - 1] = 1;
			assert_int_equal(cl_rec_node_decode(ok, sizeof(ok), &d, why, sizeof(why)),
			                 0);
			assert_string_equal(d.address, "h:1");
			cl_rec_node_fini(&d);
		}
	}
	/* not protobuf at all: a length past the end */
	{
		static const uint8_t v[] = { 0x0a, 50, 'x' };

		assert_int_equal(cl_rec_node_decode(v, sizeof(v), &d, why, sizeof(why)), -EBADMSG);
		assert_string_equal(why, "NodeInfo: not protobuf wire format");
	}
	/* an empty value has no name */
	assert_int_equal(cl_rec_node_decode("", 0, &d, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "NodeInfo.name \"\" is not a node name");
}

static void
test_member_and_bucket(void **state)
{
	char *ids[] = { "s1/0", "s1/1" };
	struct cl_rec_member m = { .name = "dn-1",
		                   .address = "127.0.0.2:7000",
		                   .first_seen_ns = 1,
		                   .last_seen_ns = 2,
		                   .incarnation = 3,
		                   .drive_ids = ids,
		                   .ndrive_ids = 2 },
	                     d;
	struct cl_rec_bucket b = { 12345 }, bd;
	char why[CL_REC_WHY_MAX];
	uint8_t *buf;
	size_t len;

	(void)state;
	assert_int_equal(cl_rec_member_encode(&m, &buf, &len, why, sizeof(why)), 0);
	assert_int_equal(cl_rec_member_decode(buf, len, &d, why, sizeof(why)), 0);
	assert_string_equal(d.name, "dn-1");
	assert_int_equal(d.last_seen_ns, 2);
	assert_int_equal(d.ndrive_ids, 2);
	assert_string_equal(d.drive_ids[1], "s1/1");
	cl_rec_member_fini(&d);
	free(buf);
	ids[1] = "";
	assert_int_equal(cl_rec_member_encode(&m, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "MemberInfo.drive_ids[1] is empty");

	assert_int_equal(cl_rec_bucket_encode(&b, &buf, &len, why, sizeof(why)), 0);
	assert_int_equal(cl_rec_bucket_decode(buf, len, &bd, why, sizeof(why)), 0);
	assert_int_equal(bd.ctime_ns, 12345);
	free(buf);
	assert_int_equal(cl_rec_bucket_decode("\x08", 1, &bd, why, sizeof(why)), -EBADMSG);
}

static void
test_object_roundtrip(void **state)
{
	static struct cl_rec_group g1[20], g2[20];
	struct cl_rec_extent ext[2];
	struct cl_rec_attr attrs[] = { { "content-type", "text/plain" }, { "x-amz-meta-a", "" } };
	struct cl_rec_object o = { .etag = "abc-2",
		                   .crc32c = 0xdeadbeef,
		                   .mtime_ns = 7,
		                   .attrs = attrs,
		                   .nattrs = 2,
		                   .extents = ext,
		                   .nextents = 2 },
	                     d;
	char why[CL_REC_WHY_MAX];
	uint8_t *buf;
	size_t len;

	(void)state;
	make_extent(&ext[0], 0x1111, 1ull << 30, g1);        /* 16 groups exactly */
	make_extent(&ext[1], 0x2222, (64ull << 20) + 1, g2); /* 2 groups, the last 1 byte */
	assert_int_equal(ext[0].ngroups, 16);
	assert_int_equal(ext[1].ngroups, 2);
	g1[3].missing = 1u << 5;
	o.size = ext[0].size + ext[1].size;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), 0);
	/* a 1 GiB object's record stays small: the node table, then ~10 bytes per group */
	assert_true(len < 400);
	assert_int_equal(cl_rec_object_decode(buf, len, &d, why, sizeof(why)), 0);
	free(buf);
	assert_true(d.size == o.size);
	assert_string_equal(d.etag, "abc-2");
	assert_true(d.crc32c == 0xdeadbeef);
	assert_int_equal(d.nattrs, 2);
	assert_string_equal(d.attrs[0].value, "text/plain");
	assert_string_equal(d.attrs[1].value, "");
	assert_int_equal(d.nextents, 2);
	assert_true(d.extents[1].id == 0x2222);
	assert_int_equal(d.extents[0].ngroups, 16);
	assert_int_equal(d.extents[0].groups[3].missing, 1u << 5);
	assert_int_equal(d.extents[0].groups[3].cell[0], 3);
	assert_string_equal(d.extents[1].nodes[5], "dn-f");
	assert_int_equal(d.extents[1].cell_size, 1 << 20);
	cl_rec_object_fini(&d);

	/* an empty object: no extent */
	{
		struct cl_rec_object e = { .etag = "d41d8cd98f00b204e9800998ecf8427e" };

		assert_int_equal(cl_rec_object_encode(&e, &buf, &len, why, sizeof(why)), 0);
		assert_int_equal(cl_rec_object_decode(buf, len, &d, why, sizeof(why)), 0);
		assert_int_equal(d.size, 0);
		assert_int_equal(d.nextents, 0);
		assert_null(d.moved);
		cl_rec_object_fini(&d);
		free(buf);
		/* a Complete's record names its moved key; never another key */
		e.moved = "/zest/moved/.zest-mpu/p/u1/";
		assert_int_equal(cl_rec_object_encode(&e, &buf, &len, why, sizeof(why)), 0);
		assert_int_equal(cl_rec_object_decode(buf, len, &d, why, sizeof(why)), 0);
		assert_string_equal(d.moved, "/zest/moved/.zest-mpu/p/u1/");
		cl_rec_object_fini(&d);
		free(buf);
		e.moved = "/zest/buckets/b";
		assert_int_equal(cl_rec_object_encode(&e, &buf, &len, why, sizeof(why)), -EINVAL);
		assert_string_equal(why,
		                    "ObjectRecord.moved \"/zest/buckets/b\" is not a moved key");
	}

	/* the rules, each with its message */
	o.size++;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ObjectRecord.size 1140850690, its extents hold 1140850689");
	o.size--;
	ext[1].ngroups = 1;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ObjectRecord.extents[1] has 1 groups, its size 67108865 needs 2");
	ext[1].ngroups = 2;
	g2[1].cell[2] = 6;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why,
	                    "ObjectRecord.extents[1].groups[1].cells[2] = 6, past its 6 nodes");
	g2[1].cell[2] = 0;
	g2[0].missing = 1u << 6;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why,
	                    "ObjectRecord.extents[1].groups[0].missing 0x40 has bits past cell 5");
	g2[0].missing = 0;
	ext[0].cell_size = 1000;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(
	        why,
	        "ObjectRecord.extents[0].cell_size 1000 is not a multiple of 4096 in (0, 1 GiB]");
	ext[0].cell_size = 1 << 20;
	ext[0].id = 0;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ObjectRecord.extents[0].id is 0");
	ext[0].id = 1;
	ext[0].k = 31;
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ObjectRecord.extents[0]: scheme 31+2 is not 1 <= k, k+m <= 32");
	ext[0].k = 4;
	{
		char *dupl[] = { "dn-a", "dn-b", "dn-c", "dn-d", "dn-e", "dn-b" };

		ext[1].nodes = dupl;
		assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
		assert_string_equal(why,
		                    "ObjectRecord.extents[1].nodes[5] repeats nodes[1] \"dn-b\"");
		ext[1].nodes = nodes6;
	}
	o.etag = "";
	assert_int_equal(cl_rec_object_encode(&o, &buf, &len, why, sizeof(why)), -EINVAL);
	assert_string_equal(why, "ObjectRecord.etag is empty");
}

/* Values a broken or hostile writer could leave, which the struct cannot even hold. */
static void
test_object_decode_refuses(void **state)
{
	struct cl_rec_object d;
	char why[CL_REC_WHY_MAX];
	/* ObjectRecord{size 1, etag "e", extents[{id 1, size 1, k 1, m 1, cell 4096, spg 1,
	 * nodes ["n"], groups[{cells [0]}]}]}: one cell where k+m is 2 */
	static const uint8_t v[] = {
		0x08, 1,    0x12, 1,    'e',  0x32, 28,   0x09, 1,    0, 0,    0,
		0,    0,    0,    0,    0x10, 1,    0x18, 1,    0x20, 1, 0x28, 0x80,
		0x20, 0x30, 1,    0x3a, 1,    'n',  0x42, 3,    0x0a, 1, 0,
	};
	uint8_t w[sizeof(v) + 1];

	(void)state;
	assert_int_equal(cl_rec_object_decode(v, sizeof(v), &d, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why, "ObjectRecord.extents[0].groups[0] has 1 cells, not k+m = 2");
	assert_null(d.etag);
	/* two cells, the second naming node 1 of a 1-node table */
	memcpy(w, v, sizeof(v));
	w[6] = 29;
	w[sizeof(v) - 4] = 4;
	w[sizeof(v) - 2] = 2;
	w[sizeof(v) - 1] = 0;
	w[sizeof(v)] = 1;
	assert_int_equal(cl_rec_object_decode(w, sizeof(w), &d, why, sizeof(why)), -EBADMSG);
	assert_string_equal(why,
	                    "ObjectRecord.extents[0].groups[0].cells[1] = 1, past its 1 nodes");
	/* and cells [0, 0] (both on the one node) is a valid record */
	w[sizeof(v)] = 0;
	assert_int_equal(cl_rec_object_decode(w, sizeof(w), &d, why, sizeof(why)), 0);
	assert_int_equal(d.extents[0].ngroups, 1);
	cl_rec_object_fini(&d);
}

static void
test_node_names(void **state)
{
	char long_name[CL_REC_MAX_NAME + 2];

	(void)state;
	assert_true(cl_rec_node_name_ok("dn-1"));
	assert_true(cl_rec_node_name_ok("a.b_C-9"));
	assert_false(cl_rec_node_name_ok(""));
	assert_false(cl_rec_node_name_ok(NULL));
	assert_false(cl_rec_node_name_ok(".."));
	assert_false(cl_rec_node_name_ok("a b"));
	assert_false(cl_rec_node_name_ok("a/b"));
	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = 0;
	assert_false(cl_rec_node_name_ok(long_name));
	long_name[CL_REC_MAX_NAME] = 0;
	assert_true(cl_rec_node_name_ok(long_name));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_roundtrip),
		cmocka_unit_test(test_member_and_bucket),
		cmocka_unit_test(test_object_roundtrip),
		cmocka_unit_test(test_object_decode_refuses),
		cmocka_unit_test(test_node_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
