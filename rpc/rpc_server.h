/*
 * rpc_server: the zest.Datanode server over the gRPC core C API (rpc.h has the messages,
 * status and errors it shares with the client).
 *
 * Threading: every handler callback runs on one of the server's completion-queue threads
 * (rpc_server_opts.cq_threads); a call's callbacks never run concurrently with each other.
 * Functions documented "any thread" may be called from anywhere, including from inside
 * callbacks; rpc_server_create/destroy from the thread that owns the server.
 */
#ifndef ZEST_RPC_SERVER_H
#define ZEST_RPC_SERVER_H

#include "rpc.h"

/* ------------------------------------------------------------------ server */

struct rpc_server;
struct rpc_write; /* one server-side Write call */
struct rpc_read;  /* one server-side Read call */
struct rpc_reply; /* the answer of one unary call */

/*
 * Write handler. All callbacks run on server CQ threads, one at a time per call.
 *  open:   the first message's open, borrowed for the callback (bucket and key non-empty, key at
 * most 1024 bytes, first data within a declared size: checked). Return 0 to accept (and set
 * *call_ctx; do not finish or fail from inside open), or -errno after rpc_write_set_error() / with
 * the default message to refuse; a refused call gets no further callbacks and no obligation. Once
 * accepted, the handler MUST eventually call rpc_write_finish() or rpc_write_fail() exactly once
 * (any thread), even after abort. data:   the next data, contiguous with the previous, and the
 * CRC32C its message carries, already verified unless handler_verifies_crc. segs are borrowed for
 * the callback (take zc_ref_get to keep them). May call rpc_write_pause() to stop receiving until
 * rpc_write_resume(). commit: the last message arrived (its data, if any, came through `data`
 * first); `commit` has the etag, attrs and condition (borrowed for the callback). The handler makes
 * the object durable and then calls rpc_write_finish(). abort:  the call broke (bad input, client
 * cancel, server shutdown); err says why. No more data/commit. The handler drops its state and
 * still calls rpc_write_fail() (or finish) once to release the call. handler_verifies_crc: the
 * handler checks each message's CRC32C itself, inside its own pass over the bytes (the datanode
 * derives it from its chunk CRCs), and fails the call with -EBADMSG on a mismatch; the server then
 * reads the payload once instead of twice.
 *
 * WriteCell uses the same machinery and callbacks (rpc_server_handlers.write_cell): its
 * first message's open comes to open_cell instead (checked: extent id non-zero, length at
 * most stripes_per_group x cell_size, first data within length); the stream must carry
 * exactly `length` bytes; `commit` gets a struct rpc_commit with no fields (the stream's
 * last message: make the cell durable) and the handler answers with
 * rpc_write_finish_cell().
 */
struct rpc_write_ops {
	int (*open)(void *srv_ctx, struct rpc_write *w, const struct rpc_write_open *open,
	            void **call_ctx);
	int (*open_cell)(void *srv_ctx, struct rpc_write *w, const struct rpc_cell_open *open,
	                 void **call_ctx);
	void (*data)(void *call_ctx, struct rpc_write *w, uint64_t offset,
	             const struct zc_seg *segs, size_t n_segs, size_t len, uint32_t crc32c);
	void (*commit)(void *call_ctx, struct rpc_write *w, const struct rpc_commit *commit);
	void (*abort)(void *call_ctx, struct rpc_write *w, int err);
	bool handler_verifies_crc;
};

