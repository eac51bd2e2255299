/*
 * dn_cheal: the cluster healer of one datanode in cluster mode (docs/cluster.md, "Heal").
 * Not dn_heal.c, which rebuilds a single node's drives.
 *
 * A pass reads records only when there is something to heal (docs/cluster.md, "Heal, as
 * built"): the to-do keys /zest/heal/<bucket>/<key> of the records with cells marked
 * missing or a doubled group (cl_index.h), and every record (/zest/objects/,
 * serializable, in pages) only when a node has been absent longer than heal_after and no
 * complete pass since has left nothing to do, or when this node's store has not been
 * checked against the records yet (a new store, or drives wiped: /zest/cellcheck/<node>
 * does not name it). With every node live, nothing marked and no group doubled, a pass
 * costs three small etcd reads. Per record read:
 * - checks the cells it names on this node against the cell store: a cell the record
 *   names here (missing bit clear) that the store has no entry for (the node came back
 *   with wiped drives) is marked missing (dn_cheal_mark_missing: a Txn fenced on the
 *   record's mod_revision that writes the record's to-do key too), so the object's healer
 *   rebuilds it;
 * - when this node is the object's healer (the first live node of zc_place_rank over the
 *   membership view, for the hash of bucket/key the gateway's s3_place uses): counts the
 *   cells that need healing (marked missing, or on a node absent from the view for longer
 *   than heal_after, counted from when this healer first saw it absent, or found absent
 *   in /zest/members/) and rebuilds them under the lock /zest/locks/heal/<bucket>/<key>
 *   (a key under the healer's own lease, so two healers never work on one object): k good
 *   cells read (ReadCell, or the local store), the missing ones decoded
 *   (ec_codec_decode), each written (WriteCell, or dn_cell_write_*) to the node that lost
 *   it if it is live again (and holds no other cell of the group), else to a live node
 *   that holds no cell of the group; a doubled group's extra cell (two cells of the
 *   group on one node: written while fewer than k + m nodes were live) is read whole
 *   from its node and moved the same way to a live node that holds no cell of the group,
 *   when there is one (else it stays, counted pending); then one Txn puts the updated
 *   record if its mod_revision is still the one read (a late or repeated heal never
 *   undoes a newer write; on a failed compare the new cells are deleted and the object
 *   waits for the next pass), CommitCells on the new nodes, DeleteCells of the old cell
 *   when its node is live. The record's other keys (the extent index) are not touched, but for its
 *   to-do key, deleted in that Txn when no missing bit and no doubled group is left.
 *
 * Every remote call has a deadline (timeout_ms); an etcd error ends the pass with nothing
 * changed past the last completed Txn.
 *
 * Threads: create/stop/destroy from one thread; the healer runs on its own thread
 * ("dn-cheal"); dn_cheal_pass may be called from any one thread (tests) while no thread
 * runs; dn_cheal_metrics from the metrics thread.
 */
#ifndef ZEST_DN_CHEAL_H
#define ZEST_DN_CHEAL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "dn.h"
#include "dn_cells.h"
#include "cl_rec.h"
#include "cl_etcd.h"
#include "cl_members.h"
#include "cl_index.h"
#include "rpc_tls.h"

#define DN_CHEAL_DEFAULT_AFTER_S 600 /* --heal-after */
#define DN_CHEAL_LOCKS           "/zest/locks/heal/"
/* /zest/cellcheck/<node>: the store id (its drives' zest-drive files) whose cells the node
 * has checked against every record; deleting it makes the node check again. */
#define DN_CHEAL_CHECKED "/zest/cellcheck/"

struct dn_cheal;

struct dn_cheal_opts {
	struct dn_store *store;     /* borrowed, outlives the healer */
	struct cl_etcd *etcd;       /* borrowed, outlives the healer */
	struct cl_members *members; /* the live view (borrowed, outlives the healer) */
	const char *node;           /* this node's name, as records name it (copied) */
	struct rpc_tls tls;         /* for the peers' gRPC ports (the files are read at create) */
	uint64_t heal_after_ns;     /* 0: DN_CHEAL_DEFAULT_AFTER_S */
	uint64_t period_ns;         /* between passes; 0: heal_after / 4 in [1 s, 60 s] */
	uint64_t gc_grace_ns;       /* the collectors' --gc-grace; 0: 10 min. A rebuilt cell
	                             * not named by a record within half of it is given up */
	unsigned timeout_ms;        /* per remote call; 0: 5000 */
	unsigned lock_ttl_s;        /* the lock lease; 0: 10 */
	bool no_thread;             /* tests: passes only when called */
	/* Decommission: called on the healer's thread once this node holds no cell a record
	 * names, just before its keys go (/zest/nodes/, /zest/members/, its drain and cellcheck
	 * keys): the registration must stop being renewed. NULL: nothing to stop. */
	void (*retire)(void *arg);
	void *retire_arg;
#ifdef ZC_FAULTS
	/* Test builds only (ZC_FAULTS, zc_fault.h): called on the healer's thread once an
	 * object's cells are rebuilt, just before the Txn that names them, so a test can
	 * change the record there (a write racing the heal). */
	void (*test_before_txn)(void *arg, const char *bucket, const char *key);
	void *test_arg;
#endif
};

