/*
 * rpc_cmeta against a real etcd (tests/lib/etcd_test.h): buckets (create once, head, list,
 * delete only when empty, a neighbour bucket's objects not counted), the commit Txn (no
 * bucket, invisible before and visible after, the write quorum, an overwrite returning the
 * record it replaced, a repeated Txn finding its own value), If-None-Match and If-Match
 * races between threads (exactly one wins), a stale ETag, deletes with and without a fence,
 * not_after_ns, etcd down (a 503 code, fast), and a 3-member etcd losing one. Skips (77) without
 * /usr/bin/etcd.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmeta_test.h"
#include "zc.h"

static const char *const nodes3[] = { "dn-1", "dn-2", "dn-3" };

static void
test_buckets(struct rpc_etcd *c)
{
	struct rpc_cl_bucket b;
	struct rpc_cmeta_bucket_entry *v;
	size_t n;

	CHECK_EQ(rpc_cmeta_bucket_head(c, "bk", &b, 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(rpc_cmeta_bucket_create(c, "bk", 123, 0), 0);
	CHECK_EQ(rpc_cmeta_bucket_create(c, "bk", 456, 0), ZC_E(ZC_BUCKET_EXISTS));
	/* the same value again: a repeated Txn of ours */
	CHECK_EQ(rpc_cmeta_bucket_create(c, "bk", 123, 0), 0);
	CHECK_EQ(rpc_cmeta_bucket_head(c, "bk", &b, 0), 0);
	CHECK_EQ(b.ctime_ns, 123);
	CHECK_EQ(rpc_cmeta_bucket_create(c, "a/b", 1, 0), -EINVAL);
	CHECK_EQ(rpc_cmeta_bucket_create(c, "bk2", 7, 0), 0);
	CHECK_EQ(rpc_cmeta_bucket_list(c, &v, &n, 0), 0);
	CHECK_EQ(n, 2);
	CHECK(!strcmp(v[0].name, "bk") && !strcmp(v[1].name, "bk2"));
	CHECK_EQ(v[1].ctime_ns, 7);
	rpc_cmeta_bucket_list_free(v, n);
}

