/*
 * rpc: the zest.Datanode protocol over the gRPC core C API (no C++).
 *
 * Four parts:
 *  - messages: plain C structs for everything the protocol carries (struct rpc_write_open,
 *    rpc_commit, rpc_object_info, ... below). Callers never see protobuf-c types; the
 *    conversion to and from the wire (rpc/zest.proto) is this module's business
 *    (rpc_msg.c) and touches metadata only, never payload bytes.
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

#include "rpc_tls.h"
#include "zc_err.h"
#include "zc_ref.h"

#define RPC_DEFAULT_MAX_MESSAGE (16u << 20) /* payload bytes per WriteChunk/ReadChunk */
#define RPC_MAX_META            (1u << 20)  /* non-data bytes of one chunk message */
#define RPC_STATUS_MSG_MAX      256

/* ------------------------------------------------------------------ status, errors */

/* A finished call's outcome. Sent: the server turns err into the gRPC status the wire
 * carries and puts its zest code in the "zest-err" trailer. Received: err is ZC_E(code) from
 * that trailer when the peer sent one (a zest datanode always does), else the error the
 * gRPC status stands for (-ETIMEDOUT for a deadline, -ECANCELED, -EACCES, ZC_E(ZC_UNAVAILABLE)
 * for a peer that cannot be reached, -EIO for anything else). gRPC's codes never leave rpc/. */
struct rpc_status {
	int err; /* 0 on success, else -errno or ZC_E(code) (zc_err.h) */
	char msg[RPC_STATUS_MSG_MAX];
};

/* The trailing metadata key that carries a failed call's zest error code (decimal). */
#define RPC_ERR_KEY "zest-err"

/* A caller's one translation of a failed call: 0 when st is OK, else ZC_E(code) of its
 * error, so -EAGAIN and ZC_E(ZC_SLOW_DOWN) compare alike. An unreachable or failing peer
 * (ZC_UNAVAILABLE, ZC_INTERNAL) is logged at warning level with its message, once, here. */
int rpc_status_err(const struct rpc_status *st);

/* Fill st with err and the message (the message rule above; fmt NULL:
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
	uint64_t received_bytes;                /* `data` bytes received by servers */
	uint64_t copied_bytes[RPC_STAGE_COUNT]; /* user-space copies of payload */
	uint64_t messages;                      /* chunk messages parsed */
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

/* ------------------------------------------------------------------ messages */

/*
 * The protocol's messages as plain structs, field for field as in rpc/zest.proto (which
 * docs/protocol.md documents). Ownership, one rule for all of them:
 *  - What a caller hands in (an open, a commit, a reply, a request) is borrowed and
 *    converted at once: nothing is kept after the call returns. A NULL string is sent
 *    as "" and a NULL array pointer with n == 0 as empty.
 *  - What a callback receives is borrowed for the callback; strings are never NULL
 *    ("" when unset) and point into the received message.
 *  - A blocking unary call fills the caller's struct rpc_unary_resp; its strings and
 *    arrays live in memory the struct owns until rpc_unary_resp_fini().
 */

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
	RPC_WRITE_CELL,   /* client stream, like RPC_WRITE */
	RPC_READ_CELL,    /* server stream, like RPC_READ */
	RPC_DELETE_CELLS, /* unary */
	RPC_COMMIT_CELLS, /* unary */
	RPC_METHOD_COUNT
};

/* The streaming methods (Write, Read, WriteCell, ReadCell); the others are unary. */
bool rpc_method_is_stream(enum rpc_method m);

/* "/zest.Datanode/Write", ... */
const char *rpc_method_path(enum rpc_method m);

/* An S3 attribute kept with an object ("content-type", "x-amz-meta-color", ...). */
struct rpc_attr {
	const char *name, *value;
};

/* A condition on the object a commit (or compose) replaces, checked by the datanode
 * inside its commit transaction. if_match "" (or NULL when sending): none; "*": any ETag. */
struct rpc_write_cond {
	bool if_none_match;   /* the key must not exist */
	const char *if_match; /* the key must exist with this ETag (no quotes) */
};

/* The first message of a Write. */
struct rpc_write_open {
	const char *bucket, *key;
	uint64_t size; /* total size when size_known */
	bool size_known;
	uint32_t ec_k, ec_m; /* 0: the datanode's default scheme */
};

