/*
 * The healer's calls to its peers' cell RPCs and to its own cell store. The rpc client
 * gives its calls no deadline (a long stream must not be cut), so each call here waits
 * for its end with a timed wait: a stream past the deadline is cancelled (its `done`
 * follows at once), a unary call is left to finish on its own with its state on the heap.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_cheal_internal.h"
#include "zc.h"

#define SEND_BYTES (1u << 20) /* payload per CellChunk */

unsigned
chl_timeout(const struct dn_cheal *h)
{
	return h->o.timeout_ms ? h->o.timeout_ms : 5000;
}

static struct timespec
deadline(unsigned ms)
{
	struct timespec ts;

	zc_deadline(&ts, CLOCK_MONOTONIC, (uint64_t)ms * 1000000u);
	return ts;
}

/* A mutex and a monotonic condition variable. */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cond;
};

static void
waiter_init(struct waiter *w)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
}

static void
waiter_fini(struct waiter *w)
{
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mu);
}

struct rpc_client *
chl_peer(struct dn_cheal *h, const char *name, const char *address)
{
	struct rpc_client_opts co = { .target = address, .tls = h->o.tls, .peer_name = name };
	struct chl_peer *p = NULL, *np;

	for (size_t i = 0; i < h->npeers; i++)
		if (strcmp(h->peers[i].name, name) == 0)
			p = &h->peers[i];
	if (p && strcmp(p->address, address) == 0)
		return p->cl;
	if (p) {
		/* a node that came back elsewhere: nothing of ours is in flight on it */
		rpc_client_destroy(p->cl);
		p->cl = NULL;
		free(p->address);
		p->address = strdup(address);
		if (!p->address || rpc_client_create(&co, &p->cl)) {
			ZC_WARN("cheal", "no client for node=%s address=%s", name, address);
			return NULL;
		}
		return p->cl;
	}
	np = realloc(h->peers, (h->npeers + 1) * sizeof(*np));
	if (!np)
		return NULL;
	h->peers = np;
	p = &h->peers[h->npeers];
	memset(p, 0, sizeof(*p));
	p->name = strdup(name);
	p->address = strdup(address);
	if (!p->name || !p->address || rpc_client_create(&co, &p->cl)) {
		ZC_WARN("cheal", "no client for node=%s address=%s", name, address);
		free(p->name);
		free(p->address);
		return NULL;
	}
	h->npeers++;
	return p->cl;
}

void
chl_peers_free(struct dn_cheal *h)
{
	for (size_t i = 0; i < h->npeers; i++) {
		rpc_client_destroy(h->peers[i].cl);
		free(h->peers[i].name);
		free(h->peers[i].address);
	}
	free(h->peers);
	h->peers = NULL;
	h->npeers = 0;
}

/* ---- ReadCell ---- */
struct rd {
	struct waiter w;
	bool done, bad;
	struct rpc_status st;
	uint8_t *buf;
	size_t cap, len;
};

static int
rd_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
         const struct zc_seg *segs, size_t n, size_t len)
{
	struct rd *s = arg;

	(void)r;
	(void)info;
	(void)len;
	if (offset != s->len)
		s->bad = true;
	for (size_t i = 0; i < n && !s->bad; i++) {
		if (s->len + segs[i].len > s->cap) {
			s->bad = true;
			break;
		}
		memcpy(s->buf + s->len, segs[i].ptr, segs[i].len);
		s->len += segs[i].len;
	}
	return 0;
}

static void
rd_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct rd *s = arg;

	(void)r;
	pthread_mutex_lock(&s->w.mu);
	s->st = *st;
	s->done = true;
	pthread_cond_signal(&s->w.cond);
	pthread_mutex_unlock(&s->w.mu);
}

int
chl_peer_read(struct dn_cheal *h, struct rpc_client *cl, struct dn_cell_id id, uint8_t *buf,
              size_t cap, size_t *len)
{
	struct rpc_cell_read_req rq = { .id = { id.extent, id.group, id.cell } };
	struct rpc_cread_cbs cbs = { rd_chunk, rd_done };
	struct rd s = { .buf = buf, .cap = cap };
	struct timespec dl = deadline(chl_timeout(h));
	struct rpc_cread *r;
	bool timed_out = false;
	int rc;

	waiter_init(&s.w);
	rc = rpc_cread_open_cell(cl, &rq, &cbs, &s, &r);
	if (rc) {
		waiter_fini(&s.w);
		return rc;
	}
	pthread_mutex_lock(&s.w.mu);
	while (!s.done && !timed_out)
		timed_out = pthread_cond_timedwait(&s.w.cond, &s.w.mu, &dl) == ETIMEDOUT;
	pthread_mutex_unlock(&s.w.mu);
	if (!s.done)
		rpc_cread_cancel(r); /* done follows */
	pthread_mutex_lock(&s.w.mu);
	while (!s.done)
		pthread_cond_wait(&s.w.cond, &s.w.mu);
	pthread_mutex_unlock(&s.w.mu);
	rpc_cread_destroy(r);
	waiter_fini(&s.w);
	if (timed_out && s.st.err)
		return -ETIMEDOUT;
	if (s.st.err)
		return s.st.err;
	if (s.bad)
		return -EBADMSG;
	*len = s.len;
	return 0;
}

