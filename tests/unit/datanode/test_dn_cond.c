/*
 * Conditional commits (struct dn_cond): If-None-Match and If-Match checked inside the
 * metadata transaction of a write's commit and of a compose, a refused commit leaving
 * the old version and no files behind, and commits of one key racing in one batch with
 * exactly one winner.
 */
#include "dn_test.h"

struct cwait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
};

static void
cwait_cb(void *arg, int err, const struct dn_write_result *res)
{
	struct cwait *cw = arg;

	(void)res;
	pthread_mutex_lock(&cw->lock);
	cw->err = err;
	cw->done = true;
	pthread_cond_signal(&cw->cond);
	pthread_mutex_unlock(&cw->lock);
}

static int
cwait_wait(struct cwait *cw)
{
	pthread_mutex_lock(&cw->lock);
	while (!cw->done)
		pthread_cond_wait(&cw->cond, &cw->lock);
	pthread_mutex_unlock(&cw->lock);
	return cw->err;
}

/* Write buf as bucket/key with this ETag under cond; the commit's outcome. */
static int
put_if(struct dn_store *s, const char *key, const uint8_t *buf, size_t len, const char *etag,
       const struct dn_cond *cond)
{
	struct cwait cw = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	struct dn_write *w;
	int err = t_feed(s, "b", key, buf, len, 5000, true, &w);

	if (err)
		return err;
	dn_write_commit_if(w, etag, NULL, 0, cond, cwait_cb, &cw);
	return cwait_wait(&cw);
}

static void
etag_is(struct dn_store *s, const char *key, const char *want)
{
	struct dn_object_info info;

	CHECK_EQ(dn_stat(s, "b", key, &info), 0);
	CHECK(strcmp(info.etag, want) == 0);
	dn_object_info_fini(&info);
}

static void
write_conditions(void)
{
	struct t_env e;
	uint8_t a[30000], b[20001];
	struct dn_cond inm = { true, NULL }, im_ok = { false, "e1" }, im_bad = { false, "nope" },
	               im_any = { false, "*" };
	unsigned files;

	t_fill(a, sizeof(a));
	t_fill(b, sizeof(b));
	t_env_open(&e, 6, 4, 2, "b");
	/* If-None-Match: creates once, then refuses and keeps the first version. */
	CHECK_EQ(put_if(e.s, "k", a, sizeof(a), "e1", &inm), 0);
	files = t_count_files(&e);
	CHECK_EQ(put_if(e.s, "k", b, sizeof(b), "e2", &inm), ZC_E(ZC_PRECONDITION));
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, a, sizeof(a)), 0);
	etag_is(e.s, "k", "e1");
	CHECK_EQ(t_count_files(&e), files); /* the refused write's cells are gone */
	/* If-Match: a wrong ETag refuses, the right one replaces, "*" takes any. */
	CHECK_EQ(put_if(e.s, "k", b, sizeof(b), "e2", &im_bad), ZC_E(ZC_PRECONDITION));
	etag_is(e.s, "k", "e1");
	CHECK_EQ(put_if(e.s, "k", b, sizeof(b), "e2", &im_ok), 0);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, b, sizeof(b)), 0);
	etag_is(e.s, "k", "e2");
	CHECK_EQ(put_if(e.s, "k", a, sizeof(a), "e3", &im_any), 0);
	etag_is(e.s, "k", "e3");
	/* If-Match on a missing key: NoSuchKey; nothing made. */
	CHECK_EQ(put_if(e.s, "none", a, sizeof(a), "x", &im_any), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_stat(e.s, "b", "none", &(struct dn_object_info){ 0 }), ZC_E(ZC_NO_KEY));
	/* An empty condition is none. */
	CHECK_EQ(put_if(e.s, "k", a, 0, "e4", &(struct dn_cond){ false, "" }), 0);
	etag_is(e.s, "k", "e4");
	CHECK_EQ(dn_delete(e.s, "b", "k"), 1);
	CHECK_EQ(t_count_files(&e), 0);
	t_env_fini(&e);
}

