/*
 * dn_rpc_write: Write calls. Every callback of a call becomes a job on the call's own
 * queue (data jobs hold a zc_ref on each received segment: the payload is never copied);
 * a dn-write worker (dn_rpc_exec.c) runs a call's jobs in order. The binding fails a call
 * only where no further callback can come (see dn_rpc_internal.h).
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "dn_rpc_internal.h"
#include "ec.h"
#include "zc_crc.h"
#include "zc.h"

/* ------------------------------------------------------------------ write */

static void job_free(struct job *j);

static void
wcall_free(struct wcall *c)
{
	job_free(c->final);
	free(c->bucket);
	free(c->key);
	free(c);
}

static void
job_free(struct job *j)
{
	if (!j)
		return;
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
 * ZC_E(ZC_NO_QUORUM) (sent as UNAVAILABLE). */
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
	return ZC_E(ZC_NO_QUORUM);
}

int
dn_rpc_write_errmsg(struct dn_store *s, unsigned k, unsigned m, const char *bucket, const char *key,
                    int err, char *buf, size_t len)
{
	switch (err) {
	case -ENOSPC:
	case ZC_E(ZC_NO_QUORUM):
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
const char *
dn_rpc_no_such_name(int err, const char *bucket, const char *key)
{
	return zc_err_is(err, ZC_NO_BUCKET) ? bucket : key;
}

/*
 * A commit refused by its condition: ZC_E(ZC_PRECONDITION) (PreconditionFailed), or NoSuchKey for
 * an If-Match on a missing key. Returns err with its message in buf, or 0 for any other err.
 */
int
dn_rpc_cond_errmsg(const char *bucket, const char *key, int err, char *buf, size_t len)
{
	if (zc_err_is(err, ZC_PRECONDITION))
		snprintf(buf, len, "the condition on %s/%s did not hold", bucket, key);
	else if (zc_err_is(err, ZC_NO_KEY))
		snprintf(buf, len, "%s/%s (If-Match)", bucket, key);
	else
		return 0;
	return err;
}

/* The message for an engine error of a write; returns the errno to send it with. */
static int
write_errmsg(struct wcall *c, int err, char *buf, size_t len)
{
	int cerr = dn_rpc_cond_errmsg(c->bucket, c->key, err, buf, len);

	if (cerr)
		return cerr;
	return dn_rpc_write_errmsg(c->b->s, c->k, c->m, c->bucket, c->key, err, buf, len);
}

static enum dn_exec_run wcall_run(struct dn_exec_call *ec, struct dn_exec_job *ej);
static void wcall_run_data(struct dn_exec_call *ec, const struct dn_exec_data *d);

/* Under b->writes.mu. */
static void
wcall_push(struct wcall *c, struct job *j)
{
	dn_exec_push(&c->b->writes, &c->ec, &j->ej);
}

int
dn_rpc_on_write_open(void *ctx, struct rpc_write *w, const struct rpc_write_open *open,
                     void **call_ctx)
{
	struct dn_rpc *b = ctx;
	char msg[RPC_STATUS_MSG_MAX];
	struct wcall *c;
	struct job *j;
	int rc;

	rc = dn_rpc_names_object(open->bucket, open->key, msg, sizeof(msg));
	if (rc) {
		rpc_write_set_error(w, "%s", msg);
		return rc;
	}
	if (dn_admission_level(b->s) >= DN_ADM_REFUSE) {
		rpc_write_set_error(w, "drive write latency above the refusal limit");
		return -EAGAIN;
	}
	if (b->o.cluster) {
		/* The coordinator places the cells over the cluster and its commit Txn checks
		 * the bucket in etcd: the local drives and buckets are not the question. */
		pthread_mutex_lock(&b->mu);
		rc = b->coord ? 0 : ZC_E(ZC_UNAVAILABLE);
		pthread_mutex_unlock(&b->mu);
		if (rc) {
			rpc_write_set_error(w, "this datanode has not joined its cluster yet");
			return rc;
		}
		goto queue;
	}
	/* Too few drives take writes (failed or full): refuse before any payload moves. */
	rc = dn_write_quorum_check(b->s, open->ec_k, open->ec_m, NULL, NULL, NULL);
	if (rc == -ENOSPC || zc_err_is(rc, ZC_NO_QUORUM)) {
		rc = quorum_errmsg(b->s, open->ec_k, open->ec_m, rc, msg, sizeof(msg));
		rpc_write_set_error(w, "%s", msg);
		return rc;
	}
	rc = dn_bucket_head(b->s, open->bucket, NULL);
	if (zc_err_is(rc, ZC_NO_BUCKET)) {
		rpc_write_set_error(w, "%s", open->bucket);
		return rc;
	}
queue:
	c = calloc(1, sizeof(*c));
	j = calloc(1, sizeof(*j));
	if (!c || !j)
		goto nomem;
	c->final = calloc(1, sizeof(*c->final));
	if (!c->final)
		goto nomem;
	c->bucket = strdup(open->bucket);
	c->key = strdup(open->key);
	if (!c->bucket || !c->key)
		goto nomem;
	c->ec.run = wcall_run;
	c->ec.run_data = wcall_run_data;
	c->ec.w = w;
	c->b = b;
	c->size = open->size;
	c->size_known = open->size_known;
	c->k = open->ec_k;
	c->m = open->ec_m;
	/* Admission may park the call: a worker asks, and the BEGIN job waits without it. */
	j->kind = JOB_BEGIN;
	pthread_mutex_lock(&b->writes.mu);
	wcall_push(c, j);
	pthread_mutex_unlock(&b->writes.mu);
	*call_ctx = c;
	return 0;
nomem:
	free(j);
	if (c)
		wcall_free(c);
	return -ENOMEM;
}

void
dn_rpc_on_write_data(void *call_ctx, struct rpc_write *w, uint64_t offset,
                     const struct zc_seg *segs, size_t n_segs, size_t len, uint32_t crc32c)
{
	struct wcall *c = call_ctx;

	if (dn_exec_queue_data(&c->b->writes, &c->ec, offset, segs, n_segs, len, crc32c) !=
	    DN_EXEC_FAIL_HERE)
		return;
	if (c->dw)
		dn_write_abort(c->dw); /* still open after an -ENOMEM here */
	if (c->cw)
		dn_coord_abort(c->cw); /* the same (cancels its peer streams) */
	(void)w;                       /* c->ec.w */
	dn_exec_fail(&c->b->writes, &c->ec, -EIO, "failed");
	wcall_free(c);
}

void
dn_rpc_on_write_commit(void *call_ctx, struct rpc_write *w, const struct rpc_commit *last)
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
			j->attrs[j->nattrs].name = strdup(last->attrs[j->nattrs].name);
			j->attrs[j->nattrs].value = strdup(last->attrs[j->nattrs].value);
			ok = j->attrs[j->nattrs].name && j->attrs[j->nattrs].value;
		}
	}
	pthread_mutex_lock(&b->writes.mu);
	if (!ok) {
		/* No memory for the commit's copies: the preallocated job aborts the write. */
		job_free(j);
		j = c->final;
		c->final = NULL;
		j->kind = JOB_ABORT;
		j->err = -ENOMEM;
		if (!c->ec.err) {
			c->ec.err = -ENOMEM;
			snprintf(c->ec.errmsg, sizeof(c->ec.errmsg), "out of memory");
		}
	}
	wcall_push(c, j);
	pthread_mutex_unlock(&b->writes.mu);
}

