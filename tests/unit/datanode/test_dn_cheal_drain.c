/*
 * The cluster healer's drains, maintenance windows and progress keys (docs/cluster.md,
 * "Drains and maintenance windows"). Against a real etcd and five real datanodes in this
 * process (tests/lib/cheal_test.h), RS(2,1), one object over dn-0, dn-1, dn-2:
 * - /zest/drain/dn-0: the placement view leaves dn-0 out, the live view keeps it; one
 *   pass moves dn-0's cell to the one placeable node free of the group (dn-3), read from
 *   dn-0: the record names dn-3, the new cell is committed and byte-identical, dn-0's
 *   copy retired; the next pass's progress key of dn-0 counts 0 cells there, every
 *   healer's key has its passes, zest_heal_passes_total moves;
 * - /zest/maintenance/dn-3 and dn-3 gone from /zest/nodes/ (heal after 1 ns): passes
 *   rebuild nothing; the window's key deleted and dn-4 live: a rebuild whose Txn comes
 *   after dn-3 registered again is refused (test builds); with dn-3 away the cell is
 *   rebuilt onto dn-4, not onto the draining dn-0;
 * - /zest/drain/dn-0 = decommission: dn-0's next pass calls the retire hook and deletes
 *   its registration, member, drain and progress keys; later passes put nothing back.
 * Skips (77) without /usr/bin/etcd.
 */
#include <time.h>

#include "rpc_server.h"
#include "rpc_stats.h"
#include "dn_rpc.h"

/* gcc 12 misjudges t_env_init's snprintf when several t_envs are set up from one loop */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "dn_test.h"
#include "cmeta_test.h"
#include "cheal_test.h"
#include "cl_healstat.h"
#include "zc.h"

#define NN   5
#define K    2
#define M    1
#define CELL 4096u
#define SIZE (K * CELL - 100)
#define EXT  0xfeed0102ull

static struct tnode n0, n1, n2, n3, n4;
static struct tnode *const nodes[NN] = { &n0, &n1, &n2, &n3, &n4 };
static uint8_t object[SIZE];
static uint8_t cells[K + M][CELL];
static uint64_t lens[K + M];
static int retired;

static void
encode_object(void)
{
	struct ec_codec *codec;
	const uint8_t *data[K];
	uint8_t *par[M];

	CHECK_EQ(ec_codec_create(K, M, &codec), 0);
	memset(cells, 0, sizeof(cells));
	for (unsigned j = 0; j < K; j++) {
		uint64_t off = (uint64_t)j * CELL, l = SIZE - off < CELL ? SIZE - off : CELL;

		memcpy(cells[j], object + off, l);
		lens[j] = l;
		data[j] = cells[j];
	}
	for (unsigned p = 0; p < M; p++) {
		par[p] = cells[K + p];
		lens[K + p] = lens[0];
	}
	CHECK_EQ(ec_codec_encode(codec, CELL, data, par), 0);
	ec_codec_destroy(codec);
}

static void
commit(struct cl_etcd *c, const char *key)
{
	struct cl_meta_group grp = { 0 };
	struct cl_meta_extent x = { .id = EXT,
		                    .size = SIZE,
		                    .k = K,
		                    .m = M,
		                    .cell_size = CELL,
		                    .stripes_per_group = 1,
		                    .groups = &grp,
		                    .ngroups = 1 };
	struct cl_meta_put p = { .bucket = "bkt",
		                 .key = key,
		                 .size = SIZE,
		                 .etag = "\"e1\"",
		                 .mtime_ns = 1,
		                 .extents = &x,
		                 .nextents = 1,
		                 .write_quorum = K,
		                 .timeout_ms = 3000 };
	struct cl_meta_old old;

	for (unsigned i = 0; i < K + M; i++) {
		struct dn_cell_spec sp = { .id = { EXT, 0, i },
			                   .length = lens[i],
			                   .k = K,
			                   .m = M,
			                   .cell_size = CELL,
			                   .stripes_per_group = 1,
			                   .bucket = "bkt",
			                   .key = key };

		grp.node[i] = nodes[i]->name;
		tn_cell_put(nodes[i]->t.s, &sp, cells[i]);
	}
	CHECK_EQ(cl_meta_commit(c, &p, &old), 0);
	cl_meta_old_fini(&old);
}

