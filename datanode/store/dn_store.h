/*
 * dn_store: the store object the engine (engine/, dn.h) and the cell store (cells/) both run
 * on, and what they share (datanode/store/, its one public header): the options, the
 * drives and the metadata, the pool of io requests, the in-flight payload credit, the
 * codec cache, the commit thread that runs their jobs (metadata commits, unlinks,
 * callbacks) off the drive threads, the placement of a block group, and admission
 * (dn_admission.c), which lets Writes in by the drives' latency and reserves their
 * buffers. It calls the layers below only (drive/, meta/).
 *
 * The engine's own state (healer, metrics) lives in the object too, written only by
 * engine/ files; the cell store's is behind s->cells (cells/). The engine and the cell
 * store are siblings: neither includes nor calls the other. What the engine's open, close,
 * restart sweep and scrubber need from the cell store they reach through struct
 * dn_store_side (dn_store_side.h), a table the cell store exports (dn_cells_side) and the
 * binding names in the options (dn_store_opts.side).
 */
#ifndef ZEST_DN_STORE_H
#define ZEST_DN_STORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dn_drive.h"
#include "dn_meta.h"
#include "dn_store_side.h"
#include "ec.h"

#define DN_MAX_DRIVES 64

/*
 * Read data delivered in order (the engine's dn_read, the cell store's dn_cell_read): seg
 * is valid for the call; to keep the bytes, take zc_ref_get(seg->ref) and put it later.
 * Return < 0 from the callback to stop (that value is returned by the read).
 */
typedef int (*dn_read_cb)(void *arg, uint64_t offset, const struct zc_seg *seg);

struct dn_store_opts {
	const char *const *drives; /* drive folders, >= k + m; order is the drive index */
	unsigned ndrives;
	/* Cluster mode: only the cell store is written, so >= 1 drive will do (k, m are the
	 * scheme of the cells the node coordinates; single-node writes need k + m drives). */
	bool cells_only;
	/* bytes each drive keeps free: a cell that would leave less goes to another drive,
	 * none left is -ENOSPC (cluster mode's --reserve; 0 otherwise) */
	uint64_t cell_reserve;
	unsigned k, m;              /* default scheme: 4 + 2 */
	size_t cell_size;           /* multiple of 4096 and of chunk_size; default 1 MiB */
	size_t chunk_size;          /* bytes per CRC32C; default 64 KiB */
	unsigned stripes_per_group; /* block-group size in stripes; default 16 */
	unsigned write_quorum;      /* cells that must be durable per group; 0: k + 1 */
	unsigned queue_depth;       /* SQEs in flight per drive; default 64 */
	unsigned parity_bufs;       /* registered cell buffers per drive; default 32 */
	uint64_t inflight_cap;      /* payload bytes writes hold refs on; default 1 GiB */
	uint64_t wait_ns;           /* longest wait for a pool buffer / credit; default 2 s */
	bool no_direct;             /* never try O_DIRECT for parity */
	/* Data cells: false (buffered; the engine's default, zest-datanode's is direct) writes
	 * them WRITEV from the payload's own buffers into the page cache; true (direct) copies
	 * them once into registered aligned pool buffers and writes those O_DIRECT. Every
	 * drive must accept O_DIRECT, and the pool per drive is twice parity_bufs (it holds
	 * data cells too). */
	bool data_direct;
	bool discard; /* accept and drop payload (benchmark of the transport) */
	/* Admission (item 7): write-latency EWMA limits, 0 disables a level. */
	uint64_t adm_l1_ns, adm_l2_ns, adm_l3_ns;
	unsigned adm_queue;     /* Write calls allowed to wait at L2; default 64 */
	uint64_t meta_map_size; /* LMDB map size; default 1 GiB */
	/* A full drive's free space is re-checked (statvfs) at most this often, by the next
	 * write that would use it; 0: at every such write. Default 1 s. */
	uint64_t full_probe_ns;
	/* Background healer: this often, rebuild the cells writes recorded as missing on
	 * drives that are writable again (a full drive with room, a transient error). Only
	 * cells marked missing; a failed drive still needs `zest-datanode heal`. 0: off. */
	uint64_t heal_interval_ns;
	/* The layer beside the engine on this store (zest-datanode: the cell store's
	 * dn_cells_side, set by the binding), borrowed for the store's life; NULL: none, the
	 * store holds the engine's extents only. */
	const struct dn_store_side *side;
};

/* Fill opts with the defaults above (drives left NULL). */
void dn_store_opts_default(struct dn_store_opts *opts);

/* ---- admission (dn_admission.c): Writes let in by the drives' latency and buffers ---- */
enum dn_adm_level { DN_ADM_OK = 0, DN_ADM_PACE = 1, DN_ADM_QUEUE = 2, DN_ADM_REFUSE = 3 };
int dn_admission_level(struct dn_store *s);

