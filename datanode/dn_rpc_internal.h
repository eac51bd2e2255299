/*
 * The gRPC binding of the storage engine. See dn_rpc.h for the threads.
 *
 * Write calls: every callback of a call becomes a job on the call's own queue (data jobs
 * hold a zc_ref on each received segment: the payload is never copied); a call with jobs
 * sits once on the ready list and a write worker runs its jobs in order. A call pauses
 * receiving while more than call_cap bytes wait in its queue; the worker resumes it.
 *
 * The rpc server may run a call's data or commit callback just after the handler
 * failed the call, so the binding fails a call only where no further callback can come:
 * from inside one of the call's own callbacks, or after the terminal commit/abort
 * callback. An engine error in the middle of a stream is therefore recorded (c->err),
 * the rest of the data is dropped, and the next callback delivers the failure.
 *
 * dn_rpc_internal.h: what the binding's files share. Private to the datanode binary.
 *   dn_rpc.c        create, destroy, the rpc handlers table, the metrics hook
 *   dn_rpc_write.c  Write calls: the per-call job queue, the write workers, commit
 *   dn_rpc_read.c   Read calls: the reader threads, one step and one message at a time
 *   dn_rpc_unary.c  Stat, Delete, List, Compose and the bucket calls
 *   dn_rpc_names.c  the name checks every call passes first
 *   dn_rpc_cell.c   WriteCell, ReadCell, DeleteCells, CommitCells (cluster mode's cell calls)
 */
#ifndef ZEST_DN_RPC_INTERNAL_H
#define ZEST_DN_RPC_INTERNAL_H

#include <pthread.h>

#include "dn_coord.h"
#include "dn_internal.h"
#include "dn_rpc.h"

#define READ_BATCH (1u << 20) /* payload bytes per ReadChunk */

enum job_kind { JOB_BEGIN, JOB_DATA, JOB_COMMIT, JOB_ABORT };

struct job {
	struct job *next;
	enum job_kind kind;
	uint64_t off;
	size_t len, n;
	struct zc_seg *segs;
	uint32_t crc32c; /* as sent: checked in the engine's one pass over the bytes */
	char *etag;
	struct dn_attr *attrs;
	size_t nattrs;
	bool has_cond;
	struct dn_cond cond; /* if_match owned */
	int err;
};

struct wcall {
	struct dn_rpc *b;
	struct rpc_write *w;
	struct dn_write *dw;
	struct dn_coord_write *cw; /* cluster mode: the coordinated write (dn_coord.h) */
	char *bucket, *key;
	uint64_t size;
	bool size_known;
	unsigned k, m;
	/* The terminal (commit or abort) job, allocated at open: the last callback can always
	 * queue one, so nobody waits or retries for memory there. */
	struct job *final;
	/* Its place in the admission queue while BEGIN is parked (dn_admission_try). */
	struct dn_admit adm;
	/* under b->mu */
	struct job *head, *tail;
	struct wcall *next_ready;
	bool scheduled; /* on the ready list, held by a worker, or parked */
	bool parked;    /* BEGIN waits for admission (first on the queue); no worker holds it */
	bool adm_done;  /* admission answered: adm_err */
	int adm_err;
	bool paused;
	size_t queued;
	int err;
	char errmsg[RPC_STATUS_MSG_MAX];
};

struct rcall {
	struct dn_rpc *b;
	struct rpc_read *r;
	struct rcall *next;
	char *bucket, *key; /* a ReadCell's: "" and the cell's name (dn_rpc_cell_name) */
	uint64_t off, len;
	bool has_len;
	bool is_cell;           /* ReadCell: [off, cell_end) of `cell`, no info */
	struct dn_cell_id cell;
	uint64_t cell_end;
	/* under mu */
	pthread_mutex_t mu;
	bool sending; /* a ReadChunk is with gRPC: `sent` (or abort) brings the call back */
	bool running; /* on the reader queue or held by a reader thread */
	bool aborted;
	/* the reader thread holding the call */
	struct dn_rcur *cur;
	bool eof; /* every byte was handed to gRPC */
	struct dn_object_info info;
	bool info_sent;
	uint64_t batch_off;
	size_t batch_len, n_batch, cap_batch;
	struct zc_seg *batch;
};