static const char *
cell_node(struct cl_etcd *c, unsigned cell)
{
	static char name[32];
	struct cl_rec_object o = { 0 };
	const struct cl_rec_extent *e;

	CHECK_EQ(cl_meta_get(c, "bkt", "o", false, &o, NULL, 3000), 0);
	e = &o.extents[0];
	CHECK_EQ(e->groups[0].missing, 0);
	snprintf(name, sizeof(name), "%s", e->nodes[e->groups[0].cell[cell]]);
	cl_rec_object_fini(&o);
	return name;
}

static void
pass_all(struct dn_cheal_stats *st)
{
	memset(st, 0, sizeof(*st));
	for (unsigned i = 0; i < NN; i++)
		CHECK_EQ(dn_cheal_pass(nodes[i]->h, st), 0);
}

static void
check_cell(struct tnode *n, unsigned c)
{
	struct dn_cell_id id = { EXT, 0, c };
	struct dn_cell_info ci;
	uint8_t buf[CELL];
	size_t len;

	CHECK_EQ(dn_cell_stat(n->t.s, id, &ci), 0);
	CHECK(!ci.pending && !ci.retired);
	dn_cell_info_fini(&ci);
	len = tn_cell_get(n->t.s, id, buf, sizeof(buf));
	CHECK_EQ(len, lens[c]);
	CHECK(memcmp(buf, cells[c], len) == 0);
}

static bool
retired_copy(struct tnode *n, unsigned c)
{
	struct dn_cell_info ci;
	bool r;

	CHECK_EQ(dn_cell_stat(n->t.s, (struct dn_cell_id){ EXT, 0, c }, &ci), 0);
	r = ci.retired;
	dn_cell_info_fini(&ci);
	return r;
}

static void
put_key(struct cl_etcd *c, const char *prefix, const char *node, const char *value)
{
	char key[64];

	snprintf(key, sizeof(key), "%s%s", prefix, node);
	CHECK_EQ(cl_etcd_put(c, key, strlen(key), value, strlen(value), 0, NULL, 0), 0);
}

static bool
key_exists(struct cl_etcd *c, const char *prefix, const char *node)
{
	char key[64];
	struct cl_etcd_kvs kvs = { 0 };
	int rc;

	snprintf(key, sizeof(key), "%s%s", prefix, node);
	rc = cl_etcd_get(c, key, strlen(key), false, &kvs, 0);
	cl_etcd_kvs_fini(&kvs);
	CHECK(rc == 0 || rc == ZC_E(ZC_NO_KEY));
	return rc == 0;
}

static void
del_key(struct cl_etcd *c, const char *prefix, const char *node)
{
	char key[64];
	struct cl_etcd_range r = { .key = key };

	r.key_len = (size_t)snprintf(key, sizeof(key), "%s%s", prefix, node);
	CHECK_EQ(cl_etcd_delete(c, &r, NULL, NULL, 0), 0);
}

static struct cl_healstat
stat_of(struct cl_etcd *c, const char *node)
{
	char key[64];
	struct cl_etcd_kvs kvs = { 0 };
	struct cl_healstat s;

	snprintf(key, sizeof(key), CL_HEALSTAT_PREFIX "%s", node);
	CHECK_EQ(cl_etcd_get(c, key, strlen(key), false, &kvs, 0), 0);
	CHECK_EQ(cl_healstat_parse(kvs.kv[0].value, kvs.kv[0].value_len, &s), 0);
	cl_etcd_kvs_fini(&kvs);
	return s;
}

#ifdef ZC_FAULTS
static struct cl_etcd *hook_etcd;
static int back_at_txn; /* register dn-3 again just before the next heal's Txn */

