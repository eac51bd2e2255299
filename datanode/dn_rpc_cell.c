/*
 * dn_rpc_cell: the cell calls a coordinator makes to this node (WriteCell, ReadCell,
 * DeleteCells, CommitCells; docs/protocol.md "Cells") over the cell store (dn_cell_*).
 *
 * WriteCell: the open is checked and the cell's file created on the CQ thread (an LMDB
 * read and a file create: a refusal such as CellExists answers before any payload
 * moves). Every later callback becomes a job on the call's own queue, run in order by
 * the dn-cell threads: dn_cell_write_data may wait for the store's in-flight credit, and
 * a CQ thread must not. A call pauses receiving while more than call_cap bytes wait in
 * its queue. As in dn_rpc_write.c, the binding fails a call only where no further
 * callback can come (inside a callback, or after the terminal job); an engine error in
 * the middle of the stream is recorded and delivered by the next callback.
 *
 * DeleteCells and CommitCells write metadata (an fsynced LMDB transaction, an unlink):
 * they run on the dn-cell threads with their reply deferred. ReadCell is stepped by the
 * reader threads of dn_rpc_read.c (dn_rpc_cell_read_next).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dn_rpc_internal.h"
#include "ec.h"
#include "zc_crc.h"
#include "zc.h"

enum cjob_kind { CJOB_DATA, CJOB_FINISH, CJOB_ABORT, CJOB_UNARY };

struct cjob {
	struct cjob *next;
	enum cjob_kind kind;
	uint64_t off;
	size_t len, n;
	struct zc_seg *segs; /* each holding a ref */
	uint32_t crc32c;
	int err;
	/* CJOB_UNARY */
	enum rpc_method m;
	const union rpc_unary_req *req;
	struct rpc_reply *reply;
};

struct ccall {
	struct dn_rpc *b;
	struct rpc_write *w;
	struct dn_cell_write *cw; /* NULL once finished or aborted */
	struct dn_cell_id id;
	char name[64]; /* "cell <extent>.<group>.<cell>", for messages */
	uint64_t length;
	uint32_t crc;       /* of the bytes so far */
	struct cjob *final; /* the terminal job, allocated at open */
	/* under cells->mu */
	struct cjob *head, *tail;
	struct ccall *next_ready;
	bool scheduled, paused;
	size_t queued;
	int err;
	char errmsg[RPC_STATUS_MSG_MAX];
};

#define CELL_THREADS 2

struct dn_rpc_cells {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct ccall *ready_head, *ready_tail;
	struct cjob *uq_head, *uq_tail; /* unary jobs */
	bool stop;
	pthread_t threads[CELL_THREADS];
	unsigned n_threads;
};

void
dn_rpc_cell_name(struct dn_cell_id id, char *buf, size_t len)
{
	snprintf(buf, len, "cell %016" PRIx64 ".%" PRIu32 ".%u", id.extent, id.group, id.cell);
}

static void
cjob_free(struct cjob *j)
{
	if (!j)
		return;
	for (size_t i = 0; i < j->n; i++)
		if (j->segs[i].ref)
			zc_ref_put(j->segs[i].ref);
	free(j->segs);
	free(j);
}

static void
ccall_free(struct ccall *c)
{
	cjob_free(c->final);
	free(c);
}

/* Under cells->mu. */
static void
ccall_push(struct dn_rpc_cells *q, struct ccall *c, struct cjob *j)
{
	j->next = NULL;
	if (c->tail)
		c->tail->next = j;
	else
		c->head = j;
	c->tail = j;
	if (c->scheduled)
		return;
	c->scheduled = true;
	c->next_ready = NULL;
	if (q->ready_tail)
		q->ready_tail->next_ready = c;
	else
		q->ready_head = c;
	q->ready_tail = c;
	pthread_cond_signal(&q->cond);
}

/* ------------------------------------------------------------------ WriteCell */

/* The open's layout, checked with a message naming the field (dn_cell_write_open's own
 * check says only -EINVAL). */
static int
open_check(struct dn_store *s, const struct rpc_cell_open *o, char *msg, size_t cap)
{
	int err = dn_rpc_names_object(o->bucket, o->key, msg, cap);

	if (err)
		return err;
	if (!o->ec_k || !o->ec_m || o->ec_k + o->ec_m > EC_MAX_CELLS)
		snprintf(msg, cap, "scheme %u+%u out of range", o->ec_k, o->ec_m);
	else if (o->id.cell >= o->ec_k + o->ec_m)
		snprintf(msg, cap, "cell index %u past the %u cells of %u+%u", o->id.cell,
		         o->ec_k + o->ec_m, o->ec_k, o->ec_m);
	else if (!o->cell_size || o->cell_size % 4096 || o->cell_size % s->o.chunk_size)
		snprintf(msg, cap,
		         "cell size %u is not a multiple of 4096 and of the chunk size %zu",
		         o->cell_size, (size_t)s->o.chunk_size);
	else if (!o->stripes_per_group)
		snprintf(msg, cap, "stripes per group 0");
	else
		return 0;
	return ZC_E(ZC_INVALID);
}