/* The fields of a Write's last message besides its data. */
struct rpc_commit {
	const char *etag; /* the ETag the gateway computed */
	const struct rpc_attr *attrs;
	size_t n_attrs;
	const struct rpc_write_cond *cond; /* NULL: no condition */
};

/* The answer of Write and Compose. */
struct rpc_write_result {
	uint64_t size;   /* bytes stored */
	uint32_t crc32c; /* of the whole object */
	const char *etag;
	uint64_t mtime_ns; /* commit time, Unix epoch nanoseconds */
};

struct rpc_read_req {
	const char *bucket, *key;
	uint64_t offset;
	uint64_t length; /* with has_length; else to the end */
	bool has_length;
};

/* Whole-object facts: Stat's answer, the first chunk of a Read, a List entry. */
struct rpc_object_info {
	const char *key;
	uint64_t size;
	const char *etag;
	uint64_t mtime_ns;
	uint32_t crc32c;
	const struct rpc_attr *attrs; /* List entries: none */
	size_t n_attrs;
	uint32_t ec_k, ec_m;
};

/* Stat and Delete, and Compose's parts. */
struct rpc_object_req {
	const char *bucket, *key;
	const char *etag; /* Compose parts only: "" any, else the ETag the part must have */
};

struct rpc_delete_result {
	bool existed;
};

struct rpc_list_req {
	const char *bucket, *prefix;
	const char *start_after; /* keys (and common prefixes) strictly greater */
	uint32_t limit;          /* entries + common prefixes; 0: 1000 */
	const char *delimiter;   /* "": no grouping */
};

struct rpc_list_result {
	const struct rpc_object_info *entries; /* key order; attrs left out */
	size_t n_entries;
	const char *const *common_prefixes;
	size_t n_common_prefixes;
	bool truncated;
	const char *next_start_after; /* pass as start_after to continue */
};

/* A new object made of the parts' contents in order, by reference (no data copied). */
struct rpc_compose_req {
	const char *bucket, *key;
	const struct rpc_object_req *parts; /* a part's bucket "": the target's */
	size_t n_parts;
	bool delete_parts; /* drop the part objects in the same transaction */
	const char *etag;
	const struct rpc_attr *attrs;
	size_t n_attrs;
	const struct rpc_write_cond *cond; /* NULL: none */
};

struct rpc_bucket_req {
	const char *bucket;
};

struct rpc_bucket_info {
	const char *name;
	uint64_t ctime_ns;
};

struct rpc_bucket_list {
	const struct rpc_bucket_info *buckets;
	size_t n_buckets;
};

/* A unary request; the method says which member is meant. */
/* ---- cells: datanode to datanode (cluster mode, docs/cluster.md) */

/* A cell's name on its node. */
struct rpc_cell_id {
	uint64_t extent; /* never 0 */
	uint32_t group;
	uint32_t cell; /* 0 .. k + m - 1 */
};

/* The first message of a WriteCell: the cell, its extent's layout, the object it is of. */
struct rpc_cell_open {
	struct rpc_cell_id id;
	uint64_t length; /* bytes of the cell: the stream carries exactly these */
	uint32_t ec_k, ec_m;
	uint32_t cell_size, stripes_per_group;
	const char *bucket, *key; /* for the pending-cell collector */
};

/* The answer of WriteCell: the cell is durable and recorded pending. */
struct rpc_cell_result {
	uint64_t length;
	uint32_t crc32c; /* of the whole cell */
};

struct rpc_cell_read_req {
	struct rpc_cell_id id;
	uint64_t offset;
	uint64_t length; /* with has_length; else to the cell's end */
	bool has_length;
};

/* DeleteCells and CommitCells: the cells, handled in order. */
struct rpc_cells_req {
	const struct rpc_cell_id *cells;
	size_t n_cells;
};

struct rpc_cells_result {
	uint32_t count; /* DeleteCells: how many existed; CommitCells: how many committed */
};

