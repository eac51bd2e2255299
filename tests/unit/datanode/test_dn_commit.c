/*
 * Group commits of small writes, counted (never timed): concurrent small writes share the
 * metadata transactions, every metadata replica takes each of them, and a file written in
 * one write carries its own sync instead of a separate fdatasync, while files written in
 * several writes keep theirs. Both data-cell modes.
 */
#include <stdatomic.h>
#include <stdint.h>

#include "dn_test.h"
#include "dn_internal.h"
#include "dn_meta_internal.h" /* the metadata write lock, held to stall commits */

enum { NW = 16, SMALL = 4096 };

struct count {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned done, failed;
};

static void
count_cb(void *arg, int err, const struct dn_write_result *res)
{
	struct count *c = arg;

	(void)res;
	pthread_mutex_lock(&c->lock);
	c->done++;
	c->failed += err != 0;
	pthread_cond_broadcast(&c->cond);
	pthread_mutex_unlock(&c->lock);
}

/* Jobs ever handed to the commit thread (queued, or taken by it). */
static uint64_t
deferred(struct dn_store *s)
{
	uint64_t n;

	pthread_mutex_lock(&s->commit_lock);
	n = s->jobs_deferred;
	pthread_mutex_unlock(&s->commit_lock);
	return n;
}

/*
 * NW small writes commit while the metadata lock is held (as a slow sync would hold it):
 * the commit thread takes the first of them (maybe a few) into a transaction that waits
 * for the lock, the rest queue up and commit in one more. So at most 2 transactions
 * (whatever the timing: the test waits until all NW reached the commit thread), each applied to
 * every replica; per write exactly one folder fsync per drive it used and no fdatasync:
 * its three files (data cell 0 and two parity cells) were each written once, with
 * RWF_DSYNC.
 */
static void
small_writes_batch(bool direct)
{
	struct count c = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct dn_counters c0, c1;
	struct dn_write *w[NW];
	uint8_t buf[NW][SMALL];
	uint64_t j0;
	char key[NW][16];
	struct t_env e;
	uint64_t gen;

	t_env_init(&e, 6, 4, 2);
	e.o.data_direct = direct;
	if (dn_store_open(&e.o, &e.s) != 0) {
		printf("skip direct: the temp folder does not take O_DIRECT\n");
		t_env_fini(&e); /* the store did not open: nothing else to close */
		return;
	}
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	for (int i = 0; i < NW; i++) {
		t_fill(buf[i], SMALL);
		snprintf(key[i], sizeof(key[i]), "k%d", i);
		CHECK_EQ(t_feed(e.s, "b", key[i], buf[i], SMALL, 1000, true, &w[i]), 0);
	}
	dn_counters_get(e.s, &c0);
	j0 = deferred(e.s);
	pthread_mutex_lock(&e.s->meta->wlock);
	for (int i = 0; i < NW; i++)
		dn_write_commit(w[i], "etag", NULL, 0, count_cb, &c);
	/* Every write's cells are durable and its commit is on the commit thread. */
	for (int i = 0; i < 5000 && deferred(e.s) - j0 < NW; i++)
		usleep(2000);
	CHECK_EQ(deferred(e.s) - j0, NW);
	pthread_mutex_unlock(&e.s->meta->wlock);
	pthread_mutex_lock(&c.lock);
	while (c.done < NW)
		pthread_cond_wait(&c.cond, &c.lock);
	pthread_mutex_unlock(&c.lock);
	CHECK_EQ(c.failed, 0);
	dn_counters_get(e.s, &c1);
	printf("%s: %d writes, %llu metadata transactions, %llu dsync writes, %llu fdatasyncs, "
	       "%llu folder fsyncs\n",
	       direct ? "direct" : "buffered", NW,
	       (unsigned long long)(c1.meta_txns - c0.meta_txns),
	       (unsigned long long)(c1.dsync_writes - c0.dsync_writes),
	       (unsigned long long)(c1.file_syncs - c0.file_syncs),
	       (unsigned long long)(c1.dir_syncs - c0.dir_syncs));
	CHECK(c1.meta_txns - c0.meta_txns <= 2);
	CHECK_EQ(c1.dsync_writes - c0.dsync_writes, NW * 3);
	CHECK_EQ(c1.file_syncs - c0.file_syncs, 0);
	CHECK_EQ(c1.dir_syncs - c0.dir_syncs, NW * 3);
	CHECK_EQ(c1.objects_committed - c0.objects_committed, NW);
	/* Every replica took every transaction. */
	gen = dn_meta_generation(e.s->meta);
	for (unsigned r = 0; r < 3; r++) {
		CHECK(dn_meta_replica_live(e.s->meta, r));
		CHECK_EQ(dn_meta_replica_generation(e.s->meta, r), gen);
	}
	for (int i = 0; i < NW; i++)
		CHECK_EQ(t_check_read(e.s, "b", key[i], 0, 0, false, buf[i], SMALL), 0);
	/* and after a restart, from whichever replica wins */
	t_close(&e);
	t_open(&e);
	for (int i = 0; i < NW; i++)
		CHECK_EQ(t_check_read(e.s, "b", key[i], 0, 0, false, buf[i], SMALL), 0);
	t_env_fini(&e);
}

