/* datanode private types shared by its source files; never included from another module. */
#ifndef ZEST_DN_INTERNAL_H
#define ZEST_DN_INTERNAL_H

#include <liburing.h>
#include <lmdb.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/uio.h>

#include "dn.h"
#include "ec.h"
#include "zc.h"
#include "zc_crc.h"

#define DN_IOV_MAX      64   /* iovecs per WRITEV SQE */
#define DN_FILE_SLOTS   4096 /* registered-file table per ring */
#define DN_DIRECT_ALIGN 4096 /* O_DIRECT offsets and lengths: the drives' physical block */
#define DN_HIST_BUCKETS 12

/* ---- drives (dn_drive.c) ---- */
enum dn_io_op { DN_IO_WRITEV, DN_IO_WRITE_FIXED, DN_IO_FSYNC, DN_IO_FSYNC_DIR, DN_IO_READ };

struct dn_io;
typedef void (*dn_io_cb)(struct dn_io *io);

struct dn_file {
	struct dn_drive *drive;
	int fd;
	int slot; /* registered-file index */
	bool direct;
};

/* One request to a drive thread; owned by the submitter until its callback runs. */
struct dn_io {
	struct dn_io *next;
	enum dn_io_op op;
	struct dn_file *file;
	uint64_t off;
	struct iovec iov[DN_IOV_MAX];
	struct zc_ref *refs[DN_IOV_MAX]; /* one ref per iovec, dropped by the completion */
	unsigned niov;
	int buf_index; /* WRITE_FIXED: pool buffer, returned to the pool by the completion */
	size_t len;
	uint64_t t_enq;
	int res;
	dn_io_cb cb;
	void *arg;
	void *grp;     /* the writer's block group this io belongs to */
	unsigned cell; /* cell index within the group */
	bool heap;     /* malloc'd (fsync), not from the store's io pool */
	bool dsync;    /* a write durable on completion (RWF_DSYNC): its file needs no fdatasync */
};

struct dn_drive {
	struct dn_store *store;
	unsigned idx;
	char *root;
	struct io_uring ring;
	bool ring_ok;
	pthread_t thread;
	bool thread_ok;
	int efd;
	uint64_t efd_val;
	pthread_mutex_t qlock;
	struct dn_io *qhead, *qtail;
	bool stop;
	unsigned inflight; /* drive thread only */
	unsigned qd;
	bool direct_ok;
	bool fixed_ok; /* the pool is registered: parity goes out as WRITE_FIXED */
	atomic_int state;
	atomic_uint_fast64_t full_since_ns; /* FULL: when marked or last re-probed */
	atomic_uint_fast64_t delay_ns;
	atomic_uint inject_errors;
	/* Registered parity buffers: a free stack under plock. */
	uint8_t *pool_mem;
	size_t buf_size;
	unsigned pool_n;
	int *pool_free;
	unsigned pool_top;
	pthread_mutex_t plock;
	pthread_cond_t pcond;
	atomic_uint_fast64_t pool_waits, pool_timeouts;
	unsigned claimed; /* buffers reserved by admitted Writes (dn_admission.c, adm.lock) */
	/* Registered-file slots. */
	pthread_mutex_t slock;
	uint8_t slot_used[DN_FILE_SLOTS];
	/* Statistics. */
	atomic_uint_fast64_t ewma_ns;
	atomic_uint_fast64_t last_done_ns;
	atomic_uint_fast64_t write_bytes;
	atomic_uint_fast64_t crc_mismatches; /* chunks read from here that failed their CRC */
	atomic_uint_fast64_t hist[DN_HIST_BUCKETS + 1]; /* +Inf last */
	atomic_uint_fast64_t hist_sum_ns;
	atomic_uint_fast64_t hist_count;
	atomic_uint writes_inflight;
};

extern const double dn_hist_bounds_s[DN_HIST_BUCKETS];