/* ---- WriteCell ---- */
struct wr {
	struct waiter w;
	bool done, writable, released;
	struct rpc_status st;
	struct zc_ref ref; /* on the caller's buffer: gRPC holds it while a message is queued */
};

static void
wr_release(struct zc_ref *ref)
{
	struct wr *s = (struct wr *)((char *)ref - offsetof(struct wr, ref));

	pthread_mutex_lock(&s->w.mu);
	s->released = true;
	pthread_cond_broadcast(&s->w.cond);
	pthread_mutex_unlock(&s->w.mu);
}

static void
wr_writable(void *arg, struct rpc_cwrite *w)
{
	struct wr *s = arg;

	(void)w;
	pthread_mutex_lock(&s->w.mu);
	s->writable = true;
	pthread_cond_broadcast(&s->w.cond);
	pthread_mutex_unlock(&s->w.mu);
}

static void
wr_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
        const struct rpc_write_result *res)
{
	struct wr *s = arg;

	(void)w;
	(void)res;
	pthread_mutex_lock(&s->w.mu);
	s->st = *st;
	s->done = true;
	pthread_cond_broadcast(&s->w.cond);
	pthread_mutex_unlock(&s->w.mu);
}

int
chl_peer_write(struct dn_cheal *h, struct rpc_client *cl, const struct rpc_cell_open *open,
               const uint8_t *buf)
{
	struct rpc_cwrite_cbs cbs = { wr_writable, wr_done };
	struct timespec dl = deadline(chl_timeout(h));
	struct wr s = { 0 };
	struct rpc_cwrite *w;
	bool timed_out = false;
	uint64_t at = 0;
	int rc;

	waiter_init(&s.w);
	zc_ref_init(&s.ref, wr_release);
	rc = rpc_cwrite_open_cell(cl, open, &cbs, &s, &w);
	if (rc) {
		zc_ref_put(&s.ref);
		waiter_fini(&s.w);
		return rc;
	}
	rc = 0;
	while (at < open->length && !timed_out) {
		size_t n = open->length - at > SEND_BYTES ? SEND_BYTES : open->length - at;
		struct zc_seg seg = { buf + at, n, &s.ref };

		pthread_mutex_lock(&s.w.mu);
		s.writable = false;
		pthread_mutex_unlock(&s.w.mu);
		rc = rpc_cwrite_send(w, &seg, 1);
		if (rc == -EAGAIN) {
			pthread_mutex_lock(&s.w.mu);
			while (!s.writable && !s.done && !timed_out)
				timed_out = pthread_cond_timedwait(&s.w.cond, &s.w.mu, &dl) ==
				            ETIMEDOUT;
			pthread_mutex_unlock(&s.w.mu);
			continue;
		}
		if (rc)
			break; /* -ECANCELED: the call failed, done brings the status */
		at += n;
	}
	if (!rc && !timed_out)
		rc = rpc_cwrite_commit(w, NULL, 0, NULL);
	pthread_mutex_lock(&s.w.mu);
	while (!s.done && !timed_out)
		timed_out = pthread_cond_timedwait(&s.w.cond, &s.w.mu, &dl) == ETIMEDOUT;
	pthread_mutex_unlock(&s.w.mu);
	if (!s.done)
		rpc_cwrite_cancel(w);
	zc_ref_put(&s.ref); /* ours; the queued messages hold their own */
	pthread_mutex_lock(&s.w.mu);
	while (!s.done || !s.released)
		pthread_cond_wait(&s.w.cond, &s.w.mu);
	pthread_mutex_unlock(&s.w.mu);
	rpc_cwrite_destroy(w);
	waiter_fini(&s.w);
	if (timed_out && s.st.err)
		return -ETIMEDOUT;
	return s.st.err ? s.st.err : rc;
}

