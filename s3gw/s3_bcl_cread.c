/*
 * s3_bcl_cread: one ReadCell call of the cluster GET: its segments (gRPC receive slices)
 * queued with a reference for the worker, the call paused while the queue is over a
 * bound; and the blocking form that gathers a few cell ranges at once for a rebuild.
 *
 * Deadline: a node that hangs without closing its connections (SIGSTOP, a frozen disk) is
 * caught by the stream's progress timeout (rpc_cread_progress_timeout): a stream that has
 * sent nothing for the timeout since it was opened, last delivered a chunk or was last
 * resumed is cancelled by rpc and the read ends with ZC_UNAVAILABLE, as a node that
 * refused would (the caller reads around the cell). Time the stream spent paused by its
 * consumer never counts against the node.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "s3_backend_rpc_internal.h"
#include "s3_bcl_internal.h"
#include "zc.h"

struct bcl_crd {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rpc_cread *r;
	struct s3_segq q; /* queued segments, each holding a ref */
	size_t qbytes;
	bool paused, done, failed_alloc;
	struct rpc_status st;
	uint64_t want, got;
};

static int
crd_on_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
             const struct zc_seg *segs, size_t n_segs, size_t len)
{
	struct bcl_crd *c = arg;
	int ret = 0;

	(void)r;
	(void)info;
	(void)offset;
	pthread_mutex_lock(&c->mu);
	if (s3_segq_push(&c->q, segs, n_segs) < 0) {
		c->failed_alloc = true;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		return 1; /* stays paused; the worker cancels */
	}
	c->qbytes += len;
	c->got += len;
	if (c->qbytes >= BCL_PAUSE_BYTES) {
		c->paused = true;
		ret = 1;
	}
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
	return ret;
}

static void
crd_on_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct bcl_crd *c = arg;

	(void)r;
	pthread_mutex_lock(&c->mu);
	c->st = *st;
	c->done = true;
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

int
s3_bcl_crd_open(struct rpc_client *cl, uint64_t extent, uint32_t group, unsigned cell, uint64_t off,
                uint64_t len, unsigned timeout_ms, struct bcl_crd **out)
{
	static const struct rpc_cread_cbs cbs = { crd_on_chunk, crd_on_done };
	struct rpc_cell_read_req req = {
		.id = { .extent = extent, .group = group, .cell = cell },
		.offset = off,
		.length = len,
		.has_length = true,
	};
	struct bcl_crd *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	c->want = len;
	/* hold the lock: `done` may come before c->r is stored */
	pthread_mutex_lock(&c->mu);
	rc = rpc_cread_open_cell(cl, &req, &cbs, c, &c->r);
	if (rc == 0)
		rc = rpc_cread_progress_timeout(c->r,
		                                timeout_ms ? timeout_ms : BCL_READ_PROGRESS_MS);
	pthread_mutex_unlock(&c->mu);
	if (rc < 0 && c->r) { /* no watchdog: a read that could hang for ever is not kept */
		s3_bcl_crd_close(c);
		return rc;
	}
	if (rc < 0) {
		pthread_cond_destroy(&c->cv);
		pthread_mutex_destroy(&c->mu);
		free(c);
		return rc;
	}
	*out = c;
	return 0;
}

int
s3_bcl_crd_next(struct bcl_crd *c, struct zc_seg *seg)
{
	int rc;

	pthread_mutex_lock(&c->mu);
	/* an empty queue means a running stream (a paused one has bytes queued): the node
	 * owes bytes, or the status, and rpc's progress timeout bounds the wait */
	while (!c->done && !c->failed_alloc && !c->q.n)
		pthread_cond_wait(&c->cv, &c->mu);
	if (c->failed_alloc) {
		rc = -ENOMEM;
	} else if (!c->q.n) { /* done and drained */
		/* not logged here: the GET logs once per stream what it reads around */
		rc = c->st.err ? ZC_E(zc_err_code(c->st.err)) : 0;
		if (rc == 0 && c->got != c->want)
			rc = -EBADMSG; /* a node that sent less than the range is as bad */
	} else {
		s3_segq_pop(&c->q, seg);
		c->qbytes -= seg->len;
		rc = 1;
		if (c->paused && c->qbytes < BCL_RESUME_BYTES && !c->done) {
			c->paused = false; /* rpc restarts the progress clock */
			pthread_mutex_unlock(&c->mu);
			rpc_cread_resume(c->r);
			return rc;
		}
	}
	pthread_mutex_unlock(&c->mu);
	return rc;
}

void
s3_bcl_crd_close(struct bcl_crd *c)
{
	if (!c)
		return;
	pthread_mutex_lock(&c->mu);
	if (!c->done) {
		pthread_mutex_unlock(&c->mu);
		rpc_cread_cancel(c->r);
		pthread_mutex_lock(&c->mu);
	}
	while (!c->done) {
		if (c->paused) {
			/* a paused stream needs a resume to see its cancel through */
			c->paused = false;
			pthread_mutex_unlock(&c->mu);
			rpc_cread_resume(c->r);
			pthread_mutex_lock(&c->mu);
			continue;
		}
		pthread_cond_wait(&c->cv, &c->mu);
	}
	s3_segq_fini(&c->q);
	pthread_mutex_unlock(&c->mu);
	rpc_cread_destroy(c->r);
	pthread_cond_destroy(&c->cv);
	pthread_mutex_destroy(&c->mu);
	free(c);
}

void
s3_bcl_read_ranges(struct rpc_client *const *cl, uint64_t extent, uint32_t group,
                   struct s3_bcl_cread *r, size_t n, unsigned timeout_ms)
{
	struct bcl_crd *c[CL_REC_MAX_CELLS] = { 0 };

	/* every call first, so the nodes read in parallel; then drain them in turn */
	for (size_t i = 0; i < n; i++) {
		r[i].res = cl[i] ? s3_bcl_crd_open(cl[i], extent, group, r[i].cell, r[i].off,
		                                   r[i].len, timeout_ms, &c[i])
		                 : -EHOSTUNREACH;
	}
	for (size_t i = 0; i < n; i++) {
		uint64_t at = 0;
		struct zc_seg seg;
		int rc;

		if (r[i].res < 0)
			continue;
		while ((rc = s3_bcl_crd_next(c[i], &seg)) == 1) {
			if (seg.len <= r[i].len - at)
				memcpy(r[i].buf + at, seg.ptr, seg.len);
			at += seg.len;
			if (seg.ref)
				zc_ref_put(seg.ref);
		}
		r[i].res = rc < 0 ? rc : at == r[i].len ? 0 : -EBADMSG;
		if (r[i].res < 0)
			ZC_DBG("s3cl",
			       "rebuild source extent=%016llx group=%u cell=%u off=%llu "
			       "len=%llu failed err=%d",
			       (unsigned long long)extent, group, r[i].cell,
			       (unsigned long long)r[i].off, (unsigned long long)r[i].len,
			       r[i].res);
		s3_bcl_crd_close(c[i]);
	}
}
