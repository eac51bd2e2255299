/*
 * rpc server, the unary methods: request decoded, handler called, one reply.
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

void
rpc_unary_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call,
                grpc_byte_buffer *payload)
{
	struct rpc_reply reply = { 0 };
	char text[RPC_STATUS_MSG_MAX];
	int err = 0;
	ProtobufCMessage *req = NULL;
	struct unary *u;
	grpc_op ops[4];
	int rc;

	if (payload) {
		req = rpc_unpack_message(rpc_method_request(m), payload);
		grpc_byte_buffer_destroy(payload);
	}
	if (!srv->h.unary) {
		err = -ENOSYS;
		snprintf(reply.msg, sizeof(reply.msg), "%s", rpc_method_path(m));
	} else if (!req) {
		err = -EINVAL;
		snprintf(reply.msg, sizeof(reply.msg), "malformed request");
	} else {
		rc = srv->h.unary(srv->h.ctx, m, req, &reply);
		if (rc < 0) {
			err = rc;
			if (reply.bb) {
				grpc_byte_buffer_destroy(reply.bb);
				reply.bb = NULL;
			}
		} else if (!reply.bb) {
			err = -EIO;
			snprintf(reply.msg, sizeof(reply.msg), "no reply");
		}
	}
	memcpy(text, reply.msg, sizeof(text));
	rpc_format_status_str(reply.msg, sizeof(reply.msg), err, text);
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
	ops[2].data.send_status_from_server.status = rpc_status_from_err(err);
	ops[2].data.send_status_from_server.trailing_metadata_count =
	        rpc_err_metadata(err, &u->err_md);
	ops[2].data.send_status_from_server.trailing_metadata = &u->err_md;
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
