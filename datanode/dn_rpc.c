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
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dn_rpc.h"
#include "ec.h"
#include "zc_crc.h"
#include "zc.h"

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
	char *bucket, *key;
	uint64_t size;
	bool size_known;
	unsigned k, m;
	bool cond_if_match; /* the commit carried if_match: -ENOENT may be NoSuchKey */
	/* under b->mu */
	struct job *head, *tail;
	struct wcall *next_ready;
	bool scheduled; /* on the ready list or held by a worker */
	bool paused;
	size_t queued;
	int err;
	char errmsg[RPC_STATUS_MSG_MAX];
};

struct rcall {
	struct dn_rpc *b;
	struct rpc_read *r;
	struct rcall *next;
	char *bucket, *key;
	uint64_t off, len;
	bool has_len;
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
};

/* ------------------------------------------------------------------ write */

static void
wcall_free(struct wcall *c)
{
	free(c->bucket);
	free(c->key);
	free(c);
}

static void
job_free(struct job *j)
{
	if (j->segs) {
		for (size_t i = 0; i < j->n; i++)
			if (j->segs[i].ref)
				zc_ref_put(j->segs[i].ref);
		free(j->segs);
	}
	free(j->etag);
	free((char *)j->cond.if_match);
	for (size_t i = 0; i < j->nattrs; i++) {
		free(j->attrs[i].name);
		free(j->attrs[i].value);
	}
	free(j->attrs);
	free(j);
}

/* The quorum refusals, with the drive counts: -ENOSPC (sent as RESOURCE_EXHAUSTED) or
 * DN_ENOQUORUM (sent as UNAVAILABLE). */
static int
quorum_errmsg(struct dn_store *s, unsigned k, unsigned m, int err, char *buf, size_t len)
{
	unsigned ok = 0, n = 0, q = 0;

	dn_write_quorum_check(s, k, m, &ok, &n, &q);
	if (err == -ENOSPC) {
		snprintf(buf, len,
		         "No space: %u of %u drives can take writes (write quorum %u), the others "
		         "are full",
		         ok, n, q);
		return -ENOSPC;
	}
	snprintf(buf, len, "write quorum not met: %u of %u drives (quorum %u)", ok, n, q);
	return DN_ENOQUORUM;
}

int
dn_rpc_write_errmsg(struct dn_store *s, unsigned k, unsigned m, const char *bucket, const char *key,
                    int err, char *buf, size_t len)
{
	switch (err) {
	case -ENOSPC:
	case DN_ENOQUORUM:
		return quorum_errmsg(s, k, m, err, buf, len);
	case -EIO:
		/* Only the quorum has its own code: an -EIO here is LMDB's (or a bug's), not
		 * the drives'; INTERNAL, so nobody waits for a heal that will not help. */
		snprintf(buf, len, "metadata I/O error on write of %s/%s: %s", bucket, key,
		         strerror(-err));
		return -EIO;
	case ZC_E(ZC_NO_BUCKET):
		snprintf(buf, len, "%s", bucket);
		break;
	case -EAGAIN:
		snprintf(buf, len, "the datanode's drives are busy, retry later");
		break;
	case -EINVAL:
		snprintf(buf, len, "write of %s/%s refused by the store", bucket, key);
		break;
	default:
		snprintf(buf, len, "write of %s/%s failed: %s", bucket, key,
		         err > -ZC_ERR_BASE ? strerror(-err) : zc_code_word(zc_err_code(err)));
		break;
	}
	return err;
}

/* What a failed object call's message names: the bucket when that is what is missing. */
static const char *
no_such_name(int err, const char *bucket, const char *key)
{
	return err == ZC_E(ZC_NO_BUCKET) ? bucket : key;
}

/*
 * A commit refused by its condition: DN_ECONDITION (PreconditionFailed), or NoSuchKey for an
 * If-Match on a missing key. Returns err with its message in buf, or 0 for any other err.
 */
static int
cond_errmsg(const char *bucket, const char *key, int err, char *buf, size_t len)
{
	if (err == DN_ECONDITION)
		snprintf(buf, len, "the condition on %s/%s did not hold", bucket, key);
	else if (err == ZC_E(ZC_NO_KEY))
		snprintf(buf, len, "%s/%s (If-Match)", bucket, key);
	else
		return 0;
	return err;
}

/* The message for an engine error of a write; returns the errno to send it with. */
static int
write_errmsg(struct wcall *c, int err, char *buf, size_t len)
{
	int cerr = cond_errmsg(c->bucket, c->key, err, buf, len);

	if (cerr)
		return cerr;
	return dn_rpc_write_errmsg(c->b->s, c->k, c->m, c->bucket, c->key, err, buf, len);
}

/* Under b->mu: put c on the ready list unless it is there or running. */
static void
wcall_schedule(struct dn_rpc *b, struct wcall *c)
{
	if (c->scheduled)
		return;
	c->scheduled = true;
	c->next_ready = NULL;
	if (b->ready_tail)
		b->ready_tail->next_ready = c;
	else
		b->ready_head = c;
	b->ready_tail = c;
	pthread_cond_signal(&b->wcond);
}