int
dn_rpc_on_cell_open(void *ctx, struct rpc_write *w, const struct rpc_cell_open *open,
                    void **call_ctx)
{
	struct dn_rpc *b = ctx;
	struct dn_cell_spec spec = { .id = { open->id.extent, open->id.group, open->id.cell },
		                     .length = open->length,
		                     .k = open->ec_k,
		                     .m = open->ec_m,
		                     .cell_size = open->cell_size,
		                     .stripes_per_group = open->stripes_per_group,
		                     .bucket = open->bucket,
		                     .key = open->key };
	char msg[RPC_STATUS_MSG_MAX], name[64];
	struct ccall *c;
	int rc;

	dn_rpc_cell_name(spec.id, name, sizeof(name));
	rc = open_check(b->s, open, msg, sizeof(msg));
	if (rc) {
		rpc_write_set_error(w, "%s: %s", name, msg);
		return rc;
	}
	if (dn_admission_level(b->s) >= DN_ADM_REFUSE) {
		rpc_write_set_error(w, "drive write latency above the refusal limit");
		return -EAGAIN;
	}
	c = calloc(1, sizeof(*c));
	if (c)
		c->final = calloc(1, sizeof(*c->final));
	if (!c || !c->final) {
		if (c)
			free(c);
		return -ENOMEM;
	}
	rc = dn_cell_write_open(b->s, &spec, &c->cw);
	if (rc) {
		ccall_free(c);
		switch (rc) {
		case -EEXIST:
			rpc_write_set_error(w, "%s exists on this node", name);
			return ZC_E(ZC_CELL_EXISTS);
		case -EBUSY:
			rpc_write_set_error(w, "a write of %s is in progress", name);
			return -EAGAIN;
		case -ENOSPC:
		case DN_ENOQUORUM:
			rpc_write_set_error(w, "no drive can take %s", name);
			return rc;
		case -EINVAL:
			rpc_write_set_error(w, "%s refused by the cell store", name);
			return rc;
		default:
			rpc_write_set_error(w, "cannot create %s: %s", name,
			                    rc > -ZC_ERR_BASE ? strerror(-rc) : "");
			return rc;
		}
	}
	c->b = b;
	c->w = w;
	c->id = spec.id;
	c->length = spec.length;
	memcpy(c->name, name, sizeof(name));
	*call_ctx = c;
	return 0;
}

void
dn_rpc_on_cell_data(void *call_ctx, struct rpc_write *w, uint64_t offset, const struct zc_seg *segs,
                    size_t n_segs, size_t len, uint32_t crc32c)
{
	struct ccall *c = call_ctx;
	struct dn_rpc_cells *q = c->b->cells;
	struct cjob *j;

	pthread_mutex_lock(&q->mu);
	if (c->err) {
		bool here = !c->scheduled;

		pthread_mutex_unlock(&q->mu);
		if (here) {
			/* No job runs and no callback can follow ours: fail here. */
			if (c->cw)
				dn_cell_write_abort(c->cw);
			rpc_write_fail(w, c->err, "%s", c->errmsg);
			ccall_free(c);
		}
		return;
	}
	pthread_mutex_unlock(&q->mu);
	j = calloc(1, sizeof(*j));
	if (j)
		j->segs = malloc(n_segs * sizeof(*j->segs));
	pthread_mutex_lock(&q->mu);
	if (!j || !j->segs) {
		free(j ? j->segs : NULL);
		free(j);
		c->err = -ENOMEM;
		snprintf(c->errmsg, sizeof(c->errmsg), "out of memory");
		pthread_mutex_unlock(&q->mu);
		return;
	}
	j->kind = CJOB_DATA;
	j->off = offset;
	j->len = len;
	j->crc32c = crc32c;
	j->n = n_segs;
	for (size_t i = 0; i < n_segs; i++) {
		j->segs[i] = segs[i];
		if (segs[i].ref)
			zc_ref_get(segs[i].ref);
	}
	ccall_push(q, c, j);
	c->queued += len;
	if (c->queued >= c->b->o.call_cap && !c->paused) {
		/* Before a worker can see it (dn_rpc_write.c says why). */
		c->paused = true;
		rpc_write_pause(w);
	}
	pthread_mutex_unlock(&q->mu);
}

