/*
 * cl_meta against a real etcd (tests/lib/etcd_test.h): buckets (create once, head, list,
 * delete only when empty, a neighbour bucket's objects not counted), the commit Txn (no
 * bucket, invisible before and visible after, the write quorum, an overwrite returning the
 * record it replaced, a repeated Txn finding its own value), If-None-Match and If-Match
 * races between threads (exactly one wins), a stale ETag, deletes with and without a fence,
 * not_after_ns, the extent index after commit, overwrite, delete and compose (and a
 * replaced record too big for etcd's ops limit leaving its keys dangling), listings (pages,
 * prefixes, start-after), compose (order, sum, CRC, refusals, conditions, a part changed
 * between the read and the Txn, etcd's ops limit; 10000 parts with etcd's limits raised),
 * etcd down (a 503 code, fast), and a 3-member etcd losing one. Skips (77) without
 * /usr/bin/etcd.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmeta_test.h"
#include "cl_index.h"
#include "zc.h"
#include "zc_crc.h"

static const char *const nodes3[] = { "dn-1", "dn-2", "dn-3" };

static void
test_buckets(struct cl_etcd *c)
{
	struct cl_rec_bucket b;
	struct cl_meta_bucket_entry *v;
	size_t n;

	CHECK_EQ(cl_meta_bucket_head(c, "bk", &b, 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(cl_meta_bucket_create(c, "bk", 123, 0), 0);
	CHECK_EQ(cl_meta_bucket_create(c, "bk", 456, 0), ZC_E(ZC_BUCKET_EXISTS));
	/* the same value again: a repeated Txn of ours */
	CHECK_EQ(cl_meta_bucket_create(c, "bk", 123, 0), 0);
	CHECK_EQ(cl_meta_bucket_head(c, "bk", &b, 0), 0);
	CHECK_EQ(b.ctime_ns, 123);
	CHECK_EQ(cl_meta_bucket_create(c, "a/b", 1, 0), -EINVAL);
	CHECK_EQ(cl_meta_bucket_create(c, "bk2", 7, 0), 0);
	CHECK_EQ(cl_meta_bucket_list(c, &v, &n, 0), 0);
	CHECK_EQ(n, 2);
	CHECK(!strcmp(v[0].name, "bk") && !strcmp(v[1].name, "bk2"));
	CHECK_EQ(v[1].ctime_ns, 7);
	cl_meta_bucket_list_free(v, n);
}

