/*
 * rpc server, Write and WriteCell: the client stream of WriteChunks (CellChunks), decoded
 * by the marshaller and handed to the handler with flow control (pause/resume), then the
 * WriteResult (CellResult). The two messages share the numbers and meaning of fields 1-5
 * (open, offset, data, crc32c, commit), so one receive path, one zero-copy parse and one
 * set of checks serve both; only the open and the result differ.
 */
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "rpc_server_internal.h"
#include "zc_crc.h"
#include "zc.h"

/* ------------------------------------------------------------------ Write */

static void
write_free(struct rpc_write *w)
{
	rpc_chunk_fini(&w->chunk);
	rpc_call_fini(&w->c);
	free(w);
}

/* Under w->c.mu: post the next RECV_MESSAGE. */
static void
write_post_recv(struct rpc_write *w)
{
	grpc_op op = { .op = GRPC_OP_RECV_MESSAGE };

	op.data.recv_message.recv_message = &w->recv_bb;
	w->recv_bb = NULL;
	if (grpc_call_start_batch(w->c.call, &op, 1, &w->t_recv, NULL) == GRPC_CALL_OK) {
		w->c.pending++;
		w->c.busy = true;
	}
}

/*
 * Called with w->c.mu held: deliver an abort the handler is owed (only when no other
 * callback runs or is due), free the call when nothing holds it. Unlocks.
 */
void
rpc_write_settle(struct rpc_write *w)
{
	if (!w->c.busy && (w->c.cancelled || w->c.status_sent) && w->opened && !w->c.aborted &&
	    w->c.handler_holds && !w->committed) {
		int err = w->c.cancelled ? -ECANCELED : -EINVAL;

		w->c.aborted = true;
		w->c.busy = true;
		pthread_mutex_unlock(&w->c.mu);
		w->ops->abort(w->call_ctx, w, err);
		pthread_mutex_lock(&w->c.mu);
		w->c.busy = false;
	}
	if (rpc_call_idle(&w->c)) {
		pthread_mutex_unlock(&w->c.mu);
		write_free(w);
		return;
	}
	pthread_mutex_unlock(&w->c.mu);
}

/* Fail the call for bad input (the server's own verdict). Under w->c.mu. */
static void __attribute__((format(printf, 3, 4)))
write_reject(struct rpc_write *w, int err, const char *fmt, ...)
{
	char msg[RPC_STATUS_MSG_MAX];
	va_list ap;

	va_start(ap, fmt);
	rpc_vformat_status(msg, sizeof(msg), err, fmt, ap);
	va_end(ap);
	ZC_DBG("rpc", "write rejected peer=%s: %s", w->c.peer, msg);
	rpc_call_send_status(&w->c, err, msg, NULL, true);
}

/* The fields 1-5 WriteChunk and CellChunk share. */
struct chunk_view {
	bool has_open;
	uint64_t offset;
	uint32_t crc32c;
	bool commit;
};

static void
chunk_view(const struct rpc_write *w, struct chunk_view *v)
{
	if (w->m == RPC_WRITE_CELL) {
		const Zest__CellChunk *cc = (const Zest__CellChunk *)w->chunk.msg;

		*v = (struct chunk_view){ cc->open != NULL, cc->offset, cc->crc32c, cc->commit };
	} else {
		const Zest__WriteChunk *wc = (const Zest__WriteChunk *)w->chunk.msg;

		*v = (struct chunk_view){ wc->open != NULL, wc->offset, wc->crc32c, wc->commit };
	}
}

/*
 * The first message's open: the wire contract's own limits, then the handler's open
 * callback. Under w->c.mu (dropped around the callback). Returns 0 when accepted, else
 * the call is failed.
 */
static int
write_open(struct rpc_write *w)
{
	struct rpc_server *srv = w->c.srv;
	void *ctx = srv->h.ctx;
	uint64_t size;
	int rc;

	if (w->m == RPC_WRITE_CELL) {
		const Zest__CellOpen *o = ((const Zest__CellChunk *)w->chunk.msg)->open;
		struct rpc_cell_open open;

		rpc_msg_cell_open_from_pb(o, &open);
		if (!open.id.extent) {
			write_reject(w, -EINVAL, "extent id 0");
			return -EINVAL;
		}
		if (open.length > (uint64_t)open.stripes_per_group * open.cell_size) {
			write_reject(w, -EINVAL, "cell length %llu exceeds %u stripes of %u bytes",
			             (unsigned long long)open.length, open.stripes_per_group,
			             open.cell_size);
			return -EINVAL;
		}
		size = open.length;
		if (w->chunk.data_len > size)
			goto past;
		pthread_mutex_unlock(&w->c.mu);
		rc = w->ops->open_cell(ctx, w, &open, &w->call_ctx);
		pthread_mutex_lock(&w->c.mu);
		w->size_known = true;
	} else {
		const Zest__WriteOpen *o = ((const Zest__WriteChunk *)w->chunk.msg)->open;
		struct rpc_write_open open;
		size_t klen = strlen(o->key);

		if (!o->bucket[0] || !klen || klen > 1024) {
			write_reject(w, -EINVAL, "%s",
			             !o->bucket[0] ? "empty bucket name"
			             : !klen       ? "empty key"
			                           : "key longer than 1024 bytes");
			return -EINVAL;
		}
		size = o->size;
		if (o->size_known && w->chunk.data_len > size)
			goto past;
		rpc_msg_open_from_pb(o, &open);
		pthread_mutex_unlock(&w->c.mu);
		rc = w->ops->open(ctx, w, &open, &w->call_ctx);
		pthread_mutex_lock(&w->c.mu);
		w->size_known = o->size_known;
	}
	if (rc < 0) {
		rpc_call_fail(&w->c, rc, w->c.errmsg);
		return rc;
	}
	w->opened = true;
	w->c.handler_holds = true;
	w->size = size;
	return 0;
past:
	write_reject(w, -EINVAL, "data past the declared size of %llu bytes",
	             (unsigned long long)size);
	return -EINVAL;
}

