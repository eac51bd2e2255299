/*
 * s3_backend_rpc: struct s3_backend over the zest.Datanode rpc client, one client per
 * --datanode. Calls come from the server's worker threads and block; the rpc client's
 * completion-queue thread only moves state and wakes the waiting worker.
 *
 * Placement: every object call goes to s3_place(bucket, key) over the node list (the
 * multipart parts of the reserved bucket too: their upload id carries the target's hash). Bucket calls go to
 * every node; listings are merged with s3_list_merge().
 *
 * Zero copy: put_write hands the caller's segment (a span of the connection's read
 * buffer and its reference) to rpc_cwrite_send, which takes its own reference until gRPC
 * has written the bytes. When the stream's in-flight window is full the worker waits
 * for `writable`, so it stops reading the socket: that is the backpressure, and memory
 * per upload is bounded by the window (rpc_client_opts.max_inflight). On GET the
 * received segments (gRPC receive slices) are queued with a reference to the worker,
 * which writes them to the client; the read is paused while the queue is over a bound.
 *
 * Errors: a call's outcome comes back as the datanode's zest error code (rpc_status.err,
 * from the "zest-err" trailer; for a status without one, what its gRPC code stands for),
 * returned as ZC_E(code); s3_err_from_errno() maps it to S3 in one table. A datanode that
 * cannot be reached is ZC_UNAVAILABLE (503 SlowDown, which clients retry).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "rpc.h"
#include "s3.h"
#include "zc.h"

/* Queued GET bytes that pause the datanode stream (no more RECV_MESSAGE: HTTP/2 flow
 * control then stops the datanode), and the level that resumes it. With one ~1 MiB
 * ReadChunk arriving after the pause, a stream buffers at most ~3 MiB. */
#define GET_PAUSE_BYTES  (2u << 20)
#define GET_RESUME_BYTES (1u << 20)
/* What gRPC itself may hold of a paused stream: a fixed HTTP/2 window (BDP probing grew
 * it to ~35 MiB per stream: 32 stalled GETs took the gateway to 1.2 GiB RSS). */
#define GET_STREAM_WINDOW (2u << 20)
#define MAX_ATTRS        128

struct rbe {
	struct s3_backend be;
	unsigned n;
	char **names;
	struct rpc_client **cl;
};

/* ------------------------------------------------------------------ errors */

static int
err_from_status(const struct rpc_status *st)
{
	enum zc_code code;

	if (st->code == GRPC_STATUS_OK)
		return 0;
	code = zc_err_code(st->err);
	if (code == ZC_UNAVAILABLE || code == ZC_INTERNAL)
		ZC_WARN("s3rpc", "datanode error code=%s grpc=%d msg=\"%s\"", zc_code_word(code),
		        st->code, st->msg);
	return ZC_E(code);
}

static struct rpc_client *
place(struct rbe *b, const char *bucket, const char *key)
{
	return b->cl[b->n == 1 ? 0 : s3_place((const char *const *)b->names, b->n, bucket, key)];
}

/* ------------------------------------------------------------------ attrs */

/* "name:value\n" lines -> Attr messages pointing into a private copy. */
struct attrs {
	char *buf;
	Zest__Attr a[MAX_ATTRS];
	Zest__Attr *pa[MAX_ATTRS];
	size_t n;
};

static int
attrs_parse(struct attrs *at, const char *s, size_t len)
{
	char *p, *end;

	at->n = 0;
	at->buf = malloc(len + 1);
	if (!at->buf)
		return -ENOMEM;
	memcpy(at->buf, s, len);
	at->buf[len] = 0;
	p = at->buf;
	end = at->buf + len;
	while (p < end) {
		char *nl = memchr(p, '\n', (size_t)(end - p)), *colon;

		if (!nl)
			nl = end;
		*nl = 0;
		colon = strchr(p, ':');
		if (colon && at->n < MAX_ATTRS) {
			*colon = 0;
			zest__attr__init(&at->a[at->n]);
			at->a[at->n].name = p;
			at->a[at->n].value = colon + 1;
			at->pa[at->n] = &at->a[at->n];
			at->n++;
		}
		p = nl + 1;
	}
	return 0;
}