union rpc_unary_req {
	struct rpc_object_req object;   /* RPC_STAT, RPC_DELETE */
	struct rpc_list_req list;       /* RPC_LIST */
	struct rpc_compose_req compose; /* RPC_COMPOSE */
	struct rpc_bucket_req bucket;   /* RPC_CREATE_BUCKET, RPC_DELETE_BUCKET, RPC_HEAD_BUCKET */
	struct rpc_cells_req cells;     /* RPC_DELETE_CELLS, RPC_COMMIT_CELLS */
};                                      /* RPC_LIST_BUCKETS: no fields */

/* A unary response as a client receives it; `method` says which member is set. */
struct rpc_unary_resp {
	enum rpc_method method;
	union {
		struct rpc_object_info info;    /* RPC_STAT */
		struct rpc_delete_result del;   /* RPC_DELETE */
		struct rpc_list_result list;    /* RPC_LIST */
		struct rpc_write_result write;  /* RPC_COMPOSE */
		struct rpc_bucket_info bucket;  /* RPC_CREATE_BUCKET, RPC_HEAD_BUCKET */
		struct rpc_bucket_list buckets; /* RPC_LIST_BUCKETS */
		struct rpc_cells_result cells;  /* RPC_DELETE_CELLS, RPC_COMMIT_CELLS */
	};                                      /* RPC_DELETE_BUCKET: no fields */
	struct rpc_arena_blk *mem;              /* private: holds every string and array above */
};

/* Free what a response holds and zero it. A zeroed struct (or NULL) is a no-op. */
void rpc_unary_resp_fini(struct rpc_unary_resp *resp);

/* ------------------------------------------------------------------ marshallers */

enum rpc_marshaller { RPC_MARSHAL_ZEROCOPY, RPC_MARSHAL_COPY };

/* "zerocopy" / "copy" -> enum; returns 0 or -EINVAL. */
int rpc_marshaller_parse(const char *name, enum rpc_marshaller *out);

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

/* ------------------------------------------------------------------ client */

struct rpc_client;
struct rpc_cwrite; /* a client Write stream */
struct rpc_cread;  /* a client Read stream */

struct rpc_client_opts {
	const char *target;  /* "127.0.0.1:7481" */
	unsigned cq_threads; /* 0: 1 */
	size_t max_message;  /* 0: RPC_DEFAULT_MAX_MESSAGE (+ header room) */
	size_t max_inflight; /* per Write stream; 0: 4 MiB */
	unsigned channels;   /* TCP connections, calls spread round-robin; 0: 1, max 16 */
	/* HTTP/2 receive window per stream, fixed (BDP probing off): what a paused Read
	 * stream can still buffer in gRPC. 0: gRPC's default, which BDP probing grows to
	 * tens of MiB per stream. */
	size_t stream_window;
	/* mTLS (rpc_tls.h); plaintext only with tls.insecure. Ignored for a "unix:PATH"
	 * target, which gets local credentials (rpc_unix_is_target). */
	struct rpc_tls tls;
	/* Every unary call ends with DEADLINE_EXCEEDED this long after it started; 0: none.
	 * Streams never get one: a long Write or Read (a slow client's) is not stuck. */
	unsigned unary_deadline_ms;
	/* Streams time out on progress instead: a Write or Read whose peer owes it something
	 * (to take a queued message, i.e. reopen its flow-control window; a message; the
	 * reply or status) and gives nothing for this long is cancelled, and its `done` gets
	 * UNAVAILABLE, err ZC_E(ZC_UNAVAILABLE), "no progress from the peer for N ms". Each
	 * message taken or received restarts the clock, so a slow but moving stream is never
	 * cut; time the caller spends (between its sends, a Read paused by its chunk callback)
	 * never counts. After a Write's commit is taken the reply is the next progress: the
	 * timeout must cover what the peer needs to drain the bytes its windows let us send
	 * ahead (up to MiBs) and to commit. The default of every stream of the client (rpc_cwrite_progress_timeout
	 * and rpc_cread_progress_timeout set one stream's); 0: none. A stream is cut between
	 * its timeout and about 100 ms later (one watchdog thread per client). */
	unsigned progress_timeout_ms;
};

/* Connect lazily to target (calls grpc_init). Returns 0 and *out, -EINVAL / -ENOMEM, or
 * what rpc_tls_pem_load returns for bad TLS settings (logged with the reason). With TLS
 * the server's certificate must name target's host (DNS or IP subjectAltName). */
