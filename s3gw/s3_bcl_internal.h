/*
 * s3_bcl: struct s3_backend in cluster mode (docs/cluster.md): records, buckets and
 * listings in etcd (cl_meta.h), membership from cl_members.h, PUT streamed to a
 * coordinator datanode, GET read cell by cell (ReadCell) from the nodes the record names,
 * rebuilt from any k cells with ec/ when a cell is missing, bad or unreachable.
 *
 * Threads: every call comes from a server worker and may block on etcd or a datanode; the
 * rpc clients' completion-queue threads only queue segments and wake the worker. One
 * rpc client per node address, made on first use and kept until destroy.
 *
 * Files (private to libzest_s3_rpc):
 *   s3_bcl.c       create/destroy, node clients, the codec cache, attrs, metrics
 *   s3_bcl_plan.c  pure: which cell bytes a range needs, which cells rebuild one, the
 *                  rebuild itself over a caller's reader (unit-tested against ec/)
 *   s3_bcl_cread.c one ReadCell stream with a bounded queue; blocking reads of cell ranges
 *   s3_bcl_get.c   stat, get_open/get_next/get_close (s3_backend_get blocks over them)
 *   s3_bcl_put.c   the PUT stream: straight to the coordinator, or in pieces (unknown length)
 *   s3_bcl_meta.c  the coordinator's Write, del, list, compose, buckets
 */
#ifndef ZEST_S3_BCL_INTERNAL_H
#define ZEST_S3_BCL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "ec.h"
#include "rpc_client.h"
#include "cl_meta.h"
#include "cl_members.h"
#include "s3_place_internal.h"
#include "s3_util_internal.h"

/* The etcd deadline of one S3 request: how long it waits for an etcd that does not answer
 * (s3_bcl_etcd_ms). */
#define BCL_TIMEOUT_MS 5000
/* Bytes of cell reads a GET stream keeps open ahead of its consumer. */
#define BCL_PREFETCH_BYTES (2u << 20)
/* Queued bytes that pause one ReadCell stream (a piece longer than the prefetch). */
#define BCL_PAUSE_BYTES  (1u << 20)
#define BCL_RESUME_BYTES (512u << 10)
/* Bytes of every cell a rebuild step holds at most: (k + m) x window. */
#define BCL_REBUILD_BYTES (2u << 20)
#define BCL_CONNECT_MS    3000 /* a coordinator that does not connect in this: the next */
/* A ReadCell stream that delivers nothing this long (no chunk since it was opened or
 * resumed) fails as an unreachable node does: a hung node (SIGSTOP, a frozen disk) keeps
 * its connections open and would otherwise hold the GET for ever. At most the gateway's
 * stream timeout (S3_STREAM_TIMEOUT_MS, --stream-timeout). */
#define BCL_READ_PROGRESS_MS 5000
/* Deadline of each unary call to a node (DeleteCells). */
#define BCL_CALL_MS 5000

struct bcl_node {
	char *addr;
	struct rpc_client *cl;
};

struct bcl {
	struct s3_backend be;
	struct cl_etcd *etcd;
	struct cl_members *mem;
	struct rpc_tls tls;
	pthread_mutex_t mu; /* nodes, codecs */
	struct bcl_node *nodes;
	size_t nnodes, capnodes;
	struct ec_codec *codecs[CL_REC_MAX_CELLS + 1][CL_REC_MAX_CELLS + 1]; /* [k][m] */
	atomic_ulong degraded_reads;
	atomic_ulong bad_records; /* records met that do not decode (zest_s3_bad_records_total) */
	atomic_ulong etcd_unanswered; /* requests whose etcd deadline passed */
	atomic_ulong unreadable_gets; /* GETs refused before the head: too few cells live */
	unsigned stream_timeout_ms; /* progress timeout of the nodes' streams (a PUT's) */
	unsigned read_timeout_ms;   /* of ReadCell streams (BCL_READ_PROGRESS_MS at most) */
	/* --local-node NAME=unix:PATH: the datanode on this host, reached over its Unix
	 * socket and its PUTs' first coordinator; NULL: none */
	char *local_name, *local_target;
};

/* ---- s3_bcl.c */
/*
 * The request's etcd deadline: an S3 request waits for an etcd that does not answer once,
 * BCL_TIMEOUT_MS, never once per call. ms for the next etcd call: BCL_TIMEOUT_MS, or 0
 * once one of the request's calls went unanswered (the call is not made: the caller
 * returns ZC_E(ZC_UNAVAILABLE)). A call etcd answers leaves the next its whole deadline, so
 * a request of many quick calls (a Complete of many parts) is never cut. Per server
 * thread, keyed by s3_rq_current.
 */
