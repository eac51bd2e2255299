/*
 * The cluster healer keeps the placement invariant (docs/cluster.md, "Placement"): with
 * k + m live nodes every block group's cells are on k + m distinct nodes. Against a real
 * etcd and four real datanodes in this process (tests/lib/cheal_test.h), RS(2,1):
 * - an object written while two nodes were live has each of its two groups doubled (two
 *   cells on one node): its commit writes the to-do key; with two live nodes the healers
 *   count the doubled groups (pending, degraded, zest_cluster_doubled_groups) from that
 *   key alone and move nothing, take no lock, fail nothing;
 * - a third node live: the object's healer moves each group's extra cell onto it, read
 *   from the node that holds it; the record names it there, the old copy is gone from
 *   the doubled node (retired: readable for the read grace only; its other cell stays),
 *   the new one is committed and byte-identical,
 *   the to-do key went in the heal's Txn, the counters say two moves; then no pass reads
 *   anything;
 * - a cell marked missing on a node that holds another cell of its group is rebuilt onto
 *   a node free of the group, not back onto the doubled node.
 * Skips (77) without /usr/bin/etcd.
 */
#include "rpc_server.h"
#include "rpc_stats.h"
#include "dn_rpc.h"

/* gcc 12 misjudges t_env_init's snprintf when several t_envs are set up from one loop */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "dn_test.h"
#include "cmeta_test.h"
#include "cheal_test.h"
#include "zc.h"

#define NN   4
#define K    2
#define M    1
#define CELL 4096u
#define NG   2
#define SIZE (NG * K * CELL - 100) /* one stripe a group, the last one short */
#define EXT  0xfeed0002ull
#define EXT2 0xfeed0003ull

static struct tnode n0, n1, n2, n3;
static struct tnode *const nodes[NN] = { &n0, &n1, &n2, &n3 };
static uint8_t object[SIZE];
static uint8_t cells[NG][K + M][CELL];
static uint64_t lens[NG][K + M];

static void
encode_object(void)
{
	struct ec_codec *codec;

	CHECK_EQ(ec_codec_create(K, M, &codec), 0);
	memset(cells, 0, sizeof(cells));
	for (unsigned g = 0; g < NG; g++) {
		const uint8_t *data[K];
		uint8_t *par[M];

		for (unsigned j = 0; j < K; j++) {
			uint64_t off = (uint64_t)g * K * CELL + (uint64_t)j * CELL;
			uint64_t l = off >= SIZE ? 0 : (SIZE - off < CELL ? SIZE - off : CELL);

			memcpy(cells[g][j], object + off, l);
			lens[g][j] = l;
			data[j] = cells[g][j];
		}
		for (unsigned p = 0; p < M; p++) {
			par[p] = cells[g][K + p];
			lens[g][K + p] = lens[g][0]; /* short parity: as long as data cell 0 */
		}
		CHECK_EQ(ec_codec_encode(codec, CELL, data, par), 0);
	}
	ec_codec_destroy(codec);
}

static void
put_cell(struct tnode *n, uint64_t ext, const char *key, unsigned g, unsigned c)
{
	struct dn_cell_spec sp = { .id = { ext, g, c },
		                   .length = lens[g][c],
		                   .k = K,
		                   .m = M,
		                   .cell_size = CELL,
		                   .stripes_per_group = 1,
		                   .bucket = "bkt",
		                   .key = key };

	tn_cell_put(n->t.s, &sp, cells[g][c]);
}

/* Commit bkt/key: extent ext of ng groups (size bytes), group g's cell c on
 * nodes[at[g][c]], the cells `missing` of group 0 not written. */
