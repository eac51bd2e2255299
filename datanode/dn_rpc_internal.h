/*
 * The gRPC binding of the storage engine. See dn_rpc.h for the threads.
 *
 * Write and WriteCell calls: every callback of a call becomes a job on the call's own
 * queue (data jobs hold a zc_ref on each received segment: the payload is never copied);
 * a call with jobs sits once on its executor's ready list and a worker runs its jobs in
 * order (dn_rpc_exec.c: the dn-write workers for Writes, the dn-cell ones for the cell
 * calls, two pools so that a coordinator's Writes never wait for the WriteCells they
 * send). A call pauses receiving while more than call_cap bytes wait in its queue; the
 * worker resumes it.
 *
 * The rpc server may run a call's data or commit callback just after the handler
 * failed the call, so the binding fails a call only where no further callback can come:
 * from inside one of the call's own callbacks, or after the terminal commit/abort
 * callback. An engine error in the middle of a stream is therefore recorded (c->err),
 * the rest of the data is dropped, and the next callback delivers the failure.
 *
 * dn_rpc_internal.h: what the binding's files share. Private to the datanode binary.
 *   dn_rpc.c        create, destroy, the rpc handlers table, the metrics hook
 *   dn_rpc_exec.c   the executor: per-call job queues, the ready list, the worker threads
 *   dn_rpc_write.c  Write calls on the dn-write executor: begin (admission), data, commit
 *   dn_rpc_read.c   Read calls: the reader threads, one step and one message at a time
 *   dn_rpc_unary.c  Stat, Delete, List, Compose and the bucket calls
 *   dn_rpc_names.c  the name checks every call passes first
 *   dn_rpc_cell.c   WriteCell, ReadCell, DeleteCells, CommitCells (cluster mode's cell calls)
 */
#ifndef ZEST_DN_RPC_INTERNAL_H
#define ZEST_DN_RPC_INTERNAL_H

#include <pthread.h>
#include <stddef.h>

#include "dn_coord.h"
#include "dn.h"
#include "dn_rpc.h"

#define READ_BATCH (1u << 20) /* payload bytes per ReadChunk */

#define dn_container_of(p, type, member) ((type *)((char *)(p)-offsetof(type, member)))

/* ---- dn_rpc_exec.c: the executor (one per worker pool) */
struct dn_exec_job {
	struct dn_exec_job *next;
	bool is_data; /* the executor's own (dn_exec_queue_data), for run_data */
};

/* A data job's payload: the received segments (the executor holds a zc_ref on each). */
struct dn_exec_data {
	uint64_t off;
	size_t len, n;
	struct zc_seg *segs;
	uint32_t crc32c; /* as sent */
};

/* What a worker's run says of the call: go on, it is gone (ended), or it is parked. */
enum dn_exec_run { DN_EXEC_NEXT, DN_EXEC_GONE, DN_EXEC_PARKED };

struct dn_exec_call {
	/* Run job j (the caller's, which frees it) of c on a worker holding c. */
	enum dn_exec_run (*run)(struct dn_exec_call *c, struct dn_exec_job *j);
	/* Run a data job (the executor's) of c on a worker holding c; it records a failure
	 * in err for the next callback. */
	void (*run_data)(struct dn_exec_call *c, const struct dn_exec_data *d);
	struct rpc_write *w; /* the stream that flow control pauses (NULL: no data jobs) */
	bool urgent;         /* scheduled before the waiting calls (a one-job metadata call) */
	/* under the executor's mu */
	struct dn_exec_job *head, *tail;
	struct dn_exec_call *next_ready;
	bool scheduled; /* on the ready list, held by a worker, or parked */
	bool paused;
	size_t queued; /* data bytes waiting in the queue */
	int err;       /* the call failed: the next callback says so */
	char errmsg[RPC_STATUS_MSG_MAX];
};

