/*
 * dn_coord_commit: the end of a coordinated write. Wait for every cell's outcome (a peer
 * that does not answer within the timeout is cancelled and counts missing), check the
 * write quorum of every group, commit the record with one etcd Txn (cl_meta_commit);
 * after the answer, tell the cells' nodes (CommitCells, dn_cell_commit) and delete the
 * cells of the record it replaced (DeleteCells). A write that does not commit deletes what
 * it wrote, unless the Txn's outcome is unknown: then the cells stay pending and the
 * collector (dn_cgc.h) settles them by what the record says.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dn_coord_internal.h"
#include "zc.h"

/* Cancel the remote cells still without an outcome (w's thread); unended: only those whose
 * last byte was not handed over, which their node can never have recorded. */
static void
cancel_open(struct dn_coord_write *w, bool unended)
{
	for (uint32_t g = 0; g < w->opened; g++)
		for (unsigned i = 0; i < w->n; i++) {
			struct ccell *cc = &w->groups[g]->cells[i];
			bool open;

			pthread_mutex_lock(&w->mu);
			open = cc->rw && cc->started && !cc->done && !(unended && cc->ended);
			pthread_mutex_unlock(&w->mu);
			if (open)
				rpc_cwrite_cancel(cc->rw);
		}
}

/* Wait until every started cell has its outcome. First for the peer timeout; then the
 * streams left are cancelled, which brings their `done` at once. Local cells always
 * finish (their fsyncs). abort: the write is dropped, so the streams that did not end are
 * cancelled now; the ended ones are waited for all the same, because a cancel could cross
 * the node's answer and leave a cell nobody deletes (until the collector's grace). */
static void
wait_outcomes(struct dn_coord_write *w, bool abort)
{
	struct timespec dl;
	bool cancelled = false;

	if (abort)
		cancel_open(w, true);
	dn_coord_deadline(w, &dl);
	pthread_mutex_lock(&w->mu);
	while (w->outstanding > 0) {
		if (pthread_cond_timedwait(&w->cond, &w->mu, &dl) != ETIMEDOUT)
			continue;
		if (!cancelled) {
			pthread_mutex_unlock(&w->mu);
			ZC_WARN("coord",
			        "extent %016" PRIx64 ": %u cells unanswered after %u ms, "
			        "cancelling them",
			        w->id, w->outstanding, w->c->o.peer_timeout_ms);
			cancel_open(w, false);
			cancelled = true;
			pthread_mutex_lock(&w->mu);
		}
		dn_coord_deadline(w, &dl);
	}
	pthread_mutex_unlock(&w->mu);
}

/* ------------------------------------------------------------------ follow-up calls */

struct followup {
	struct dn_coord *c;
	char peer[CL_REC_MAX_NAME + 1];
	enum rpc_method m;
};

static void
followup_done(void *arg, const struct rpc_status *st, const struct rpc_unary_resp *resp)
{
	struct followup *f = arg;

	(void)resp;
	if (st->err)
		ZC_WARN("coord", "%s to peer=%s failed: err=%d %s (the collector settles them)",
		        f->m == RPC_COMMIT_CELLS ? "CommitCells" : "DeleteCells", f->peer, st->err,
		        st->msg);
	dn_coord_followup_add(f->c, -1);
	free(f);
}

/* Send m for ids (n of them) to the peer name at addr, without waiting. */
static void
followup(struct dn_coord *c, enum rpc_method m, const char *name, const char *addr,
         const struct rpc_cell_id *ids, size_t n)
{
	struct dn_coord_peer *p = dn_coord_peer(c, name, addr);
	union rpc_unary_req req = { .cells = { ids, n } };
	struct followup *f = calloc(1, sizeof(*f));

	if (!p || !f) {
		free(f);
		return;
	}
	f->c = c;
	f->m = m;
	snprintf(f->peer, sizeof(f->peer), "%s", name);
	dn_coord_followup_add(c, 1);
	if (rpc_client_call_async(p->cli, m, &req, followup_done, f)) {
		dn_coord_followup_add(c, -1);
		free(f);
	}
}

/* The outcome of every cell of w's groups on view node ni: commit (or delete) the local
 * ones here, send the remote ones' ids in one call. */
