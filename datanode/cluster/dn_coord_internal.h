/*
 * dn_coord_internal: what the coordinator's files share. Private to them.
 *   dn_coord.c         create/destroy, the parity pool, the peer clients, metrics
 *   dn_coord_place.c   groups: placement, the cells' lengths
 *   dn_coord_cell.c    one cell: its peer stream or local write, and its outcome
 *   dn_coord_write.c   begin and data: encode, forward, the cells' streams
 *   dn_coord_commit.c  acknowledgements, the commit Txn, CommitCells / DeleteCells, abort
 */
#ifndef ZEST_DN_COORD_INTERNAL_H
#define ZEST_DN_COORD_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dn_coord.h"
#include "dn.h"
#include "ec.h"
#include "rpc_client.h"
#include "cl_meta.h"
#include "cl_members.h"
#include "zc_place.h"

#define DN_COORD_PEND_MAX         64         /* segments gathered per data cell before a send */
#define DN_COORD_MSG_MAX          (1u << 20) /* payload bytes per CellChunk */
#define DN_COORD_HIST_BUCKETS     12
#define DN_COORD_CALL_DEADLINE_MS 10000 /* every unary call to a peer */
#define DN_COORD_BUCKETS          32    /* buckets remembered as existing */
#define DN_COORD_BUCKET_TTL_NS    (5ull * 1000000000ull)

/* A parity buffer of the pool: cell_size bytes, 4 KiB aligned; the zc_ref's last put (after
 * gRPC sent it, the rings wrote it) returns it to the pool. */
struct dn_coord_pbuf {
	struct zc_ref ref;
	struct dn_coord *c;
	uint8_t *buf;
	struct dn_coord_pbuf *next;
};

/* One rpc client per (peer name, address); kept until destroy. */
struct dn_coord_peer {
	struct dn_coord_peer *next;
	char *name, *addr;
	struct rpc_client *cli;
	atomic_ullong fwd_bytes;
};

struct dn_coord_hist {
	atomic_ullong b[DN_COORD_HIST_BUCKETS + 1];
	atomic_ullong sum_ns, count;
};
extern const double dn_coord_hist_bounds_s[DN_COORD_HIST_BUCKETS];
void dn_coord_hist_add(struct dn_coord_hist *h, uint64_t ns);

struct dn_coord {
	struct dn_coord_opts o;
	char *node;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct dn_coord_peer *peers;        /* under mu */
	struct dn_coord_pbuf *pmem, *pfree; /* pool; pfree under mu */
	uint8_t *pbytes;
	unsigned npbufs;
	long followups; /* async CommitCells / DeleteCells in flight, under mu */
	struct {
		char name[64];
		uint64_t until_ns;   /* zc_now_ns() */
	} buckets[DN_COORD_BUCKETS]; /* under mu: seen to exist lately */
	unsigned next_bucket;
	struct dn_coord_hist peer_hist, etcd_hist;
	atomic_uint last_tolerance_logged; /* fault tolerance + 1 of the last placement logged */
};

/* One cell of a group, and where it goes. */
struct ccell {
	struct dn_coord_write *w;
	uint32_t group;
	unsigned cell;
	unsigned node; /* index into w->view */
	bool local;
	uint64_t length, sent;
	struct dn_coord_peer *peer;
	struct rpc_cwrite *rw;    /* remote: destroyed when the write ends */
	struct dn_cell_write *lw; /* local until finish or abort */
	uint64_t t0;
	/* under w->mu */
	bool started;  /* a stream or local write exists (its outcome counts) */
	bool ended;    /* its last byte was handed over (commit / finish) */
	bool done, ok; /* the outcome: durable and recorded pending when ok */
	bool wait_writable;
	bool failed; /* counted missing (once) */
	int err;
};

struct cgroup {
	uint32_t idx;
	struct zc_place_slots sl;
	struct ccell cells[EC_MAX_CELLS];
};

