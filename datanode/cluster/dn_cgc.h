/*
 * dn_cgc: the cell collector of one datanode in cluster mode (docs/cluster.md, "Cell
 * collection"). It settles the cells etcd's records no longer (or never) name:
 *
 * - pending cells older than the grace: the record that owns the cell's extent names this
 *   cell on this node, not missing -> dn_cell_commit (the coordinator died after its Txn,
 *   before telling the node); else -> dn_cell_delete, when no record has the extent only
 *   after its fence (cl_meta_extent_fence: a commit Txn still in flight fails);
 * - committed cells, in a slower scan of the whole cell index: the record no longer names
 *   the cell on this node (an overwrite or a delete whose DeleteCells did not arrive, a
 *   heal that moved it) -> dn_cell_retire;
 * - retired cells (DeleteCells, or the scan above) whose last touch (retirement or a read)
 *   is older than the read grace -> deleted, without asking etcd: a GET that started on
 *   the replaced record has read them to the end by then.
 *
 * The record that owns an extent is found through the extent index (/zest/extents/<id>,
 * cl_meta.h), not through the bucket/key of the cell's entry: a multipart part's cells
 * name the part's key, which Complete deletes when it moves the part's extent into the
 * object's record. A record is read serializable (the member's copy, no quorum round
 * trip); a decision to delete is confirmed by a linearizable read first, because a
 * lagging member could miss a recent commit and deletion cannot be undone. A record that
 * does not decode, or an etcd error, leaves the cell as it is (the next pass tries again).
 * An index key whose record lacks the extent (left by a Txn etcd refused with its index
 * ops) is removed after that linearizable read.
 *
 * Threads: create/destroy from one thread; the collector runs on its own thread
 * ("dn-cgc"); dn_cgc_pass_* may be called from any thread (tests) while no thread runs;
 * dn_cgc_metrics from the metrics thread.
 */
#ifndef ZEST_DN_CGC_H
#define ZEST_DN_CGC_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dn.h"
#include "dn_cells.h"
#include "cl_etcd.h"

#define DN_CGC_DEFAULT_GRACE_S 600 /* --gc-grace */

struct dn_cgc;

struct dn_cgc_opts {
	struct dn_store *store;  /* borrowed, outlives the collector */
	struct cl_etcd *etcd;    /* borrowed, outlives the collector */
	const char *node;        /* this node's name, as records name it (copied) */
	uint64_t grace_ns;       /* 0: DN_CGC_DEFAULT_GRACE_S */
	uint64_t read_grace_ns;  /* --read-grace: retired cells' life after their last read;
	                          * 0: grace_ns */
	uint64_t period_ns;      /* between passes; 0: the smaller grace / 4, at most 60 s */
	uint64_t scan_period_ns; /* between committed scans; 0: 1 h (8 x the larger grace if
	                          * shorter); UINT64_MAX: never */
	unsigned scan_rate;      /* records read per second in a scan; 0: 200 */
	unsigned timeout_ms;     /* per etcd call; 0: the client's default */
	bool no_thread;          /* tests: passes only when called */
};

struct dn_cgc_stats {
	uint64_t committed, deleted, retired, kept, errors;
};

/* 0 and *out (its thread started unless no_thread), -EINVAL, -ENOMEM, -EAGAIN. */
int dn_cgc_create(const struct dn_cgc_opts *o, struct dn_cgc **out);
/* Stop the thread (a pass in progress ends at its next cell): from then on the collector
 * touches neither the store nor etcd, and dn_cgc_metrics still answers. Idempotent. */
void dn_cgc_stop(struct dn_cgc *g);
/* Stop, then free. NULL: no-op. */
void dn_cgc_destroy(struct dn_cgc *g);

/* One pass over pending cells recorded before now_real_ns - grace (now_real_ns 0: now);
 * adds to *st (may be NULL). Returns 0 or the first etcd error (the pass stops there). */
int dn_cgc_pass_pending(struct dn_cgc *g, uint64_t now_real_ns, struct dn_cgc_stats *st);
/* One pass over retired cells last touched before now_real_ns - read grace: deleted (an
 * entry touched meanwhile stays). Adds to *st; 0 or the first store error. */
int dn_cgc_pass_retired(struct dn_cgc *g, uint64_t now_real_ns, struct dn_cgc_stats *st);
/* One scan of every committed cell (pending ones younger than the grace are skipped, older
 * ones settled as above). rate_limited false: no pause between reads (tests). */
int dn_cgc_pass_scan(struct dn_cgc *g, bool rate_limited, struct dn_cgc_stats *st);

/* zest_cluster_gc_cells_total{action="commit"|"delete"|"retire"},
 * zest_cluster_gc_errors_total. */
void dn_cgc_metrics(struct dn_cgc *g, FILE *out);

#endif