int rpc_client_create(const struct rpc_client_opts *opts, struct rpc_client **out);
/* Cancel nothing: every stream must be done before. Joins threads. NULL: no-op. */
void rpc_client_destroy(struct rpc_client *c);
/*
 * Wait until every channel of c is connected (TCP and TLS), at most timeout_ms: 0, or
 * ZC_E(ZC_UNAVAILABLE) when a channel failed to connect (or waits to reconnect after a
 * failure) or the time passed. Connected channels answer at once. For a caller that has
 * somewhere else to go (the gateway trying the next coordinator before it streams a
 * byte). Blocks; never from a client callback.
 */
int rpc_client_connect(struct rpc_client *c, unsigned timeout_ms);
/*
 * At program end, after every rpc object (client, server) is destroyed: wait until gRPC
 * has finished its own clean-up, at most timeout_ms. A channel destroyed while it still
 * reconnects (to a node that is down) lets go of the library later, on a gRPC thread, and
 * exit() must not run OpenSSL's clean-up under that thread.
 */
void rpc_shutdown_wait(unsigned timeout_ms);

/*
 * Write stream callbacks (client CQ thread).
 *  writable: in-flight bytes fell below max_inflight after a send returned -EAGAIN.
 *  done:     the call is over; st has the status, res the result when OK (borrowed for
 *            the callback). Called exactly once. Afterwards rpc_cwrite_destroy().
 */
struct rpc_cwrite_cbs {
	void (*writable)(void *arg, struct rpc_cwrite *w);
	void (*done)(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
	             const struct rpc_write_result *res);
};

/* Start a Write call with this open (borrowed; packed at once). Returns 0 and *out. */
int rpc_cwrite_open(struct rpc_client *c, const struct rpc_write_open *open,
                    const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out);
/*
 * Start a WriteCell call (open borrowed; packed at once). The stream is then driven like a
 * Write, and `done` gets the CellResult as res->size (the cell's length) and res->crc32c
 * (of the whole cell; etag NULL, mtime_ns 0): rpc_cwrite_send for the cell's bytes, by reference
 * (a coordinator forwards its gRPC receive slices as they are), and rpc_cwrite_commit
 * with commit NULL to end it. Returns 0 and *out, -EINVAL, -ENOMEM, -EIO.
 */
int rpc_cwrite_open_cell(struct rpc_client *c, const struct rpc_cell_open *open,
                         const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out);
/*
 * Queue one WriteChunk (CellChunk on a WriteCell stream) carrying segs (the next bytes of the
 * object; the client tracks the offset and computes the CRC32C). The bytes are not copied: each
 * segment's ref is taken and put once gRPC is done with it. Returns 0; -EAGAIN when in-flight bytes
 * are at max_inflight (nothing queued: wait for `writable`); -EINVAL when the message would exceed
 * max_message; -ECANCELED after commit or cancel, or once the call has failed (its status then
 * arrives through `done`). Any thread.
 */
int rpc_cwrite_send(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs);
/* The same, with crc32c the CRC32C of the segments' bytes, computed by a caller that read
 * them anyway (the gateway, in its one pass over a span's digests): rpc reads nothing. */
int rpc_cwrite_send_crc(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
                        uint32_t crc32c);
/*
 * Queue the last WriteChunk (commit = true, optional final data, and commit's etag,
 * attrs and condition; commit borrowed, NULL: none of them) and half-close. Never
 * -EAGAIN (the cap is not applied). A WriteCell stream takes commit NULL (-EINVAL
 * otherwise). Any thread.
 */
int rpc_cwrite_commit(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
                      const struct rpc_commit *commit);
/* Cancel the call; `done` follows with CANCELLED (unless already done). Any thread. */
void rpc_cwrite_cancel(struct rpc_cwrite *w);
/* Bytes queued and not yet handed to the transport. */
size_t rpc_cwrite_inflight(const struct rpc_cwrite *w);
/* Set this stream's progress timeout (rpc_client_opts.progress_timeout_ms; 0: none), in
 * place of the client's default, from now on. Returns 0 or -EAGAIN (no thread for the
 * watchdog: the stream is then not watched). Any thread, before rpc_cwrite_destroy. */
