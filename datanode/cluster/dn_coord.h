/*
 * dn_coord: the coordinator of cluster writes (docs/cluster.md, "Write and commit"). A
 * datanode started with --cluster serves every Write stream this way: each block group of
 * the object is placed over the node's live membership view (zc_place_group), encoded
 * RS(k,m) as in single-node mode, its own cells written to the local cell store
 * (dn_cell_write_*), every other cell forwarded to its slot's node over a WriteCell stream
 * by reference to the gRPC receive slices (parity from the coordinator's own buffer pool),
 * and the object record committed in etcd with one Txn (cl_meta_commit) once every group
 * has its write quorum of durable cells. Part of the daemon, not the engine.
 *
 * Threads: one write (struct dn_coord_write) belongs to one thread at a time (a dn-write
 * worker of the binding); begin, data, commit, end and abort block on the peers' window,
 * their acknowledgements and etcd, each with a deadline. The peer streams' callbacks run
 * on the rpc clients' CQ threads, local cells' on the store's commit thread; they only
 * mark state and wake the write's thread. dn_coord_metrics from the metrics thread.
 *
 * Errors (>= 0 on success), each with a message for people in msg:
 *   ZC_E(ZC_NO_QUORUM)    a group cannot reach the write quorum (peers failed), or etcd
 *                         has no quorum; the gateway answers 503
 *   ZC_E(ZC_UNAVAILABLE)  no live nodes, or etcd's deadline passed (the ambiguous case:
 *                         the cells stay pending for the collector, dn_cgc.h)
 *   ZC_E(ZC_NO_BUCKET), ZC_E(ZC_PRECONDITION), ZC_E(ZC_NO_KEY)  from the commit Txn
 *   ZC_E(ZC_INVALID)      a Write the cluster cannot take (size not known up front)
 *   -EBADMSG              a chunk's CRC32C does not match its bytes
 *   -EAGAIN               no parity buffer within the wait (busy)
 */
#ifndef ZEST_DN_COORD_H
#define ZEST_DN_COORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dn.h"
#include "dn_cells.h"
#include "rpc.h"

struct dn_coord;
struct dn_coord_write;
struct cl_etcd;
struct cl_members;

struct dn_coord_opts {
	struct dn_store *store;     /* the local cell store (borrowed) */
	struct cl_etcd *etcd;       /* borrowed: outlives the coordinator */
	struct cl_members *members; /* the live view (borrowed) */
	const char *node;           /* this node's name in the view (copied) */
	unsigned k, m;              /* scheme of a Write that names none; 0: 4+2 */
	uint32_t cell_size;         /* 0: 1 MiB */
	unsigned stripes_per_group; /* 0: 16 */
	unsigned write_quorum;      /* durable cells per group; 0: k + 1 */
	uint64_t gc_grace_ns;       /* the collector's grace: not_after_ns = first cell + half */
	struct rpc_tls tls;         /* peers: mTLS with the node's own files, or insecure */
	unsigned peer_timeout_ms;   /* a peer silent this long fails its cells; 0: 10 s */
	size_t peer_window;         /* bytes in flight per peer stream; 0: 4 MiB */
	unsigned parity_bufs;       /* cell-sized parity buffers in the pool; 0: 64 MiB of
	                             * them, at most 64, at least 4 m */
	unsigned etcd_timeout_ms;   /* the commit Txn's deadline; 0: cl_meta's (5 s) */
};

/* Start the coordinator (its parity pool). Returns 0 and *out, -EINVAL, -ENOMEM. */
int dn_coord_create(const struct dn_coord_opts *o, struct dn_coord **out);
/* Wait for the post-commit calls still in flight (bounded by their deadline), close the
 * peer clients, free. Every write must have ended. NULL: no-op. */
void dn_coord_destroy(struct dn_coord *c);

/* zest_cluster_forwarded_bytes_total{peer}, zest_cluster_peer_write_seconds,
 * zest_cluster_etcd_txn_seconds, zest_cluster_fault_tolerance_nodes. */
void dn_coord_metrics(struct dn_coord *c, FILE *out);

/*
 * Begin a write of bucket/key, size bytes (size_known must be true: the cells' lengths
 * go in their WriteCell opens), scheme k+m (0: the default). Takes a reference to the
 * current view and draws the extent id. Returns 0 and *out, or an error above.
 */
int dn_coord_begin(struct dn_coord *c, const char *bucket, const char *key, uint64_t size,
                   bool size_known, unsigned k, unsigned m, struct dn_coord_write **out, char *msg,
                   size_t cap);

/*
 * The next bytes of the object at offset (= bytes so far), with the chunk's CRC32C
 * (checked here). Encodes them where they lie and hands each cell its bytes by reference
 * (the caller keeps its refs and may drop them on return). Blocks while a peer's window is
 * full. An error poisons the write (abort it).
 */
int dn_coord_data(struct dn_coord_write *w, uint64_t offset, const struct zc_seg *segs, size_t n,
                  uint32_t crc32c, char *msg, size_t cap);

struct dn_coord_result {
	uint64_t size;
	uint32_t crc32c;
	uint64_t mtime_ns;
	const char *etag; /* as committed (the Write's, or its CRC32C in hex); valid until end */
};

/*
 * The last bytes are in: end the cells' streams, wait for their acknowledgements, check
 * the write quorum and commit the record (etag, attrs and cond borrowed). 0 with *res:
 * the object is visible, answer the Write now, then dn_coord_end. An error: answer it,
 * then dn_coord_end too (it deletes the cells, or leaves them pending when the outcome is
 * ambiguous).
 */
int dn_coord_commit(struct dn_coord_write *w, const char *etag, const struct dn_attr *attrs,
                    size_t nattrs, const struct dn_cond *cond, struct dn_coord_result *res,
                    char *msg, size_t cap);

/* After dn_coord_commit (answered): CommitCells / dn_cell_commit of the cells and
 * DeleteCells of the replaced record's after a success, the cleanup after a failure; the
 * follow-up calls are best effort (the collector settles what they miss). Frees w. */
void dn_coord_end(struct dn_coord_write *w);

/* Drop a write before its commit: cancel the peer streams, delete what was written. Frees
 * w. */
void dn_coord_abort(struct dn_coord_write *w);

#endif
