/*
 * dn_coord_cell: one cell of a coordinated write: its stream to a peer (WriteCell over the
 * peer's rpc client, sent by reference, paced by the stream's in-flight window) or its
 * local write (dn_cell_write_*), and its outcome. A cell that fails (open refused,
 * connection reset, the peer silent past the timeout) is marked missing; its node is then
 * skipped for the rest of the write, so later groups do not wait on it again (they are
 * placed around it). A local cell refused for space before any byte moves to another node.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_coord_internal.h"
#include "zc.h"

void
dn_coord_cell_failed(struct ccell *cc, int err)
{
	struct dn_coord_write *w = cc->w;
	struct cgroup *g = w->groups[cc->group];

	if (cc->failed)
		return;
	cc->failed = true;
	cc->err = err;
	w->node_failed[cc->node] = true;
	/* the group must still survive the loss of quorum - k nodes with the cells left */
	if (!dn_coord_group_ok(w, g, dn_coord_group_live(w, g)))
		w->lost = true;
	pthread_cond_broadcast(&w->cond);
}

/* Client CQ thread: the peer has room again. */
static void
on_writable(void *arg, struct rpc_cwrite *rw)
{
	struct ccell *cc = arg;
	struct dn_coord_write *w = cc->w;

	(void)rw;
	pthread_mutex_lock(&w->mu);
	if (cc->wait_writable) {
		cc->wait_writable = false;
		pthread_cond_broadcast(&w->cond);
	}
	pthread_mutex_unlock(&w->mu);
}