static void
test_commit(struct cl_etcd *c)
{
	struct t_put t, t2;
	struct cl_meta_old old;
	struct cl_rec_object o;
	int64_t rev = 0, rev1;

	t_put_init(&t, "nob", "k", 0x1111, 20000, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_NO_BUCKET));

	t_put_init(&t, "bk", "dir/obj", 0x1111, 20000, nodes3, 3);
	CHECK_EQ(cl_meta_get(c, "bk", "dir/obj", false, &o, &rev, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(cl_meta_get(c, "nob", "dir/obj", false, &o, &rev, 0), ZC_E(ZC_NO_BUCKET));

	/* below the write quorum (k + 1 = 3 of 3): refused, nothing written */
	t.g[1].missing = 1u << 2;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_NO_QUORUM));
	CHECK_EQ(cl_meta_get(c, "bk", "dir/obj", false, &o, &rev, 0), ZC_E(ZC_NO_KEY));
	/* quorum 2: the missing cell is recorded as missing */
	t.p.write_quorum = 2;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	CHECK(!old.had);
	rev1 = old.revision;
	cl_meta_old_fini(&old);
	CHECK_EQ(cl_meta_get(c, "bk", "dir/obj", false, &o, &rev, 0), 0);
	CHECK_EQ(rev, rev1);
	CHECK_EQ(o.size, 20000);
	CHECK(!strcmp(o.etag, t.etag));
	CHECK_EQ(o.nextents, 1);
	CHECK_EQ(o.extents[0].id, 0x1111);
	CHECK_EQ(o.extents[0].ngroups, 3);
	CHECK_EQ(o.extents[0].nnodes, 3);
	CHECK_EQ(o.extents[0].groups[1].missing, 1u << 2);
	CHECK(!strcmp(o.extents[0].nodes[o.extents[0].groups[2].cell[1]], "dn-1"));
	cl_rec_object_fini(&o);

	/* the same put again, If-None-Match: finds its own value (a repeated Txn) */
	t.p.cond.if_none_match = true;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	t.p.cond.if_none_match = false;

	/* overwrite: the old record comes back, fenced at its revision */
	t_put_init(&t2, "bk", "dir/obj", 0x2222, 5000, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t2.p, &old), 0);
	CHECK(old.had);
	CHECK_EQ(old.mod_revision, rev1);
	CHECK(old.revision > rev1);
	CHECK_EQ(old.o.extents[0].id, 0x1111);
	CHECK(!strcmp(old.o.etag, t.etag));
	cl_meta_old_fini(&old);
	CHECK_EQ(cl_meta_get(c, "bk", "dir/obj", true, &o, NULL, 0), 0);
	CHECK_EQ(o.extents[0].id, 0x2222);
	cl_rec_object_fini(&o);

	/* a record cl_rec.h would refuse: the size does not match the groups */
	t_put_init(&t, "bk", "bad", 0x3333, 20000, nodes3, 3);
	t.x.ngroups = 2;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), -EINVAL);
	t_put_init(&t, "bk", "bad", 0x3333, 20000, nodes3, 3);
	t.g[0].node[1] = "bad/name";
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), -EINVAL);

	/* not_after_ns passed: no Txn sent */
	t_put_init(&t, "bk", "late", 0x4444, 100, nodes3, 3);
	t.p.not_after_ns = 1;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_UNAVAILABLE));
	CHECK_EQ(cl_meta_get(c, "bk", "late", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
}

struct racer {
	struct cl_etcd *c;
	struct t_put t;
	pthread_barrier_t *go;
	int rc;
};

static void *
race_one(void *arg)
{
	struct racer *r = arg;
	struct cl_meta_old old;

	pthread_barrier_wait(r->go);
	r->rc = cl_meta_commit(r->c, &r->t.p, &old);
	cl_meta_old_fini(&old);
	return NULL;
}

/* n threads commit bucket/key at once with cond; returns the index of the one winner. */
static unsigned
race(struct cl_etcd *c, const char *key, uint64_t base, const struct cl_meta_cond *cond)
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
test_conditions(struct cl_etcd *c)
{
	struct cl_meta_cond inm = { .if_none_match = true }, im = { 0 };
	struct cl_rec_object o;
	struct cl_meta_old old;
	struct t_put t;
	char etag[40];
	unsigned w;

	w = race(c, "race", 0x10000, &inm);
	CHECK_EQ(cl_meta_get(c, "bk", "race", false, &o, NULL, 0), 0);
	CHECK_EQ(o.extents[0].id, 0x10000 + w);
	snprintf(etag, sizeof(etag), "%s", o.etag);
	cl_rec_object_fini(&o);

	/* If-Match: exactly one of the writers that saw this ETag replaces it */
	im.if_match = etag;
	w = race(c, "race", 0x20000, &im);
	CHECK_EQ(cl_meta_get(c, "bk", "race", false, &o, NULL, 0), 0);
	CHECK_EQ(o.extents[0].id, 0x20000 + w);
	cl_rec_object_fini(&o);

	/* now etag is stale */
	t_put_init(&t, "bk", "race", 0x30000, 3000, nodes3, 3);
	t.p.cond.if_match = etag;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_PRECONDITION));
	t.p.cond.if_match = "*";
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	CHECK(old.had && old.o.extents[0].id == 0x20000 + w);
	cl_meta_old_fini(&old);
	t_put_init(&t, "bk", "absent", 0x30001, 3000, nodes3, 3);
	t.p.cond.if_match = "*";
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_NO_KEY));
	t.p.cond.if_match = etag;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_NO_KEY));
	t_put_init(&t, "nob", "absent", 0x30002, 3000, nodes3, 3);
	t.p.cond.if_match = etag;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_NO_BUCKET));
}

