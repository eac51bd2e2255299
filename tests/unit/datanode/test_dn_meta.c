/*
 * Buckets, overwrite visibility, delete, list (prefix, delimiter, start_after, limit), compose,
 * replicas outvoted at open and replicas a failed write dropped brought back by the healer.
 */
#include <dirent.h>
#include <sys/mount.h>

#include "dn_test.h"
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
	CHECK_EQ(dn_bucket_head(e.s, "zz", NULL), -ENOENT);
	CHECK_EQ(dn_bucket_create(e.s, "zz", &ct), 0);
	CHECK(ct > 0);
	CHECK_EQ(dn_bucket_create(e.s, "zz", &ct2), -EEXIST);
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
	CHECK_EQ(dn_bucket_delete(e.s, "aa"), -ENOTEMPTY);
	CHECK_EQ(dn_delete(e.s, "aa", "k"), 1);
	CHECK_EQ(dn_delete(e.s, "aa", "k"), 0);
	CHECK_EQ(dn_delete(e.s, "nob", "k"), -ENOENT);
	CHECK_EQ(dn_bucket_delete(e.s, "aa"), 0);
	CHECK_EQ(dn_bucket_delete(e.s, "aa"), -ENOENT);
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
	expect_list(e.s, "", "b", 0, "/", "d P:c/ ", false);
	expect_list(e.s, "", "", 3, "", "a a/1 a/2 ", true);
	expect_list(e.s, "", "a/2", 3, "", "a/b/c b c/1 ", true);
	expect_list(e.s, "", "", 2, "/", "a P:a/ ", true);
	expect_list(e.s, "", "a/", 2, "/", "b P:c/ ", true);
	expect_list(e.s, "", "c/", 2, "/", "d ", false);
	expect_list(e.s, "zz", "", 0, "", "", false);
	{
		struct dn_list_result r;

		CHECK_EQ(dn_list(e.s, "nob", "", "", 0, "", &r), -ENOENT);
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
	CHECK_EQ(res.crc32c, ec_crc32c(0, all, l1 + l2 + l3));
	CHECK_EQ(t_check_read(e.s, "b", "whole", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK_EQ(t_check_read(e.s, "b", "whole", l1 - 10, 30, true, all + l1 - 10, 30), 0);
	CHECK_EQ(dn_stat(e.s, "b", "whole", &info), 0);
	CHECK(strcmp(info.etag, "multi-3") == 0);
	dn_object_info_fini(&info);
	/* Compose again, dropping the parts: the data stays, shared by both composed objects. */
	CHECK_EQ(dn_compose(e.s, "b", "whole2", NULL, parts, 3, true, "m2", NULL, 0, &res), 0);
	CHECK_EQ(dn_stat(e.s, "b", "p1", &info), -ENOENT);
	CHECK_EQ(t_check_read(e.s, "b", "whole2", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK_EQ(dn_delete(e.s, "b", "whole"), 1);
	CHECK_EQ(t_check_read(e.s, "b", "whole2", 0, 0, false, all, l1 + l2 + l3), 0);
	CHECK(t_count_files(&e) > 0);
	/* A missing part refuses the whole compose. */
	CHECK_EQ(dn_compose(e.s, "b", "bad", NULL, parts, 3, false, "x", NULL, 0, &res), -ENOENT);
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
	CHECK_EQ(res.crc32c, ec_crc32c(0, all, l1 + l2 + l3));
	CHECK_EQ(t_check_read(e.s, "dst", "whole", 0, 0, false, all, l1 + l2 + l3), 0);
	/* The parts stay where they were. */
	CHECK_EQ(t_check_read(e.s, "src", "p1", 0, 0, false, all, l1), 0);
	CHECK_EQ(t_check_read(e.s, "other", "p3", 0, 0, false, all + l1 + l2, l3), 0);
	/* A part's bucket that does not exist, or a key missing there: -ENOENT, nothing made. */
	CHECK_EQ(dn_compose(e.s, "dst", "bad", nob, parts, 3, false, "x", NULL, 0, &res), -ENOENT);
	CHECK_EQ(dn_compose(e.s, "dst", "bad", buckets + 1, parts, 2, false, "x", NULL, 0, &res),
	         -ENOENT); /* p1 is not in dst */
	CHECK_EQ(dn_stat(e.s, "dst", "bad", &info), -ENOENT);
	/* delete_parts drops each part from its own bucket, in the same transaction. */
	CHECK_EQ(dn_compose(e.s, "dst", "whole2", buckets, parts, 3, true, "y", NULL, 0, &res), 0);
	CHECK_EQ(dn_stat(e.s, "src", "p1", &info), -ENOENT);
	CHECK_EQ(dn_stat(e.s, "dst", "p2", &info), -ENOENT);
	CHECK_EQ(dn_stat(e.s, "other", "p3", &info), -ENOENT);
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
	dn_meta_inject_error(e.s->meta, 1, -ENOSPC);
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
	e.s->o.full_probe_ns = 0;
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
	dn_meta_inject_error(e.s->meta, 0, -EIO);
	dn_meta_inject_error(e.s->meta, 2, -EIO);
	CHECK_EQ(t_put(e.s, "b", "o4", a, 4000), 0);
	CHECK(dn_meta_replica_live(e.s->meta, 1));
	CHECK_EQ(t_check_read(e.s, "b", "o0", 0, 0, false, a, 0), -ENOENT);
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
	dn_meta_inject_error(e.s->meta, 2, -ENOSPC);
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
		dn_meta_inject_error(e.s->meta, r, -EIO);
	CHECK_EQ(t_put(e.s, "b", "lost", a, 7000), -EIO);
	CHECK_EQ(t_check_read(e.s, "b", "lost", 0, 0, false, a, 0), -ENOENT);
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
	printf("ok\n");
	return 0;
}