/* Under b->mu. */
static void
wcall_push(struct wcall *c, struct job *j)
{
	j->next = NULL;
	if (c->tail)
		c->tail->next = j;
	else
		c->head = j;
	c->tail = j;
	wcall_schedule(c->b, c);
}

static int
on_write_open(void *ctx, struct rpc_write *w, const Zest__WriteOpen *open, void **call_ctx)
{
	struct dn_rpc *b = ctx;
	struct wcall *c;
	struct job *j;
	int rc;

	if (dn_admission_level(b->s) >= DN_ADM_REFUSE) {
		rpc_write_set_error(w, "drive write latency above the refusal limit");
		return -EAGAIN;
	}
	/* Too few drives take writes (failed or full): refuse before any payload moves. */
	rc = dn_write_quorum_check(b->s, open->ec_k, open->ec_m, NULL, NULL, NULL);
	if (rc == -ENOSPC || rc == DN_ENOQUORUM) {
		char msg[RPC_STATUS_MSG_MAX];

		rc = quorum_errmsg(b->s, open->ec_k, open->ec_m, rc, msg, sizeof(msg));
		rpc_write_set_error(w, "%s", msg);
		return rc;
	}
	rc = dn_bucket_head(b->s, open->bucket, NULL);
	if (rc == ZC_E(ZC_NO_BUCKET)) {
		rpc_write_set_error(w, "%s", open->bucket);
		return rc;
	}
	c = calloc(1, sizeof(*c));
	j = calloc(1, sizeof(*j));
	if (!c || !j)
		goto nomem;
	c->bucket = strdup(open->bucket);
	c->key = strdup(open->key);
	if (!c->bucket || !c->key)
		goto nomem;
	c->b = b;
	c->w = w;
	c->size = open->size;
	c->size_known = open->size_known;
	c->k = open->ec_k;
	c->m = open->ec_m;
	/* dn_write_begin may wait for admission: a worker runs it. */
	j->kind = JOB_BEGIN;
	pthread_mutex_lock(&b->mu);
	wcall_push(c, j);
	pthread_mutex_unlock(&b->mu);
	*call_ctx = c;
	return 0;
nomem:
	free(j);
	if (c)
		wcall_free(c);
	return -ENOMEM;
}

static void
on_write_data(void *call_ctx, struct rpc_write *w, uint64_t offset, const struct zc_seg *segs,
              size_t n_segs, size_t len, uint32_t crc32c)
{
	struct wcall *c = call_ctx;
	struct dn_rpc *b = c->b;
	struct job *j;

	pthread_mutex_lock(&b->mu);
	if (c->err) {
		if (!c->scheduled) {
			/* No job runs and no callback can follow ours: fail here. */
			pthread_mutex_unlock(&b->mu);
			if (c->dw)
				dn_write_abort(c->dw); /* still open after an -ENOMEM here */
			rpc_write_fail(w, c->err, "%s", c->errmsg);
			wcall_free(c);
			return;
		}
		pthread_mutex_unlock(&b->mu);
		return; /* dropped: the write is doomed */
	}
	pthread_mutex_unlock(&b->mu);
	j = calloc(1, sizeof(*j));
	if (j)
		j->segs = malloc(n_segs * sizeof(*j->segs));
	pthread_mutex_lock(&b->mu);
	if (!j || !j->segs) {
		free(j ? j->segs : NULL);
		free(j);
		if (!c->err) {
			c->err = -ENOMEM;
			snprintf(c->errmsg, sizeof(c->errmsg), "out of memory");
		}
		pthread_mutex_unlock(&b->mu);
		return;
	}
	j->kind = JOB_DATA;
	j->off = offset;
	j->len = len;
	j->crc32c = crc32c;
	j->n = n_segs;
	for (size_t i = 0; i < n_segs; i++) {
		j->segs[i] = segs[i];
		if (segs[i].ref)
			zc_ref_get(segs[i].ref);
	}
	wcall_push(c, j);
	c->queued += len;
	if (c->queued >= b->o.call_cap && !c->paused) {
		/* Pause before anyone can see c->paused: a worker that drains the queue at
		 * once resumes the call, and a pause landing after that resume stopped the
		 * call for good (a Write hung with --call-queue-cap below one message).
		 * Lock order b->mu -> call lock: the rpc layer calls us unlocked. */
		c->paused = true;
		rpc_write_pause(w);
	}
	pthread_mutex_unlock(&b->mu);
}

