/*
 * The cluster healer (dn_cheal) against a real etcd and four real datanodes in this
 * process (a cell store over temp folders, the gRPC binding, a loopback rpc server each,
 * plaintext), the membership view read from etcd. An RS(2,1) object of two groups (the
 * second with a short last stripe) is written as cells into three of the stores and
 * committed with cl_meta_commit. Then:
 * - a node leaves the view: nothing moves before --heal-after; after it the object's
 *   healer rebuilds its cells (ReadCell + decode) onto the fourth node, the record names
 *   them there with no missing bit, the new cells are committed and byte-identical;
 * - with every node live and nothing marked, a pass reads no record (only a new store's
 *   first pass reads them all, its check against the records); with a node gone past
 *   --heal-after, one pass over the records per healer, then none again;
 * - a node loses a cell from its store (a wiped drive) and is made to check its store
 *   again (its /zest/cellcheck/ key deleted): its pass marks the cell missing with the
 *   record's to-do key; while another healer holds the object's lock nothing is rebuilt;
 *   then the cell is rebuilt back onto that node from the to-do key, which goes;
 * - a commit with a cell missing writes the to-do key (one outliving its reason goes), a
 *   marking by dn_cheal_mark_missing (the scrubber's call) is fenced and checks the node,
 *   a key whose extent a compose moved follows it to the new record, a cell the scrubber
 *   hands over (dn_cell_lost) is marked by its node; all are healed from the to-do keys
 *   alone (no pass over the records);
 * - an overwrite racing a heal (a test hook between the rebuild and its Txn): the heal's
 *   fenced Txn fails, the newer record stays and the rebuilt cell is deleted again;
 * - etcd down: the pass fails fast and changes nothing.
 * Skips (77) without /usr/bin/etcd.
 */
#include "rpc_server.h"
#include "rpc_stats.h"
#include "dn_rpc.h"

/* gcc 12 misjudges t_env_init's snprintf when several t_envs are set up from one loop
 * (a "truncation" into e->dirs, a "null destination" under ASan). */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#include "dn_test.h" /* after rpc.h: with its client helpers */
#include "cmeta_test.h"
#include "cheal_test.h"
#include "zc.h"

#define NN    4
#define K     2
#define M     1
#define CELL  4096u
#define SPG   2u
#define GROUP (K * CELL * SPG)
#define SIZE  (GROUP + CELL * K + 100) /* group 1: two stripes, the last of 100 bytes */
#define NG    2
#define EXT   0xfeed0001ull

static struct cl_etcd *etcd_c; /* the test's client, for the race hook */
static bool race_on;
static struct tnode n0, n1, n2, n3;
static struct tnode *const nodes[NN] = { &n0, &n1, &n2, &n3 };
static uint8_t object[SIZE];
static uint8_t cells[NG][K + M][SPG * CELL]; /* the cells as the coordinator would store them */
static uint64_t lens[NG][K + M];
static const char *cell_key = "obj"; /* the object a healed cell's entry names */

/* The cells of the object: per group and stripe, data zero-padded and parity encoded. */
static void
encode_object(void)
{
	struct ec_codec *codec;

	CHECK_EQ(ec_codec_create(K, M, &codec), 0);
	memset(cells, 0, sizeof(cells));
	for (unsigned g = 0; g < NG; g++) {
		uint64_t gstart = (uint64_t)g * GROUP;
		uint64_t glen = SIZE - gstart < GROUP ? SIZE - gstart : GROUP;
		unsigned ns = (unsigned)((glen + K * CELL - 1) / (K * CELL));

		for (unsigned s = 0; s < ns; s++) {
			const uint8_t *data[K];
			uint8_t *par[M];

			for (unsigned j = 0; j < K; j++) {
				uint64_t off = gstart + (uint64_t)s * K * CELL + (uint64_t)j * CELL;
				uint64_t l =
				        off >= SIZE ? 0 : (SIZE - off < CELL ? SIZE - off : CELL);

				memcpy(cells[g][j] + s * CELL, object + off, l);
				if (s == ns - 1)
					lens[g][j] = (uint64_t)s * CELL + l;
				data[j] = cells[g][j] + s * CELL;
			}
			for (unsigned p = 0; p < M; p++)
				par[p] = cells[g][K + p] + s * CELL;
			CHECK_EQ(ec_codec_encode(codec, CELL, data, par), 0);
		}
		for (unsigned p = 0; p < M; p++)
			lens[g][K + p] = lens[g][0]; /* short parity: as long as data cell 0 */
	}
	ec_codec_destroy(codec);
}

