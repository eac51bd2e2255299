/*
 * The healers' to-do keys (cl_meta.h, "heal to-do keys"): their names and values, and
 * the commit Txn writing one exactly when the record has a cell marked missing or a group
 * with two cells on one node (doubled), against a real etcd (tests/lib/etcd_test.h).
 * Skips (77) without /usr/bin/etcd.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cmeta_test.h"
#include "cl_index.h"
#include "zc.h"

static const char *const nodes3[] = { "dn-1", "dn-2", "dn-3" };

static void
test_names(void)
{
	char buf[64], v[CL_META_HEAL_VALUE_CAP];
	uint64_t ids[CL_META_HEAL_IDS_MAX];
	struct cl_rec_extent x[2] = { 0 };
	struct cl_rec_group g[2] = { 0 };
	struct cl_rec_object o = { .extents = x, .nextents = 2 };
	const char *k = CL_META_OBJECTS "bk/dir/a";

	CHECK_EQ(cl_meta_heal_key(k, strlen(k), buf, sizeof(buf)),
	         (int)strlen(CL_META_HEAL "bk/dir/a"));
	CHECK(strcmp(buf, CL_META_HEAL "bk/dir/a") == 0);
	CHECK_EQ(cl_meta_heal_key("/zest/extents/1", 15, buf, sizeof(buf)), -EINVAL);
	CHECK_EQ(cl_meta_heal_key(k, strlen(k), buf, 10), -ENAMETOOLONG);

	x[0] = (struct cl_rec_extent){ .id = 0x1111, .groups = &g[0], .ngroups = 1 };
	x[1] = (struct cl_rec_extent){ .id = 0xabcdef0123456789ull, .groups = &g[1], .ngroups = 1 };
	CHECK_EQ(cl_meta_heal_value(&o, v), 0);
	g[1].missing = 1u << 3;
	CHECK_EQ(cl_meta_heal_value(&o, v), 16);
	CHECK(strcmp(v, "abcdef0123456789") == 0);
	g[0].missing = 1;
	CHECK_EQ(cl_meta_heal_value(&o, v), 33);
	CHECK(strcmp(v, "0000000000001111,abcdef0123456789") == 0);
	CHECK_EQ(cl_meta_heal_ids(v, strlen(v), ids, CL_META_HEAL_IDS_MAX), 2);
	CHECK_EQ(ids[0], 0x1111);
	CHECK_EQ(ids[1], 0xabcdef0123456789ull);
	CHECK_EQ(cl_meta_heal_ids(v, strlen(v), ids, 1), 1);
	/* malformed ids are skipped, the others kept */
	CHECK_EQ(cl_meta_heal_ids("xyz,0000000000000002,12,0000000000000000", 40, ids, 8), 1);
	CHECK_EQ(ids[0], 2);
	CHECK_EQ(cl_meta_heal_ids("", 0, ids, 8), 0);

	/* a doubled group (two cells on one node) needs a healer as a missing cell does */
	g[0].missing = g[1].missing = 0;
	x[0].k = x[1].k = 2;
	x[0].m = x[1].m = 1;
	g[0].cell[0] = 0, g[0].cell[1] = 1, g[0].cell[2] = 2;
	g[1].cell[0] = 0, g[1].cell[1] = 1, g[1].cell[2] = 2;
	CHECK(!cl_meta_heal_group_doubled(&x[0], &g[0]));
	CHECK_EQ(cl_meta_heal_value(&o, v), 0);
	g[1].cell[2] = 0;
	CHECK(cl_meta_heal_group_doubled(&x[1], &g[1]));
	CHECK_EQ(cl_meta_heal_value(&o, v), 16);
	CHECK(strcmp(v, "abcdef0123456789") == 0);
	/* only the group's k + m cells count */
	g[1].cell[2] = 2;
	g[1].cell[3] = 0;
	CHECK(!cl_meta_heal_group_doubled(&x[1], &g[1]));
	g[0].cell[1] = 0;
	g[0].missing = 1;
	CHECK_EQ(cl_meta_heal_value(&o, v), 16); /* an extent once, whatever its reasons */
	CHECK(strcmp(v, "0000000000001111") == 0);
}

