/*
 * Test helpers for datanode/: temp drive folders, a store over them, payload fed as
 * random unaligned segments that each own a refcounted "slice" (as gRPC's receive slices
 * do), a synchronous commit and a read into one buffer.
 *
 * With rpc.h included first, also the zest.Datanode client side shared by test_dn_rpc.c
 * and tests/integration/dn_client.c: a whole-object put and a streamed get. Define
 * DN_TEST_RPC_ONLY (dn_client, which has no store) to leave out the store helpers.
 */
#ifndef ZEST_TEST_DN_H
#define ZEST_TEST_DN_H

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "t_check.h"

static _Thread_local uint64_t t_rng =
        0x9e3779b97f4a7c15ull; /* per thread: writers race otherwise */

static inline uint64_t
t_rand(void)
{
	t_rng ^= t_rng << 13;
	t_rng ^= t_rng >> 7;
	t_rng ^= t_rng << 17;
	return t_rng;
}

static inline void
t_fill(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)(t_rand() >> 24);
}

#ifndef DN_TEST_RPC_ONLY
#include <ftw.h>
#include <liburing.h>

#include "dn.h"
#include "dn_cells.h"
#include "ec.h"
#include "zc_crc.h"
#include "zc_fault.h"

/* Exit 77 (skip) when the kernel gives us no io_uring. */
static inline void
t_require_uring(void)
{
	struct io_uring r;

	if (io_uring_queue_init(4, &r, 0) < 0) {
		fprintf(stderr, "io_uring unavailable: skipping\n");
		exit(77);
	}
	io_uring_queue_exit(&r);
}

struct t_env {
	char root[256];
	char dirs[16][300];
	const char *drives[16];
	unsigned n;
	struct dn_store_opts o;
	struct dn_store *s;
};

static int
t_rm(const char *p, const struct stat *sb, int flag, struct FTW *f)
{
	(void)sb;
	(void)flag;
	(void)f;
	return remove(p);
}

static inline void
t_rmrf(const char *path)
{
	nftw(path, t_rm, 16, FTW_DEPTH | FTW_PHYS);
}

/* Small cells so that many stripes and groups stay cheap. */
static inline void
t_env_init(struct t_env *e, unsigned ndrives, unsigned k, unsigned m)
{
	const char *base = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";

	t_require_uring();
	memset(e, 0, sizeof(*e));
	snprintf(e->root, sizeof(e->root), "%s/zest-dn-XXXXXX", base);
	CHECK(mkdtemp(e->root));
	e->n = ndrives;
	for (unsigned i = 0; i < ndrives; i++) {
		snprintf(e->dirs[i], sizeof(e->dirs[i]), "%s/d%u", e->root, i);
		e->drives[i] = e->dirs[i];
	}
	dn_store_opts_default(&e->o);
	e->o.drives = e->drives;
	e->o.ndrives = ndrives;
	e->o.k = k;
	e->o.m = m;
	e->o.cell_size = 16384;
	e->o.chunk_size = 4096;
	e->o.stripes_per_group = 4;
	e->o.queue_depth = 16;
	e->o.parity_bufs = 8;
	e->o.meta_map_size = 64 << 20;
	e->o.side = &dn_cells_side; /* as zest-datanode wires it (dn_config.c) */
}

static inline void
t_open(struct t_env *e)
{
	CHECK_EQ(dn_store_open(&e->o, &e->s), 0);
}

/* The usual start: ndrives temp folders, a k+m store open over them, bucket (if any). */
static inline void
t_env_open(struct t_env *e, unsigned ndrives, unsigned k, unsigned m, const char *bucket)
{
	t_env_init(e, ndrives, k, m);
	t_open(e);
	if (bucket)
		CHECK_EQ(dn_bucket_create(e->s, bucket, NULL), 0);
}

/* Cell files on all drives (what a leak of an extent's files would show in). */
static inline unsigned
t_count_files(struct t_env *e)
{
	char cmd[400];
	unsigned n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "find %s -path '*/data/*' -type f | wc -l", e->root);
	p = popen(cmd, "r");
	CHECK(p && fscanf(p, "%u", &n) == 1);
	pclose(p);
	return n;
}

static inline void
t_close(struct t_env *e)
{
	dn_store_close(e->s);
	e->s = NULL;
}

