/*
 * rpc server: zest.Datanode over the gRPC core C API.
 *
 * One completion queue, served by cq_threads threads. Every method is registered and
 * keeps posted_per_method requests waiting. A call's state is guarded by its mutex, and
 * every grpc_call_start_batch on a call happens under it (gRPC asks batches on one call
 * to be serialized). "busy" marks the time a callback into the handler is running or a
 * completion that will run one is outstanding: an abort is delivered only when not busy,
 * so a handler's callbacks never overlap.
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

#include "zc_crc.h"
#include "rpc_internal.h"
#include "zc.h"

enum tag_kind {
	TAG_REQUEST,
	TAG_SHUTDOWN,
	TAG_CLOSE,  /* RECV_CLOSE_ON_SERVER of a streaming call */
	TAG_RECV,   /* Write: RECV_MESSAGE */
	TAG_SEND,   /* Read: SEND_MESSAGE */
	TAG_STATUS, /* final SEND_STATUS_FROM_SERVER */
	TAG_UNARY,  /* the single batch of a unary call */
};

struct tag {
	enum tag_kind kind;
	void *obj;
};

struct request {
	struct tag tag;
	struct rpc_server *srv;
	enum rpc_method m;
	grpc_call *call;
	gpr_timespec deadline;
	grpc_metadata_array md;
	grpc_byte_buffer *payload;
};

struct rpc_server {
	struct rpc_server_opts opts;
	struct rpc_server_handlers h;
	grpc_server *server;
	grpc_completion_queue *cq;
	void *methods[RPC_METHOD_COUNT];
	pthread_t *threads;
	unsigned n_threads;
	int port;
	struct tag t_shutdown;

	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool shutting_down, shutdown_done;
	long live_calls;
};

/* State shared by the streaming calls. */
struct call {
	struct rpc_server *srv;
	grpc_call *call;
	pthread_mutex_t mu;
	int pending;         /* batches outstanding */
	bool busy;           /* a handler callback runs or will run */
	bool handler_holds;  /* accepted and not yet finished by the handler */
	bool status_sent;    /* the final status batch is posted */
	bool cancelled;      /* the call ended without our status (client cancel, shutdown) */
	bool aborted;        /* abort delivered */
	bool is_write;       /* struct rpc_write, else struct rpc_read */
	int close_cancelled; /* RECV_CLOSE_ON_SERVER's out-param */
	struct tag t_close, t_status;
	grpc_byte_buffer *status_bb;
	grpc_slice status_details;
	char peer[96];
	char errmsg[RPC_STATUS_MSG_MAX];
};

struct rpc_write {
	struct call c;
	void *call_ctx;
	struct tag t_recv;
	grpc_byte_buffer *recv_bb;
	bool opened, paused, committed, recv_idle; /* recv_idle: paused between receives */
	uint64_t next_off, size;
	bool size_known;
	struct rpc_chunk chunk;
};

struct rpc_read {
	struct call c;
	void *call_ctx;
	struct tag t_send;
	grpc_byte_buffer *send_bb;
	bool sent_initial;
	bool sent_pending; /* a send completed while a callback ran */
};

struct rpc_reply {
	grpc_byte_buffer *bb;
	char msg[RPC_STATUS_MSG_MAX];
};

struct unary {
	struct tag tag;
	struct rpc_server *srv;
	grpc_call *call;
	grpc_byte_buffer *resp;
	grpc_slice details;
	int cancelled;
};

/* ------------------------------------------------------------------ call base */

static void
call_init(struct call *c, struct rpc_server *srv, grpc_call *call)
{
	char *peer = grpc_call_get_peer(call);

	memset(c, 0, sizeof(*c));
	c->srv = srv;
	c->call = call;
	pthread_mutex_init(&c->mu, NULL);
	snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "?");
	gpr_free(peer);
	c->t_close.kind = TAG_CLOSE;
	c->t_close.obj = c;
	c->t_status.kind = TAG_STATUS;
	c->t_status.obj = c;
	pthread_mutex_lock(&srv->mu);
	srv->live_calls++;
	pthread_mutex_unlock(&srv->mu);
}

/* Under c->mu: may the call be freed now? */
static bool
call_idle(const struct call *c)
{
	return c->pending == 0 && !c->busy && !c->handler_holds;
}