static void
settle_cells(struct dn_coord_write *w, bool commit)
{
	struct dn_store *s = w->c->o.store;
	struct rpc_cell_id *ids;
	size_t cap = (size_t)w->opened * w->n;

	ids = calloc(cap ? cap : 1, sizeof(*ids));
	if (!ids)
		return; /* the collector settles them */
	for (size_t ni = 0; ni < w->view->n; ni++) {
		size_t n = 0;

		for (uint32_t g = 0; g < w->opened; g++)
			for (unsigned i = 0; i < w->n; i++) {
				struct ccell *cc = &w->groups[g]->cells[i];
				struct dn_cell_id id = { w->id, g, i };

				/* a cell given up after it answered (fail_node) is not committed:
				 * the record marks it missing, its node's collector deletes it */
				if (cc->node != ni || !cc->ok || (commit && cc->failed))
					continue;
				if (!cc->local) {
					ids[n++] = (struct rpc_cell_id){ w->id, g, i };
					continue;
				}
				int rc = commit ? dn_cell_commit(s, id) : dn_cell_delete(s, id);

				if (rc < 0)
					ZC_WARN("coord",
					        "local %s of cell %016" PRIx64 ".%" PRIu32
					        ".%u err=%d",
					        commit ? "commit" : "delete", w->id, g, i, rc);
			}
		if (n)
			followup(w->c, commit ? RPC_COMMIT_CELLS : RPC_DELETE_CELLS,
			         w->view->nodes[ni].name, w->view->nodes[ni].address, ids, n);
	}
	free(ids);
}

/* DeleteCells of the cells the replaced record named, by node: the local ones here, the
 * others to the node's address in the current view (a node absent from it keeps them
 * until its collector's scan). Committed cells are retired, not deleted: a GET that read
 * the replaced record may still be reading them (the collectors' read grace). */
static void
delete_old(struct dn_coord_write *w)
{
	const struct cl_rec_object *o = &w->old.o;
	const struct cl_members_view *v = cl_members_get(w->c->o.members);

	for (size_t x = 0; x < o->nextents; x++) {
		const struct cl_rec_extent *e = &o->extents[x];
		struct rpc_cell_id *ids = calloc(e->ngroups * (e->k + e->m) + 1, sizeof(*ids));

		if (!ids)
			break;
		for (size_t t = 0; t < e->nnodes; t++) {
			const char *addr = NULL;
			bool self = !strcmp(e->nodes[t], w->c->node);
			size_t n = 0;

			for (size_t i = 0; !self && i < v->n; i++)
				if (!strcmp(v->names[i], e->nodes[t]))
					addr = v->nodes[i].address;
			for (size_t g = 0; g < e->ngroups; g++)
				for (unsigned ci = 0; ci < e->k + e->m; ci++) {
					if (e->groups[g].cell[ci] != t ||
					    (e->groups[g].missing & (1u << ci)))
						continue;
					if (self)
						dn_cell_retire(w->c->o.store,
						               (struct dn_cell_id){
						                       e->id, (uint32_t)g, ci });
					else
						ids[n++] = (struct rpc_cell_id){ e->id, (uint32_t)g,
							                         ci };
				}
			if (n && addr)
				followup(w->c, RPC_DELETE_CELLS, e->nodes[t], addr, ids, n);
		}
		free(ids);
	}
	cl_members_view_put(v);
}

/* ------------------------------------------------------------------ commit */

static bool
ambiguous_err(int rc)
{
	/* etcd unreachable or the deadline passed: the Txn may have been applied */
	return rc == ZC_E(ZC_NO_QUORUM) || rc == ZC_E(ZC_UNAVAILABLE) || rc == -ETIMEDOUT;
}