static void
commit(struct cl_etcd *c, const char *key, uint64_t ext, uint64_t size, unsigned ng,
       const unsigned at[NG][K + M], uint32_t missing)
{
	struct cl_meta_group grp[NG] = { 0 };
	struct cl_meta_extent x = { .id = ext,
		                    .size = size,
		                    .k = K,
		                    .m = M,
		                    .cell_size = CELL,
		                    .stripes_per_group = 1,
		                    .groups = grp,
		                    .ngroups = ng };
	struct cl_meta_put p = { .bucket = "bkt",
		                 .key = key,
		                 .size = size,
		                 .etag = "\"e1\"",
		                 .mtime_ns = 1,
		                 .extents = &x,
		                 .nextents = 1,
		                 .write_quorum = K,
		                 .timeout_ms = 3000 };
	struct cl_meta_old old;

	grp[0].missing = missing;
	for (unsigned g = 0; g < ng; g++)
		for (unsigned i = 0; i < K + M; i++) {
			grp[g].node[i] = nodes[at[g][i]]->name;
			if (!(g == 0 && (missing & (1u << i))))
				put_cell(nodes[at[g][i]], ext, key, g, i);
		}
	CHECK_EQ(cl_meta_commit(c, &p, &old), 0);
	cl_meta_old_fini(&old);
}

/* Node n has cell (ext, g, c), committed, with the bytes of cells[g][c]. */
static void
check_cell(struct tnode *n, uint64_t ext, unsigned g, unsigned c)
{
	struct dn_cell_id id = { ext, g, c };
	struct dn_cell_info ci;
	uint8_t buf[CELL];
	size_t len;

	CHECK_EQ(dn_cell_stat(n->t.s, id, &ci), 0);
	CHECK(!ci.pending);
	dn_cell_info_fini(&ci);
	len = tn_cell_get(n->t.s, id, buf, sizeof(buf));
	CHECK_EQ(len, lens[g][c]);
	CHECK(memcmp(buf, cells[g][c], len) == 0);
}

/* The node holds the cell live: a retired copy (no record names it; readable for the
 * read grace, then collected) does not count. */
static bool
has_cell(struct tnode *n, uint64_t ext, unsigned g, unsigned c)
{
	struct dn_cell_info ci;
	int rc = dn_cell_stat(n->t.s, (struct dn_cell_id){ ext, g, c }, &ci);
	bool live = rc == 0 && !ci.retired;

	if (rc == 0)
		dn_cell_info_fini(&ci);
	CHECK(rc == 0 || rc == ZC_E(ZC_NO_KEY));
	return live;
}

static uint64_t
metric_sum(const char *name)
{
	uint64_t t = 0;

	for (unsigned i = 0; i < NN; i++)
		t += tn_metric(nodes[i]->h, name);
	return t;
}