static void
info_from_pb(const Zest__ObjectInfo *in, const char *key, struct s3_obj_info *out)
{
	size_t o = 0;

	memset(out, 0, offsetof(struct s3_obj_info, attrs));
	snprintf(out->key, sizeof(out->key), "%s", in->key && in->key[0] ? in->key : key);
	out->size = in->size;
	snprintf(out->etag, sizeof(out->etag), "%s", in->etag ? in->etag : "");
	out->mtime_ns = in->mtime_ns;
	for (size_t i = 0; i < in->n_attrs; i++) {
		int w = snprintf(out->attrs + o, sizeof(out->attrs) - o, "%s:%s\n",
		                 in->attrs[i]->name, in->attrs[i]->value);

		if (w < 0 || (size_t)w >= sizeof(out->attrs) - o)
			break;
		o += (size_t)w;
	}
	out->attrs[o] = 0;
	out->attrs_len = o;
}

/* A condition as the wire carries it (pointing into c); NULL when there is none. */
static Zest__WriteCondition *
cond_to_pb(const struct s3_cond *c, Zest__WriteCondition *pb)
{
	if (!c || (!c->if_none_match && !c->if_match[0]))
		return NULL;
	zest__write_condition__init(pb);
	pb->if_none_match = c->if_none_match;
	pb->if_match = (char *)c->if_match;
	return pb;
}

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
            const Zest__WriteResult *res)
{
	struct put *p = arg;

	(void)w;
	pthread_mutex_lock(&p->mu);
	p->st = *st;
	if (st->code == GRPC_STATUS_OK && res) {
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

static int
r_put_open(void *ctx, const char *bucket, const char *key, uint64_t size, bool size_known,
           void **stream)
{
	static const struct rpc_cwrite_cbs cbs = { put_on_writable, put_on_done };
	struct rbe *b = ctx;
	Zest__WriteOpen op;
	struct put *p;
	int rc;

	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	snprintf(p->key, sizeof(p->key), "%s", key);
	zest__write_open__init(&op);
	op.bucket = (char *)bucket;
	op.key = (char *)key;
	op.size = size;
	op.size_known = size_known;
	/* hold the lock: `done` may come before *out is stored */
	pthread_mutex_lock(&p->mu);
	rc = rpc_cwrite_open(place(b, bucket, key), &op, &cbs, p, &p->w);
	pthread_mutex_unlock(&p->mu);
	if (rc < 0) {
		put_free(p);
		return rc;
	}
	*stream = p;
	return 0;
}

static int
r_put_write(void *stream, const struct zc_seg *seg)
{
	struct put *p = stream;

	for (;;) {
		unsigned long gen;
		int rc;

		pthread_mutex_lock(&p->mu);
		if (p->done) {
			rc = p->st.code == GRPC_STATUS_OK ? -EPROTO : err_from_status(&p->st);
			pthread_mutex_unlock(&p->mu);
			return rc;
		}
		gen = p->writable_gen;
		pthread_mutex_unlock(&p->mu);
		rc = rpc_cwrite_send(p->w, seg, 1);
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

			clock_gettime(CLOCK_REALTIME, &ts);
			ts.tv_nsec += 100 * 1000000;
			if (ts.tv_nsec >= 1000000000) {
				ts.tv_sec++;
				ts.tv_nsec -= 1000000000;
			}
			if (pthread_cond_timedwait(&p->cv, &p->mu, &ts) == ETIMEDOUT)
				break; /* re-check: a missed wakeup costs 100 ms, never a hang */
		}
		pthread_mutex_unlock(&p->mu);
	}
}

static int
r_put_commit(void *stream, const char *etag, const char *attrs, size_t attrs_len,
             const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct put *p = stream;
	Zest__WriteCondition pbc;
	struct attrs at;
	int rc;

	rc = attrs_parse(&at, attrs, attrs_len);
	if (rc < 0)
		goto cancel;
	pthread_mutex_lock(&p->mu);
	if (p->done) {
		pthread_mutex_unlock(&p->mu);
		free(at.buf);
		goto finish;
	}
	pthread_mutex_unlock(&p->mu);
	rc = rpc_cwrite_commit_cond(p->w, NULL, 0, etag, at.pa, at.n, cond_to_pb(cond, &pbc));
	free(at.buf);
	if (rc < 0 && rc != -ECANCELED)
		goto cancel;
finish:
	put_wait_done(p);
	rc = err_from_status(&p->st);
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

static void
r_put_abort(void *stream)
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

/* ------------------------------------------------------------------ GET stream */

struct get {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct rpc_cread *r;
	struct zc_seg *q; /* queued segments, each holding a ref */
	size_t qhead, qn, qcap;
	size_t qbytes;
	bool paused, done, failed_alloc;
	struct rpc_status st;
	bool have_info;
	struct s3_obj_info *info;
	const char *key;
	char *keycopy;
};

static int
get_on_chunk(void *arg, struct rpc_cread *r, const Zest__ObjectInfo *info, uint64_t offset,
             const struct zc_seg *segs, size_t n_segs, size_t len)
{
	struct get *g = arg;
	int ret = 0;

	(void)r;
	(void)offset;
	pthread_mutex_lock(&g->mu);
	if (info && !g->have_info) {
		info_from_pb(info, g->key, g->info);
		g->have_info = true;
	}
	if (g->qhead + g->qn + n_segs > g->qcap) {
		/* compact, then grow */
		if (g->qn)
			memmove(g->q, g->q + g->qhead, g->qn * sizeof(*g->q));
		g->qhead = 0;
		if (g->qn + n_segs > g->qcap) {
			size_t nc = g->qcap ? g->qcap * 2 : 64;
			void *nq;

			while (nc < g->qn + n_segs)
				nc *= 2;
			nq = realloc(g->q, nc * sizeof(*g->q));
			if (!nq) {
				g->failed_alloc = true;
				pthread_cond_broadcast(&g->cv);
				pthread_mutex_unlock(&g->mu);
				return 1; /* stays paused; the worker cancels */
			}
			g->q = nq;
			g->qcap = nc;
		}
	}
	for (size_t i = 0; i < n_segs; i++) {
		if (segs[i].ref)
			zc_ref_get(segs[i].ref);
		g->q[g->qhead + g->qn++] = segs[i];
	}
	g->qbytes += len;
	if (g->qbytes >= GET_PAUSE_BYTES) {
		g->paused = true;
		ret = 1;
	}
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
	return ret;
}

static void
get_on_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct get *g = arg;

	(void)r;
	pthread_mutex_lock(&g->mu);
	g->st = *st;
	g->done = true;
	pthread_cond_broadcast(&g->cv);
	pthread_mutex_unlock(&g->mu);
}

/* Stat for the range clamp and for a stream that ended without info. */
static int r_stat(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out);

static void
get_free(struct get *g)
{
	free(g->q);
	free(g->info);
	free(g->keycopy);
	pthread_cond_destroy(&g->cv);
	pthread_mutex_destroy(&g->mu);
	free(g);
}

/* Stop the stream if it runs, wait for its end, drop what is queued, free. */
static void
r_get_close(void *stream)
{
	struct get *g = stream;

	if (!g)
		return;
	pthread_mutex_lock(&g->mu);
	if (!g->done && g->r) {
		struct rpc_cread *r = g->r;

		pthread_mutex_unlock(&g->mu);
		rpc_cread_cancel(r);
		pthread_mutex_lock(&g->mu);
	}
	while (!g->done) {
		if (g->paused && g->r) {
			struct rpc_cread *r = g->r;

			/* a paused stream needs a resume to see its cancel through */
			g->paused = false;
			pthread_mutex_unlock(&g->mu);
			rpc_cread_resume(r);
			pthread_mutex_lock(&g->mu);
			continue;
		}
		pthread_cond_wait(&g->cv, &g->mu);
	}
	for (size_t i = 0; i < g->qn; i++)
		if (g->q[g->qhead + i].ref)
			zc_ref_put(g->q[g->qhead + i].ref);
	g->qn = 0;
	pthread_mutex_unlock(&g->mu);
	rpc_cread_destroy(g->r);
	get_free(g);
}

static int
r_get_open(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len,
           bool has_len, struct s3_obj_info *info, void **stream)
{
	static const struct rpc_cread_cbs cbs = { get_on_chunk, get_on_done };
	struct rbe *b = ctx;
	Zest__ReadRequest req;
	struct get *g;
	int rc = 0;

	*stream = NULL;
	g = calloc(1, sizeof(*g));
	if (!g)
		return -ENOMEM;
	pthread_mutex_init(&g->mu, NULL);
	pthread_cond_init(&g->cv, NULL);
	g->info = malloc(sizeof(*g->info));
	g->keycopy = strdup(key);
	if (!g->info || !g->keycopy) {
		get_free(g);
		return -ENOMEM;
	}
	g->key = g->keycopy;
	if (off || has_len) {
		/* S3 clamps a range to the object; the datanode refuses one past the end */
		rc = r_stat(ctx, bucket, key, g->info);
		if (rc < 0)
			goto fail;
		if (off >= g->info->size) {
			*info = *g->info; /* the caller decides (InvalidRange or empty) */
			get_free(g);
			return 0;
		}
		if (has_len && len > g->info->size - off)
			len = g->info->size - off;
	}
	zest__read_request__init(&req);
	req.bucket = (char *)bucket;
	req.key = (char *)key;
	req.offset = off;
	req.length = has_len ? len : 0;
	req.has_length = has_len;
	pthread_mutex_lock(&g->mu);
	rc = rpc_cread_open(place(b, bucket, key), &req, &cbs, g, &g->r);
	if (rc < 0) {
		pthread_mutex_unlock(&g->mu);
		goto fail;
	}
	while (!g->done && !g->failed_alloc && !g->have_info)
		pthread_cond_wait(&g->cv, &g->mu);
	if (g->failed_alloc)
		rc = -ENOMEM;
	else if (!g->have_info)
		rc = err_from_status(&g->st);
	pthread_mutex_unlock(&g->mu);
	if (rc == 0 && !g->have_info) /* ended without info: ask for it */
		rc = r_stat(ctx, bucket, key, g->info);
	if (rc < 0) {
		r_get_close(g);
		return rc;
	}
	*info = *g->info;
	*stream = g;
	return 0;
fail:
	get_free(g);
	return rc;
}

static int
r_get_next(void *stream, struct zc_seg *seg)
{
	struct get *g = stream;
	int rc = 0;

	pthread_mutex_lock(&g->mu);
	while (!g->done && !g->failed_alloc && !g->qn)
		pthread_cond_wait(&g->cv, &g->mu);
	if (g->failed_alloc) {
		rc = -ENOMEM;
	} else if (!g->qn) { /* done and drained */
		rc = err_from_status(&g->st);
	} else {
		*seg = g->q[g->qhead++];
		g->qn--;
		g->qbytes -= seg->len;
		rc = 1;
		if (g->paused && g->qbytes < GET_RESUME_BYTES && !g->done && g->r) {
			struct rpc_cread *r = g->r;

			g->paused = false;
			pthread_mutex_unlock(&g->mu);
			rpc_cread_resume(r);
			return rc;
		}
	}
	pthread_mutex_unlock(&g->mu);
	return rc;
}

/* The blocking form over the pulled one (multipart records, copies). */
static int
r_get(void *ctx, const char *bucket, const char *key, uint64_t off, uint64_t len, bool has_len,
      s3_info_fn on_info, s3_span_fn emit, void *arg)
{
	struct s3_obj_info *info = malloc(sizeof(*info));
	struct zc_seg seg;
	void *g;
	int rc, n;

	if (!info)
		return -ENOMEM;
	rc = r_get_open(ctx, bucket, key, off, len, has_len, info, &g);
	if (rc == 0)
		rc = on_info(arg, info);
	free(info);
	while (rc == 0 && g && (n = r_get_next(g, &seg)) != 0) {
		if (n < 0) {
			rc = n;
			break;
		}
		rc = emit(arg, seg.ptr, seg.len);
		if (seg.ref)
			zc_ref_put(seg.ref);
	}
	r_get_close(g);
	return rc;
}

/* ------------------------------------------------------------------ unary */

static int
call(struct rpc_client *c, enum rpc_method m, const ProtobufCMessage *req, ProtobufCMessage **resp)
{
	struct rpc_status st;
	int rc;

	/* UNAVAILABLE: the channel is (re)connecting, e.g. in gRPC's reconnect backoff after
	 * the datanode started late or restarted; the call was not delivered, so retry 3 s */
	for (int tries = 0;; tries++) {
		*resp = NULL;
		rc = rpc_client_call(c, m, req, resp, &st);
		if (rc == 0)
			return 0;
		if (st.code != GRPC_STATUS_UNAVAILABLE || tries == 30)
			break;
		if (*resp) {
			protobuf_c_message_free_unpacked(*resp, NULL);
			*resp = NULL;
		}
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000000 }, NULL);
	}
	if (*resp) {
		protobuf_c_message_free_unpacked(*resp, NULL);
		*resp = NULL;
	}
	return err_from_status(&st);
}