/*
 * Admission without holding a thread (the rpc binding: a Write waiting at L1 or L2 must not
 * occupy a write worker). A parked Write is a struct dn_admit in the caller's storage; the
 * store's admission thread (dn-admit) calls cb(arg, err) exactly once when it is let in
 * (err 0), its queue wait ran out (-EAGAIN) or the store closes (-ECANCELED). cb runs on
 * that thread and must not block; once it is called the store no longer touches *a.
 */
typedef void (*dn_admit_cb)(void *arg, int err);
/* Cell buffers reserved for one Write: one on each drive of `drives` (bit d: drive d). */
struct dn_claim {
	uint64_t drives;
	uint8_t place[32]; /* placed: the drives of the Write's only block group, cell order */
	bool placed;
};
struct dn_admit {
	/* private to dn_admission.c, under the store's admission lock */
	struct dn_admit *prev, *next;
	uint64_t due_ns;   /* paced: let in at */
	uint64_t until_ns; /* queued: refused at (set when first parked) */
	bool queued;       /* waits for the level to fall below L2, or for its buffers */
	bool bufwait;      /* its buffers were not free: waits for them, first come first in */
	bool parked;
	int err;
	dn_admit_cb cb;
	void *arg;
	/* set by dn_admit_bufs before dn_admission_try; claim is taken when let in */
	bool bufs;
	unsigned k, m, base;
	uint64_t size;
	bool size_known;
	struct dn_claim claim;
};
/*
 * The Write *a asks for will write through this store's drive pools (not --cluster): let it
 * in only together with a reservation of the cell buffers it can hold at once (one per
 * drive of its block group: its parity cells' and, with data_direct, the data cells its
 * size reaches; every drive when it spans more groups or its size is unknown). A Write
 * whose buffers are reserved by others waits in the admission queue, first come first in,
 * holding no thread and no buffer. dn_write_begin_admitted takes the reservation over.
 */
void dn_admit_bufs(struct dn_admit *a, unsigned k, unsigned m, uint64_t size, bool size_known);
/*
 * Ask to start a Write now: 0 admitted, -EAGAIN refused (above L3, or the L2 queue holds
 * adm_queue Writes), 1 parked (paced above L1, queued above L2): cb follows. Any thread;
 * cheap (atomics and one short lock), never waits.
 */
int dn_admission_try(struct dn_store *s, struct dn_admit *a, dn_admit_cb cb, void *arg);
/*
 * Take a parked Write out (its call was cancelled): true when it was parked (cb will not
 * run), false when cb has run or is running. Any thread.
 */
bool dn_admission_cancel(struct dn_store *s, struct dn_admit *a);

/* Wake admission's waiters to read the level again: it moved without a completion (a test
 * build's "admission.latency" fault, zc_fault.h). Any thread. */
void dn_admission_kick(struct dn_store *s);

/* Blocking admission on the caller's thread (dn_write_begin): 0, -EAGAIN, -ECANCELED;
 * e (dn_admit_bufs set, or zeroed) gets the claim. */
int dn_admission_enter(struct dn_store *s, struct dn_admit *e);
/* Give back a Write's reserved buffers (zeroes *c); lets waiting Writes in. Any thread. */
void dn_admission_release(struct dn_store *s, struct dn_claim *c);
/* Start / stop dn-admit; stop fails what is still parked with -ECANCELED. */
int dn_admission_start(struct dn_store *s);
void dn_admission_stop(struct dn_store *s);
/* A write completed on d (the drives' on_write_done hook). */
void dn_admission_note(struct dn_drive *d, uint64_t latency_ns);

/* ---- the store object ---- */
struct dn_cells;
typedef void (*dn_metrics_hook)(FILE *out, void *arg);

/* Admission's state (engine/dn_admission.c). */
struct dn_adm {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* wakes dn-admit: a new entry, a completion while Writes queue */
	struct dn_admit *head, *tail;  /* parked Writes, paced and queued, in arrival order */
	atomic_uint waiting;           /* queued ones; written under lock, completions read it */
	atomic_uint parked;            /* all of them (metrics) */
	unsigned bufwait;              /* queued ones waiting for their buffers (under lock) */
	pthread_t thread;
	bool thread_ok, stop;
};

/* Work handed to the store's commit thread (metadata commits, unlinks, callbacks). */
struct dn_job {
	struct dn_job *next;
	void (*fn)(struct dn_job *job);
	/* When set, runs of queued jobs with the same batch function go together (<= 64). */
	void (*batch)(struct dn_job **jobs, size_t n);
};

struct dn_ext_hold;
#define DN_HOLD_BUCKETS 64