int
main(void)
{
	/* written over dn-0 and dn-1 alone: cell 2 of each group shares a node with cell 0 */
	static const unsigned two[NG][K + M] = { { 0, 1, 0 }, { 1, 0, 1 } };
	/* written over three nodes but with dn-1's cell 2 lost: dn-1 holds cell 0 too */
	static const unsigned lost[NG][K + M] = { { 1, 0, 1 } };
	struct dn_cheal_stats st;
	struct cl_rec_object o = { 0 };
	struct cl_members *m;
	struct cl_etcd *c;
	struct t_etcd etcd;
	char v[128];

	zc_log_init();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_fill(object, sizeof(object));
	encode_object();
	t_etcd_start(&etcd, 1);
	c = t_etcd_client(&etcd);
	CHECK_EQ(cl_meta_bucket_create(c, "bkt", 1, 0), 0);
	for (unsigned i = 0; i < NN; i++)
		tn_up(nodes[i], i);
	tn_register(c, nodes[0]);
	tn_register(c, nodes[1]);
	CHECK_EQ(cl_members_create(c, 100, &m), 0);
	CHECK_EQ(cl_members_refresh(m), 2);
	for (unsigned i = 0; i < NN; i++)
		CHECK_EQ(dn_cheal_create(&(struct dn_cheal_opts){ .store = nodes[i]->t.s,
		                                                  .etcd = c,
		                                                  .members = m,
		                                                  .node = nodes[i]->name,
		                                                  .tls.insecure = true,
		                                                  .heal_after_ns = 600000000000ull,
		                                                  .timeout_ms = 3000,
		                                                  .lock_ttl_s = 2,
		                                                  .no_thread = true },
		                         &nodes[i]->h),
		         0);

	/* the commit of a doubled object names it to the healers */
	commit(c, "dbl", EXT, SIZE, NG, two, 0);
	CHECK_EQ(tn_todo_value(c, "bkt/dbl", v, sizeof(v)), 16);
	CHECK(strcmp(v, "00000000feed0002") == 0);

	/* two live nodes: nothing to move to; counted, and left as it is (the first passes
	 * check the new stores against every record, the next read the to-do key only) */
	for (int round = 0; round < 2; round++) {
		tn_pass_all(nodes, NN, &st);
		CHECK_EQ(st.doubled, NG);
		CHECK_EQ(st.pending, NG);
		CHECK_EQ(st.degraded, 1);
		CHECK_EQ(st.healed + st.moved + st.failed, 0);
		CHECK_EQ(st.scans, round ? 0 : NN);
		if (round)
			CHECK_EQ(st.records, 1); /* the object's healer, from its to-do key */
	}
	CHECK_EQ(metric_sum("zest_cluster_doubled_groups"), NG);
	CHECK_EQ(metric_sum("zest_heal_pending_cells"), NG);
	CHECK_EQ(cl_meta_get(c, "bkt", "dbl", false, &o, NULL, 3000), 0);
	for (unsigned g = 0; g < NG; g++)
		CHECK(strcmp(tn_cell_node(&o, g, 0), tn_cell_node(&o, g, 2)) == 0);
	cl_rec_object_fini(&o);
	CHECK_EQ(tn_todo_value(c, "bkt/dbl", v, sizeof(v)), 16);

	/* dn-2 live: each group's extra cell moves onto it, read from the doubled node */
	tn_register(c, nodes[2]);
	CHECK_EQ(cl_members_refresh(m), 3);
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.moved, NG);
	CHECK_EQ(st.healed, NG);
	CHECK_EQ(st.pending + st.doubled + st.failed + st.scans, 0);
	CHECK_EQ(cl_meta_get(c, "bkt", "dbl", false, &o, NULL, 3000), 0);
	for (unsigned g = 0; g < NG; g++) {
		CHECK_EQ(o.extents[0].groups[g].missing, 0);
		CHECK(strcmp(tn_cell_node(&o, g, 0), nodes[two[g][0]]->name) == 0);
		CHECK(strcmp(tn_cell_node(&o, g, 1), nodes[two[g][1]]->name) == 0);
		CHECK(strcmp(tn_cell_node(&o, g, 2), "dn-2") == 0);
		check_cell(&n2, EXT, g, 2);
		CHECK(!has_cell(nodes[two[g][2]], EXT, g, 2)); /* the old copy */
		check_cell(nodes[two[g][0]], EXT, g, 0);       /* its neighbour stays */
		check_cell(nodes[two[g][1]], EXT, g, 1);
	}
	cl_rec_object_fini(&o);
	CHECK_EQ(tn_todo_value(c, "bkt/dbl", v, sizeof(v)), ZC_E(ZC_NO_KEY));
	CHECK_EQ(metric_sum("zest_heal_moved_cells_total"), NG);
	CHECK_EQ(metric_sum("zest_heal_cells_total"), NG);
	CHECK_EQ(metric_sum("zest_cluster_doubled_groups"), 0);
	for (int round = 0; round < 2; round++) {
		tn_pass_all(nodes, NN, &st);
		CHECK_EQ(st.records + st.todos + st.scans + st.healed + st.pending + st.degraded,
		         0);
	}

	/* a cell marked missing whose node holds another cell of the group: rebuilt onto
	 * the node free of the group (dn-2), not back onto dn-1 */
	commit(c, "lost", EXT2, (uint64_t)K * CELL, 1, lost, 1u << 2);
	CHECK_EQ(tn_todo_value(c, "bkt/lost", v, sizeof(v)), 16);
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed, 1);
	CHECK_EQ(st.moved, 0);
	CHECK_EQ(st.pending + st.doubled + st.failed, 0);
	CHECK_EQ(cl_meta_get(c, "bkt", "lost", false, &o, NULL, 3000), 0);
	CHECK_EQ(o.extents[0].groups[0].missing, 0);
	CHECK(strcmp(tn_cell_node(&o, 0, 2), "dn-2") == 0);
	cl_rec_object_fini(&o);
	check_cell(&n2, EXT2, 0, 2);
	CHECK(!has_cell(&n1, EXT2, 0, 2));
	CHECK_EQ(tn_todo_value(c, "bkt/lost", v, sizeof(v)), ZC_E(ZC_NO_KEY));

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