static void
test_commit(struct rpc_etcd *c)
{
	struct t_put t, t2;
	struct rpc_cmeta_old old;
	struct rpc_cl_object o;
	int64_t rev = 0, rev1;

	t_put_init(&t, "nob", "k", 0x1111, 20000, nodes3, 3);
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_NO_BUCKET));

	t_put_init(&t, "bk", "dir/obj", 0x1111, 20000, nodes3, 3);
	CHECK_EQ(rpc_cmeta_get(c, "bk", "dir/obj", false, &o, &rev, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(rpc_cmeta_get(c, "nob", "dir/obj", false, &o, &rev, 0), ZC_E(ZC_NO_BUCKET));

	/* below the write quorum (k + 1 = 3 of 3): refused, nothing written */
	t.g[1].missing = 1u << 2;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(rpc_cmeta_get(c, "bk", "dir/obj", false, &o, &rev, 0), ZC_E(ZC_NO_KEY));
	/* quorum 2: the missing cell is recorded as missing */
	t.p.write_quorum = 2;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), 0);
	CHECK(!old.had);
	rev1 = old.revision;
	rpc_cmeta_old_fini(&old);
	CHECK_EQ(rpc_cmeta_get(c, "bk", "dir/obj", false, &o, &rev, 0), 0);
	CHECK_EQ(rev, rev1);
	CHECK_EQ(o.size, 20000);
	CHECK(!strcmp(o.etag, t.etag));
	CHECK_EQ(o.nextents, 1);
	CHECK_EQ(o.extents[0].id, 0x1111);
	CHECK_EQ(o.extents[0].ngroups, 3);
	CHECK_EQ(o.extents[0].nnodes, 3);
	CHECK_EQ(o.extents[0].groups[1].missing, 1u << 2);
	CHECK(!strcmp(o.extents[0].nodes[o.extents[0].groups[2].cell[1]], "dn-1"));
	rpc_cl_object_fini(&o);

	/* the same put again, If-None-Match: finds its own value (a repeated Txn) */
	t.p.cond.if_none_match = true;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), 0);
	rpc_cmeta_old_fini(&old);
	t.p.cond.if_none_match = false;

	/* overwrite: the old record comes back, fenced at its revision */
	t_put_init(&t2, "bk", "dir/obj", 0x2222, 5000, nodes3, 3);
	CHECK_EQ(rpc_cmeta_commit(c, &t2.p, &old), 0);
	CHECK(old.had);
	CHECK_EQ(old.mod_revision, rev1);
	CHECK(old.revision > rev1);
	CHECK_EQ(old.o.extents[0].id, 0x1111);
	CHECK(!strcmp(old.o.etag, t.etag));
	rpc_cmeta_old_fini(&old);
	CHECK_EQ(rpc_cmeta_get(c, "bk", "dir/obj", true, &o, NULL, 0), 0);
	CHECK_EQ(o.extents[0].id, 0x2222);
	rpc_cl_object_fini(&o);

	/* a record rpc_cluster.h would refuse: the size does not match the groups */
	t_put_init(&t, "bk", "bad", 0x3333, 20000, nodes3, 3);
	t.x.ngroups = 2;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), -EINVAL);
	t_put_init(&t, "bk", "bad", 0x3333, 20000, nodes3, 3);
	t.g[0].node[1] = "bad/name";
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), -EINVAL);

	/* not_after_ns passed: no Txn sent */
	t_put_init(&t, "bk", "late", 0x4444, 100, nodes3, 3);
	t.p.not_after_ns = 1;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_UNAVAILABLE));
	CHECK_EQ(rpc_cmeta_get(c, "bk", "late", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
}

struct racer {
	struct rpc_etcd *c;
	struct t_put t;
	pthread_barrier_t *go;
	int rc;
};

static void *
race_one(void *arg)
{
	struct racer *r = arg;
	struct rpc_cmeta_old old;

	pthread_barrier_wait(r->go);
	r->rc = rpc_cmeta_commit(r->c, &r->t.p, &old);
	rpc_cmeta_old_fini(&old);
	return NULL;
}

/* n threads commit bucket/key at once with cond; returns the index of the one winner. */
static unsigned
race(struct rpc_etcd *c, const char *key, uint64_t base, const struct rpc_cmeta_cond *cond)
{
	enum { N = 8 };
	static struct racer r[N];
	pthread_t th[N];
	pthread_barrier_t go;
	unsigned wins = 0, winner = 0;

	pthread_barrier_init(&go, NULL, N);
	for (unsigned i = 0; i < N; i++) {
		r[i].c = c;
		r[i].go = &go;
		t_put_init(&r[i].t, "bk", key, base + i, 3000, nodes3, 3);
		r[i].t.p.cond = *cond;
		CHECK_EQ(pthread_create(&th[i], NULL, race_one, &r[i]), 0);
	}
	for (unsigned i = 0; i < N; i++) {
		CHECK_EQ(pthread_join(th[i], NULL), 0);
		if (r[i].rc == 0) {
			wins++;
			winner = i;
		} else {
			CHECK_EQ(r[i].rc, ZC_E(ZC_PRECONDITION));
		}
	}
	pthread_barrier_destroy(&go);
	CHECK_EQ(wins, 1);
	return winner;
}

static void
test_conditions(struct rpc_etcd *c)
{
	struct rpc_cmeta_cond inm = { .if_none_match = true }, im = { 0 };
	struct rpc_cl_object o;
	struct rpc_cmeta_old old;
	struct t_put t;
	char etag[40];
	unsigned w;

	w = race(c, "race", 0x10000, &inm);
	CHECK_EQ(rpc_cmeta_get(c, "bk", "race", false, &o, NULL, 0), 0);
	CHECK_EQ(o.extents[0].id, 0x10000 + w);
	snprintf(etag, sizeof(etag), "%s", o.etag);
	rpc_cl_object_fini(&o);

	/* If-Match: exactly one of the writers that saw this ETag replaces it */
	im.if_match = etag;
	w = race(c, "race", 0x20000, &im);
	CHECK_EQ(rpc_cmeta_get(c, "bk", "race", false, &o, NULL, 0), 0);
	CHECK_EQ(o.extents[0].id, 0x20000 + w);
	rpc_cl_object_fini(&o);

	/* now etag is stale */
	t_put_init(&t, "bk", "race", 0x30000, 3000, nodes3, 3);
	t.p.cond.if_match = etag;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_PRECONDITION));
	t.p.cond.if_match = "*";
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), 0);
	CHECK(old.had && old.o.extents[0].id == 0x20000 + w);
	rpc_cmeta_old_fini(&old);
	t_put_init(&t, "bk", "absent", 0x30001, 3000, nodes3, 3);
	t.p.cond.if_match = "*";
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_NO_KEY));
	t.p.cond.if_match = etag;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_NO_KEY));
	t_put_init(&t, "nob", "absent", 0x30002, 3000, nodes3, 3);
	t.p.cond.if_match = etag;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_NO_BUCKET));
}