static void
server_call_gone(struct rpc_server *srv)
{
	pthread_mutex_lock(&srv->mu);
	if (--srv->live_calls == 0)
		pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->mu);
}

static void
call_fini(struct call *c)
{
	struct rpc_server *srv = c->srv;

	grpc_call_unref(c->call);
	if (c->status_bb)
		grpc_byte_buffer_destroy(c->status_bb);
	grpc_slice_unref(c->status_details);
	pthread_mutex_destroy(&c->mu);
	server_call_gone(srv);
}

/* Under c->mu: post RECV_CLOSE_ON_SERVER, which reports the call's end. */
static void
call_post_close(struct call *c)
{
	grpc_op op = { .op = GRPC_OP_RECV_CLOSE_ON_SERVER };

	op.data.recv_close_on_server.cancelled = &c->close_cancelled;
	if (grpc_call_start_batch(c->call, &op, 1, &c->t_close, NULL) == GRPC_CALL_OK)
		c->pending++;
}

/* Under c->mu: send the final status (once). resp (taken) may be NULL. */
static void
call_send_status(struct call *c, grpc_status_code code, const char *msg, grpc_byte_buffer *resp,
		 bool with_initial_md)
{
	grpc_op ops[3];
	size_t n = 0;

	if (c->status_sent || c->cancelled) {
		if (resp)
			grpc_byte_buffer_destroy(resp);
		return;
	}
	c->status_sent = true;
	memset(ops, 0, sizeof(ops));
	if (with_initial_md)
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (resp) {
		c->status_bb = resp;
		ops[n].op = GRPC_OP_SEND_MESSAGE;
		ops[n++].data.send_message.send_message = resp;
	}
	c->status_details = grpc_slice_from_copied_string(msg ? msg : "");
	ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[n].data.send_status_from_server.status = code;
	ops[n++].data.send_status_from_server.status_details = &c->status_details;
	if (grpc_call_start_batch(c->call, ops, n, &c->t_status, NULL) == GRPC_CALL_OK)
		c->pending++;
	else
		grpc_call_cancel(c->call, NULL);
}

static void
vformat_status(char *out, size_t cap, int err, const char *fmt, va_list ap)
{
	rpc_format_status(out, cap, err, fmt, ap);
}

/* Under c->mu: fail with err and the handler's message (or a default one). */
static void
call_fail(struct call *c, int err, const char *msg)
{
	char buf[RPC_STATUS_MSG_MAX];

	rpc_format_status_str(buf, sizeof(buf), err, msg);
	call_send_status(c, rpc_status_from_err(err), buf, NULL, true);
}

/* ------------------------------------------------------------------ Write */

