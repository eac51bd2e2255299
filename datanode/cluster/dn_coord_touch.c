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
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dn_coord_internal.h"
#include "zc.h"

struct round {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned left, failed;
};

struct call {
	struct round *r;
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
	r->failed += st->err != 0;
	r->left--;
	pthread_cond_signal(&r->cond);
	pthread_mutex_unlock(&r->mu);
	free(c);
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

int
dn_coord_touch(struct dn_coord_write *w, bool force)
{
	uint64_t grace = w->c->o.gc_grace_ns, now = dn_coord_realtime_ns(), dl;
	struct rpc_cell_id *ids;
	struct round r = { .left = 0, .failed = 0 };
	size_t cap = (size_t)w->opened * w->n;

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
	if (!ids)
		return -ENOMEM;
	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cond, NULL);
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
					r.failed++;
			}
			continue;
		}
		struct dn_coord_peer *p =
		        dn_coord_peer(w->c, w->view->nodes[ni].name, w->view->nodes[ni].address);
		union rpc_unary_req req = { .cells = { ids, n, true } };
		struct call *c = calloc(1, sizeof(*c));

		if (!p || !c) {
			free(c);
			r.failed++;
			continue;
		}
		c->r = &r;
		snprintf(c->peer, sizeof(c->peer), "%s", w->view->nodes[ni].name);
		pthread_mutex_lock(&r.mu);
		r.left++;
		pthread_mutex_unlock(&r.mu);
		/* the request is packed at once: ids is ours again on return */
		if (rpc_client_call_async(p->cli, RPC_COMMIT_CELLS, &req, call_done, c)) {
			pthread_mutex_lock(&r.mu);
			r.left--;
			r.failed++;
			pthread_mutex_unlock(&r.mu);
			free(c);
		}
	}
	/* Every call ends within the peers' unary deadline (rpc_client_opts). */
	pthread_mutex_lock(&r.mu);
	while (r.left)
		pthread_cond_wait(&r.cond, &r.mu);
	pthread_mutex_unlock(&r.mu);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cond);
	free(ids);
	if (r.failed) {
		/* Not acknowledged everywhere: the deadline stays where it was; the next round
		 * (a grace / 4 on) tries again. */
		ZC_WARN("coord",
		        "extent %016" PRIx64 ": %u nodes did not refresh its pending cells", w->id,
		        r.failed);
		return 0;
	}
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