unsigned s3_bcl_etcd_ms(struct bcl *b);
/* After an etcd call: rc itself, or for etcd not answering (deadline, no member, no
 * leader) ZC_E(ZC_UNAVAILABLE), S3 503 SlowDown, with the request's deadline spent and
 * counted once in zest_s3_etcd_unanswered_total. */
int s3_bcl_etcd_end(struct bcl *b, int rc);

/* The client of node address addr (made on first use). NULL: -ENOMEM. */
struct rpc_client *s3_bcl_client(struct bcl *b, const char *addr);
/* The client of node `name` in the view v, NULL when the node is not live. */
struct rpc_client *s3_bcl_node_client(struct bcl *b, const struct cl_members_view *v,
                                      const char *name);
/* The client of live node n: over the local link when n is the local node. */
struct rpc_client *s3_bcl_live_client(struct bcl *b, const struct cl_rec_node *n);
struct ec_codec *s3_bcl_codec(struct bcl *b, unsigned k, unsigned m);
/* "name:value\n" text <-> record attrs. to: *out (free() it, pointing into *buf, free() it
 * too). from: the text into info->attrs. */
int s3_bcl_attrs_to(const char *s, size_t len, struct cl_rec_attr **out, size_t *n, char **buf);
void s3_bcl_info_from(const struct cl_rec_object *o, const char *key, struct s3_obj_info *out);
/* DeleteCells of every cell o names, to the live nodes holding them; best effort. */
void s3_bcl_delete_cells(struct bcl *b, const struct cl_rec_object *o);
void s3_bcl_metrics(void *ctx, struct s3_buf *buf);

/* ---- s3_bcl_plan.c: the layout of one extent (as the datanode's dn_geom) */
struct s3_bcl_geom {
	uint64_t size;
	unsigned k, m;
	uint64_t cell;
	unsigned spg; /* stripes per group */
};

/* The bytes of one data cell that one stretch of a range needs. */
struct s3_bcl_piece {
	uint32_t group, stripe;
	unsigned cell; /* data cell 0..k-1 */
	uint64_t x;    /* offset in the stripe's cell (0..cell) */
	uint64_t off;  /* offset in the cell file: stripe * cell + x */
	uint64_t len;  /* bytes, within the cell */
};

void s3_bcl_geom_of(const struct cl_rec_extent *e, struct s3_bcl_geom *g);
/* Bytes of cell c (data or parity) in stripe s of group (0 past the end). A parity cell
 * counts as long as the stripe's longest (first) data cell: past it the parity is zero,
 * and a datanode stores at least that much of it. */
uint64_t s3_bcl_cell_len(const struct s3_bcl_geom *g, uint32_t group, uint32_t stripe, unsigned c);
/* The piece holding extent offset at (< g->size), cut at end (> at). */
void s3_bcl_piece_at(const struct s3_bcl_geom *g, uint64_t at, uint64_t end,
                     struct s3_bcl_piece *p);

/*
 * The k cells that rebuild [x, y) of cell `target` in a stripe: data cells first, then
 * parity, never one in `unavail` (bit i: cell i cannot be read), and never target. A data
 * cell with no bytes at x or later is all zeros there and counts without a read, whatever
 * its node. 0 with *src, or -EIO (fewer than k cells left).
 */
int s3_bcl_sources(const struct s3_bcl_geom *g, uint32_t group, uint32_t stripe, unsigned target,
                   uint64_t x, uint32_t unavail, uint32_t *src);

/* One read a rebuild needs: bytes [off, off + len) of cell `cell` into buf. The reader
 * sets res (0, or < 0: that cell cannot be read). */
struct s3_bcl_cread {
	unsigned cell;
	uint64_t off, len;
	uint8_t *buf;
	int res;
};
typedef void (*s3_bcl_read_fn)(void *arg, struct s3_bcl_cread *r, size_t n);

/* Window (bytes of each cell per rebuild step) for k + m cells. */
size_t s3_bcl_window(unsigned k, unsigned m);

/*
 * Rebuild [x, y) (y - x <= s3_bcl_window) of data cell target in stripe/group into out:
 * pick sources, read them (all of a step at once through read), decode with ec; a source
 * that fails is added to *unavail and the step runs again with others. scratch holds
 * (k + m) x (y - x) bytes. 0, -EIO (too few cells), -ENOMEM, or the codec's error.
 */