static void
before_txn(void *arg, const char *bucket, const char *key)
{
	(void)arg;
	(void)bucket;
	(void)key;
	if (back_at_txn > 0) {
		back_at_txn--;
		tn_register(hook_etcd, &n3);
	}
}
#endif

static void
retire_hook(void *arg)
{
	(void)arg;
	retired++;
}

int
main(void)
{
	struct dn_cheal_stats st;
	const struct cl_members_view *v;
	struct cl_members *m;
	struct cl_etcd *c;
	struct t_etcd etcd;
	char val[64];

	zc_log_init();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_fill(object, sizeof(object));
	encode_object();
	t_etcd_start(&etcd, 1);
	c = t_etcd_client(&etcd);
#ifdef ZC_FAULTS
	hook_etcd = c;
#endif
	CHECK_EQ(cl_meta_bucket_create(c, "bkt", 1, 0), 0);
	for (unsigned i = 0; i < NN; i++)
		tn_up(nodes[i], i);
	for (unsigned i = 0; i < 4; i++)
		tn_register(c, nodes[i]);
	CHECK_EQ(cl_members_create(c, 100, &m), 0);
	CHECK_EQ(cl_members_refresh(m), 4);
	for (unsigned i = 0; i < NN; i++)
		CHECK_EQ(dn_cheal_create(&(struct dn_cheal_opts){ .store = nodes[i]->t.s,
		                                                  .etcd = c,
		                                                  .members = m,
		                                                  .node = nodes[i]->name,
		                                                  .tls.insecure = true,
		                                                  .heal_after_ns = 1,
		                                                  .timeout_ms = 3000,
		                                                  .lock_ttl_s = 2,
		                                                  .retire = retire_hook,
#ifdef ZC_FAULTS
		                                                  .test_before_txn = before_txn,
#endif
		                                                  .no_thread = true },
		                         &nodes[i]->h),
		         0);
	commit(c, "o");
	pass_all(&st); /* the new stores checked */
	pass_all(&st);
	CHECK_EQ(st.healed + st.moved + st.pending + st.failed, 0);

	/* ---- drain dn-0: out of placement, its cell moved to dn-3 */
	snprintf(val, sizeof(val), "drain %lld", (long long)time(NULL) - 10);
	put_key(c, CL_MEMBERS_DRAIN_PREFIX, "dn-0", val);
	CHECK_EQ(cl_members_refresh(m), 4);
	v = cl_members_get_place(m);
	CHECK_EQ(v->n, 3);
	for (size_t i = 0; i < v->n; i++)
		CHECK(strcmp(v->names[i], "dn-0") != 0);
	cl_members_view_put(v);
	v = cl_members_get(m);
	CHECK_EQ(v->n, 4);
	CHECK(cl_members_draining(v, "dn-0") && !cl_members_placeable(v, "dn-0"));
	CHECK(cl_members_placeable(v, "dn-1") && cl_members_ndraining(v) == 1);
	cl_members_view_put(v);
	pass_all(&st);
	CHECK_EQ(st.moved, 1);
	CHECK_EQ(st.healed, 1);
	CHECK_EQ(st.failed, 0);
	CHECK(strcmp(cell_node(c, 0), "dn-3") == 0);
	check_cell(&n3, 0);
	CHECK(retired_copy(&n0, 0)); /* readable for the read grace, then collected */
	check_cell(&n1, 1);
	check_cell(&n2, 2);
	pass_all(&st);
	CHECK_EQ(st.moved + st.pending + st.failed, 0);
	CHECK_EQ(stat_of(c, "dn-0").own_cells, 0);
	/* counted under the drain key: the count is the drain's progress */
	CHECK_EQ(stat_of(c, "dn-0").own_drain_s, (int64_t)strtoll(val + 6, NULL, 10));
	CHECK_EQ(stat_of(c, "dn-1").own_cells, 1);
	CHECK(stat_of(c, "dn-0").passes >= 4);
	CHECK_EQ(stat_of(c, "dn-3").healed_cells + stat_of(c, "dn-1").healed_cells +
	                 stat_of(c, "dn-2").healed_cells + stat_of(c, "dn-0").healed_cells,
	         1);
	CHECK_EQ(tn_metric(n0.h, "zest_heal_own_cells"), 0);
	CHECK(tn_metric(n1.h, "zest_heal_passes_total") >= 4);

	/* ---- dn-3 away in a maintenance window: nothing rebuilt */
	snprintf(val, sizeof(val), "%lld", (long long)time(NULL) + 300);
	put_key(c, CL_MEMBERS_MAINT_PREFIX, "dn-3", val);
	tn_unregister(c, &n3);
	CHECK_EQ(cl_members_refresh(m), 3);
	for (int round = 0; round < 3; round++) {
		pass_all(&st);
		CHECK_EQ(st.healed + st.pending + st.failed, 0);
		CHECK_EQ(st.degraded, 1);
	}
	CHECK(strcmp(cell_node(c, 0), "dn-3") == 0);
	/* the window over, dn-4 live: rebuilt onto dn-4, never onto the draining dn-0 */
	del_key(c, CL_MEMBERS_MAINT_PREFIX, "dn-3");
	tn_register(c, &n4);
	CHECK_EQ(cl_members_refresh(m), 4);
#ifdef ZC_FAULTS
	/* dn-3 registers again after its cell was rebuilt and before the record's Txn (the
	 * healer's view behind etcd): the Txn's fence on its registration refuses, the
	 * record keeps naming dn-3, the rebuilt copy is dropped */
	back_at_txn = 1;
	for (int round = 0; round < 3 && back_at_txn; round++)
		pass_all(&st);
	CHECK_EQ(back_at_txn, 0);
	CHECK_EQ(st.healed, 0);
	CHECK(strcmp(cell_node(c, 0), "dn-3") == 0);
	tn_unregister(c, &n3);
	CHECK_EQ(cl_members_refresh(m), 4);
#endif
	pass_all(&st); /* dn-4's store checked */
	pass_all(&st);
	CHECK(strcmp(cell_node(c, 0), "dn-4") == 0);
	check_cell(&n4, 0);
	{
		uint64_t healed = 0;

		for (unsigned i = 0; i < NN; i++)
			healed += tn_metric(nodes[i]->h, "zest_heal_cells_total");
		CHECK_EQ(healed, 2); /* the move, then the rebuild */
	}

	/* ---- decommission dn-0: it holds nothing named, so it leaves */
	snprintf(val, sizeof(val), "decommission %lld", (long long)time(NULL) - 10);
	put_key(c, CL_MEMBERS_DRAIN_PREFIX, "dn-0", val);
	put_key(c, "/zest/members/", "dn-0", "x");
	CHECK_EQ(cl_members_refresh(m), 4);
	CHECK_EQ(retired, 0);
	CHECK_EQ(dn_cheal_pass(n0.h, &st), 0);
	CHECK_EQ(retired, 1);
	CHECK(!key_exists(c, CL_MEMBERS_NODES_PREFIX, "dn-0"));
	CHECK(!key_exists(c, "/zest/members/", "dn-0"));
	CHECK(!key_exists(c, CL_MEMBERS_DRAIN_PREFIX, "dn-0"));
	CHECK(!key_exists(c, CL_HEALSTAT_PREFIX, "dn-0"));
	CHECK(key_exists(c, CL_HEALSTAT_PREFIX, "dn-1"));
	CHECK_EQ(cl_members_refresh(m), 3);
	pass_all(&st);
	CHECK_EQ(retired, 1);
	CHECK(!key_exists(c, CL_HEALSTAT_PREFIX, "dn-0"));

	for (unsigned i = 0; i < NN; i++)
		tn_down(nodes[i]);
	cl_members_destroy(m);
	cl_etcd_destroy(c);
	t_etcd_stop(&etcd);
	CHECK_EQ(zc_ref_live(), 0);
	CHECK_EQ(rpc_live_buffers(), 0);
	printf("ok\n");
	return 0;
}