static void
test_delete(struct rpc_etcd *c)
{
	struct rpc_cmeta_old old;
	struct rpc_cl_object o;
	struct t_put t;
	int64_t rev;

	CHECK_EQ(rpc_cmeta_delete(c, "nob", "k", 0, &old, 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(rpc_cmeta_delete(c, "bk", "none", 0, &old, 0), 0);
	CHECK(!old.had);
	CHECK_EQ(rpc_cmeta_get(c, "bk", "race", false, &o, &rev, 0), 0);
	rpc_cl_object_fini(&o);
	CHECK_EQ(rpc_cmeta_delete(c, "bk", "race", rev - 1, &old, 0), ZC_E(ZC_PRECONDITION));
	CHECK_EQ(rpc_cmeta_delete(c, "bk", "race", rev, &old, 0), 1);
	CHECK(old.had && old.mod_revision == rev && old.o.extents[0].id == 0x30000);
	rpc_cmeta_old_fini(&old);
	CHECK_EQ(rpc_cmeta_delete(c, "bk", "race", 0, &old, 0), 0);
	CHECK_EQ(rpc_cmeta_get(c, "bk", "race", false, &o, &rev, 0), ZC_E(ZC_NO_KEY));

	/* buckets: not while an object is in it; a neighbour's ("bk2") objects do not count */
	t_put_init(&t, "bk2", "x", 0x5555, 100, nodes3, 3);
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), 0);
	rpc_cmeta_old_fini(&old);
	CHECK_EQ(rpc_cmeta_bucket_delete(c, "bk", 0), ZC_E(ZC_BUCKET_NOT_EMPTY));
	CHECK_EQ(rpc_cmeta_delete(c, "bk", "dir/obj", 0, &old, 0), 1);
	rpc_cmeta_old_fini(&old);
	CHECK_EQ(rpc_cmeta_bucket_delete(c, "bk", 0), 0);
	CHECK_EQ(rpc_cmeta_bucket_head(c, "bk", NULL, 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(rpc_cmeta_bucket_delete(c, "bk", 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(rpc_cmeta_bucket_delete(c, "bk2", 0), ZC_E(ZC_BUCKET_NOT_EMPTY));
	/* and a commit into the deleted bucket is refused */
	t_put_init(&t, "bk", "again", 0x6666, 100, nodes3, 3);
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), ZC_E(ZC_NO_BUCKET));
}

static void
test_down(struct t_etcd *e, struct rpc_etcd *c)
{
	struct rpc_cmeta_old old;
	struct rpc_cl_object o;
	struct t_put t;
	uint64_t t0;
	int rc;

	t_etcd_stop(e);
	t_put_init(&t, "bk2", "y", 0x7777, 100, nodes3, 3);
	t.p.timeout_ms = 4000;
	t0 = t_mono_ms();
	rc = rpc_cmeta_commit(c, &t.p, &old);
	CHECK(rc == ZC_E(ZC_NO_QUORUM) || rc == ZC_E(ZC_UNAVAILABLE));
	rc = rpc_cmeta_get(c, "bk2", "x", true, &o, NULL, 4000);
	CHECK(rc == ZC_E(ZC_NO_QUORUM) || rc == ZC_E(ZC_UNAVAILABLE));
	rc = rpc_cmeta_bucket_create(c, "bk3", 1, 4000);
	CHECK(rc == ZC_E(ZC_NO_QUORUM) || rc == ZC_E(ZC_UNAVAILABLE));
	/* a refusing cluster fails in about a second per call, not the deadline */
	CHECK(t_mono_ms() - t0 < 3 * 2500);
}

/* Three members, one killed: commits go on (through another member), each exactly once. */
static void
test_failover(void)
{
	struct rpc_cmeta_old old;
	struct rpc_cl_object o;
	struct rpc_etcd *c;
	struct t_etcd e;
	struct t_put t;

	t_etcd_start(&e, 3);
	c = t_etcd_client(&e);
	CHECK_EQ(rpc_cmeta_bucket_create(c, "fb", 1, 0), 0);
	t_put_init(&t, "fb", "k", 0x8001, 100, nodes3, 3);
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), 0);
	rpc_cmeta_old_fini(&old);
	t_etcd_kill(&e, 0);
	t_put_init(&t, "fb", "k", 0x8002, 100, nodes3, 3);
	t.p.timeout_ms = 10000;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), 0);
	CHECK(old.had && old.o.extents[0].id == 0x8001);
	rpc_cmeta_old_fini(&old);
	t_put_init(&t, "fb", "k2", 0x8003, 100, nodes3, 3);
	t.p.cond.if_none_match = true;
	t.p.timeout_ms = 10000;
	CHECK_EQ(rpc_cmeta_commit(c, &t.p, &old), 0);
	rpc_cmeta_old_fini(&old);
	CHECK_EQ(rpc_cmeta_get(c, "fb", "k", false, &o, NULL, 10000), 0);
	CHECK_EQ(o.extents[0].id, 0x8002);
	rpc_cl_object_fini(&o);
	rpc_etcd_destroy(c);
	t_etcd_stop(&e);
}

int
main(void)
{
	struct rpc_etcd *c;
	struct t_etcd e;

	zc_log_init();
	if (!t_etcd_available()) {
		printf("SKIP: %s not found (Debian package etcd-server)\n", t_etcd_bin());
		return 77;
	}
	t_etcd_start(&e, 1);
	c = t_etcd_client(&e);
	test_buckets(c);
	test_commit(c);
	test_conditions(c);
	test_delete(c);
	test_down(&e, c);
	rpc_etcd_destroy(c);
	test_failover();
	printf("ok\n");
	return 0;
}
