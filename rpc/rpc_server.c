/*
 * rpc server: zest.Datanode over the gRPC core C API: lifecycle, the requests kept
 * posted per method, the completion-queue threads and the dispatch of their events
 * (rpc_server_internal.h says which file holds what).
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
	e = grpc_server_request_registered_call(
	        srv->server, srv->methods[rq->m], &rq->call, &rq->deadline, &rq->md,
	        rq->m == RPC_WRITE || rq->m == RPC_WRITE_CELL ? NULL : &rq->payload, srv->cq,
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
	case RPC_WRITE_CELL:
		if (m == RPC_WRITE ? !srv->h.write.open : !srv->h.write_cell.open_cell) {
			grpc_call_cancel_with_status(call, GRPC_STATUS_UNIMPLEMENTED,
			                             m == RPC_WRITE ? "NotImplemented: Write"
			                                            : "NotImplemented: WriteCell",
			                             NULL);
			grpc_call_unref(call);
			break;
		}
		rpc_write_start(srv, m, call);
		break;
	case RPC_READ:
	case RPC_READ_CELL:
		if (m == RPC_READ ? !srv->h.read.start : !srv->h.read_cell.start_cell) {
			if (payload)
				grpc_byte_buffer_destroy(payload);
			grpc_call_cancel_with_status(call, GRPC_STATUS_UNIMPLEMENTED,
			                             m == RPC_READ ? "NotImplemented: Read"
			                                           : "NotImplemented: ReadCell",
			                             NULL);
			grpc_call_unref(call);
			break;
		}
		rpc_read_start(srv, m, call, payload);
		break;
	default:
		rpc_unary_start(srv, m, call, payload);
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
			rpc_write_settle((struct rpc_write *)c);
		else
			rpc_read_settle((struct rpc_read *)c);
		break;
	case TAG_RECV:
		rpc_write_on_recv(t->obj, success);
		break;
	case TAG_SEND:
		rpc_read_on_send(t->obj, success);
		break;
	case TAG_UNARY:
		rpc_unary_done(t->obj);
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
	char tls_err[RPC_TLS_ERR_MAX];
	struct rpc_chan_args args;
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
	srv->opts.unix_socket = NULL;
	srv->opts.tls = (struct rpc_tls){ 0 };
	grpc_init();
	rc = rpc_tls_server_creds(&opts->tls, &creds, tls_err, sizeof(tls_err));
	if (rc) {
		ZC_ERR("rpc", "tls: %s", tls_err);
		grpc_shutdown();
		free(srv);
		return rc;
	}
	rc = -ENOMEM;
	pthread_mutex_init(&srv->mu, NULL);
	pthread_cond_init(&srv->cond, NULL);
	srv->t_shutdown.kind = TAG_SHUTDOWN;
	srv->t_shutdown.obj = srv;

	/*
	 * gRPC buffers a whole message before it checks its own limit, so we set it to twice
	 * ours and check ourselves first: a message over our limit gets INVALID_ARGUMENT with
	 * a precise message instead of gRPC's RESOURCE_EXHAUSTED.
	 */
	/* no_reuseport: a second datanode on the same port must fail, not share it. */
	rpc_chan_args_init(&args, &(struct rpc_chan_opts){
	                                  .server = true,
	                                  .max_message = 2 * (srv->opts.max_message + RPC_MAX_META),
	                                  .no_reuseport = true,
	                          });
	srv->server = grpc_server_create(&args.args, NULL);
	srv->cq = grpc_completion_queue_create_for_next(NULL);
	grpc_server_register_completion_queue(srv->server, srv->cq, NULL);
	for (int m = 0; m < RPC_METHOD_COUNT; m++)
		srv->methods[m] = grpc_server_register_method(
		        srv->server, rpc_method_path(m), NULL,
		        m == RPC_WRITE || m == RPC_WRITE_CELL
		                ? GRPC_SRM_PAYLOAD_NONE
		                : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER,
		        0);
	srv->port = grpc_server_add_http2_port(srv->server, opts->listen, creds);
	grpc_server_credentials_release(creds);
	if (srv->port <= 0) {
		ZC_ERR("rpc", "cannot listen on %s", opts->listen);
		rc = -EADDRINUSE;
		goto destroy_server;
	}
	if (opts->unix_socket) {
		rc = rpc_unix_add_port(srv->server, opts->unix_socket, tls_err, sizeof(tls_err));
		if (rc) {
			ZC_ERR("rpc", "unix socket: %s", tls_err);
			goto destroy_server;
		}
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
	if (srv->port > 0) {
		/* a port is bound (the Unix socket failed after it): gRPC destroys a server
		 * with listeners only after its shutdown */
		grpc_server_shutdown_and_notify(srv->server, srv->cq, &srv->t_shutdown);
		(void)grpc_completion_queue_next(srv->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	}
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

	zc_deadline(&until, CLOCK_REALTIME, (uint64_t)grace_ms * 1000000u);
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