int dn_drive_init(struct dn_drive *d, struct dn_store *s, unsigned idx, const char *root);
void dn_drive_fini(struct dn_drive *d);
/* Queue io to the drive thread (any thread). The callback runs on the drive thread. */
void dn_drive_submit(struct dn_drive *d, struct dn_io *io);
/* A file's fdatasync or a folder's fsync (op DN_IO_FSYNC, DN_IO_FSYNC_DIR) of f, done
 * cb(arg). Not the data path (a few per write), so allocated (io->heap: the completion
 * frees it) rather than pooled. NULL: no memory. The caller submits it to f->drive. */
struct dn_io *dn_io_create_sync(struct dn_file *f, enum dn_io_op op, dn_io_cb cb, void *arg);
/* Open path on d and register it; direct asks for O_DIRECT (if the drive allows it). */
int dn_file_open(struct dn_drive *d, const char *path, bool direct, struct dn_file **out);
/* Open an existing cell file on d for reading through the ring. */
int dn_file_open_read(struct dn_drive *d, const char *path, struct dn_file **out);
/* Open a directory on d for IORING_OP_FSYNC (makes new names in it durable). */
int dn_dir_open(struct dn_drive *d, const char *path, struct dn_file **out);
void dn_file_close(struct dn_file *f);
/* Take a registered buffer (waits up to wait_ns); returns its index or -EAGAIN. */
int dn_pool_get(struct dn_drive *d, uint64_t wait_ns);
void dn_pool_put(struct dn_drive *d, int index);
static inline uint8_t *
dn_pool_buf(struct dn_drive *d, int index)
{
	return d->pool_mem + (size_t)index * d->buf_size;
}
/* Not failed: its cells can be read (a full drive is readable). */
static inline bool
dn_drive_ok(struct dn_drive *d)
{
	return atomic_load(&d->state) != DN_DRIVE_FAILED;
}
/* FULL -> OK when statvfs finds room again; at most once per full_probe_ns. */
bool dn_drive_reprobe(struct dn_drive *d);
/* Can new cells go to d? OK, or FULL and a due re-probe found room. */
static inline bool
dn_drive_writable(struct dn_drive *d)
{
	int st = atomic_load(&d->state);

	return st == DN_DRIVE_OK || (st == DN_DRIVE_FULL && dn_drive_reprobe(d));
}
/* A write on d got ENOSPC: OK -> FULL (a failed drive stays failed). */
void dn_drive_mark_full(struct dn_drive *d);

/* ---- layout (dn_layout.c) ---- */
/* The immutable shape of an extent: one write's cells, cut into block groups. */
struct dn_geom {
	uint64_t size;
	unsigned k, m;
	uint32_t cell;
	uint32_t spg;
	uint32_t chunk;
	/* Parity cells as long as their stripe's longest data cell (extents written since
	 * EXT_VER 2); false: every parity cell is `cell` bytes (older extents). */
	bool short_parity;
};
static inline uint64_t
dn_geom_stripe_bytes(const struct dn_geom *g)
{
	return (uint64_t)g->k * g->cell;
}
static inline uint64_t
dn_geom_group_bytes(const struct dn_geom *g)
{
	return dn_geom_stripe_bytes(g) * g->spg;
}
uint32_t dn_geom_ngroups(const struct dn_geom *g);
uint32_t dn_geom_nstripes(const struct dn_geom *g, uint32_t group);
/* Bytes in cell file c (0..k+m) of group. */
uint64_t dn_geom_file_len(const struct dn_geom *g, uint32_t group, unsigned c);
/* Bytes of cell j (data or parity) in stripe s of group (0 past the end). A parity cell is
 * as long as the stripe's first, longest data cell, or `cell` without short_parity. */
uint32_t dn_geom_cell_len(const struct dn_geom *g, uint32_t group, uint32_t stripe, unsigned j);
/* Path of a cell file: <root>/data/<xx>/<id>.<group>.<cell>; buf has PATH_MAX. */
int dn_layout_path(const char *root, uint64_t id, uint32_t group, unsigned cell, char *buf,
                   size_t len);
