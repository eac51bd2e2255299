/* Buckets, overwrite visibility, delete, list (prefix, delimiter, start_after, limit), compose. */
#include <dirent.h>

#include "dn_test.h"

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

int
main(void)
{
	replicas();
	buckets();
	overwrite();
	listing();
	compose();
	compose_cross_bucket();
	printf("ok\n");
	return 0;
}
