/*
 * datanode: the zest storage engine. Objects are erasure coded RS(k, m) into cells; cells
 * go to drive folders through one io_uring ring per drive; metadata lives in LMDB,
 * replicated on m + 1 drives. This header is what the gRPC binding calls.
 *
 * Threading: a struct dn_store is shared by all threads; every function taking a store is
 * thread-safe. A struct dn_write belongs to one thread at a time until dn_write_commit()
 * or dn_write_abort() hands it back. Commit callbacks run on the store's commit thread,
 * read callbacks on the caller's thread; neither may block for long.
 *
 * Errors: >= 0 on success, -errno or ZC_E(code) (common/zc_err.h) on failure: -EINVAL
 * bad argument, ZC_E(ZC_NO_BUCKET) no such bucket, ZC_E(ZC_NO_KEY) no such key (or record,
 * extent, cell), ZC_E(ZC_BUCKET_EXISTS), ZC_E(ZC_BUCKET_NOT_EMPTY), -EAGAIN backpressure
 * (pool empty, admission refused: the binding maps it to RESOURCE_EXHAUSTED / SlowDown),
 * -EBADMSG checksum mismatch that could not be repaired, ZC_E(ZC_NO_QUORUM) write quorum lost
 * because drives failed (never -EIO, which is the metadata's), -ENOSPC write quorum lost
 * because drives are full (see enum dn_drive_state), -EIO an I/O error (metadata, or a read
 * beyond repair). Callers test a meaning with zc_err_is(err, code).
 */
#ifndef ZEST_DN_H
#define ZEST_DN_H

#include <errno.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "dn_store.h"
#include "zc_err.h"
#include "zc_ref.h"

struct dn_store;
struct dn_write;

/*
 * Open (creating folders as needed) a store over the drive folders: picks the newest
 * valid metadata copy, re-replicates it, removes files of uncommitted writes, starts one
 * thread per drive. Returns 0 and *out, or -errno.
 */
int dn_store_open(const struct dn_store_opts *opts, struct dn_store **out);

/*
 * Stop and close everything. Every dn_write, and every write of the side (opts->side, the
 * cell store's), must have been handed back (committed / finished or aborted); close waits
 * for those still finishing. NULL is a no-op.
 */
void dn_store_close(struct dn_store *store);

/* ---- buckets ---- */
int dn_bucket_create(struct dn_store *s, const char *name, uint64_t *ctime_ns);
int dn_bucket_delete(struct dn_store *s, const char *name); /* ZC_BUCKET_NOT_EMPTY unless empty */
int dn_bucket_head(struct dn_store *s, const char *name, uint64_t *ctime_ns);
/* All buckets in name order; free with dn_bucket_list_free. */
int dn_bucket_list(struct dn_store *s, struct dn_bucket_info **out, size_t *n);

/* ---- objects ---- */

struct dn_write_result {
	uint64_t size;
	uint32_t crc32c;
	const char *etag;
	uint64_t mtime_ns;
};

/*
 * Called once, on the store's commit thread, after every cell is durable (file and folder
 * fsynced) and the metadata is committed.
 */
typedef void (*dn_commit_cb)(void *arg, int err, const struct dn_write_result *res);

/*
 * Can a k+m write (k = 0: the store default) reach its write quorum now? Counts the drives
 * that take writes (a full drive whose re-probe finds space again counts, and is OK from
 * then on). Returns 0, -EINVAL (no such scheme here), -ENOSPC (too few, and some of the
 * others are full) or ZC_E(ZC_NO_QUORUM) (too few because drives failed); *writable, *ndrives and
 * *quorum (each optional) get the counts for a message. Cheap: atomics, plus at most one statvfs
 * per full drive per full_probe_ns.
 */
int dn_write_quorum_check(struct dn_store *s, unsigned k, unsigned m, unsigned *writable,
                          unsigned *ndrives, unsigned *quorum);

/*
 * Start writing bucket/key. size is checked at commit when size_known. k = 0 takes the
 * store default. Refuses at once what dn_write_quorum_check refuses, then passes admission
 * (may pace or wait on the caller's thread, also for its cell buffers, which other open
 * writes may hold until they end: a thread that feeds several writes should begin them
 * with dn_admission_try; -EAGAIN when refused). Returns 0 and *out, or ZC_E(ZC_NO_BUCKET)
 * (no bucket), -EINVAL, -EAGAIN, -ENOSPC, ZC_E(ZC_NO_QUORUM), -EIO (metadata).
 */