void
dn_rpc_on_cell_commit(void *call_ctx, struct rpc_write *w, const struct rpc_commit *last)
{
	struct ccall *c = call_ctx;
	struct dn_rpc_cells *q = c->b->cells;
	struct cjob *j = c->final;

	(void)w;
	(void)last; /* a CellChunk's commit has no fields */
	c->final = NULL;
	j->kind = CJOB_FINISH;
	pthread_mutex_lock(&q->mu);
	ccall_push(q, c, j);
	pthread_mutex_unlock(&q->mu);
}

void
dn_rpc_on_cell_abort(void *call_ctx, struct rpc_write *w, int err)
{
	struct ccall *c = call_ctx;
	struct dn_rpc_cells *q = c->b->cells;
	struct cjob *j = c->final;

	(void)w;
	c->final = NULL;
	j->kind = CJOB_ABORT;
	j->err = err;
	pthread_mutex_lock(&q->mu);
	ccall_push(q, c, j);
	pthread_mutex_unlock(&q->mu);
}

/* Commit thread: the cell is durable and recorded pending (err 0), or removed. */
static void
cell_done(void *arg, int err)
{
	struct ccall *c = arg;

	if (err) {
		ZC_WARN("dn_rpc", "%s: finish failed err=%d", c->name, err);
		rpc_write_fail(c->w, err, "%s not recorded: %s", c->name,
		               err > -ZC_ERR_BASE ? strerror(-err)
		                                  : zc_code_word(zc_err_code(err)));
	} else {
		struct rpc_cell_result res = { .length = c->length, .crc32c = c->crc };

		rpc_write_finish_cell(c->w, &res);
	}
	ccall_free(c);
}

/* Run one job of c (a dn-cell thread holding c). Returns false when c is gone. */
static bool
ccall_run(struct ccall *c, struct cjob *j)
{
	struct dn_rpc_cells *q = c->b->cells;
	bool resume;
	int rc, err;

	switch (j->kind) {
	case CJOB_DATA:
		pthread_mutex_lock(&q->mu);
		err = c->err;
		pthread_mutex_unlock(&q->mu);
		if (!err && c->cw) {
			rc = dn_cell_write_data(c->cw, j->off, j->segs, j->n);
			if (rc) {
				/* Poisoned: drop it (its file goes); the next callback says so. */
				dn_cell_write_abort(c->cw);
				c->cw = NULL;
				pthread_mutex_lock(&q->mu);
				c->err = rc;
				snprintf(c->errmsg, sizeof(c->errmsg),
				         "write of %s at %llu failed: %s", c->name,
				         (unsigned long long)j->off, strerror(-rc));
				pthread_mutex_unlock(&q->mu);
			} else {
				c->crc = zc_crc32c_combine(c->crc, j->crc32c, j->len);
			}
		}
		pthread_mutex_lock(&q->mu);
		c->queued -= j->len;
		resume = c->paused && (c->queued <= c->b->o.call_cap / 2 || c->err);
		if (resume)
			c->paused = false;
		pthread_mutex_unlock(&q->mu);
		cjob_free(j);
		if (resume)
			rpc_write_resume(c->w); /* still scheduled: nobody finishes c meanwhile */
		return true;
	case CJOB_FINISH:
		pthread_mutex_lock(&q->mu);
		err = c->err;
		pthread_mutex_unlock(&q->mu);
		cjob_free(j);
		if (err || !c->cw) {
			if (c->cw)
				dn_cell_write_abort(c->cw);
			rpc_write_fail(c->w, err ? err : -EIO, "%s", err ? c->errmsg : "no write");
			ccall_free(c);
		} else {
			struct dn_cell_write *cw = c->cw;

			c->cw = NULL;
			dn_cell_write_finish(cw, cell_done, c);
		}
		return false;
	case CJOB_ABORT:
		if (c->cw)
			dn_cell_write_abort(c->cw);
		pthread_mutex_lock(&q->mu);
		err = c->err;
		pthread_mutex_unlock(&q->mu);
		if (err)
			rpc_write_fail(c->w, err, "%s", c->errmsg);
		else
			rpc_write_fail(c->w, j->err < 0 ? j->err : -ECANCELED,
			               "write of %s aborted", c->name);
		cjob_free(j);
		ccall_free(c);
		return false;
	case CJOB_UNARY:
		break;
	}
	return true;
}