void
dn_rpc_on_write_abort(void *call_ctx, struct rpc_write *w, int err)
{
	struct wcall *c = call_ctx;
	struct dn_rpc *b = c->b;
	struct job *j = c->final; /* allocated at open: an abort always lands */

	(void)w;
	c->final = NULL;
	j->kind = JOB_ABORT;
	j->err = err;
	pthread_mutex_lock(&b->writes.mu);
	if (c->parked && dn_admission_cancel(b->s, &c->adm)) {
		/* Nothing else would bring the call back before its queue wait ran out: its
		 * BEGIN fails with -ECANCELED and this abort ends the call right after. */
		c->parked = false;
		c->adm_done = true;
		c->adm_err = -ECANCELED;
		dn_exec_ready(&b->writes, &c->ec);
	}
	wcall_push(c, j);
	pthread_mutex_unlock(&b->writes.mu);
}

/* dn-admit: the parked BEGIN's turn came (err 0) or its wait ran out (-EAGAIN). */
static void
admitted(void *arg, int err)
{
	struct wcall *c = arg;
	struct dn_rpc *b = c->b;

	pthread_mutex_lock(&b->writes.mu);
	c->parked = false;
	c->adm_done = true;
	c->adm_err = err;
	dn_exec_ready(&b->writes, &c->ec); /* still scheduled: back to the workers, BEGIN first */
	pthread_mutex_unlock(&b->writes.mu);
}