int dn_write_begin(struct dn_store *s, const char *bucket, const char *key, uint64_t size,
                   bool size_known, unsigned k, unsigned m, struct dn_write **out);
struct dn_admit;
/*
 * dn_write_begin for a caller that passed admission itself (dn_admission_try): never waits.
 * Takes over adm's buffer reservation (adm NULL: none; released on error too).
 */
int dn_write_begin_admitted(struct dn_store *s, struct dn_admit *adm, const char *bucket,
                            const char *key, uint64_t size, bool size_known, unsigned k, unsigned m,
                            struct dn_write **out);

/*
 * Append segs (n of them) at offset, which must equal the bytes written so far. The bytes
 * are encoded where they lie and written straight from the segments: each SQE takes its
 * own zc_ref on the segments it writes and drops it on completion; the caller keeps its
 * own references and may drop them when this returns. May block: while the store holds
 * more than inflight_cap payload it waits at its start (flow control: do not read more
 * from that stream meanwhile), and it may wait for a cell pool buffer an io in flight
 * holds (admission reserved the write's buffers: see dn_admit_bufs); run it on a thread
 * that may block. Returns 0, -EINVAL (offset, size overflow), -EAGAIN (no buffer or
 * credit within wait_ns; the write is then poisoned: commit reports the error, or abort)
 * or -EIO.
 */
int dn_write_data(struct dn_write *w, uint64_t offset, const struct zc_seg *segs, size_t n);

/*
 * dn_write_data, and check that the bytes of this call have CRC32C crc32c (a WriteChunk's
 * crc32c). The check costs no second pass: the call's CRC is derived from the chunk CRCs
 * the store computes anyway. A mismatch returns -EBADMSG and poisons the write (nothing
 * will commit). With --discard the bytes are checked and dropped.
 */
int dn_write_data_checked(struct dn_write *w, uint64_t offset, const struct zc_seg *segs, size_t n,
                          uint32_t crc32c);

/*
 * Finish: flush, fdatasync every file through its ring, commit metadata (replacing any
 * old version, whose files are then freed), then call cb. Takes ownership of w; cb is
 * always called exactly once (err < 0 on failure, nothing visible then). A block group
 * with fewer than the write quorum of durable cells fails the write with -ENOSPC when
 * some of its cells were lost to a full drive, else ZC_E(ZC_NO_QUORUM); a metadata commit that
 * no replica took fails it with -EIO.
 */
void dn_write_commit(struct dn_write *w, const char *etag, const struct dn_attr *attrs,
                     size_t nattrs, dn_commit_cb cb, void *arg);
/* dn_write_commit with a condition on the replaced object (borrowed; NULL: none). */
void dn_write_commit_if(struct dn_write *w, const char *etag, const struct dn_attr *attrs,
                        size_t nattrs, const struct dn_cond *cond, dn_commit_cb cb, void *arg);

/* Drop an unfinished write: nothing becomes visible, files are removed. Takes ownership. */
void dn_write_abort(struct dn_write *w);

/*
 * Read [offset, offset + length) of bucket/key (has_length false: to the end), verifying
 * each chunk's CRC32C and rebuilding from any k cells where a drive is missing or a chunk
 * is bad. A stripe's cells are read in parallel through the drive rings while the caller
 * sleeps; cb runs on the caller's thread. info (optional) receives the object facts; fini
 * it. Returns 0, ZC_E(ZC_NO_KEY), -EINVAL (range), -EBADMSG / -EIO (unrecoverable).
 */
int dn_read(struct dn_store *s, const char *bucket, const char *key, uint64_t offset,
            uint64_t length, bool has_length, struct dn_object_info *info, dn_read_cb cb,
            void *arg);

