/*
 * The cell collector (dn_cgc) against a real etcd and a real cell store on temp folders:
 * nothing is touched before the grace; after it a pending cell whose record names it is
 * committed, one of a never-committed extent, of another extent of the key, or marked
 * missing is deleted, the cells of multipart parts composed into an object (their entries
 * naming the deleted part keys) are committed and kept, one whose index key is dangling
 * is deleted with that key, a never-committed extent is fenced first (its commit arriving
 * afterwards fails); the scan retires a committed cell of an overwritten object
 * (also a composed one's part) and keeps a named one; a retired cell stays readable and
 * is deleted the read grace after its last read (a read refreshes it); an upload composed in O(1)
 * ops (cl_meta_compose_upload: cells judged through the moved key, an unlisted part's cells
 * deleted, all of them once the object is overwritten or deleted, the moved key going with
 * it); the thread does it by itself; etcd
 * down leaves every cell as it is. Skips (77) without /usr/bin/etcd.
 */
#include <time.h>

#include "cmeta_test.h"
#include "dn_cgc.h"
#include "dn_test.h"
#include "zc.h"

#define NODE "dn-1"

static const char *const nodes3[] = { NODE, "dn-2", "dn-3" };
static uint8_t payload[4096];

struct t_cwait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
};

static void
cell_cb(void *arg, int err)
{
	struct t_cwait *cw = arg;

	pthread_mutex_lock(&cw->lock);
	cw->err = err;
	cw->done = true;
	pthread_cond_signal(&cw->cond);
	pthread_mutex_unlock(&cw->lock);
}

/* A pending cell of 4 KiB for bucket/key. */
static struct dn_cell_id
put_cell_in(struct dn_store *s, const char *bucket, uint64_t extent, uint32_t group, unsigned cell,
            const char *key)
{
	struct dn_cell_spec sp = { .id = { extent, group, cell },
		                   .length = sizeof(payload),
		                   .k = 2,
		                   .m = 1,
		                   .cell_size = 4096,
		                   .stripes_per_group = 1,
		                   .bucket = bucket,
		                   .key = key };
	struct t_cwait cw = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	struct t_slice *sl = malloc(sizeof(*sl) + sizeof(payload));
	struct dn_cell_write *w;
	struct zc_seg seg;

	CHECK(sl);
	zc_ref_init(&sl->ref, t_slice_release);
	memcpy(sl->data, payload, sizeof(payload));
	seg = (struct zc_seg){ sl->data, sizeof(payload), &sl->ref };
	CHECK_EQ(dn_cell_write_open(s, &sp, &w), 0);
	CHECK_EQ(dn_cell_write_data(w, 0, &seg, 1), 0);
	zc_ref_put(&sl->ref);
	dn_cell_write_finish(w, cell_cb, &cw);
	pthread_mutex_lock(&cw.lock);
	while (!cw.done)
		pthread_cond_wait(&cw.cond, &cw.lock);
	pthread_mutex_unlock(&cw.lock);
	CHECK_EQ(cw.err, 0);
	return sp.id;
}

static struct dn_cell_id
put_cell(struct dn_store *s, uint64_t extent, uint32_t group, unsigned cell, const char *key)
{
	return put_cell_in(s, "bk", extent, group, cell, key);
}

/* -1: no entry; 1: pending; 0: committed */
static int
state(struct dn_store *s, struct dn_cell_id id)
{
	struct dn_cell_info ci;
	int rc = dn_cell_stat(s, id, &ci);
	bool p;

	if (rc == ZC_E(ZC_NO_KEY))
		return -1;
	CHECK_EQ(rc, 0);
	p = ci.pending;
	rc = ci.retired ? 2 : p;
	dn_cell_info_fini(&ci);
	return rc;
}

static int
read_cb(void *arg, uint64_t offset, const struct zc_seg *seg)
{
	(void)offset;
	*(uint64_t *)arg += seg->len;
	return 0;
}

/* A read of the whole cell, as a ReadCell does: its bytes. */
static uint64_t
read_all(struct dn_store *s, struct dn_cell_id id)
{
	uint64_t n = 0;

	CHECK_EQ(dn_cell_read(s, id, 0, 0, false, read_cb, &n), 0);
	return n;
}

static uint64_t real_ns(void);

/* Set a cell's touched time back (as if its last touch were long ago). */
static void
age(struct dn_store *s, struct dn_cell_id id, uint64_t ago_ns)
{
	CHECK_EQ(dn_meta_cell_touch(s->meta, id, false, real_ns() - ago_ns), 1);
}

