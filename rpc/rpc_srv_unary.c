/*
 * rpc server, the unary methods: request decoded, handler called, one reply.
 */
#include <errno.h>
#include <stddef.h>
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

/* ------------------------------------------------------------------ unary */

static int
reply_set(struct rpc_reply *reply, bool fits, const void *resp)
{
	grpc_byte_buffer *bb;

	if (!fits)
		return -EINVAL;
	bb = rpc_msg_pack_resp(reply->method, resp);
	if (!bb)
		return -ENOMEM;
	if (reply->bb)
		grpc_byte_buffer_destroy(reply->bb);
	reply->bb = bb;
	return 0;
}

int
rpc_reply_object_info(struct rpc_reply *reply, const struct rpc_object_info *info)
{
	return reply_set(reply, reply->method == RPC_STAT, info);
}

int
rpc_reply_delete_result(struct rpc_reply *reply, const struct rpc_delete_result *res)
{
	return reply_set(reply, reply->method == RPC_DELETE, res);
}

int
rpc_reply_list_result(struct rpc_reply *reply, const struct rpc_list_result *res)
{
	return reply_set(reply, reply->method == RPC_LIST, res);
}

int
rpc_reply_write_result(struct rpc_reply *reply, const struct rpc_write_result *res)
{
	return reply_set(reply, reply->method == RPC_COMPOSE, res);
}

int
rpc_reply_bucket_info(struct rpc_reply *reply, const struct rpc_bucket_info *info)
{
	return reply_set(reply,
	                 reply->method == RPC_CREATE_BUCKET || reply->method == RPC_HEAD_BUCKET,
	                 info);
}

int
rpc_reply_bucket_list(struct rpc_reply *reply, const struct rpc_bucket_list *list)
{
	return reply_set(reply, reply->method == RPC_LIST_BUCKETS, list);
}

int
rpc_reply_cells_result(struct rpc_reply *reply, const struct rpc_cells_result *res)
{
	return reply_set(
	        reply, reply->method == RPC_DELETE_CELLS || reply->method == RPC_COMMIT_CELLS, res);
}

int
rpc_reply_empty(struct rpc_reply *reply)
{
	return reply_set(reply, reply->method == RPC_DELETE_BUCKET, NULL);
}

void
rpc_reply_error(struct rpc_reply *reply, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reply->msg, sizeof(reply->msg), fmt, ap);
	va_end(ap);
}

void
rpc_unary_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call,
                grpc_byte_buffer *payload)
{
	struct unary *u = calloc(1, sizeof(*u));
	int err = 0, rc;

	if (!u) {
		if (payload)
			grpc_byte_buffer_destroy(payload);
		grpc_call_cancel_with_status(call, GRPC_STATUS_RESOURCE_EXHAUSTED,
		                             "SlowDown: out of memory", NULL);
		grpc_call_unref(call);
		return;
	}
	u->tag.kind = TAG_UNARY;
	u->tag.obj = u;
	u->srv = srv;
	u->call = call;
	u->method = m;
	u->reply.method = m;
	/* Counted from now: a reply the handler defers still holds back the shutdown. */
	pthread_mutex_lock(&srv->mu);
	srv->live_calls++;
	pthread_mutex_unlock(&srv->mu);
	rc = rpc_msg_unpack_req(m, payload, &u->req, &u->req_mem, u->reply.msg,
	                        sizeof(u->reply.msg));
	if (payload)
		grpc_byte_buffer_destroy(payload);
	if (!srv->h.unary) {
		err = -ENOSYS;
		snprintf(u->reply.msg, sizeof(u->reply.msg), "%s", rpc_method_path(m));
	} else if (rc) {
		err = rc;
		if (!u->reply.msg[0])
			snprintf(u->reply.msg, sizeof(u->reply.msg), "%s",
			         rc == -ENOMEM ? "out of memory" : "malformed request");
	} else {
		rc = srv->h.unary(srv->h.ctx, m, &u->req, &u->reply);
		if (rc == RPC_REPLY_LATER)
			return; /* the handler calls rpc_reply_send(), from any thread */
		err = rc < 0 ? rc : 0;
	}
	rpc_reply_send(&u->reply, err);
}

void
rpc_reply_send(struct rpc_reply *reply, int err)
{
	struct unary *u = (struct unary *)((char *)reply - offsetof(struct unary, reply));
	struct rpc_server *srv = u->srv;
	char text[RPC_STATUS_MSG_MAX];
	grpc_op ops[4];

	rpc_arena_free(&u->req_mem);
	if (err < 0 && reply->bb) {
		grpc_byte_buffer_destroy(reply->bb);
		reply->bb = NULL;
	} else if (!err && !reply->bb) {
		err = -EIO;
		snprintf(reply->msg, sizeof(reply->msg), "no reply");
	}
	memcpy(text, reply->msg, sizeof(text));
	rpc_format_status_str(reply->msg, sizeof(reply->msg), err, text);
	u->resp = reply->bb;
	reply->bb = NULL;
	u->details = grpc_slice_from_copied_string(reply->msg);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
	ops[1].data.recv_close_on_server.cancelled = &u->cancelled;
	ops[2].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
	ops[2].data.send_status_from_server.status = rpc_status_from_err(err);
	ops[2].data.send_status_from_server.trailing_metadata_count =
	        rpc_err_metadata(err, &u->err_md);
	ops[2].data.send_status_from_server.trailing_metadata = &u->err_md;
	ops[2].data.send_status_from_server.status_details = &u->details;
	ops[3].op = GRPC_OP_SEND_MESSAGE;
	ops[3].data.send_message.send_message = u->resp;
	if (grpc_call_start_batch(u->call, ops, u->resp ? 4 : 3, &u->tag, NULL) != GRPC_CALL_OK) {
		ZC_ERR("rpc", "unary batch refused method=%s", rpc_method_path(u->method));
		grpc_call_cancel(u->call, NULL);
		grpc_call_unref(u->call);
		if (u->resp)
			grpc_byte_buffer_destroy(u->resp);
		grpc_slice_unref(u->details);
		grpc_slice_unref(u->err_md.value);
		free(u);
		rpc_server_call_gone(srv);
	}
}

void
rpc_unary_done(struct unary *u)
{
	struct rpc_server *srv = u->srv;

	grpc_call_unref(u->call);
	if (u->resp)
		grpc_byte_buffer_destroy(u->resp);
	grpc_slice_unref(u->details);
	grpc_slice_unref(u->err_md.value);
	free(u);
	rpc_server_call_gone(srv);
}