static void
write_free(struct rpc_write *w)
{
	rpc_chunk_fini(&w->chunk);
	call_fini(&w->c);
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
static void
write_settle(struct rpc_write *w)
{
	struct rpc_server *srv = w->c.srv;

	if (!w->c.busy && (w->c.cancelled || w->c.status_sent) && w->opened && !w->c.aborted &&
	    w->c.handler_holds && !w->committed) {
		int err = w->c.cancelled ? -ECANCELED : -EINVAL;

		w->c.aborted = true;
		w->c.busy = true;
		pthread_mutex_unlock(&w->c.mu);
		srv->h.write.abort(w->call_ctx, w, err);
		pthread_mutex_lock(&w->c.mu);
		w->c.busy = false;
	}
	if (call_idle(&w->c)) {
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
	vformat_status(msg, sizeof(msg), err, fmt, ap);
	va_end(ap);
	ZC_DBG("rpc", "write rejected peer=%s: %s", w->c.peer, msg);
	call_send_status(&w->c, rpc_status_from_err(err), msg, NULL, true);
}

/* One received message: validate, hand to the handler. Runs unlocked, busy set.
 * Returns true to receive the next one. */
static bool
write_on_message(struct rpc_write *w, grpc_byte_buffer *bb)
{
	struct rpc_server *srv = w->c.srv;
	const struct rpc_write_ops *ops = &srv->h.write;
	size_t limit = srv->opts.max_message + RPC_MAX_META;
	size_t bb_len = grpc_byte_buffer_length(bb);
	struct zc_ref *hold = NULL;
	Zest__WriteChunk *wc;
	bool ok = false;
	int rc;

	if (bb_len > limit) {
		grpc_byte_buffer_destroy(bb);
		pthread_mutex_lock(&w->c.mu);
		write_reject(w, -EINVAL, "WriteChunk of %zu bytes exceeds the limit of %zu", bb_len,
			     limit);
		pthread_mutex_unlock(&w->c.mu);
		return false;
	}
	rc = rpc_marshal_recv(srv->opts.marshaller, &zest__write_chunk__descriptor, 3, bb,
			      &w->chunk, &hold);
	if (rc) {
		pthread_mutex_lock(&w->c.mu);
		write_reject(w, rc, "bad WriteChunk after %llu bytes: %s",
			     (unsigned long long)w->next_off, w->chunk.err);
		pthread_mutex_unlock(&w->c.mu);
		return false;
	}
	wc = (Zest__WriteChunk *)w->chunk.msg;
	atomic_fetch_add_explicit(&rpc_stat_messages, 1, memory_order_relaxed);
	atomic_fetch_add_explicit(&rpc_stat_received, w->chunk.data_len, memory_order_relaxed);

	pthread_mutex_lock(&w->c.mu);
	if (!w->opened && !wc->open) {
		write_reject(w, -EINVAL, "the first WriteChunk carries no open");
		goto unlock;
	}
	if (w->opened && wc->open) {
		write_reject(w, -EINVAL, "open repeated after %llu bytes",
			     (unsigned long long)w->next_off);
		goto unlock;
	}
	if (wc->offset != w->next_off) {
		write_reject(w, -EINVAL, "offset %llu, expected %llu (%s)",
			     (unsigned long long)wc->offset, (unsigned long long)w->next_off,
			     wc->offset > w->next_off ? "gap" : "overlap");
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
		if (crc != wc->crc32c) {
			write_reject(w, -EBADMSG,
				     "CRC32C mismatch at offset %llu: sent %08x, data has %08x",
				     (unsigned long long)wc->offset, wc->crc32c, crc);
			goto unlock;
		}
	}
	if (!w->opened) {
		size_t klen = strlen(wc->open->key);

		/* The wire contract's own limits, before the handler sees the open. */
		if (!wc->open->bucket[0] || !klen || klen > 1024) {
			write_reject(w, -EINVAL, "%s", !wc->open->bucket[0] ? "empty bucket name"
						       : !klen	       ? "empty key"
									       : "key longer than 1024 bytes");
			goto unlock;
		}
		if (wc->open->size_known && w->chunk.data_len > wc->open->size) {
			write_reject(w, -EINVAL, "data past the declared size of %llu bytes",
				     (unsigned long long)wc->open->size);
			goto unlock;
		}
		pthread_mutex_unlock(&w->c.mu);
		rc = ops->open(srv->h.ctx, w, wc->open, &w->call_ctx);
		pthread_mutex_lock(&w->c.mu);
		if (rc < 0) {
			call_fail(&w->c, rc, w->c.errmsg);
			goto unlock;
		}
		w->opened = true;
		w->c.handler_holds = true;
		w->size_known = wc->open->size_known;
		w->size = wc->open->size;
	}
	if (w->size_known && w->next_off + w->chunk.data_len > w->size) {
		write_reject(w, -EINVAL, "data past the declared size of %llu bytes",
			     (unsigned long long)w->size);
		goto unlock;
	}
	if (wc->commit && w->size_known && w->next_off + w->chunk.data_len != w->size) {
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
			  w->chunk.data_len, wc->crc32c);
	w->next_off += w->chunk.data_len;
	if (wc->commit) {
		bool commit;

		pthread_mutex_lock(&w->c.mu);
		commit = !w->c.status_sent && !w->c.cancelled;
		w->committed = commit;
		pthread_mutex_unlock(&w->c.mu);
		if (commit)
			ops->commit(w->call_ctx, w, wc);
	}
	ok = !wc->commit;
	goto out;
unlock:
	pthread_mutex_unlock(&w->c.mu);
out:
	rpc_chunk_clear(&w->chunk);
	if (hold)
		zc_ref_put(hold); /* the handler took its own refs for what it keeps */
	return ok;
}

static void
write_on_recv(struct rpc_write *w, bool success)
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
	write_settle(w);
}

static void
write_start(struct rpc_server *srv, grpc_call *call)
{
	struct rpc_write *w = calloc(1, sizeof(*w));

	if (!w) {
		grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
					     "SlowDown: out of memory", NULL);
		grpc_call_unref(call);
		return;
	}
	call_init(&w->c, srv, call);
	w->c.is_write = true;
	w->t_recv.kind = TAG_RECV;
	w->t_recv.obj = w;
	pthread_mutex_lock(&w->c.mu);
	call_post_close(&w->c);
	write_post_recv(w);
	write_settle(w);
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
rpc_write_finish(struct rpc_write *w, const Zest__WriteResult *res)
{
	grpc_byte_buffer *bb = rpc_pack_message(&res->base);

	pthread_mutex_lock(&w->c.mu);
	w->c.handler_holds = false;
	call_send_status(&w->c, GRPC_STATUS_OK, "", bb, true);
	write_settle(w);
}

void
rpc_write_fail(struct rpc_write *w, int err, const char *fmt, ...)
{
	char msg[RPC_STATUS_MSG_MAX];
	va_list ap;

	if (err >= 0)
		err = -EIO;
	va_start(ap, fmt);
	vformat_status(msg, sizeof(msg), err, fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&w->c.mu);
	w->c.handler_holds = false;
	call_send_status(&w->c, rpc_status_from_err(err), msg, NULL, true);
	write_settle(w);
}

const char *
rpc_write_peer(const struct rpc_write *w)
{
	return w->c.peer;
}

/* ------------------------------------------------------------------ Read */

static void
read_free(struct rpc_read *r)
{
	call_fini(&r->c);
	free(r);
}

/* Like write_settle, for Read calls. Unlocks. */
static void
read_settle(struct rpc_read *r)
{
	struct rpc_server *srv = r->c.srv;

	if (!r->c.busy && (r->c.cancelled || r->c.status_sent) && !r->c.aborted &&
	    r->c.handler_holds) {
		r->c.aborted = true;
		r->c.busy = true;
		pthread_mutex_unlock(&r->c.mu);
		srv->h.read.abort(r->call_ctx, r, -ECANCELED);
		pthread_mutex_lock(&r->c.mu);
		r->c.busy = false;
	}
	if (call_idle(&r->c)) {
		pthread_mutex_unlock(&r->c.mu);
		read_free(r);
		return;
	}
	pthread_mutex_unlock(&r->c.mu);
}

/* Under r->c.mu: run `sent` for a completed send unless a callback runs already. */
static void
read_deliver_sent(struct rpc_read *r)
{
	while (r->sent_pending && !r->c.busy) {
		r->sent_pending = false;
		if (r->c.cancelled || r->c.status_sent || !r->c.handler_holds)
			break;
		r->c.busy = true;
		pthread_mutex_unlock(&r->c.mu);
		r->c.srv->h.read.sent(r->call_ctx, r);
		pthread_mutex_lock(&r->c.mu);
		r->c.busy = false;
	}
}

static void
read_start(struct rpc_server *srv, grpc_call *call, grpc_byte_buffer *payload)
{
	struct rpc_read *r = calloc(1, sizeof(*r));
	Zest__ReadRequest *req;
	int rc;

	if (!r) {
		if (payload)
			grpc_byte_buffer_destroy(payload);
		grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
					     "SlowDown: out of memory", NULL);
		grpc_call_unref(call);
		return;
	}
	call_init(&r->c, srv, call);
	r->t_send.kind = TAG_SEND;
	r->t_send.obj = r;
	req = (Zest__ReadRequest *)rpc_unpack_message(&zest__read_request__descriptor, payload);
	if (payload)
		grpc_byte_buffer_destroy(payload);
	pthread_mutex_lock(&r->c.mu);
	call_post_close(&r->c);
	if (!req) {
		call_fail(&r->c, -EINVAL, "InvalidArgument: malformed ReadRequest");
		read_settle(r);
		return;
	}
	r->c.busy = true;
	r->c.handler_holds = true;
	pthread_mutex_unlock(&r->c.mu);
	rc = srv->h.read.start(srv->h.ctx, r, req, &r->call_ctx);
	protobuf_c_message_free_unpacked(&req->base, NULL);
	pthread_mutex_lock(&r->c.mu);
	r->c.busy = false;
	if (rc < 0) {
		r->c.handler_holds = false;
		call_fail(&r->c, rc, r->c.errmsg);
	}
	read_deliver_sent(r);
	read_settle(r);
}