static void
on_write_commit(void *call_ctx, struct rpc_write *w, const Zest__WriteChunk *last)
{
	struct wcall *c = call_ctx;
	struct dn_rpc *b = c->b;
	struct job *j = calloc(1, sizeof(*j));
	bool ok = j != NULL;

	(void)w;
	if (ok) {
		j->kind = JOB_COMMIT;
		j->etag = strdup(last->etag ? last->etag : "");
		ok = j->etag != NULL;
	}
	if (ok && last->cond && (last->cond->if_none_match || last->cond->if_match[0])) {
		j->has_cond = true;
		j->cond.if_none_match = last->cond->if_none_match;
		if (last->cond->if_match[0]) {
			j->cond.if_match = strdup(last->cond->if_match);
			ok = j->cond.if_match != NULL;
		}
	}
	if (ok && last->n_attrs) {
		j->attrs = calloc(last->n_attrs, sizeof(*j->attrs));
		ok = j->attrs != NULL;
		for (; ok && j->nattrs < last->n_attrs; j->nattrs++) {
			j->attrs[j->nattrs].name = strdup(last->attrs[j->nattrs]->name);
			j->attrs[j->nattrs].value = strdup(last->attrs[j->nattrs]->value);
			ok = j->attrs[j->nattrs].name && j->attrs[j->nattrs].value;
		}
	}
	pthread_mutex_lock(&b->mu);
	if (!ok && !c->err) {
		c->err = -ENOMEM;
		snprintf(c->errmsg, sizeof(c->errmsg), "out of memory");
	}
	if (!j) {
		/* No job to carry the verdict: wait for a worker to finish the queue. */
		while (c->scheduled) {
			pthread_mutex_unlock(&b->mu);
			usleep(1000);
			pthread_mutex_lock(&b->mu);
		}
		pthread_mutex_unlock(&b->mu);
		if (c->dw)
			dn_write_abort(c->dw);
		rpc_write_fail(w, c->err, "%s", c->errmsg);
		wcall_free(c);
		return;
	}
	wcall_push(c, j);
	pthread_mutex_unlock(&b->mu);
}

static void
on_write_abort(void *call_ctx, struct rpc_write *w, int err)
{
	struct wcall *c = call_ctx;
	struct dn_rpc *b = c->b;
	struct job *j;

	(void)w;
	/* A small job; if even that fails, spin until one can be had (abort must land). */
	while (!(j = calloc(1, sizeof(*j))))
		usleep(1000);
	j->kind = JOB_ABORT;
	j->err = err;
	pthread_mutex_lock(&b->mu);
	wcall_push(c, j);
	pthread_mutex_unlock(&b->mu);
}

static void
commit_done(void *arg, int err, const struct dn_write_result *res)
{
	struct wcall *c = arg;

	if (err) {
		char msg[RPC_STATUS_MSG_MAX];

		if (err != DN_ECONDITION) /* a condition that fails is the client's answer */
			ZC_WARN("dn_rpc", "commit failed bucket=%s key=%s err=%d", c->bucket,
			        c->key, err);
		err = write_errmsg(c, err, msg, sizeof(msg));
		rpc_write_fail(c->w, err, "%s", msg);
	} else {
		Zest__WriteResult wr = ZEST__WRITE_RESULT__INIT;

		wr.size = res->size;
		wr.crc32c = res->crc32c;
		wr.etag = (char *)(res->etag ? res->etag : "");
		wr.mtime_ns = res->mtime_ns;
		rpc_write_finish(c->w, &wr);
	}
	wcall_free(c);
}

/* Run one job of c (a worker thread holding c). Returns false when c is gone. */
static bool
wcall_run(struct wcall *c, struct job *j)
{
	struct dn_rpc *b = c->b;
	int rc, err;

	switch (j->kind) {
	case JOB_BEGIN:
		rc = dn_write_begin(b->s, c->bucket, c->key, c->size, c->size_known, c->k, c->m,
		                    &c->dw);
		if (rc) {
			c->dw = NULL;
			pthread_mutex_lock(&b->mu);
			c->err = write_errmsg(c, rc, c->errmsg, sizeof(c->errmsg));
			pthread_mutex_unlock(&b->mu);
		}
		job_free(j);
		return true;
	case JOB_DATA: {
		bool resume;

		pthread_mutex_lock(&b->mu);
		err = c->err;
		pthread_mutex_unlock(&b->mu);
		if (!err && c->dw) {
			rc = dn_write_data_checked(c->dw, j->off, j->segs, j->n, j->crc32c);
			if (rc) {
				/* Poisoned: drop it now, the next callback reports. */
				dn_write_abort(c->dw);
				c->dw = NULL;
				pthread_mutex_lock(&b->mu);
				if (rc == -EBADMSG) {
					snprintf(c->errmsg, sizeof(c->errmsg),
					         "CRC32C mismatch at offset %llu: the %zu bytes sent "
					         "do not match crc32c %08x",
					         (unsigned long long)j->off, j->len, j->crc32c);
					c->err = rc;
				} else {
					c->err = write_errmsg(c, rc, c->errmsg, sizeof(c->errmsg));
				}
				pthread_mutex_unlock(&b->mu);
			}
		}
		pthread_mutex_lock(&b->mu);
		c->queued -= j->len;
		resume = c->paused && (c->queued <= b->o.call_cap / 2 || c->err);
		if (resume)
			c->paused = false;
		pthread_mutex_unlock(&b->mu);
		job_free(j);
		/* Still scheduled: nobody else can finish the call meanwhile. */
		if (resume)
			rpc_write_resume(c->w);
		return true;
	}
	case JOB_COMMIT:
		pthread_mutex_lock(&b->mu);
		err = c->err;
		pthread_mutex_unlock(&b->mu);
		if (err || !c->dw) {
			if (c->dw)
				dn_write_abort(c->dw);
			rpc_write_fail(c->w, err ? err : -EIO, "%s",
			               err ? c->errmsg : "no write");
			wcall_free(c);
		} else {
			c->cond_if_match = j->has_cond && j->cond.if_match;
			dn_write_commit_if(c->dw, j->etag, j->attrs, j->nattrs,
			                   j->has_cond ? &j->cond : NULL, commit_done, c);
		}
		job_free(j);
		return false;
	case JOB_ABORT:
		if (c->dw)
			dn_write_abort(c->dw);
		pthread_mutex_lock(&b->mu);
		err = c->err;
		pthread_mutex_unlock(&b->mu);
		if (err)
			rpc_write_fail(c->w, err, "%s", c->errmsg);
		else
			rpc_write_fail(c->w, j->err < 0 ? j->err : -ECANCELED,
			               "write of %s/%s aborted", c->bucket,
			               c->key);
		wcall_free(c);
		job_free(j);
		return false;
	}
	return true;
}