static int
r_stat(void *ctx, const char *bucket, const char *key, struct s3_obj_info *out)
{
	struct rbe *b = ctx;
	Zest__ObjectRequest req;
	ProtobufCMessage *resp;
	int rc;

	zest__object_request__init(&req);
	req.bucket = (char *)bucket;
	req.key = (char *)key;
	rc = call(place(b, bucket, key), RPC_STAT, &req.base, &resp);
	if (rc < 0)
		return rc;
	info_from_pb((const Zest__ObjectInfo *)resp, key, out);
	protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

static int
r_del(void *ctx, const char *bucket, const char *key, bool *existed)
{
	struct rbe *b = ctx;
	Zest__ObjectRequest req;
	ProtobufCMessage *resp;
	int rc;

	zest__object_request__init(&req);
	req.bucket = (char *)bucket;
	req.key = (char *)key;
	*existed = false;
	rc = call(place(b, bucket, key), RPC_DELETE, &req.base, &resp);
	if (rc < 0)
		return rc;
	*existed = ((const Zest__DeleteResult *)resp)->existed;
	protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

/* One node's listing of one bucket, as the datanode answers it. */
static int
list_one(struct rpc_client *c, const char *bucket, const char *prefix, const char *start_after,
         const char *delimiter, unsigned limit, struct s3_list_result *out)
{
	Zest__ListRequest req;
	const Zest__ListResult *lr;
	ProtobufCMessage *resp;
	int rc;

	memset(out, 0, sizeof(*out));
	zest__list_request__init(&req);
	req.bucket = (char *)bucket;
	req.prefix = (char *)prefix;
	req.start_after = (char *)start_after;
	req.delimiter = (char *)delimiter;
	req.limit = limit;
	rc = call(c, RPC_LIST, &req.base, &resp);
	if (rc < 0)
		return rc;
	lr = (const Zest__ListResult *)resp;
	out->truncated = lr->truncated;
	for (size_t i = 0; i < lr->n_entries && rc == 0; i++) {
		const Zest__ObjectInfo *e = lr->entries[i];

		rc = s3_list_result_add(out, e->key, e->size, e->etag ? e->etag : "", e->mtime_ns);
	}
	for (size_t i = 0; i < lr->n_common_prefixes && rc == 0; i++) {
		rc = s3_list_result_add_prefix(out, lr->common_prefixes[i]);
	}
	if (rc == 0 && out->truncated) {
		out->next_start_after = strdup(lr->next_start_after ? lr->next_start_after : "");
		if (!out->next_start_after)
			rc = -ENOMEM;
	}
	protobuf_c_message_free_unpacked(resp, NULL);
	if (rc < 0)
		s3_list_result_fini(out);
	return rc;
}

static int
r_list(void *ctx, const char *bucket, const char *prefix, const char *start_after,
       const char *delimiter, unsigned limit, struct s3_list_result *out)
{
	struct rbe *b = ctx;
	struct s3_list_result *parts;
	const struct s3_list_result **pp;
	int rc = 0;
	unsigned done = 0;

	if (!limit)
		limit = 1000;
	if (b->n == 1)
		return list_one(b->cl[0], bucket, prefix, start_after, delimiter, limit, out);
	memset(out, 0, sizeof(*out));
	parts = calloc(b->n, sizeof(*parts));
	pp = calloc(b->n, sizeof(*pp));
	if (!parts || !pp) {
		rc = -ENOMEM;
		goto out;
	}
	for (; done < b->n; done++) {
		rc = list_one(b->cl[done], bucket, prefix, start_after, delimiter, limit,
		              &parts[done]);
		if (rc < 0)
			break;
		pp[done] = &parts[done];
	}
	if (rc == 0)
		rc = s3_list_merge(pp, b->n, limit, out);
	for (unsigned i = 0; i < done; i++)
		s3_list_result_fini(&parts[i]);
out:
	free(parts);
	free(pp);
	return rc;
}

static int
r_compose(void *ctx, const char *bucket, const char *key, const struct s3_objref *parts,
          size_t nparts, bool delete_parts, const char *etag, const char *attrs, size_t attrs_len,
          const struct s3_cond *cond, struct s3_obj_info *out)
{
	struct rbe *b = ctx;
	struct rpc_client *target = place(b, bucket, key);
	Zest__WriteCondition pbc;
	Zest__ComposeRequest req;
	Zest__ObjectRequest *pr = NULL, **ppr = NULL;
	const Zest__WriteResult *wr;
	ProtobufCMessage *resp;
	struct attrs at = { 0 };
	int rc;

	/* A datanode composes only what it holds: the caller moves the bytes otherwise */
	for (size_t i = 0; i < nparts; i++)
		if (place(b, parts[i].bucket, parts[i].key) != target)
			return -EXDEV;
	pr = calloc(nparts ? nparts : 1, sizeof(*pr));
	ppr = calloc(nparts ? nparts : 1, sizeof(*ppr));
	if (!pr || !ppr) {
		rc = -ENOMEM;
		goto out;
	}
	rc = attrs_parse(&at, attrs, attrs_len);
	if (rc < 0)
		goto out;
	zest__compose_request__init(&req);
	req.bucket = (char *)bucket;
	req.key = (char *)key;
	for (size_t i = 0; i < nparts; i++) {
		zest__object_request__init(&pr[i]);
		pr[i].bucket = (char *)parts[i].bucket;
		pr[i].key = (char *)parts[i].key;
		pr[i].etag = (char *)(parts[i].etag ? parts[i].etag : "");
		ppr[i] = &pr[i];
	}
	req.n_parts = nparts;
	req.parts = ppr;
	req.delete_parts = delete_parts;
	req.etag = (char *)etag;
	req.n_attrs = at.n;
	req.attrs = at.pa;
	req.cond = cond_to_pb(cond, &pbc);
	rc = call(target, RPC_COMPOSE, &req.base, &resp);
	if (rc < 0)
		goto out;
	wr = (const Zest__WriteResult *)resp;
	if (out) {
		memset(out, 0, offsetof(struct s3_obj_info, attrs));
		snprintf(out->key, sizeof(out->key), "%s", key);
		out->size = wr->size;
		snprintf(out->etag, sizeof(out->etag), "%s", etag);
		out->mtime_ns = wr->mtime_ns;
	}
	protobuf_c_message_free_unpacked(resp, NULL);
out:
	free(at.buf);
	free(pr);
	free(ppr);
	return rc;
}

/* ------------------------------------------------------------------ buckets */

/*
 * Bucket calls go to every datanode so each can place any key of the bucket. Partial
 * states (a node restarted empty, a broadcast cut short) are repaired in the direction
 * of the request: create creates where missing, delete deletes where present.
 */
static int
bucket_call(struct rpc_client *c, enum rpc_method m, const char *bucket, uint64_t *ctime)
{
	Zest__BucketRequest req;
	ProtobufCMessage *resp;
	int rc;

	zest__bucket_request__init(&req);
	req.bucket = (char *)bucket;
	rc = call(c, m, &req.base, &resp);
	if (rc < 0)
		return rc;
	if (ctime && (m == RPC_CREATE_BUCKET || m == RPC_HEAD_BUCKET))
		*ctime = ((const Zest__BucketInfo *)resp)->ctime_ns;
	protobuf_c_message_free_unpacked(resp, NULL);
	return 0;
}

static int
r_bucket_create(void *ctx, const char *bucket)
{
	struct rbe *b = ctx;
	unsigned created = 0;

	for (unsigned i = 0; i < b->n; i++) {
		int rc = bucket_call(b->cl[i], RPC_CREATE_BUCKET, bucket, NULL);

		if (rc == 0)
			created++;
		else if (rc != s3_backend_err(S3E_BUCKET_EXISTS_OWNED))
			return rc;
	}
	return created ? 0 : s3_backend_err(S3E_BUCKET_EXISTS_OWNED);
}

static int
r_bucket_delete(void *ctx, const char *bucket)
{
	struct rbe *b = ctx;
	unsigned deleted = 0;
	int rc;

	/* every node must be empty first, or a delete would leave the bucket half gone */
	for (unsigned i = 0; i < b->n && b->n > 1; i++) {
		struct s3_list_result lr;

		rc = list_one(b->cl[i], bucket, "", "", "", 1, &lr);
		if (rc == s3_backend_err(S3E_NO_SUCH_BUCKET))
			continue;
		if (rc < 0)
			return rc;
		rc = lr.n || lr.nprefix ? s3_backend_err(S3E_BUCKET_NOT_EMPTY) : 0;
		s3_list_result_fini(&lr);
		if (rc < 0)
			return rc;
	}
	for (unsigned i = 0; i < b->n; i++) {
		rc = bucket_call(b->cl[i], RPC_DELETE_BUCKET, bucket, NULL);
		if (rc == 0)
			deleted++;
		else if (rc != s3_backend_err(S3E_NO_SUCH_BUCKET))
			return rc;
	}
	return deleted ? 0 : s3_backend_err(S3E_NO_SUCH_BUCKET);
}

static int
r_bucket_head(void *ctx, const char *bucket, struct s3_bucket_info *out)
{
	struct rbe *b = ctx;
	unsigned found = 0, missing = 0;
	uint64_t ctime = 0, t;

	for (unsigned i = 0; i < b->n; i++) {
		int rc = bucket_call(b->cl[i], RPC_HEAD_BUCKET, bucket, &t);

		if (rc == s3_backend_err(S3E_NO_SUCH_BUCKET)) {
			missing++;
			continue;
		}
		if (rc < 0)
			return rc;
		if (!found++ || t < ctime)
			ctime = t;
	}
	if (!found)
		return s3_backend_err(S3E_NO_SUCH_BUCKET);
	if (missing) /* a node lost it (restarted empty): recreate, keys may land there */
		for (unsigned i = 0; i < b->n; i++)
			(void)bucket_call(b->cl[i], RPC_CREATE_BUCKET, bucket, NULL);
	snprintf(out->name, sizeof(out->name), "%s", bucket);
	out->ctime_ns = ctime;
	return 0;
}

static int
binfo_cmp(const void *a, const void *b)
{
	return strcmp(((const struct s3_bucket_info *)a)->name,
	              ((const struct s3_bucket_info *)b)->name);
}

/* The union over the datanodes, sorted, each name once (oldest ctime). */
static int
r_bucket_list(void *ctx, struct s3_bucket_info *out, size_t cap)
{
	struct rbe *b = ctx;
	size_t n = 0;

	for (unsigned i = 0; i < b->n; i++) {
		Zest__Empty req;
		const Zest__BucketList *bl;
		ProtobufCMessage *resp;
		int rc;

		zest__empty__init(&req);
		rc = call(b->cl[i], RPC_LIST_BUCKETS, &req.base, &resp);
		if (rc < 0)
			return rc;
		bl = (const Zest__BucketList *)resp;
		for (size_t k = 0; k < bl->n_buckets; k++) {
			size_t j;

			for (j = 0; j < n; j++)
				if (strcmp(out[j].name, bl->buckets[k]->name) == 0)
					break;
			if (j < n) {
				if (bl->buckets[k]->ctime_ns < out[j].ctime_ns)
					out[j].ctime_ns = bl->buckets[k]->ctime_ns;
				continue;
			}
			if (n == cap)
				continue;
			snprintf(out[n].name, sizeof(out[n].name), "%s", bl->buckets[k]->name);
			out[n].ctime_ns = bl->buckets[k]->ctime_ns;
			n++;
		}
		protobuf_c_message_free_unpacked(resp, NULL);
	}
	qsort(out, n, sizeof(*out), binfo_cmp);
	return (int)n;
}

/* ------------------------------------------------------------------ lifecycle */

void
s3_backend_rpc_destroy(struct s3_backend *be)
{
	struct rbe *b;

	if (!be)
		return;
	b = be->ctx;
	for (unsigned i = 0; i < b->n; i++) {
		rpc_client_destroy(b->cl ? b->cl[i] : NULL);
		free(b->names ? b->names[i] : NULL);
	}
	free(b->cl);
	free(b->names);
	free(b);
}

int
s3_backend_rpc_create(const char *const *nodes, unsigned n, struct s3_backend **out)
{
	struct rbe *b;
	int rc = 0;

	if (!nodes || n == 0)
		return -EINVAL;
	b = calloc(1, sizeof(*b));
	if (!b)
		return -ENOMEM;
	b->be = (struct s3_backend){
		.ctx = b,
		.put_open = r_put_open,
		.put_write = r_put_write,
		.put_commit = r_put_commit,
		.put_abort = r_put_abort,
		.get = r_get,
		.get_open = r_get_open,
		.get_next = r_get_next,
		.get_close = r_get_close,
		.stat = r_stat,
		.del = r_del,
		.list = r_list,
		.compose = r_compose,
		.bucket_create = r_bucket_create,
		.bucket_delete = r_bucket_delete,
		.bucket_head = r_bucket_head,
		.bucket_list = r_bucket_list,
	};
	b->names = calloc(n, sizeof(*b->names));
	b->cl = calloc(n, sizeof(*b->cl));
	if (!b->names || !b->cl) {
		rc = -ENOMEM;
		goto fail;
	}
	b->n = n;
	for (unsigned i = 0; i < n; i++) {
		struct rpc_client_opts o = { 0 };

		for (unsigned j = 0; j < i; j++)
			if (strcmp(nodes[i], nodes[j]) == 0)
				rc = -EEXIST; /* the same node twice would skew placement */
		if (rc < 0)
			goto fail;
		b->names[i] = strdup(nodes[i]);
		if (!b->names[i]) {
			rc = -ENOMEM;
			goto fail;
		}
		o.target = nodes[i];
		o.channels = 2;
		o.stream_window = GET_STREAM_WINDOW;
		rc = rpc_client_create(&o, &b->cl[i]);
		if (rc < 0)
			goto fail;
	}
	*out = &b->be;
	return 0;
fail:
	s3_backend_rpc_destroy(&b->be);
	return rc;
}