static void
commit_done(void *arg, int err, const struct dn_write_result *res)
{
	struct wcall *c = arg;

	if (err) {
		char msg[RPC_STATUS_MSG_MAX];

		/* a condition that fails is the client's answer */
		if (!zc_err_is(err, ZC_PRECONDITION))
			ZC_WARN("dn_rpc", "commit failed bucket=%s key=%s err=%d", c->bucket,
			        c->key, err);
		err = write_errmsg(c, err, msg, sizeof(msg));
		rpc_write_fail(c->ec.w, err, "%s", msg);
	} else {
		struct rpc_write_result wr = { .size = res->size,
			                       .crc32c = res->crc32c,
			                       .etag = res->etag,
			                       .mtime_ns = res->mtime_ns };

		rpc_write_finish(c->ec.w, &wr);
	}
	wcall_free(c);
}

/* Cluster mode: a DATA job to the coordinator; an error ends the coordinated write at
 * once and is delivered by the next callback. */
static void
coord_data(struct wcall *c, const struct dn_exec_data *d)
{
	char msg[RPC_STATUS_MSG_MAX];
	int rc = dn_coord_data(c->cw, d->off, d->segs, d->n, d->crc32c, msg, sizeof(msg));

	if (!rc)
		return;
	dn_coord_abort(c->cw);
	c->cw = NULL;
	dn_exec_set_err(&c->b->writes, &c->ec, rc, "%s", msg);
}

/* Cluster mode: COMMIT. The Write is answered as soon as the record is in etcd (or the
 * commit failed); the cells' follow-up calls come after. Frees c. */
static void
coord_commit(struct wcall *c, struct job *j)
{
	struct dn_coord_result res;
	char msg[RPC_STATUS_MSG_MAX];
	int rc = dn_coord_commit(c->cw, j->etag, j->attrs, j->nattrs, j->has_cond ? &j->cond : NULL,
	                         &res, msg, sizeof(msg));

	if (rc) {
		rpc_write_fail(c->ec.w, rc, "%s", msg);
	} else {
		struct rpc_write_result wr = { .size = res.size,
			                       .crc32c = res.crc32c,
			                       .etag = res.etag,
			                       .mtime_ns = res.mtime_ns };

		rpc_write_finish(c->ec.w, &wr);
	}
	dn_coord_end(c->cw);
	c->cw = NULL;
	wcall_free(c);
}

/*
 * BEGIN: ask admission; when it parks the call (paced or queued), put the job back first
 * on the call's queue and let the worker go: `admitted` (or a cancel) brings the call
 * back, with the answer in adm_err. The ask is under b->writes.mu so that the answer cannot
 * come before the job is back.
 */
