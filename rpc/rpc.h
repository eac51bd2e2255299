/*
 * rpc: the zest.Datanode protocol over the gRPC core C API (no C++).
 *
 * Three parts:
 *  - marshallers: a WriteChunk (or ReadChunk) received as a grpc_byte_buffer is parsed
 *    straight from gRPC's receive slices; its `data` field comes back as struct zc_seg
 *    segments pointing into those slices (zero-copy), or, in copy mode, into an aligned
 *    heap copy made after a protobuf-c unpack. Both modes hand the handler the same
 *    zc_seg interface. Every user-space payload copy is counted (rpc_stats_get).
 *  - a server (rpc_server_*): registered methods, one completion queue served by several
 *    threads, per-call handlers that may pause receiving and finish from any thread.
 *  - a client (rpc_client_*): asynchronous Write streams that send the caller's memory
 *    without copying, with bounded in-flight bytes; Read streams delivering zero-copy
 *    segments; async and blocking unary calls.
 *
 * Threading: server and client callbacks run on the module's own completion-queue
 * threads. Functions documented "any thread" are safe to call from anywhere, including
 * from inside callbacks. A server call's callbacks never run concurrently with each
 * other. On the client, with cq_threads > 1 a Write stream's `writable` may overlap its
 * `done` (with the default single thread nothing overlaps).
 *
 * Errors: functions return >= 0 on success and -errno or ZC_E(code) on failure
 * (common/zc_err.h). A call's outcome travels as a gRPC status code, the zest error code
 * in the trailing metadata RPC_ERR_KEY, and a message for people: the code's word and
 * the handler's text (rpc_write_fail, rpc_*_set_error, rpc_reply_error), "NoSuchBucket: b".
 * Nobody parses the message.
 *
 * Ownership: payload bytes are named by struct zc_seg (common/zc_ref.h). A segment
 * handed to a callback is borrowed for the callback; to keep the bytes longer, take
 * zc_ref_get(seg->ref) and zc_ref_put() it when done (any thread). A segment with a
 * NULL ref is static memory.
 */
#ifndef ZEST_RPC_H
#define ZEST_RPC_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/status.h>

#include "rpc_tls.h"
#include "zc_err.h"
#include "zc_ref.h"
#include "zest.pb-c.h"

#define RPC_DEFAULT_MAX_MESSAGE (16u << 20) /* payload bytes per WriteChunk/ReadChunk */
#define RPC_MAX_META            (1u << 20)  /* non-data bytes of one chunk message */
#define RPC_STATUS_MSG_MAX      256

/* ------------------------------------------------------------------ status, errors */

struct rpc_status {
	grpc_status_code code; /* GRPC_STATUS_OK on success */
	int err;               /* 0, or the error: ZC_E(code) from the "zest-err" trailer,
	                        * else rpc_err_from_status(code) (zc_err.h) */
	char msg[RPC_STATUS_MSG_MAX];
};

/* The trailing metadata key that carries a failed call's zest error code (decimal). */
#define RPC_ERR_KEY "zest-err"

/*
 * Map an error (zc_err.h: -errno or ZC_E(code)) to the gRPC status the wire carries:
 * NoSuchBucket/NoSuchKey NOT_FOUND, BucketAlreadyOwnedByYou ALREADY_EXISTS,
 * BucketNotEmpty/PreconditionFailed FAILED_PRECONDITION, InvalidArgument INVALID_ARGUMENT,
 * BadDigest DATA_LOSS, SlowDown/no space/changed RESOURCE_EXHAUSTED, no quorum/unreachable
 * UNAVAILABLE, canceled CANCELLED, NotImplemented UNIMPLEMENTED, anything else INTERNAL.
 */
grpc_status_code rpc_status_from_err(int err);

/* For a status that came without a "zest-err" trailer (transport, deadline, a peer of
 * another kind): the error it stands for (OK -> 0). */
int rpc_err_from_status(grpc_status_code code);

/* Fill st with rpc_status_from_err(err) and the message (the message rule above; fmt NULL:
 * strerror; err 0: OK, ""). */
