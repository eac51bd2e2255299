/*
 * rpc server, the call base every method shares: init, cancel notice, status.
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

/* ------------------------------------------------------------------ call base */

void
rpc_call_init(struct call *c, struct rpc_server *srv, grpc_call *call)
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
bool
rpc_call_idle(const struct call *c)
{
	return c->pending == 0 && !c->busy && !c->handler_holds;
}

void
rpc_server_call_gone(struct rpc_server *srv)
{
	pthread_mutex_lock(&srv->mu);
	if (--srv->live_calls == 0)
		pthread_cond_broadcast(&srv->cond);
	pthread_mutex_unlock(&srv->mu);
}

void
rpc_call_fini(struct call *c)
{
	struct rpc_server *srv = c->srv;

	grpc_call_unref(c->call);
	if (c->status_bb)
		grpc_byte_buffer_destroy(c->status_bb);
	grpc_slice_unref(c->status_details);
	grpc_slice_unref(c->err_md.value);
	pthread_mutex_destroy(&c->mu);
	rpc_server_call_gone(srv);
}

/* Under c->mu: post RECV_CLOSE_ON_SERVER, which reports the call's end. */
void
rpc_call_post_close(struct call *c)
{
	grpc_op op = { .op = GRPC_OP_RECV_CLOSE_ON_SERVER };

	op.data.recv_close_on_server.cancelled = &c->close_cancelled;
	if (grpc_call_start_batch(c->call, &op, 1, &c->t_close, NULL) == GRPC_CALL_OK)
		c->pending++;
}

/* Fill md with RPC_ERR_KEY and err's zest code; returns 1 (entries) or 0 for success. */
size_t
rpc_err_metadata(int err, grpc_metadata *md)
{
	char v[12];

	if (!err)
		return 0;
	snprintf(v, sizeof(v), "%d", (int)zc_err_code(err));
	md->key = grpc_slice_from_static_string(RPC_ERR_KEY);
	md->value = grpc_slice_from_copied_string(v);
	return 1;
}

/* Under c->mu: send the final status (once) for err (0: OK), with its code in RPC_ERR_KEY.
 * resp (taken) may be NULL. */
void
rpc_call_send_status(struct call *c, int err, const char *msg, grpc_byte_buffer *resp,
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
	ops[n].data.send_status_from_server.status = rpc_status_from_err(err);
	ops[n].data.send_status_from_server.trailing_metadata_count =
	        rpc_err_metadata(err, &c->err_md);
	ops[n].data.send_status_from_server.trailing_metadata = &c->err_md;
	ops[n++].data.send_status_from_server.status_details = &c->status_details;
	if (grpc_call_start_batch(c->call, ops, n, &c->t_status, NULL) == GRPC_CALL_OK)
		c->pending++;
	else
		grpc_call_cancel(c->call, NULL);
}

void
rpc_vformat_status(char *out, size_t cap, int err, const char *fmt, va_list ap)
{
	rpc_format_status(out, cap, err, fmt, ap);
}

/* Under c->mu: fail with err and the handler's message (or a default one). */
void
rpc_call_fail(struct call *c, int err, const char *msg)
{
	char buf[RPC_STATUS_MSG_MAX];

	rpc_format_status_str(buf, sizeof(buf), err, msg);
	rpc_call_send_status(c, err, buf, NULL, true);
}