static int
commit_msg(struct dn_coord_write *w, int rc, char *msg, size_t cap)
{
	if (rc == ZC_E(ZC_NO_BUCKET))
		snprintf(msg, cap, "%s", w->bucket);
	else if (rc == ZC_E(ZC_PRECONDITION))
		snprintf(msg, cap, "the condition on %s/%s did not hold", w->bucket, w->key);
	else if (rc == ZC_E(ZC_NO_KEY))
		snprintf(msg, cap, "%s/%s (If-Match)", w->bucket, w->key);
	else if (ambiguous_err(rc)) {
		uint64_t na = dn_coord_not_after(w);

		snprintf(msg, cap, "the commit of %s/%s in etcd did not answer (%s)", w->bucket,
		         w->key,
		         rc == ZC_E(ZC_NO_QUORUM)             ? "no etcd member answered"
		         : na && dn_coord_realtime_ns() >= na ? "the write's commit deadline, "
		                                                "gc-grace / 2 after its cells' "
		                                                "last refresh, passed meanwhile"
		                                              : "etcd deadline");
		/* etcd away is the metadata's unavailability, not the cells' write quorum: the
		 * client is told SlowDown (503, retried), as for any other backpressure */
		return ZC_E(ZC_UNAVAILABLE);
	} else if (!msg[0])
		snprintf(msg, cap, "the commit of %s/%s failed: %s", w->bucket, w->key,
		         rc > -ZC_ERR_BASE ? strerror(-rc) : zc_code_word(zc_err_code(rc)));
	return rc;
}

int
dn_coord_commit(struct dn_coord_write *w, const char *etag, const struct dn_attr *attrs,
                size_t nattrs, const struct dn_cond *cond, struct dn_coord_result *res, char *msg,
                size_t cap)
{
	struct cl_meta_group *groups = NULL;
	struct cl_rec_attr *cattrs = NULL;
	struct cl_meta_extent ext;
	struct cl_meta_put p;
	uint64_t t0;
	int rc;

	msg[0] = 0;
	if (w->err) {
		snprintf(msg, cap, "the write failed earlier");
		return w->err;
	}
	if (w->written != w->size) {
		snprintf(msg, cap, "the write ended at %llu of %llu bytes",
		         (unsigned long long)w->written, (unsigned long long)w->size);
		return ZC_E(ZC_INVALID);
	}
	wait_outcomes(w, false);
	/* Every outcome is in: each group must survive the loss of any quorum - k nodes with
	 * the cells that are durable (not merely count quorum cells: with fewer live nodes
	 * than k + m a node holds several). */
	pthread_mutex_lock(&w->mu);
	rc = w->lost ? ZC_E(ZC_NO_QUORUM) : 0;
	for (uint32_t g = 0; g < w->opened; g++) {
		uint32_t durable = 0;

		for (unsigned i = 0; i < w->n; i++)
			if (w->groups[g]->cells[i].ok && !w->groups[g]->cells[i].failed)
				durable |= 1u << i;
		if (!dn_coord_group_ok(w, w->groups[g], durable)) {
			dn_coord_group_msg(w, w->groups[g], durable, "durable", msg, cap);
			rc = ZC_E(ZC_NO_QUORUM);
			break;
		}
	}
	pthread_mutex_unlock(&w->mu);
	if (rc) {
		if (!msg[0])
			snprintf(msg, cap, "write quorum not met: peers failed");
		return rc;
	}
	groups = calloc(w->opened ? w->opened : 1, sizeof(*groups));
	cattrs = calloc(nattrs ? nattrs : 1, sizeof(*cattrs));
	if (!groups || !cattrs) {
		free(groups);
		free(cattrs);
		snprintf(msg, cap, "out of memory");
		return -ENOMEM;
	}
	for (uint32_t g = 0; g < w->opened; g++)
		for (unsigned i = 0; i < w->n; i++) {
			const struct ccell *cc = &w->groups[g]->cells[i];

			groups[g].node[i] = w->view->names[cc->node];
			/* failed and still ok: a stream that answered after it was given up (its
			 * node missed a touch, fail_node): not trusted */
			if (!cc->ok || cc->failed)
				groups[g].missing |= 1u << i;
		}
	for (size_t i = 0; i < nattrs; i++)
		cattrs[i] = (struct cl_rec_attr){ attrs[i].name, attrs[i].value };
	ext = (struct cl_meta_extent){ .id = w->id,
		                       .size = w->size,
		                       .k = w->k,
		                       .m = w->m,
		                       .cell_size = w->cell,
		                       .stripes_per_group = w->spg,
		                       .groups = groups,
		                       .ngroups = w->opened };
	/* A record needs an ETag; a Write without one (tools, tests: the gateway always sends
	 * the MD5) gets its CRC32C in hex. */
	if (!etag || !*etag) {
		snprintf(w->etag_crc, sizeof(w->etag_crc), "%08x", w->crc);
		etag = w->etag_crc;
	}
	p = (struct cl_meta_put){ .bucket = w->bucket,
		                  .key = w->key,
		                  .size = w->size,
		                  .etag = etag,
		                  .crc32c = w->crc,
		                  .mtime_ns = dn_coord_realtime_ns(),
		                  .attrs = cattrs,
		                  .nattrs = nattrs,
		                  .extents = &ext,
		                  .nextents = 1, /* an empty object: one extent, no groups */
		                  .write_quorum = w->quorum,
		                  .timeout_ms = w->c->o.etcd_timeout_ms };
	if (cond) {
		p.cond.if_none_match = cond->if_none_match;
		p.cond.if_match = cond->if_match;
	}
	/* No Txn after the last touch every node acknowledged + half the grace: the
	 * collectors may judge the cells from then on (dn_coord_touch.c). */
	p.not_after_ns = dn_coord_not_after(w);
	if (p.not_after_ns && dn_coord_realtime_ns() >= p.not_after_ns) {
		/* Before the Txn: nothing went to etcd, so the cells go (not ambiguous). */
		free(groups);
		free(cattrs);
		dn_coord_grace_msg(w, msg, cap);
		ZC_WARN("coord", "commit of %s/%s extent %016" PRIx64 " refused: %s", w->bucket,
		        w->key, w->id, msg);
		return ZC_E(ZC_UNAVAILABLE);
	}
	t0 = zc_now_ns();
	rc = cl_meta_commit(w->c->o.etcd, &p, &w->old);
	dn_coord_hist_add(&w->c->etcd_hist, zc_now_ns() - t0);
	free(groups);
	free(cattrs);
	if (rc) {
		bool late = p.not_after_ns && dn_coord_realtime_ns() >= p.not_after_ns;

		w->ambiguous = ambiguous_err(rc);
		if (rc != ZC_E(ZC_PRECONDITION))
			ZC_WARN("coord", "commit of %s/%s extent %016" PRIx64 " failed err=%d%s%s",
			        w->bucket, w->key, w->id, rc,
			        late && w->ambiguous ? " (the commit deadline, gc-grace / 2 after "
			                               "the last touch, passed during the Txn)"
			                             : "",
			        w->ambiguous ? " (outcome unknown: cells left pending)" : "");
		return commit_msg(w, rc, msg, cap);
	}
	w->committed = true;
	res->size = w->size;
	res->crc32c = w->crc;
	res->mtime_ns = p.mtime_ns;
	res->etag = etag;
	return 0;
}