static void
write_cell(struct dn_store *s, unsigned g, unsigned c)
{
	struct dn_cell_spec sp = { .id = { EXT, g, c },
		                   .length = lens[g][c],
		                   .k = K,
		                   .m = M,
		                   .cell_size = CELL,
		                   .stripes_per_group = SPG,
		                   .bucket = "bkt",
		                   .key = "obj" };

	tn_cell_put(s, &sp, cells[g][c]);
}

/* Group g's cell c is on nodes[(g + c) % 3]: node 3 holds nothing at first. */
static void
put_object(struct cl_etcd *c)
{
	struct cl_meta_group grp[NG] = { 0 };
	struct cl_meta_extent x = { .id = EXT,
		                    .size = SIZE,
		                    .k = K,
		                    .m = M,
		                    .cell_size = CELL,
		                    .stripes_per_group = SPG,
		                    .groups = grp,
		                    .ngroups = NG };
	struct cl_meta_put p = { .bucket = "bkt",
		                 .key = "obj",
		                 .size = SIZE,
		                 .etag = "\"e1\"",
		                 .mtime_ns = 1,
		                 .extents = &x,
		                 .nextents = 1,
		                 .timeout_ms = 3000 };
	struct cl_meta_old old;

	for (unsigned g = 0; g < NG; g++)
		for (unsigned i = 0; i < K + M; i++) {
			grp[g].node[i] = nodes[(g + i) % 3]->name;
			write_cell(nodes[(g + i) % 3]->t.s, g, i);
		}
	CHECK_EQ(cl_meta_commit(c, &p, &old), 0);
	cl_meta_old_fini(&old);
}

/* Node n has cell (g, c), committed and byte-identical. */
static void
check_cell(struct tnode *n, unsigned g, unsigned c)
{
	struct dn_cell_id id = { EXT, g, c };
	uint8_t buf[SPG * CELL];
	struct dn_cell_info ci;
	size_t len;

	CHECK_EQ(dn_cell_stat(n->t.s, id, &ci), 0);
	CHECK(!ci.pending);
	CHECK_EQ(ci.length, lens[g][c]);
	CHECK(strcmp(ci.bucket, "bkt") == 0 && strcmp(ci.key, cell_key) == 0);
	dn_cell_info_fini(&ci);
	len = tn_cell_get(n->t.s, id, buf, sizeof(buf));
	CHECK_EQ(len, lens[g][c]);
	CHECK(memcmp(buf, cells[g][c], len) == 0);
}

static void
get_record(struct cl_etcd *c, struct cl_rec_object *o)
{
	CHECK_EQ(cl_meta_get(c, "bkt", "obj", false, o, NULL, 3000), 0);
	CHECK_EQ(o->nextents, 1);
	CHECK_EQ(o->extents[0].id, EXT);
	CHECK_EQ(o->extents[0].ngroups, NG);
}

