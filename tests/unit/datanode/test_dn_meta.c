/*
 * Buckets, overwrite visibility, delete, list (prefix, delimiter, start_after, limit), compose,
 * replicas outvoted at open and replicas a failed write dropped brought back by the healer,
 * and keys too long for one LMDB key.
 */
#include <dirent.h>
#include <sys/mount.h>

#include "dn_test.h"
#include "t_fault.h"
#include "dn_internal.h"

static void
buckets(void)
{
	struct t_env e;
	struct dn_bucket_info *v;
	size_t n;
	uint64_t ct = 0, ct2 = 0;
	uint8_t one = 7;

	t_env_open(&e, 6, 4, 2, NULL);
	CHECK_EQ(dn_bucket_head(e.s, "zz", NULL), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(dn_bucket_create(e.s, "zz", &ct), 0);
	CHECK(ct > 0);
	CHECK_EQ(dn_bucket_create(e.s, "zz", &ct2), ZC_E(ZC_BUCKET_EXISTS));
	CHECK_EQ(ct2, ct);
	CHECK_EQ(dn_bucket_create(e.s, "aa", NULL), 0);
	CHECK_EQ(dn_bucket_create(e.s, "", NULL), -EINVAL);
	CHECK_EQ(dn_bucket_head(e.s, "zz", &ct2), 0);
	CHECK_EQ(ct2, ct);
	CHECK_EQ(dn_bucket_list(e.s, &v, &n), 0);
	CHECK_EQ(n, 2);
	CHECK(strcmp(v[0].name, "aa") == 0 && strcmp(v[1].name, "zz") == 0);
	dn_bucket_list_free(v, n);
	CHECK_EQ(t_put(e.s, "aa", "k", &one, 1), 0);
	/* "a" must not see "aa"'s objects as its own. */
	CHECK_EQ(dn_bucket_create(e.s, "a", NULL), 0);
	CHECK_EQ(dn_bucket_delete(e.s, "a"), 0);
	CHECK_EQ(dn_bucket_delete(e.s, "aa"), ZC_E(ZC_BUCKET_NOT_EMPTY));
	CHECK_EQ(dn_delete(e.s, "aa", "k"), 1);
	CHECK_EQ(dn_delete(e.s, "aa", "k"), 0);
	CHECK_EQ(dn_delete(e.s, "nob", "k"), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(dn_bucket_delete(e.s, "aa"), 0);
	CHECK_EQ(dn_bucket_delete(e.s, "aa"), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(t_count_files(&e), 0);
	t_env_fini(&e);
}

static void
overwrite(void)
{
	struct t_env e;
	uint8_t a[50000], b[30000];
	struct dn_write *w;
	unsigned files_a;

	t_fill(a, sizeof(a));
	t_fill(b, sizeof(b));
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(t_put(e.s, "b", "k", a, sizeof(a)), 0);
	files_a = t_count_files(&e);
	CHECK(files_a > 0);
	/* The new version is streamed but not committed: readers still get the old one. */
	CHECK_EQ(t_feed(e.s, "b", "k", b, sizeof(b), 4000, true, &w), 0);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, a, sizeof(a)), 0);
	CHECK_EQ(t_commit(w, "v2", NULL), 0);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, b, sizeof(b)), 0);
	/* The old version's files are gone; only the new version's remain. */
	CHECK_EQ(t_count_files(&e), 4); /* cells 0, 1 and two parity: cells 2, 3 are empty */
	/* An aborted overwrite leaves the current version and no stray files. */
	CHECK_EQ(t_feed(e.s, "b", "k", a, sizeof(a), 4000, true, &w), 0);
	dn_write_abort(w);
	t_close(&e); /* close waits for the drive threads: the abort's unlinks are done */
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, b, sizeof(b)), 0);
	CHECK_EQ(t_count_files(&e), 4); /* cells 0, 1 and two parity: cells 2, 3 are empty */
	CHECK_EQ(dn_delete(e.s, "b", "k"), 1);
	CHECK_EQ(t_count_files(&e), 0);
	t_env_fini(&e);
}

static void
expect_list(struct dn_store *s, const char *prefix, const char *after, unsigned limit,
            const char *delim, const char *want, bool truncated)
{
	struct dn_list_result r;
	char got[1024] = "";

	CHECK_EQ(dn_list(s, "b", prefix, after, limit, delim, &r), 0);
	for (size_t i = 0; i < r.nentries; i++) {
		strcat(got, r.entries[i].key);
		strcat(got, " ");
	}
	for (size_t i = 0; i < r.nprefixes; i++) {
		strcat(got, "P:");
		strcat(got, r.prefixes[i]);
		strcat(got, " ");
	}
	if (strcmp(got, want) != 0) {
		fprintf(stderr, "list(%s,%s,%u,%s) = '%s', want '%s'\n", prefix, after, limit,
		        delim, got, want);
		abort();
	}
	CHECK_EQ(r.truncated, truncated);
	if (truncated)
		CHECK(r.next_start_after != NULL);
	dn_list_result_fini(&r);
}

static void
listing(void)
{
	struct t_env e;
	const char *keys[] = { "a", "a/1", "a/2", "a/b/c", "b", "c/1", "c/2", "d" };
	uint8_t x = 1;

	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(dn_bucket_create(e.s, "bb", NULL), 0);
	CHECK_EQ(t_put(e.s, "bb", "a/zz", &x, 1), 0); /* must never show in bucket b */
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		CHECK_EQ(t_put(e.s, "b", keys[i], &x, 1), 0);
	expect_list(e.s, "", "", 0, "", "a a/1 a/2 a/b/c b c/1 c/2 d ", false);
	expect_list(e.s, "a/", "", 0, "", "a/1 a/2 a/b/c ", false);
	expect_list(e.s, "", "", 0, "/", "a b d P:a/ P:c/ ", false);
	expect_list(e.s, "a/", "", 0, "/", "a/1 a/2 P:a/b/ ", false);
	expect_list(e.s, "", "a/1", 0, "", "a/2 a/b/c b c/1 c/2 d ", false);
	expect_list(e.s, "a", "a", 0, "", "a/1 a/2 a/b/c ", false); /* "a" is not after "a" */
	expect_list(e.s, "", "b", 0, "/", "d P:c/ ", false);
	expect_list(e.s, "", "", 3, "", "a a/1 a/2 ", true);
	expect_list(e.s, "", "a/2", 3, "", "a/b/c b c/1 ", true);
	expect_list(e.s, "", "", 2, "/", "a P:a/ ", true);
	expect_list(e.s, "", "a/", 2, "/", "b P:c/ ", true);
	expect_list(e.s, "", "c/", 2, "/", "d ", false);
	expect_list(e.s, "zz", "", 0, "", "", false);
	{
		struct dn_list_result r;

		CHECK_EQ(dn_list(e.s, "nob", "", "", 0, "", &r), ZC_E(ZC_NO_BUCKET));
	}
	t_env_fini(&e);
}