int dn_layout_mkdirs(const char *root, uint64_t id);
/* Parse a cell file name back to its extent id; -EINVAL when it is not one. */
int dn_layout_parse(const char *name, uint64_t *id);

/* ---- metadata (dn_meta_*.c, dn_meta_internal.h) ---- */
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
int dn_meta_open(struct dn_store *s, struct dn_meta **out);
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
/* Test hook: the next write transaction on drive's replica fails with err (e.g. -ENOSPC)
 * before it commits, as a drive that filled up would make it. */
void dn_meta_inject_error(struct dn_meta *m, unsigned drive, int err);
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
int dn_meta_put_batch(struct dn_meta *m, struct dn_meta_put *v, size_t n);
int dn_meta_del_obj(struct dn_meta *m, const char *bucket, const char *key,
                    struct dn_extent **freed, size_t *nfreed);
int dn_meta_update_extent(struct dn_meta *m, struct dn_extent *e);
/* Set cell's missing mark in one transaction, if it is still on drive and unmarked (the
 * scrubber found it bad): 1 marked, 0 nothing to do, -ENOENT (extent gone), -errno. */
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

/* ---- admission (dn_admission.c) ---- */
struct dn_adm {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* wakes dn-admit: a new entry, a completion while Writes queue */
	struct dn_admit *head, *tail;  /* parked Writes, paced and queued, in arrival order */
	atomic_uint waiting;           /* queued ones; written under lock, completions read it */
	atomic_uint parked;            /* all of them (metrics) */
	unsigned bufwait;              /* queued ones waiting for their buffers (under lock) */
	atomic_uint_fast64_t floor_ns; /* dn_admission_inject_latency */
	pthread_t thread;
	bool thread_ok, stop;
};
/* Blocking admission on the caller's thread (dn_write_begin): 0, -EAGAIN, -ECANCELED;
 * e (dn_admit_bufs set, or zeroed) gets the claim. */
int dn_admission_enter(struct dn_store *s, struct dn_admit *e);
/* Give back a Write's reserved buffers (zeroes *c); lets waiting Writes in. Any thread. */
void dn_admission_release(struct dn_store *s, struct dn_claim *c);
/*
 * Place a block group of n cells from rotation base: writable drives first, then failed or
 * full ones (their cells are missing from the start). drives[c]: cell c's drive; bit c of
 * *missing / *full (optional): not writable / full.
 */
void dn_write_place(struct dn_store *s, unsigned base, unsigned n, uint8_t *drives,
                    uint32_t *missing, uint32_t *full);
/* Start / stop dn-admit; stop fails what is still parked with -ECANCELED. */
int dn_admission_start(struct dn_store *s);
void dn_admission_stop(struct dn_store *s);
void dn_admission_note(struct dn_drive *d, uint64_t latency_ns);

/* ---- the store ---- */
/* Work handed to the store's commit thread (metadata commits, unlinks, callbacks). */
struct dn_job {
	struct dn_job *next;
	void (*fn)(struct dn_job *job);
	/* When set, runs of queued jobs with the same batch function go together (<= 64). */
	void (*batch)(struct dn_job **jobs, size_t n);
};
#define DN_BATCH_MAX 64