struct dn_cheal_stats {
	uint64_t records;  /* records read (zest_heal_records_read_total) */
	uint64_t todos;    /* to-do keys read */
	uint64_t scans;    /* passes over every record */
	uint64_t marked;   /* cells of this node marked missing (not in its store) */
	uint64_t pending;  /* cells needing heal among the objects this node heals */
	uint64_t healed;   /* cells rebuilt or moved and named by their record */
	uint64_t moved;    /* ... of them moved out of a doubled group (read, not rebuilt) */
	uint64_t degraded; /* objects this node heals with a cell missing or on an absent node,
	                    * or a doubled group */
	uint64_t doubled;  /* groups with two cells on one node among the objects it heals */
	uint64_t failed;   /* objects whose heal failed or was fenced off (tried again later) */
};

/* 0 and *out (its thread started unless no_thread), -EINVAL, -ENOMEM, -EAGAIN. */
int dn_cheal_create(const struct dn_cheal_opts *o, struct dn_cheal **out);
/* Stop the thread (a pass in progress ends at its next object): afterwards the healer
 * touches neither the store nor etcd, and dn_cheal_metrics still answers. Idempotent. */
void dn_cheal_stop(struct dn_cheal *h);
/* Stop, then free (the lock lease is revoked). NULL: no-op. */
void dn_cheal_destroy(struct dn_cheal *h);

/* Note the current membership view in the absence tracking (the thread does it every
 * second); a pass does it too. */
void dn_cheal_observe(struct dn_cheal *h);

/* One pass over every record; adds to *st (may be NULL) and sets the gauges. Returns 0 or
 * the first etcd error (the pass stops there). */
int dn_cheal_pass(struct dn_cheal *h, struct dn_cheal_stats *st);

/* zest_heal_pending_cells, zest_heal_cells_total, zest_heal_moved_cells_total,
 * zest_cluster_degraded_objects, zest_cluster_doubled_groups, zest_heal_records_read_total
 * and the others. */
void dn_cheal_metrics(struct dn_cheal *h, FILE *out);

/*
 * Mark cells of one object record missing: THE call by which anything tells the healers
 * that a cell a record names is lost (this healer's check of its own store, the scrubber's
 * rotted cells), so that the record gets its to-do key and is healed without any healer
 * reading every record.
 *
 * rec is the record at record_key (/zest/objects/<bucket>/<key>) as read at
 * *mod_revision (cl_meta_get, or cl_meta_extent_record for a cell found by its name).
 * Each of cells[0..n) whose slot in rec names node (NULL: any node) and is not missing
 * yet gets its missing bit set in rec; then one Txn: compare mod_revision(record_key) ==
 * *mod_revision; then [Put record_key = rec, Put /zest/heal/<bucket>/<key>]
 * (cl_meta_heal_key; value cl_meta_heal_value). A cell rec does not name on node is
 * not this caller's to mark (garbage the collector removes) and is skipped.
 *
 * Returns the cells marked (> 0, *mod_revision the record's new one), 0 when none needed
 * marking (nothing sent), ZC_E(ZC_CHANGED) when the record changed since it was read (nothing
 * written: read it again, judge again), -EINVAL (a bad key, a record the encoder refuses),
 * or an etcd error (the Txn may have gone in: marking again is safe, a repeat fails its
 * compare or finds the bits set). rec is changed whatever the outcome. Any thread.
 */
int dn_cheal_mark_missing(struct cl_etcd *etcd, const char *record_key, struct cl_rec_object *rec,
                          int64_t *mod_revision, const char *node, const struct dn_cell_id *cells,
                          size_t n, unsigned timeout_ms);

/*
 * This node's store lost cell id (the scrubber found it rotted: dn_cell_lost, whose hook
 * the healer sets on its store at create): queued, and marked missing at the next pass by
 * dn_cheal_mark_missing, its record found through the extent index (a cell no record
 * names here is garbage and left to the collector). Any thread, never blocks; past 4096
 * queued cells the next pass checks the whole store against the records instead.
 */
void dn_cheal_cell_lost(struct dn_cheal *h, struct dn_cell_id id);

#endif
