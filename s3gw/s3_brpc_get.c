/*
 * s3_brpc_get: the GET stream of the rpc backend: one Read call on the placed node,
 * its ReadChunk segments handed on by reference, paused over a bound; pulled (get_open/
 * next/close) by the server, or as a blocking callback loop for small internal reads.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_backend_rpc_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ GET stream */

struct get {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rpc_cread *r;
	struct s3_segq q; /* queued segments, each holding a ref */
	size_t qbytes;
	bool paused, done, failed_alloc;
	struct rpc_status st;
	bool have_info;
	struct s3_obj_info *info;
	const char *key;
	char *keycopy;
};

static int
get_on_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
             const struct zc_seg *segs, size_t n_segs, size_t len)
{
	struct get *g = arg;
	int ret = 0;

	(void)r;
	(void)offset;
	pthread_mutex_lock(&g->mu);
	if (info && !g->have_info) {
		s3_brpc_info_from_rpc(info, g->key, g->info);
		g->have_info = true;
	}
	if (s3_segq_push(&g->q, segs, n_segs) < 0) {
		g->failed_alloc = true;
		pthread_cond_broadcast(&g->cv);
		pthread_mutex_unlock(&g->mu);
		return 1; /* stays paused; the worker cancels */
	}
	g->qbytes += len;
	if (g->qbytes >= GET_PAUSE_BYTES) {
		g->paused = true;
		ret = 1;
	}
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return ret;
}

static void
get_on_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct get *g = arg;

	(void)r;
	pthread_mutex_lock(&g->mu);
	g->st = *st;
	g->done = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

static void
get_free(struct get *g)
{
	s3_segq_fini(&g->q);
	free(g->info);
	free(g->keycopy);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

/* Stop the stream if it runs, wait for its end, drop what is queued, free. */
void
s3_brpc_get_close(void *stream)
{
	struct get *g = stream;

	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	if (!g->done && g->r) {
		struct rpc_cread *r = g->r;

		pthread_mutex_unlock(&g->mu);
		rpc_cread_cancel(r);
		pthread_mutex_lock(&g->mu);
	}
	while (!g->done) {
		if (g->paused && g->r) {
			struct rpc_cread *r = g->r;

			/* a paused stream needs a resume to see its cancel through */
			g->paused = false;
			pthread_mutex_unlock(&g->mu);
			rpc_cread_resume(r);
			pthread_mutex_lock(&g->mu);
			continue;
		}
		pthread_cond_wait(&g->cv, &g->mu);
	}
	s3_segq_fini(&g->q);
	pthread_mutex_unlock(&g->mu);
	rpc_cread_destroy(g->r);
	get_free(g);
}

int
s3_brpc_get_open(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
                 bool has_len, struct s3_obj_info *info, void **stream)
{
	static const struct rpc_cread_cbs cbs = { get_on_chunk, get_on_done };
	struct rbe *b = ctx;
	struct rpc_read_req req;
	struct get *g;
	int rc = 0;

	*stream = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->info = malloc(sizeof(*g->info));
	g->keycopy = strdup(key);
	if (!g->info || !g->keycopy) {
		get_free(g);
		return -ENOMEM;
	}
	g->key = g->keycopy;
	if (off || has_len) {
		/* S3 clamps a range to the object; the datanode refuses one past the end */
		rc = s3_brpc_stat(ctx, bucket, key, g->info);
		if (rc < 0)
			goto fail;
		if (off >= g->info->size) {
			*info = *g->info; /* the caller decides (InvalidRange or empty) */
			get_free(g);
			return 0;
		}
		if (has_len && len > g->info->size - off)
			len = g->info->size - off;
	}
	req.bucket = bucket;
	req.key = key;
	req.offset = off;
	req.length = has_len ? len : 0;
	req.has_length = has_len;
	pthread_mutex_lock(&g->mu);
	rc = rpc_cread_open(s3_brpc_place(b, bucket, key), &req, &cbs, g, &g->r);
	if (rc < 0) {
		pthread_mutex_unlock(&g->mu);
		goto fail;
	}
	while (!g->done && !g->failed_alloc && !g->have_info)
		pthread_cond_wait(&g->cv, &g->mu);
	if (g->failed_alloc)
		rc = -ENOMEM;
	else if (!g->have_info)
		rc = rpc_status_err(&g->st);
	pthread_mutex_unlock(&g->mu);
	if (rc == 0 && !g->have_info) /* ended without info: ask for it */
		rc = s3_brpc_stat(ctx, bucket, key, g->info);
	if (rc < 0) {
		s3_brpc_get_close(g);
		return rc;
	}
	*info = *g->info;
	*stream = g;
	return 0;
fail:
	get_free(g);
	return rc;
}

int
s3_brpc_get_next(void *stream, struct zc_seg *seg)
{
	struct get *g = stream;
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	while (!g->done && !g->failed_alloc && !g->q.n)
		pthread_cond_wait(&g->cv, &g->mu);
	if (g->failed_alloc) {
		rc = -ENOMEM;
	} else if (!s3_segq_pop(&g->q, seg)) { /* done and drained */
		rc = rpc_status_err(&g->st);
	} else {
		g->qbytes -= seg->len;
		rc = 1;
		if (g->paused && g->qbytes < GET_RESUME_BYTES && !g->done && g->r) {
			struct rpc_cread *r = g->r;

			g->paused = false;
			pthread_mutex_unlock(&g->mu);
			rpc_cread_resume(r);
			return rc;
		}
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}