/* One received message: validate, hand to the handler. Runs unlocked, busy set.
 * Returns true to receive the next one. */
static bool
write_on_message(struct rpc_write *w, grpc_byte_buffer *bb)
{
	struct rpc_server *srv = w->c.srv;
	const struct rpc_write_ops *ops = w->ops;
	const ProtobufCMessageDescriptor *desc = rpc_method_request(w->m);
	const char *what = desc->short_name;
	size_t limit = srv->opts.max_message + RPC_MAX_META;
	size_t bb_len = grpc_byte_buffer_length(bb);
	struct zc_ref *hold = NULL;
	struct chunk_view v;
	bool ok = false;
	int rc;

	if (bb_len > limit) {
		grpc_byte_buffer_destroy(bb);
		pthread_mutex_lock(&w->c.mu);
		write_reject(w, -EINVAL, "%s of %zu bytes exceeds the limit of %zu", what, bb_len,
		             limit);
		pthread_mutex_unlock(&w->c.mu);
		return false;
	}
	rc = rpc_marshal_recv(srv->opts.marshaller, desc, 3, bb, &w->chunk, &hold);
	if (rc) {
		pthread_mutex_lock(&w->c.mu);
		write_reject(w, rc, "bad %s after %llu bytes: %s", what,
		             (unsigned long long)w->next_off, w->chunk.err);
		pthread_mutex_unlock(&w->c.mu);
		return false;
	}
	chunk_view(w, &v);
	atomic_fetch_add_explicit(&rpc_stat_messages, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&rpc_stat_received, w->chunk.data_len, memory_order_relaxed);

	pthread_mutex_lock(&w->c.mu);
	if (!w->opened && !v.has_open) {
		write_reject(w, -EINVAL, "the first %s carries no open", what);
		goto unlock;
	}
	if (w->opened && v.has_open) {
		write_reject(w, -EINVAL, "open repeated after %llu bytes",
		             (unsigned long long)w->next_off);
		goto unlock;
	}
	if (v.offset != w->next_off) {
		write_reject(w, -EINVAL, "offset %llu, expected %llu (%s)",
		             (unsigned long long)v.offset, (unsigned long long)w->next_off,
		             v.offset > w->next_off ? "gap" : "overlap");
		goto unlock;
	}
	if (w->chunk.data_len > srv->opts.max_message) {
		write_reject(w, -EINVAL, "data of %zu bytes exceeds the max message of %zu",
		             w->chunk.data_len, srv->opts.max_message);
		goto unlock;
	}
	if (w->chunk.data_len && !ops->handler_verifies_crc) {
		uint32_t crc = 0;

		for (size_t i = 0; i < w->chunk.n_segs; i++)
			crc = zc_crc32c(crc, w->chunk.segs[i].ptr, w->chunk.segs[i].len);
		if (crc != v.crc32c) {
			write_reject(w, -EBADMSG,
			             "CRC32C mismatch at offset %llu: sent %08x, data has %08x",
			             (unsigned long long)v.offset, v.crc32c, crc);
			goto unlock;
		}
	}
	if (!w->opened && write_open(w))
		goto unlock;
	if (w->size_known && w->next_off + w->chunk.data_len > w->size) {
		write_reject(w, -EINVAL, "data past the declared size of %llu bytes",
		             (unsigned long long)w->size);
		goto unlock;
	}
	if (v.commit && w->size_known && w->next_off + w->chunk.data_len != w->size) {
		write_reject(w, -EINVAL, "commit after %llu bytes, declared size %llu",
		             (unsigned long long)(w->next_off + w->chunk.data_len),
		             (unsigned long long)w->size);
		goto unlock;
	}
	if (w->c.status_sent || w->c.cancelled)
		goto unlock; /* the handler failed the call meanwhile */
	pthread_mutex_unlock(&w->c.mu);

	if (w->chunk.data_len)
		ops->data(w->call_ctx, w, w->next_off, w->chunk.segs, w->chunk.n_segs,
		          w->chunk.data_len, v.crc32c);
	w->next_off += w->chunk.data_len;
	if (v.commit) {
		struct rpc_arena a = { 0 };
		struct rpc_write_cond cond;
		struct rpc_commit last = { .etag = "" }; /* a CellChunk's commit has no fields */
		bool commit;
		int mrc = 0;

		if (w->m == RPC_WRITE)
			mrc = rpc_msg_commit_from_pb((const Zest__WriteChunk *)w->chunk.msg, &last,
			                             &cond, &a);

		pthread_mutex_lock(&w->c.mu);
		if (mrc) /* no memory for the attrs array: the handler gets abort */
			write_reject(w, mrc, "out of memory at commit");
		commit = !w->c.status_sent && !w->c.cancelled;
		w->committed = commit;
		pthread_mutex_unlock(&w->c.mu);
		if (commit)
			ops->commit(w->call_ctx, w, &last);
		rpc_arena_free(&a);
	}
	ok = !v.commit;
	goto out;
unlock:
	pthread_mutex_unlock(&w->c.mu);
out:
	rpc_chunk_clear(&w->chunk);
	if (hold)
		zc_ref_put(hold); /* the handler took its own refs for what it keeps */
	return ok;
}