int rpc_cwrite_progress_timeout(struct rpc_cwrite *w, unsigned timeout_ms);
/* Free a stream after its `done` callback ran (may be called inside `done`). */
void rpc_cwrite_destroy(struct rpc_cwrite *w);

#ifdef RPC_FAULTS
/*
 * Test builds only (RPC_FAULTS: every meson buildtype but release): faults injected into
 * this client's WriteCell streams, as a bad link to a peer would cause them, so that a
 * coordinator's handling of them can be tested with real calls. Message numbers count
 * from 1 and include the first (the open's) and the commit.
 */
struct rpc_fault {
	unsigned delay_ms;  /* sleep this long before each message goes to gRPC (on the thread
	                     * that hands it over: the sender's or a client CQ thread) */
	unsigned drop_msg;  /* this message is never sent, the stream goes on: the peer sees an
	                     * offset gap (or, for the commit, a stream that never ends); 0 none */
	unsigned reset_msg; /* instead of this message the call is cancelled, as a reset
	                     * connection would end it; 0 none */
};
/* Apply *f (copied; NULL: none) to the WriteCell streams opened from now on. Any thread. */
void rpc_client_fault(struct rpc_client *c, const struct rpc_fault *f);
#endif

/*
 * Read stream callbacks (client CQ thread).
 *  chunk: one ReadChunk; segs point into gRPC's receive slices (zero-copy), borrowed for
 *         the callback unless zc_ref_get. info is set on the first chunk. The CRC was
 *         verified. Return 0 to continue or 1 to pause until rpc_cread_resume() (any
 *         thread; a resume that comes while the callback still runs cancels its pause).
 *  done:  exactly once; afterwards rpc_cread_destroy().
 */
struct rpc_cread_cbs {
	int (*chunk)(void *arg, struct rpc_cread *r, const struct rpc_object_info *info,
	             uint64_t offset, const struct zc_seg *segs, size_t n_segs, size_t len);
	void (*done)(void *arg, struct rpc_cread *r, const struct rpc_status *st);
};

/* Start a Read call (req borrowed; packed at once). Returns 0 and *out. */
int rpc_cread_open(struct rpc_client *c, const struct rpc_read_req *req,
                   const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out);
/* Start a ReadCell call: the same callbacks, info always NULL. */
int rpc_cread_open_cell(struct rpc_client *c, const struct rpc_cell_read_req *req,
                        const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out);
void rpc_cread_resume(struct rpc_cread *r);
void rpc_cread_cancel(struct rpc_cread *r);
/* As rpc_cwrite_progress_timeout, for a Read stream (a paused one is never cut). */
int rpc_cread_progress_timeout(struct rpc_cread *r, unsigned timeout_ms);
void rpc_cread_destroy(struct rpc_cread *r);

/*
 * Unary call of method m with its request (the union member m names; NULL for
 * ListBuckets), borrowed and packed at once. cb runs once on a client thread with the
 * status and, when OK, the response (borrowed for the callback; NULL otherwise).
 * Returns 0, or -EINVAL (not a unary method, no cb) / -ENOMEM / -EIO with no callback.
 */
typedef void (*rpc_unary_cb)(void *arg, const struct rpc_status *st,
                             const struct rpc_unary_resp *resp);
int rpc_client_call_async(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
                          rpc_unary_cb cb, void *arg);

/*
 * Blocking unary call (never from a client callback). On OK *resp is the response,
 * owned by the caller until rpc_unary_resp_fini(resp); otherwise *resp is zeroed
 * (fini is still safe). Returns 0 when the status is OK, else its error
 * (struct rpc_status) (st, optional, has the details).
 */
int rpc_client_call(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
                    struct rpc_unary_resp *resp, struct rpc_status *st);

/*
 * Blocking Write of one buffer (tools, tests): open, chunks of `chunk` bytes, commit.
 * buf is borrowed until return (it waits until gRPC released every slice). res
 * (optional) receives size, crc32c and mtime_ns (etag NULL: nothing outlives the call). Returns 0
 * or the -errno of the status (st has the details).
 */
int rpc_client_put(struct rpc_client *c, const struct rpc_write_open *open, const void *buf,
                   size_t len, size_t chunk, struct rpc_write_result *res, struct rpc_status *st);

#endif