/* The to-do key of bk/<key>: 0 and its value in v, or ZC_E(ZC_NO_KEY). */
static int
todo(struct cl_etcd *c, const char *key, char *v, size_t cap)
{
	char k[256];
	struct cl_etcd_kvs kvs = { 0 };
	int rc;

	snprintf(k, sizeof(k), CL_META_HEAL "bk/%s", key);
	rc = cl_etcd_get(c, k, strlen(k), false, &kvs, 0);
	if (rc == 0) {
		CHECK(kvs.kv[0].value_len < cap);
		memcpy(v, kvs.kv[0].value, kvs.kv[0].value_len);
		v[kvs.kv[0].value_len] = '\0';
	}
	cl_etcd_kvs_fini(&kvs);
	return rc;
}

static void
test_commit(struct cl_etcd *c)
{
	struct t_put t;
	struct cl_meta_old old;
	char v[CL_META_HEAL_VALUE_CAP];

	CHECK_EQ(cl_meta_bucket_create(c, "bk", 1, 0), 0);
	/* every cell durable: no to-do key */
	t_put_init(&t, "bk", "whole", 0x1111, 20000, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	CHECK_EQ(todo(c, "whole", v, sizeof(v)), ZC_E(ZC_NO_KEY));
	/* one cell short (write quorum 2): the record names itself to the healers */
	t_put_init(&t, "bk", "short", 0x2222, 20000, nodes3, 3);
	t.g[1].missing = 1u << 2;
	t.p.write_quorum = 2;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	CHECK_EQ(todo(c, "short", v, sizeof(v)), 0);
	CHECK(strcmp(v, "0000000000002222") == 0);
	/* refused below the quorum: nothing written, no key */
	t_put_init(&t, "bk", "refused", 0x3333, 20000, nodes3, 3);
	t.g[0].missing = 3u;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(todo(c, "refused", v, sizeof(v)), ZC_E(ZC_NO_KEY));
	/* an overwrite with every cell leaves the key to the healer that reads it */
	t_put_init(&t, "bk", "short", 0x4444, 20000, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	CHECK_EQ(todo(c, "short", v, sizeof(v)), 0);
	/* written while two nodes were live: every cell durable, but each group has two of
	 * its cells on one node (doubled), so the record names itself to the healers too */
	t_put_init(&t, "bk", "doubled", 0x5555, 20000, nodes3, 2);
	CHECK(strcmp(t.g[0].node[0], t.g[0].node[2]) == 0);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	CHECK_EQ(todo(c, "doubled", v, sizeof(v)), 0);
	CHECK(strcmp(v, "0000000000005555") == 0);
	/* a record of two extents (a composed upload): only the one with a doubled group */
	{
		struct cl_meta_extent xs[2];
		struct t_put u;

		t_put_init(&t, "bk", "two", 0x6666, 20000, nodes3, 3);
		t_put_init(&u, "bk", "two", 0x7777, 20000, nodes3, 3);
		u.g[1].node[1] = u.g[1].node[0];
		xs[0] = t.x;
		xs[1] = u.x;
		xs[1].groups = u.g;
		t.p.extents = xs;
		t.p.nextents = 2;
		t.p.size = 40000;
		CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
		cl_meta_old_fini(&old);
		CHECK_EQ(todo(c, "two", v, sizeof(v)), 0);
		CHECK(strcmp(v, "0000000000007777") == 0);
	}
}

int
main(void)
{
	struct cl_etcd *c;
	struct t_etcd e;

	zc_log_init();
	test_names();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_etcd_start(&e, 1);
	c = t_etcd_client(&e);
	test_commit(c);
	cl_etcd_destroy(c);
	t_etcd_stop(&e);
	printf("ok\n");
	return 0;
}