static enum dn_exec_run
run_begin(struct wcall *c, struct job *j)
{
	struct dn_rpc *b = c->b;
	int rc = 0;

	if (!c->adm_done && !b->o.cluster)
		rc = dn_write_quorum_check(b->s, c->k, c->m, NULL, NULL, NULL);
	pthread_mutex_lock(&b->writes.mu);
	if (!rc && !c->adm_done) {
		if (!b->o.cluster) /* the coordinator has pools of its own */
			dn_admit_bufs(&c->adm, c->k, c->m, c->size, c->size_known);
		rc = dn_admission_try(b->s, &c->adm, admitted, c);
		if (rc == 1) {
			dn_exec_park(&c->ec, &j->ej);
			c->parked = true;
			pthread_mutex_unlock(&b->writes.mu);
			return DN_EXEC_PARKED;
		}
	} else if (!rc) {
		rc = c->adm_err;
	}
	pthread_mutex_unlock(&b->writes.mu);
	if (!rc && b->o.cluster) {
		char msg[RPC_STATUS_MSG_MAX];

		rc = dn_coord_begin(b->coord, c->bucket, c->key, c->size, c->size_known, c->k, c->m,
		                    &c->cw, msg, sizeof(msg));
		if (rc) {
			c->cw = NULL;
			dn_exec_set_err(&b->writes, &c->ec, rc, "%s", msg);
		}
		job_free(j);
		return DN_EXEC_NEXT;
	}
	if (!rc)
		rc = dn_write_begin_admitted(b->s, &c->adm, c->bucket, c->key, c->size,
		                             c->size_known, c->k, c->m, &c->dw);
	if (rc) {
		c->dw = NULL;
		pthread_mutex_lock(&b->writes.mu);
		c->ec.err = write_errmsg(c, rc, c->ec.errmsg, sizeof(c->ec.errmsg));
		pthread_mutex_unlock(&b->writes.mu);
	}
	job_free(j);
	return DN_EXEC_NEXT;
}

/* A DATA job: to the engine, or the coordinator; an error is recorded for the next
 * callback. */
static void
wcall_run_data(struct dn_exec_call *ec, const struct dn_exec_data *d)
{
	struct wcall *c = dn_container_of(ec, struct wcall, ec);
	struct dn_exec *ex = &c->b->writes;
	int err = dn_exec_err(ex, &c->ec), rc;

	if (!err && c->cw)
		coord_data(c, d);
	if (!err && c->dw) {
		rc = dn_write_data_checked(c->dw, d->off, d->segs, d->n, d->crc32c);
		if (rc) {
			/* Poisoned: drop it now, the next callback reports. */
			dn_write_abort(c->dw);
			c->dw = NULL;
			if (rc == -EBADMSG) {
				dn_exec_set_err(
				        ex, &c->ec, rc,
				        "CRC32C mismatch at offset %llu: the %zu bytes sent "
				        "do not match crc32c %08x",
				        (unsigned long long)d->off, d->len, d->crc32c);
			} else {
				pthread_mutex_lock(&ex->mu);
				c->ec.err = write_errmsg(c, rc, c->ec.errmsg, sizeof(c->ec.errmsg));
				pthread_mutex_unlock(&ex->mu);
			}
		}
	}
}

/* Run one job of c (a dn-write worker holding c). DN_EXEC_GONE: c is gone;
 * DN_EXEC_PARKED: c is parked in admission and may already be on another worker. */
static enum dn_exec_run
wcall_run(struct dn_exec_call *ec, struct dn_exec_job *ej)
{
	struct wcall *c = dn_container_of(ec, struct wcall, ec);
	struct job *j = dn_container_of(ej, struct job, ej);
	struct dn_exec *ex = &c->b->writes;
	int err;

	switch (j->kind) {
	case JOB_BEGIN:
		return run_begin(c, j);
	case JOB_COMMIT:
		err = dn_exec_err(ex, &c->ec);
		if (!err && c->cw) {
			coord_commit(c, j);
		} else if (err || !c->dw) {
			if (c->dw)
				dn_write_abort(c->dw);
			dn_exec_fail(ex, &c->ec, -EIO, "no write");
			wcall_free(c);
		} else {
			dn_write_commit_if(c->dw, j->etag, j->attrs, j->nattrs,
			                   j->has_cond ? &j->cond : NULL, commit_done, c);
		}
		job_free(j);
		return DN_EXEC_GONE;
	case JOB_ABORT:
		if (c->dw)
			dn_write_abort(c->dw);
		if (c->cw)
			dn_coord_abort(c->cw);
		dn_exec_fail(ex, &c->ec, j->err < 0 ? j->err : -ECANCELED, "write of %s/%s aborted",
		             c->bucket, c->key);
		wcall_free(c);
		job_free(j);
		return DN_EXEC_GONE;
	}
	return DN_EXEC_NEXT;
}