static void
test_delete(struct cl_etcd *c)
{
	struct cl_meta_old old;
	struct cl_rec_object o;
	struct t_put t;
	int64_t rev;

	CHECK_EQ(cl_meta_delete(c, "nob", "k", 0, &old, 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(cl_meta_delete(c, "bk", "none", 0, &old, 0), 0);
	CHECK(!old.had);
	CHECK_EQ(cl_meta_get(c, "bk", "race", false, &o, &rev, 0), 0);
	cl_rec_object_fini(&o);
	CHECK_EQ(cl_meta_delete(c, "bk", "race", rev - 1, &old, 0), ZC_E(ZC_PRECONDITION));
	CHECK_EQ(cl_meta_delete(c, "bk", "race", rev, &old, 0), 1);
	CHECK(old.had && old.mod_revision == rev && old.o.extents[0].id == 0x30000);
	cl_meta_old_fini(&old);
	CHECK_EQ(cl_meta_delete(c, "bk", "race", 0, &old, 0), 0);
	CHECK_EQ(cl_meta_get(c, "bk", "race", false, &o, &rev, 0), ZC_E(ZC_NO_KEY));

	/* a commit that found its key absent, its copy arriving after a DELETE (a Txn held in
	 * a cut connection): the copy finds the key absent again, but the first one marked its
	 * extent's fence (under a lease), so the deleted version does not come back */
	t_put_init(&t, "bk", "late", 0x7777, 100, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	{
		char fk[64];
		struct cl_etcd_kvs kvs = { 0 };
		int n = cl_meta_fence_key(0x7777, fk, sizeof(fk));

		CHECK_EQ(cl_etcd_get(c, fk, (size_t)n, false, &kvs, 0), 0);
		CHECK(kvs.kv[0].lease != 0);
		cl_etcd_kvs_fini(&kvs);
	}
	CHECK_EQ(cl_meta_delete(c, "bk", "late", 0, &old, 0), 1);
	cl_meta_old_fini(&old);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_UNAVAILABLE));
	CHECK_EQ(cl_meta_get(c, "bk", "late", false, &o, &rev, 0), ZC_E(ZC_NO_KEY));

	/* buckets: not while an object is in it; a neighbour's ("bk2") objects do not count */
	t_put_init(&t, "bk2", "x", 0x5555, 100, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	CHECK_EQ(cl_meta_bucket_delete(c, "bk", 0), ZC_E(ZC_BUCKET_NOT_EMPTY));
	CHECK_EQ(cl_meta_delete(c, "bk", "dir/obj", 0, &old, 0), 1);
	cl_meta_old_fini(&old);
	CHECK_EQ(cl_meta_bucket_delete(c, "bk", 0), 0);
	CHECK_EQ(cl_meta_bucket_head(c, "bk", NULL, 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(cl_meta_bucket_delete(c, "bk", 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(cl_meta_bucket_delete(c, "bk2", 0), ZC_E(ZC_BUCKET_NOT_EMPTY));
	/* and a commit into the deleted bucket is refused */
	t_put_init(&t, "bk", "again", 0x6666, 100, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), ZC_E(ZC_NO_BUCKET));
}

/* The value of extent id's index key (a static buffer), or NULL when it has none. */
static const char *
ix(struct cl_etcd *c, uint64_t id)
{
	static char v[1400];
	char k[CL_META_EXTENT_KEY_CAP];
	struct cl_etcd_kvs kvs = { 0 };
	int n = cl_meta_extent_key(id, k, sizeof(k)), rc;

	CHECK(n > 0);
	rc = cl_etcd_get(c, k, (size_t)n, false, &kvs, 0);
	if (rc == ZC_E(ZC_NO_KEY))
		return NULL;
	CHECK_EQ(rc, 0);
	snprintf(v, sizeof(v), "%s", kvs.kv[0].value);
	cl_etcd_kvs_fini(&kvs);
	return v;
}

static bool
ix_is(struct cl_etcd *c, uint64_t id, const char *bucket, const char *key)
{
	const char *v = ix(c, id);
	char want[1400];

	CHECK(cl_meta_object_key(bucket, key, want, sizeof(want)) > 0);
	return v && strcmp(v, want) == 0;
}

/* The index after commit, overwrite, delete; a dangling key found and removed. */
static void
test_index(struct cl_etcd *c)
{
	struct cl_meta_old old;
	struct cl_rec_object o;
	char *rk;
	int64_t rev;
	char k[CL_META_EXTENT_KEY_CAP];

	CHECK_EQ(cl_meta_extent_key(0xa001, k, sizeof(k)), 30);
	CHECK(!strcmp(k, "/zest/extents/000000000000a001"));
	CHECK_EQ(cl_meta_bucket_create(c, "ib", 1, 0), 0);
	t_put1(c, "ib", "x/a", 0xa001, 100);
	CHECK(ix_is(c, 0xa001, "ib", "x/a"));
	CHECK_EQ(cl_meta_extent_record(c, 0xa001, true, &o, &rk, &rev, 0), 0);
	CHECK(!strcmp(rk, "/zest/objects/ib/x/a") && rev > 0 && o.extents[0].id == 0xa001);
	free(rk);
	cl_rec_object_fini(&o);
	/* an overwrite moves the key's index from the old extent to the new */
	t_put1(c, "ib", "x/a", 0xa002, 100);
	CHECK(!ix(c, 0xa001));
	CHECK(ix_is(c, 0xa002, "ib", "x/a"));
	CHECK_EQ(cl_meta_extent_record(c, 0xa001, false, &o, &rk, &rev, 0), ZC_E(ZC_NO_KEY));
	CHECK(!rk);
	/* delete removes it */
	CHECK_EQ(cl_meta_delete(c, "ib", "x/a", 0, &old, 0), 1);
	cl_meta_old_fini(&old);
	CHECK(!ix(c, 0xa002));

	/* a dangling key (its record gone): found, then removed only while nothing changed */
	CHECK_EQ(cl_etcd_put(c, k, 30, "/zest/objects/ib/x/a", 20, 0, NULL, 0), 0);
	CHECK_EQ(cl_meta_extent_record(c, 0xa001, false, &o, &rk, &rev, 0), ZC_E(ZC_NO_KEY));
	CHECK(rk && !strcmp(rk, "/zest/objects/ib/x/a") && rev == 0);
	CHECK_EQ(cl_meta_extent_unlink(c, 0xa001, "/zest/objects/ib/x/b", 0, 0), 0);
	CHECK_EQ(cl_meta_extent_unlink(c, 0xa001, rk, 5, 0), 0);
	CHECK(ix(c, 0xa001));
	CHECK_EQ(cl_meta_extent_unlink(c, 0xa001, rk, 0, 0), 1);
	CHECK(!ix(c, 0xa001));
	free(rk);

	/* a replaced record with more extents than etcd takes ops (--max-txn-ops 128): the
	 * overwrite goes in without their index deletes; the keys it leaves are dangling */
	enum { NX = 130 };
	static struct cl_meta_extent xs[NX];
	struct t_put t;
	uint8_t *buf;
	size_t len;
	char why[CL_REC_WHY_MAX];

	t_put_init(&t, "ib", "big", 0xb000, 100, nodes3, 3);
	for (unsigned i = 0; i < NX; i++) {
		xs[i] = t.x;
		xs[i].id = 0xb000 + i;
	}
	t.p.extents = xs;
	t.p.nextents = NX;
	t.p.size = 100 * NX;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), -EINVAL); /* its own index puts: too many */
	CHECK_EQ(cl_meta_encode(&t.p, &buf, &len, why, sizeof(why)), 0);
	CHECK_EQ(cl_etcd_put(c, "/zest/objects/ib/big", 20, buf, len, 0, NULL, 0), 0);
	free(buf);
	CHECK_EQ(cl_meta_extent_key(0xb005, k, sizeof(k)), 30);
	CHECK_EQ(cl_etcd_put(c, k, 30, "/zest/objects/ib/big", 20, 0, NULL, 0), 0);
	t_put1(c, "ib", "big", 0xb999, 100);
	CHECK(ix_is(c, 0xb999, "ib", "big"));
	CHECK(ix_is(c, 0xb005, "ib", "big")); /* left: the record no longer has 0xb005 */
	CHECK_EQ(cl_meta_extent_record(c, 0xb005, false, &o, &rk, &rev, 0), 0);
	CHECK_EQ(o.nextents, 1);
	CHECK_EQ(o.extents[0].id, 0xb999);
	CHECK_EQ(cl_meta_extent_unlink(c, 0xb005, rk, rev, 0), 1);
	free(rk);
	cl_rec_object_fini(&o);
}

static void
test_list(struct cl_etcd *c)
{
	struct cl_meta_listing l;
	char key[32];

	CHECK_EQ(cl_meta_list(c, "lb", NULL, NULL, 0, true, &l, 0), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(cl_meta_bucket_create(c, "lb", 1, 0), 0);
	CHECK_EQ(cl_meta_bucket_create(c, "lb2", 1, 0), 0);
	CHECK_EQ(cl_meta_list(c, "lb", NULL, NULL, 0, false, &l, 0), 0);
	CHECK_EQ(l.n, 0);
	CHECK(!l.more);
	cl_meta_listing_fini(&l);
	/* 150 keys: more than two of the listing's pages of etcd reads */
	for (unsigned i = 0; i < 150; i++) {
		snprintf(key, sizeof(key), "k%03u", i);
		t_put1(c, "lb", key, 0x1b0000 + i, 100 + i);
	}
	t_put1(c, "lb", "x/1", 0x1b1001, 1);
	t_put1(c, "lb", "x/2", 0x1b1002, 2);
	t_put1(c, "lb2", "k000", 0x1b2000, 1); /* a neighbour's */

	CHECK_EQ(cl_meta_list(c, "lb", "", "", 0, true, &l, 0), 0);
	CHECK_EQ(l.n, 152);
	CHECK(!l.more && l.revision > 0);
	for (unsigned i = 0; i < 150; i++) {
		char etag[40];

		snprintf(key, sizeof(key), "k%03u", i);
		snprintf(etag, sizeof(etag), "\"etag-%016llx\"", 0x1b0000ull + i);
		CHECK(!strcmp(l.v[i].key, key));
		CHECK_EQ(l.v[i].size, 100 + i);
		CHECK(!strcmp(l.v[i].etag, etag));
		CHECK_EQ(l.v[i].mtime_ns, 1700000000000000000ull);
	}
	CHECK(!strcmp(l.v[151].key, "x/2"));
	cl_meta_listing_fini(&l);

	/* pages of 100: more, then the rest from start_after */
	CHECK_EQ(cl_meta_list(c, "lb", NULL, NULL, 100, false, &l, 0), 0);
	CHECK_EQ(l.n, 100);
	CHECK(l.more);
	CHECK(!strcmp(l.v[99].key, "k099"));
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "lb", NULL, "k099", 100, false, &l, 0), 0);
	CHECK_EQ(l.n, 52);
	CHECK(!l.more);
	CHECK(!strcmp(l.v[0].key, "k100"));
	cl_meta_listing_fini(&l);
	/* limit exactly the rest: more is false */
	CHECK_EQ(cl_meta_list(c, "lb", NULL, "k099", 52, false, &l, 0), 0);
	CHECK(l.n == 52 && !l.more);
	cl_meta_listing_fini(&l);

	/* prefixes, with start_after inside, before and past them */
	CHECK_EQ(cl_meta_list(c, "lb", "k1", NULL, 0, true, &l, 0), 0);
	CHECK_EQ(l.n, 50);
	CHECK(!strcmp(l.v[0].key, "k100") && !strcmp(l.v[49].key, "k149"));
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "lb", "k1", "k120", 10, true, &l, 0), 0);
	CHECK(l.n == 10 && l.more && !strcmp(l.v[0].key, "k121"));
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "lb", "x/", "a", 0, true, &l, 0), 0);
	CHECK(l.n == 2 && !strcmp(l.v[0].key, "x/1"));
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "lb", "x/", "x/1", 0, true, &l, 0), 0);
	CHECK(l.n == 1 && !strcmp(l.v[0].key, "x/2"));
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "lb", "x/", "z", 0, true, &l, 0), 0);
	CHECK(l.n == 0 && !l.more);
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "lb", "nothing", NULL, 0, true, &l, 0), 0);
	CHECK_EQ(l.n, 0);
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "lb", NULL, "zzz", 0, true, &l, 0), 0);
	CHECK_EQ(l.n, 0);
	cl_meta_listing_fini(&l);
	CHECK_EQ(cl_meta_list(c, "l/b", NULL, NULL, 0, true, &l, 0), -EINVAL);

	/* records that do not decode are skipped and counted, the rest listed: one inside the
	 * first page, a run of them past it, and the last key; a later call goes on from
	 * `last`, which may lie past the last record listed */
	CHECK_EQ(cl_meta_bucket_create(c, "lbad", 1, 0), 0);
	for (unsigned i = 0; i < 80; i++) {
		snprintf(key, sizeof(key), "k%03u", i);
		t_put1(c, "lbad", key, 0x1c0000 + i, 1);
	}
	{
		static const char *const bad[] = { "k010x", "k070a", "k070b", "k070c", "zzz" };

		for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
			char k[64];
			int kl = snprintf(k, sizeof(k), "/zest/objects/lbad/%s", bad[i]);

			CHECK_EQ(cl_etcd_put(c, k, (size_t)kl, "garbage", 7, 0, NULL, 0), 0);
		}
	}
	CHECK_EQ(cl_meta_list(c, "lbad", NULL, NULL, 0, false, &l, 0), 0);
	CHECK_EQ(l.n, 80);
	CHECK_EQ(l.bad, 5);
	CHECK(!l.more && l.last && !strcmp(l.last, "zzz"));
	CHECK(!strcmp(l.v[10].key, "k010") && !strcmp(l.v[11].key, "k011"));
	cl_meta_listing_fini(&l);
	/* limit 71 ends on k070: the bad ones after it are the next call's */
	CHECK_EQ(cl_meta_list(c, "lbad", NULL, NULL, 71, false, &l, 0), 0);
	CHECK(l.n == 71 && l.more && !strcmp(l.v[70].key, "k070"));
	cl_meta_listing_fini(&l);
	/* after the last good key only bad ones: nothing listed, all counted, no more */
	CHECK_EQ(cl_meta_list(c, "lbad", NULL, "k079", 0, false, &l, 0), 0);
	CHECK(l.n == 0 && l.bad == 1 && !l.more && !strcmp(l.last, "zzz"));
	cl_meta_listing_fini(&l);
}