static void *
write_worker(void *arg)
{
	struct dn_rpc *b = arg;

	pthread_mutex_lock(&b->mu);
	for (;;) {
		struct wcall *c;
		struct job *j;

		while (!b->ready_head && !b->stop)
			pthread_cond_wait(&b->wcond, &b->mu);
		c = b->ready_head;
		if (!c)
			break;
		b->ready_head = c->next_ready;
		if (!b->ready_head)
			b->ready_tail = NULL;
		j = c->head;
		c->head = j->next;
		if (!c->head)
			c->tail = NULL;
		pthread_mutex_unlock(&b->mu);
		if (!wcall_run(c, j)) {
			pthread_mutex_lock(&b->mu);
			continue;
		}
		pthread_mutex_lock(&b->mu);
		c->scheduled = false;
		if (c->head)
			wcall_schedule(b, c); /* to the tail: calls take turns */
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

/* ------------------------------------------------------------------ read */

static void
rcall_free(struct rcall *rc)
{
	for (size_t i = 0; i < rc->n_batch; i++)
		if (rc->batch[i].ref)
			zc_ref_put(rc->batch[i].ref);
	free(rc->batch);
	dn_read_close(rc->cur);
	dn_object_info_fini(&rc->info);
	pthread_mutex_destroy(&rc->mu);
	free(rc->bucket);
	free(rc->key);
	free(rc);
}

/* Hand rc to the reader threads; the caller set rc->running. */
static void
rcall_queue(struct rcall *rc)
{
	struct dn_rpc *b = rc->b;

	pthread_mutex_lock(&b->mu);
	rc->next = NULL;
	if (b->rq_tail)
		b->rq_tail->next = rc;
	else
		b->rq_head = rc;
	b->rq_tail = rc;
	pthread_cond_signal(&b->rcond);
	pthread_mutex_unlock(&b->mu);
}

static void
info_to_pb(const struct dn_object_info *in, Zest__ObjectInfo *out, Zest__Attr *attrs,
           Zest__Attr **pattrs, bool with_attrs)
{
	zest__object_info__init(out);
	out->key = in->key ? in->key : "";
	out->size = in->size;
	out->etag = in->etag ? in->etag : "";
	out->mtime_ns = in->mtime_ns;
	out->crc32c = in->crc32c;
	out->ec_k = in->k;
	out->ec_m = in->m;
	if (with_attrs) {
		for (size_t i = 0; i < in->nattrs; i++) {
			zest__attr__init(&attrs[i]);
			attrs[i].name = in->attrs[i].name;
			attrs[i].value = in->attrs[i].value;
			pattrs[i] = &attrs[i];
		}
		out->n_attrs = in->nattrs;
		out->attrs = pattrs;
	}
}

/* Hand the batch to gRPC (a reader thread); the caller set rc->sending. */
static int
read_send(struct rcall *rc)
{
	Zest__ObjectInfo info, *pinfo = NULL;
	Zest__Attr *attrs = NULL, **pattrs = NULL;
	uint32_t crc = 0;
	int err;

	if (!rc->info_sent) {
		attrs = calloc(rc->info.nattrs + 1, sizeof(*attrs));
		pattrs = calloc(rc->info.nattrs + 1, sizeof(*pattrs));
		if (!attrs || !pattrs) {
			err = -ENOMEM;
			goto out;
		}
		info_to_pb(&rc->info, &info, attrs, pattrs, true);
		pinfo = &info;
	}
	for (size_t i = 0; i < rc->n_batch; i++)
		crc = zc_crc32c(crc, rc->batch[i].ptr, rc->batch[i].len);
	err = rpc_read_send(rc->r, pinfo, rc->batch_off, crc, rc->batch, rc->n_batch);
	if (!err)
		rc->info_sent = true;
out:
	free(attrs);
	free(pattrs);
	/* rpc_read_send took its own refs. */
	for (size_t i = 0; i < rc->n_batch; i++)
		if (rc->batch[i].ref)
			zc_ref_put(rc->batch[i].ref);
	rc->n_batch = 0;
	rc->batch_len = 0;
	return err;
}

static int
read_cb(void *arg, uint64_t offset, const struct zc_seg *seg)
{
	struct rcall *rc = arg;

	if (!seg->len)
		return 0;
	if (rc->n_batch == rc->cap_batch) {
		size_t cap = rc->cap_batch ? 2 * rc->cap_batch : 16;
		struct zc_seg *nb = realloc(rc->batch, cap * sizeof(*nb));

		if (!nb)
			return -ENOMEM;
		rc->batch = nb;
		rc->cap_batch = cap;
	}
	if (!rc->n_batch)
		rc->batch_off = offset;
	rc->batch[rc->n_batch++] = *seg;
	if (seg->ref)
		zc_ref_get(seg->ref);
	rc->batch_len += seg->len;
	return 0;
}

static void
read_end(struct rcall *rc, int err)
{
	switch (err) {
	case 0:
		rpc_read_finish(rc->r, 0, NULL);
		break;
	case -ENOENT:
		rpc_read_finish(rc->r, err, "%s", rc->key);
		break;
	case ZC_E(ZC_NO_BUCKET):
		rpc_read_finish(rc->r, err, "%s", rc->bucket);
		break;
	case -EINVAL:
		rpc_read_finish(rc->r, err, "range %llu+%llu of %s",
		                (unsigned long long)rc->off, (unsigned long long)rc->len, rc->key);
		break;
	default:
		if (err != -ECANCELED)
			ZC_WARN("dn_rpc", "read failed bucket=%s key=%s err=%d", rc->bucket,
			        rc->key, err);
		rpc_read_finish(rc->r, err, "read of %s/%s failed: %s", rc->bucket, rc->key,
		                err > -ZC_ERR_BASE ? strerror(-err) : "");
		break;
	}
	rcall_free(rc);
}

/*
 * One turn of a Read on a reader thread: read about READ_BATCH bytes (whole stripes), hand
 * them to gRPC and let go of the call. The reader never waits for a send: a slow client
 * (HTTP/2 flow control holds the message) keeps one message in flight and no thread, and
 * its `sent` callback queues the call again. The last turn, after the last send completed,
 * finishes the call.
 */
static void
read_step(struct rcall *rc)
{
	struct dn_rpc *b = rc->b;
	int err = 0, more;
	bool again;

	for (;;) {
		pthread_mutex_lock(&rc->mu);
		if (rc->aborted)
			err = -ECANCELED;
		pthread_mutex_unlock(&rc->mu);
		if (err || rc->eof)
			break;
		if (!rc->cur) {
			err = dn_read_open(b->s, rc->bucket, rc->key, rc->off, rc->len, rc->has_len,
			                   &rc->info, &rc->cur);
			if (err)
				break;
		}
		more = dn_read_next(rc->cur, READ_BATCH, read_cb, rc);
		if (more < 0) {
			err = more;
			break;
		}
		rc->eof = more == 0;
		if (!rc->n_batch && rc->info_sent)
			continue;
		pthread_mutex_lock(&rc->mu);
		rc->sending = true;
		pthread_mutex_unlock(&rc->mu);
		err = read_send(rc);
		pthread_mutex_lock(&rc->mu);
		if (err)
			rc->sending = false;
		/* `sent` or abort may have come already: then this thread goes on */
		again = err || !rc->sending || rc->aborted;
		rc->running = again;
		pthread_mutex_unlock(&rc->mu);
		if (!again)
			return;
		if (err)
			break;
	}
	read_end(rc, err);
}

static void *
read_worker(void *arg)
{
	struct dn_rpc *b = arg;

	pthread_mutex_lock(&b->mu);
	for (;;) {
		struct rcall *rc;

		while (!b->rq_head && !b->stop)
			pthread_cond_wait(&b->rcond, &b->mu);
		rc = b->rq_head;
		if (!rc)
			break;
		b->rq_head = rc->next;
		if (!b->rq_head)
			b->rq_tail = NULL;
		pthread_mutex_unlock(&b->mu);
		read_step(rc);
		pthread_mutex_lock(&b->mu);
	}
	pthread_mutex_unlock(&b->mu);
	return NULL;
}

static int
on_read_start(void *ctx, struct rpc_read *r, const Zest__ReadRequest *req, void **call_ctx)
{
	struct dn_rpc *b = ctx;
	struct dn_object_info info;
	struct rcall *rc;
	int err;

	/* Missing object and bad range answer at once, without a reader thread. */
	err = dn_stat(b->s, req->bucket, req->key, &info);
	if (err) {
		rpc_read_set_error(r, "%s", no_such_name(err, req->bucket, req->key));
		return err;
	}
	if (req->offset > info.size || (req->has_length && req->length > info.size - req->offset)) {
		rpc_read_set_error(r, "range %llu+%llu outside %llu bytes",
		                   (unsigned long long)req->offset, (unsigned long long)req->length,
		                   (unsigned long long)info.size);
		dn_object_info_fini(&info);
		return -EINVAL;
	}
	dn_object_info_fini(&info);
	rc = calloc(1, sizeof(*rc));
	if (!rc)
		return -ENOMEM;
	rc->bucket = strdup(req->bucket);
	rc->key = strdup(req->key);
	if (!rc->bucket || !rc->key) {
		free(rc->bucket);
		free(rc->key);
		free(rc);
		return -ENOMEM;
	}
	pthread_mutex_init(&rc->mu, NULL);
	rc->b = b;
	rc->r = r;
	rc->off = req->offset;
	rc->len = req->length;
	rc->has_len = req->has_length;
	rc->running = true;
	*call_ctx = rc;
	rcall_queue(rc);
	return 0;
}

/* CQ thread: the previous ReadChunk left; the call's next turn goes to a reader. */
static void
on_read_sent(void *call_ctx, struct rpc_read *r)
{
	struct rcall *rc = call_ctx;
	bool queue;

	(void)r;
	pthread_mutex_lock(&rc->mu);
	rc->sending = false;
	queue = !rc->running;
	rc->running = true;
	pthread_mutex_unlock(&rc->mu);
	if (queue)
		rcall_queue(rc);
}

/* CQ thread: no `sent` will come; a reader finishes the call. */
static void
on_read_abort(void *call_ctx, struct rpc_read *r, int err)
{
	struct rcall *rc = call_ctx;
	bool queue;

	(void)r;
	(void)err;
	pthread_mutex_lock(&rc->mu);
	rc->aborted = true;
	queue = !rc->running;
	rc->running = true;
	pthread_mutex_unlock(&rc->mu);
	if (queue)
		rcall_queue(rc);
}

/* ------------------------------------------------------------------ unary */

static void
attrs_from_pb(Zest__Attr *const *in, size_t n, struct dn_attr *out)
{
	for (size_t i = 0; i < n; i++) {
		out[i].name = in[i]->name;
		out[i].value = in[i]->value;
	}
}

static int
unary_stat(struct dn_rpc *b, const Zest__ObjectRequest *req, struct rpc_reply *reply)
{
	struct dn_object_info info;
	Zest__ObjectInfo pb;
	Zest__Attr *attrs;
	Zest__Attr **pattrs;
	int err;

	err = dn_stat(b->s, req->bucket, req->key, &info);
	if (err) {
		rpc_reply_error(reply, "%s", no_such_name(err, req->bucket, req->key));
		return err;
	}
	attrs = calloc(info.nattrs + 1, sizeof(*attrs));
	pattrs = calloc(info.nattrs + 1, sizeof(*pattrs));
	if (attrs && pattrs) {
		info_to_pb(&info, &pb, attrs, pattrs, true);
		err = rpc_reply_message(reply, &pb.base);
	} else {
		err = -ENOMEM;
	}
	free(attrs);
	free(pattrs);
	dn_object_info_fini(&info);
	return err;
}

static int
unary_list(struct dn_rpc *b, const Zest__ListRequest *req, struct rpc_reply *reply)
{
	Zest__ListResult res = ZEST__LIST_RESULT__INIT;
	struct dn_list_result lr;
	Zest__ObjectInfo *ents = NULL, **pents = NULL;
	int err;

	err = dn_list(b->s, req->bucket, req->prefix, req->start_after,
	              req->limit ? req->limit : 1000, req->delimiter, &lr);
	if (err) {
		rpc_reply_error(reply, "list of %s", req->bucket);
		return err;
	}
	ents = calloc(lr.nentries + 1, sizeof(*ents));
	pents = calloc(lr.nentries + 1, sizeof(*pents));
	if (!ents || !pents) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < lr.nentries; i++) {
		info_to_pb(&lr.entries[i], &ents[i], NULL, NULL, false);
		pents[i] = &ents[i];
	}
	res.n_entries = lr.nentries;
	res.entries = pents;
	res.n_common_prefixes = lr.nprefixes;
	res.common_prefixes = lr.prefixes;
	res.truncated = lr.truncated;
	res.next_start_after = lr.next_start_after ? lr.next_start_after : "";
	err = rpc_reply_message(reply, &res.base);
out:
	free(ents);
	free(pents);
	dn_list_result_fini(&lr);
	return err;
}

static int
unary_compose(struct dn_rpc *b, const Zest__ComposeRequest *req, struct rpc_reply *reply)
{
	Zest__WriteResult wr = ZEST__WRITE_RESULT__INIT;
	struct dn_write_result res;
	struct dn_attr *attrs = NULL;
	const char **parts, **part_buckets, **part_etags;
	char msg[RPC_STATUS_MSG_MAX];
	struct dn_cond cond = { 0 };
	int err;

	if (!req->bucket[0] || !req->key[0] || strlen(req->key) > 1024) {
		rpc_reply_error(reply, "compose needs a bucket and a key");
		return -EINVAL;
	}
	parts = calloc(req->n_parts + 1, sizeof(*parts));
	part_buckets = calloc(req->n_parts + 1, sizeof(*part_buckets));
	part_etags = calloc(req->n_parts + 1, sizeof(*part_etags));
	attrs = calloc(req->n_attrs + 1, sizeof(*attrs));
	if (!parts || !part_buckets || !part_etags || !attrs) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < req->n_parts; i++) {
		const Zest__ObjectRequest *p = req->parts[i];

		/* Empty: the target's bucket. */
		part_buckets[i] = p->bucket[0] ? p->bucket : req->bucket;
		parts[i] = p->key;
		part_etags[i] = p->etag;
	}
	attrs_from_pb(req->attrs, req->n_attrs, attrs);
	if (req->cond) {
		cond.if_none_match = req->cond->if_none_match;
		cond.if_match = req->cond->if_match;
	}
	err = dn_compose_if(b->s, req->bucket, req->key, part_buckets, parts, part_etags,
	                    req->n_parts, req->delete_parts, req->etag, attrs, req->n_attrs,
	                    req->cond ? &cond : NULL, &res);
	if (cond_errmsg(req->bucket, req->key, err, msg, sizeof(msg))) {
		rpc_reply_error(reply, "%s", msg);
		goto out;
	}
	if (err == ZC_E(ZC_NO_BUCKET)) {
		rpc_reply_error(reply, "%s, or the bucket of a part", req->bucket);
		goto out;
	}
	if (err == -ENOENT) {
		rpc_reply_error(reply, "a part of %s is missing", req->key);
		goto out;
	}
	if (err == -EINVAL) {
		rpc_reply_error(reply, "compose of %s refused", req->key);
		goto out;
	}
	if (err == -EAGAIN) {
		rpc_reply_error(reply, "a part of %s changed during the compose", req->key);
		goto out;
	}
	if (err)
		goto out;
	wr.size = res.size;
	wr.crc32c = res.crc32c;
	wr.etag = (char *)(res.etag ? res.etag : req->etag);
	wr.mtime_ns = res.mtime_ns;
	err = rpc_reply_message(reply, &wr.base);
out:
	free(parts);
	free(part_buckets);
	free(part_etags);
	free(attrs);
	return err;
}