/* Client CQ thread: the peer's answer. OK: the cell is durable and recorded pending. */
static void
on_done(void *arg, struct rpc_cwrite *rw, const struct rpc_status *st,
        const struct rpc_write_result *res)
{
	struct ccell *cc = arg;
	struct dn_coord_write *w = cc->w;
	bool ok = !st->err && res && res->size == cc->length;

	(void)rw;
	if (ok)
		dn_coord_hist_add(&w->c->peer_hist, zc_now_ns() - cc->t0);
	else
		ZC_WARN("coord", "peer=%s cell %016" PRIx64 ".%" PRIu32 ".%u failed: err=%d %s",
		        cc->peer->name, w->id, cc->group, cc->cell, st->err, st->msg);
	pthread_mutex_lock(&w->mu);
	cc->done = true;
	cc->ok = ok;
	if (!ok)
		dn_coord_cell_failed(cc, st->err ? st->err : -EIO);
	w->outstanding--;
	cc->wait_writable = false;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

/* Commit thread: the local cell is recorded pending (err 0), or removed. */
static void
on_local_done(void *arg, int err)
{
	struct ccell *cc = arg;
	struct dn_coord_write *w = cc->w;

	if (err)
		ZC_WARN("coord", "local cell %016" PRIx64 ".%" PRIu32 ".%u failed err=%d", w->id,
		        cc->group, cc->cell, err);
	pthread_mutex_lock(&w->mu);
	cc->done = true;
	cc->ok = !err;
	if (err)
		dn_coord_cell_failed(cc, err);
	w->outstanding--;
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

int
dn_coord_cell_start(struct dn_coord_write *w, struct cgroup *g, unsigned i)
{
	static const struct rpc_cwrite_cbs cbs = { on_writable, on_done };
	struct ccell *cc = &g->cells[i];
	const struct cl_rec_node *nd = &w->view->nodes[cc->node];
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = w->node_failed[cc->node];
	if (rc)
		dn_coord_cell_failed(cc, -EIO); /* it failed earlier in this write */
	pthread_mutex_unlock(&w->mu);
	if (rc)
		return 0;
	cc->t0 = zc_now_ns();
	if (cc->local) {
		struct dn_cell_spec spec = { .id = { w->id, g->idx, i },
			                     .length = cc->length,
			                     .k = w->k,
			                     .m = w->m,
			                     .cell_size = w->cell,
			                     .stripes_per_group = w->spg,
			                     .bucket = w->bucket,
			                     .key = w->key };

		rc = dn_cell_write_open(w->c->o.store, &spec, &cc->lw);
		/* this node is full before its registration said so: nothing is written yet,
		 * so the cell goes to another node instead of missing */
		if (rc == -ENOSPC && dn_coord_cell_replace(w, g, i) == 0) {
			ZC_INFO("coord",
			        "cell %016" PRIx64 ".%" PRIu32 ".%u: no space here, placed on "
			        "node=%s",
			        w->id, g->idx, i, w->view->names[cc->node]);
			return dn_coord_cell_start(w, g, i);
		}
	} else {
		struct rpc_cell_open op = { .id = { w->id, g->idx, i },
			                    .length = cc->length,
			                    .ec_k = w->k,
			                    .ec_m = w->m,
			                    .cell_size = w->cell,
			                    .stripes_per_group = w->spg,
			                    .bucket = w->bucket,
			                    .key = w->key };

		cc->peer = dn_coord_peer(w->c, nd->name, nd->address);
		rc = cc->peer ? 0 : -ENOMEM;
		if (!rc) {
			/* started before the call exists: `done` may come at once */
			pthread_mutex_lock(&w->mu);
			cc->started = true;
			w->outstanding++;
			pthread_mutex_unlock(&w->mu);
			rc = rpc_cwrite_open_cell(cc->peer->cli, &op, &cbs, cc, &cc->rw);
			if (rc) {
				pthread_mutex_lock(&w->mu);
				cc->started = false;
				w->outstanding--;
				pthread_mutex_unlock(&w->mu);
			}
		}
	}
	pthread_mutex_lock(&w->mu);
	if (rc) {
		ZC_WARN("coord",
		        "cell %016" PRIx64 ".%" PRIu32 ".%u on node=%s: open failed err=%d", w->id,
		        g->idx, i, nd->name, rc);
		dn_coord_cell_failed(cc, rc);
	} else if (cc->local) {
		cc->started = true;
		w->outstanding++;
	}
	pthread_mutex_unlock(&w->mu);
	return 0;
}

/* The deadline peer_timeout_ms from now, for w->cond (CLOCK_MONOTONIC). */
void
dn_coord_deadline(const struct dn_coord_write *w, struct timespec *dl)
{
	zc_deadline(dl, CLOCK_MONOTONIC, (uint64_t)w->c->o.peer_timeout_ms * 1000000u);
}

static int
lost_err(struct dn_coord_write *w)
{
	int rc;

	pthread_mutex_lock(&w->mu);
	rc = w->lost ? ZC_E(ZC_NO_QUORUM) : 0;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

/* A remote cell's bytes: wait out a full window (the binding's queue then fills and pauses
 * the Write's receives: the gateway is pushed back), for at most the peer timeout. */
static void
remote_send(struct ccell *cc, const struct zc_seg *segs, size_t n, size_t len)
{
	struct dn_coord_write *w = cc->w;
	struct timespec dl;
	bool armed = false;
	int rc;

	for (;;) {
		pthread_mutex_lock(&w->mu);
		if (cc->done || cc->failed) {
			pthread_mutex_unlock(&w->mu);
			return;
		}
		/* armed before the send: a `writable` that comes before our wait is kept */
		cc->wait_writable = true;
		pthread_mutex_unlock(&w->mu);
		rc = rpc_cwrite_send(cc->rw, segs, n);
		if (rc != -EAGAIN)
			break;
		if (!armed) {
			dn_coord_deadline(w, &dl);
			armed = true;
		}
		pthread_mutex_lock(&w->mu);
		while (cc->wait_writable && !cc->done)
			if (pthread_cond_timedwait(&w->cond, &w->mu, &dl) == ETIMEDOUT)
				break;
		if (cc->wait_writable && !cc->done) {
			cc->wait_writable = false;
			pthread_mutex_unlock(&w->mu);
			ZC_WARN("coord",
			        "peer=%s silent for %u ms: cell %016" PRIx64 ".%" PRIu32
			        ".%u given up",
			        cc->peer->name, w->c->o.peer_timeout_ms, w->id, cc->group,
			        cc->cell);
			rpc_cwrite_cancel(cc->rw); /* `done` marks it failed */
			return;
		}
		pthread_mutex_unlock(&w->mu);
	}
	pthread_mutex_lock(&w->mu);
	cc->wait_writable = false;
	pthread_mutex_unlock(&w->mu);
	if (rc == 0) {
		cc->sent += len;
		atomic_fetch_add_explicit(&cc->peer->fwd_bytes, len, memory_order_relaxed);
	} else if (rc != -ECANCELED) {
		/* -ECANCELED: the call already failed and `done` says so */
		ZC_WARN("coord", "peer=%s send failed err=%d", cc->peer->name, rc);
		rpc_cwrite_cancel(cc->rw);
	}
}

int
dn_coord_cell_send(struct ccell *cc, const struct zc_seg *segs, size_t n, size_t len)
{
	struct dn_coord_write *w = cc->w;

	if (!len)
		return lost_err(w);
	if (!cc->local) {
		if (cc->rw)
			remote_send(cc, segs, n, len);
		return lost_err(w);
	}
	if (cc->lw) {
		int rc = dn_cell_write_data(cc->lw, cc->sent, segs, n);

		if (rc) {
			ZC_WARN("coord", "local cell %016" PRIx64 ".%" PRIu32 ".%u write err=%d",
			        w->id, cc->group, cc->cell, rc);
			dn_cell_write_abort(cc->lw);
			cc->lw = NULL;
			pthread_mutex_lock(&w->mu);
			cc->done = true;
			w->outstanding--;
			dn_coord_cell_failed(cc, rc);
			pthread_mutex_unlock(&w->mu);
		} else {
			cc->sent += len;
		}
	}
	return lost_err(w);
}

void
dn_coord_cell_end(struct ccell *cc)
{
	struct dn_coord_write *w = cc->w;

	if (cc->local) {
		struct dn_cell_write *lw = cc->lw;

		cc->lw = NULL;
		if (lw)
			dn_cell_write_finish(lw, on_local_done, cc);
	} else if (cc->rw) {
		int rc = rpc_cwrite_commit(cc->rw, NULL, 0, NULL);

		if (rc && rc != -ECANCELED) {
			ZC_WARN("coord", "peer=%s commit of cell failed err=%d", cc->peer->name,
			        rc);
			rpc_cwrite_cancel(cc->rw);
		}
	}
	pthread_mutex_lock(&w->mu);
	cc->ended = true;
	pthread_mutex_unlock(&w->mu);
}