struct dn_store {
	struct dn_store_opts o;
	struct dn_drive drives[DN_MAX_DRIVES];
	unsigned ndrives;
	struct ec_codec *codecs[EC_MAX_CELLS + 1][EC_MAX_CELLS + 1];
	pthread_mutex_t codec_lock;
	struct dn_meta *meta;
	struct dn_cells *cells; /* cluster mode's cell writes in progress (dn_cell.c) */
	struct dn_adm adm;
	atomic_uint next_base;
	/* In-flight payload credit. */
	pthread_mutex_t credit_lock;
	pthread_cond_t credit_cond;
	uint64_t inflight;
	/* Pool of write requests, sized to fill every ring twice. */
	struct dn_io *io_mem;
	struct dn_io *io_free;
	pthread_mutex_t io_lock;
	pthread_cond_t io_cond;
	/* The commit thread: keeps LMDB syncs and unlinks off the drive threads. */
	pthread_t commit_thread;
	bool commit_ok, commit_stop;
	pthread_mutex_t commit_lock;
	pthread_cond_t commit_cond;
	struct dn_job *jhead, *jtail;
	uint64_t jobs_deferred;  /* under commit_lock: jobs ever queued (tests wait on it) */
	atomic_uint live_writes; /* begun and not yet freed; close waits for zero */
	/* Counters. */
	atomic_uint_fast64_t objects_committed, degraded_reads;
	atomic_uint_fast64_t adm_refused, adm_paced, adm_queued, adm_bufwaits, cells_healed;
	atomic_uint_fast64_t mcalls, mcall_txns;
	atomic_uint_fast64_t align_copied; /* data_direct: payload copied into pool buffers */
	/* Sync requests the rings ran: fdatasyncs of files, fsyncs of folders, and writes
	 * that carried their own sync (RWF_DSYNC). */
	atomic_uint_fast64_t file_syncs, dir_syncs, dsync_writes;
	/* Background healer (dn_heal.c): woken every heal_interval_ns, works when pending. */
	atomic_bool heal_pending;
	pthread_t heal_thread;
	bool heal_ok;
	atomic_bool heal_stop;
	pthread_mutex_t heal_lock;
	pthread_cond_t heal_cond;
	/* Metrics. */
	dn_metrics_hook hook;
	void *hook_arg;
	int metrics_fd;
	int metrics_pipe[2];
	pthread_t metrics_thread;
	bool metrics_on;
};

int dn_store_codec(struct dn_store *s, unsigned k, unsigned m, struct ec_codec **out);
/* Run job->fn on the commit thread (any thread may call). */
void dn_store_defer(struct dn_store *s, struct dn_job *job);
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
struct dn_io *dn_io_get(struct dn_store *s, uint64_t wait_ns);
void dn_io_put(struct dn_store *s, struct dn_io *io);
/*
 * In-flight payload: every byte a write holds a segment reference for (filling cells and
 * submitted writes) counts until its completion. Adding never blocks; a writer waits at
 * the start of dn_write_data, after submitting what it holds, while the store is over cap.
 */
void dn_credit_add(struct dn_store *s, uint64_t bytes);
bool dn_credit_over(struct dn_store *s);
int dn_credit_wait(struct dn_store *s);
void dn_credit_give(struct dn_store *s, uint64_t bytes);
/*
 * A compose's new object from its parts, read outside the write transaction: pieces, size,
 * CRC32C and scheme in *o (zeroed first; free o->pieces). 0, -ENOENT / ZC_NO_BUCKET (a part
 * or its bucket), -EAGAIN (a pinned part's ETag differs), -ENOMEM.
 */
int dn_compose_parts(struct dn_store *s, const char *bucket, const char *const *part_buckets,
                     const char *const *parts, const char *const *part_etags, size_t nparts,
                     struct dn_obj *o);
/* Unlink every file of an extent (best effort). */
void dn_extent_unlink(struct dn_store *s, const struct dn_extent *e);
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
/* now + wait_ns on CLOCK_REALTIME, for pthread_cond_timedwait. */
void dn_deadline(struct timespec *ts, uint64_t wait_ns);
/* Start / stop the background healer thread (no-op when heal_interval_ns is 0). */
int dn_healer_start(struct dn_store *s);
void dn_healer_stop(struct dn_store *s);
/* A committed write left cells missing: the healer has work at its next turn. */
static inline void
dn_heal_note(struct dn_store *s)
{
	atomic_store(&s->heal_pending, true);
}
char *dn_strdup(const char *s);

#endif