static int
on_unary(void *ctx, enum rpc_method m, const ProtobufCMessage *req, struct rpc_reply *reply)
{
	struct dn_rpc *b = ctx;
	int err;

	switch (m) {
	case RPC_STAT:
		return unary_stat(b, (const Zest__ObjectRequest *)req, reply);
	case RPC_DELETE: {
		const Zest__ObjectRequest *o = (const Zest__ObjectRequest *)req;
		Zest__DeleteResult dr = ZEST__DELETE_RESULT__INIT;

		err = dn_delete(b->s, o->bucket, o->key);
		if (err == ZC_E(ZC_NO_BUCKET)) {
			rpc_reply_error(reply, "%s", o->bucket);
			return err;
		}
		if (err < 0)
			return err;
		dr.existed = err == 1;
		return rpc_reply_message(reply, &dr.base);
	}
	case RPC_LIST:
		return unary_list(b, (const Zest__ListRequest *)req, reply);
	case RPC_COMPOSE:
		return unary_compose(b, (const Zest__ComposeRequest *)req, reply);
	case RPC_CREATE_BUCKET:
	case RPC_HEAD_BUCKET: {
		const Zest__BucketRequest *br = (const Zest__BucketRequest *)req;
		Zest__BucketInfo bi = ZEST__BUCKET_INFO__INIT;
		uint64_t ctime = 0;

		err = m == RPC_CREATE_BUCKET ? dn_bucket_create(b->s, br->bucket, &ctime)
		                             : dn_bucket_head(b->s, br->bucket, &ctime);
		if (err == -EINVAL)
			rpc_reply_error(reply, "bad bucket name '%s'", br->bucket);
		else if (err)
			rpc_reply_error(reply, "%s", br->bucket);
		if (err)
			return err;
		bi.name = br->bucket;
		bi.ctime_ns = ctime;
		return rpc_reply_message(reply, &bi.base);
	}
	case RPC_DELETE_BUCKET: {
		const Zest__BucketRequest *br = (const Zest__BucketRequest *)req;
		Zest__Empty e = ZEST__EMPTY__INIT;

		err = dn_bucket_delete(b->s, br->bucket);
		if (err == -EINVAL)
			rpc_reply_error(reply, "bad bucket name '%s'", br->bucket);
		else if (err)
			rpc_reply_error(reply, "%s", br->bucket);
		if (err)
			return err;
		return rpc_reply_message(reply, &e.base);
	}
	case RPC_LIST_BUCKETS: {
		Zest__BucketList bl = ZEST__BUCKET_LIST__INIT;
		struct dn_bucket_info *v = NULL;
		Zest__BucketInfo *bis = NULL, **pbis = NULL;
		size_t n = 0;

		err = dn_bucket_list(b->s, &v, &n);
		if (err)
			return err;
		bis = calloc(n + 1, sizeof(*bis));
		pbis = calloc(n + 1, sizeof(*pbis));
		if (bis && pbis) {
			for (size_t i = 0; i < n; i++) {
				zest__bucket_info__init(&bis[i]);
				bis[i].name = v[i].name;
				bis[i].ctime_ns = v[i].ctime_ns;
				pbis[i] = &bis[i];
			}
			bl.n_buckets = n;
			bl.buckets = pbis;
			err = rpc_reply_message(reply, &bl.base);
		} else {
			err = -ENOMEM;
		}
		free(bis);
		free(pbis);
		dn_bucket_list_free(v, n);
		return err;
	}
	default:
		return -ENOSYS;
	}
}