void
rpc_write_on_recv(struct rpc_write *w, bool success)
{
	grpc_byte_buffer *bb;
	bool again = false;

	pthread_mutex_lock(&w->c.mu);
	w->c.pending--;
	bb = w->recv_bb;
	w->recv_bb = NULL;
	if (!success || w->c.status_sent || w->c.cancelled) {
		if (bb)
			grpc_byte_buffer_destroy(bb);
	} else if (!bb) {
		if (!w->committed)
			write_reject(w, -EINVAL, "stream ended after %llu bytes without commit",
			             (unsigned long long)w->next_off);
	} else {
		pthread_mutex_unlock(&w->c.mu);
		again = write_on_message(w, bb);
		pthread_mutex_lock(&w->c.mu);
	}
	w->c.busy = false;
	if (again && !w->c.cancelled && !w->c.status_sent) {
		if (w->paused)
			w->recv_idle = true;
		else
			write_post_recv(w);
	}
	rpc_write_settle(w);
}

void
rpc_write_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call)
{
	struct rpc_write *w = calloc(1, sizeof(*w));

	if (!w) {
		grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
		                             "SlowDown: out of memory", NULL);
		grpc_call_unref(call);
		return;
	}
	rpc_call_init(&w->c, srv, call);
	w->c.is_write = true;
	w->m = m;
	w->ops = m == RPC_WRITE_CELL ? &srv->h.write_cell : &srv->h.write;
	w->t_recv.kind = TAG_RECV;
	w->t_recv.obj = w;
	pthread_mutex_lock(&w->c.mu);
	rpc_call_post_close(&w->c);
	write_post_recv(w);
	rpc_write_settle(w);
}

void
rpc_write_pause(struct rpc_write *w)
{
	pthread_mutex_lock(&w->c.mu);
	w->paused = true;
	pthread_mutex_unlock(&w->c.mu);
}

void
rpc_write_resume(struct rpc_write *w)
{
	pthread_mutex_lock(&w->c.mu);
	w->paused = false;
	if (w->recv_idle) {
		w->recv_idle = false;
		if (!w->c.cancelled && !w->c.status_sent)
			write_post_recv(w);
	}
	pthread_mutex_unlock(&w->c.mu);
}

void
rpc_write_set_error(struct rpc_write *w, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(w->c.errmsg, sizeof(w->c.errmsg), fmt, ap);
	va_end(ap);
}

void
rpc_write_finish(struct rpc_write *w, const struct rpc_write_result *res)
{
	Zest__WriteResult pb;
	grpc_byte_buffer *bb;

	rpc_msg_result_to_pb(res, &pb);
	bb = rpc_pack_message(&pb.base);

	pthread_mutex_lock(&w->c.mu);
	w->c.handler_holds = false;
	rpc_call_send_status(&w->c, 0, "", bb, true);
	rpc_write_settle(w);
}

void
rpc_write_finish_cell(struct rpc_write *w, const struct rpc_cell_result *res)
{
	Zest__CellResult pb = ZEST__CELL_RESULT__INIT;
	grpc_byte_buffer *bb;

	pb.length = res->length;
	pb.crc32c = res->crc32c;
	bb = rpc_pack_message(&pb.base);

	pthread_mutex_lock(&w->c.mu);
	w->c.handler_holds = false;
	rpc_call_send_status(&w->c, 0, "", bb, true);
	rpc_write_settle(w);
}

void
rpc_write_fail(struct rpc_write *w, int err, const char *fmt, ...)
{
	char msg[RPC_STATUS_MSG_MAX];
	va_list ap;

	if (err >= 0)
		err = -EIO;
	va_start(ap, fmt);
	rpc_vformat_status(msg, sizeof(msg), err, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&w->c.mu);
	w->c.handler_holds = false;
	rpc_call_send_status(&w->c, err, msg, NULL, true);
	rpc_write_settle(w);
}
