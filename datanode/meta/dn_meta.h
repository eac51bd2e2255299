/*
 * dn_meta: the metadata layer of the datanode (datanode/meta/), its one public header.
 *
 * LMDB, one environment per replica on the first m + 1 drives: extents, objects, buckets
 * and listings (dn_meta_*.c), and the cluster cells' table (dn_meta_cell.c). It calls the
 * drive layer only (a replica's drive marked full); its owner hears of a dropped replica
 * through dn_meta_opts.on_drop. The value types it stores (objects' info, conditions,
 * listings, cell names) are defined here; the engine's calls (dn.h) take and return them.
 */
#ifndef ZEST_DN_META_H
#define ZEST_DN_META_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "dn_drive.h"
#include "ec.h"
#include "zc_err.h"

/* ---- value types (the engine's calls, dn.h, take and return them) ---- */
struct dn_bucket_info {
	char *name;
	uint64_t ctime_ns;
};
void dn_bucket_list_free(struct dn_bucket_info *v, size_t n);

struct dn_attr {
	char *name;
	char *value;
};

struct dn_object_info {
	char *key;
	uint64_t size;
	char *etag;
	uint64_t mtime_ns;
	uint32_t crc32c; /* of the whole object */
	unsigned k, m;
	struct dn_attr *attrs;
	size_t nattrs;
};
void dn_object_info_fini(struct dn_object_info *info);

/*
 * A condition on the object a commit replaces (S3 conditional writes), checked inside the
 * metadata transaction that commits, so that two conditional writes of one key cannot both
 * pass. if_none_match: the key must not exist. if_match (NULL or "": no check): the key must
 * exist with this ETag ("*": any). A condition that does not hold fails the commit with
 * ZC_E(ZC_PRECONDITION), or ZC_E(ZC_NO_KEY) for if_match on a missing key; nothing changes.
 */
struct dn_cond {
	bool if_none_match;
	const char *if_match;
};

struct dn_list_result {
	struct dn_object_info *entries; /* attrs left out */
	size_t nentries;
	char **prefixes;
	size_t nprefixes;
	bool truncated;
	char *next_start_after;
};
void dn_list_result_fini(struct dn_list_result *r);

struct dn_cell_id {
	uint64_t extent;
	uint32_t group;
	unsigned cell; /* 0 .. k + m - 1 */
};

struct dn_cell_info {
	struct dn_cell_id id;
	unsigned drive;
	uint64_t length;
	uint64_t created_ns; /* CLOCK_REALTIME when recorded */
	uint64_t touched_ns; /* CLOCK_REALTIME of the last touch (writer's progress, a read of a
	                      * retired cell, its retirement); 0: never */
	bool pending;
	bool retired; /* replaced or deleted: kept until the read grace since touched_ns */
	unsigned k, m;
	uint32_t cell_size, stripes_per_group, chunk_size;
	char *bucket, *key;
};
void dn_cell_info_fini(struct dn_cell_info *info);
void dn_cell_list_free(struct dn_cell_info *v, size_t n);

struct dn_group_rec {
	uint8_t drives[EC_MAX_CELLS];
	uint32_t missing; /* bit c: cell c is not on its drive */
	uint32_t *crcs;   /* per cell, dn_geom_file_len / chunk CRCs, cells in order */
};

struct dn_extent {
	uint64_t id;
	uint32_t refs;
	struct dn_geom g;
	uint32_t ngroups;
	struct dn_group_rec *groups;
	uint32_t *crc_mem;
};
void dn_extent_free(struct dn_extent *e);
size_t dn_extent_ncrc(const struct dn_extent *e, uint32_t group, unsigned c);
uint32_t *dn_extent_crcs(const struct dn_extent *e, uint32_t group, unsigned c);
/* Allocate groups and CRC arrays for e->g (zeroed). */
int dn_extent_alloc(struct dn_extent *e);

struct dn_piece {
	uint64_t ext_id;
	uint64_t size;
};

struct dn_obj {
	uint64_t size;
	uint64_t mtime_ns;
	uint32_t crc32c;
	unsigned k, m;
	char *etag;
	struct dn_attr *attrs;
	size_t nattrs;
	struct dn_piece *pieces;
	size_t npieces;
};
void dn_obj_fini(struct dn_obj *o);
/* Move o's ETag and attributes into info (key duplicated): the caller fini's both. */
void dn_obj_take_info(struct dn_obj *o, const char *key, struct dn_object_info *info);