/* ------------------------------------------------------------------ lifecycle */

void
dn_rpc_metrics(FILE *out, void *arg)
{
	struct rpc_stats st;

	(void)arg;
	rpc_stats_get(&st);
	fprintf(out,
	        "# HELP zest_payload_received_bytes_total Payload bytes received in WriteChunks.\n"
	        "# TYPE zest_payload_received_bytes_total counter\n"
	        "zest_payload_received_bytes_total %llu\n"
	        "# HELP zest_payload_copied_bytes_total Payload bytes copied in user space.\n"
	        "# TYPE zest_payload_copied_bytes_total counter\n",
	        (unsigned long long)st.received_bytes);
	for (int s = 0; s < RPC_STAGE_COUNT; s++)
		fprintf(out, "zest_payload_copied_bytes_total{stage=\"%s\"} %llu\n",
		        rpc_stage_name(s), (unsigned long long)st.copied_bytes[s]);
	fprintf(out,
	        "# HELP zest_payload_messages_total Chunk messages parsed.\n"
	        "# TYPE zest_payload_messages_total counter\n"
	        "zest_payload_messages_total %llu\n"
	        "# HELP zest_rpc_live_buffers Received gRPC buffers still referenced.\n"
	        "# TYPE zest_rpc_live_buffers gauge\n"
	        "zest_rpc_live_buffers %ld\n",
	        (unsigned long long)st.messages, rpc_live_buffers());
}