/* Unfinished local cells go now (nothing recorded): they have no outcome to wait for. */
static void
drop_unfinished(struct dn_coord_write *w)
{
	for (uint32_t g = 0; g < w->opened; g++)
		for (unsigned i = 0; i < w->n; i++) {
			struct ccell *cc = &w->groups[g]->cells[i];

			if (cc->local && cc->lw) {
				dn_cell_write_abort(cc->lw);
				cc->lw = NULL;
				pthread_mutex_lock(&w->mu);
				cc->done = true;
				if (cc->started)
					w->outstanding--;
				pthread_mutex_unlock(&w->mu);
			}
		}
}

void
dn_coord_end(struct dn_coord_write *w)
{
	if (w->committed) {
		settle_cells(w, true);
		if (w->old.had)
			delete_old(w);
	} else {
		/* Failed before or at the commit: every outcome is in (commit waited), or
		 * the write was poisoned mid-stream and its streams still run. */
		drop_unfinished(w);
		wait_outcomes(w, true);
		if (!w->ambiguous)
			settle_cells(w, false);
	}
	dn_coord_write_free(w);
}

void
dn_coord_abort(struct dn_coord_write *w)
{
	/* Remote cells are cancelled, so their nodes drop them; whatever finished meanwhile
	 * is deleted. */
	drop_unfinished(w);
	wait_outcomes(w, true);
	settle_cells(w, false);
	dn_coord_write_free(w);
}