/* Compose of one part keeping the source: the datanode side of a server-side copy. */
static void
compose_conditions(void)
{
	struct t_env e;
	uint8_t a[45000];
	const char *src[] = { "src" };
	struct dn_cond inm = { true, NULL }, im_bad = { false, "x" };
	struct dn_write_result res;

	t_fill(a, sizeof(a));
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(t_put(e.s, "b", "src", a, sizeof(a)), 0);
	CHECK_EQ(dn_compose_if(e.s, "b", "dst", NULL, src, NULL, 1, false, "s-etag", NULL, 0, &inm,
	                       &res),
	         0);
	CHECK_EQ(res.size, sizeof(a));
	CHECK_EQ(t_check_read(e.s, "b", "dst", 0, 0, false, a, sizeof(a)), 0);
	CHECK_EQ(t_check_read(e.s, "b", "src", 0, 0, false, a, sizeof(a)), 0);
	etag_is(e.s, "dst", "s-etag");
	CHECK_EQ(
	        dn_compose_if(e.s, "b", "dst", NULL, src, NULL, 1, false, "t", NULL, 0, &inm, &res),
	        ZC_E(ZC_PRECONDITION));
	CHECK_EQ(dn_compose_if(e.s, "b", "dst", NULL, src, NULL, 1, false, "t", NULL, 0, &im_bad,
	                       &res),
	         ZC_E(ZC_PRECONDITION));
	etag_is(e.s, "dst", "s-etag");
	CHECK_EQ(dn_compose_if(e.s, "b", "dst", NULL, src, NULL, 1, false, "t", NULL, 0,
	                       &(struct dn_cond){ false, "s-etag" }, &res),
	         0);
	etag_is(e.s, "dst", "t");
	/* The source's version pinned by its ETag ("etag", as t_put stores it): another one
	 * refuses with ZC_E(ZC_CHANGED) and changes nothing. */
	CHECK_EQ(dn_compose_if(e.s, "b", "dst", NULL, src, (const char *[]){ "old" }, 1, false, "u",
	                       NULL, 0, NULL, &res),
	         ZC_E(ZC_CHANGED));
	etag_is(e.s, "dst", "t");
	CHECK_EQ(dn_compose_if(e.s, "b", "dst", NULL, src, (const char *[]){ "etag" }, 1, false,
	                       "u", NULL, 0, NULL, &res),
	         0);
	etag_is(e.s, "dst", "u");
	/* Onto itself (a copy that replaces the metadata): the data stays. */
	CHECK_EQ(dn_compose(e.s, "b", "src", NULL, src, 1, false, "new", NULL, 0, &res), 0);
	CHECK_EQ(t_check_read(e.s, "b", "src", 0, 0, false, a, sizeof(a)), 0);
	etag_is(e.s, "src", "new");
	CHECK_EQ(dn_delete(e.s, "b", "src"), 1);
	CHECK_EQ(t_check_read(e.s, "b", "dst", 0, 0, false, a, sizeof(a)), 0);
	CHECK_EQ(dn_delete(e.s, "b", "dst"), 1);
	CHECK_EQ(t_count_files(&e), 0);
	t_env_fini(&e);
}

/*
 * Writes of one key with If-None-Match, all finished before any commits, then committed
 * back to back: the commit thread batches them into one transaction, where each sees the
 * ones before it. Exactly one wins, and the object is the winner's.
 */
#define NRACE 8
static void
race(void)
{
	struct t_env e;
	static uint8_t buf[NRACE][9000];
	struct dn_write *w[NRACE];
	struct cwait cw[NRACE];
	struct dn_cond inm = { true, NULL };
	char etag[NRACE][8];
	int won = -1;

	t_env_open(&e, 6, 4, 2, "b");
	for (int round = 0; round < 3; round++) {
		char key[16];

		snprintf(key, sizeof(key), "race%d", round);
		for (int i = 0; i < NRACE; i++) {
			t_fill(buf[i], sizeof(buf[i]));
			snprintf(etag[i], sizeof(etag[i]), "w%d", i);
			cw[i] = (struct cwait){ PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
				                false, 0 };
			CHECK_EQ(t_feed(e.s, "b", key, buf[i], sizeof(buf[i]), 5000, true, &w[i]),
			         0);
		}
		for (int i = 0; i < NRACE; i++)
			dn_write_commit_if(w[i], etag[i], NULL, 0, &inm, cwait_cb, &cw[i]);
		won = -1;
		for (int i = 0; i < NRACE; i++) {
			int err = cwait_wait(&cw[i]);

			if (err == 0) {
				CHECK_EQ(won, -1);
				won = i;
			} else {
				CHECK_EQ(err, ZC_E(ZC_PRECONDITION));
			}
		}
		CHECK(won >= 0);
		etag_is(e.s, key, etag[won]);
		CHECK_EQ(t_check_read(e.s, "b", key, 0, 0, false, buf[won], sizeof(buf[won])), 0);
		CHECK_EQ(dn_delete(e.s, "b", key), 1);
	}
	CHECK_EQ(t_count_files(&e), 0);
	t_env_fini(&e);
}

int
main(void)
{
	write_conditions();
	compose_conditions();
	race();
	printf("ok\n");
	return 0;
}