static void
read_on_send(struct rpc_read *r, bool success)
{
	pthread_mutex_lock(&r->c.mu);
	r->c.pending--;
	grpc_byte_buffer_destroy(r->send_bb);
	r->send_bb = NULL;
	if (success)
		r->sent_pending = true;
	else
		r->c.cancelled = true;
	read_deliver_sent(r);
	read_settle(r);
}

int
rpc_read_send(struct rpc_read *r, const Zest__ObjectInfo *info, uint64_t offset, uint32_t crc32c,
	      const struct zc_seg *segs, size_t n_segs)
{
	Zest__ReadChunk rc = ZEST__READ_CHUNK__INIT;
	grpc_op ops[2];
	size_t len = 0, n = 0;

	for (size_t i = 0; i < n_segs; i++)
		len += segs[i].len;
	rc.info = (Zest__ObjectInfo *)info;
	rc.offset = offset;
	rc.crc32c = crc32c;
	pthread_mutex_lock(&r->c.mu);
	if (r->c.cancelled || r->c.status_sent) {
		pthread_mutex_unlock(&r->c.mu);
		return -ECANCELED;
	}
	if (r->send_bb) {
		pthread_mutex_unlock(&r->c.mu);
		return -EBUSY;
	}
	r->send_bb = rpc_marshal_send(&rc.base, 3, segs, n_segs, len);
	if (!r->send_bb) {
		pthread_mutex_unlock(&r->c.mu);
		return -ENOMEM;
	}
	memset(ops, 0, sizeof(ops));
	if (!r->sent_initial) {
		ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
		r->sent_initial = true;
	}
	ops[n].op = GRPC_OP_SEND_MESSAGE;
	ops[n++].data.send_message.send_message = r->send_bb;
	if (grpc_call_start_batch(r->c.call, ops, n, &r->t_send, NULL) != GRPC_CALL_OK) {
		grpc_byte_buffer_destroy(r->send_bb);
		r->send_bb = NULL;
		pthread_mutex_unlock(&r->c.mu);
		return -ECANCELED;
	}
	r->c.pending++;
	pthread_mutex_unlock(&r->c.mu);
	return 0;
}