static inline void
t_env_fini(struct t_env *e)
{
	if (e->s)
		t_close(e);
#ifdef ZC_FAULTS
	zc_fault_clear(); /* a fault armed for this store ends with it */
#endif
	t_rmrf(e->root);
	CHECK_EQ(zc_ref_live(), 0);
}

/* A received "slice": its own copy of the bytes at an odd address, freed on last put. */
struct t_slice {
	struct zc_ref ref;
	uint8_t pad[3];
	uint8_t data[];
};

static void
t_slice_release(struct zc_ref *ref)
{
	free(ref);
}

/*
 * Cut the next 1..cap segments of buf[*at..len), each 1..max_seg bytes, into
 * separately refcounted heap slices (the caller puts each ref), as a transport's receive
 * slices would arrive. Advances *at; returns the number of segments.
 */
static inline unsigned
t_slices_next(const uint8_t *buf, size_t *at, size_t len, size_t max_seg, struct zc_seg *segs,
              unsigned cap)
{
	unsigned n = 1 + (unsigned)(t_rand() % cap), i;

	for (i = 0; i < n && *at < len; i++) {
		size_t l = 1 + t_rand() % max_seg;
		struct t_slice *sl;

		if (l > len - *at)
			l = len - *at;
		sl = malloc(sizeof(*sl) + l);
		CHECK(sl);
		zc_ref_init(&sl->ref, t_slice_release);
		memcpy(sl->data, buf + *at, l);
		segs[i] = (struct zc_seg){ sl->data, l, &sl->ref };
		*at += l;
	}
	return i;
}

/*
 * Write buf[0..len) as bucket/key in random segments of at most max_seg bytes, a few
 * segments per dn_write_data call, each a separately refcounted slice. Returns the
 * dn_write_data / begin error, or 0 with the write left open in *out.
 */
static inline int
t_feed(struct dn_store *s, const char *bucket, const char *key, const uint8_t *buf, size_t len,
       size_t max_seg, bool size_known, struct dn_write **out)
{
	struct dn_write *w;
	size_t at = 0;
	int err = dn_write_begin(s, bucket, key, len, size_known, 0, 0, &w);

	if (err)
		return err;
	while (at < len) {
		struct zc_seg segs[8];
		size_t start = at;
		unsigned n = t_slices_next(buf, &at, len, max_seg, segs, 8);

		err = dn_write_data(w, start, segs, n);
		for (unsigned i = 0; i < n; i++)
			zc_ref_put(segs[i].ref); /* ours; the SQEs hold their own */
		if (err) {
			dn_write_abort(w);
			return err;
		}
	}
	*out = w;
	return 0;
}

struct t_wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool done;
	int err;
	uint64_t size;
	uint32_t crc;
};

static void
t_commit_cb(void *arg, int err, const struct dn_write_result *res)
{
	struct t_wait *tw = arg;

	pthread_mutex_lock(&tw->lock);
	tw->err = err;
	if (res) {
		tw->size = res->size;
		tw->crc = res->crc32c;
	}
	tw->done = true;
	pthread_cond_signal(&tw->cond);
	pthread_mutex_unlock(&tw->lock);
}

static inline int
t_commit(struct dn_write *w, const char *etag, uint32_t *crc)
{
	struct t_wait tw = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0, 0, 0 };
	struct dn_attr a = { "content-type", "application/octet-stream" };

	dn_write_commit(w, etag, &a, 1, t_commit_cb, &tw);
	pthread_mutex_lock(&tw.lock);
	while (!tw.done)
		pthread_cond_wait(&tw.cond, &tw.lock);
	pthread_mutex_unlock(&tw.lock);
	if (crc)
		*crc = tw.crc;
	return tw.err;
}

static inline int
t_put(struct dn_store *s, const char *bucket, const char *key, const uint8_t *buf, size_t len)
{
	struct dn_write *w;
	int err = t_feed(s, bucket, key, buf, len, 5000, true, &w);

	return err ? err : t_commit(w, "etag", NULL);
}

struct t_read {
	uint8_t *buf;
	size_t len, cap;
	uint64_t next;
};

static int
t_read_cb(void *arg, uint64_t off, const struct zc_seg *seg)
{
	struct t_read *r = arg;

	CHECK_EQ(off, r->next);
	if (r->len + seg->len > r->cap) {
		r->cap = (r->len + seg->len) * 2;
		r->buf = realloc(r->buf, r->cap);
		CHECK(r->buf);
	}
	memcpy(r->buf + r->len, seg->ptr, seg->len);
	r->len += seg->len;
	r->next += seg->len;
	return 0;
}

