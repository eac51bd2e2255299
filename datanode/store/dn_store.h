/*
 * dn_store: the store object the engine (engine/, dn.h) and the cell store (cells/) both run
 * on, and what they share (datanode/store/, its one public header): the options, the
 * drives and the metadata, the pool of io requests, the in-flight payload credit, the
 * codec cache and the commit thread that runs their jobs (metadata commits, unlinks,
 * callbacks) off the drive threads. It calls the layers below only (drive/, meta/).
 *
 * The engine's own state (admission, healer, metrics) lives in the object too, written
 * only by engine/ files; the cell store's is behind s->cells (cells/).
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
#include "ec.h"

#define DN_MAX_DRIVES 64

struct dn_store_opts {
	const char *const *drives; /* drive folders, >= k + m; order is the drive index */
	unsigned ndrives;
	/* Cluster mode: only the cell store is written, so >= 1 drive will do (k, m are the
	 * scheme of the cells the node coordinates; single-node writes need k + m drives). */
	bool cells_only;
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
};

/* Fill opts with the defaults above (drives left NULL). */
void dn_store_opts_default(struct dn_store_opts *opts);

/* ---- the store object ---- */
struct dn_admit;
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
	atomic_uint_fast64_t floor_ns; /* dn_admission_inject_latency */
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
	/* Writes (objects and cells) begun and not yet freed: close waits for zero. */
	atomic_uint live_writes;
	pthread_mutex_t live_lock;
	pthread_cond_t live_cond; /* live_writes fell to zero */
	/* Counters. */
	atomic_uint_fast64_t objects_committed, degraded_reads;
	atomic_uint_fast64_t adm_refused, adm_paced, adm_queued, adm_bufwaits, cells_healed;
	atomic_uint_fast64_t mcalls, mcall_txns;
	atomic_uint_fast64_t align_copied; /* data_direct: payload copied into pool buffers */
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

/* Run job->fn on the commit thread (any thread may call). */
void dn_store_defer(struct dn_store *s, struct dn_job *job);

/* The codec for k + m, made once and kept until close: 0 and *out, or -errno. */
int dn_store_codec(struct dn_store *s, unsigned k, unsigned m, struct ec_codec **out);
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

/* The store layer's part of open and close (dn_store_base.c): locks, the io pool and the
 * commit thread; close after the drives stopped (their last completions queue jobs). */
int dn_store_base_init(struct dn_store *s);
int dn_store_commit_start(struct dn_store *s);
void dn_store_commit_stop(struct dn_store *s);
void dn_store_base_fini(struct dn_store *s);

#endif