void
rpc_read_set_error(struct rpc_read *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->c.errmsg, sizeof(r->c.errmsg), fmt, ap);
	va_end(ap);
}

void
rpc_read_finish(struct rpc_read *r, int err, const char *fmt, ...)
{
	char msg[RPC_STATUS_MSG_MAX] = "";
	va_list ap;

	if (err > 0)
		err = -EIO;
	if (err) {
		va_start(ap, fmt);
		vformat_status(msg, sizeof(msg), err, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_lock(&r->c.mu);
	r->c.handler_holds = false;
	call_send_status(&r->c, rpc_status_from_err(err), msg, NULL, !r->sent_initial);
	r->sent_initial = true;
	read_settle(r);
}

/* ------------------------------------------------------------------ unary */

int
rpc_reply_message(struct rpc_reply *reply, const ProtobufCMessage *msg)
{
	if (reply->bb)
		grpc_byte_buffer_destroy(reply->bb);
	reply->bb = rpc_pack_message(msg);
	return reply->bb ? 0 : -ENOMEM;
}

void
rpc_reply_error(struct rpc_reply *reply, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reply->msg, sizeof(reply->msg), fmt, ap);
	va_end(ap);
}

static void
unary_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call, grpc_byte_buffer *payload)
{
	struct rpc_reply reply = { 0 };
	grpc_status_code code = GRPC_STATUS_OK;
	ProtobufCMessage *req = NULL;
	struct unary *u;
	grpc_op ops[4];
	int rc;

	if (payload) {
		req = rpc_unpack_message(rpc_method_request(m), payload);
		grpc_byte_buffer_destroy(payload);
	}
	if (!srv->h.unary) {
		code = GRPC_STATUS_UNIMPLEMENTED;
		snprintf(reply.msg, sizeof(reply.msg), "NotImplemented: %s", rpc_method_path(m));
	} else if (!req) {
		code = GRPC_STATUS_INVALID_ARGUMENT;
		snprintf(reply.msg, sizeof(reply.msg), "InvalidArgument: malformed request");
	} else {
		rc = srv->h.unary(srv->h.ctx, m, req, &reply);
		if (rc < 0) {
			char tmp[RPC_STATUS_MSG_MAX];

			code = rpc_status_from_err(rc);
			memcpy(tmp, reply.msg, sizeof(tmp));
			rpc_format_status_str(reply.msg, sizeof(reply.msg), rc, tmp);
			if (reply.bb) {
				grpc_byte_buffer_destroy(reply.bb);
				reply.bb = NULL;
			}
		} else if (!reply.bb) {
			code = GRPC_STATUS_INTERNAL;
			snprintf(reply.msg, sizeof(reply.msg), "InternalError: no reply");
		}
	}
	if (req)
		protobuf_c_message_free_unpacked(req, NULL);

	u = calloc(1, sizeof(*u));
	if (!u) {
		if (reply.bb)
			grpc_byte_buffer_destroy(reply.bb);
		grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
					     "SlowDown: out of memory", NULL);
		grpc_call_unref(call);
		return;
	}
	u->tag.kind = TAG_UNARY;
	u->tag.obj = u;
	u->srv = srv;
	u->call = call;
	u->resp = reply.bb;
	u->details = grpc_slice_from_copied_string(reply.msg);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[1].data.recv_close_on_server.cancelled = &u->cancelled;
	ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[2].data.send_status_from_server.status = code;
	ops[2].data.send_status_from_server.status_details = &u->details;
	ops[3].op = GRPC_OP_SEND_MESSAGE;
	ops[3].data.send_message.send_message = u->resp;
	pthread_mutex_lock(&srv->mu);
	srv->live_calls++;
	pthread_mutex_unlock(&srv->mu);
	if (grpc_call_start_batch(call, ops, u->resp ? 4 : 3, &u->tag, NULL) != GRPC_CALL_OK) {
		ZC_ERR("rpc", "unary batch refused method=%s", rpc_method_path(m));
		grpc_call_cancel(call, NULL);
		grpc_call_unref(call);
		if (u->resp)
			grpc_byte_buffer_destroy(u->resp);
		grpc_slice_unref(u->details);
		free(u);
		server_call_gone(srv);
	}
}

