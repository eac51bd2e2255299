/*
 * Admission by cell buffers: more concurrent Writes than the drives' pools can hold at
 * once. Every Write is opened before any finishes, and every admitted one is fed its first
 * half (so it holds its stripe's buffers across the gap, as a Write between two messages
 * does) before any is fed the rest. Before admission reserved buffers, the first Write
 * past the pool's capacity waited in dn_pool_get for buffers the others held until they
 * were fed again, which on a write worker is the convoy of docs/benchmarks.md; here it
 * would be a pool timeout. Now the Writes past the capacity wait in the admission queue
 * and get in as the first ones drain: all commit, no pool get ever waits or times out
 * (counted, not timed), and the reservations and pools are whole again at the end.
 */
#include <stdatomic.h>

#include "dn_test.h"
#include "dn_internal.h"

#define NW 24

struct wr {
	struct dn_admit adm;
	struct dn_write *w;
	atomic_int admitted; /* 0 waiting, 1 let in, -errno refused */
	struct t_wait tw;
	char key[16];
};

static void
admitted_cb(void *arg, int err)
{
	struct wr *r = arg;

	atomic_store(&r->admitted, err ? err : 1);
}

static void
feed(struct wr *r, const uint8_t *buf, size_t from, size_t to)
{
	struct zc_seg seg = { (uint8_t *)buf + from, to - from, NULL };

	CHECK_EQ(dn_write_data(r->w, from, &seg, 1), 0);
}

static void
run(bool direct)
{
	static struct wr ws[NW];
	struct t_env e;
	struct dn_counters c;
	size_t len;
	uint8_t *buf;
	unsigned now_in = 0, done = 0, parked = 0;

	t_env_init(&e, 6, 4, 2);
	e.o.data_direct = direct;
	e.o.parity_bufs = 1; /* 1 (buffered) or 2 (direct) cells per drive: a few Writes fill it */
	e.o.wait_ns = 30000000000ull; /* a pool wait would show as a wait, not as a timeout */
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	len = e.o.cell_size; /* one stripe: one data cell, two parity cells */
	buf = malloc(len);
	t_fill(buf, len);
	memset(ws, 0, sizeof(ws));
	for (int i = 0; i < NW; i++) {
		struct wr *r = &ws[i];
		int rc;

		snprintf(r->key, sizeof(r->key), "k%d", i);
		pthread_mutex_init(&r->tw.lock, NULL);
		pthread_cond_init(&r->tw.cond, NULL);
		dn_admit_bufs(&r->adm, 0, 0, len, true);
		rc = dn_admission_try(e.s, &r->adm, admitted_cb, r);
		CHECK(rc == 0 || rc == 1);
		if (rc == 0) {
			atomic_store(&r->admitted, 1);
			now_in++;
		} else {
			parked++;
		}
	}
	/* The pools hold 12 (direct) or 6 (buffered) cells; a Write holds 3 or 2. */
	CHECK(now_in >= 1 && now_in <= (direct ? 4u : 3u));
	CHECK_EQ(now_in + parked, (unsigned)NW);
	dn_counters_get(e.s, &c);
	CHECK_EQ(c.admission_parked, parked);
	/* Rounds: begin and half-feed every Write let in, then finish them all. */
	while (done < NW) {
		struct wr *round[NW];
		unsigned nr = 0;

		for (int i = 0; i < NW; i++) {
			struct wr *r = &ws[i];

			if (atomic_load(&r->admitted) != 1 || r->w || r->tw.done)
				continue;
			CHECK_EQ(dn_write_begin_admitted(e.s, &r->adm, "b", r->key, len, true, 0, 0,
			                                 &r->w),
			         0);
			feed(r, buf, 0, len / 2);
			round[nr++] = r;
		}
		for (unsigned i = 0; i < nr; i++) {
			struct wr *r = round[i];

			feed(r, buf, len / 2, len);
			dn_write_commit(r->w, "e", NULL, 0, t_commit_cb, &r->tw);
		}
		for (unsigned i = 0; i < nr; i++) {
			struct wr *r = round[i];

			pthread_mutex_lock(&r->tw.lock);
			while (!r->tw.done)
				pthread_cond_wait(&r->tw.cond, &r->tw.lock);
			pthread_mutex_unlock(&r->tw.lock);
			CHECK_EQ(r->tw.err, 0);
			CHECK_EQ(r->tw.size, len);
			r->w = NULL;
			done++;
		}
		if (nr == 0) {
			/* dn-admit lets the next ones in once the drained Writes gave back. */
			for (int i = 0; i < 10000; i++) {
				bool any = false;

				for (int j = 0; j < NW && !any; j++)
					any = atomic_load(&ws[j].admitted) == 1 && !ws[j].tw.done;
				if (any)
					break;
				CHECK(i < 9999);
				usleep(1000);
			}
		}
	}
	for (int i = 0; i < NW; i++) {
		struct dn_object_info info;

		CHECK_EQ(atomic_load(&ws[i].admitted), 1);
		CHECK_EQ(dn_stat(e.s, "b", ws[i].key, &info), 0);
		CHECK_EQ(info.size, len);
		dn_object_info_fini(&info);
	}
	dn_counters_get(e.s, &c);
	fprintf(stderr,
	        "direct=%d: %u let in at once, %u waited; bufwaits=%llu pool waits=%llu "
	        "timeouts=%llu\n",
	        direct, now_in, parked, (unsigned long long)c.admission_bufwaits,
	        (unsigned long long)c.pool_waits, (unsigned long long)c.pool_timeouts);
	CHECK_EQ(c.admission_bufwaits, parked);
	CHECK_EQ(c.admission_parked, 0u);
	CHECK_EQ(c.admission_refused, 0u);
	CHECK_EQ(c.pool_waits, 0u);
	CHECK_EQ(c.pool_timeouts, 0u);
	for (unsigned d = 0; d < e.s->ndrives; d++) {
		CHECK_EQ(e.s->drives[d].claimed, 0u);
		CHECK_EQ(e.s->drives[d].pool_top, e.s->drives[d].pool_n);
	}
	for (int i = 0; i < NW; i++) {
		pthread_mutex_destroy(&ws[i].tw.lock);
		pthread_cond_destroy(&ws[i].tw.cond);
	}
	free(buf);
	t_env_fini(&e);
}

int
main(void)
{
	run(true);
	run(false);
	printf("ok\n");
	return 0;
}