/* Test hook: an overwrite of the object lands between the heal's rebuild and its Txn. */
static void
race(void *arg, const char *bucket, const char *key)
{
	struct cl_meta_group grp[NG] = { 0 };
	struct cl_meta_extent x = { .id = EXT + 1,
		                    .size = SIZE,
		                    .k = K,
		                    .m = M,
		                    .cell_size = CELL,
		                    .stripes_per_group = SPG,
		                    .groups = grp,
		                    .ngroups = NG };
	struct cl_meta_put p = { .bucket = bucket,
		                 .key = key,
		                 .size = SIZE,
		                 .etag = "\"e2\"",
		                 .mtime_ns = 2,
		                 .extents = &x,
		                 .nextents = 1,
		                 .timeout_ms = 3000 };
	struct cl_meta_old old;

	(void)arg;
	if (!race_on)
		return;
	race_on = false;
	for (unsigned g = 0; g < NG; g++)
		for (unsigned i = 0; i < K + M; i++)
			grp[g].node[i] = nodes[i]->name;
	CHECK_EQ(cl_meta_commit(etcd_c, &p, &old), 0);
	cl_meta_old_fini(&old);
}

/* Commit the record again as it is, with group g's cells `missing` marked missing. */
static void
commit_missing(struct cl_etcd *c, unsigned g, uint32_t missing)
{
	struct cl_rec_object o = { 0 };
	struct cl_meta_group grp[NG] = { 0 };
	struct cl_meta_extent x = { .id = EXT,
		                    .size = SIZE,
		                    .k = K,
		                    .m = M,
		                    .cell_size = CELL,
		                    .stripes_per_group = SPG,
		                    .groups = grp,
		                    .ngroups = NG };
	struct cl_meta_put p = { .bucket = "bkt",
		                 .key = "obj",
		                 .size = SIZE,
		                 .etag = "\"e1\"",
		                 .mtime_ns = 1,
		                 .extents = &x,
		                 .nextents = 1,
		                 .write_quorum = K,
		                 .timeout_ms = 3000 };
	struct cl_meta_old old;

	get_record(c, &o);
	for (unsigned i = 0; i < NG; i++)
		for (unsigned j = 0; j < K + M; j++)
			grp[i].node[j] = tn_cell_node(&o, i, j);
	grp[g].missing = missing;
	/* A test's shortcut: the record committed again with its own extent. A commit never
	 * names an extent an earlier commit marked (NF-5's fence), so the mark goes first. */
	{
		char fk[CL_META_EXTENT_KEY_CAP];
		struct cl_etcd_range r = { .key = fk };

		r.key_len = (size_t)cl_meta_fence_key(EXT, fk, sizeof(fk));
		CHECK_EQ(cl_etcd_delete(c, &r, NULL, NULL, 0), 0);
	}
	CHECK_EQ(cl_meta_commit(c, &p, &old), 0);
	cl_meta_old_fini(&old);
	cl_rec_object_fini(&o);
}

static struct tnode *
node_named(const char *name)
{
	for (unsigned i = 0; i < NN; i++)
		if (strcmp(nodes[i]->name, name) == 0)
			return nodes[i];
	CHECK(!"no such node");
	return NULL;
}

static void
uncheck(struct cl_etcd *c, const struct tnode *n)
{
	char key[64];
	struct cl_etcd_range r = { .key = key };

	snprintf(key, sizeof(key), DN_CHEAL_CHECKED "%s", n->name);
	r.key_len = strlen(key);
	CHECK_EQ(cl_etcd_delete(c, &r, NULL, NULL, 0), 0);
}

static void
observe_all(struct cl_members *m)
{
	CHECK(cl_members_refresh(m) >= 0);
	for (unsigned i = 0; i < NN; i++)
		dn_cheal_observe(nodes[i]->h);
}