struct dn_store {
	struct dn_store_opts o;
	struct dn_drive drives[DN_MAX_DRIVES];
	unsigned ndrives;
	struct ec_codec *codecs[EC_MAX_CELLS + 1][EC_MAX_CELLS + 1];
	pthread_mutex_t codec_lock;
	struct dn_meta *meta;
	/* Drives (bit d) that came back at open without their identity file into a store that
	 * exists: emptied or replaced, their files lost (dn_store_check_identity). */
	uint64_t emptied;
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
	uint64_t jobs_deferred; /* under commit_lock: jobs ever queued (tests wait on it) */
	/* Writes (objects and cells) begun and not yet freed: close waits for zero. */
	atomic_uint live_writes;
	pthread_mutex_t live_lock;
	pthread_cond_t live_cond; /* live_writes fell to zero */
	/* Counters. */
	atomic_uint_fast64_t objects_committed, degraded_reads;
	atomic_uint_fast64_t adm_refused, adm_paced, adm_queued, adm_bufwaits, cells_healed;
	atomic_uint_fast64_t mcalls, mcall_txns;
	/* Cell files of unfinished writes removed: by the sweep at open, by a failed write */
	atomic_uint_fast64_t cells_swept_open, cells_swept_failed;
	atomic_uint_fast64_t align_copied; /* data_direct: payload copied into pool buffers */
	/* Background healer (dn_heal.c): woken every heal_interval_ns, works when pending. */
	atomic_bool heal_pending;
	pthread_t heal_thread;
	bool heal_ok;
	atomic_bool heal_stop;
	pthread_mutex_t heal_lock;
	pthread_cond_t heal_cond;
	/* Extents reads hold (dn_extent_hold): a freed one's unlink waits for the last. */
	pthread_mutex_t hold_lock;
	struct dn_ext_hold *holds[DN_HOLD_BUCKETS];
	/* Metrics. */
	dn_metrics_hook hook;
	void *hook_arg;
	int metrics_fd;
	int metrics_pipe[2];
	pthread_t metrics_thread;
	bool metrics_on;
};

/* Run job->fn on the commit thread (any thread may call). */
void dn_store_defer(struct dn_store *s, struct dn_job *job);

/* The codec for k + m, made once and kept until close: 0 and *out, or -errno. */
int dn_store_codec(struct dn_store *s, unsigned k, unsigned m, struct ec_codec **out);
struct dn_io *dn_io_get(struct dn_store *s, uint64_t wait_ns);
void dn_io_put(struct dn_store *s, struct dn_io *io);
/*
 * A WRITEV straight from payload segments, as both the engine's data cells and the cell
 * store's cells build it: dn_iov_start takes a request from the pool (waiting up to
 * wait_ns; NULL: empty, -EAGAIN for the caller) with no iovec yet; dn_iov_add appends
 * [p, p + len), taking its own ref on ref (may be NULL) and counting len as in-flight
 * credit (the caller keeps niov < DN_IOV_MAX); dn_iov_release drops what the request
 * holds, the refs and the credit, once its write completed or when it is dropped unsent
 * (the request itself is the caller's to put).
 */
struct dn_io *dn_iov_start(struct dn_store *s);
void dn_iov_add(struct dn_store *s, struct dn_io *io, const uint8_t *p, size_t len,
                struct zc_ref *ref);
void dn_iov_release(struct dn_store *s, struct dn_io *io);
/*
 * In-flight payload: every byte a write holds a segment reference for (filling cells and
 * submitted writes) counts until its completion. Adding never blocks; a writer waits at
 * the start of dn_write_data, after submitting what it holds, while the store is over cap.
 */
void dn_credit_add(struct dn_store *s, uint64_t bytes);
bool dn_credit_over(struct dn_store *s);
int dn_credit_wait(struct dn_store *s);
void dn_credit_give(struct dn_store *s, uint64_t bytes);

/* Durable cells a group of a k+m write (n = k + m cells) needs to commit: the store's
 * write_quorum, else k + 1, within [k, n]. */
unsigned dn_store_quorum(const struct dn_store *s, unsigned k, unsigned n);
/*
 * Place a block group of n cells from rotation base: writable drives first, then failed or
 * full ones (their cells are missing from the start). drives[c]: cell c's drive; bit c of
 * *missing / *full (optional): not writable / full. Admission reserves buffers where a
 * Write will go and the Write keeps that placement: one function for both.
 */
void dn_store_place(struct dn_store *s, unsigned base, unsigned n, uint8_t *drives,
                    uint32_t *missing, uint32_t *full);

/* A write (object or cell) begins / is freed: close waits for those still live. */
void dn_store_live_get(struct dn_store *s);
void dn_store_live_put(struct dn_store *s);
/* Wait until no write is live, at most wait_ns; past it, log how many are and return
 * -ETIMEDOUT (close goes on). */
int dn_store_live_wait(struct dn_store *s, uint64_t wait_ns);

/*
 * The store came up without what its metadata knew: the metadata is empty (a new store, or
 * one back with every copy lost), or a drive came back empty (its entries were dropped at
 * open by the layer beside the engine). Whoever keeps a cluster's view of this node's
 * cells must check them all again. Any thread after open.
 */
bool dn_store_lost_at_open(struct dn_store *s);

/* The store layer's part of open and close: locks and the io pool (dn_store_base.c), the
 * commit thread (dn_jobs.c). Stop the thread after the drives (their last completions
 * queue jobs). */
int dn_store_base_init(struct dn_store *s);
int dn_store_commit_start(struct dn_store *s);
void dn_store_commit_stop(struct dn_store *s);
void dn_store_base_fini(struct dn_store *s);

#endif
