/* engine/: what the engine's files share (dn_store.h is the object they run on); never
 * included from another layer. */
#ifndef ZEST_DN_INTERNAL_H
#define ZEST_DN_INTERNAL_H

#include <liburing.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "dn.h"
#include "dn_store.h"
#include "ec.h"
#include "zc.h"
#include "zc_crc.h"

/* The commit thread's batch: Write commits and metadata calls in one transaction. */
void dn_commit_batch(struct dn_job **jobs, size_t n);
/*
 * dn_mcall.c, for dn_commit_batch: is job a Delete or Compose? prepare: fill p and *s for
 * the batch's transaction, or end the call already refused (returns false); finish: unlink
 * what p freed, answer, free the job (a compose whose part changed runs again alone).
 */
bool dn_mcall_job(const struct dn_job *job);
bool dn_mcall_prepare(struct dn_job *job, struct dn_meta_put *p, struct dn_store **s);
void dn_mcall_finish(struct dn_job *job, struct dn_meta_put *p);

/*
 * A compose's new object from its parts, read outside the write transaction: pieces, size,
 * CRC32C and scheme in *o (zeroed first; free o->pieces). 0, ZC_E(ZC_NO_KEY) /
 * ZC_E(ZC_NO_BUCKET) (a part or its bucket), ZC_E(ZC_CHANGED) (a pinned part's ETag
 * differs), -ENOMEM.
 */
int dn_compose_parts(struct dn_store *s, const char *bucket, const char *const *part_buckets,
                     const char *const *parts, const char *const *part_etags, size_t nparts,
                     struct dn_obj *o);
/* At open (dn_collect.c): refuse drive folders of another store or index (-EINVAL), name
 * new ones (or -errno); then remove the files no committed extent and no cell entry owns. */
int dn_store_check_identity(struct dn_store *s);
void dn_store_collect(struct dn_store *s);
/*
 * Extents a read holds. A read holds each extent of the version it opened from right
 * after looking the object up until it has closed that extent's cell files. An extent the
 * metadata frees meanwhile (a delete, an overwrite) keeps its files until the last hold
 * goes, and the holders still find it (dn_extent_get_held): a read that opened a version
 * reads it to the end. An extent freed before the hold is not live: that version is gone
 * (ZC_E(ZC_NO_KEY)), never a read of cells that are not there (-EIO).
 */
int dn_extent_hold(struct dn_store *s, uint64_t id); /* 0 or -ENOMEM */
/* The last hold's going unlinks the files of an extent freed meanwhile. */
void dn_extent_unhold(struct dn_store *s, uint64_t id);
/* Extent id, from the metadata or, freed while held, the freed copy (*borrowed: e is
 * the hold's, valid until dn_extent_unhold; do not free it). 0, ZC_E(ZC_NO_KEY), -errno. */
int dn_extent_get_held(struct dn_store *s, uint64_t id, struct dn_extent *e, bool *borrowed);
/* 1: extent id is in the metadata or freed while held; 0: gone; < 0 an error. */
int dn_extent_held_live(struct dn_store *s, uint64_t id);
/* Takes e's arrays: unlinks its files (now, or at the last hold) and frees it. */
void dn_extent_drop(struct dn_store *s, struct dn_extent *e);
/* Holds left at close (none when every read was closed): unlink what they deferred. */
void dn_extent_holds_fini(struct dn_store *s);
/* Unlink and free the n extents of v (a delete's or an overwrite's freed ones), then v. */
void dn_extents_release(struct dn_store *s, struct dn_extent *v, size_t n);
/*
 * Reading stripes of one extent through the drive rings: the cells a stripe needs are read
 * in parallel (one READ SQE per cell, each on its own drive), then checked chunk by chunk.
 * Files are opened once per block group. One context per reader thread; shared by dn_read
 * and dn_heal.
 */
struct dn_rctx {
	struct dn_store *s;
	const struct dn_extent *e;
	uint32_t group; /* whose files are open */
	struct dn_file *files[EC_MAX_CELLS];
	uint32_t open_failed; /* cells whose file could not be opened */
	struct dn_io io[EC_MAX_CELLS];
	pthread_mutex_t lock;
	pthread_cond_t cond;
	unsigned pending;
};
void dn_rctx_init(struct dn_rctx *r, struct dn_store *s, const struct dn_extent *e);
void dn_rctx_fini(struct dn_rctx *r);
/*
 * Fill cells[c] (cell bytes each, zero padded) for every c in need; when a needed cell is
 * bad, read others and rebuild (sets *degraded). skip: cells never to trust (heal).
 */
int dn_read_stripe(struct dn_rctx *r, uint32_t group, uint32_t stripe, uint32_t need, uint32_t skip,
                   uint8_t **cells, bool *degraded);
void dn_metrics_stop(struct dn_store *s);
/* Start / stop the background healer thread (no-op when heal_interval_ns is 0). */
int dn_healer_start(struct dn_store *s);
void dn_healer_stop(struct dn_store *s);
/* A committed write left cells missing: the healer has work at its next turn. */
static inline void
dn_heal_note(struct dn_store *s)
{
	atomic_store(&s->heal_pending, true);
}

#endif