static void
commit_in(struct cl_etcd *c, const char *bucket, const char *key, uint64_t extent,
          uint32_t missing0)
{
	struct t_put t;
	struct cl_meta_old old;

	/* one group: cell i on nodes3[i] */
	t_put_init(&t, bucket, key, extent, 4096, nodes3, 3);
	t.g[0].missing = missing0;
	t.p.write_quorum = 2;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
}

static void
commit(struct cl_etcd *c, const char *key, uint64_t extent, uint32_t missing0)
{
	commit_in(c, "bk", key, extent, missing0);
}

/* A multipart Complete: bk/key from the parts .zest-mpu/<part>... */
static void
compose(struct cl_etcd *c, const char *key, const char *part1, const char *part2)
{
	struct cl_meta_part pp[2] = { { ".zest-mpu", part1, NULL }, { ".zest-mpu", part2, NULL } };
	struct cl_meta_old old;

	CHECK_EQ(cl_meta_compose(c, "bk", key, pp, part2 ? 2 : 1, "\"mpu\"", NULL, 0, NULL, 1, 0,
	                         NULL, &old),
	         0);
	cl_meta_old_fini(&old);
}

/* A Complete through cl_meta_compose_upload: bk/key from .zest-mpu/p/<uid>/<parts>. */
static void
compose_upload(struct cl_etcd *c, const char *key, const char *uid, const char *const *parts,
               size_t n)
{
	char prefix[32], fence[32], keys[4][48];
	struct cl_meta_upload up = { ".zest-mpu", prefix, fence };
	struct cl_meta_part pp[4];
	struct cl_meta_old old;

	snprintf(prefix, sizeof(prefix), "p/%s/", uid);
	snprintf(fence, sizeof(fence), "u/bk/%s", uid);
	for (size_t i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "p/%s/%s", uid, parts[i]);
		pp[i] = (struct cl_meta_part){ ".zest-mpu", keys[i], NULL };
	}
	CHECK_EQ(cl_meta_compose_upload(c, "bk", key, &up, pp, n, "\"mpu\"", NULL, 0, NULL, 1, 0,
	                                NULL, &old),
	         0);
	cl_meta_old_fini(&old);
}

static bool
has_key(struct cl_etcd *c, const char *k)
{
	struct cl_etcd_kvs kvs = { 0 };
	int rc = cl_etcd_get(c, k, strlen(k), false, &kvs, 0);

	cl_etcd_kvs_fini(&kvs);
	CHECK(rc == 0 || rc == ZC_E(ZC_NO_KEY));
	return rc == 0;
}

/* The lease of key k (0: none), or -1 when k is absent. */
static int64_t
key_lease(struct cl_etcd *c, const char *k)
{
	struct cl_etcd_kvs kvs = { 0 };
	int rc = cl_etcd_get(c, k, strlen(k), false, &kvs, 0);
	int64_t lease = rc == 0 ? kvs.kv[0].lease : -1;

	cl_etcd_kvs_fini(&kvs);
	CHECK(rc == 0 || rc == ZC_E(ZC_NO_KEY));
	return lease;
}

static bool
has_ix(struct cl_etcd *c, uint64_t id)
{
	char k[CL_META_EXTENT_KEY_CAP];
	struct cl_etcd_kvs kvs = { 0 };
	int n = cl_meta_extent_key(id, k, sizeof(k)), rc;

	rc = cl_etcd_get(c, k, (size_t)n, false, &kvs, 0);
	cl_etcd_kvs_fini(&kvs);
	CHECK(rc == 0 || rc == ZC_E(ZC_NO_KEY));
	return rc == 0;
}

static uint64_t
real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/*
 * An upload composed in O(1) ops: its parts' index keys keep naming the part records
 * (gone), the moved key names the object. The listed parts' cells are kept (a pending
 * one committed), an unlisted part's deleted; once the object is overwritten (or deleted)
 * the moved key has gone with it and the cells are deleted.
 */
