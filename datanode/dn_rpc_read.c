/*
 * dn_rpc_read: Read calls, stepped by the reader threads: one step reads about
 * READ_BATCH bytes of whole stripes and hands them to gRPC; the `sent` callback queues
 * the call again, so a slow client holds no thread.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dn_rpc_internal.h"
#include "ec.h"
#include "zc_crc.h"
#include "zc.h"

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
void
dn_rpc_rcall_queue(struct rcall *rc)
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

/* The object's facts for the wire; attrs (in->nattrs of them) only when attrs is set. */
void
dn_rpc_info_to_rpc(const struct dn_object_info *in, struct rpc_object_info *out,
                   struct rpc_attr *attrs)
{
	memset(out, 0, sizeof(*out));
	out->key = in->key;
	out->size = in->size;
	out->etag = in->etag;
	out->mtime_ns = in->mtime_ns;
	out->crc32c = in->crc32c;
	out->ec_k = in->k;
	out->ec_m = in->m;
	if (attrs) {
		for (size_t i = 0; i < in->nattrs; i++) {
			attrs[i].name = in->attrs[i].name;
			attrs[i].value = in->attrs[i].value;
		}
		out->n_attrs = in->nattrs;
		out->attrs = attrs;
	}
}

/* Hand the batch to gRPC (a reader thread); the caller set rc->sending. */
static int
read_send(struct rcall *rc)
{
	struct rpc_object_info info, *pinfo = NULL;
	struct rpc_attr *attrs = NULL;
	uint32_t crc = 0;
	int err;

	if (!rc->info_sent) {
		attrs = calloc(rc->info.nattrs + 1, sizeof(*attrs));
		if (!attrs) {
			err = -ENOMEM;
			goto out;
		}
		dn_rpc_info_to_rpc(&rc->info, &info, attrs);
		pinfo = &info;
	}
	for (size_t i = 0; i < rc->n_batch; i++)
		crc = zc_crc32c(crc, rc->batch[i].ptr, rc->batch[i].len);
	err = rpc_read_send(rc->r, pinfo, rc->batch_off, crc, rc->batch, rc->n_batch);
	if (!err)
		rc->info_sent = true;
out:
	free(attrs);
	/* rpc_read_send took its own refs. */
	for (size_t i = 0; i < rc->n_batch; i++)
		if (rc->batch[i].ref)
			zc_ref_put(rc->batch[i].ref);
	rc->n_batch = 0;
	rc->batch_len = 0;
	return err;
}

int
dn_rpc_read_cb(void *arg, uint64_t offset, const struct zc_seg *seg)
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
	if (rc->is_cell && err) {
		/* rc->key names the cell; no bucket */
		if (err != -ECANCELED && !zc_err_is(err, ZC_NO_KEY))
			ZC_WARN("dn_rpc", "read of %s failed err=%d", rc->key, err);
		rpc_read_finish(rc->r, err, "read of %s: %s", rc->key,
		                err == -EBADMSG ? "a chunk failed its CRC32C or the file is short"
		                : err > -ZC_ERR_BASE ? strerror(-err)
		                                     : zc_code_word(zc_err_code(err)));
		rcall_free(rc);
		return;
	}
	switch (err) {
	case 0:
		rpc_read_finish(rc->r, 0, NULL);
		break;
	case ZC_E(ZC_NO_KEY):
		rpc_read_finish(rc->r, err, "%s", rc->key);
		break;
	case ZC_E(ZC_NO_BUCKET):
		rpc_read_finish(rc->r, err, "%s", rc->bucket);
		break;
	case -EINVAL:
		rpc_read_finish(rc->r, err, "range %llu+%llu of %s", (unsigned long long)rc->off,
		                (unsigned long long)rc->len, rc->key);
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
		if (rc->is_cell) {
			more = dn_rpc_cell_read_next(rc);
		} else {
			if (!rc->cur) {
				err = dn_read_open(b->s, rc->bucket, rc->key, rc->off, rc->len,
				                   rc->has_len, &rc->info, &rc->cur);
				if (err)
					break;
			}
			more = dn_read_next(rc->cur, READ_BATCH, dn_rpc_read_cb, rc);
		}
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

void *
dn_rpc_read_worker(void *arg)
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

int
dn_rpc_on_read_start(void *ctx, struct rpc_read *r, const struct rpc_read_req *req, void **call_ctx)
{
	struct dn_rpc *b = ctx;
	char msg[RPC_STATUS_MSG_MAX];
	struct dn_object_info info;
	struct rcall *rc;
	int err;

	err = dn_rpc_names_object(req->bucket, req->key, msg, sizeof(msg));
	if (err) {
		rpc_read_set_error(r, "%s", msg);
		return err;
	}
	/* Missing object and bad range answer at once, without a reader thread. */
	err = dn_stat(b->s, req->bucket, req->key, &info);
	if (err) {
		rpc_read_set_error(r, "%s", dn_rpc_no_such_name(err, req->bucket, req->key));
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
	dn_rpc_rcall_queue(rc);
	return 0;
}

/* CQ thread: the previous ReadChunk left; the call's next turn goes to a reader. */
void
dn_rpc_on_read_sent(void *call_ctx, struct rpc_read *r)
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
		dn_rpc_rcall_queue(rc);
}

/* CQ thread: no `sent` will come; a reader finishes the call. */
void
dn_rpc_on_read_abort(void *call_ctx, struct rpc_read *r, int err)
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
		dn_rpc_rcall_queue(rc);
}
