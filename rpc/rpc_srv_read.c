/*
 * rpc server, Read and ReadCell: the server stream of ReadChunks, one message in flight per
 * call. The two differ only in their request.
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

/* ------------------------------------------------------------------ Read */

static void
read_free(struct rpc_read *r)
{
	rpc_call_fini(&r->c);
	free(r);
}

/* Like write_settle, for Read calls. Unlocks. */
void
rpc_read_settle(struct rpc_read *r)
{
	if (!r->c.busy && (r->c.cancelled || r->c.status_sent) && !r->c.aborted &&
	    r->c.handler_holds) {
		r->c.aborted = true;
		r->c.busy = true;
		pthread_mutex_unlock(&r->c.mu);
		r->ops->abort(r->call_ctx, r, -ECANCELED);
		pthread_mutex_lock(&r->c.mu);
		r->c.busy = false;
	}
	if (rpc_call_idle(&r->c)) {
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
		r->ops->sent(r->call_ctx, r);
		pthread_mutex_lock(&r->c.mu);
		r->c.busy = false;
	}
}

void
rpc_read_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call,
               grpc_byte_buffer *payload)
{
	struct rpc_read *r = calloc(1, sizeof(*r));
	const ProtobufCMessageDescriptor *desc = rpc_method_request(m);
	char why[RPC_STATUS_MSG_MAX] = "";
	struct rpc_arena a = { 0 };
	ProtobufCMessage *req;
	int rc;

	if (!r) {
		if (payload)
			grpc_byte_buffer_destroy(payload);
		grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
		                             "SlowDown: out of memory", NULL);
		grpc_call_unref(call);
		return;
	}
	rpc_call_init(&r->c, srv, call);
	r->ops = m == RPC_READ_CELL ? &srv->h.read_cell : &srv->h.read;
	r->t_send.kind = TAG_SEND;
	r->t_send.obj = r;
	req = rpc_arena_unpack(&a, desc, payload, why, sizeof(why));
	if (payload)
		grpc_byte_buffer_destroy(payload);
	pthread_mutex_lock(&r->c.mu);
	rpc_call_post_close(&r->c);
	if (!req) {
		if (!why[0])
			snprintf(why, sizeof(why), "malformed %s", desc->short_name);
		rpc_call_fail(&r->c, -EINVAL, why);
		rpc_read_settle(r);
		rpc_arena_free(&a);
		return;
	}
	r->c.busy = true;
	r->c.handler_holds = true;
	pthread_mutex_unlock(&r->c.mu);
	if (m == RPC_READ_CELL) {
		struct rpc_cell_read_req rq;

		rpc_msg_cell_read_req_from_pb((const Zest__CellReadRequest *)req, &rq);
		rc = r->ops->start_cell(srv->h.ctx, r, &rq, &r->call_ctx);
	} else {
		struct rpc_read_req rq;

		rpc_msg_read_req_from_pb((const Zest__ReadRequest *)req, &rq);
		rc = r->ops->start(srv->h.ctx, r, &rq, &r->call_ctx);
	}
	rpc_arena_free(&a);
	pthread_mutex_lock(&r->c.mu);
	r->c.busy = false;
	if (rc < 0) {
		r->c.handler_holds = false;
		rpc_call_fail(&r->c, rc, r->c.errmsg);
	}
	read_deliver_sent(r);
	rpc_read_settle(r);
}

void
rpc_read_on_send(struct rpc_read *r, bool success)
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
	rpc_read_settle(r);
}

int
rpc_read_send(struct rpc_read *r, const struct rpc_object_info *info, uint64_t offset,
              uint32_t crc32c, const struct zc_seg *segs, size_t n_segs)
{
	Zest__ReadChunk rc = ZEST__READ_CHUNK__INIT;
	struct rpc_arena a = { 0 };
	Zest__ObjectInfo pinfo;
	grpc_op ops[2];
	size_t len = 0, n = 0;
	int err = 0;

	for (size_t i = 0; i < n_segs; i++)
		len += segs[i].len;
	if (info) {
		if (rpc_msg_info_to_pb(info, &pinfo, &a)) {
			rpc_arena_free(&a);
			return -ENOMEM;
		}
		rc.info = &pinfo;
	}
	rc.offset = offset;
	rc.crc32c = crc32c;
	pthread_mutex_lock(&r->c.mu);
	if (r->c.cancelled || r->c.status_sent) {
		err = -ECANCELED;
		goto unlock;
	}
	if (r->send_bb) {
		err = -EBUSY;
		goto unlock;
	}
	r->send_bb = rpc_marshal_send(&rc.base, 3, segs, n_segs, len);
	if (!r->send_bb) {
		err = -ENOMEM;
		goto unlock;
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
		err = -ECANCELED;
		goto unlock;
	}
	r->c.pending++;
unlock:
	pthread_mutex_unlock(&r->c.mu);
	rpc_arena_free(&a); /* the info was packed into send_bb */
	return err;
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
		rpc_vformat_status(msg, sizeof(msg), err, fmt, ap);
		va_end(ap);
	}
	pthread_mutex_lock(&r->c.mu);
	r->c.handler_holds = false;
	rpc_call_send_status(&r->c, err, msg, NULL, !r->sent_initial);
	r->sent_initial = true;
	rpc_read_settle(r);
}