static void
unary_done(struct unary *u)
{
	struct rpc_server *srv = u->srv;

	grpc_call_unref(u->call);
	if (u->resp)
		grpc_byte_buffer_destroy(u->resp);
	grpc_slice_unref(u->details);
	free(u);
	server_call_gone(srv);
}

/* ------------------------------------------------------------------ server */

static void request_post(struct rpc_server *srv, struct request *rq);

static struct request *
request_new(struct rpc_server *srv, enum rpc_method m)
{
	struct request *rq = calloc(1, sizeof(*rq));

	if (!rq)
		return NULL;
	rq->tag.kind = TAG_REQUEST;
	rq->tag.obj = rq;
	rq->srv = srv;
	rq->m = m;
	return rq;
}

static void
request_post(struct rpc_server *srv, struct request *rq)
{
	grpc_call_error e;

	rq->call = NULL;
	rq->payload = NULL;
	grpc_metadata_array_init(&rq->md);
	e = grpc_server_request_registered_call(srv->server, srv->methods[rq->m], &rq->call,
						&rq->deadline, &rq->md,
						rq->m == RPC_WRITE ? NULL : &rq->payload, srv->cq,
						srv->cq, &rq->tag);
	if (e != GRPC_CALL_OK) {
		ZC_ERR("rpc", "request_registered_call failed err=%d method=%s", (int)e,
		       rpc_method_path(rq->m));
		grpc_metadata_array_destroy(&rq->md);
		free(rq);
	}
}