/* One write of len bytes; the sync requests it cost. */
static void
put_counted(struct t_env *e, const char *key, size_t len, struct dn_counters *d)
{
	uint8_t *buf = malloc(len);
	struct dn_counters c0, c1;

	CHECK(buf);
	t_fill(buf, len);
	dn_counters_get(e->s, &c0);
	CHECK_EQ(t_put(e->s, "b", key, buf, len), 0);
	dn_counters_get(e->s, &c1);
	d->dsync_writes = c1.dsync_writes - c0.dsync_writes;
	d->file_syncs = c1.file_syncs - c0.file_syncs;
	d->dir_syncs = c1.dir_syncs - c0.dir_syncs;
	d->meta_txns = c1.meta_txns - c0.meta_txns;
	CHECK_EQ(t_check_read(e->s, "b", key, 0, 0, false, buf, len), 0);
	free(buf);
}

/*
 * Which files take their own sync: only a file's single write, sent when the write
 * commits. Cells 16 KiB, 4+2.
 */
static void
sync_kinds(bool direct)
{
	size_t cell = 16384;
	struct dn_counters d;
	struct t_env e;

	t_env_init(&e, 6, 4, 2);
	e.o.data_direct = direct;
	if (dn_store_open(&e.o, &e.s) != 0) {
		t_env_fini(&e);
		return;
	}
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	/* Two full data cells go out as they fill (the write might go on), the parity at
	 * commit: 2 fdatasyncs, 2 writes with their own sync, 4 folders. */
	put_counted(&e, "two-cells", 2 * cell, &d);
	CHECK_EQ(d.file_syncs, 2);
	CHECK_EQ(d.dsync_writes, 2);
	CHECK_EQ(d.dir_syncs, 4);
	CHECK_EQ(d.meta_txns, 1);
	/* Two stripes: every file has two writes, each keeps its fdatasync. */
	put_counted(&e, "two-stripes", 4 * cell + 100, &d);
	CHECK_EQ(d.file_syncs, 6);
	CHECK_EQ(d.dsync_writes, 0);
	CHECK_EQ(d.dir_syncs, 6);
	/* A partial cell: in direct mode padded to a block and cut back, then fdatasynced;
	 * buffered, one write with its own sync. Parity (a block) takes its own either way. */
	put_counted(&e, "odd", 1000, &d);
	CHECK_EQ(d.file_syncs, direct ? 1 : 0);
	CHECK_EQ(d.dsync_writes, direct ? 2 : 3);
	CHECK_EQ(d.dir_syncs, 3);
	t_env_fini(&e);
}

int
main(void)
{
	small_writes_batch(false);
	small_writes_batch(true);
	sync_kinds(false);
	sync_kinds(true);
	printf("ok\n");
	return 0;
}
