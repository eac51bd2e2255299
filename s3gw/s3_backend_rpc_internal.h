/*
 * s3_backend_rpc: struct s3_backend over the zest.Datanode rpc client, one client per
 * --datanode. Calls come from the server's worker threads and block; the rpc client's
 * completion-queue thread only moves state and wakes the waiting worker.
 *
 * Placement: every object call goes to s3_place(bucket, key) over the node list (the
 * multipart parts of the reserved bucket too: their upload id carries the target's
 * hash). Bucket calls go to every node; listings are merged with s3_list_merge().
 *
 * Zero copy: put_write hands the caller's segment (a span of the connection's read
 * buffer and its reference) to rpc_cwrite_send, which takes its own reference until gRPC
 * has written the bytes. When the stream's in-flight window is full the worker waits
 * for `writable`, so it stops reading the socket: that is the backpressure, and memory
 * per upload is bounded by the window (rpc_client_opts.max_inflight). On GET the
 * received segments (gRPC receive slices) are queued with a reference to the worker,
 * which writes them to the client; the read is paused while the queue is over a bound.
 *
 * Errors: a call's outcome comes back as the datanode's zest error code (rpc_status.err,
 * from the "zest-err" trailer; for a status without one, what its gRPC code stands for),
 * returned as ZC_E(code); s3_err_from_errno() maps it to S3 in one table. A datanode that
 * cannot be reached is ZC_UNAVAILABLE (503 SlowDown, which clients retry).
 *
 * s3_backend_rpc_internal.h: what its files share. Private to libzest_s3_rpc.
 *   s3_backend_rpc.c  errors, attributes, placement, create and destroy
 *   s3_brpc_put.c     the PUT stream over one node's Write call
 *   s3_brpc_get.c     the GET stream over one node's Read call, pulled (s3_backend_get
 *                     blocks over it)
 *   s3_brpc_segq.c    the queue of a read stream's received segments (the cluster
 *                     backend's ReadCell queues with it too)
 *   s3_brpc_meta.c    the other object calls and the buckets: stat, delete, compose, the
 *                     listing merged over every node, bucket calls sent to every node
 */
#ifndef ZEST_S3_BACKEND_RPC_INTERNAL_H
#define ZEST_S3_BACKEND_RPC_INTERNAL_H

#include "rpc_client.h"
#include "s3_place_internal.h"
#include "s3_util_internal.h"

/*
 * The backend calls, one by one, on rpc/zest.proto:
 *   put_open/put_write/put_commit/put_abort  one Write stream: WriteOpen{bucket,key,size,
 *       size_known} in the first WriteChunk, each segment as data (+ its CRC32C) at the
 *       running offset, commit with etag and attrs ("name:value\n" lines -> Attr), abort by
 *       cancelling the call. A segment kept past put_write is held with zc_ref_get().
 *   get -> Read (info from the first ReadChunk, then data in order); stat -> Stat;
 *   del -> Delete; list -> List on every datanode, merged with s3_list_merge();
 *   compose -> Compose (delete_parts = true for multipart Complete; one part kept for a
 *       server-side copy); a condition (struct s3_cond) goes in the commit chunk's and
 *       ComposeRequest's WriteCondition;
 *   bucket_* -> CreateBucket/DeleteBucket/HeadBucket/ListBuckets on every datanode.
 * Placement: s3_place() over the --datanode list, for every call including those on
 * S3_RESERVED_BUCKET: it places multipart parts ("p/<upload-id>/...") with the TARGET
 * object (the upload id carries its hash), so Compose finds every part on one datanode.
 * Errors: a datanode's error comes back as the zest code it sent (ZC_E(code), zc_err.h),
 * never parsed out of a status message; s3_err_from_errno() maps it to S3.
 */

/* Queued GET bytes that pause the datanode stream (no more RECV_MESSAGE: HTTP/2 flow
 * control then stops the datanode), and the level that resumes it. With one ~1 MiB
 * ReadChunk arriving after the pause, a stream buffers at most ~3 MiB. */
