/*
 * rpc server: zest.Datanode over the gRPC core C API.
 *
 * One completion queue, served by cq_threads threads. Every method is registered and
 * keeps posted_per_method requests waiting. A call's state is guarded by its mutex, and
 * every grpc_call_start_batch on a call happens under it (gRPC asks batches on one call
 * to be serialized). "busy" marks the time a callback into the handler is running or a
 * completion that will run one is outstanding: an abort is delivered only when not busy,
 * so a handler's callbacks never overlap.
 *
 * rpc_server_internal.h: what the server's files share. Private to rpc/.
 *   rpc_server.c     lifecycle, posted requests, the completion-queue threads, dispatch
 *   rpc_srv_call.c   the call base: init, close, status
 *   rpc_srv_write.c  Write and WriteCell: the client stream of chunks, flow control, the result
 *   rpc_srv_read.c   Read and ReadCell: the server stream of ReadChunks
 *   rpc_srv_unary.c  the unary methods (Stat, Delete, List, Compose, buckets)
 */
#ifndef ZEST_RPC_SERVER_INTERNAL_H
#define ZEST_RPC_SERVER_INTERNAL_H

#include <grpc/grpc.h>
#include <pthread.h>

#include "rpc_internal.h"
#include "rpc_server.h"

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
	grpc_metadata err_md; /* RPC_ERR_KEY: the zest code of a failed call */
	char peer[96];
	char errmsg[RPC_STATUS_MSG_MAX];
};

struct rpc_write {
	struct call c;
	enum rpc_method m;               /* RPC_WRITE or RPC_WRITE_CELL */
	const struct rpc_write_ops *ops; /* srv->h.write or srv->h.write_cell */
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
	const struct rpc_read_ops *ops; /* srv->h.read or srv->h.read_cell */
	void *call_ctx;
	struct tag t_send;
	grpc_byte_buffer *send_bb;
	bool sent_initial;
	bool sent_pending; /* a send completed while a callback ran */
};

struct rpc_reply {
	enum rpc_method method; /* what the rpc_reply_* functions may answer */
	grpc_byte_buffer *bb;
	char msg[RPC_STATUS_MSG_MAX];
};

struct unary {
	struct tag tag;
	struct rpc_server *srv;
	grpc_call *call;
	enum rpc_method method;
	union rpc_unary_req req;  /* until the reply is sent */
	struct rpc_arena req_mem; /* the unpacked request req points into */
	struct rpc_reply reply;
	grpc_byte_buffer *resp;
	grpc_slice details;
	grpc_metadata err_md; /* RPC_ERR_KEY */
	int cancelled;
};

/* ---- rpc_srv_call.c */
void rpc_call_init(struct call *c, struct rpc_server *srv, grpc_call *call);
bool rpc_call_idle(const struct call *c);
void rpc_server_call_gone(struct rpc_server *srv);
void rpc_call_fini(struct call *c);
void rpc_call_post_close(struct call *c);
size_t rpc_err_metadata(int err, grpc_metadata *md);
void rpc_call_send_status(struct call *c, int err, const char *msg, grpc_byte_buffer *resp,
                          bool with_initial_md);
void rpc_vformat_status(char *out, size_t cap, int err, const char *fmt, va_list ap);
void rpc_call_fail(struct call *c, int err, const char *msg);
/* ---- rpc_srv_write.c */
void rpc_write_settle(struct rpc_write *w);
void rpc_write_on_recv(struct rpc_write *w, bool success);
void rpc_write_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call);
/* ---- rpc_srv_read.c */
void rpc_read_settle(struct rpc_read *r);
void rpc_read_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call,
                    grpc_byte_buffer *payload);
void rpc_read_on_send(struct rpc_read *r, bool success);
/* ---- rpc_srv_unary.c */
void rpc_unary_start(struct rpc_server *srv, enum rpc_method m, grpc_call *call,
                     grpc_byte_buffer *payload);
void rpc_unary_done(struct unary *u);

#endif