static void
request_done(struct request *rq, bool success)
{
	struct rpc_server *srv = rq->srv;
	grpc_call *call = rq->call;
	grpc_byte_buffer *payload = rq->payload;
	enum rpc_method m = rq->m;
	bool repost;

	grpc_metadata_array_destroy(&rq->md);
	if (!success) {
		/* server shutting down: pending requests come back failed */
		if (payload)
			grpc_byte_buffer_destroy(payload);
		free(rq);
		return;
	}
	pthread_mutex_lock(&srv->mu);
	repost = !srv->shutting_down;
	pthread_mutex_unlock(&srv->mu);
	if (repost)
		request_post(srv, rq);
	else
		free(rq);

	switch (m) {
	case RPC_WRITE:
		if (!srv->h.write.open) {
			grpc_call_cancel_with_status(call, GRPC_STATUS_UNIMPLEMENTED,
						     "NotImplemented: Write", NULL);
			grpc_call_unref(call);
			break;
		}
		write_start(srv, call);
		break;
	case RPC_READ:
		if (!srv->h.read.start) {
			if (payload)
				grpc_byte_buffer_destroy(payload);
			grpc_call_cancel_with_status(call, GRPC_STATUS_UNIMPLEMENTED,
						     "NotImplemented: Read", NULL);
			grpc_call_unref(call);
			break;
		}
		read_start(srv, call, payload);
		break;
	default:
		unary_start(srv, m, call, payload);
		break;
	}
}

static void
dispatch(struct rpc_server *srv, struct tag *t, bool success)
{
	struct call *c;

	switch (t->kind) {
	case TAG_REQUEST:
		request_done(t->obj, success);
		break;
	case TAG_SHUTDOWN:
		pthread_mutex_lock(&srv->mu);
		srv->shutdown_done = true;
		pthread_cond_broadcast(&srv->cond);
		pthread_mutex_unlock(&srv->mu);
		break;
	case TAG_CLOSE:
	case TAG_STATUS:
		c = t->obj;
		pthread_mutex_lock(&c->mu);
		c->pending--;
		if (t->kind == TAG_CLOSE && c->close_cancelled)
			c->cancelled = true;
		if (c->is_write)
			write_settle((struct rpc_write *)c);
		else
			read_settle((struct rpc_read *)c);
		break;
	case TAG_RECV:
		write_on_recv(t->obj, success);
		break;
	case TAG_SEND:
		read_on_send(t->obj, success);
		break;
	case TAG_UNARY:
		unary_done(t->obj);
		break;
	}
}

static void *
cq_thread(void *arg)
{
	struct rpc_server *srv = arg;

	for (;;) {
		grpc_event ev = grpc_completion_queue_next(
			srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE)
			dispatch(srv, ev.tag, ev.success != 0);
	}
	return NULL;
}

int
rpc_server_create(const struct rpc_server_opts *opts, const struct rpc_server_handlers *h,
		  struct rpc_server **out)
{
	struct rpc_server *srv;
	grpc_server_credentials *creds;
	grpc_channel_args args;
	grpc_arg arg[3];
	size_t grpc_limit;
	int rc = -ENOMEM;

	if (!opts || !opts->listen || !h)
		return -EINVAL;
	srv = calloc(1, sizeof(*srv));
	if (!srv)
		return -ENOMEM;
	srv->opts = *opts;
	srv->h = *h;
	if (!srv->opts.cq_threads)
		srv->opts.cq_threads = 2;
	if (!srv->opts.max_message)
		srv->opts.max_message = RPC_DEFAULT_MAX_MESSAGE;
	if (!srv->opts.posted_per_method)
		srv->opts.posted_per_method = 16;
	srv->opts.listen = NULL; /* not kept */
	pthread_mutex_init(&srv->mu, NULL);
	pthread_cond_init(&srv->cond, NULL);
	srv->t_shutdown.kind = TAG_SHUTDOWN;
	srv->t_shutdown.obj = srv;