static void
compose(void)
{
	struct t_env e;
	size_t l1 = 40000, l2 = 70001, l3 = 1;
	uint8_t *all = malloc(l1 + l2 + l3);
	const char *parts[] = { "p1", "p2", "p3" };
	struct dn_write_result res;
	struct dn_object_info info;

	t_fill(all, l1 + l2 + l3);
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(t_put(e.s, "b", "p1", all, l1), 0);
	CHECK_EQ(t_put(e.s, "b", "p2", all + l1, l2), 0);
	CHECK_EQ(t_put(e.s, "b", "p3", all + l1 + l2, l3), 0);
	CHECK_EQ(dn_compose(e.s, "b", "whole", NULL, parts, 3, false, "multi-3", NULL, 0, &res), 0);
	CHECK_EQ(res.size, l1 + l2 + l3);
	CHECK_EQ(res.crc32c, zc_crc32c(0, all, l1 + l2 + l3));
	CHECK_EQ(t_check_read(e.s, "b", "whole", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK_EQ(t_check_read(e.s, "b", "whole", l1 - 10, 30, true, all + l1 - 10, 30), 0);
	CHECK_EQ(dn_stat(e.s, "b", "whole", &info), 0);
	CHECK(strcmp(info.etag, "multi-3") == 0);
	dn_object_info_fini(&info);
	/* Compose again, dropping the parts: the data stays, shared by both composed objects. */
	CHECK_EQ(dn_compose(e.s, "b", "whole2", NULL, parts, 3, true, "m2", NULL, 0, &res), 0);
	CHECK_EQ(dn_stat(e.s, "b", "p1", &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(t_check_read(e.s, "b", "whole2", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK_EQ(dn_delete(e.s, "b", "whole"), 1);
	CHECK_EQ(t_check_read(e.s, "b", "whole2", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK(t_count_files(&e) > 0);
	/* A missing part refuses the whole compose. */
	CHECK_EQ(dn_compose(e.s, "b", "bad", NULL, parts, 3, false, "x", NULL, 0, &res),
	         ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_delete(e.s, "b", "whole2"), 1);
	CHECK_EQ(t_count_files(&e), 0);
	free(all);
	t_env_fini(&e);
}

/* Parts from other buckets of the same store (ComposeRequest allows them). */
static void
compose_cross_bucket(void)
{
	struct t_env e;
	size_t l1 = 30000, l2 = 50003, l3 = 7;
	uint8_t *all = malloc(l1 + l2 + l3);
	const char *parts[] = { "p1", "p2", "p3" };
	const char *buckets[] = { "src", "", "other" }; /* "": the target's own bucket */
	const char *nob[] = { "src", "gone", "other" };
	struct dn_write_result res;
	struct dn_object_info info;

	t_fill(all, l1 + l2 + l3);
	t_env_open(&e, 6, 4, 2, "dst");
	CHECK_EQ(dn_bucket_create(e.s, "src", NULL), 0);
	CHECK_EQ(dn_bucket_create(e.s, "other", NULL), 0);
	CHECK_EQ(t_put(e.s, "src", "p1", all, l1), 0);
	CHECK_EQ(t_put(e.s, "dst", "p2", all + l1, l2), 0);
	CHECK_EQ(t_put(e.s, "other", "p3", all + l1 + l2, l3), 0);
	CHECK_EQ(dn_compose(e.s, "dst", "whole", buckets, parts, 3, false, "x3", NULL, 0, &res), 0);
	CHECK_EQ(res.size, l1 + l2 + l3);
	CHECK_EQ(res.crc32c, zc_crc32c(0, all, l1 + l2 + l3));
	CHECK_EQ(t_check_read(e.s, "dst", "whole", 0, 0, false, all, l1 + l2 + l3), 0);
	/* The parts stay where they were. */
	CHECK_EQ(t_check_read(e.s, "src", "p1", 0, 0, false, all, l1), 0);
	CHECK_EQ(t_check_read(e.s, "other", "p3", 0, 0, false, all + l1 + l2, l3), 0);
	/* A part's bucket that does not exist (NoSuchBucket), or a key missing there
	 * (ZC_E(ZC_NO_KEY)): nothing made. */
	CHECK_EQ(dn_compose(e.s, "dst", "bad", nob, parts, 3, false, "x", NULL, 0, &res),
	         ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(dn_compose(e.s, "dst", "bad", buckets + 1, parts, 2, false, "x", NULL, 0, &res),
	         ZC_E(ZC_NO_KEY)); /* p1 is not in dst */
	CHECK_EQ(dn_stat(e.s, "dst", "bad", &info), ZC_E(ZC_NO_KEY));
	/* delete_parts drops each part from its own bucket, in the same transaction. */
	CHECK_EQ(dn_compose(e.s, "dst", "whole2", buckets, parts, 3, true, "y", NULL, 0, &res), 0);
	CHECK_EQ(dn_stat(e.s, "src", "p1", &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_stat(e.s, "dst", "p2", &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_stat(e.s, "other", "p3", &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_bucket_delete(e.s, "src"), 0); /* empty now */
	CHECK_EQ(t_check_read(e.s, "dst", "whole2", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK_EQ(dn_delete(e.s, "dst", "whole"), 1);
	CHECK_EQ(t_check_read(e.s, "dst", "whole2", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK_EQ(dn_delete(e.s, "dst", "whole2"), 1);
	CHECK_EQ(t_count_files(&e), 0);
	free(all);
	t_env_fini(&e);
}

static void
garble(const char *dir)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/meta/data.mdb", dir);
	f = fopen(path, "r+");
	CHECK(f);
	for (int i = 0; i < 16384; i++)
		fputc(0xa5, f);
	fclose(f);
}

/* A corrupted metadata replica is outvoted and rewritten from a good one. */
static void
replicas(void)
{
	struct t_env e;
	uint8_t a[20000];

	t_fill(a, sizeof(a));
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(t_put(e.s, "b", "k", a, sizeof(a)), 0);
	t_close(&e);
	garble(e.dirs[0]);
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, a, sizeof(a)), 0);
	t_close(&e);
	/* d0 was re-copied at open: now the other two copies may go bad. */
	garble(e.dirs[1]);
	garble(e.dirs[2]);
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, a, sizeof(a)), 0);
	CHECK_EQ(t_put(e.s, "b", "k2", a, 100), 0);
	t_env_fini(&e);
}

/* Every key and value of a closed replica's tables, in order, into one buffer. */
static size_t
dump_replica(const char *drive, uint8_t **out)
{
	const char *dbs[] = { "buckets", "objects", "extents", "info" };
	char dir[400];
	size_t len = 0, cap = 1 << 16;
	uint8_t *buf = malloc(cap);
	MDB_env *env;
	MDB_txn *txn;

	snprintf(dir, sizeof(dir), "%s/meta", drive);
	CHECK(buf);
	CHECK_EQ(mdb_env_create(&env), 0);
	CHECK_EQ(mdb_env_set_maxdbs(env, 8), 0);
	CHECK_EQ(mdb_env_open(env, dir, MDB_RDONLY | MDB_NOLOCK, 0644), 0);
	CHECK_EQ(mdb_txn_begin(env, NULL, MDB_RDONLY, &txn), 0);
	for (size_t i = 0; i < sizeof(dbs) / sizeof(dbs[0]); i++) {
		MDB_cursor *cur;
		MDB_dbi dbi;
		MDB_val k, v;

		CHECK_EQ(mdb_dbi_open(txn, dbs[i], 0, &dbi), 0);
		CHECK_EQ(mdb_cursor_open(txn, dbi, &cur), 0);
		for (int op = MDB_FIRST; mdb_cursor_get(cur, &k, &v, op) == 0; op = MDB_NEXT) {
			size_t need = len + 16 + k.mv_size + v.mv_size;

			if (need > cap) {
				cap = need * 2;
				buf = realloc(buf, cap);
				CHECK(buf);
			}
			memcpy(buf + len, &k.mv_size, 8);
			memcpy(buf + len + 8, k.mv_data, k.mv_size);
			len += 8 + k.mv_size;
			memcpy(buf + len, &v.mv_size, 8);
			memcpy(buf + len + 8, v.mv_data, v.mv_size);
			len += 8 + v.mv_size;
		}
		mdb_cursor_close(cur);
	}
	mdb_txn_abort(txn);
	mdb_env_close(env);
	*out = buf;
	return len;
}

/* After close: the m + 1 replicas hold the same tables, byte for byte. */
static void
check_replicas_equal(struct t_env *e)
{
	uint8_t *a, *b;
	size_t la = dump_replica(e->dirs[0], &a);

	for (unsigned i = 1; i <= e->o.m; i++) {
		size_t lb = dump_replica(e->dirs[i], &b);

		CHECK_EQ(lb, la);
		CHECK(memcmp(a, b, la) == 0);
		free(b);
	}
	free(a);
}

static unsigned
live_replicas(struct t_env *e)
{
	unsigned live;

	dn_meta_replicas(e->s->meta, &live, NULL);
	return live;
}

/* Wait (up to 5 s) for the healer to bring the live count to want. */
static void
wait_live(struct t_env *e, unsigned want)
{
	for (int i = 0; live_replicas(e) != want && i < 500; i++)
		usleep(10000);
	CHECK_EQ(live_replicas(e), want);
}

/* Traffic while the healer swaps a replica in: readers on the primary, writers on all. */
struct traffic {
	struct t_env *e;
	atomic_bool stop;
	unsigned puts;
};

static void *
traffic_main(void *arg)
{
	struct traffic *t = arg;
	uint8_t buf[3000];
	char key[32];

	t_fill(buf, sizeof(buf));
	while (!atomic_load(&t->stop)) {
		struct dn_list_result lr;

		snprintf(key, sizeof(key), "t%u", t->puts % 8);
		CHECK_EQ(t_put(t->e->s, "b", key, buf, sizeof(buf)), 0);
		CHECK_EQ(t_check_read(t->e->s, "b", key, 0, 0, false, buf, sizeof(buf)), 0);
		CHECK_EQ(dn_list(t->e->s, "b", "t", NULL, 100, NULL, &lr), 0);
		CHECK(lr.nentries > 0);
		dn_list_result_fini(&lr);
		t->puts++;
	}
	return NULL;
}

/*
 * A write transaction that fails on a replica (ENOSPC: its drive filled up) drops it from
 * the live set and marks the drive full; once the drive has room the background healer
 * copies the primary over it and later writes reach it again, with no restart. Readers
 * and writers run on meanwhile. A replica dropped on a failed drive waits for `heal`.
 * With every replica dropped, the last primary is reopened in place first.
 */
static void
replica_revive(void)
{
	struct t_env e;
	struct traffic t = { &e, false, 0 };
	uint8_t a[20000];
	uint64_t revived, gen;
	pthread_t th;

	t_fill(a, sizeof(a));
	t_env_init(&e, 6, 4, 2);
	e.o.full_probe_ns = 3600ull * 1000000000ull; /* no re-probe until the test says so */
	e.o.heal_interval_ns = 20000000;             /* 20 ms */
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	CHECK_EQ(dn_meta_replicas(e.s->meta, NULL, NULL), 3);
	CHECK_EQ(live_replicas(&e), 3);
	CHECK_EQ(t_put(e.s, "b", "o0", a, sizeof(a)), 0);
	/* Replica 1's drive fills up under a write: the write commits on the other two. */
	t_fault_err_idx(ZC_FP_META_TXN, 1, -ENOSPC, 1);
	CHECK_EQ(t_put(e.s, "b", "o1", a, 1000), 0);
	CHECK(!dn_meta_replica_live(e.s->meta, 1));
	CHECK_EQ(live_replicas(&e), 2);
	CHECK_EQ(dn_drive_state_get(e.s, 1), DN_DRIVE_FULL);
	CHECK_EQ(t_put(e.s, "b", "o2", a, 2000), 0);
	CHECK_EQ(dn_delete(e.s, "b", "o0"), 1);
	CHECK(dn_meta_replica_generation(e.s->meta, 1) < dn_meta_generation(e.s->meta));
	/* Still full: the healer leaves it dropped. */
	usleep(100000);
	CHECK(!dn_meta_replica_live(e.s->meta, 1));
	CHECK_EQ(dn_drive_state_get(e.s, 1), DN_DRIVE_FULL);
	/* Room again: the healer's own re-probe finds it (no write needed), copies the
	 * primary over the replica and puts it back, while traffic goes on. */
	CHECK_EQ(pthread_create(&th, NULL, traffic_main, &t), 0);
	usleep(50000);
	for (unsigned d = 0; d < e.s->ndrives; d++) /* each drive re-probes at once */
		e.s->drives[d].o.full_probe_ns = 0;
	wait_live(&e, 3);
	usleep(50000);
	atomic_store(&t.stop, true);
	CHECK_EQ(pthread_join(th, NULL), 0);
	CHECK(t.puts > 0);
	CHECK_EQ(dn_drive_state_get(e.s, 1), DN_DRIVE_OK);
	dn_meta_replicas(e.s->meta, NULL, &revived);
	CHECK_EQ(revived, 1);
	/* Live again: the next transaction reaches it, same generation as the primary. */
	CHECK_EQ(t_put(e.s, "b", "o3", a, 3000), 0);
	gen = dn_meta_generation(e.s->meta);
	CHECK_EQ(dn_meta_replica_generation(e.s->meta, 1), gen);
	CHECK_EQ(dn_meta_replica_generation(e.s->meta, 2), gen);
	/* Its content: drop the other two (an I/O error on the primary moves it to 1). */
	t_fault_err_idx(ZC_FP_META_TXN, 0, -EIO, 1);
	t_fault_err_idx(ZC_FP_META_TXN, 2, -EIO, 1);
	CHECK_EQ(t_put(e.s, "b", "o4", a, 4000), 0);
	CHECK(dn_meta_replica_live(e.s->meta, 1));
	CHECK_EQ(t_check_read(e.s, "b", "o0", 0, 0, false, a, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(t_check_read(e.s, "b", "o1", 0, 0, false, a, 1000), 0);
	CHECK_EQ(t_check_read(e.s, "b", "o2", 0, 0, false, a, 2000), 0);
	CHECK_EQ(t_check_read(e.s, "b", "o3", 0, 0, false, a, 3000), 0);
	CHECK_EQ(t_check_read(e.s, "b", "o4", 0, 0, false, a, 4000), 0);
	/* Drives 0 and 2 stayed OK (an I/O error in LMDB does not fail a drive): both are
	 * copied back from the new primary. */
	wait_live(&e, 3);
	dn_meta_replicas(e.s->meta, NULL, &revived);
	CHECK_EQ(revived, 3);
	/* A replica dropped on a failed drive stays dropped: `heal` is the operator's. */
	CHECK_EQ(dn_drive_fail(e.s, 2), 0);
	t_fault_err_idx(ZC_FP_META_TXN, 2, -ENOSPC, 1);
	CHECK_EQ(t_put(e.s, "b", "o5", a, 5000), 0);
	CHECK_EQ(dn_drive_state_get(e.s, 2), DN_DRIVE_FAILED);
	usleep(100000);
	CHECK(!dn_meta_replica_live(e.s->meta, 2));
	CHECK(dn_heal(e.s, 2) >= 0);
	CHECK(dn_meta_replica_live(e.s->meta, 2));
	CHECK_EQ(live_replicas(&e), 3);
	CHECK_EQ(t_put(e.s, "b", "o6", a, 6000), 0);
	/* Every replica fails one commit: the write fails with -EIO (the metadata's, not a
	 * lost quorum) and nothing shows; reads go on from the last primary. The healer
	 * reopens that one in place, then copies it over the other two. */
	for (unsigned r = 0; r < 3; r++)
		t_fault_err_idx(ZC_FP_META_TXN, r, -EIO, 1);
	CHECK_EQ(t_put(e.s, "b", "lost", a, 7000), -EIO);
	CHECK_EQ(t_check_read(e.s, "b", "lost", 0, 0, false, a, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(t_check_read(e.s, "b", "o6", 0, 0, false, a, 6000), 0);
	wait_live(&e, 3);
	gen = dn_meta_generation(e.s->meta);
	CHECK_EQ(t_put(e.s, "b", "o7", a, 7000), 0);
	CHECK_EQ(dn_meta_generation(e.s->meta), gen + 1);
	for (unsigned r = 0; r < 3; r++)
		CHECK_EQ(dn_meta_replica_generation(e.s->meta, r), gen + 1);
	CHECK_EQ(t_check_read(e.s, "b", "o7", 0, 0, false, a, 7000), 0);
	t_close(&e);
	check_replicas_equal(&e);
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "o6", 0, 0, false, a, 6000), 0);
	CHECK_EQ(t_check_read(e.s, "b", "o7", 0, 0, false, a, 7000), 0);
	t_env_fini(&e);
}

/* ---- keys too long for one LMDB key (bundles) ---- */
#define LK_MAX  64
#define LK_SIZE 100 /* every object the same size: 3 cell files each (cell 0, 2 parity) */

struct lk_set {
	char *keys[LK_MAX]; /* sorted */
	uint8_t fill[LK_MAX];
	size_t n;
};

static void
lk_add(struct lk_set *ks, const char *key, uint8_t fill)
{
	CHECK(ks->n < LK_MAX);
	ks->keys[ks->n] = strdup(key);
	ks->fill[ks->n] = fill;
	ks->n++;
	/* Insertion sort: keys and fills move together. */
	for (size_t i = ks->n - 1; i > 0 && strcmp(ks->keys[i - 1], ks->keys[i]) > 0; i--) {
		char *t = ks->keys[i];
		uint8_t f = ks->fill[i];

		ks->keys[i] = ks->keys[i - 1];
		ks->fill[i] = ks->fill[i - 1];
		ks->keys[i - 1] = t;
		ks->fill[i - 1] = f;
	}
}

static ssize_t
lk_find(const struct lk_set *ks, const char *key)
{
	for (size_t i = 0; i < ks->n; i++)
		if (strcmp(ks->keys[i], key) == 0)
			return (ssize_t)i;
	return -1;
}

static void
lk_remove(struct lk_set *ks, const char *key)
{
	ssize_t i = lk_find(ks, key);

	CHECK(i >= 0);
	free(ks->keys[i]);
	memmove(&ks->keys[i], &ks->keys[i + 1], (ks->n - (size_t)i - 1) * sizeof(char *));
	memmove(&ks->fill[i], &ks->fill[i + 1], ks->n - (size_t)i - 1);
	ks->n--;
}

static void
lk_put(struct t_env *e, struct lk_set *ks, const char *key, uint8_t fill)
{
	uint8_t buf[LK_SIZE];

	memset(buf, fill, sizeof(buf));
	CHECK_EQ(t_put(e->s, "b", key, buf, sizeof(buf)), 0);
	if (lk_find(ks, key) >= 0)
		lk_remove(ks, key);
	lk_add(ks, key, fill);
}

/* What S3 would list: entries and common prefixes of the sorted reference. */
static void
lk_expect(const struct lk_set *ks, const char *prefix, const char *after, unsigned limit,
          const char *delim, struct dn_list_result *r)
{
	size_t pl = strlen(prefix), dl = strlen(delim), count = 0;
	const char *lastp = NULL;
	size_t lastpl = 0, ie = 0, ip = 0;

	if (limit == 0)
		limit = 1000;
	for (size_t i = 0; i < ks->n; i++) {
		const char *k = ks->keys[i], *d;

		if (strncmp(k, prefix, pl) != 0)
			continue;
		d = dl ? strstr(k + pl, delim) : NULL;
		if (d) {
			size_t cl = (size_t)(d - k) + dl;
			char *cp = strndup(k, cl);
			bool skip = strcmp(cp, after) <= 0 ||
			            (lastp && lastpl == cl && strncmp(lastp, k, cl) == 0);

			free(cp);
			if (skip)
				continue;
			if (count == limit) {
				CHECK(r->truncated);
				goto out;
			}
			CHECK(ip < r->nprefixes);
			CHECK(strlen(r->prefixes[ip]) == cl &&
			      strncmp(r->prefixes[ip], k, cl) == 0);
			ip++;
			lastp = k;
			lastpl = cl;
			count++;
			continue;
		}
		if (strcmp(k, after) <= 0)
			continue;
		if (count == limit) {
			CHECK(r->truncated);
			goto out;
		}
		CHECK(ie < r->nentries);
		if (strcmp(r->entries[ie].key, k) != 0) {
			fprintf(stderr, "list(%zu,%zu,%u,%s): entry %zu is %zu bytes, want %zu\n",
			        pl, strlen(after), limit, delim, ie, strlen(r->entries[ie].key),
			        strlen(k));
			abort();
		}
		CHECK_EQ(r->entries[ie].size, LK_SIZE);
		ie++;
		count++;
	}
	CHECK(!r->truncated);
out:
	CHECK_EQ(ie, r->nentries);
	CHECK_EQ(ip, r->nprefixes);
}

static void
lk_list(struct t_env *e, const struct lk_set *ks, const char *prefix, const char *after,
        unsigned limit, const char *delim)
{
	struct dn_list_result r;

	CHECK_EQ(dn_list(e->s, "b", prefix, after, limit, delim, &r), 0);
	lk_expect(ks, prefix, after, limit, delim, &r);
	dn_list_result_fini(&r);
}

/* Page through with limit, following next_start_after: every key of prefix, in order. */
static void
lk_pages(struct t_env *e, const struct lk_set *ks, const char *prefix, unsigned limit)
{
	char *after = strdup("");
	size_t at = 0, pl = strlen(prefix);

	for (;;) {
		struct dn_list_result r;
		bool more;

		CHECK_EQ(dn_list(e->s, "b", prefix, after, limit, "", &r), 0);
		CHECK(r.nentries <= limit);
		for (size_t i = 0; i < r.nentries; i++) {
			while (at < ks->n && strncmp(ks->keys[at], prefix, pl) != 0)
				at++;
			CHECK(at < ks->n);
			CHECK(strcmp(r.entries[i].key, ks->keys[at]) == 0);
			at++;
		}
		more = r.truncated;
		free(after);
		after = more ? strdup(r.next_start_after) : NULL;
		dn_list_result_fini(&r);
		if (!more)
			break;
	}
	while (at < ks->n && strncmp(ks->keys[at], prefix, pl) != 0)
		at++;
	CHECK_EQ(at, ks->n);
}

/* Every key reads back its own bytes; the listing matches the reference every way. */
static void
lk_check(struct t_env *e, const struct lk_set *ks, const char *c)
{
	static const size_t plens[] = { 0, 2, 100, 300, 301, 509, 510, 600 };
	static const unsigned limits[] = { 0, 1, 5 };
	char prefix[700], after[1100];
	uint8_t want[LK_SIZE];

	for (size_t i = 0; i < ks->n; i++) {
		struct dn_object_info info;

		memset(want, ks->fill[i], sizeof(want));
		CHECK_EQ(t_check_read(e->s, "b", ks->keys[i], 0, 0, false, want, sizeof(want)), 0);
		CHECK_EQ(dn_stat(e->s, "b", ks->keys[i], &info), 0);
		CHECK_EQ(info.size, LK_SIZE);
		dn_object_info_fini(&info);
	}
	for (size_t p = 0; p < sizeof(plens) / sizeof(plens[0]); p++) {
		snprintf(prefix, sizeof(prefix), "%.*s", (int)plens[p], c);
		/* start after: nothing, each third key, and names between keys */
		for (size_t a = 0; a <= ks->n + 2; a += 3) {
			if (a < ks->n)
				snprintf(after, sizeof(after), "%s", ks->keys[a]);
			else if (a == ks->n)
				snprintf(after, sizeof(after), "%.700sm", c);
			else
				after[0] = 0;
			for (size_t l = 0; l < sizeof(limits) / sizeof(limits[0]); l++) {
				lk_list(e, ks, prefix, after, limits[l], "");
				lk_list(e, ks, prefix, after, limits[l], "/");
			}
		}
		lk_pages(e, ks, prefix, 4);
	}
	lk_pages(e, ks, "", 1);
}

/* A cursor on replica `drive`'s objects table, read-only or in a write transaction. */
struct lk_cursor {
	MDB_env *env;
	MDB_txn *txn;
	MDB_cursor *cur;
	size_t maxkey;
};

static void
lk_cursor_open(struct lk_cursor *lc, const char *drive, bool write)
{
	char dir[400];
	MDB_dbi dbi;

	snprintf(dir, sizeof(dir), "%s/meta", drive);
	CHECK_EQ(mdb_env_create(&lc->env), 0);
	CHECK_EQ(mdb_env_set_maxdbs(lc->env, 8), 0);
	CHECK_EQ(mdb_env_open(lc->env, dir, write ? 0 : MDB_RDONLY | MDB_NOLOCK, 0644), 0);
	CHECK_EQ(mdb_txn_begin(lc->env, NULL, write ? 0 : MDB_RDONLY, &lc->txn), 0);
	CHECK_EQ(mdb_dbi_open(lc->txn, "objects", 0, &dbi), 0);
	CHECK_EQ(mdb_cursor_open(lc->txn, dbi, &lc->cur), 0);
	lc->maxkey = (size_t)mdb_env_get_maxkeysize(lc->env);
}

/* Close it; a write transaction commits. */
static void
lk_cursor_close(struct lk_cursor *lc, bool write)
{
	mdb_cursor_close(lc->cur);
	if (write)
		CHECK_EQ(mdb_txn_commit(lc->txn), 0);
	else
		mdb_txn_abort(lc->txn);
	mdb_env_close(lc->env);
}

/* LMDB records of the objects table under a key of LMDB's maximum size (bundles). */
static unsigned
lk_bundles(const char *drive)
{
	struct lk_cursor lc;
	unsigned n = 0;
	MDB_val k, v;

	lk_cursor_open(&lc, drive, false);
	for (int op = MDB_FIRST; mdb_cursor_get(lc.cur, &k, &v, op) == 0; op = MDB_NEXT)
		n += k.mv_size == lc.maxkey;
	lk_cursor_close(&lc, false);
	return n;
}

/*
 * Keys of 400..1024 bytes, many sharing a 600-byte prefix, and short keys that are
 * prefixes of them: with bucket "b" a name of 511 bytes or more (a key of 509 or more)
 * lives in a bundle. Put, overwrite, read, stat, delete, compose and list them as any
 * other key, across a reopen and a replica copied over a garbled one.
 */
static void
long_keys(void)
{
	struct lk_set ks = { 0 };
	struct t_env e;
	char c[601], k[1100], k2[1100], big[256];
	uint8_t buf[2 * LK_SIZE];
	struct dn_write_result res;
	struct dn_object_info info;
	unsigned fill = 1;

	/* The common prefix: "d/", lowercase letters, '/' at 250 and 550. */
	for (size_t i = 0; i < 600; i++)
		c[i] = i == 1 || i == 250 || i == 550 ? '/' : (char)('a' + (i * 7) % 26);
	c[0] = 'd';
	c[600] = 0;
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(dn_bucket_create(e.s, "c", NULL), 0);
	/* A bucket holding one bundled key only: never in b's listings, and not empty. */
	snprintf(k, sizeof(k), "%s%0424d", c, 7);
	CHECK_EQ(strlen(k), 1024);
	memset(buf, 9, LK_SIZE);
	CHECK_EQ(t_put(e.s, "c", k, buf, LK_SIZE), 0);
	CHECK_EQ(dn_bucket_delete(e.s, "c"), ZC_E(ZC_BUCKET_NOT_EMPTY));
	/* Prefixes of the long keys: 508 plain, 509 and 510 bundled (rest "" and "x"). */
	static const size_t shorts[] = { 100, 400, 508, 509, 510, 511, 600 };
	for (size_t i = 0; i < sizeof(shorts) / sizeof(shorts[0]); i++) {
		snprintf(k, sizeof(k), "%.*s", (int)shorts[i], c);
		lk_put(&e, &ks, k, (uint8_t)fill++);
	}
	/* Sharing all 600 bytes, 601..1024 long, some with a '/' in the tail. */
	for (unsigned i = 0; i < 30; i++) {
		size_t len = 601 + (i * 37) % 424;

		snprintf(k, sizeof(k), "%s%02u%s", c, 29 - i, i % 3 == 0 ? "x/" : "q");
		while (strlen(k) < len)
			strcat(k, i % 2 ? "r" : "s");
		k[len] = 0;
		lk_put(&e, &ks, k, (uint8_t)fill++);
	}
	snprintf(k, sizeof(k), "%s%0424d", c, 0); /* exactly 1024 */
	lk_put(&e, &ks, k, (uint8_t)fill++);
	/* Differing from the prefix inside the bundle key, on both sides of it. */
	snprintf(k, sizeof(k), "%.300sZ%0599d", c, 1);
	lk_put(&e, &ks, k, (uint8_t)fill++);
	snprintf(k, sizeof(k), "%.300sA%0699d", c, 2);
	lk_put(&e, &ks, k, (uint8_t)fill++);
	/* Long keys with nothing in common with the others, 400..1023 bytes. */
	for (unsigned i = 0; i < 5; i++) {
		size_t len = 400 + i * 155;

		snprintf(k, sizeof(k), "e/%u", i);
		for (size_t j = strlen(k); j < len; j++)
			k[j] = (char)('a' + (t_rand() % 26));
		k[len] = 0;
		lk_put(&e, &ks, k, (uint8_t)fill++);
	}
	lk_put(&e, &ks, "a", (uint8_t)fill++);
	lk_put(&e, &ks, "zz", (uint8_t)fill++);
	/* Beyond the contract: refused, not stored. */
	snprintf(k, sizeof(k), "%s%0425d", c, 0);
	memset(buf, 1, LK_SIZE);
	CHECK_EQ(t_put(e.s, "b", k, buf, LK_SIZE), -EINVAL);
	CHECK(lk_bundles(e.dirs[0]) >= 4);
	CHECK_EQ(t_count_files(&e), 3 * (ks.n + 1));
	lk_check(&e, &ks, c);

	/* Overwrites: the old version's extent is freed once, its files go. */
	for (size_t i = 0; i < ks.n; i += 4) {
		snprintf(k, sizeof(k), "%s", ks.keys[i]);
		lk_put(&e, &ks, k, (uint8_t)fill++);
	}
	snprintf(k, sizeof(k), "%.509s", c); /* the bundle entry with rest "" */
	lk_put(&e, &ks, k, (uint8_t)fill++);
	CHECK_EQ(t_count_files(&e), 3 * (ks.n + 1));
	lk_check(&e, &ks, c);

	/* Deletes: every third key (a bundle emptied of some, others kept). */
	for (size_t i = 0; i < ks.n; i += 2) {
		snprintf(k, sizeof(k), "%s", ks.keys[i]);
		CHECK_EQ(dn_delete(e.s, "b", k), 1);
		CHECK_EQ(dn_delete(e.s, "b", k), 0);
		CHECK_EQ(dn_stat(e.s, "b", k, &info), ZC_E(ZC_NO_KEY));
		lk_remove(&ks, k);
	}
	CHECK_EQ(t_count_files(&e), 3 * (ks.n + 1));
	lk_check(&e, &ks, c);

	/* Compose two bundled keys into a third, dropping them; then copy it (one part). */
	{
		const char *parts[2];
		char a[1100], b[1100];
		uint8_t fa, fb;
		ssize_t ia, ib;

		ia = (ssize_t)ks.n - 3;
		ib = (ssize_t)ks.n - 5;
		while (strlen(ks.keys[ia]) < 509)
			ia--;
		while (ib >= 0 && (ib == ia || strlen(ks.keys[ib]) < 509))
			ib--;
		CHECK(ib >= 0);
		snprintf(a, sizeof(a), "%s", ks.keys[ia]);
		snprintf(b, sizeof(b), "%s", ks.keys[ib]);
		fa = ks.fill[ia];
		fb = ks.fill[ib];
		parts[0] = a;
		parts[1] = b;
		snprintf(k, sizeof(k), "%s%s", c, "composed");
		CHECK_EQ(dn_compose(e.s, "b", k, NULL, parts, 2, true, "c2", NULL, 0, &res), 0);
		CHECK_EQ(res.size, 2 * LK_SIZE);
		memset(buf, fa, LK_SIZE);
		memset(buf + LK_SIZE, fb, LK_SIZE);
		CHECK_EQ(t_check_read(e.s, "b", k, 0, 0, false, buf, 2 * LK_SIZE), 0);
		CHECK_EQ(dn_stat(e.s, "b", a, &info), ZC_E(ZC_NO_KEY));
		CHECK_EQ(dn_stat(e.s, "b", b, &info), ZC_E(ZC_NO_KEY));
		parts[0] = k;
		snprintf(k2, sizeof(k2), "%s%s", c, "copy");
		CHECK_EQ(dn_compose(e.s, "b", k2, NULL, parts, 1, false, "c1", NULL, 0, &res), 0);
		CHECK_EQ(t_check_read(e.s, "b", k2, 0, 0, false, buf, 2 * LK_SIZE), 0);
		CHECK_EQ(t_count_files(&e), 3 * (ks.n + 1)); /* shared, nothing new */
		lk_remove(&ks, a);
		lk_remove(&ks, b);
		CHECK_EQ(dn_delete(e.s, "b", k), 1);
		CHECK_EQ(t_check_read(e.s, "b", k2, 0, 0, false, buf, 2 * LK_SIZE), 0);
		CHECK_EQ(dn_delete(e.s, "b", k2), 1);
		CHECK_EQ(t_count_files(&e), 3 * (ks.n + 1));
	}
	lk_check(&e, &ks, c);

	/* Across a reopen; then a garbled replica is copied back from the others. */
	t_close(&e);
	check_replicas_equal(&e);
	t_open(&e);
	lk_check(&e, &ks, c);
	t_close(&e);
	garble(e.dirs[0]);
	t_open(&e);
	t_close(&e);
	check_replicas_equal(&e);
	CHECK(lk_bundles(e.dirs[0]) >= 2);
	t_open(&e);
	lk_check(&e, &ks, c);

	/* The longest name: a 255-byte bucket and a 1024-byte key. */
	memset(big, 'x', 255);
	big[255] = 0;
	CHECK_EQ(dn_bucket_create(e.s, big, NULL), 0);
	snprintf(k, sizeof(k), "%s%0424d", c, 3);
	memset(buf, 5, LK_SIZE);
	CHECK_EQ(t_put(e.s, big, k, buf, LK_SIZE), 0);
	CHECK_EQ(t_check_read(e.s, big, k, 0, 0, false, buf, LK_SIZE), 0);
	{
		struct dn_list_result r;

		CHECK_EQ(dn_list(e.s, big, c, NULL, 0, NULL, &r), 0);
		CHECK_EQ(r.nentries, 1);
		CHECK(strcmp(r.entries[0].key, k) == 0);
		dn_list_result_fini(&r);
	}
	CHECK_EQ(dn_bucket_delete(e.s, big), ZC_E(ZC_BUCKET_NOT_EMPTY));
	CHECK_EQ(dn_delete(e.s, big, k), 1);
	CHECK_EQ(dn_bucket_delete(e.s, big), 0);

	/* Empty everything: no cell file and no bundle is left. */
	CHECK_EQ(dn_bucket_delete(e.s, "b"), ZC_E(ZC_BUCKET_NOT_EMPTY));
	while (ks.n) {
		snprintf(k, sizeof(k), "%s", ks.keys[0]);
		CHECK_EQ(dn_delete(e.s, "b", k), 1);
		lk_remove(&ks, k);
	}
	CHECK_EQ(dn_bucket_delete(e.s, "b"), 0);
	snprintf(k, sizeof(k), "%s%0424d", c, 7);
	CHECK_EQ(dn_delete(e.s, "c", k), 1);
	CHECK_EQ(dn_bucket_delete(e.s, "c"), 0);
	CHECK_EQ(t_count_files(&e), 0);
	t_close(&e);
	CHECK_EQ(lk_bundles(e.dirs[0]), 0);
	t_env_fini(&e);
}

/*
 * Rewrite every one-entry bundle whose entry is the prefix's own name (rest "") as the
 * plain record a store written before bundles holds under a key of LMDB's maximum size.
 */
static unsigned
lk_unbundle(const char *drive)
{
	struct lk_cursor lc;
	unsigned n = 0;
	MDB_val k, v;

	lk_cursor_open(&lc, drive, true);
	for (int op = MDB_FIRST; mdb_cursor_get(lc.cur, &k, &v, op) == 0; op = MDB_NEXT) {
		const uint8_t *p = v.mv_data;
		uint32_t w[4];

		if (k.mv_size != lc.maxkey || v.mv_size < 16)
			continue;
		memcpy(w, p, 16); /* version, count, rest length, record length */
		if (w[1] != 1 || w[2] != 0 || v.mv_size != 16 + (size_t)w[3])
			continue;
		{
			uint8_t *rec = malloc(w[3]);
			MDB_val nv = { w[3], rec };

			CHECK(rec);
			memcpy(rec, p + 16, w[3]);
			CHECK_EQ(mdb_cursor_put(lc.cur, &k, &nv, MDB_CURRENT), 0);
			free(rec);
			n++;
		}
	}
	lk_cursor_close(&lc, true);
	return n;
}

/*
 * LMDB always took keys of exactly its maximum size: a store from before bundles may hold
 * a plain record for a name of 511 bytes. It reads, lists, and turns into a bundle when a
 * longer name with the same prefix arrives; overwrite and delete free its cells once.
 */
static void
long_keys_plain_record(void)
{
	struct t_env e;
	char k[600], kt[620];
	uint8_t a[LK_SIZE], b[LK_SIZE], c[LK_SIZE];
	struct dn_list_result r;

	memset(a, 3, sizeof(a));
	memset(b, 4, sizeof(b));
	memset(c, 5, sizeof(c));
	memset(k, 'k', 509); /* "b\0" + 509 bytes: a 511-byte name */
	k[509] = 0;
	snprintf(kt, sizeof(kt), "%s/tail", k);
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(t_put(e.s, "b", k, a, sizeof(a)), 0);
	t_close(&e);
	for (unsigned i = 0; i <= e.o.m; i++)
		CHECK_EQ(lk_unbundle(e.dirs[i]), 1);
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", k, 0, 0, false, a, sizeof(a)), 0);
	CHECK_EQ(dn_list(e.s, "b", "", NULL, 0, NULL, &r), 0);
	CHECK(r.nentries == 1 && strcmp(r.entries[0].key, k) == 0);
	dn_list_result_fini(&r);
	CHECK_EQ(t_put(e.s, "b", kt, b, sizeof(b)), 0); /* the plain record joins a bundle */
	CHECK_EQ(t_check_read(e.s, "b", k, 0, 0, false, a, sizeof(a)), 0);
	CHECK_EQ(t_check_read(e.s, "b", kt, 0, 0, false, b, sizeof(b)), 0);
	CHECK_EQ(dn_list(e.s, "b", "", NULL, 0, NULL, &r), 0);
	CHECK(r.nentries == 2 && strcmp(r.entries[0].key, k) == 0 &&
	      strcmp(r.entries[1].key, kt) == 0);
	dn_list_result_fini(&r);
	CHECK_EQ(t_count_files(&e), 6);
	/* Back to plain, then overwritten and deleted in place. */
	CHECK_EQ(dn_delete(e.s, "b", kt), 1);
	t_close(&e);
	for (unsigned i = 0; i <= e.o.m; i++)
		CHECK_EQ(lk_unbundle(e.dirs[i]), 1);
	t_open(&e);
	CHECK_EQ(t_put(e.s, "b", k, c, sizeof(c)), 0);
	CHECK_EQ(t_check_read(e.s, "b", k, 0, 0, false, c, sizeof(c)), 0);
	CHECK_EQ(t_count_files(&e), 3);
	CHECK_EQ(dn_bucket_delete(e.s, "b"), ZC_E(ZC_BUCKET_NOT_EMPTY));
	CHECK_EQ(dn_delete(e.s, "b", k), 1);
	CHECK_EQ(dn_delete(e.s, "b", k), 0);
	CHECK_EQ(dn_bucket_delete(e.s, "b"), 0);
	CHECK_EQ(t_count_files(&e), 0);
	t_close(&e);
	CHECK_EQ(lk_bundles(e.dirs[0]), 0);
	t_env_fini(&e);
}

int
main(void)
{
	replicas();
	replica_revive();
	buckets();
	overwrite();
	listing();
	compose();
	compose_cross_bucket();
	long_keys();
	long_keys_plain_record();
	printf("ok\n");
	return 0;
}