struct dn_coord_write {
	struct dn_coord *c;
	char *bucket, *key;
	uint64_t size;
	unsigned k, m, n, quorum;
	uint32_t cell, spg;
	uint64_t id;
	const struct cl_members_view *view;
	int self; /* this node's index in view, or -1 */
	struct ec_codec *codec;
	uint64_t written;
	uint32_t crc;
	uint64_t first_ns; /* CLOCK_REALTIME of the first cell's open */
	uint64_t touch_ns; /* CLOCK_REALTIME of the last touch round every node acked */
	uint64_t touch_sent_ns; /* ... and of the last one sent */
	uint32_t ngroups, opened;
	struct cgroup **groups;
	/* the position (the write's thread) */
	uint32_t stripe;
	unsigned dcell;
	uint32_t fill;
	bool stripe_open;
	struct ec_stripe st;
	struct dn_coord_pbuf *par[EC_MAX_CELLS];
	struct zc_seg pend[EC_MAX_CELLS][DN_COORD_PEND_MAX];
	size_t npend[EC_MAX_CELLS], pend_len[EC_MAX_CELLS];
	int err; /* poisoned */
	bool committed;
	char etag_crc[9]; /* the ETag of a Write that sent none */
	bool ambiguous;   /* the Txn may have gone in: leave the cells pending */
	struct cl_meta_old old;
	/* under mu */
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool *node_failed;    /* per view index: a stream to it failed in this write */
	unsigned outstanding; /* cells started and not done */
	bool lost;            /* a group fell below the quorum */
};

/* ---- dn_coord.c */
struct dn_coord_pbuf *dn_coord_pbuf_get(struct dn_coord *c, uint64_t wait_ns);
/* The client for a peer (created on first use), or NULL (-ENOMEM / bad TLS). */
struct dn_coord_peer *dn_coord_peer(struct dn_coord *c, const char *name, const char *addr);
void dn_coord_followup_add(struct dn_coord *c, long d);
/* Does bucket exist? 0, ZC_E(ZC_NO_BUCKET), or the etcd error, with msg. A bucket seen
 * lately is not asked again: the commit Txn checks it anyway, this only spares a Write to
 * a missing bucket its payload. */
int dn_coord_bucket_check(struct dn_coord *c, const char *bucket, char *msg, size_t cap);
uint64_t dn_coord_realtime_ns(void);

/* ---- dn_coord_place.c */
/* Bytes of cell `cell` in group g of an extent of size bytes (the single-node layout:
 * stripes back to back; a parity cell as long as its stripe's first data cell). */
uint64_t dn_coord_cell_len(uint64_t size, unsigned k, uint32_t cell_size, uint32_t spg,
                           uint32_t group, unsigned cell);
uint32_t dn_coord_ngroups(uint64_t size, unsigned k, uint32_t cell_size, uint32_t spg);
/*
 * The node-failure tolerance of a group whose cell i is on node[i] (any ids; n cells):
 * the largest t such that losing ANY t nodes leaves at least k of the cells in durable
 * (bit i: cell i), -1 when fewer than k are. The worst t nodes are the t holding the
 * most of them, so it removes those first. The write quorum and
 * zest_cluster_fault_tolerance_nodes are both this (docs/cluster.md, "The write quorum").
 */
int dn_coord_tolerance(const unsigned *node, unsigned n, uint32_t durable, unsigned k);
static inline uint32_t
dn_coord_all_cells(unsigned n)
{
	return n >= 32 ? ~0u : (1u << n) - 1;
}
/* Does a group of k + m = n cells, those in durable durable, meet write quorum q
 * (k <= q <= n): does it survive the loss of any q - k nodes? */
static inline bool
dn_coord_quorum_ok(const unsigned *node, unsigned n, uint32_t durable, unsigned k, unsigned q)
{
	return dn_coord_tolerance(node, n, durable, k) >= (int)(q - k);
}
/* Under w->mu: the cells of g that have not failed (durable, or may still be). */
uint32_t dn_coord_group_live(const struct dn_coord_write *w, const struct cgroup *g);
/* Does g with these cells meet w's quorum? */
bool dn_coord_group_ok(const struct dn_coord_write *w, const struct cgroup *g, uint32_t cells);
/* The message of a ZC_NO_QUORUM: "write quorum not met: group g has ..." for the group
 * whose cell i is on node[i], with these cells (what: "placed", "left", "durable"). */