/* Stop posting receives for this call after the current one (any thread). */
void rpc_write_pause(struct rpc_write *w);
/* Resume receiving (any thread). */
void rpc_write_resume(struct rpc_write *w);
/* Set the message sent with the error an open callback returns (any thread). */
void rpc_write_set_error(struct rpc_write *w, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* Complete the call with OK and this result (borrowed; packed at once). Any thread. */
void rpc_write_finish(struct rpc_write *w, const struct rpc_write_result *res);
/* The same for a WriteCell call. */
void rpc_write_finish_cell(struct rpc_write *w, const struct rpc_cell_result *res);
/* Complete the call with rpc_status_from_err(err) and the message (the message rule).
 * Any thread. After finish or fail the handler must not touch w again. */
void rpc_write_fail(struct rpc_write *w, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * Read handler (server streaming).
 *  start: the request (borrowed for the callback). Return 0 (setting *call_ctx) and then send
 * chunks with rpc_read_send(); or -errno to fail the call at once (rpc_read_set_error). Once
 * accepted the handler MUST call rpc_read_finish() exactly once. sent:  the previous
 * rpc_read_send() completed; send the next one (or finish). abort: the client went away or the
 * server shuts down: stop sending, then rpc_read_finish().
 */
struct rpc_read_ops {
	int (*start)(void *srv_ctx, struct rpc_read *r, const struct rpc_read_req *req,
	             void **call_ctx);
	void (*sent)(void *call_ctx, struct rpc_read *r);
	void (*abort)(void *call_ctx, struct rpc_read *r, int err);
	/* ReadCell (rpc_server_handlers.read_cell): the request comes here instead of
	 * start; the rest is Read's (rpc_read_send with info NULL). */
	int (*start_cell)(void *srv_ctx, struct rpc_read *r, const struct rpc_cell_read_req *req,
	                  void **call_ctx);
};

/*
 * Send one ReadChunk: info (first chunk only, else NULL; borrowed), offset, the CRC32C of the
 * data, and the data segments. The data is not copied: each segment's ref is taken
 * (zc_ref_get) and put when gRPC has written the bytes. One send at a time: wait for
 * `sent`. Returns 0, -EBUSY (a send is outstanding), -ECANCELED (the call is over).
 */
int rpc_read_send(struct rpc_read *r, const struct rpc_object_info *info, uint64_t offset,
                  uint32_t crc32c, const struct zc_seg *segs, size_t n_segs);
void rpc_read_set_error(struct rpc_read *r, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));
/* End the stream: err 0 is OK, else the status for err and the message (message
 * rule). Any thread; afterwards the handler must not touch r again. */
void rpc_read_finish(struct rpc_read *r, int err, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

/*
 * Unary handler (Stat, Delete, List, Compose, *Bucket*, DeleteCells, CommitCells), called on a CQ
 * thread with the method and its request (the union member the method names): answer with the
 * rpc_reply_* function of the method's response type and return 0, or return an error
 * (with an optional rpc_reply_error() message). Or return RPC_REPLY_LATER to answer from
 * another thread (work that may block, such as an fsynced metadata write): req and reply
 * stay valid until the handler calls rpc_reply_send(reply, err) exactly once. A method
 * without a handler answers UNIMPLEMENTED.
 */
typedef int (*rpc_unary_fn)(void *srv_ctx, enum rpc_method m, const union rpc_unary_req *req,
                            struct rpc_reply *reply);
#define RPC_REPLY_LATER 1
/* Send a deferred reply: the response set by an rpc_reply_* call when err is 0, else
 * the error and the rpc_reply_error() text. Any thread; reply is gone afterwards. */
void rpc_reply_send(struct rpc_reply *reply, int err);
/*
 * Set the response (borrowed; packed at once, a later call replaces it). Each fits the
 * methods named; another method gets -EINVAL. Returns 0, -EINVAL or -ENOMEM.
 */
int rpc_reply_object_info(struct rpc_reply *reply, const struct rpc_object_info *info); /* Stat */
int rpc_reply_delete_result(struct rpc_reply *reply, const struct rpc_delete_result *res);
int rpc_reply_list_result(struct rpc_reply *reply, const struct rpc_list_result *res);
int rpc_reply_write_result(struct rpc_reply *reply,
                           const struct rpc_write_result *res); /* Compose */
/* CreateBucket, HeadBucket */
int rpc_reply_bucket_info(struct rpc_reply *reply, const struct rpc_bucket_info *info);
int rpc_reply_bucket_list(struct rpc_reply *reply, const struct rpc_bucket_list *list);
int rpc_reply_empty(struct rpc_reply *reply); /* DeleteBucket */
int rpc_reply_cells_result(struct rpc_reply *reply, const struct rpc_cells_result *res);
void rpc_reply_error(struct rpc_reply *reply, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

struct rpc_server_opts {
	const char *listen;  /* "127.0.0.1:0" (port 0: any free port) */
	unsigned cq_threads; /* completion-queue threads; 0: 2 */
	size_t max_message;  /* data bytes per message; 0: RPC_DEFAULT_MAX_MESSAGE */
	enum rpc_marshaller marshaller;
	unsigned posted_per_method; /* requests kept posted per method; 0: 16 */
	struct rpc_tls tls;         /* mTLS (rpc_tls.h); plaintext only with tls.insecure */
	/* Also serve on this Unix socket path with local credentials (rpc_unix_add_port),
	 * for a gateway on the same host; NULL: none. tls does not apply to it. */
	const char *unix_socket;
};

struct rpc_server_handlers {
	struct rpc_write_ops write;      /* open == NULL: Write is UNIMPLEMENTED */
	struct rpc_read_ops read;        /* start == NULL: Read is UNIMPLEMENTED */
	struct rpc_write_ops write_cell; /* open_cell == NULL: WriteCell is UNIMPLEMENTED */
	struct rpc_read_ops read_cell;   /* start_cell == NULL: ReadCell is UNIMPLEMENTED */
	rpc_unary_fn unary;              /* NULL: the unary methods are UNIMPLEMENTED */
	void *ctx;                       /* srv_ctx for every callback */
};

/*
 * Create, bind and start a server (calls grpc_init). handlers is copied. Returns 0 and
 * *out, -EADDRINUSE when the address cannot be bound (in use or unresolvable; port
 * sharing is off), -EINVAL for missing options, what rpc_tls_pem_load returns for bad
 * TLS settings (logged with the reason), or -ENOMEM.
 */
int rpc_server_create(const struct rpc_server_opts *opts, const struct rpc_server_handlers *h,
                      struct rpc_server **out);
/* The bound port. */
int rpc_server_port(const struct rpc_server *srv);
/*
 * Graceful stop: refuse new calls, give in-flight calls grace_ms to finish, then cancel
 * the rest (their handlers get abort), wait until every accepted call was finished by its
 * handler, stop the threads and free everything (calls grpc_shutdown). NULL: no-op.
 * Must not be called from a server callback.
 */
void rpc_server_destroy(struct rpc_server *srv, unsigned grace_ms);

#endif