void rpc_status_set(struct rpc_status *st, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* ------------------------------------------------------------------ copy accounting */

enum rpc_copy_stage {
	RPC_STAGE_GATHER, /* copy mode: the message gathered into one buffer */
	RPC_STAGE_UNPACK, /* copy mode: protobuf-c unpack copies `data` into the heap */
	RPC_STAGE_ALIGN,  /* copy mode: the copy into aligned write buffers */
	RPC_STAGE_COUNT
};

/* Process-wide payload counters (monotonic; atomically updated). */
struct rpc_stats {
	uint64_t received_bytes;                 /* `data` bytes received by servers */
	uint64_t copied_bytes[RPC_STAGE_COUNT];  /* user-space copies of payload */
	uint64_t messages;                       /* chunk messages parsed */
};

/* Snapshot the counters (any thread). Exported by the datanode as
 * zest_payload_received_bytes_total and zest_payload_copied_bytes_total{stage=...}. */
void rpc_stats_get(struct rpc_stats *out);

/* "gather", "unpack", "align". */
const char *rpc_stage_name(enum rpc_copy_stage stage);

/* Received byte buffers / messages still referenced (0 when nothing leaks). */
long rpc_live_buffers(void);

/*
 * Keep freed heap memory in the process (glibc: mmap threshold 32 MiB, no trimming
 * below 1 GiB). Call once at program start in a server that holds receive slices for a
 * while (the zero-copy datanode): with glibc's defaults the transport's fresh read
 * buffers are page-faulted in again and again (measured: 830k minor faults and
 * 0.71 sys CPU-s/GiB, against 44k and 0.36 with this). Returns 0 or -EINVAL.
 */
int rpc_tune_malloc(void);

/* ------------------------------------------------------------------ marshallers */

enum rpc_marshaller { RPC_MARSHAL_ZEROCOPY, RPC_MARSHAL_COPY };

/* "zerocopy" / "copy" -> enum; returns 0 or -EINVAL. */
int rpc_marshaller_parse(const char *name, enum rpc_marshaller *out);

/*
 * One parsed chunk message. `msg` holds every field except `data` (unpacked by
 * protobuf-c; its data field is empty); the data are segs[0..n_segs), data_len bytes in
 * all. Segment refs are borrowed from the parsed input (see rpc_chunk_parse).
 */
struct rpc_chunk {
	ProtobufCMessage *msg; /* Zest__WriteChunk or Zest__ReadChunk */
	struct zc_seg *segs;
	size_t n_segs, cap_segs;
	size_t data_len;
	char err[160]; /* why parsing failed, for the status message */
	/* scratch reused between messages: gathered non-data fields, input spans */
	uint8_t *meta;
	size_t meta_cap;
	struct zc_seg *in;
	size_t in_cap;
};

/*
 * Parse one protobuf message of type `desc` whose bytes lie in in[0..n_in) (any split,
 * any alignment), without gathering field `data_field` (a bytes field): its value comes
 * back as segments into the input, each carrying the input span's ref (no ref taken).
 * Other known fields are gathered (metadata only, at most RPC_MAX_META bytes) and
 * unpacked by protobuf-c; unknown fields are skipped. Reuses chunk->segs.
 * Returns 0, or -EINVAL with chunk->err naming the problem (truncated varint, length
 * past the end, wrong wire type, bad field number, malformed nested field).
 */
int rpc_chunk_parse(const ProtobufCMessageDescriptor *desc, unsigned data_field,
		    const struct zc_seg *in, size_t n_in, struct rpc_chunk *chunk);

/* Free chunk->msg (keeps the segs array for reuse). */
void rpc_chunk_clear(struct rpc_chunk *chunk);

/* Free everything a chunk holds. */
void rpc_chunk_fini(struct rpc_chunk *chunk);

/* ------------------------------------------------------------------ server */

enum rpc_method {
	RPC_WRITE,
	RPC_READ,
	RPC_STAT,
	RPC_DELETE,
	RPC_LIST,
	RPC_COMPOSE,
	RPC_CREATE_BUCKET,
	RPC_DELETE_BUCKET,
	RPC_HEAD_BUCKET,
	RPC_LIST_BUCKETS,
	RPC_METHOD_COUNT
};

/* "/zest.Datanode/Write", ... */
const char *rpc_method_path(enum rpc_method m);
/* Request and response types of a method. */
const ProtobufCMessageDescriptor *rpc_method_request(enum rpc_method m);
const ProtobufCMessageDescriptor *rpc_method_response(enum rpc_method m);

struct rpc_server;
struct rpc_write; /* one server-side Write call */
struct rpc_read;  /* one server-side Read call */
struct rpc_reply; /* the answer of one unary call */

/*
 * Write handler. All callbacks run on server CQ threads, one at a time per call.
 *  open:   the first message's WriteOpen (bucket and key non-empty, key at most 1024
 *          bytes, first data within a declared size: checked). Return 0 to accept (and
 *          set *call_ctx; do not finish or fail from inside open), or
 *          -errno after rpc_write_set_error() / with the default message to refuse; a
 *          refused call gets no further callbacks and no obligation.
 *          Once accepted, the handler MUST eventually call rpc_write_finish() or
 *          rpc_write_fail() exactly once (any thread), even after abort.
 *  data:   the next data, contiguous with the previous, and the CRC32C its message
 *          carries, already verified unless handler_verifies_crc. segs are borrowed
 *          for the callback (take zc_ref_get to keep them). May call
 *          rpc_write_pause() to stop receiving until rpc_write_resume().
 *  commit: the last message arrived (its data, if any, came through `data` first);
 *          `last` has the etag and attrs. The handler makes the object durable and then
 *          calls rpc_write_finish().
 *  abort:  the call broke (bad input, client cancel, server shutdown); err says why.
 *          No more data/commit. The handler drops its state and still calls
 *          rpc_write_fail() (or finish) once to release the call.
 *  handler_verifies_crc: the handler checks each message's CRC32C itself, inside its
 *          own pass over the bytes (the datanode derives it from its chunk CRCs), and
 *          fails the call with -EBADMSG on a mismatch; the server then reads the
 *          payload once instead of twice.
 */
struct rpc_write_ops {
	int (*open)(void *srv_ctx, struct rpc_write *w, const Zest__WriteOpen *open,
		    void **call_ctx);
	void (*data)(void *call_ctx, struct rpc_write *w, uint64_t offset,
		     const struct zc_seg *segs, size_t n_segs, size_t len, uint32_t crc32c);
	void (*commit)(void *call_ctx, struct rpc_write *w, const Zest__WriteChunk *last);
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
void rpc_write_finish(struct rpc_write *w, const Zest__WriteResult *res);
/* Complete the call with rpc_status_from_err(err) and the message (the message rule).
 * Any thread. After finish or fail the handler must not touch w again. */
void rpc_write_fail(struct rpc_write *w, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* The peer address ("ipv4:127.0.0.1:5555"), for logs; valid for the call's life. */
const char *rpc_write_peer(const struct rpc_write *w);

/*
 * Read handler (server streaming).
 *  start: the request. Return 0 (setting *call_ctx) and then send chunks with
 *         rpc_read_send(); or -errno to fail the call at once (rpc_read_set_error).
 *         Once accepted the handler MUST call rpc_read_finish() exactly once.
 *  sent:  the previous rpc_read_send() completed; send the next one (or finish).
 *  abort: the client went away or the server shuts down: stop sending, then
 *         rpc_read_finish().
 */
struct rpc_read_ops {
	int (*start)(void *srv_ctx, struct rpc_read *r, const Zest__ReadRequest *req,
		     void **call_ctx);
	void (*sent)(void *call_ctx, struct rpc_read *r);
	void (*abort)(void *call_ctx, struct rpc_read *r, int err);
};

/*
 * Send one ReadChunk: info (first chunk only, else NULL), offset, the CRC32C of the
 * data, and the data segments. The data is not copied: each segment's ref is taken
 * (zc_ref_get) and put when gRPC has written the bytes. One send at a time: wait for
 * `sent`. Returns 0, -EBUSY (a send is outstanding), -ECANCELED (the call is over).
 */
int rpc_read_send(struct rpc_read *r, const Zest__ObjectInfo *info, uint64_t offset,
		  uint32_t crc32c, const struct zc_seg *segs, size_t n_segs);
void rpc_read_set_error(struct rpc_read *r, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* End the stream: err 0 is OK, else the status for err and the message (message
 * rule). Any thread; afterwards the handler must not touch r again. */
void rpc_read_finish(struct rpc_read *r, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * Unary handler (Stat, Delete, List, Compose, *Bucket*), called on a CQ thread: answer
 * with rpc_reply_message() and return 0, or return an error (with an optional
 * rpc_reply_error() message). Or return RPC_REPLY_LATER to answer from another thread
 * (work that may block, such as an fsynced metadata write): req and reply stay valid until
 * the handler calls rpc_reply_send(reply, err) exactly once. A method without a handler
 * answers UNIMPLEMENTED.
 */
typedef int (*rpc_unary_fn)(void *srv_ctx, enum rpc_method m, const ProtobufCMessage *req,
			    struct rpc_reply *reply);
#define RPC_REPLY_LATER 1
/* Send a deferred reply: the message packed with rpc_reply_message() when err is 0, else
 * the error and the rpc_reply_error() text. Any thread; reply is gone afterwards. */
void rpc_reply_send(struct rpc_reply *reply, int err);
/* Pack msg (borrowed) as the response. Returns 0 or -ENOMEM. */
int rpc_reply_message(struct rpc_reply *reply, const ProtobufCMessage *msg);
void rpc_reply_error(struct rpc_reply *reply, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

struct rpc_server_opts {
	const char *listen;           /* "127.0.0.1:0" (port 0: any free port) */
	unsigned cq_threads;          /* completion-queue threads; 0: 2 */
	size_t max_message;           /* data bytes per message; 0: RPC_DEFAULT_MAX_MESSAGE */
	enum rpc_marshaller marshaller;
	unsigned posted_per_method;   /* requests kept posted per method; 0: 16 */
	struct rpc_tls tls;           /* mTLS (rpc_tls.h); plaintext only with tls.insecure */
};

struct rpc_server_handlers {
	struct rpc_write_ops write;   /* open == NULL: Write is UNIMPLEMENTED */
	struct rpc_read_ops read;     /* start == NULL: Read is UNIMPLEMENTED */
	rpc_unary_fn unary;           /* NULL: the unary methods are UNIMPLEMENTED */
	void *ctx;                    /* srv_ctx for every callback */
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

/* ------------------------------------------------------------------ client */

struct rpc_client;
struct rpc_cwrite; /* a client Write stream */
struct rpc_cread;  /* a client Read stream */

struct rpc_client_opts {
	const char *target;        /* "127.0.0.1:7481" */
	unsigned cq_threads;       /* 0: 1 */
	size_t max_message;        /* 0: RPC_DEFAULT_MAX_MESSAGE (+ header room) */
	size_t max_inflight;       /* per Write stream; 0: 4 MiB */
	unsigned channels;         /* TCP connections, calls spread round-robin; 0: 1, max 16 */
	/* HTTP/2 receive window per stream, fixed (BDP probing off): what a paused Read
	 * stream can still buffer in gRPC. 0: gRPC's default, which BDP probing grows to
	 * tens of MiB per stream. */
	size_t stream_window;
	struct rpc_tls tls;        /* mTLS (rpc_tls.h); plaintext only with tls.insecure */
};

/* Connect lazily to target (calls grpc_init). Returns 0 and *out, -EINVAL / -ENOMEM, or
 * what rpc_tls_pem_load returns for bad TLS settings (logged with the reason). With TLS
 * the server's certificate must name target's host (DNS or IP subjectAltName). */
int rpc_client_create(const struct rpc_client_opts *opts, struct rpc_client **out);
/* Cancel nothing: every stream must be done before. Joins threads. NULL: no-op. */
void rpc_client_destroy(struct rpc_client *c);

/*
 * Write stream callbacks (client CQ thread).
 *  writable: in-flight bytes fell below max_inflight after a send returned -EAGAIN.
 *  done:     the call is over; st has the status, res the result when OK (borrowed for
 *            the callback). Called exactly once. Afterwards rpc_cwrite_destroy().
 */
struct rpc_cwrite_cbs {
	void (*writable)(void *arg, struct rpc_cwrite *w);
	void (*done)(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
		     const Zest__WriteResult *res);
};

/* Start a Write call with this open (borrowed; packed at once). Returns 0 and *out. */
int rpc_cwrite_open(struct rpc_client *c, const Zest__WriteOpen *open,
		    const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out);
/*
 * Queue one WriteChunk carrying segs (the next bytes of the object; the client tracks
 * the offset and computes the CRC32C). The bytes are not copied: each segment's ref is
 * taken and put once gRPC is done with it. Returns 0; -EAGAIN when in-flight bytes are
 * at max_inflight (nothing queued: wait for `writable`); -EINVAL when the message
 * would exceed max_message; -ECANCELED after commit or cancel, or once the call has
 * failed (its status then arrives through `done`). Any thread.
 */
int rpc_cwrite_send(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs);
/*
 * Queue the last WriteChunk (commit = true, optional final data, etag and attrs, all
 * borrowed) and half-close. Never -EAGAIN (the cap is not applied). Any thread.
 */
int rpc_cwrite_commit(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
		      const char *etag, Zest__Attr *const *attrs, size_t n_attrs);
/* The same with a condition on the object the commit replaces (borrowed; NULL: none),
 * checked by the datanode inside its commit transaction. */
int rpc_cwrite_commit_cond(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
			   const char *etag, Zest__Attr *const *attrs, size_t n_attrs,
			   const Zest__WriteCondition *cond);
/* Cancel the call; `done` follows with CANCELLED (unless already done). Any thread. */
void rpc_cwrite_cancel(struct rpc_cwrite *w);
/* Bytes queued and not yet handed to the transport. */
size_t rpc_cwrite_inflight(const struct rpc_cwrite *w);
/* Free a stream after its `done` callback ran (may be called inside `done`). */
void rpc_cwrite_destroy(struct rpc_cwrite *w);

/*
 * Read stream callbacks (client CQ thread).
 *  chunk: one ReadChunk; segs point into gRPC's receive slices (zero-copy), borrowed for
 *         the callback unless zc_ref_get. info is set on the first chunk. The CRC was
 *         verified. Return 0 to continue or 1 to pause until rpc_cread_resume() (any
 *         thread; a resume that comes while the callback still runs cancels its pause).
 *  done:  exactly once; afterwards rpc_cread_destroy().
 */
struct rpc_cread_cbs {
	int (*chunk)(void *arg, struct rpc_cread *r, const Zest__ObjectInfo *info,
		     uint64_t offset, const struct zc_seg *segs, size_t n_segs, size_t len);
	void (*done)(void *arg, struct rpc_cread *r, const struct rpc_status *st);
};

int rpc_cread_open(struct rpc_client *c, const Zest__ReadRequest *req,
		   const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out);
void rpc_cread_resume(struct rpc_cread *r);
void rpc_cread_cancel(struct rpc_cread *r);
void rpc_cread_destroy(struct rpc_cread *r);

/*
 * Unary call. cb runs once on a client thread with the status and, when OK, the
 * response (unpacked; borrowed for the callback). req is borrowed (packed at once).
 */
typedef void (*rpc_unary_cb)(void *arg, const struct rpc_status *st, const ProtobufCMessage *resp);
int rpc_client_call_async(struct rpc_client *c, enum rpc_method m, const ProtobufCMessage *req,
			  rpc_unary_cb cb, void *arg);

/*
 * Blocking unary call (never from a client callback). On OK *resp is the response, to
 * free with protobuf_c_message_free_unpacked(*resp, NULL). Returns 0 when the status
 * is OK, else rpc_err_from_status() (st has the details).
 */
int rpc_client_call(struct rpc_client *c, enum rpc_method m, const ProtobufCMessage *req,
		    ProtobufCMessage **resp, struct rpc_status *st);

/*
 * Blocking Write of one buffer (tools, tests): open, chunks of `chunk` bytes, commit.
 * buf is borrowed until return (it waits until gRPC released every slice). res
 * (optional) receives size, crc32c and mtime_ns (not etag). Returns 0 or the
 * -errno of the status (st has the details).
 */
int rpc_client_put(struct rpc_client *c, const Zest__WriteOpen *open, const void *buf,
		   size_t len, size_t chunk, Zest__WriteResult *res, struct rpc_status *st);

#endif