#ifdef ZC_FAULTS /* the compose fault hook: test builds only */
/* Changes a part between compose's read and its Txn (the fault hook). */
struct change {
	struct cl_etcd *c;
	const char *key;
	unsigned on;       /* the attempt to act on */
	uint64_t extent;   /* the part's new extent */
	uint64_t replaced; /* the extent the overwrite was told it replaced (its cells go) */
};

static void
change_part(void *arg, unsigned attempt)
{
	struct change *ch = arg;
	struct cl_meta_old old;
	struct t_put t;

	if (attempt != ch->on)
		return;
	t_put_init(&t, ".zest-mpu", ch->key, ch->extent, 4096, nodes3, 3);
	CHECK_EQ(cl_meta_commit(ch->c, &t.p, &old), 0);
	CHECK(old.had);
	ch->replaced = old.o.extents[0].id;
	cl_meta_old_fini(&old);
}
#endif

static void
test_compose(struct cl_etcd *c)
{
	struct cl_meta_part pp[3] = {
		{ ".zest-mpu", "up1/00001", "\"etag-000000000000c001\"" },
		{ ".zest-mpu", "up1/00002", NULL },
	};
	struct cl_rec_attr at = { "content-type", "text/plain" };
	struct cl_meta_cond cond = { 0 };
	struct cl_meta_old old;
	struct cl_rec_object o;
	uint64_t size = 0;
	uint32_t crc;

	CHECK_EQ(cl_meta_bucket_create(c, "cb", 1, 0), 0);
	CHECK_EQ(cl_meta_bucket_create(c, ".zest-mpu", 1, 0), 0);
	t_put1(c, ".zest-mpu", "up1/00001", 0xc001, 8192);
	t_put1(c, ".zest-mpu", "up1/00002", 0xc002, 5000);
	CHECK(ix_is(c, 0xc001, ".zest-mpu", "up1/00001"));

	/* refusals first: nothing may change */
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 0, "\"e\"", NULL, 0, NULL, 1, 0, &size, &old),
	         ZC_E(ZC_INVALID));
	pp[2] = pp[0];
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 3, "\"e\"", NULL, 0, NULL, 1, 0, &size, &old),
	         ZC_E(ZC_INVALID)); /* a part twice */
	CHECK_EQ(cl_meta_compose(c, ".zest-mpu", "up1/00002", pp, 2, "\"e\"", NULL, 0, NULL, 1, 0,
	                         &size, &old),
	         ZC_E(ZC_INVALID)); /* the target among the parts */
	CHECK_EQ(cl_meta_compose(c, "nob", "obj", pp, 2, "\"e\"", NULL, 0, NULL, 1, 0, &size, &old),
	         ZC_E(ZC_NO_BUCKET));
	pp[2] = (struct cl_meta_part){ ".zest-mpu", "up1/00003", NULL };
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 3, "\"e\"", NULL, 0, NULL, 1, 0, &size, &old),
	         ZC_E(ZC_NO_KEY));
	pp[0].etag = "\"another\"";
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 2, "\"e\"", NULL, 0, NULL, 1, 0, &size, &old),
	         ZC_E(ZC_CHANGED));
	pp[0].etag = "\"etag-000000000000c001\"";
	cond.if_match = "*";
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 2, "\"e\"", NULL, 0, &cond, 1, 0, &size, &old),
	         ZC_E(ZC_NO_KEY));
	CHECK(ix_is(c, 0xc001, ".zest-mpu", "up1/00001"));

	/* the object: the parts' extents in order, the sum, the combined CRC */
	cond = (struct cl_meta_cond){ .if_none_match = true };
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 2, "\"mpu-2\"", &at, 1, &cond, 77, 0, &size,
	                         &old),
	         0);
	CHECK(!old.had);
	cl_meta_old_fini(&old);
	CHECK_EQ(size, 13192);
	CHECK_EQ(cl_meta_get(c, "cb", "obj", false, &o, NULL, 0), 0);
	crc = zc_crc32c_combine(0xc001, 0xc002, 5000);
	CHECK(o.size == 13192 && o.crc32c == crc && o.mtime_ns == 77);
	CHECK(!strcmp(o.etag, "\"mpu-2\"") && o.nattrs == 1 &&
	      !strcmp(o.attrs[0].value, "text/plain"));
	CHECK_EQ(o.nextents, 2);
	CHECK(o.extents[0].id == 0xc001 && o.extents[1].id == 0xc002);
	CHECK_EQ(o.extents[0].ngroups, 1);
	cl_rec_object_fini(&o);
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", "up1/00001", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", "up1/00002", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK(ix_is(c, 0xc001, "cb", "obj") && ix_is(c, 0xc002, "cb", "obj"));
	/* a repeat: the parts are gone */
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 2, "\"mpu-2\"", &at, 1, NULL, 77, 0, &size,
	                         &old),
	         ZC_E(ZC_NO_KEY));

	/* conditions on the target */
	t_put1(c, ".zest-mpu", "up2/00001", 0xc101, 4096);
	pp[0] = (struct cl_meta_part){ ".zest-mpu", "up2/00001", NULL };
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 1, "\"mpu-1\"", NULL, 0, &cond, 1, 0, &size,
	                         &old),
	         ZC_E(ZC_PRECONDITION));
	cond = (struct cl_meta_cond){ .if_match = "\"stale\"" };
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 1, "\"mpu-1\"", NULL, 0, &cond, 1, 0, &size,
	                         &old),
	         ZC_E(ZC_PRECONDITION));
	CHECK(ix_is(c, 0xc101, ".zest-mpu", "up2/00001"));
	/* replacing obj: its record comes back as old, its extents leave the index */
	cond.if_match = "\"mpu-2\"";
	CHECK_EQ(cl_meta_compose(c, "cb", "obj", pp, 1, "\"mpu-1\"", NULL, 0, &cond, 1, 0, &size,
	                         &old),
	         0);
	CHECK(old.had && old.o.nextents == 2 && old.o.extents[1].id == 0xc002);
	CHECK(old.revision > old.mod_revision);
	cl_meta_old_fini(&old);
	CHECK_EQ(size, 4096);
	CHECK(!ix(c, 0xc001) && !ix(c, 0xc002));
	CHECK(ix_is(c, 0xc101, "cb", "obj"));