void
dn_rpc_destroy(struct dn_rpc *b)
{
	if (!b)
		return;
	pthread_mutex_lock(&b->mu);
	b->stop = true;
	pthread_cond_broadcast(&b->wcond);
	pthread_cond_broadcast(&b->rcond);
	pthread_mutex_unlock(&b->mu);
	for (unsigned i = 0; i < b->n_workers; i++)
		pthread_join(b->workers[i], NULL);
	for (unsigned i = 0; i < b->n_readers; i++)
		pthread_join(b->readers[i], NULL);
	free(b->workers);
	free(b->readers);
	pthread_mutex_destroy(&b->mu);
	pthread_cond_destroy(&b->wcond);
	pthread_cond_destroy(&b->rcond);
	free(b);
}

int
dn_rpc_create(struct dn_store *s, const struct dn_rpc_opts *opts, struct dn_rpc **out,
              struct rpc_server_handlers *h)
{
	struct dn_rpc *b = calloc(1, sizeof(*b));

	if (!b)
		return -ENOMEM;
	b->s = s;
	if (opts)
		b->o = *opts;
	if (!b->o.write_workers)
		b->o.write_workers = 4;
	if (!b->o.readers)
		b->o.readers = 4;
	if (!b->o.call_cap)
		b->o.call_cap = 8u << 20;
	pthread_mutex_init(&b->mu, NULL);
	pthread_cond_init(&b->wcond, NULL);
	pthread_cond_init(&b->rcond, NULL);
	b->workers = calloc(b->o.write_workers, sizeof(pthread_t));
	b->readers = calloc(b->o.readers, sizeof(pthread_t));
	if (!b->workers || !b->readers)
		goto fail;
	for (; b->n_workers < b->o.write_workers; b->n_workers++) {
		if (pthread_create(&b->workers[b->n_workers], NULL, write_worker, b))
			goto fail;
		pthread_setname_np(b->workers[b->n_workers], "dn-write");
	}
	for (; b->n_readers < b->o.readers; b->n_readers++) {
		if (pthread_create(&b->readers[b->n_readers], NULL, read_worker, b))
			goto fail;
		pthread_setname_np(b->readers[b->n_readers], "dn-read");
	}
	memset(h, 0, sizeof(*h));
	h->write.open = on_write_open;
	h->write.data = on_write_data;
	h->write.commit = on_write_commit;
	h->write.abort = on_write_abort;
	h->write.handler_verifies_crc = true;
	h->read.start = on_read_start;
	h->read.sent = on_read_sent;
	h->read.abort = on_read_abort;
	h->unary = on_unary;
	h->ctx = b;
	*out = b;
	return 0;
fail:
	dn_rpc_destroy(b);
	return -ENOMEM;
}