static void
test_upload(struct t_env *env, struct cl_etcd *c, uint64_t grace)
{
	static const char *const two[] = { "00001", "00002" }, *const one[] = { "00001" };
	struct dn_cgc_stats st = { 0 };
	struct dn_cell_id v1, v2, v3, w1;
	struct cl_meta_old old;
	struct dn_cgc *g;

	v1 = put_cell_in(env->s, ".zest-mpu", 0x71, 0, 0, "p/U1/00001"); /* pending, listed */
	v2 = put_cell_in(env->s, ".zest-mpu", 0x72, 0, 0, "p/U1/00002"); /* committed, listed */
	v3 = put_cell_in(env->s, ".zest-mpu", 0x73, 0, 0, "p/U1/00003"); /* not listed */
	w1 = put_cell_in(env->s, ".zest-mpu", 0x74, 0, 0, "p/U2/00001"); /* object deleted */
	commit_in(c, ".zest-mpu", "u/bk/U1", 0x7e, 0);
	commit_in(c, ".zest-mpu", "u/bk/U2", 0x7f, 0);
	commit_in(c, ".zest-mpu", "p/U1/00001", 0x71, 0);
	commit_in(c, ".zest-mpu", "p/U1/00002", 0x72, 0);
	commit_in(c, ".zest-mpu", "p/U1/00003", 0x73, 0);
	commit_in(c, ".zest-mpu", "p/U2/00001", 0x74, 0);
	CHECK_EQ(dn_cell_commit(env->s, v2), 0);
	CHECK_EQ(dn_cell_commit(env->s, w1), 0);
	compose_upload(c, "mu", "U1", two, 2);
	compose_upload(c, "mw", "U2", one, 1);
	CHECK(has_key(c, CL_META_MOVED ".zest-mpu/p/U2/"));
	CHECK_EQ(cl_meta_delete(c, "bk", "mw", 0, &old, 0), 1);
	cl_meta_old_fini(&old);
	CHECK(!has_key(c, CL_META_MOVED ".zest-mpu/p/U2/")); /* went with the record */

	CHECK_EQ(dn_cgc_create(&(struct dn_cgc_opts){ .store = env->s,
	                                              .etcd = c,
	                                              .node = NODE,
	                                              .grace_ns = grace,
	                                              .no_thread = true },
	                       &g),
	         0);
	CHECK_EQ(dn_cgc_pass_pending(g, real_ns() + grace + 1000000000ull, &st), 0);
	CHECK_EQ(st.errors, 0);
	CHECK_EQ(state(env->s, v1), 0);  /* named through the moved key: committed */
	CHECK_EQ(state(env->s, v3), -1); /* the part Complete did not list */
	CHECK(!has_ix(c, 0x73));
	CHECK_EQ(dn_cgc_pass_scan(g, false, &st), 0);
	CHECK_EQ(st.errors, 0);
	CHECK_EQ(state(env->s, v2), 0);
	CHECK_EQ(state(env->s, w1), 2); /* its object deleted: retired */
	CHECK(has_key(c, CL_META_MOVED ".zest-mpu/p/U1/"));
	/* overwritten: the moved key goes in the same Txn, and the scan deletes the cells */
	commit(c, "mu", 0x75, 0);
	CHECK(!has_key(c, CL_META_MOVED ".zest-mpu/p/U1/"));
	CHECK_EQ(dn_cgc_pass_scan(g, false, &st), 0);
	CHECK_EQ(st.errors, 0);
	CHECK_EQ(state(env->s, v1), 2);
	CHECK_EQ(state(env->s, v2), 2);
	/* after the read grace (a clock 3 s ahead) the retired cells go */
	CHECK_EQ(dn_cgc_pass_retired(g, real_ns() + grace + 1000000000ull, &st), 0);
	CHECK_EQ(state(env->s, v1), -1);
	CHECK_EQ(state(env->s, v2), -1);
	CHECK_EQ(state(env->s, w1), -1);
	dn_cgc_destroy(g);
}

