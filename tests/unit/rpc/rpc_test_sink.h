/*
 * A small datanode stand-in for the rpc tests and rpc_sink_server.
 *
 * verify mode: every data segment is checked against the object's pattern, kept by a
 * zc_ref and handed to a "drive" thread, which drops the refs later (the drive write) and
 * finishes the call after the last one, as the real datanode does after fsync. A call
 * pauses receiving while more than SINK_CALL_CAP bytes are held and the drive thread
 * resumes it. discard mode: receive, parse, release; finish on commit.
 */
#ifndef RPC_TEST_SINK_H
#define RPC_TEST_SINK_H

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "zc_crc.h"
#include "rpc_server.h"
#include "rpc_stats.h"
#include "rpc_client.h"
#include "rpc_client_internal.h" /* rpc_client_put, rpc_marshaller_parse */
#include "rpc_status_internal.h" /* what the wire carries */

#define SINK_CALL_CAP (8u << 20)

/* The test objects' content: a byte per offset, seeded by the key. */
static inline uint8_t
sink_pattern(uint32_t seed, uint64_t off)
{
	uint64_t x = (off >> 3) * 0x9e3779b97f4a7c15ull + seed;

	return (uint8_t)((x ^ (x >> 29)) >> (8 * (off & 7)));
}

static inline uint32_t
sink_seed(const char *key)
{
	uint32_t h = 2166136261u;

	for (; *key; key++)
		h = (h ^ (uint8_t)*key) * 16777619u;
	return h;
}

static inline void
sink_fill(uint32_t seed, uint64_t off, uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = sink_pattern(seed, off + i);
}

/*
 * Put one pattern object per size through cl into bucket "b" (keys "<prefix>-<i>", chunks of
 * 1 MiB), checking each reply's CRC32C. *received and *copied: payload bytes received and
 * copied in user space meanwhile, by this process's rpc (rpc_stats). Returns 0, or -1 with
 * the failing key and status on stderr.
 */
static inline int
sink_put_sizes(struct rpc_client *cl, const char *prefix, const size_t *sizes, size_t n,
               uint64_t *received, uint64_t *copied)
{
	struct rpc_stats before, after;
	struct rpc_status st;
	char key[64];

	rpc_stats_get(&before);
	for (size_t i = 0; i < n; i++) {
		struct rpc_write_open open = {
			.bucket = "b", .key = key, .size = sizes[i], .size_known = true
		};
		struct rpc_write_result res = { 0 };
		uint8_t *buf = malloc(sizes[i]);
		int bad;

		snprintf(key, sizeof(key), "%s-%zu", prefix, i);
		if (!buf)
			return -1;
		sink_fill(sink_seed(key), 0, buf, sizes[i]);
		bad = rpc_client_put(cl, &open, buf, sizes[i], 1u << 20, &res, &st) ||
		      res.crc32c != zc_crc32c(0, buf, sizes[i]);
		free(buf);
		if (bad) {
			fprintf(stderr, "put %s: status %d '%s'\n", key,
			        rpc_status_from_err(st.err), st.msg);
			return -1;
		}
	}
	rpc_stats_get(&after);
	*received = after.received_bytes - before.received_bytes;
	*copied = 0;
	for (int s = 0; s < RPC_STAGE_COUNT; s++)
		*copied += after.copied_bytes[s] - before.copied_bytes[s];
	return 0;
}

struct sink_obj;

enum sink_job_kind { SINK_DATA, SINK_FINISH, SINK_FAIL };

struct sink_job {
	struct sink_job *next;
	enum sink_job_kind kind;
	struct sink_obj *o;
	struct zc_seg *segs;
	size_t n_segs, len;
};

struct sink {
	bool verify, discard;
	pthread_t drive;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct sink_job *head, *tail;
	bool stop;
	unsigned delay_us; /* per data job: a slow drive */
	bool pause_always; /* pause after every message; the drive thread resumes */
	atomic_long opened, committed, aborted, finished, bad_bytes, pauses;
	atomic_ullong bytes;
};