	grpc_init();
	/*
	 * gRPC buffers a whole message before it checks its own limit, so we set it to twice
	 * ours and check ourselves first: a message over our limit gets INVALID_ARGUMENT with
	 * a precise message instead of gRPC's RESOURCE_EXHAUSTED.
	 */
	grpc_limit = 2 * (srv->opts.max_message + RPC_MAX_META);
	if (grpc_limit > INT32_MAX)
		grpc_limit = INT32_MAX;
	arg[0].type = GRPC_ARG_INTEGER;
	arg[0].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	arg[0].value.integer = (int)grpc_limit;
	arg[1].type = GRPC_ARG_INTEGER;
	arg[1].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	arg[1].value.integer = (int)grpc_limit;
	/* A second datanode on the same port must fail, not share it. */
	arg[2].type = GRPC_ARG_INTEGER;
	arg[2].key = GRPC_ARG_ALLOW_REUSEPORT;
	arg[2].value.integer = 0;
	args.num_args = 3;
	args.args = arg;
	srv->server = grpc_server_create(&args, NULL);
	srv->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
	for (int m = 0; m < RPC_METHOD_COUNT; m++)
		srv->methods[m] = grpc_server_register_method(
			srv->server, rpc_method_path(m), NULL,
			m == RPC_WRITE ? GRPC_SRM_PAYLOAD_NONE
				       : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
			0);
	creds = grpc_insecure_server_credentials_create();
	srv->port = grpc_server_add_http2_port(srv->server, opts->listen, creds);
	grpc_server_credentials_release(creds);
	if (srv->port <= 0) {
		ZC_ERR("rpc", "cannot listen on %s", opts->listen);
		rc = -EADDRINUSE;
		goto destroy_server;
	}
	grpc_server_start(srv->server);
	for (int m = 0; m < RPC_METHOD_COUNT; m++)
		for (unsigned i = 0; i < srv->opts.posted_per_method; i++) {
			struct request *rq = request_new(srv, m);

			if (rq)
				request_post(srv, rq);
		}
	srv->threads = calloc(srv->opts.cq_threads, sizeof(*srv->threads));
	if (!srv->threads)
		goto shutdown;
	for (unsigned i = 0; i < srv->opts.cq_threads; i++) {
		if (pthread_create(&srv->threads[i], NULL, cq_thread, srv))
			goto shutdown;
		pthread_setname_np(srv->threads[i], "rpc-srv-cq");
		srv->n_threads++;
	}
	*out = srv;
	return 0;

shutdown:
	if (!srv->n_threads) {
		/* no thread to drain the queue: start one so destroy can finish */
		if (!srv->threads)
			srv->threads = calloc(1, sizeof(*srv->threads));
		if (srv->threads && !pthread_create(&srv->threads[0], NULL, cq_thread, srv))
			srv->n_threads = 1;
	}
	if (srv->n_threads) {
		rpc_server_destroy(srv, 0);
		return rc;
	}
	ZC_ERR("rpc", "cannot start a completion-queue thread");
	abort();
destroy_server:
	grpc_server_destroy(srv->server);
	grpc_completion_queue_shutdown(srv->cq);
	while (grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
	       GRPC_QUEUE_SHUTDOWN)
		;
	grpc_completion_queue_destroy(srv->cq);
	grpc_shutdown();
	pthread_cond_destroy(&srv->cond);
	pthread_mutex_destroy(&srv->mu);
	free(srv);
	return rc;
}

int
rpc_server_port(const struct rpc_server *srv)
{
	return srv->port;
}

void
rpc_server_destroy(struct rpc_server *srv, unsigned grace_ms)
{
	struct timespec until;

	if (!srv)
		return;
	pthread_mutex_lock(&srv->mu);
	srv->shutting_down = true;
	pthread_mutex_unlock(&srv->mu);
	grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->t_shutdown);

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += grace_ms / 1000;
	until.tv_nsec += (long)(grace_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&srv->mu);
	while (!srv->shutdown_done)
		if (pthread_cond_timedwait(&srv->cond, &srv->mu, &until) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&srv->mu);
	/* Calls still open after the grace period are cancelled; handlers get abort. */
	grpc_server_cancel_all_calls(srv->server);
	pthread_mutex_lock(&srv->mu);
	while (!srv->shutdown_done || srv->live_calls)
		pthread_cond_wait(&srv->cond, &srv->mu);
	pthread_mutex_unlock(&srv->mu);

	grpc_completion_queue_shutdown(srv->cq);
	for (unsigned i = 0; i < srv->n_threads; i++)
		pthread_join(srv->threads[i], NULL);
	grpc_server_destroy(srv->server);
	grpc_completion_queue_destroy(srv->cq);
	grpc_shutdown();
	free(srv->threads);
	pthread_cond_destroy(&srv->cond);
	pthread_mutex_destroy(&srv->mu);
	free(srv);
}