/* ---- DeleteCells / CommitCells: the state outlives a caller that gave up ---- */
struct un {
	struct waiter w;
	atomic_int refs; /* the caller's and the callback's */
	bool done;
	int err;
};

static void
un_put(struct un *u)
{
	if (atomic_fetch_sub(&u->refs, 1) == 1) {
		waiter_fini(&u->w);
		free(u);
	}
}

static void
un_cb(void *arg, const struct rpc_status *st, const struct rpc_unary_resp *resp)
{
	struct un *u = arg;

	(void)resp;
	pthread_mutex_lock(&u->w.mu);
	u->err = st->err;
	u->done = true;
	pthread_cond_signal(&u->w.cond);
	pthread_mutex_unlock(&u->w.mu);
	un_put(u);
}

int
chl_peer_cells(struct dn_cheal *h, struct rpc_client *cl, enum rpc_method m, struct dn_cell_id id)
{
	struct rpc_cell_id cid = { id.extent, id.group, id.cell };
	union rpc_unary_req rq = { .cells = { &cid, 1 } };
	struct timespec dl = deadline(chl_timeout(h));
	struct un *u = calloc(1, sizeof(*u));
	int rc;

	if (!u)
		return -ENOMEM;
	waiter_init(&u->w);
	atomic_init(&u->refs, 2);
	rc = rpc_client_call_async(cl, m, &rq, un_cb, u);
	if (rc) {
		waiter_fini(&u->w);
		free(u);
		return rc;
	}
	pthread_mutex_lock(&u->w.mu);
	while (!u->done)
		if (pthread_cond_timedwait(&u->w.cond, &u->w.mu, &dl) == ETIMEDOUT)
			break;
	rc = u->done ? u->err : -ETIMEDOUT;
	pthread_mutex_unlock(&u->w.mu);
	un_put(u);
	return rc;
}

/* ---- the local store ---- */
struct lrd {
	uint8_t *buf;
	size_t cap, len;
};

static int
lrd_cb(void *arg, uint64_t offset, const struct zc_seg *seg)
{
	struct lrd *s = arg;

	if (offset != s->len || s->len + seg->len > s->cap)
		return -EBADMSG;
	memcpy(s->buf + s->len, seg->ptr, seg->len);
	s->len += seg->len;
	return 0;
}

int
chl_local_read(struct dn_cheal *h, struct dn_cell_id id, uint8_t *buf, size_t cap, size_t *len)
{
	struct lrd s = { buf, cap, 0 };
	int rc = dn_cell_read(h->o.store, id, 0, 0, false, lrd_cb, &s);

	if (rc)
		return rc;
	*len = s.len;
	return 0;
}

struct lwr {
	struct waiter w;
	bool done, released;
	int err;
	struct zc_ref ref; /* on the caller's buffer, held by the ring's SQEs */
};

static void
lwr_cb(void *arg, int err)
{
	struct lwr *s = arg;

	pthread_mutex_lock(&s->w.mu);
	s->err = err;
	s->done = true;
	pthread_cond_broadcast(&s->w.cond);
	pthread_mutex_unlock(&s->w.mu);
}

static void
lwr_release(struct zc_ref *ref)
{
	struct lwr *s = (struct lwr *)((char *)ref - offsetof(struct lwr, ref));

	pthread_mutex_lock(&s->w.mu);
	s->released = true;
	pthread_cond_broadcast(&s->w.cond);
	pthread_mutex_unlock(&s->w.mu);
}

int
chl_local_write(struct dn_cheal *h, const struct dn_cell_spec *spec, const uint8_t *buf)
{
	struct dn_cell_write *w;
	struct lwr s = { 0 };
	struct zc_seg seg;
	int rc = dn_cell_write_open(h->o.store, spec, &w);

	if (rc)
		return rc;
	waiter_init(&s.w);
	zc_ref_init(&s.ref, lwr_release);
	seg = (struct zc_seg){ buf, spec->length, &s.ref };
	if (spec->length)
		rc = dn_cell_write_data(w, 0, &seg, 1);
	zc_ref_put(&s.ref); /* the SQEs hold their own until they complete */
	if (rc) {
		dn_cell_write_abort(w);
		s.done = true;
		s.err = rc;
	} else {
		dn_cell_write_finish(w, lwr_cb, &s);
	}
	/* an abort returns before its SQEs complete: the buffer is theirs until released */
	pthread_mutex_lock(&s.w.mu);
	while (!s.done || !s.released)
		pthread_cond_wait(&s.w.cond, &s.w.mu);
	pthread_mutex_unlock(&s.w.mu);
	waiter_fini(&s.w);
	return s.err;
}