struct sink_obj {
	struct sink *s;
	struct rpc_write *w;
	uint32_t seed, crc;
	uint64_t size;
	size_t held; /* bytes whose refs the drive thread still holds (under s->mu) */
	bool paused;
	char etag[64];
};

static void
sink_push(struct sink *s, struct sink_job *j)
{
	pthread_mutex_lock(&s->mu);
	if (s->tail)
		s->tail->next = j;
	else
		s->head = j;
	s->tail = j;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static void *
sink_drive(void *arg)
{
	struct sink *s = arg;

	for (;;) {
		struct sink_job *j;
		struct sink_obj *o;

		pthread_mutex_lock(&s->mu);
		while (!s->head && !s->stop)
			pthread_cond_wait(&s->cond, &s->mu);
		j = s->head;
		if (!j) {
			pthread_mutex_unlock(&s->mu);
			break;
		}
		s->head = j->next;
		if (!s->head)
			s->tail = NULL;
		pthread_mutex_unlock(&s->mu);
		o = j->o;
		switch (j->kind) {
		case SINK_DATA: {
			bool resume = false;

			if (s->delay_us)
				usleep(s->delay_us);
			for (size_t i = 0; i < j->n_segs; i++)
				zc_ref_put(j->segs[i].ref); /* the "drive write" is done */
			pthread_mutex_lock(&s->mu);
			o->held -= j->len;
			if (o->paused && (o->held < SINK_CALL_CAP / 2 || s->pause_always)) {
				o->paused = false;
				resume = true;
			}
			pthread_mutex_unlock(&s->mu);
			if (resume)
				rpc_write_resume(o->w);
			break;
		}
		case SINK_FINISH: {
			struct rpc_write_result res = { 0 };

			res.size = o->size;
			res.crc32c = o->crc;
			res.etag = o->etag;
			res.mtime_ns = (uint64_t)time(NULL) * 1000000000ull;
			atomic_fetch_add(&s->committed, 1);
			rpc_write_finish(o->w, &res);
			free(o);
			break;
		}
		case SINK_FAIL:
			atomic_fetch_add(&s->aborted, 1);
			rpc_write_fail(o->w, -ECANCELED, "aborted");
			free(o);
			break;
		}
		free(j->segs);
		free(j);
	}
	return NULL;
}

static int
sink_open(void *ctx, struct rpc_write *w, const struct rpc_write_open *open, void **call_ctx)
{
	struct sink *s = ctx;
	struct sink_obj *o;

	if (!strcmp(open->bucket, "nosuchbucket")) {
		rpc_write_set_error(w, "%s", open->bucket);
		return ZC_E(ZC_NO_BUCKET);
	}
	o = calloc(1, sizeof(*o));
	if (!o)
		return -ENOMEM;
	o->s = s;
	o->w = w;
	o->seed = sink_seed(open->key);
	snprintf(o->etag, sizeof(o->etag), "%s", open->key);
	*call_ctx = o;
	atomic_fetch_add(&s->opened, 1);
	return 0;
}

static void
sink_data(void *call_ctx, struct rpc_write *w, uint64_t offset, const struct zc_seg *segs,
          size_t n_segs, size_t len, uint32_t crc32c)
{
	struct sink_obj *o = call_ctx;
	struct sink *s = o->s;
	struct sink_job *j;
	uint64_t off = offset;
	uint32_t msg_crc = 0;

	for (size_t i = 0; i < n_segs; i++) {
		if (s->verify)
			for (size_t b = 0; b < segs[i].len; b++)
				if (segs[i].ptr[b] != sink_pattern(o->seed, off + b)) {
					atomic_fetch_add(&s->bad_bytes, 1);
					break;
				}
		msg_crc = zc_crc32c(msg_crc, segs[i].ptr, segs[i].len);
		off += segs[i].len;
	}
	/* The server checked the message's CRC before handing it over: it must match. */
	if (msg_crc != crc32c)
		atomic_fetch_add(&s->bad_bytes, 1);
	o->crc = zc_crc32c_combine(o->crc, msg_crc, len);
	o->size += len;
	atomic_fetch_add(&s->bytes, len);
	if (s->discard)
		return;
	j = calloc(1, sizeof(*j));
	j->segs = malloc(n_segs * sizeof(*j->segs));
	if (!j || !j->segs)
		abort();
	j->kind = SINK_DATA;
	j->o = o;
	j->n_segs = n_segs;
	j->len = len;
	for (size_t i = 0; i < n_segs; i++) {
		j->segs[i] = segs[i];
		if (segs[i].ref)
			zc_ref_get(segs[i].ref); /* ours until the drive thread is done */
	}
	pthread_mutex_lock(&s->mu);
	o->held += len;
	if ((o->held > SINK_CALL_CAP || s->pause_always) && !o->paused) {
		o->paused = true;
		rpc_write_pause(w);
		atomic_fetch_add(&s->pauses, 1);
	}
	pthread_mutex_unlock(&s->mu);
	sink_push(s, j);
}

static void
sink_commit(void *call_ctx, struct rpc_write *w, const struct rpc_commit *last)
{
	struct sink_obj *o = call_ctx;
	struct sink_job *j;

	(void)w;
	if (last->etag[0])
		snprintf(o->etag, sizeof(o->etag), "%s", last->etag);
	if (o->s->discard) {
		struct rpc_write_result res = { 0 };

		res.size = o->size;
		res.crc32c = o->crc;
		res.etag = o->etag;
		atomic_fetch_add(&o->s->committed, 1);
		rpc_write_finish(o->w, &res);
		free(o);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		abort();
	j->kind = SINK_FINISH;
	j->o = o;
	sink_push(o->s, j);
}

static void
sink_abort(void *call_ctx, struct rpc_write *w, int err)
{
	struct sink_obj *o = call_ctx;
	struct sink_job *j;

	(void)w;
	(void)err;
	if (o->s->discard) {
		atomic_fetch_add(&o->s->aborted, 1);
		rpc_write_fail(o->w, -ECANCELED, "aborted");
		free(o);
		return;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		abort();
	j->kind = SINK_FAIL;
	j->o = o;
	sink_push(o->s, j);
}

/* ---- Read: serves the pattern of the requested key from per-chunk heap buffers */

struct sink_read {
	struct rpc_read *r;
	uint32_t seed;
	uint64_t off, end, size;
	bool first;
};

struct sink_buf {
	struct zc_ref ref;
	uint8_t data[];
};

static void
sink_buf_release(struct zc_ref *ref)
{
	free(ref);
}

static void
sink_read_next(struct sink_read *sr)
{
	struct rpc_object_info info = { 0 };
	size_t n = sr->end - sr->off < (256u << 10) ? sr->end - sr->off : (256u << 10);
	struct sink_buf *b;
	struct zc_seg seg;
	int rc;

	if (sr->off == sr->end && !sr->first) {
		rpc_read_finish(sr->r, 0, NULL);
		free(sr);
		return;
	}
	b = malloc(sizeof(*b) + n + 1);
	if (!b)
		abort();
	zc_ref_init(&b->ref, sink_buf_release);
	sink_fill(sr->seed, sr->off, b->data, n);
	seg = (struct zc_seg){ b->data, n, &b->ref };
	info.size = sr->size;
	info.key = "k";
	rc = rpc_read_send(sr->r, sr->first ? &info : NULL, sr->off, zc_crc32c(0, b->data, n), &seg,
	                   1);
	zc_ref_put(&b->ref); /* the wire holds its own until written */
	sr->first = false;
	sr->off += n;
	if (rc) {
		rpc_read_finish(sr->r, rc, "send failed");
		free(sr);
	}
}

static int
sink_read_start(void *ctx, struct rpc_read *r, const struct rpc_read_req *req, void **call_ctx)
{
	struct sink_read *sr;
	uint64_t size = 3u << 20;

	(void)ctx;
	if (!strcmp(req->key, "missing")) {
		rpc_read_set_error(r, "%s", req->key);
		return ZC_E(ZC_NO_KEY);
	}
	if (req->offset > size) {
		rpc_read_set_error(r, "offset %llu", (unsigned long long)req->offset);
		return -EINVAL;
	}
	sr = calloc(1, sizeof(*sr));
	if (!sr)
		return -ENOMEM;
	sr->r = r;
	sr->seed = sink_seed(req->key);
	sr->size = size;
	sr->off = req->offset;
	sr->end = req->has_length && req->offset + req->length < size ? req->offset + req->length
	                                                              : size;
	sr->first = true;
	*call_ctx = sr;
	sink_read_next(sr);
	return 0;
}

static void
sink_read_sent(void *call_ctx, struct rpc_read *r)
{
	(void)r;
	sink_read_next(call_ctx);
}

static void
sink_read_abort(void *call_ctx, struct rpc_read *r, int err)
{
	(void)err;
	rpc_read_finish(r, -ECANCELED, "aborted");
	free(call_ctx);
}

/* ---- unary: Stat answers for any key but "missing"; CreateBucket echoes. */
static int
sink_unary(void *ctx, enum rpc_method m, const union rpc_unary_req *req, struct rpc_reply *reply)
{
	(void)ctx;
	switch (m) {
	case RPC_STAT: {
		const struct rpc_object_req *q = &req->object;
		static const struct rpc_attr attrs[] = { { "content-type", "text/plain" },
			                                 { "x-amz-meta-b", "2" } };
		struct rpc_object_info info = { 0 };

		if (!strcmp(q->key, "missing")) {
			rpc_reply_error(reply, "%s/%s", q->bucket, q->key);
			return ZC_E(ZC_NO_KEY);
		}
		if (!strcmp(q->key, "wrongtype")) {
			struct rpc_bucket_info bi = { .name = "no" };

			return rpc_reply_bucket_info(reply, &bi); /* -EINVAL: not Stat's type */
		}
		info.key = q->key;
		info.size = 42;
		info.attrs = attrs;
		info.n_attrs = 2;
		info.etag = "\"e\"";
		return rpc_reply_object_info(reply, &info);
	}
	case RPC_CREATE_BUCKET: {
		struct rpc_bucket_info bi = { .name = req->bucket.bucket, .ctime_ns = 7 };

		return rpc_reply_bucket_info(reply, &bi);
	}
	default:
		return -EOPNOTSUPP;
	}
}

static void
sink_init(struct sink *s, bool verify, bool discard)
{
	memset(s, 0, sizeof(*s));
	s->verify = verify;
	s->discard = discard;
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	if (pthread_create(&s->drive, NULL, sink_drive, s))
		abort();
}

/* After the server is destroyed: the queue is drained by then. */
static void
sink_fini(struct sink *s)
{
	pthread_mutex_lock(&s->mu);
	s->stop = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
	pthread_join(s->drive, NULL);
	pthread_cond_destroy(&s->cond);
	pthread_mutex_destroy(&s->mu);
}

static void
sink_handlers(struct sink *s, struct rpc_server_handlers *h)
{
	memset(h, 0, sizeof(*h));
	h->write = (struct rpc_write_ops){
		.open = sink_open, .data = sink_data, .commit = sink_commit, .abort = sink_abort
	};
	h->read = (struct rpc_read_ops){ .start = sink_read_start,
		                         .sent = sink_read_sent,
		                         .abort = sink_read_abort };
	h->unary = sink_unary;
	h->ctx = s;
}

#endif