int s3_bcl_rebuild(struct ec_codec *codec, const struct s3_bcl_geom *g, uint32_t group,
                   uint32_t stripe, unsigned target, uint64_t x, uint64_t y, uint32_t *unavail,
                   s3_bcl_read_fn read, void *arg, uint8_t *scratch, uint8_t *out);

/* ---- s3_bcl_cread.c: one ReadCell stream, its segments queued (each with a ref) */
struct bcl_crd;
/* timeout_ms: the stream's progress timeout (rpc_cread_progress_timeout; 0:
 * BCL_READ_PROGRESS_MS). */
int s3_bcl_crd_open(struct rpc_client *c, uint64_t extent, uint32_t group, unsigned cell,
                    uint64_t off, uint64_t len, unsigned timeout_ms, struct bcl_crd **out);
/* The next segment (ref taken for the caller): 1; 0 when the stream ended OK with every
 * byte; < 0 its error (a short stream: -EBADMSG; nothing from the node for the progress
 * timeout: ZC_E(ZC_UNAVAILABLE), the stream cancelled by rpc). Waits on the node (as long
 * as it moves), never on a client. */
int s3_bcl_crd_next(struct bcl_crd *r, struct zc_seg *seg);
void s3_bcl_crd_close(struct bcl_crd *r);
/* Read the ranges at once (one ReadCell each, in parallel), contiguous into their bufs.
 * cl[i]: the node of r[i], NULL: not live (res -EHOSTUNREACH). */
void s3_bcl_read_ranges(struct rpc_client *const *cl, uint64_t extent, uint32_t group,
                        struct s3_bcl_cread *r, size_t n, unsigned timeout_ms);

/* ---- s3_bcl_get.c */
/* bucket/key's record, linearizable, within the request's etcd deadline: 0 with *o (fini
 * it), ZC_E(ZC_NO_KEY / ZC_NO_BUCKET), ZC_E(ZC_UNAVAILABLE) (etcd away), ZC_E(ZC_INTERNAL)
 * (a record that does not decode: counted in zest_s3_bad_records_total). */
int s3_bcl_record(struct bcl *b, const char *bucket, const char *key, struct cl_rec_object *o);
int s3_bcl_stat(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out);
int s3_bcl_get_open(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
                    bool has_len, struct s3_obj_info *info, void **stream);
int s3_bcl_get_next(void *stream, struct zc_seg *seg);
void s3_bcl_get_close(void *stream);

/* ---- s3_bcl_put.c: the backend's PUT stream (a body of unknown length in pieces) */
int s3_bcl_put_open(void *ctx, const char *bucket, const char *key, uint64_t size, bool size_known,
                    void **stream);
int s3_bcl_put_write(void *stream, const struct zc_seg *seg);
int s3_bcl_put_commit(void *stream, const char *etag, const char *attrs, size_t attrs_len,
                      const struct s3_cond *cond, struct s3_obj_info *out);
void s3_bcl_put_abort(void *stream);

/* ---- s3_bcl_meta.c */
/* A coordinator's Write of size bytes: s3_brpc_put.c's stream in *stream. */
int s3_bcl_put_direct(struct bcl *b, const char *bucket, const char *key, uint64_t size,
                      void **stream);
/* s3_bcl_compose of parts that are all of pbucket under prefix (ends in '/'), with one
 * etcd Txn whatever their number; every record under the prefix goes. */
int s3_bcl_compose_prefix(struct bcl *b, const char *bucket, const char *key, const char *pbucket,
                          const char *prefix, const struct s3_objref *parts, size_t nparts,
                          const char *etag, const char *attrs, size_t attrs_len,
                          const struct s3_cond *cond, struct s3_obj_info *out);
int s3_bcl_del(void *ctx, const char *bucket, const char *key, bool *existed);
int s3_bcl_list(void *ctx, const char *bucket, const char *prefix, const char *start_after,
                const char *delimiter, unsigned limit, struct s3_list_result *out);
int s3_bcl_compose(void *ctx, const char *bucket, const char *key, const struct s3_objref *parts,
                   size_t nparts, bool delete_parts, const char *etag, const char *attrs,
                   size_t attrs_len, const struct s3_cond *cond, struct s3_obj_info *out);
int s3_bcl_bucket_create(void *ctx, const char *bucket);
int s3_bcl_bucket_delete(void *ctx, const char *bucket);
int s3_bcl_bucket_head(void *ctx, const char *bucket, struct s3_bucket_info *out);
int s3_bcl_bucket_list(void *ctx, struct s3_bucket_info *out, size_t cap);

#endif