#ifdef ZC_FAULTS
	/* the fence: a part overwritten between the read and the Txn */
	struct change ch = { .c = c, .key = "up3/00002", .on = 1, .extent = 0xc3f2 };

	t_put1(c, ".zest-mpu", "up3/00001", 0xc301, 4096);
	t_put1(c, ".zest-mpu", "up3/00002", 0xc302, 4096);
	pp[0] = (struct cl_meta_part){ ".zest-mpu", "up3/00001", NULL };
	pp[1] = (struct cl_meta_part){ ".zest-mpu", "up3/00002", "\"etag-000000000000c302\"" };
	cl_meta_compose_fault(change_part, &ch);
	/* the ETag the caller saw is gone: ZC_E(ZC_CHANGED), nothing else changed */
	CHECK_EQ(cl_meta_compose(c, "cb", "obj3", pp, 2, "\"m\"", NULL, 0, NULL, 1, 0, &size, &old),
	         ZC_E(ZC_CHANGED));
	CHECK_EQ(ch.replaced, 0xc302);
	CHECK_EQ(cl_meta_get(c, "cb", "obj3", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK(ix_is(c, 0xc301, ".zest-mpu", "up3/00001"));
	CHECK(ix_is(c, 0xc3f2, ".zest-mpu", "up3/00002") && !ix(c, 0xc302));
	/* any ETag: read again, and the object has the part as it is now, never the extent
	 * the overwrite replaced (whose cells its writer deletes) */
	pp[1].etag = NULL;
	ch = (struct change){ .c = c, .key = "up3/00002", .on = 1, .extent = 0xc3f3 };
	CHECK_EQ(cl_meta_compose(c, "cb", "obj3", pp, 2, "\"m\"", NULL, 0, NULL, 1, 0, &size, &old),
	         0);
	cl_meta_old_fini(&old);
	cl_meta_compose_fault(NULL, NULL);
	CHECK_EQ(ch.replaced, 0xc3f2);
	CHECK_EQ(cl_meta_get(c, "cb", "obj3", false, &o, NULL, 0), 0);
	CHECK(o.nextents == 2 && o.extents[0].id == 0xc301 && o.extents[1].id == 0xc3f3);
	cl_rec_object_fini(&o);
	CHECK(ix_is(c, 0xc3f3, "cb", "obj3") && !ix(c, 0xc3f2));
#endif
}

/* etcd's default --max-txn-ops (128) bounds a compose at 63 parts of one extent. */
static void
test_compose_limits(struct cl_etcd *c)
{
	enum { N = 70 };
	static struct cl_meta_part pp[N];
	static char keys[N][16];
	struct cl_meta_old old;
	struct cl_rec_object o;
	uint64_t size;

	for (unsigned i = 0; i < N; i++) {
		snprintf(keys[i], sizeof(keys[i]), "up9/%05u", i + 1);
		t_put1(c, ".zest-mpu", keys[i], 0xd000 + i, 4096);
		pp[i] = (struct cl_meta_part){ ".zest-mpu", keys[i], NULL };
	}
	CHECK_EQ(cl_meta_compose(c, "cb", "big", pp, N, "\"m\"", NULL, 0, NULL, 1, 0, &size, &old),
	         ZC_E(ZC_INVALID));
	CHECK_EQ(cl_meta_get(c, "cb", "big", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK(ix_is(c, 0xd000, ".zest-mpu", keys[0]));
	CHECK_EQ(cl_meta_compose(c, "cb", "big", pp, 60, "\"m\"", NULL, 0, NULL, 1, 0, &size, &old),
	         0);
	cl_meta_old_fini(&old);
	CHECK_EQ(size, 60 * 4096);
	CHECK(ix_is(c, 0xd000 + 59, "cb", "big") && ix_is(c, 0xd000 + 60, ".zest-mpu", keys[60]));
	/* and overwriting it takes its 60 index keys out in the same Txn */
	t_put1(c, "cb", "big", 0xd999, 1);
	CHECK(!ix(c, 0xd000) && !ix(c, 0xd000 + 59));
}

/*
 * S3's 10000 parts, against an etcd with raised limits (etcd takes its flags from the
 * environment too: ETCD_MAX_TXN_OPS, ETCD_MAX_REQUEST_BYTES). The parts are written by
 * Txns of 100 records and index keys (as commits would leave them), to keep the test short.
 */
static void
test_compose_10000(void)
{
	enum { N = 10000, BATCH = 100 };
	static struct cl_meta_part pp[N];
	static char keys[N][48];
	struct cl_meta_old old;
	struct cl_rec_object o;
	struct cl_etcd *c;
	struct t_etcd e;
	uint64_t size, t0;

	setenv("ETCD_MAX_TXN_OPS", "20100", 1);
	setenv("ETCD_MAX_REQUEST_BYTES", "4194304", 1);
	t_etcd_start(&e, 1);
	unsetenv("ETCD_MAX_TXN_OPS");
	unsetenv("ETCD_MAX_REQUEST_BYTES");
	c = t_etcd_client(&e);
	CHECK_EQ(cl_meta_bucket_create(c, "bk", 1, 0), 0);
	CHECK_EQ(cl_meta_bucket_create(c, ".zest-mpu", 1, 0), 0);
	t_parts_put_batched(c, "0123456789abcdef0123456789abcdef", N, 0x100000, BATCH, pp, keys);
	t0 = t_mono_ms();
	CHECK_EQ(cl_meta_compose(c, "bk", "a/big/object", pp, N, "\"m-10000\"", NULL, 0, NULL, 1,
	                         30000, &size, &old),
	         0);
	printf("compose of %u parts: %llu ms\n", N, (unsigned long long)(t_mono_ms() - t0));
	cl_meta_old_fini(&old);
	CHECK_EQ(size, (uint64_t)N * 4096);
	CHECK_EQ(cl_meta_get(c, "bk", "a/big/object", true, &o, NULL, 0), 0);
	CHECK_EQ(o.nextents, N);
	CHECK(o.extents[0].id == 0x100000 && o.extents[N - 1].id == 0x100000 + N - 1);
	cl_rec_object_fini(&o);
	CHECK(ix_is(c, 0x100000, "bk", "a/big/object") &&
	      ix_is(c, 0x100000 + N - 1, "bk", "a/big/object"));
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", keys[N / 2], true, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	/* overwritten: all 10000 index keys go in the same Txn */
	t_put1(c, "bk", "a/big/object", 0x1, 1);
	CHECK(!ix(c, 0x100000) && !ix(c, 0x100000 + N - 1));
	cl_etcd_destroy(c);
	t_etcd_stop(&e);
}

static void
test_down(struct t_etcd *e, struct cl_etcd *c)
{
	struct cl_meta_old old;
	struct cl_rec_object o;
	struct t_put t;
	int rc;

	/* a refusing cluster fails in about a second per call, not at the deadline: that is
	 * far past this test's own timeout, so only the refusals can end these calls */
	t_etcd_stop(e);
	t_put_init(&t, "bk2", "y", 0x7777, 100, nodes3, 3);
	t.p.timeout_ms = 3600000;
	rc = cl_meta_commit(c, &t.p, &old);
	CHECK(rc == ZC_E(ZC_NO_QUORUM) || rc == ZC_E(ZC_UNAVAILABLE));
	rc = cl_meta_get(c, "bk2", "x", true, &o, NULL, 3600000);
	CHECK(rc == ZC_E(ZC_NO_QUORUM) || rc == ZC_E(ZC_UNAVAILABLE));
	rc = cl_meta_bucket_create(c, "bk3", 1, 3600000);
	CHECK(rc == ZC_E(ZC_NO_QUORUM) || rc == ZC_E(ZC_UNAVAILABLE));
}

/* Three members, one killed: commits go on (through another member), each exactly once. */
static void
test_failover(void)
{
	struct cl_meta_old old;
	struct cl_rec_object o;
	struct cl_etcd *c;
	struct t_etcd e;
	struct t_put t;

	t_etcd_start(&e, 3);
	c = t_etcd_client(&e);
	CHECK_EQ(cl_meta_bucket_create(c, "fb", 1, 0), 0);
	t_put_init(&t, "fb", "k", 0x8001, 100, nodes3, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	t_etcd_kill(&e, 0);
	t_put_init(&t, "fb", "k", 0x8002, 100, nodes3, 3);
	t.p.timeout_ms = 10000;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	CHECK(old.had && old.o.extents[0].id == 0x8001);
	cl_meta_old_fini(&old);
	t_put_init(&t, "fb", "k2", 0x8003, 100, nodes3, 3);
	t.p.cond.if_none_match = true;
	t.p.timeout_ms = 10000;
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
	CHECK_EQ(cl_meta_get(c, "fb", "k", false, &o, NULL, 10000), 0);
	CHECK_EQ(o.extents[0].id, 0x8002);
	cl_rec_object_fini(&o);
	cl_etcd_destroy(c);
	t_etcd_stop(&e);
}

int
main(void)
{
	struct cl_etcd *c;
	struct t_etcd e;

	zc_log_init();
	t_etcd_require();
	t_etcd_start(&e, 1);
	c = t_etcd_client(&e);
	test_buckets(c);
	test_commit(c);
	test_conditions(c);
	test_delete(c);
	test_index(c);
	test_list(c);
	test_compose(c);
	test_compose_limits(c);
	test_down(&e, c);
	cl_etcd_destroy(c);
	test_failover();
	test_compose_10000();
	printf("ok\n");
	return 0;
}