/* ------------------------------------------------------------------ DeleteCells, CommitCells */

static int
cells_run(struct dn_rpc *b, enum rpc_method m, const struct rpc_cells_req *req,
          struct rpc_reply *reply)
{
	struct rpc_cells_result res = { 0 };
	char name[64];

	for (size_t i = 0; i < req->n_cells; i++) {
		const struct rpc_cell_id *r = &req->cells[i];
		struct dn_cell_id id = { r->extent, r->group, r->cell };
		int rc =
		        m == RPC_DELETE_CELLS ? dn_cell_delete(b->s, id) : dn_cell_commit(b->s, id);

		if (rc < 0) {
			/* The ones before stay done: both calls are idempotent, a retry is safe. */
			dn_rpc_cell_name(id, name, sizeof(name));
			if (rc == -ENOENT)
				rpc_reply_error(reply, "%s (entry %zu of %zu; %u done)", name, i,
				                req->n_cells, res.count);
			else
				rpc_reply_error(reply, "%s of %s failed: %s (%u done)",
				                m == RPC_DELETE_CELLS ? "delete" : "commit", name,
				                strerror(-rc), res.count);
			return rc;
		}
		res.count += m == RPC_DELETE_CELLS ? (unsigned)rc : 1;
	}
	return rpc_reply_cells_result(reply, &res);
}

/* CQ thread: check the list, defer the work to a dn-cell thread. */
static int
cells_unary(struct dn_rpc *b, enum rpc_method m, const union rpc_unary_req *req,
            struct rpc_reply *reply)
{
	struct dn_rpc_cells *q = b->cells;
	struct cjob *j;

	for (size_t i = 0; i < req->cells.n_cells; i++)
		if (!req->cells.cells[i].extent) {
			rpc_reply_error(reply, "cells[%zu]: extent id 0", i);
			return ZC_E(ZC_INVALID);
		}
	j = calloc(1, sizeof(*j));
	if (!j)
		return -ENOMEM;
	j->kind = CJOB_UNARY;
	j->m = m;
	j->req = req;
	j->reply = reply;
	pthread_mutex_lock(&q->mu);
	if (q->uq_tail)
		q->uq_tail->next = j;
	else
		q->uq_head = j;
	q->uq_tail = j;
	pthread_cond_signal(&q->cond);
	pthread_mutex_unlock(&q->mu);
	return RPC_REPLY_LATER;
}

int
dn_rpc_on_unary_all(void *ctx, enum rpc_method m, const union rpc_unary_req *req,
                    struct rpc_reply *reply)
{
	if (m == RPC_DELETE_CELLS || m == RPC_COMMIT_CELLS)
		return cells_unary(ctx, m, req, reply);
	return dn_rpc_on_unary(ctx, m, req, reply);
}

/* ------------------------------------------------------------------ threads */

static void *
cell_worker(void *arg)
{
	struct dn_rpc *b = arg;
	struct dn_rpc_cells *q = b->cells;

	pthread_mutex_lock(&q->mu);
	for (;;) {
		struct ccall *c;
		struct cjob *j;

		while (!q->ready_head && !q->uq_head && !q->stop)
			pthread_cond_wait(&q->cond, &q->mu);
		if (q->uq_head) {
			j = q->uq_head;
			q->uq_head = j->next;
			if (!q->uq_head)
				q->uq_tail = NULL;
			pthread_mutex_unlock(&q->mu);
			rpc_reply_send(j->reply, cells_run(b, j->m, &j->req->cells, j->reply));
			free(j);
			pthread_mutex_lock(&q->mu);
			continue;
		}
		c = q->ready_head;
		if (!c)
			break; /* stopping, and every call was finished */
		q->ready_head = c->next_ready;
		if (!q->ready_head)
			q->ready_tail = NULL;
		j = c->head;
		c->head = j->next;
		if (!c->head)
			c->tail = NULL;
		pthread_mutex_unlock(&q->mu);
		if (!ccall_run(c, j)) {
			pthread_mutex_lock(&q->mu);
			continue;
		}
		pthread_mutex_lock(&q->mu);
		c->scheduled = false;
		if (c->head) {
			/* to the tail: calls take turns */
			c->scheduled = true;
			c->next_ready = NULL;
			if (q->ready_tail)
				q->ready_tail->next_ready = c;
			else
				q->ready_head = c;
			q->ready_tail = c;
		}
	}
	pthread_mutex_unlock(&q->mu);
	return NULL;
}