int
main(void)
{
	const uint64_t grace = 2000000000ull;
	struct dn_cgc_stats st = { 0 };
	struct dn_cell_id a, b, c2, d, e1, f, u, u2, u3, dg;
	struct cl_etcd *c;
	struct dn_cgc *g;
	struct t_etcd etcd;
	struct t_env env;
	char *mbuf = NULL, xk[CL_META_EXTENT_KEY_CAP];
	size_t mlen = 0;
	FILE *mf;

	zc_log_init();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_fill(payload, sizeof(payload));
	t_env_open(&env, 3, 2, 1, NULL);
	t_etcd_start(&etcd, 1);
	c = t_etcd_client(&etcd);
	CHECK_EQ(cl_meta_bucket_create(c, "bk", 1, 0), 0);
	CHECK_EQ(cl_meta_bucket_create(c, ".zest-mpu", 1, 0), 0);

	a = put_cell(env.s, 0xa1, 0, 0, "a");  /* record names it: commit */
	b = put_cell(env.s, 0xb1, 0, 1, "b");  /* never committed: delete */
	c2 = put_cell(env.s, 0xc1, 0, 0, "c"); /* the key's record is another extent: delete */
	d = put_cell(env.s, 0xd1, 0, 0, "d");  /* named but marked missing: delete */
	e1 = put_cell(env.s, 0xe1, 0, 0, "e"); /* committed, then overwritten: scan deletes */
	f = put_cell(env.s, 0xf1, 0, 0, "f");  /* committed and named: kept */
	/* multipart parts: their entries name the part's key, which Complete deletes */
	u = put_cell_in(env.s, ".zest-mpu", 0x51, 0, 0, "up/00001");  /* pending, composed */
	u2 = put_cell_in(env.s, ".zest-mpu", 0x52, 0, 0, "up/00002"); /* committed, composed */
	u3 = put_cell_in(env.s, ".zest-mpu", 0x53, 0, 0, "uq/00001"); /* composed, overwritten */
	dg = put_cell(env.s, 0x61, 0, 0, "g"); /* its index key names a record without it */
	commit(c, "a", 0xa1, 0);
	commit(c, "c", 0xc2, 0);
	commit(c, "d", 0xd1, 1u << 0);
	commit(c, "e", 0xe1, 0);
	CHECK_EQ(dn_cell_commit(env.s, e1), 0);
	commit(c, "f", 0xf1, 0);
	CHECK_EQ(dn_cell_commit(env.s, f), 0);
	commit_in(c, ".zest-mpu", "up/00001", 0x51, 0);
	commit_in(c, ".zest-mpu", "up/00002", 0x52, 0);
	CHECK_EQ(dn_cell_commit(env.s, u2), 0);
	compose(c, "mp", "up/00001", "up/00002");
	commit_in(c, ".zest-mpu", "uq/00001", 0x53, 0);
	CHECK_EQ(dn_cell_commit(env.s, u3), 0);
	compose(c, "mq", "uq/00001", NULL);
	CHECK_EQ(cl_meta_extent_key(0x61, xk, sizeof(xk)), 30);
	CHECK_EQ(cl_etcd_put(c, xk, 30, CL_META_OBJECTS "bk/f", strlen(CL_META_OBJECTS "bk/f"), 0,
	                     NULL, 0),
	         0);

	CHECK_EQ(dn_cgc_create(&(struct dn_cgc_opts){ .store = env.s,
	                                              .etcd = c,
	                                              .node = NODE,
	                                              .grace_ns = grace,
	                                              .no_thread = true },
	                       &g),
	         0);
	/* before the grace: nothing */
	CHECK_EQ(dn_cgc_pass_pending(g, 0, &st), 0);
	CHECK_EQ(st.committed + st.deleted + st.kept + st.errors, 0);
	CHECK_EQ(dn_cgc_pass_scan(g, false, &st), 0);
	CHECK_EQ(st.committed + st.deleted + st.errors, 0);
	CHECK_EQ(state(env.s, b), 1);
	CHECK_EQ(state(env.s, e1), 0);
	commit(c, "e", 0xe2, 0);  /* an overwrite whose DeleteCells never came */
	commit(c, "mq", 0x54, 0); /* the composed object overwritten: its part's cells go */

	/* after it (a clock 3 s ahead): settled against etcd */
	CHECK_EQ(dn_cgc_pass_pending(g, real_ns() + grace + 1000000000ull, &st), 0);
	CHECK_EQ(st.committed, 2); /* a and the composed part */
	CHECK_EQ(st.deleted, 4);   /* b, c2, d, dg */
	CHECK_EQ(st.errors, 0);
	CHECK_EQ(state(env.s, a), 0);
	CHECK_EQ(state(env.s, b), -1);
	CHECK_EQ(state(env.s, c2), -1);
	CHECK_EQ(state(env.s, d), -1);
	CHECK_EQ(state(env.s, dg), -1);
	CHECK(!has_ix(c, 0x61)); /* the dangling index key went with it */
	CHECK_EQ(state(env.s, u), 0);
	CHECK_EQ(state(env.s, e1), 0); /* committed cells wait for the scan */
	/* A commit Txn of b's extent that reaches etcd only now (sent before its deadline,
	 * held in a partitioned connection) fails on the fence the collector put before it
	 * deleted b: no record names deleted cells. d's record has its extent: no fence of
	 * the collector's (for ever), only its commit's mark (under a lease). */
	{
		char fk[CL_META_EXTENT_KEY_CAP];
		struct cl_meta_old old;
		struct t_put t;

		CHECK_EQ(cl_meta_fence_key(0xb1, fk, sizeof(fk)), 29);
		CHECK_EQ(key_lease(c, fk), 0);
		CHECK_EQ(cl_meta_fence_key(0xd1, fk, sizeof(fk)), 29);
		CHECK(key_lease(c, fk) > 0);
		t_put_init(&t, "bk", "b", 0xb1, 4096, nodes3, 3);
		t.p.write_quorum = 2;
		CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_UNAVAILABLE));
		cl_meta_old_fini(&old);
		CHECK(!has_key(c, CL_META_OBJECTS "bk/b"));
		CHECK(!has_ix(c, 0xb1));
	}

	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_cgc_pass_scan(g, false, &st), 0);
	CHECK_EQ(st.deleted, 0);
	CHECK_EQ(st.retired, 2); /* e1, u3: a GET of the old version may still read them */
	CHECK_EQ(st.kept, 4);    /* a, f, u, u2 */
	CHECK_EQ(state(env.s, e1), 2);
	CHECK_EQ(state(env.s, u3), 2);
	CHECK_EQ(state(env.s, f), 0);
	CHECK_EQ(state(env.s, a), 0);
	CHECK_EQ(state(env.s, u2), 0);
	CHECK_EQ(t_count_files(&env), 6);
	/* a second scan leaves retired cells to the retired pass */
	memset(&st, 0, sizeof(st));
	CHECK_EQ(dn_cgc_pass_scan(g, false, &st), 0);
	CHECK_EQ(st.retired + st.deleted + st.errors, 0);
	/* retired cells are readable; within the read grace they stay */
	CHECK_EQ(read_all(env.s, e1), sizeof(payload));
	CHECK_EQ(dn_cgc_pass_retired(g, 0, &st), 0);
	CHECK_EQ(st.deleted, 0);
	/* both last touched long ago, then e1 is read: its grace starts again, u3's does not */
	age(env.s, e1, 10 * grace);
	age(env.s, u3, 10 * grace);
	CHECK_EQ(read_all(env.s, e1), sizeof(payload));
	CHECK_EQ(dn_cgc_pass_retired(g, 0, &st), 0);
	CHECK_EQ(st.deleted, 1);
	CHECK_EQ(state(env.s, u3), -1);
	CHECK_EQ(state(env.s, e1), 2);
	CHECK_EQ(dn_cgc_pass_retired(g, real_ns() + grace + 1000000000ull, &st), 0);
	CHECK_EQ(st.deleted, 2);
	CHECK_EQ(state(env.s, e1), -1);
	CHECK_EQ(t_count_files(&env), 4);

	mf = open_memstream(&mbuf, &mlen);
	dn_cgc_metrics(g, mf);
	fclose(mf);
	CHECK(strstr(mbuf, "zest_cluster_gc_cells_total{action=\"commit\"} 2\n"));
	CHECK(strstr(mbuf, "zest_cluster_gc_cells_total{action=\"delete\"} 6\n"));
	CHECK(strstr(mbuf, "zest_cluster_gc_cells_total{action=\"retire\"} 2\n"));
	free(mbuf);
	dn_cgc_destroy(g);
	test_upload(&env, c, grace);

	/* the thread on its own: an orphan goes within a few grace periods */
	b = put_cell(env.s, 0xb2, 0, 0, "b");
	CHECK_EQ(dn_cgc_create(&(struct dn_cgc_opts){ .store = env.s,
	                                              .etcd = c,
	                                              .node = NODE,
	                                              .grace_ns = 1000000000ull,
	                                              .period_ns = 200000000ull },
	                       &g),
	         0);
	for (uint64_t end = t_mono_ms() + 60000; state(env.s, b) != -1;) {
		CHECK(t_mono_ms() < end);
		usleep(100 * 1000);
	}
	dn_cgc_destroy(g);

	/* etcd down: an error, and every cell as it was */
	b = put_cell(env.s, 0xb3, 0, 0, "b");
	t_etcd_stop(&etcd);
	CHECK_EQ(dn_cgc_create(&(struct dn_cgc_opts){ .store = env.s,
	                                              .etcd = c,
	                                              .node = NODE,
	                                              .grace_ns = grace,
	                                              .timeout_ms = 2000,
	                                              .no_thread = true },
	                       &g),
	         0);
	memset(&st, 0, sizeof(st));
	CHECK(dn_cgc_pass_pending(g, real_ns() + 2 * grace, &st) < 0);
	CHECK_EQ(st.deleted + st.committed, 0);
	CHECK_EQ(state(env.s, b), 1);
	CHECK(dn_cgc_pass_scan(g, false, &st) < 0);
	CHECK_EQ(state(env.s, f), 0);
	dn_cgc_destroy(g);

	cl_etcd_destroy(c);
	t_env_fini(&env);
	printf("ok\n");
	return 0;
}
