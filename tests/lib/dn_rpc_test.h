/*
 * The datanode's gRPC binding in one process, shared by test_dn_rpc.c, test_dn_rpc_bufadm.c
 * and test_dn_rpc_cell.c: a store over temp folders (dn_test.h), the binding
 * (datanode/dn_rpc.h) over it, an rpc server on a loopback port (plaintext) and an rpc
 * client to that port; and the state of one client Write stream, which its callbacks fill.
 * t_rpc_env_fini checks that nothing is left: no live payload ref, no live gRPC buffer.
 */
#ifndef ZEST_TEST_DN_RPC_H
#define ZEST_TEST_DN_RPC_H

#include <time.h>

#include "dn_rpc.h"
#include "rpc_stats.h"
#include "zc.h"
#include "rpc_server.h"
#include "rpc_client.h"

#include "dn_test.h" /* after rpc.h: with its client helpers */

struct t_rpc_env {
	struct t_env t;
	struct dn_rpc_opts bo;     /* the binding's */
	struct rpc_server_opts so; /* the server's */
	struct rpc_client_opts co; /* the client's; target is set by t_rpc_env_open */
	struct dn_rpc *b;
	struct rpc_server *srv;
	struct rpc_client *cl;
	char target[64];
};

/*
 * Six temp drives for a 4+2 store (t_env_init's small cells), a binding of 2 write workers
 * and 2 readers, a server of 2 completion-queue threads: a test changes e->t.o, e->bo,
 * e->so or e->co before t_rpc_env_open.
 */
static inline void
t_rpc_env_init(struct t_rpc_env *e)
{
	memset(e, 0, sizeof(*e));
	t_env_init(&e->t, 6, 4, 2);
	e->bo = (struct dn_rpc_opts){ .write_workers = 2, .readers = 2 };
	e->so = (struct rpc_server_opts){ .listen = "127.0.0.1:0",
		                          .cq_threads = 2,
		                          .tls.insecure = true };
	e->co = (struct rpc_client_opts){ .tls.insecure = true };
}

/* Open the store, create bucket (unless NULL), then the binding, server and client. */
static inline void
t_rpc_env_open(struct t_rpc_env *e, const char *bucket)
{
	struct rpc_server_handlers h;

	t_open(&e->t);
	if (bucket)
		CHECK_EQ(dn_bucket_create(e->t.s, bucket, NULL), 0);
	CHECK_EQ(dn_rpc_create(e->t.s, &e->bo, &e->b, &h), 0);
	CHECK_EQ(rpc_server_create(&e->so, &h, &e->srv), 0);
	snprintf(e->target, sizeof(e->target), "127.0.0.1:%d", rpc_server_port(e->srv));
	e->co.target = e->target;
	CHECK_EQ(rpc_client_create(&e->co, &e->cl), 0);
}

/* Tear down what is still up (a test may have destroyed and NULLed the server, client or
 * binding itself), the server with grace_ms for its calls, and check that nothing leaked. */
static inline void
t_rpc_env_fini(struct t_rpc_env *e, unsigned grace_ms)
{
	rpc_client_destroy(e->cl);
	rpc_server_destroy(e->srv, grace_ms);
	dn_rpc_destroy(e->b);
	t_env_fini(&e->t);
	CHECK_EQ(zc_ref_live(), 0);
	CHECK_EQ(rpc_live_buffers(), 0);
}

/* ---- one client Write stream (rpc_cwrite_*) ---- */
struct t_wstate {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done, writable;
	struct rpc_status st;
	struct rpc_write_result res; /* when the stream ended with one */
};

static inline void
t_w_writable(void *arg, struct rpc_cwrite *w)
{
	struct t_wstate *s = arg;

	(void)w;
	pthread_mutex_lock(&s->mu);
	s->writable = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static inline void
t_w_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
         const struct rpc_write_result *r)
{
	struct t_wstate *s = arg;

	(void)w;
	pthread_mutex_lock(&s->mu);
	s->st = *st;
	if (r)
		s->res = *r;
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static const struct rpc_cwrite_cbs t_wstate_cbs
        __attribute__((unused)) = { t_w_writable, t_w_done };

static inline void
t_wstate_init(struct t_wstate *s)
{
	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
}

static inline void
t_wstate_fini(struct t_wstate *s)
{
	pthread_mutex_destroy(&s->mu);
	pthread_cond_destroy(&s->cond);
}

/* ms from now on CLOCK_REALTIME (pthread_cond_timedwait's clock). */
static inline struct timespec
t_deadline(unsigned ms)
{
	struct timespec ts;

	zc_deadline(&ts, CLOCK_REALTIME, (uint64_t)ms * 1000000u);
	return ts;
}

/* Wait until the stream ended, at most ms (0: no limit); returns whether it did. */
static inline bool
t_wstate_wait(struct t_wstate *s, unsigned ms)
{
	struct timespec ts = t_deadline(ms);
	bool done;

	pthread_mutex_lock(&s->mu);
	while (!s->done && (ms ? pthread_cond_timedwait(&s->cond, &s->mu, &ts) == 0
	                       : pthread_cond_wait(&s->cond, &s->mu) == 0))
		;
	done = s->done;
	pthread_mutex_unlock(&s->mu);
	return done;
}

/* Send len bytes at p as one message, the caller's (no ref), retrying while the stream's
 * queue is full. */
static inline void
t_cwrite_send(struct rpc_cwrite *w, const uint8_t *p, size_t len)
{
	struct zc_seg seg = { (void *)p, len, NULL };

	while (rpc_cwrite_send(w, &seg, 1) == -EAGAIN)
		usleep(1000);
}

#endif