/* Read a range and compare it with want. Returns dn_read's result. */
static inline int
t_check_read(struct dn_store *s, const char *bucket, const char *key, uint64_t off, uint64_t len,
             bool has_len, const uint8_t *want, size_t want_len)
{
	struct t_read r = { NULL, 0, 0, off };
	struct dn_object_info info;
	int err = dn_read(s, bucket, key, off, len, has_len, &info, t_read_cb, &r);

	if (!err) {
		CHECK_EQ(r.len, want_len);
		CHECK(want_len == 0 || memcmp(r.buf, want, want_len) == 0);
		dn_object_info_fini(&info);
	}
	free(r.buf);
	return err;
}
#endif /* DN_TEST_RPC_ONLY */

#ifdef ZEST_RPC_CLIENT_H
/* ---- the client side of zest.Datanode (rpc_client_*) ---- */
#include "rpc_client_internal.h" /* rpc_client_put */

/* Put len bytes of buf as bucket/key in chunk-sized WriteChunks (k 0: the default
 * scheme). Returns rpc_client_put's result; res (optional) and st are filled. */
static inline int
t_rpc_put(struct rpc_client *cl, const char *bucket, const char *key, const void *buf, size_t len,
          size_t chunk, unsigned k, unsigned m, struct rpc_write_result *res, struct rpc_status *st)
{
	struct rpc_write_open op = {
		.bucket = bucket, .key = key, .size = len, .size_known = true, .ec_k = k, .ec_m = m
	};

	return rpc_client_put(cl, &op, len ? buf : "", len, chunk, res, st);
}

/* Where a streamed Read's bytes go, in order; < 0 marks the read locally bad. */
typedef int (*t_sink_fn)(void *arg, uint64_t offset, const struct zc_seg *seg);

struct t_get {
	t_sink_fn sink;
	void *arg;
	bool cancel; /* cancel the Read after its first chunk */
	/* outputs */
	struct rpc_status st;
	uint64_t bytes; /* delivered to the sink */
	bool bad;       /* out-of-order offset or a sink failure */
	/* private */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	uint64_t next;
};

static inline int
t_get_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
            const struct zc_seg *segs, size_t n, size_t len)
{
	struct t_get *g = arg;

	(void)info;
	if (offset != g->next)
		g->bad = true;
	for (size_t i = 0; i < n; i++) {
		if (g->sink && g->sink(g->arg, offset, &segs[i]) < 0)
			g->bad = true;
		offset += segs[i].len;
	}
	g->bytes += len;
	g->next += len;
	if (g->cancel)
		rpc_cread_cancel(r);
	return 0;
}

static inline void
t_get_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct t_get *g = arg;

	(void)r;
	pthread_mutex_lock(&g->mu);
	g->st = *st;
	g->done = true;
	pthread_cond_signal(&g->cond);
	pthread_mutex_unlock(&g->mu);
}

/*
 * Read bucket/key (has_len: only [off, off + len)) into g->sink and wait for the end;
 * g->st, g->bytes and g->bad say how it went. Returns 0, or rpc_cread_open's error.
 */
static inline int
t_rpc_get(struct rpc_client *cl, const char *bucket, const char *key, uint64_t off, uint64_t len,
          bool has_len, struct t_get *g)
{
	struct rpc_read_req rq = {
		.bucket = bucket, .key = key, .offset = off, .length = len, .has_length = has_len
	};
	struct rpc_cread_cbs cbs = { t_get_chunk, t_get_done };
	struct rpc_cread *r;
	int err;

	g->next = off;
	g->bytes = 0;
	g->bad = false;
	g->done = false;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cond, NULL);
	err = rpc_cread_open(cl, &rq, &cbs, g, &r);
	if (!err) {
		pthread_mutex_lock(&g->mu);
		while (!g->done)
			pthread_cond_wait(&g->cond, &g->mu);
		pthread_mutex_unlock(&g->mu);
		rpc_cread_destroy(r);
	}
	pthread_mutex_destroy(&g->mu);
	pthread_cond_destroy(&g->cond);
	return err;
}
#endif /* ZEST_RPC_CLIENT_H */

#endif
