/*
 * The write-path convoy of docs/benchmarks.md ("Past 128 writers"), in one process with
 * the real binding: more concurrent Write streams than the drives' cell pools can hold,
 * each stopping after its first half (so it holds its stripe's buffers without a worker,
 * as a Write between two messages does) before any sends the rest. When buffers were
 * taken on demand, the Writes past the pool's capacity took both write workers into
 * dn_pool_get for the buffers the first ones held, and those could not get a worker for
 * their second half until the pool wait (30 s here) ran out. Now the Writes past the
 * capacity wait in the admission queue: all commit, no pool get waits or times out, and
 * the queue really held Writes (counted, not timed). Nothing leaks (env_down).
 */
#include "dn_rpc.h"
#include "rpc.h"

#include "dn_test.h" /* after rpc.h: with its client helpers */
#include "dn_internal.h"

#define NS 16

struct env {
	struct t_env t;
	struct dn_rpc *b;
	struct rpc_server *srv;
	struct rpc_client *cl;
	char target[64];
};

struct wstate {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	struct rpc_status st;
};

static void
w_writable(void *arg, struct rpc_cwrite *w)
{
	(void)arg;
	(void)w;
}

static void
w_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
       const struct rpc_write_result *r)
{
	struct wstate *s = arg;

	(void)w;
	(void)r;
	pthread_mutex_lock(&s->mu);
	s->st = *st;
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static void
env_up(struct env *e, bool direct)
{
	struct dn_rpc_opts bo = { .write_workers = 2, .readers = 1 };
	struct rpc_server_opts so = { .listen = "127.0.0.1:0",
		                      .cq_threads = 2,
		                      .tls.insecure = true };
	struct rpc_client_opts co = { .tls.insecure = true };
	struct rpc_server_handlers h;

	t_env_init(&e->t, 6, 4, 2);
	e->t.o.data_direct = direct;
	e->t.o.parity_bufs = 1; /* 12 (direct) or 6 cells over six drives */
	e->t.o.wait_ns = 30ull * 1000000000u;
	t_open(&e->t);
	CHECK_EQ(dn_bucket_create(e->t.s, "bkt", NULL), 0);
	CHECK_EQ(dn_rpc_create(e->t.s, &bo, &e->b, &h), 0);
	CHECK_EQ(rpc_server_create(&so, &h, &e->srv), 0);
	snprintf(e->target, sizeof(e->target), "127.0.0.1:%d", rpc_server_port(e->srv));
	co.target = e->target;
	CHECK_EQ(rpc_client_create(&co, &e->cl), 0);
}

static void
env_down(struct env *e)
{
	rpc_client_destroy(e->cl);
	rpc_server_destroy(e->srv, 1000);
	dn_rpc_destroy(e->b);
	t_env_fini(&e->t);
	CHECK_EQ(zc_ref_live(), 0);
	CHECK_EQ(rpc_live_buffers(), 0);
}

static void
send_part(struct rpc_cwrite *w, const uint8_t *p, size_t len)
{
	struct zc_seg seg = { (void *)p, len, NULL };

	while (rpc_cwrite_send(w, &seg, 1) == -EAGAIN)
		usleep(1000);
}

static void
run(bool direct)
{
	static struct wstate s[NS];
	struct rpc_cwrite *w[NS];
	struct dn_counters c;
	struct env e;
	size_t len, half;
	uint8_t *buf;

	env_up(&e, direct);
	len = e.t.o.cell_size; /* one stripe: one data cell and two parity cells */
	half = len / 2;
	buf = malloc(len);
	t_fill(buf, len);
	memset(s, 0, sizeof(s));
	for (int i = 0; i < NS; i++) {
		struct rpc_cwrite_cbs cbs = { w_writable, w_done };
		char key[16];
		struct rpc_write_open op = {
			.bucket = "bkt", .key = key, .size = len, .size_known = true
		};

		snprintf(key, sizeof(key), "k%d", i);
		pthread_mutex_init(&s[i].mu, NULL);
		pthread_cond_init(&s[i].cond, NULL);
		CHECK_EQ(rpc_cwrite_open(e.cl, &op, &cbs, &s[i], &w[i]), 0);
		send_part(w[i], buf, half);
	}
	/* Every open reached admission: let in (begun) or waiting for buffers. */
	for (int i = 0; i < 2000; i++) {
		dn_counters_get(e.t.s, &c);
		if (atomic_load(&e.t.s->live_writes) + c.admission_parked == NS)
			break;
		CHECK(i < 1999);
		usleep(5000);
	}
	CHECK(c.admission_parked > 0);
	for (int i = 0; i < NS; i++) {
		struct zc_seg seg = { buf + half, len - half, NULL };
		struct rpc_commit commit = { .etag = "e" };

		CHECK_EQ(rpc_cwrite_commit(w[i], &seg, 1, &commit), 0);
	}
	for (int i = 0; i < NS; i++) {
		pthread_mutex_lock(&s[i].mu);
		while (!s[i].done)
			pthread_cond_wait(&s[i].cond, &s[i].mu);
		pthread_mutex_unlock(&s[i].mu);
		CHECK_EQ(s[i].st.code, GRPC_STATUS_OK);
		rpc_cwrite_destroy(w[i]);
		pthread_mutex_destroy(&s[i].mu);
		pthread_cond_destroy(&s[i].cond);
	}
	dn_counters_get(e.t.s, &c);
	fprintf(stderr, "direct=%d: bufwaits=%llu pool waits=%llu timeouts=%llu\n", direct,
	        (unsigned long long)c.admission_bufwaits, (unsigned long long)c.pool_waits,
	        (unsigned long long)c.pool_timeouts);
	CHECK(c.admission_bufwaits > 0);
	CHECK_EQ(c.pool_waits, 0u);
	CHECK_EQ(c.pool_timeouts, 0u);
	CHECK_EQ(c.objects_committed, (uint64_t)NS);
	for (unsigned d = 0; d < e.t.s->ndrives; d++)
		CHECK_EQ(e.t.s->drives[d].claimed, 0u);
	free(buf);
	env_down(&e);
}

int
main(void)
{
	run(true);
	run(false);
	printf("test_dn_rpc_bufadm: ok\n");
	return 0;
}
