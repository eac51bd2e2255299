/*
 * dn_coord_touch: the pending cells of a write in progress keep their grace. The nodes'
 * collectors judge a pending cell once the grace has passed since its last touch (or its
 * creation), so a write that keeps making progress refreshes its recorded cells on every
 * node at most every grace / 4 (CommitCells with touch, dn_cell_touch for its own), and
 * its commit Txn must come before the last round every node acknowledged + grace / 2.
 * A write that stalls past that is refused: its cells may be gone by then.
 *
 * Why the bound holds: a round's time T is read before its first call, and a node sets the
 * touch time from its own clock when the call arrives (>= T, clocks apart by less than a
 * quarter of the grace); a cell recorded after the touch has a creation time later still.
 * So no cell of the write is judged before T + grace, and the Txn is before T + grace / 2.
 * A round is only sent before that deadline: after it a touch could find some cells gone
 * (it skips cells without an entry, which may be streams still open) and keep the rest.
 * A node that fails a round has its cells of the write counted missing (fail_node).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_coord_internal.h"
#include "zc.h"

/* One round's answers. Shared by the waiter and the calls (refs), because the waiter
 * gives up on a call that has not answered within a quarter of the grace: its answer
 * comes later, to a round nobody waits for. */
struct round {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned refs, left, failed;
	bool *bad;  /* per view index: its touch failed */
	bool *sent; /* per view index: a call went out and has not answered */
};

static void
round_put(struct round *r)
{
	bool last;

	pthread_mutex_lock(&r->mu);
	last = --r->refs == 0;
	pthread_mutex_unlock(&r->mu);
	if (!last)
		return;
	pthread_mutex_destroy(&r->mu);
	pthread_cond_destroy(&r->cond);
	free(r->bad);
	free(r->sent);
	free(r);
}

struct call {
	struct round *r;
	size_t ni;
	char peer[CL_REC_MAX_NAME + 1];
};

uint64_t
dn_coord_not_after(const struct dn_coord_write *w)
{
	uint64_t base = w->touch_ns ? w->touch_ns : w->first_ns;

	if (!base || !w->c->o.gc_grace_ns)
		return 0;
	return base + w->c->o.gc_grace_ns / 2;
}

static void
call_done(void *arg, const struct rpc_status *st, const struct rpc_unary_resp *resp)
{
	struct call *c = arg;
	struct round *r = c->r;

	(void)resp;
	if (st->err)
		ZC_WARN("coord", "touch of pending cells on peer=%s failed: err=%d %s", c->peer,
		        st->err, st->msg);
	pthread_mutex_lock(&r->mu);
	if (st->err) {
		r->failed++;
		r->bad[c->ni] = true;
	}
	r->sent[c->ni] = false;
	r->left--;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->mu);
	free(c);
	round_put(r);
}

/* The cells of w on view node ni that are recorded or may be: started, not failed. */
static size_t
node_cells(struct dn_coord_write *w, size_t ni, struct rpc_cell_id *ids, bool *local)
{
	size_t n = 0;

	*local = false;
	pthread_mutex_lock(&w->mu);
	for (uint32_t g = 0; g < w->opened; g++)
		for (unsigned i = 0; i < w->n; i++) {
			const struct ccell *cc = &w->groups[g]->cells[i];

			if (cc->node != ni || !cc->started || cc->failed || (cc->done && !cc->ok))
				continue;
			*local = cc->local;
			ids[n++] = (struct rpc_cell_id){ w->id, g, i };
		}
	pthread_mutex_unlock(&w->mu);
	return n;
}

/*
 * View node ni did not take a touch: from now on its cells of w count as failed (missing
 * in the record, as a failed stream's), since its collector may judge them before the
 * Txn. Streams still open to it are cancelled. The write goes on while every group still
 * meets the quorum without it (w->lost otherwise), and the round's deadline can move on.
 */
static void
fail_node(struct dn_coord_write *w, size_t ni)
{
	for (uint32_t g = 0; g < w->opened; g++)
		for (unsigned i = 0; i < w->n; i++) {
			struct ccell *cc = &w->groups[g]->cells[i];
			bool cancel;

			pthread_mutex_lock(&w->mu);
			if (cc->node != ni || !cc->started || cc->failed) {
				pthread_mutex_unlock(&w->mu);
				continue;
			}
			cancel = !cc->done && cc->rw;
			dn_coord_cell_failed(cc, ZC_E(ZC_UNAVAILABLE));
			w->node_failed[ni] = true;
			pthread_mutex_unlock(&w->mu);
			if (cancel)
				rpc_cwrite_cancel(cc->rw);
		}
}

