/* dn_cheal's private parts: the healer's state, its peer calls, the rebuild of one object. */
#ifndef ZEST_DN_CHEAL_INTERNAL_H
#define ZEST_DN_CHEAL_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include "dn_cheal.h"
#include "rpc_client.h"
#include "cl_rec.h"
#include "cl_healstat.h"
#include "zc_loop.h"

/* A node named by records and not in the view: since when (zc_now_ns) this healer knows. */
struct chl_absent {
	char *name;
	uint64_t since_ns;
	bool seen; /* still absent at the last observation */
};

/* A peer's gRPC client, kept while its address stays the same. */
struct chl_peer {
	char *name, *address;
	struct rpc_client *cl;
};

struct dn_cheal {
	struct dn_cheal_opts o;
	char *node;
	struct zc_loop loop; /* the dn-cheal thread; its lock also guards the absence table */
	struct chl_absent *absent;
	size_t nabsent, absent_cap;
	/* under loop.lock too: cells this store lost (dn_cheal_cell_lost), to be marked */
	struct dn_cell_id *lost;
	size_t nlost;
	bool lost_overflow; /* some were dropped: check the whole store instead */
	bool hooked;        /* dn_cell_lost's hook on the store is ours (until stop) */
	/* healer thread (or the test's) only */
	struct chl_peer *peers;
	size_t npeers;
	int64_t lease; /* the lock lease; 0: none yet */
	struct cl_etcd_keepalive *ka;
	atomic_bool lease_lost;
	/* the healer thread's (or the test's): what the passes over every record found */
	char store_id[40]; /* the drives' zest-drive store=, "unknown" when unreadable */
	bool store_fresh;  /* the store's metadata was empty at create (new, or lost) */
	bool must_check;   /* this store's cells are not checked against the records yet */
	bool scanned;      /* a complete pass over every record ran while this node was live */
	bool scan_clean;   /* ... and left nothing to heal */
	uint64_t scan_fp;  /* ... for this set of expired absences (expired_fp) */
	/* gauges and counters */
	atomic_uint_fast64_t pending, degraded, doubled, healed, moved, marked, failed,
	        records_read, scans;
	atomic_uint_fast64_t pending_bytes, healed_bytes, passes, own_cells;
	/* the healer thread's: the last progress put in /zest/healstat/<node> */
	struct cl_healstat stat;
	uint64_t pass_wall_ms; /* wall clock at the current pass's start */
	bool retired;          /* decommissioned: this node left the cluster, the healer rests */
};

/* What the records a pass read came to (a phase: the to-do keys, or every record). */
struct chl_acc {
	uint64_t pending, degraded, doubled, failed;
	uint64_t pending_bytes;
	uint64_t own_cells, own_bytes; /* cells records name on this node (a scan's) */
	bool fenced;                   /* a marking of this node's cells found its record changed */
};

/* One object as a pass reads it. */
struct chl_obj {
	char *bucket, *key; /* point into `okey` */
	char okey[2048];    /* "bucket\0key\0" */
	struct cl_rec_object rec;
	int64_t mod_revision;
};

/* Split "<prefix><bucket>/<key>" into o. */
int chl_obj_parse(struct chl_obj *o, const char *prefix, const char *k, size_t klen);
void chl_obj_clear(struct chl_obj *o);

/* The per-record work of a pass on o (read at o->mod_revision): with own, this node's
 * cells checked against its store; if this node heals o, its cells needing heal rebuilt.
 * Adds to *st and *acc. Returns 0, or an etcd error that ends the pass. */
int chl_process(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o,
                uint64_t now, bool own, struct dn_cheal_stats *st, struct chl_acc *acc);
/* Does this node heal bucket/key (the first live node of its ranking)? */
bool chl_responsible(struct dn_cheal *h, const struct cl_members_view *v, const char *bucket,
                     const char *key);
bool chl_is_etcd_err(int err);
bool chl_stopping(struct dn_cheal *h);
/* Call fn on every key of [prefix, end) in pages of 256 serializable Ranges, until fn
 * returns non-zero or the healer stops; *n_read (may be NULL) counts the keys read.
 * Returns 0, fn's value, or an etcd error. Both passes walk etcd this way. */
typedef int (*chl_kv_fn)(struct dn_cheal *h, struct cl_etcd_kv *kv, void *arg);
int chl_pages(struct dn_cheal *h, const char *prefix, const char *end, chl_kv_fn fn, void *arg,
              uint64_t *n_read);

/* ---- to-do keys and the store check (dn_cheal_todo.c) ---- */
/* Read the to-do keys (in pages) and process the records this node heals; a key whose
 * record has no cell marked missing any more is deleted (or moved after its extents). */
int chl_todo_pass(struct dn_cheal *h, const struct cl_members_view *v, uint64_t now,
                  struct dn_cheal_stats *st, struct chl_acc *acc);
/* o (read at o->mod_revision) has cells marked missing: put its to-do key if the record
 * is unchanged. 0, or an etcd error. */
int chl_todo_ensure(struct dn_cheal *h, const struct chl_obj *o);
/* Mark the cells dn_cheal_cell_lost queued (their records found through the extent
 * index). 0, or an etcd error (the rest stay queued). */
int chl_lost_pass(struct dn_cheal *h, struct dn_cheal_stats *st);
void chl_lost_free(struct dn_cheal *h);
/* Note every node of /zest/members/ the view lacks as absent (chl_absent_for). */
int chl_members_note(struct dn_cheal *h, const struct cl_members_view *v, uint64_t now);
/* The cells o names on this node that the store has no entry for, marked missing
 * (dn_cheal_mark_missing): 0, ZC_E(ZC_CHANGED) (o changed meanwhile: nothing more marked), or an
 * etcd error. */