struct dn_meta;
/* What the metadata is opened with. */
struct dn_meta_opts {
	struct dn_drive *drives; /* replicas live on the first `replicas` of them */
	unsigned ndrives;
	unsigned replicas; /* wanted (m + 1), at most ndrives */
	size_t map_size;   /* LMDB map size per replica */
	/* A failed write transaction dropped a replica: the owner's healer has work
	 * (dn_meta_revive_replica). Called under the metadata lock; NULL: none. */
	void (*on_drop)(void *arg);
	void *arg;
};
int dn_meta_open(const struct dn_meta_opts *o, struct dn_meta **out);
void dn_meta_close(struct dn_meta *m);
uint64_t dn_meta_next_id(struct dn_meta *m);
/* The primary's generation: 0 means no write ever committed. */
uint64_t dn_meta_generation(struct dn_meta *m);
/* Replace drive's replica (if it holds one) with a fresh copy of the primary (heal). */
int dn_meta_rebuild_replica(struct dn_meta *m, unsigned drive);
/*
 * Background heal: if a failed write transaction dropped drive's replica, copy the primary
 * over it under the metadata lock and put it back into the live set (later transactions
 * apply to it again). The caller checks the drive is OK. Returns 1 rebuilt, 0 nothing to
 * do (no replica there, or live), -ENOSPC (the drive is marked full again), -EAGAIN (no
 * live primary to copy yet) or another -errno; it stays dropped on error.
 */
int dn_meta_revive_replica(struct dn_meta *m, unsigned drive);
/* Replicas kept (m + 1, at most the drives); *live: how many take writes now; *revived:
 * how many the healer brought back since open. No lock taken (metrics). */
unsigned dn_meta_replicas(struct dn_meta *m, unsigned *live, uint64_t *revived);
/* Write transactions run so far, batched or not (each syncs every live replica once). */
uint64_t dn_meta_txns(struct dn_meta *m);
/* Does drive's replica take writes? Its generation (tests, logs). */
bool dn_meta_replica_live(struct dn_meta *m, unsigned drive);
uint64_t dn_meta_replica_generation(struct dn_meta *m, unsigned drive);
/* Test builds: "meta.txn" (zc_fault.h), instance the replica's drive: an err rule fails
 * the write transaction there before it commits, as a drive that filled up would. */
int dn_meta_extent_exists(struct dn_meta *m, uint64_t id);
int dn_meta_get_extent(struct dn_meta *m, uint64_t id, struct dn_extent *e);
int dn_meta_get_obj(struct dn_meta *m, const char *bucket, const char *key, struct dn_obj *o);
/*
 * Commit a new object version with its new extent (e may be NULL: compose), dropping the
 * objects drop_buckets[i]/drop_keys[i] (drop_buckets or an entry NULL or "": bucket). Old
 * extents whose refs fall to zero are returned in *freed (caller deletes their files then
 * frees).
 */
int dn_meta_put_obj(struct dn_meta *m, const char *bucket, const char *key, struct dn_obj *o,
                    struct dn_extent *e, const char *const *drop_buckets,
                    const char *const *drop_keys, size_t ndrop, struct dn_extent **freed,
                    size_t *nfreed);
/* dn_meta_put_obj, checking cond (NULL: none) on the replaced object in the transaction. */
int dn_meta_put_obj_if(struct dn_meta *m, const char *bucket, const char *key, struct dn_obj *o,
                       struct dn_extent *e, const char *const *drop_buckets,
                       const char *const *drop_keys, size_t ndrop, const struct dn_cond *cond,
                       struct dn_extent **freed, size_t *nfreed);
/* One object version to commit in a batch; err, freed and existed are outputs. */
struct dn_meta_put {
	const char *bucket, *key;
	struct dn_obj *o; /* NULL: delete bucket/key instead (existed: it was there) */
	struct dn_extent *e;
	int err;
	struct dn_extent *freed;
	size_t nfreed;
	const struct dn_cond *cond; /* NULL: unconditional */
	/* Objects dropped in the same transaction (a compose's parts), as dn_meta_put_obj. */
	const char *const *drop_buckets, *const *drop_keys;
	size_t ndrop;
	bool existed;
};
/*
 * Commit n puts in one transaction per replica (one sync each), every put in its own nested
 * transaction so one refused put (bucket gone) does not sink the others. Returns 0 with
 * each put's own err set, or -errno when nothing could commit.
 */
#define DN_BATCH_MAX 64 /* puts per batch (and jobs per commit-thread batch) */
int dn_meta_put_batch(struct dn_meta *m, struct dn_meta_put *v, size_t n);
int dn_meta_del_obj(struct dn_meta *m, const char *bucket, const char *key,
                    struct dn_extent **freed, size_t *nfreed);
int dn_meta_update_extent(struct dn_meta *m, struct dn_extent *e);
/* Set cell's missing mark in one transaction, if it is still on drive and unmarked (the
 * scrubber found it bad): 1 marked, 0 nothing to do, ZC_E(ZC_NO_KEY) (extent gone), -errno. */
int dn_meta_mark_missing(struct dn_meta *m, uint64_t id, uint32_t group, unsigned cell,
                         unsigned drive);
