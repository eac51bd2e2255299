/*
 * The write-path convoy of docs/benchmarks.md ("Past 128 writers"), in one process with
 * the real binding: more concurrent Write streams than the drives' cell pools can hold,
 * each stopping after its first half (so it holds its stripe's buffers without a worker,
 * as a Write between two messages does) before any sends the rest. When buffers were
 * taken on demand, the Writes past the pool's capacity took both write workers into
 * dn_pool_get for the buffers the first ones held, and those could not get a worker for
 * their second half until the pool wait (30 s here) ran out. Now the Writes past the
 * capacity wait in the admission queue: all commit, no pool get waits or times out, and
 * the queue really held Writes (counted, not timed). Nothing leaks (t_rpc_env_fini).
 */
#include "dn_rpc_test.h"
#include "dn_internal.h"

#define NS 16

static void
env_up(struct t_rpc_env *e, bool direct)
{
	t_rpc_env_init(e);
	e->bo.readers = 1;
	e->t.o.data_direct = direct;
	e->t.o.parity_bufs = 1; /* 12 (direct) or 6 cells over six drives */
	e->t.o.wait_ns = 30ull * 1000000000u;
	t_rpc_env_open(e, "bkt");
}

static void
run(bool direct)
{
	static struct t_wstate s[NS];
	struct rpc_cwrite *w[NS];
	struct dn_counters c;
	struct t_rpc_env e;
	size_t len, half;
	uint8_t *buf;

	env_up(&e, direct);
	len = e.t.o.cell_size; /* one stripe: one data cell and two parity cells */
	half = len / 2;
	buf = malloc(len);
	t_fill(buf, len);
	for (int i = 0; i < NS; i++) {
		char key[16];
		struct rpc_write_open op = {
			.bucket = "bkt", .key = key, .size = len, .size_known = true
		};

		snprintf(key, sizeof(key), "k%d", i);
		t_wstate_init(&s[i]);
		CHECK_EQ(rpc_cwrite_open(e.cl, &op, &t_wstate_cbs, &s[i], &w[i]), 0);
		t_cwrite_send(w[i], buf, half);
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
		t_wstate_wait(&s[i], 0);
		CHECK_EQ(s[i].st.err, 0);
		rpc_cwrite_destroy(w[i]);
		t_wstate_fini(&s[i]);
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
	t_rpc_env_fini(&e, 1000);
}

int
main(void)
{
	run(true);
	run(false);
	printf("test_dn_rpc_bufadm: ok\n");
	return 0;
}