void dn_coord_quorum_msg(const struct dn_coord_write *w, uint32_t group, const unsigned *node,
                         uint32_t cells, const char *what, char *msg, size_t cap);
void dn_coord_group_msg(const struct dn_coord_write *w, const struct cgroup *g, uint32_t cells,
                        const char *what, char *msg, size_t cap);
/* At begin: can a group placed over w's view meet the quorum at all (every cell durable)?
 * 0, or ZC_E(ZC_NO_QUORUM) with msg: too few live nodes, refused before any byte moves. */
int dn_coord_place_check(const struct dn_coord_write *w, char *msg, size_t cap);
/* Cell i of g could not be opened on its node for want of space (-ENOSPC, before any
 * byte): move it to a node of the view outside the group, with room, not failed in this
 * write, in the zone with fewest of the group's cells; the old node is marked failed for
 * the write's later groups. 0, or -ENOSPC when no node is left. Before the cell starts. */
int dn_coord_cell_replace(struct dn_coord_write *w, struct cgroup *g, unsigned i);
/* A group placed now over v (zc_place_spread, self as there): 0 with *sl and the whole
 * zones it may lose in *zones_ft (-1 on failure), -EINVAL (empty view), -ENOSPC, -ENOMEM. */
int dn_coord_view_spread(const struct cl_members_view *v, int self, unsigned k, unsigned m,
                         struct zc_place_slots *sl, int *zones_ft);
/* Place group gi of w (the view's nodes, w->self) and start its cells' streams. 0, or
 * ZC_E(ZC_NO_QUORUM) when too many of them failed at once. */
int dn_coord_group_open(struct dn_coord_write *w, uint32_t gi, char *msg, size_t cap);

/* ---- dn_coord_cell.c */
/* Under w->mu: cell cc failed (err): counted missing once, its node skipped for the rest
 * of the write, w->lost when its group fell below the quorum. */
void dn_coord_cell_failed(struct ccell *cc, int err);
/* Open cell i of g: a local cell write or a WriteCell stream (a failure marks it). */
int dn_coord_cell_start(struct dn_coord_write *w, struct cgroup *g, unsigned i);
/* Give the bytes segs to cell cc (refs taken by the receiver; the caller keeps its own).
 * Blocks while the peer's window is full, at most the peer timeout. 0, or
 * ZC_E(ZC_NO_QUORUM) once a group lost its quorum. */
int dn_coord_cell_send(struct ccell *cc, const struct zc_seg *segs, size_t n, size_t len);
/* The cell's last byte is in: commit its stream / finish the local write. */
void dn_coord_cell_end(struct ccell *cc);
/* peer_timeout_ms from now on CLOCK_MONOTONIC (w->cond's clock). */
void dn_coord_deadline(const struct dn_coord_write *w, struct timespec *dl);

/* ---- dn_coord_write.c */
void dn_coord_write_free(struct dn_coord_write *w);

/* ---- dn_coord_touch.c */
/* CLOCK_REALTIME after which w may not commit (nor touch): its last touch acknowledged by
 * every node (else its first cell's open) + gc_grace / 2; 0 without a grace or a cell. */
uint64_t dn_coord_not_after(const struct dn_coord_write *w);
/* On w's thread, at most every gc_grace / 4 (force: now): refresh the pending cells of w
 * on every node that has some (CommitCells touch; dn_cell_touch for the local ones),
 * waiting for the answers; when all answered OK, the commit deadline moves on. 0, or
 * ZC_E(ZC_UNAVAILABLE) when the deadline has passed already (refuse the write), -ENOMEM. */
int dn_coord_touch(struct dn_coord_write *w, bool force);
/* The message of a write refused for its deadline ("the write stalled: ..."). */
void dn_coord_grace_msg(const struct dn_coord_write *w, char *msg, size_t cap);

#endif