#define GET_PAUSE_BYTES  (2u << 20)
#define GET_RESUME_BYTES (1u << 20)
/* What gRPC itself may hold of a paused stream: a fixed HTTP/2 window (BDP probing grew
 * it to ~35 MiB per stream: 32 stalled GETs took the gateway to 1.2 GiB RSS). */
#define GET_STREAM_WINDOW (2u << 20)
#define MAX_ATTRS         128

struct rbe {
	struct s3_backend be;
	unsigned n;
	char **names;
	struct rpc_client **cl;
};

/* Object attributes as rpc Attr entries over one parsed copy of the text. */
struct attrs {
	char *buf;
	struct rpc_attr a[MAX_ATTRS];
	size_t n;
};

/* ---- s3_brpc_put.c */
int s3_brpc_put_open(void *ctx, const char *bucket, const char *key, uint64_t size, bool size_known,
                     void **stream);
/* The same stream on client c (the cluster backend's coordinator). */
int s3_brpc_put_open_on(struct rpc_client *c, const char *bucket, const char *key, uint64_t size,
                        bool size_known, void **stream);
int s3_brpc_put_write(void *stream, const struct zc_seg *seg);
int s3_brpc_put_write_crc(void *stream, const struct zc_seg *seg, uint32_t crc32c);
int s3_brpc_put_commit(void *stream, const char *etag, const char *attrs, size_t attrs_len,
                       const struct s3_cond *cond, struct s3_obj_info *out);
void s3_brpc_put_abort(void *stream);
/* ---- s3_brpc_segq.c */

/* The received segments of one read stream, oldest first, each holding a reference;
 * guarded by its stream's lock (filled on the completion-queue thread, drained by the
 * worker). Zero-initialised is empty. */
struct s3_segq {
	struct zc_seg *q;
	size_t head, n, cap;
};

/* Append segs, a reference taken on each: 0, or -ENOMEM with nothing queued. */
int s3_segq_push(struct s3_segq *sq, const struct zc_seg *segs, size_t n);
/* The oldest segment into *out, its reference passing to the caller; false when empty. */
bool s3_segq_pop(struct s3_segq *sq, struct zc_seg *out);
/* Put every queued reference and free the storage; the queue is empty again. */
void s3_segq_fini(struct s3_segq *sq);

/* ---- s3_brpc_get.c */
void s3_brpc_get_close(void *stream);
int s3_brpc_get_open(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
                     bool has_len, struct s3_obj_info *info, void **stream);
int s3_brpc_get_next(void *stream, struct zc_seg *seg);
/* ---- s3_brpc_meta.c */
int s3_brpc_stat(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out);
int s3_brpc_del(void *ctx, const char *bucket, const char *key, bool *existed);
int s3_brpc_list(void *ctx, const char *bucket, const char *prefix, const char *start_after,
                 const char *delimiter, unsigned limit, struct s3_list_result *out);
int s3_brpc_compose(void *ctx, const char *bucket, const char *key, const struct s3_objref *parts,
                    size_t nparts, bool delete_parts, const char *etag, const char *attrs,
                    size_t attrs_len, const struct s3_cond *cond, struct s3_obj_info *out);
int s3_brpc_bucket_create(void *ctx, const char *bucket);
int s3_brpc_bucket_delete(void *ctx, const char *bucket);
int s3_brpc_bucket_head(void *ctx, const char *bucket, struct s3_bucket_info *out);
int s3_brpc_bucket_list(void *ctx, struct s3_bucket_info *out, size_t cap);
/* ---- s3_backend_rpc.c */
struct rpc_client *s3_brpc_place(struct rbe *b, const char *bucket, const char *key);
int s3_brpc_attrs_parse(struct attrs *at, const char *s, size_t len);
void s3_brpc_info_from_rpc(const struct rpc_object_info *in, const char *key,
                           struct s3_obj_info *out);
const struct rpc_write_cond *s3_brpc_cond_to_rpc(const struct s3_cond *c,
                                                 struct rpc_write_cond *rc);

#endif