int
main(void)
{
	struct dn_cheal_stats st;
	struct cl_rec_object o = { 0 };
	struct cl_members *m;
	struct cl_etcd *c;
	struct t_etcd etcd;
	uint64_t t0;

#ifndef ZC_FAULTS
	/* the overwrite racing a heal needs the healer's hook (dn_cheal.h): test builds */
	(void)race;
	printf("test_dn_cheal: skipped: built without -Dtest_faults\n");
	return 77;
#endif

	zc_log_init();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_fill(object, sizeof(object));
	encode_object();
	t_etcd_start(&etcd, 1);
	c = t_etcd_client(&etcd);
	etcd_c = c;
	CHECK_EQ(cl_meta_bucket_create(c, "bkt", 1, 0), 0);
	for (unsigned i = 0; i < NN; i++) {
		tn_up(nodes[i], i);
		tn_register(c, nodes[i]);
	}
	CHECK_EQ(cl_members_create(c, 100, &m), 0);
	CHECK_EQ(cl_members_refresh(m), NN);
	for (unsigned i = 0; i < NN; i++)
		CHECK_EQ(dn_cheal_create(
		                 &(struct dn_cheal_opts){
		                         .store = nodes[i]->t.s,
		                         .etcd = c,
		                         .members = m,
		                         .node = nodes[i]->name,
		                         .tls.insecure = true,
		                         .heal_after_ns = 1500000000ull,
		                         .timeout_ms = 3000,
		                         .lock_ttl_s = 2,
		                         .no_thread = true,
#ifdef ZC_FAULTS
		                         .test_before_txn = race,
#endif
		                 },
		                 &nodes[i]->h),
		         0);
	put_object(c);

	/* all well: nothing to do. The new stores' first passes check them against every
	 * record; after that no pass reads a record. */
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.records, NN);
	CHECK_EQ(st.scans, NN);
	CHECK_EQ(st.pending + st.marked + st.healed + st.degraded + st.failed, 0);
	for (int i = 0; i < 3; i++) {
		tn_pass_all(nodes, NN, &st);
		CHECK_EQ(st.records + st.scans + st.todos, 0);
	}
	for (unsigned i = 0; i < NN; i++)
		CHECK_EQ(tn_metric(nodes[i]->h, "zest_heal_records_read_total"), 1);

	/* dn-2 leaves the view: nothing moves before heal_after, and nothing is read */
	tn_unregister(c, nodes[2]);
	observe_all(m);
	t0 = t_mono_ms();
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed, 0);
	CHECK_EQ(st.pending, 0);
	CHECK_EQ(st.records, 0);
	get_record(c, &o);
	CHECK(strcmp(tn_cell_node(&o, 0, 2), "dn-2") == 0);
	cl_rec_object_fini(&o);
	while (t_mono_ms() - t0 < 1700)
		usleep(50 * 1000);
	observe_all(m);
	/* its cells (group 0 cell 2, group 1 cell 1) go to dn-3, the one node outside the
	 * groups */
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed, 2);
	CHECK_EQ(st.pending, 0);
	get_record(c, &o);
	CHECK(strcmp(tn_cell_node(&o, 0, 2), "dn-3") == 0);
	CHECK(strcmp(tn_cell_node(&o, 1, 1), "dn-3") == 0);
	CHECK_EQ(o.extents[0].groups[0].missing | o.extents[0].groups[1].missing, 0);
	cl_rec_object_fini(&o);
	CHECK_EQ(st.scans, NN - 1); /* every healer read the records once */
	check_cell(nodes[3], 0, 2);
	check_cell(nodes[3], 1, 1);
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed + st.pending + st.degraded + st.failed, 0);
	/* dn-2 stays away: those passes left nothing to heal, so no more are run */
	CHECK_EQ(st.records + st.scans, 0);
	{
		uint64_t total = 0;

		for (unsigned i = 0; i < NN; i++) {
			total += tn_metric(nodes[i]->h, "zest_heal_cells_total");
			CHECK_EQ(tn_metric(nodes[i]->h, "zest_heal_pending_cells"), 0);
			CHECK_EQ(tn_metric(nodes[i]->h, "zest_cluster_degraded_objects"), 0);
		}
		CHECK_EQ(total, 2);
	}

	/* dn-1 loses group 0's cell 1 (a wiped drive) and checks its store again: its own
	 * pass marks it missing and writes the record's to-do key */
	CHECK_EQ(dn_cell_delete(nodes[1]->t.s, (struct dn_cell_id){ EXT, 0, 1 }), 1);
	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_cheal_pass(nodes[1]->h, &st), 0);
	CHECK_EQ(st.marked + st.scans, 0); /* not without a reason to look */
	uncheck(c, nodes[1]);
	CHECK_EQ(cl_etcd_put(c, DN_CHEAL_LOCKS "bkt/obj", strlen(DN_CHEAL_LOCKS "bkt/obj"), "other",
	                     5, 0, NULL, 0),
	         0);
	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_cheal_pass(nodes[1]->h, &st), 0);
	CHECK_EQ(st.marked, 1);
	CHECK_EQ(st.scans, 1);
	get_record(c, &o);
	CHECK_EQ(o.extents[0].groups[0].missing, 1u << 1);
	cl_rec_object_fini(&o);
	{
		char v[128];

		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), 16);
		CHECK(strcmp(v, "00000000feed0001") == 0);
	}
	/* another healer holds the lock: nothing is rebuilt, the cell stays pending */
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed, 0);
	CHECK_EQ(st.pending, 1);
	CHECK_EQ(st.degraded, 1);
	CHECK_EQ(st.scans, 0);
	CHECK_EQ(st.records, 1); /* the object's healer, from the to-do key */
	{
		struct cl_etcd_range r = { .key = DN_CHEAL_LOCKS "bkt/obj",
			                   .key_len = strlen(DN_CHEAL_LOCKS "bkt/obj") };

		CHECK_EQ(cl_etcd_delete(c, &r, NULL, NULL, 0), 0);
	}
	/* the lock gone: rebuilt back onto dn-1, which is live and lost it; the Txn that
	 * names it deletes the to-do key */
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed, 1);
	CHECK_EQ(st.pending, 0);
	CHECK_EQ(st.scans, 0);
	{
		char v[128];

		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), ZC_E(ZC_NO_KEY));
	}
	get_record(c, &o);
	CHECK(strcmp(tn_cell_node(&o, 0, 1), "dn-1") == 0);
	CHECK_EQ(o.extents[0].groups[0].missing, 0);
	cl_rec_object_fini(&o);
	check_cell(nodes[1], 0, 1);
	{
		struct cl_etcd_kvs kvs = { 0 };

		/* the lock went with the heal */
		CHECK_EQ(cl_etcd_get(c, DN_CHEAL_LOCKS "bkt/obj", strlen(DN_CHEAL_LOCKS "bkt/obj"),
		                     false, &kvs, 0),
		         ZC_E(ZC_NO_KEY));
		cl_etcd_kvs_fini(&kvs);
	}

	/* a commit short of group 1's cell 2 (its node failed during the write) names the
	 * record in a to-do key, and the object's healer rebuilds the cell from it alone */
	commit_missing(c, 1, 1u << 2);
	{
		char v[128];

		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), 16);
		CHECK(strcmp(v, "00000000feed0001") == 0);
	}
	/* overwritten whole before any healer came: the key outlived its reason and goes */
	commit_missing(c, 1, 0);
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed + st.scans + st.failed, 0);
	CHECK(st.todos >= 1); /* until its healer dropped it */
	CHECK_EQ(st.records, 1);
	{
		char v[128];

		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), ZC_E(ZC_NO_KEY));
	}
	CHECK_EQ(dn_cell_delete(nodes[0]->t.s, (struct dn_cell_id){ EXT, 1, 2 }), 1);
	commit_missing(c, 1, 1u << 2);
	{
		char v[128];

		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), 16);
	}
	tn_pass_all(nodes, NN, &st);
	CHECK_EQ(st.healed, 1);
	CHECK_EQ(st.scans, 0);
	CHECK(st.records <= 2); /* the to-do's record, again under the lock */
	check_cell(nodes[0], 1, 2);
	{
		char v[128];

		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), ZC_E(ZC_NO_KEY));
	}

	/* dn_cheal_mark_missing (the scrubber's call): fenced on the revision, only the
	 * named node's cells; then healed from the to-do key */
	{
		char ok[256];
		int64_t rev = 0;
		struct dn_cell_id id = { EXT, 1, 0 };
		struct tnode *holder;

		CHECK(cl_meta_object_key("bkt", "obj", ok, sizeof(ok)) > 0);
		CHECK_EQ(cl_meta_get(c, "bkt", "obj", false, &o, &rev, 3000), 0);
		holder = node_named(tn_cell_node(&o, 1, 0));
		CHECK_EQ(dn_cheal_mark_missing(c, ok, &o, &rev, "nobody", &id, 1, 3000), 0);
		rev--;
		CHECK_EQ(dn_cheal_mark_missing(c, ok, &o, &rev, holder->name, &id, 1, 3000),
		         ZC_E(ZC_CHANGED));
		cl_rec_object_fini(&o);
		CHECK_EQ(cl_meta_get(c, "bkt", "obj", false, &o, &rev, 3000), 0);
		CHECK_EQ(dn_cheal_mark_missing(c, ok, &o, &rev, holder->name, &id, 1, 3000), 1);
		cl_rec_object_fini(&o);
		get_record(c, &o);
		CHECK_EQ(o.extents[0].groups[1].missing, 1u << 0);
		cl_rec_object_fini(&o);
		tn_pass_all(nodes, NN, &st);
		CHECK_EQ(st.healed, 1);
		CHECK_EQ(st.scans, 0);
		get_record(c, &o);
		CHECK_EQ(o.extents[0].groups[1].missing, 0);
		CHECK(strcmp(tn_cell_node(&o, 1, 0), holder->name) == 0);
		cl_rec_object_fini(&o);
		check_cell(holder, 1, 0);
	}
	/* a compose moves a marked extent into another record before any healer came (a
	 * multipart part short of a cell, then Complete): the to-do key follows the extent
	 * through the index to its new record, which is healed; then composed back */
	{
		char ok[256], v[128];
		int64_t rev = 0;
		struct dn_cell_id id = { EXT, 0, 0 };
		struct cl_meta_part part = { "bkt", "obj", NULL }, back = { "bkt", "obj2", NULL };
		struct cl_meta_old old;
		struct tnode *holder;
		uint64_t healed, scans;

		CHECK(cl_meta_object_key("bkt", "obj", ok, sizeof(ok)) > 0);
		CHECK_EQ(cl_meta_get(c, "bkt", "obj", false, &o, &rev, 3000), 0);
		holder = node_named(tn_cell_node(&o, 0, 0));
		CHECK_EQ(dn_cheal_mark_missing(c, ok, &o, &rev, NULL, &id, 1, 3000), 1);
		cl_rec_object_fini(&o);
		CHECK_EQ(cl_meta_compose(c, "bkt", "obj2", &part, 1, "\"e3\"", NULL, 0, NULL, 3,
		                         3000, NULL, &old),
		         0);
		cl_meta_old_fini(&old);
		healed = scans = 0;
		for (int i = 0; i < 4 && !healed; i++) {
			tn_pass_all(nodes, NN, &st);
			healed += st.healed;
			scans += st.scans;
		}
		CHECK_EQ(healed, 1);
		CHECK_EQ(scans, 0);
		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), ZC_E(ZC_NO_KEY));
		CHECK_EQ(cl_meta_get(c, "bkt", "obj2", false, &o, NULL, 3000), 0);
		CHECK_EQ(o.extents[0].groups[0].missing, 0);
		CHECK(strcmp(tn_cell_node(&o, 0, 0), holder->name) == 0);
		cl_rec_object_fini(&o);
		cell_key = "obj2"; /* its record's key, as the healer writes it */
		check_cell(holder, 0, 0);
		cell_key = "obj";
		CHECK_EQ(cl_meta_compose(c, "bkt", "obj", &back, 1, "\"e1\"", NULL, 0, NULL, 1,
		                         3000, NULL, &old),
		         0);
		cl_meta_old_fini(&old);
	}
	/* the scrubber finds a cell rotted: it hands the name over (dn_cell_lost, the hook
	 * the healer set) and drops the cell; the next passes mark it and rebuild it onto
	 * its node, without reading every record */
	{
		struct dn_cell_id id = { EXT, 1, 1 };
		struct tnode *holder;
		uint64_t marked = 0, healed = 0, scans = 0;

		get_record(c, &o);
		holder = node_named(tn_cell_node(&o, 1, 1));
		cl_rec_object_fini(&o);
		dn_cell_lost(holder->t.s, id);
		CHECK_EQ(dn_cell_delete(holder->t.s, id), 1);
		dn_cell_lost(nodes[0]->t.s == holder->t.s ? nodes[1]->t.s : nodes[0]->t.s, id);
		for (int i = 0; i < 3 && !healed; i++) {
			tn_pass_all(nodes, NN, &st);
			marked += st.marked;
			healed += st.healed;
			scans += st.scans;
		}
		CHECK_EQ(marked, 1); /* not by the node that does not hold it */
		CHECK_EQ(healed, 1);
		CHECK_EQ(scans, 0);
		check_cell(holder, 1, 1);
	}
	for (int i = 0; i < 2; i++) {
		tn_pass_all(nodes, NN, &st);
		CHECK_EQ(st.records + st.scans + st.todos + st.healed + st.pending, 0);
	}

	/* an overwrite lands while dn-0's lost cell is rebuilt: the heal is fenced off, the
	 * newer record stays, the rebuilt cell goes again */
	CHECK_EQ(dn_cell_delete(nodes[0]->t.s, (struct dn_cell_id){ EXT, 1, 2 }), 1);
	uncheck(c, nodes[0]);
	race_on = true;
	/* dn-0 marks it and, as the object's healer, rebuilds it in the same pass */
	tn_pass_all(nodes, NN, &st);
	CHECK(!race_on);
	CHECK(st.marked >= 1); /* and then the new record's cells, which no node has */
	CHECK_EQ(st.healed, 0);
	CHECK(st.failed >= 1);
	CHECK_EQ(cl_meta_get(c, "bkt", "obj", false, &o, NULL, 3000), 0);
	CHECK_EQ(o.extents[0].id, EXT + 1);
	cl_rec_object_fini(&o);
	{
		struct dn_cell_info ci;
		char v[128];

		CHECK_EQ(dn_cell_stat(nodes[0]->t.s, (struct dn_cell_id){ EXT, 1, 2 }, &ci),
		         ZC_E(ZC_NO_KEY));
		/* dn-0's heal failed, so its next pass reads the records again and marks the
		 * newer record's cells it lacks: the to-do key now names that extent */
		tn_pass_all(nodes, NN, &st);
		CHECK_EQ(tn_todo_value(c, "bkt/obj", v, sizeof(v)), 16);
		CHECK(strcmp(v, "00000000feed0002") == 0);
	}

	/* etcd down: the pass fails (a hang check at 60 s; it takes about its etcd deadline)
	 * and nothing changes */
	CHECK_EQ(dn_cell_delete(nodes[0]->t.s, (struct dn_cell_id){ EXT, 0, 0 }), 1);
	t_etcd_stop(&etcd);
	t0 = t_mono_ms();
	memset(&st, 0, sizeof(st));
	CHECK(dn_cheal_pass(nodes[0]->h, &st) < 0);
	CHECK(t_mono_ms() - t0 < 60000);
	CHECK_EQ(st.marked + st.healed, 0);

	for (unsigned i = 0; i < NN; i++)
		tn_down(nodes[i]);
	cl_members_destroy(m);
	cl_etcd_destroy(c);
	CHECK_EQ(zc_ref_live(), 0);
	CHECK_EQ(rpc_live_buffers(), 0);
	printf("ok\n");
	return 0;
}
