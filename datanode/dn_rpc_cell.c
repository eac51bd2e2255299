/*
 * dn_rpc_cell: the cell calls a coordinator makes to this node (WriteCell, ReadCell,
 * DeleteCells, CommitCells; docs/protocol.md "Cells") over the cell store (dn_cell_*).
 *
 * WriteCell: the open is checked and the cell's file created on the CQ thread (an LMDB
 * read and a file create: a refusal such as CellExists answers before any payload
 * moves). Every later callback becomes a job on the call's own queue, run in order by
 * the dn-cell workers (dn_rpc_exec.c): dn_cell_write_data may wait for the store's
 * in-flight credit, and a CQ thread must not. A call pauses receiving while more than
 * call_cap bytes wait in its queue. As in dn_rpc_write.c, the binding fails a call only where no
 * further callback can come (inside a callback, or after the terminal job); an engine error in the
 * middle of the stream is recorded and delivered by the next callback.
 *
 * DeleteCells and CommitCells write metadata (an fsynced LMDB transaction, an unlink):
 * they run on the dn-cell workers, ahead of the waiting WriteCells, their reply deferred. ReadCell
 * is stepped by the reader threads of dn_rpc_read.c (dn_rpc_cell_read_next).
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

enum cjob_kind { CJOB_FINISH, CJOB_ABORT };

/* A WriteCell's terminal job (its data jobs are the executor's). */
struct cjob {
	struct dn_exec_job ej;
	enum cjob_kind kind;
	int err;
};

struct ccall {
	struct dn_exec_call ec; /* on b->cells */
	struct dn_rpc *b;
	struct dn_cell_write *cw; /* NULL once finished or aborted */
	struct dn_cell_id id;
	char name[64]; /* "cell <extent>.<group>.<cell>", for messages */
	uint64_t length;
	uint32_t crc;       /* of the bytes so far */
	struct cjob *final; /* the terminal job, allocated at open */
};

/* A DeleteCells or CommitCells call: a call of one job, its reply deferred. */
struct cells_call {
	struct dn_exec_call ec;
	struct dn_exec_job ej;
	struct dn_rpc *b;
	enum rpc_method m;
	const union rpc_unary_req *req;
	struct rpc_reply *reply;
};

void
dn_rpc_cell_name(struct dn_cell_id id, char *buf, size_t len)
{
	snprintf(buf, len, "cell %016" PRIx64 ".%" PRIu32 ".%u", id.extent, id.group, id.cell);
}

static void
ccall_free(struct ccall *c)
{
	free(c->final);
	free(c);
}

static enum dn_exec_run ccall_run(struct dn_exec_call *ec, struct dn_exec_job *ej);
static void ccall_run_data(struct dn_exec_call *ec, const struct dn_exec_data *d);

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
		case ZC_E(ZC_CELL_EXISTS):
			rpc_write_set_error(w, "%s exists on this node", name);
			return rc;
		case -EBUSY:
			rpc_write_set_error(w, "a write of %s is in progress", name);
			return -EAGAIN;
		case -ENOSPC:
		case ZC_E(ZC_NO_QUORUM):
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
	c->ec.run = ccall_run;
	c->ec.run_data = ccall_run_data;
	c->ec.w = w;
	c->b = b;
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

	if (dn_exec_queue_data(&c->b->cells, &c->ec, offset, segs, n_segs, len, crc32c) !=
	    DN_EXEC_FAIL_HERE)
		return;
	(void)w; /* c->ec.w: ended with the error it recorded */
	if (c->cw)
		dn_cell_write_abort(c->cw);
	dn_exec_fail(&c->b->cells, &c->ec, -EIO, "failed");
	ccall_free(c);
}

/* The terminal callbacks: the job allocated at open always lands. */
static void
push_final(struct ccall *c, enum cjob_kind kind, int err)
{
	struct cjob *j = c->final;

	c->final = NULL;
	j->kind = kind;
	j->err = err;
	pthread_mutex_lock(&c->b->cells.mu);
	dn_exec_push(&c->b->cells, &c->ec, &j->ej);
	pthread_mutex_unlock(&c->b->cells.mu);
}

void
dn_rpc_on_cell_commit(void *call_ctx, struct rpc_write *w, const struct rpc_commit *last)
{
	(void)w;
	(void)last; /* a CellChunk's commit has no fields */
	push_final(call_ctx, CJOB_FINISH, 0);
}

void
dn_rpc_on_cell_abort(void *call_ctx, struct rpc_write *w, int err)
{
	(void)w;
	push_final(call_ctx, CJOB_ABORT, err);
}

/* Commit thread: the cell is durable and recorded pending (err 0), or removed. */
static void
cell_done(void *arg, int err)
{
	struct ccall *c = arg;

	if (err) {
		ZC_WARN("dn_rpc", "%s: finish failed err=%d", c->name, err);
		rpc_write_fail(c->ec.w, err, "%s not recorded: %s", c->name,
		               err > -ZC_ERR_BASE ? strerror(-err)
		                                  : zc_code_word(zc_err_code(err)));
	} else {
		struct rpc_cell_result res = { .length = c->length, .crc32c = c->crc };

		rpc_write_finish_cell(c->ec.w, &res);
	}
	ccall_free(c);
}