struct dn_exec {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct dn_exec_call *ready_head, *ready_tail;
	struct dn_exec_call *urgent_last; /* the last urgent call on the list */
	size_t call_cap;
	bool started, stop;
	pthread_t *threads;
	unsigned n_threads;
};

/* Start n_threads workers named name. 0 or -ENOMEM (then dn_exec_stop cleans up). */
int dn_exec_start(struct dn_exec *ex, const char *name, unsigned n_threads, size_t call_cap);
/* Workers finish every call still ready, then exit; joined here. Not started: no-op. */
void dn_exec_stop(struct dn_exec *ex);
/* Under ex->mu: append j to c's queue; c goes on the ready list unless it is scheduled. */
void dn_exec_push(struct dn_exec *ex, struct dn_exec_call *c, struct dn_exec_job *j);
/* Under ex->mu, on the worker whose run returns DN_EXEC_PARKED: j back first on c's queue;
 * c stays scheduled and no worker holds it until dn_exec_ready. */
void dn_exec_park(struct dn_exec_call *c, struct dn_exec_job *j);
/* Under ex->mu: a parked c back on the ready list. */
void dn_exec_ready(struct dn_exec *ex, struct dn_exec_call *c);
/* Record c's failure (takes ex->mu); read it. */
void dn_exec_set_err(struct dn_exec *ex, struct dn_exec_call *c, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));
int dn_exec_err(struct dn_exec *ex, struct dn_exec_call *c);
/* End c's stream with its recorded failure, or else with err and the message. */
void dn_exec_fail(struct dn_exec *ex, struct dn_exec_call *c, int err, const char *fmt, ...)
        __attribute__((format(printf, 4, 5)));

enum { DN_EXEC_QUEUED, DN_EXEC_DROPPED, DN_EXEC_FAIL_HERE };
/*
 * A data callback: a data job takes the segments with a ref each and is queued on c
 * (pausing c at call_cap): DN_EXEC_QUEUED. DN_EXEC_DROPPED: c failed (or no memory: its
 * err is set) and the data is dropped. DN_EXEC_FAIL_HERE: the same, and no job of c runs
 * or will: the caller ends c.
 */
int dn_exec_queue_data(struct dn_exec *ex, struct dn_exec_call *c, uint64_t off,
                       const struct zc_seg *segs, size_t n, size_t len, uint32_t crc32c);

/* A Write's jobs besides its data (the data's crc32c is checked in the engine's pass). */
enum job_kind { JOB_BEGIN, JOB_COMMIT, JOB_ABORT };

struct job {
	struct dn_exec_job ej;
	enum job_kind kind;
	char *etag;
	struct dn_attr *attrs;
	size_t nattrs;
	bool has_cond;
	struct dn_cond cond; /* if_match owned */
	int err;
};

struct wcall {
	struct dn_exec_call ec; /* on b->writes */
	struct dn_rpc *b;
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
	/* under b->writes.mu */
	bool parked;   /* BEGIN waits for admission (first on the queue); no worker holds it */
	bool adm_done; /* admission answered: adm_err */
	int adm_err;
};

struct rcall {
	struct dn_rpc *b;
	struct rpc_read *r;
	struct rcall *next;
	char *bucket, *key; /* a ReadCell's: "" and the cell's name (dn_rpc_cell_name) */
	uint64_t off, len;
	bool has_len;
	bool is_cell; /* ReadCell: [off, cell_end) of `cell`, no info */
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
	struct dn_exec writes; /* dn-write: Write calls (and the coordinator's work for them) */
	struct dn_exec cells;  /* dn-cell: WriteCell, DeleteCells, CommitCells */
	pthread_mutex_t mu;
	pthread_cond_t rcond;
	struct rcall *rq_head, *rq_tail;
	bool stop;
	pthread_t *readers;
	unsigned n_readers;
	struct dn_coord *coord; /* cluster mode, once joined (under mu) */
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
/* ---- dn_rpc_cell.c: WriteCell, ReadCell, DeleteCells, CommitCells (on b->cells) */
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
