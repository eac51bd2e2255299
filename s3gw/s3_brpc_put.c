/*
 * s3_brpc_put: the PUT stream of the rpc backend: one Write call on the placed node, the
 * caller's segments sent by reference, the worker held while the window is full. The
 * cluster backend (s3_bcl_meta.c) opens the same stream on the coordinator it picked.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "s3_backend_rpc_internal.h"
#include "zc.h"

/* ------------------------------------------------------------------ PUT stream */

struct put {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rpc_cwrite *w; /* valid until put_free (the rpc object is refcounted) */
	unsigned long writable_gen;
	bool done;
	struct rpc_status st;
	bool have_res;
	uint64_t size, mtime_ns;
	char key[S3_MAX_KEY + 1];
};

static void
put_on_writable(void *arg, struct rpc_cwrite *w)
{
	struct put *p = arg;

	(void)w;
	pthread_mutex_lock(&p->mu);
	p->writable_gen++;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void
put_on_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
            const struct rpc_write_result *res)
{
	struct put *p = arg;

	(void)w;
	pthread_mutex_lock(&p->mu);
	p->st = *st;
	if (!st->err && res) {
		p->have_res = true;
		p->size = res->size;
		p->mtime_ns = res->mtime_ns;
	}
	p->done = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

static void
put_wait_done(struct put *p)
{
	pthread_mutex_lock(&p->mu);
	while (!p->done)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
}

static void
put_free(struct put *p)
{
	rpc_cwrite_destroy(p->w);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	free(p);
}

int
s3_brpc_put_open(void *ctx, const char *bucket, const char *key, uint64_t size, bool size_known,
                 void **stream)
{
	return s3_brpc_put_open_on(s3_brpc_place(ctx, bucket, key), bucket, key, size, size_known,
	                           stream);
}

int
s3_brpc_put_open_on(struct rpc_client *c, const char *bucket, const char *key, uint64_t size,
                    bool size_known, void **stream)
{
	static const struct rpc_cwrite_cbs cbs = { put_on_writable, put_on_done };
	struct rpc_write_open op = { 0 };
	struct put *p;
	int rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	snprintf(p->key, sizeof(p->key), "%s", key);
	op.bucket = bucket;
	op.key = key;
	op.size = size;
	op.size_known = size_known;
	/* hold the lock: `done` may come before *out is stored */
	pthread_mutex_lock(&p->mu);
	rc = rpc_cwrite_open(c, &op, &cbs, p, &p->w);
	pthread_mutex_unlock(&p->mu);
	if (rc < 0) {
		put_free(p);
		return rc;
	}
	*stream = p;
	return 0;
}

/* crc: the CRC32C of seg, NULL: rpc computes it. */
static int
put_send(struct put *p, const struct zc_seg *seg, const uint32_t *crc)
{

	for (;;) {
		unsigned long gen;
		int rc;

		pthread_mutex_lock(&p->mu);
		if (p->done) {
			rc = !p->st.err ? -EPROTO : rpc_status_err(&p->st);
			pthread_mutex_unlock(&p->mu);
			return rc;
		}
		gen = p->writable_gen;
		pthread_mutex_unlock(&p->mu);
		rc = crc ? rpc_cwrite_send_crc(p->w, seg, 1, *crc) : rpc_cwrite_send(p->w, seg, 1);
		if (rc == 0)
			return 0;
		if (rc == -ECANCELED) { /* the call failed: its status says why */
			put_wait_done(p);
			continue;
		}
		if (rc != -EAGAIN)
			return rc;
		/* window full: stop reading the socket until the transport took bytes */
		pthread_mutex_lock(&p->mu);
		while (p->writable_gen == gen && !p->done) {
			struct timespec ts;

			zc_deadline(&ts, CLOCK_REALTIME, 100 * 1000000ull);
			if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
				break; /* re-check: a missed wakeup costs 100 ms, never a hang */
		}
		pthread_mutex_unlock(&p->mu);
	}
}

int
s3_brpc_put_write(void *stream, const struct zc_seg *seg)
{
	return put_send(stream, seg, NULL);
}

int
s3_brpc_put_write_crc(void *stream, const struct zc_seg *seg, uint32_t crc32c)
{
	return put_send(stream, seg, &crc32c);
}

int
s3_brpc_put_commit(void *stream, const char *etag, const char *attrs, size_t attrs_len,
                   const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct put *p = stream;
	struct rpc_write_cond rc_cond;
	struct rpc_commit cm;
	struct attrs at;
	int rc;

	rc = s3_brpc_attrs_parse(&at, attrs, attrs_len);
	if (rc < 0)
		goto cancel;
	pthread_mutex_lock(&p->mu);
	if (p->done) {
		pthread_mutex_unlock(&p->mu);
		free(at.buf);
		goto finish;
	}
	pthread_mutex_unlock(&p->mu);
	cm = (struct rpc_commit){ .etag = etag,
		                  .attrs = at.a,
		                  .n_attrs = at.n,
		                  .cond = s3_brpc_cond_to_rpc(cond, &rc_cond) };
	rc = rpc_cwrite_commit(p->w, NULL, 0, &cm);
	free(at.buf);
	if (rc < 0 && rc != -ECANCELED)
		goto cancel;
finish:
	put_wait_done(p);
	rc = rpc_status_err(&p->st);
	if (rc == 0 && out) {
		memset(out, 0, offsetof(struct s3_obj_info, attrs));
		snprintf(out->key, sizeof(out->key), "%s", p->key);
		out->size = p->size;
		snprintf(out->etag, sizeof(out->etag), "%s", etag);
		out->mtime_ns = p->mtime_ns;
	}
	put_free(p);
	return rc;
cancel:
	rpc_cwrite_cancel(p->w);
	put_wait_done(p);
	put_free(p);
	return rc;
}

void
s3_brpc_put_abort(void *stream)
{
	struct put *p = stream;

	pthread_mutex_lock(&p->mu);
	if (!p->done) {
		pthread_mutex_unlock(&p->mu);
		rpc_cwrite_cancel(p->w);
	} else {
		pthread_mutex_unlock(&p->mu);
	}
	put_wait_done(p);
	put_free(p);
}