/* A data job: to the cell store; an error is recorded for the next callback. */
static void
ccall_run_data(struct dn_exec_call *ec, const struct dn_exec_data *d)
{
	struct ccall *c = dn_container_of(ec, struct ccall, ec);
	struct dn_exec *ex = &c->b->cells;
	int rc;

	if (!dn_exec_err(ex, &c->ec) && c->cw) {
		rc = dn_cell_write_data(c->cw, d->off, d->segs, d->n);
		if (rc) {
			/* Poisoned: drop it (its file goes); the next callback says so. */
			dn_cell_write_abort(c->cw);
			c->cw = NULL;
			dn_exec_set_err(ex, &c->ec, rc, "write of %s at %llu failed: %s", c->name,
			                (unsigned long long)d->off, strerror(-rc));
		} else {
			c->crc = zc_crc32c_combine(c->crc, d->crc32c, d->len);
		}
	}
}

/* Run one job of c (a dn-cell worker holding c). */
static enum dn_exec_run
ccall_run(struct dn_exec_call *ec, struct dn_exec_job *ej)
{
	struct ccall *c = dn_container_of(ec, struct ccall, ec);
	struct cjob *j = dn_container_of(ej, struct cjob, ej);
	struct dn_exec *ex = &c->b->cells;

	switch (j->kind) {
	case CJOB_FINISH:
		free(j);
		if (dn_exec_err(ex, &c->ec) || !c->cw) {
			if (c->cw)
				dn_cell_write_abort(c->cw);
			dn_exec_fail(ex, &c->ec, -EIO, "no write");
			ccall_free(c);
		} else {
			struct dn_cell_write *cw = c->cw;

			c->cw = NULL;
			dn_cell_write_finish(cw, cell_done, c);
		}
		return DN_EXEC_GONE;
	case CJOB_ABORT:
		if (c->cw)
			dn_cell_write_abort(c->cw);
		dn_exec_fail(ex, &c->ec, j->err < 0 ? j->err : -ECANCELED, "write of %s aborted",
		             c->name);
		free(j);
		ccall_free(c);
		return DN_EXEC_GONE;
	}
	return DN_EXEC_NEXT;
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
		int rc;

		if (m == RPC_DELETE_CELLS) {
			rc = dn_cell_retire(b->s, id);
		} else if (req->touch) {
			/* a cell whose stream has not ended has no entry yet: nothing to do */
			rc = dn_cell_touch(b->s, id);
			if (zc_err_is(rc, ZC_NO_KEY))
				continue;
		} else {
			rc = dn_cell_commit(b->s, id);
		}
		if (rc < 0) {
			/* The ones before stay done: both calls are idempotent, a retry is safe. */
			dn_rpc_cell_name(id, name, sizeof(name));
			if (zc_err_is(rc, ZC_NO_KEY))
				rpc_reply_error(reply, "%s (entry %zu of %zu; %u done)", name, i,
				                req->n_cells, res.count);
			else
				rpc_reply_error(reply, "%s of %s failed: %s (%u done)",
				                m == RPC_DELETE_CELLS ? "delete"
				                : req->touch          ? "touch"
				                                      : "commit",
				                name, strerror(-rc), res.count);
			return rc;
		}
		res.count += m == RPC_DELETE_CELLS ? (unsigned)rc : 1;
	}
	return rpc_reply_cells_result(reply, &res);
}

/* A dn-cell worker: run the call, send its reply. */
static enum dn_exec_run
cells_call_run(struct dn_exec_call *ec, struct dn_exec_job *ej)
{
	struct cells_call *u = dn_container_of(ec, struct cells_call, ec);

	(void)ej;
	rpc_reply_send(u->reply, cells_run(u->b, u->m, &u->req->cells, u->reply));
	free(u);
	return DN_EXEC_GONE;
}

/* CQ thread: check the list, defer the work to a dn-cell worker. */
static int
cells_unary(struct dn_rpc *b, enum rpc_method m, const union rpc_unary_req *req,
            struct rpc_reply *reply)
{
	struct cells_call *u;

	for (size_t i = 0; i < req->cells.n_cells; i++)
		if (!req->cells.cells[i].extent) {
			rpc_reply_error(reply, "cells[%zu]: extent id 0", i);
			return ZC_E(ZC_INVALID);
		}
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->ec.run = cells_call_run;
	u->ec.urgent = true; /* one short transaction: not behind the WriteCells' data */
	u->b = b;
	u->m = m;
	u->req = req;
	u->reply = reply;
	pthread_mutex_lock(&b->cells.mu);
	dn_exec_push(&b->cells, &u->ec, &u->ej);
	pthread_mutex_unlock(&b->cells.mu);
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

void
dn_rpc_cells_handlers(struct rpc_server_handlers *h)
{
	h->write_cell = (struct rpc_write_ops){
		.open_cell = dn_rpc_on_cell_open,
		.data = dn_rpc_on_cell_data,
		.commit = dn_rpc_on_cell_commit,
		.abort = dn_rpc_on_cell_abort,
		/* the rpc layer checks each message's CRC32C: dn_cell_write_data takes none */
		.handler_verifies_crc = false,
	};
	h->read_cell = (struct rpc_read_ops){
		.start_cell = dn_rpc_on_cell_read_start,
		.sent = dn_rpc_on_read_sent,
		.abort = dn_rpc_on_read_abort,
	};
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