/* Call fn for every extent (heal). Stops on fn < 0. */
int dn_meta_each_extent(struct dn_meta *m, int (*fn)(void *arg, struct dn_extent *e), void *arg);
int dn_meta_bucket_create(struct dn_meta *m, const char *name, uint64_t *ctime);
int dn_meta_bucket_delete(struct dn_meta *m, const char *name);
int dn_meta_bucket_head(struct dn_meta *m, const char *name, uint64_t *ctime);
int dn_meta_bucket_list(struct dn_meta *m, struct dn_bucket_info **out, size_t *n);
int dn_meta_list(struct dn_meta *m, const char *bucket, const char *prefix, const char *start_after,
                 unsigned limit, const char *delimiter, struct dn_list_result *out);

/* strdup, NULL for NULL. */
char *dn_strdup(const char *s);

/* ---- the cells table (dn_meta_cell.c) ----
 * A cluster cell is named (extent id, group, cell) on its node; its file is the single-node
 * name <drive>/data/<id%256>/<id>.<group>.<cell> (dn_layout_path) on the drive its entry
 * names. The entry lives in the LMDB table "cells", replicated with the rest. */
#define DN_CELL_VER        1
#define DN_CELL_BUCKET_MAX 255
#define DN_CELL_KEY_MAX    1024

/* One cell's entry (the value of the cells table, decoded). */
struct dn_cell_rec {
	uint32_t drive;
	bool pending;
	bool retired; /* its record replaced it or was deleted: readers may still be at it */
	unsigned k, m;
	uint32_t cell_size, spg, chunk;
	uint64_t length;
	uint64_t created_ns; /* CLOCK_REALTIME: the collector's age survives a restart */
	uint64_t touched_ns; /* CLOCK_REALTIME of the last touch; 0: never (entries before it) */
	char *bucket, *key;
	uint32_t ncrc;
	uint32_t *crcs; /* one per chunk of the file, the last one short */
};
void dn_cell_rec_fini(struct dn_cell_rec *r);
/* The entry as the cell's info (id its name): its strings move into *info, the rest of r
 * is freed. */
void dn_cell_rec_take_info(struct dn_cell_rec *r, struct dn_cell_id id, struct dn_cell_info *info);

/* ---- dn_meta_cell.c: the cells table ---- */
/* 1 when the cell has an entry, 0 when not, or -errno. */
int dn_meta_cell_exists(struct dn_meta *m, struct dn_cell_id id);
/* The entry of a cell into *rec (fini it): 0, ZC_E(ZC_NO_KEY), -EBADMSG, -EIO. */
int dn_meta_cell_get(struct dn_meta *m, struct dn_cell_id id, struct dn_cell_rec *rec);
/* One new entry of a batch; err is an output (ZC_E(ZC_CELL_EXISTS) when the cell has one
 * already). */
struct dn_meta_cell_put {
	struct dn_cell_id id;
	const struct dn_cell_rec *rec;
	int err;
};
/* Record n new entries in one transaction per replica. 0 with each err set, or -errno. */
int dn_meta_cell_put_batch(struct dn_meta *m, struct dn_meta_cell_put *v, size_t n);
/* Clear the pending flag: 0 (also when already committed), ZC_E(ZC_NO_KEY), -errno. */
int dn_meta_cell_commit(struct dn_meta *m, struct dn_cell_id id);
/* Remove the entry; its drive in *drive. 1 removed, 0 there was none, or -errno. */
int dn_meta_cell_del(struct dn_meta *m, struct dn_cell_id id, uint32_t *drive);
/* Remove the entry only if it is still as *expect says (created, touched, pending,
 * retired): one transaction, so a touch or commit that came meanwhile wins. 1 removed, 0
 * not (absent or changed), -errno; its drive in *drive. */
int dn_meta_cell_del_if(struct dn_meta *m, const struct dn_cell_info *expect, uint32_t *drive);
/* Set touched_ns to now_ns; retire: also mark it retired (then only if it was not: a
 * repeated retirement keeps the first time). 1 changed, 0 not, ZC_E(ZC_NO_KEY), -errno. */
int dn_meta_cell_touch(struct dn_meta *m, struct dn_cell_id id, bool retire, uint64_t now_ns);
/* Set touched_ns to now_ns on every retired entry of extent (a read of the extent on this
 * node). The number changed, or -errno. */
int dn_meta_cell_touch_retired(struct dn_meta *m, uint64_t extent, uint64_t now_ns);
enum dn_meta_cell_which {
	DN_META_CELLS_ALL,
	DN_META_CELLS_PENDING, /* pending, not retired, created and touched before than_ns */
	DN_META_CELLS_RETIRED, /* retired, touched before than_ns */
};
/* Entries after *after (NULL: from the first) in name order, at most limit (0: all), of
 * kind which. Free with dn_cell_list_free. */
int dn_meta_cell_list(struct dn_meta *m, const struct dn_cell_id *after,
                      enum dn_meta_cell_which which, uint64_t than_ns, size_t limit,
                      struct dn_cell_info **out, size_t *n);

#endif