int
dn_coord_touch(struct dn_coord_write *w, bool force)
{
	uint64_t grace = w->c->o.gc_grace_ns, now = dn_coord_realtime_ns(), dl, wait_ns;
	struct rpc_cell_id *ids;
	struct round *r;
	size_t cap = (size_t)w->opened * w->n;
	struct timespec until;
	pthread_condattr_t ca;
	unsigned failed;
	bool *bad;

	if (!grace || !w->first_ns)
		return 0;
	if (!w->touch_sent_ns)
		w->touch_sent_ns = w->first_ns;
	if (!force && now - w->touch_sent_ns < grace / 4)
		return 0;
	dl = dn_coord_not_after(w);
	if (now >= dl)
		return ZC_E(ZC_UNAVAILABLE); /* too late to refresh: the caller refuses the write */
	w->touch_sent_ns = now;
	ids = calloc(cap ? cap : 1, sizeof(*ids));
	r = calloc(1, sizeof(*r));
	bad = calloc(w->view->n, sizeof(*bad));
	if (r) {
		r->bad = calloc(w->view->n, sizeof(*r->bad));
		r->sent = calloc(w->view->n, sizeof(*r->sent));
	}
	if (!ids || !r || !bad || !r->bad || !r->sent) {
		free(ids);
		free(bad);
		if (r) {
			free(r->bad);
			free(r->sent);
		}
		free(r);
		return -ENOMEM;
	}
	pthread_mutex_init(&r->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&r->cond, &ca);
	pthread_condattr_destroy(&ca);
	r->refs = 1;
	for (size_t ni = 0; ni < w->view->n; ni++) {
		bool local;
		size_t n = node_cells(w, ni, ids, &local);

		if (!n)
			continue;
		if (local) {
			for (size_t i = 0; i < n; i++) {
				int rc = dn_cell_touch(w->c->o.store,
				                       (struct dn_cell_id){ ids[i].extent,
				                                            ids[i].group,
				                                            ids[i].cell });

				if (rc < 0 && !zc_err_is(rc, ZC_NO_KEY))
					bad[ni] = true;
			}
			continue;
		}
		struct dn_coord_peer *p =
		        dn_coord_peer(w->c, w->view->nodes[ni].name, w->view->nodes[ni].address);
		union rpc_unary_req req = { .cells = { ids, n, true } };
		struct call *c = calloc(1, sizeof(*c));

		if (!p || !c) {
			free(c);
			bad[ni] = true;
			continue;
		}
		c->r = r;
		c->ni = ni;
		snprintf(c->peer, sizeof(c->peer), "%s", w->view->nodes[ni].name);
		pthread_mutex_lock(&r->mu);
		r->refs++;
		r->left++;
		r->sent[ni] = true;
		pthread_mutex_unlock(&r->mu);
		/* the request is packed at once: ids is ours again on return */
		if (rpc_client_call_async(p->cli, RPC_COMMIT_CELLS, &req, call_done, c)) {
			pthread_mutex_lock(&r->mu);
			r->refs--;
			r->left--;
			r->sent[ni] = false;
			pthread_mutex_unlock(&r->mu);
			bad[ni] = true;
			free(c);
		}
	}
	free(ids);
	/* A quarter of the grace at most (the peers' unary deadline may be longer): a round
	 * that ends later than grace / 2 after it began would be worth nothing. */
	wait_ns = grace / 4;
	clock_gettime(CLOCK_MONOTONIC, &until);
	until.tv_sec += (time_t)(wait_ns / 1000000000u);
	until.tv_nsec += (long)(wait_ns % 1000000000u);
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&r->mu);
	while (r->left && pthread_cond_timedwait(&r->cond, &r->mu, &until) != ETIMEDOUT)
		;
	for (size_t ni = 0; ni < w->view->n; ni++)
		if (r->bad[ni] || r->sent[ni])
			bad[ni] = true; /* refused, or no answer in time */
	pthread_mutex_unlock(&r->mu);
	round_put(r);
	failed = 0;
	for (size_t ni = 0; ni < w->view->n; ni++)
		failed += bad[ni];
	if (failed) {
		/* Those nodes' cells are given up (counted missing): every node left took the
		 * touch, so the deadline moves on; a group that cannot do without them stops
		 * the write (ZC_NO_QUORUM on its next send, or at the commit). */
		ZC_WARN("coord",
		        "extent %016" PRIx64 ": %u nodes did not refresh its pending cells: their "
		        "cells count as missing",
		        w->id, failed);
		for (size_t ni = 0; ni < w->view->n; ni++)
			if (bad[ni])
				fail_node(w, ni);
	}
	free(bad);
	w->touch_ns = now;
	return 0;
}

void
dn_coord_grace_msg(const struct dn_coord_write *w, char *msg, size_t cap)
{
	uint64_t base = w->touch_ns ? w->touch_ns : w->first_ns;
	uint64_t now = dn_coord_realtime_ns();

	snprintf(msg, cap,
	         "the write of %s/%s is past its commit deadline: its pending cells were last "
	         "refreshed on every node %.1f s ago, more than half the collectors' grace "
	         "(--gc-grace %.1f s), so they may be collected; not committed",
	         w->bucket, w->key, now > base ? (double)(now - base) / 1e9 : 0.0,
	         (double)w->c->o.gc_grace_ns / 1e9);
}
