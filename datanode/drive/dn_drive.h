/*
 * dn_drive: the drive layer of the datanode (datanode/drive/), its one public header.
 *
 * Each drive has an io_uring ring, a thread that owns it, its registered parity buffers and
 * file slots (dn_drive.c); other threads hand it work through a queue. dn_layout.c holds the
 * geometry of an extent's cells and the paths of their files. This layer calls nothing
 * above it: a write's completion reaches its owner through dn_drive_opts.on_write_done.
 */
#ifndef ZEST_DN_DRIVE_H
#define ZEST_DN_DRIVE_H

#include <liburing.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/uio.h>

#include "zc.h"
#include "zc_ref.h"
#include "zc_fault.h"

#define DN_IOV_MAX      64   /* iovecs per WRITEV SQE */
#define DN_FILE_SLOTS   4096 /* registered-file table per ring */
#define DN_DIRECT_ALIGN 4096 /* O_DIRECT offsets and lengths: the drives' physical block */
#define DN_HIST_BUCKETS 12

struct dn_store;
struct dn_drive;

/* A drive's state (dn_drive_state_get): full is readable, failed is not. */
enum dn_drive_state { DN_DRIVE_OK = 0, DN_DRIVE_FAILED = 1, DN_DRIVE_FULL = 2 };

/* What a drive is opened with; copied into the drive. */
struct dn_drive_opts {
	struct dn_store *owner; /* stored in dn_drive.store for the owner's callbacks */
	unsigned queue_depth;
	bool no_direct;     /* never O_DIRECT */
	uint32_t cell_size; /* bytes per registered buffer */
	unsigned pool_bufs; /* registered buffers */
	uint64_t full_need; /* bytes a FULL drive needs free again to be OK (a block group) */
	uint64_t full_probe_ns;
	/* Called on the drive thread when a write completes, with its time in the queue and
	 * on the device (admission's latency note). NULL: none. */
	void (*on_write_done)(struct dn_drive *d, uint64_t latency_ns);
};

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
#ifdef ZC_FAULTS
	int fault_err; /* "drive.write" (zc_fault.h): the error its completion reports */
#endif
};

struct dn_drive {
	struct dn_store *store; /* the owner's (dn_drive_opts.owner): never followed here */
	struct dn_drive_opts o;
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
	/* Sync requests this ring ran: fdatasyncs of files, fsyncs of folders, and writes
	 * that carried their own sync (RWF_DSYNC). */
	atomic_uint_fast64_t file_syncs, dir_syncs, dsync_writes;
};

extern const double dn_hist_bounds_s[DN_HIST_BUCKETS];

int dn_drive_init(struct dn_drive *d, const struct dn_drive_opts *o, unsigned idx,
                  const char *root);
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

#endif