struct dn_rpc {
	struct dn_store *s;
	struct dn_rpc_opts o;
	pthread_mutex_t mu;
	pthread_cond_t wcond, rcond;
	struct wcall *ready_head, *ready_tail;
	struct rcall *rq_head, *rq_tail;
	bool stop;
	pthread_t *workers, *readers;
	unsigned n_workers, n_readers;
	struct dn_rpc_cells *cells; /* dn_rpc_cell.c */
	struct dn_coord *coord;     /* cluster mode, once joined (under mu) */
};

/* ---- dn_rpc_write.c */
const char *dn_rpc_no_such_name(int err, const char *bucket, const char *key);
int dn_rpc_cond_errmsg(const char *bucket, const char *key, int err, char *buf, size_t len);
int dn_rpc_on_write_open(void *ctx, struct rpc_write *w, const struct rpc_write_open *open,
                         void **call_ctx);
void dn_rpc_on_write_data(void *call_ctx, struct rpc_write *w, uint64_t offset,
                          const struct zc_seg *segs, size_t n_segs, size_t len, uint32_t crc32c);
void dn_rpc_on_write_commit(void *call_ctx, struct rpc_write *w, const struct rpc_commit *last);
void dn_rpc_on_write_abort(void *call_ctx, struct rpc_write *w, int err);
void *dn_rpc_write_worker(void *arg);
/* ---- dn_rpc_read.c */
void dn_rpc_info_to_rpc(const struct dn_object_info *in, struct rpc_object_info *out,
                        struct rpc_attr *attrs);
void *dn_rpc_read_worker(void *arg);
int dn_rpc_on_read_start(void *ctx, struct rpc_read *r, const struct rpc_read_req *req,
                         void **call_ctx);
void dn_rpc_on_read_sent(void *call_ctx, struct rpc_read *r);
void dn_rpc_on_read_abort(void *call_ctx, struct rpc_read *r, int err);
void dn_rpc_rcall_queue(struct rcall *rc);
/* dn_read_cb that adds a segment (with a ref) to rc's batch. */
int dn_rpc_read_cb(void *arg, uint64_t offset, const struct zc_seg *seg);
/* ---- dn_rpc_cell.c: WriteCell, ReadCell, DeleteCells, CommitCells */
int dn_rpc_cells_create(struct dn_rpc *b);
void dn_rpc_cells_destroy(struct dn_rpc *b);
/* Fill the cell handlers (and h->unary, which routes the cell calls and passes the rest
 * to dn_rpc_on_unary). */
void dn_rpc_cells_handlers(struct rpc_server_handlers *h);
void dn_rpc_cell_name(struct dn_cell_id id, char *buf, size_t len);
int dn_rpc_on_cell_read_start(void *ctx, struct rpc_read *r, const struct rpc_cell_read_req *req,
                              void **call_ctx);
/* One step of a ReadCell on a reader thread: up to READ_BATCH bytes into rc's batch.
 * Returns 1 when more follows, 0 at the end, or -errno. */
int dn_rpc_cell_read_next(struct rcall *rc);
/* ---- dn_rpc_names.c: each returns 0, or ZC_E(ZC_INVALID) with msg naming the name and
 * why (cap: RPC_STATUS_MSG_MAX). Buckets: S3's rules or the reserved ZC_RESERVED_BUCKET;
 * keys, prefixes, delimiters: common/zc_names.h. */
int dn_rpc_names_bucket(const char *bucket, char *msg, size_t cap);
int dn_rpc_names_object(const char *bucket, const char *key, char *msg, size_t cap);
int dn_rpc_names_list(const char *bucket, const char *prefix, const char *start_after,
                      const char *delimiter, char *msg, size_t cap);
/* The names of a unary request (a part's empty bucket is the target's): 0, or the error
 * with its rpc_reply_error() message set. */
int dn_rpc_names_unary(enum rpc_method m, const union rpc_unary_req *req, struct rpc_reply *reply);
/* ---- dn_rpc_unary.c */
int dn_rpc_on_unary(void *ctx, enum rpc_method m, const union rpc_unary_req *req,
                    struct rpc_reply *reply);

#endif