int
dn_rpc_cells_create(struct dn_rpc *b)
{
	struct dn_rpc_cells *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	pthread_mutex_init(&q->mu, NULL);
	pthread_cond_init(&q->cond, NULL);
	b->cells = q;
	for (; q->n_threads < CELL_THREADS; q->n_threads++) {
		if (pthread_create(&q->threads[q->n_threads], NULL, cell_worker, b))
			return -ENOMEM; /* dn_rpc_cells_destroy joins the ones started */
		pthread_setname_np(q->threads[q->n_threads], "dn-cell");
	}
	return 0;
}

void
dn_rpc_cells_destroy(struct dn_rpc *b)
{
	struct dn_rpc_cells *q = b->cells;

	if (!q)
		return;
	pthread_mutex_lock(&q->mu);
	q->stop = true;
	pthread_cond_broadcast(&q->cond);
	pthread_mutex_unlock(&q->mu);
	for (unsigned i = 0; i < q->n_threads; i++)
		pthread_join(q->threads[i], NULL);
	pthread_mutex_destroy(&q->mu);
	pthread_cond_destroy(&q->cond);
	free(q);
	b->cells = NULL;
}

void
dn_rpc_cells_handlers(struct rpc_server_handlers *h)
{
	h->write_cell.open_cell = dn_rpc_on_cell_open;
	h->write_cell.data = dn_rpc_on_cell_data;
	h->write_cell.commit = dn_rpc_on_cell_commit;
	h->write_cell.abort = dn_rpc_on_cell_abort;
	/* the rpc layer checks each message's CRC32C: dn_cell_write_data takes none */
	h->write_cell.handler_verifies_crc = false;
	h->read_cell.start_cell = dn_rpc_on_cell_read_start;
	h->read_cell.sent = dn_rpc_on_read_sent;
	h->read_cell.abort = dn_rpc_on_read_abort;
	h->unary = dn_rpc_on_unary_all;
}

/* ------------------------------------------------------------------ ReadCell */

int
dn_rpc_on_cell_read_start(void *ctx, struct rpc_read *r, const struct rpc_cell_read_req *req,
                          void **call_ctx)
{
	struct dn_rpc *b = ctx;
	struct dn_cell_id id = { req->id.extent, req->id.group, req->id.cell };
	struct dn_cell_info info;
	struct rcall *rc;
	char name[64];
	int err;

	dn_rpc_cell_name(id, name, sizeof(name));
	if (!id.extent) {
		rpc_read_set_error(r, "extent id 0");
		return ZC_E(ZC_INVALID);
	}
	/* A missing cell and a bad range answer at once, without a reader thread. */
	err = dn_cell_stat(b->s, id, &info);
	if (err) {
		rpc_read_set_error(r, "%s", name);
		return err;
	}
	if (req->offset > info.length ||
	    (req->has_length && req->length > info.length - req->offset)) {
		rpc_read_set_error(r, "%s: range %llu+%llu outside %llu bytes", name,
		                   (unsigned long long)req->offset, (unsigned long long)req->length,
		                   (unsigned long long)info.length);
		dn_cell_info_fini(&info);
		return -EINVAL;
	}
	rc = calloc(1, sizeof(*rc));
	if (rc) {
		rc->bucket = strdup("");
		rc->key = strdup(name);
	}
	if (!rc || !rc->bucket || !rc->key) {
		if (rc) {
			free(rc->bucket);
			free(rc->key);
		}
		free(rc);
		dn_cell_info_fini(&info);
		return -ENOMEM;
	}
	pthread_mutex_init(&rc->mu, NULL);
	rc->b = b;
	rc->r = r;
	rc->is_cell = true;
	rc->cell = id;
	rc->off = req->offset;
	rc->cell_end = req->has_length ? req->offset + req->length : info.length;
	rc->info_sent = true; /* a ReadCell's chunks carry no info */
	rc->running = true;
	dn_cell_info_fini(&info);
	*call_ctx = rc;
	dn_rpc_rcall_queue(rc);
	return 0;
}

int
dn_rpc_cell_read_next(struct rcall *rc)
{
	uint64_t want = rc->cell_end - rc->off;
	int err;

	if (want > READ_BATCH)
		want = READ_BATCH;
	if (!want)
		return 0;
	/* One window of whole chunks per step: dn_cell_read looks the entry up again, so a
	 * cell deleted between steps ends the stream with NOT_FOUND rather than stale bytes. */
	err = dn_cell_read(rc->b->s, rc->cell, rc->off, want, true, dn_rpc_read_cb, rc);
	if (err)
		return err;
	rc->off += want;
	return rc->off < rc->cell_end;
}