/*
 * The same read in steps, for a caller that must not hold its thread while the reader of
 * the bytes is slow (dn_rpc: a reader thread reads one step, hands the bytes to gRPC and
 * serves other calls until the send completed). dn_read_open looks the object up once
 * and holds its extents until dn_read_close: later steps read that version to the end even
 * if it is overwritten or deleted meanwhile; a version freed before the holds is gone,
 * ZC_E(ZC_NO_KEY), never -EIO from its unlinked cells. It fills info
 * (optional; fini it): 0, ZC_E(ZC_NO_KEY), -EINVAL (range). dn_read_next delivers whole stripes
 * through cb until at least `want` bytes came or the range ended: returns 1 when bytes
 * remain, 0 at the end, or -errno (cb's, -EBADMSG, -EIO). Steps may run on any thread,
 * one at a time. dn_read_close(NULL) is a no-op.
 */
struct dn_rcur;
int dn_read_open(struct dn_store *s, const char *bucket, const char *key, uint64_t offset,
                 uint64_t length, bool has_length, struct dn_object_info *info,
                 struct dn_rcur **out);
int dn_read_next(struct dn_rcur *c, uint64_t want, dn_read_cb cb, void *arg);
void dn_read_close(struct dn_rcur *c);

int dn_stat(struct dn_store *s, const char *bucket, const char *key, struct dn_object_info *info);
/* Returns 1 when it existed, 0 when not, or -errno. */
int dn_delete(struct dn_store *s, const char *bucket, const char *key);

/* S3 list semantics: keys > start_after with prefix, common prefixes on delimiter. */
int dn_list(struct dn_store *s, const char *bucket, const char *prefix, const char *start_after,
            unsigned limit, const char *delimiter, struct dn_list_result *out);

/*
 * New object bucket/key = concatenation of parts, metadata only: part i is key parts[i] in
 * bucket part_buckets[i] (part_buckets NULL, or an entry NULL or "": in `bucket`; another
 * bucket of this store is fine). delete_parts drops the part objects in the same
 * transaction; without it the parts stay (one part: a server-side copy; the target may be
 * the part itself). cond (NULL: none) is checked on the target in the commit transaction.
 * part_etags (NULL, or an entry NULL or "": any) pins the version of each part: a part whose
 * ETag differs (overwritten since the caller looked) fails the compose with
 * ZC_E(ZC_CHANGED). Returns 0, ZC_E(ZC_NO_BUCKET) (the bucket or a part's bucket is
 * missing), ZC_E(ZC_NO_KEY) (a part is missing; or cond's if_match on a missing target),
 * ZC_E(ZC_PRECONDITION), -EINVAL, ZC_E(ZC_CHANGED) (parts kept changing underneath).
 * Test builds: the fault point "dn.compose" (zc_fault.h) sits between the part reads and
 * the commit transaction, so a test can change a part exactly there.
 */
int dn_compose_if(struct dn_store *s, const char *bucket, const char *key,
                  const char *const *part_buckets, const char *const *parts,
                  const char *const *part_etags, size_t nparts, bool delete_parts, const char *etag,
                  const struct dn_attr *attrs, size_t nattrs, const struct dn_cond *cond,
                  struct dn_write_result *res);
/* dn_compose_if without a condition. */
int dn_compose(struct dn_store *s, const char *bucket, const char *key,
               const char *const *part_buckets, const char *const *parts, size_t nparts,
               bool delete_parts, const char *etag, const struct dn_attr *attrs, size_t nattrs,
               struct dn_write_result *res);

/* ---- metadata calls on the commit thread ---- */
/*
 * The calls that write metadata (dn_delete, dn_compose_if, dn_bucket_create/delete) as
 * jobs on the store's commit thread, for a caller that must not wait for a disk (the rpc
 * binding). Deletes and composes queued together (and with Write commits) share one
 * metadata transaction (one sync per replica), each in its own nested transaction so that
 * one refusal does not sink the others, checked in the order queued: a condition, a pinned
 * part or an existence test sees the calls before it. Bucket calls take a transaction each
 * (rare; a bucket delete scans for objects). Errors as the synchronous calls'.
 */