int chl_own_check(struct dn_cheal *h, struct chl_obj *o, struct dn_cheal_stats *st);
/* Read the store id and freshness (at create). */
void chl_store_init(struct dn_cheal *h);
/* Set h->must_check from /zest/cellcheck/<node> (a fresh store deletes it first). */
int chl_check_read(struct dn_cheal *h);
/* A complete check: /zest/cellcheck/<node> = the store id, must_check cleared. */
int chl_check_done(struct dn_cheal *h);

/* name (a node some record or /zest/members/ names) absent from the first time it is
 * seen missing from v. */
void chl_note_absent(struct dn_cheal *h, const struct cl_members_view *v, const char *name,
                     uint64_t now);
/* Is name in the view? Its index, or -1. */
int chl_view_find(const struct cl_members_view *v, const char *name);
/* Nanoseconds name has been absent as this healer saw it (0: live or never seen absent). */
uint64_t chl_absent_for(struct dn_cheal *h, const char *name, uint64_t now);

/* Does cell c of group gr need healing now (marked missing, or its node absent longer
 * than heal_after)? */
bool chl_cell_needs(struct dn_cheal *h, const struct cl_members_view *v,
                    const struct cl_rec_extent *e, const struct cl_rec_group *gr, unsigned c,
                    uint64_t now);

/* The cells of group gr that repeat the node of an earlier cell (a doubled group's
 * extras), none of `skip` counted on either side: the cells a healer moves. */
uint32_t chl_group_extra(const struct cl_rec_extent *e, const struct cl_rec_group *gr,
                         uint32_t skip);
/* Is some live node of v free of every cell of group gr (somewhere to move a cell to)? */
bool chl_free_node(const struct cl_members_view *v, const struct cl_rec_extent *e,
                   const struct cl_rec_group *gr);
/* Reorder order (v's nodes ranked for group gr) for a new home of cell c: nodes in zones
 * with fewer of the group's other cells first, full nodes last; stable (dn_cheal_zone.c). */
void chl_zone_order(const struct cl_members_view *v, const struct cl_rec_extent *e,
                    const struct cl_rec_group *gr, unsigned c, unsigned *order);
/* The doubled groups of rec (cl_meta_heal_group_doubled). */
unsigned chl_doubled_groups(const struct cl_rec_object *rec);

/*
 * Rebuild what needs healing in o (the record read at o->mod_revision, under the lock),
 * move one cell of each doubled group's pair to a live node free of the group (read from
 * its node, not decoded), and put the updated record. Returns the cells healed and moved
 * (>= 0; *moved of them moved), -EAGAIN when a group could not be healed now (no k good
 * cells, no target), ZC_E(ZC_CHANGED) when the record changed, or an etcd error.
 */
int chl_heal_object(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o,
                    unsigned *moved);

/* Put o's record (changed by the caller) if etcd still has it at o->mod_revision and no
 * key of unreg[0..nunreg) (registration keys /zest/nodes/<n>, at most 16) exists: 1 (and
 * o->mod_revision moves on), 0 when one of them changed meanwhile, or an etcd error. */
int chl_put_record(struct dn_cheal *h, struct chl_obj *o, const char *const *unreg, size_t nunreg);

/* ---- drains, maintenance and progress (dn_cheal_stat.c) ---- */
/* Bytes of cell c of group g (about: each cell of a group holds 1/k of its data). */
uint64_t chl_cell_bytes(const struct cl_rec_extent *e, size_t g);
/* The cells of group gr on a live node that drains (to move off), none of skip. */
uint32_t chl_drain_cells(const struct cl_members_view *v, const struct cl_rec_extent *e,
                         const struct cl_rec_group *gr, uint32_t skip);
/* Count the cells o names on this node into acc (a pass over every record). */
void chl_own_count(struct dn_cheal *h, const struct chl_obj *o, struct chl_acc *acc);
/* After a pass: put /zest/healstat/<node> from the counters (and acc's own count when
 * scanned); with a decommission mark on this node and a clean scan that found no cell
 * named here, leave the cluster. 0 or an etcd error. */
int chl_stat_pass(struct dn_cheal *h, const struct cl_members_view *v, const struct chl_acc *acc,
                  bool scanned, bool clean);
uint64_t chl_wall_ms(void);
/* The heal lock lease, granted and kept alive when there is none. */
int chl_ensure_lease(struct dn_cheal *h);

/* ---- peer calls (dn_cheal_peer.c), each bounded by the healer's timeout ---- */
struct rpc_client *chl_peer(struct dn_cheal *h, const char *name, const char *address);
void chl_peers_free(struct dn_cheal *h);
/* Read the whole cell id into buf (cap bytes): 0 and *len, or the call's error. */
int chl_peer_read(struct dn_cheal *h, struct rpc_client *cl, struct dn_cell_id id, uint8_t *buf,
                  size_t cap, size_t *len);
/* Write buf[0..open->length) as the cell open names: 0 or the call's error. */
int chl_peer_write(struct dn_cheal *h, struct rpc_client *cl, const struct rpc_cell_open *open,
                   const uint8_t *buf);
/* DeleteCells / CommitCells of one cell: 0 or the call's error (-ETIMEDOUT). */
int chl_peer_cells(struct dn_cheal *h, struct rpc_client *cl, enum rpc_method m,
                   struct dn_cell_id id);

/* ---- the same on this node's own store ---- */
int chl_local_read(struct dn_cheal *h, struct dn_cell_id id, uint8_t *buf, size_t cap, size_t *len);
int chl_local_write(struct dn_cheal *h, const struct dn_cell_spec *spec, const uint8_t *buf);

unsigned chl_timeout(const struct dn_cheal *h);

#endif
