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
 *  - a server (rpc_server.h): registered methods, one completion queue served by several
 *    threads, per-call handlers that may pause receiving and finish from any thread.
 *  - a client (rpc_client.h): asynchronous Write streams that send the caller's memory
 *    without copying, with bounded in-flight bytes; Read streams delivering zero-copy
 *    segments; async and blocking unary calls.
 * This header holds what both sides share (limits, status, messages, copy accounting);
 * a daemon includes rpc_server.h or rpc_client.h, which include it.
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

/* DeleteCells and CommitCells: the cells, handled in order. touch (CommitCells only):
 * refresh the pending cells' grace instead of committing them. */
struct rpc_cells_req {
	const struct rpc_cell_id *cells;
	size_t n_cells;
	bool touch;
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

#endif