enum dn_mcall_kind { DN_MC_DELETE, DN_MC_COMPOSE, DN_MC_BUCKET_CREATE, DN_MC_BUCKET_DELETE };
struct dn_mcall {
	enum dn_mcall_kind kind;
	const char *bucket; /* the bucket calls' name */
	const char *key;
	/* compose, as dn_compose_if */
	const char *const *part_buckets, *const *parts, *const *part_etags;
	size_t nparts;
	bool delete_parts;
	const char *etag;
	const struct dn_attr *attrs;
	size_t nattrs;
	const struct dn_cond *cond;
};
struct dn_mcall_result {
	bool existed;              /* delete: the key was there */
	uint64_t ctime_ns;         /* bucket create (of the existing one on ZC_BUCKET_EXISTS) */
	struct dn_write_result wr; /* compose (etag: the call's) */
};
/* On the commit thread, exactly once; res is borrowed for the call. Must not block. */
typedef void (*dn_mcall_cb)(void *arg, int err, const struct dn_mcall_result *res);
/*
 * Queue call (copied; everything it points to is borrowed until cb runs). Returns 0 (cb
 * follows) or -ENOMEM (cb never runs). Any thread.
 */
int dn_mcall_submit(struct dn_store *s, const struct dn_mcall *call, dn_mcall_cb cb, void *arg);

/* ---- drives, failures, heal ---- */
/*
 * OK: reads and writes. FAILED: an I/O error (or a folder that cannot hold files); read
 * around, never written, until heal. FULL: a write or file creation got ENOSPC; still
 * read, no new cells go there; the next write (or metrics render) after full_probe_ns
 * re-checks its free space (statvfs: room for one block group's cell file, that is
 * stripes_per_group x cell_size) and the drive is OK again, with no restart or heal.
 */
/* A DN_DRIVE_* of drive/dn_drive.h, or -EINVAL. */
int dn_drive_state_get(struct dn_store *s, unsigned drive);
/* Mark a drive failed (tests, operator); its cells are then written as missing. */
int dn_drive_fail(struct dn_store *s, unsigned drive);
/*
 * Rebuild every cell assigned to `drive` that is missing or bad (a replaced, empty folder)
 * from the other cells, make it durable, clear the missing marks, mark the drive OK.
 * Returns the number of cells rebuilt, or -errno.
 */
long dn_heal(struct dn_store *s, unsigned drive);

/* ---- counters, metrics ---- */
struct dn_counters {
	uint64_t objects_committed;
	uint64_t degraded_reads;
	uint64_t inflight_bytes;
	uint64_t admission_refused;
	uint64_t admission_paced;
	uint64_t admission_queued;
	unsigned admission_parked;      /* Writes paced or queued now (no thread holds them) */
	uint64_t admission_bufwaits;    /* Writes that waited in admission for cell buffers */
	uint64_t pool_waits;            /* pool gets that found no free buffer and waited */
	uint64_t pool_timeouts;         /* of those, gave up after wait_ns (-EAGAIN) */
	uint64_t mcalls;                /* dn_mcall_submit calls run */
	uint64_t mcall_txns;            /* metadata transactions they took (batched: fewer) */
	uint64_t cells_healed;          /* by `heal` and the background healer */
	uint64_t cells_swept_open;      /* cell files no entry named, removed at open */
	uint64_t cells_swept_failed;    /* cell files of failed or abandoned writes removed */
	unsigned meta_replicas;         /* LMDB replicas kept (m + 1) */
	unsigned meta_replicas_live;    /* of those, taking writes (a failed write drops one) */
	uint64_t meta_replicas_rebuilt; /* dropped ones the background healer brought back */
	uint64_t align_copied_bytes;    /* data bytes copied into aligned buffers (data_direct) */
	uint64_t file_syncs;            /* fdatasyncs of cell files run on the rings */
	uint64_t dir_syncs;             /* fsyncs of folders (new file names) */
	uint64_t dsync_writes;          /* cell writes durable on completion (no fdatasync) */
	uint64_t meta_txns;             /* metadata write transactions (one sync round each) */
};
void dn_counters_get(struct dn_store *s, struct dn_counters *c);

/* Hook that appends more series (the rpc module's payload byte counters) to /metrics. */
void dn_metrics_set_hook(struct dn_store *s, dn_metrics_hook hook, void *arg);
/* Write the Prometheus text exposition to out. */
void dn_metrics_render(struct dn_store *s, FILE *out);
/*
 * Serve GET /metrics on HOST:PORT (port 0: any; the bound port is returned in *port) from
 * one small thread until dn_store_close. Returns 0 or -errno.
 */
int dn_metrics_serve(struct dn_store *s, const char *spec, unsigned *port);

#endif
