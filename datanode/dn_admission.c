/*
 * Storage-aware admission: each drive keeps an EWMA (alpha 1/8) of write latency, from
 * enqueue to completion, so queueing inside the datanode counts. The worst healthy drive
 * sets the level: above L1 new writes are paced, above L2 they wait in a bounded queue,
 * above L3 they are refused with -EAGAIN (RESOURCE_EXHAUSTED at the gRPC edge). An idle
 * drive's average halves every 100 ms, so a drive that was slow once does not block
 * writes forever. A queued write sleeps on a condition that each write completion
 * broadcasts (the average moves only then, or by decay, which the wait's 100 ms bound
 * covers), so it is let in as soon as the drives allow, not at the next poll.
 */
#include <errno.h>
#include <time.h>

#include "dn_internal.h"

#define DECAY_NS 100000000ull

void
dn_admission_note(struct dn_drive *d, uint64_t lat)
{
	double sec = (double)lat / 1e9;
	uint64_t old = atomic_load(&d->ewma_ns);
	unsigned b = 0;

	while (b < DN_HIST_BUCKETS && sec > dn_hist_bounds_s[b])
		b++;
	atomic_fetch_add(&d->hist[b], 1);
	atomic_fetch_add(&d->hist_sum_ns, lat);
	atomic_fetch_add(&d->hist_count, 1);
	/* Only the drive thread writes the average: load + store is enough. */
	atomic_store(&d->ewma_ns, old == 0 ? lat : old - old / 8 + lat / 8);
	atomic_store(&d->last_done_ns, zc_now_ns());
	if (atomic_load(&d->store->adm.waiting)) {
		pthread_mutex_lock(&d->store->adm.lock);
		pthread_cond_broadcast(&d->store->adm.cond);
		pthread_mutex_unlock(&d->store->adm.lock);
	}
}

static uint64_t
drive_latency(struct dn_drive *d, uint64_t now)
{
	uint64_t ewma = atomic_load(&d->ewma_ns), last = atomic_load(&d->last_done_ns);

	if (atomic_load(&d->writes_inflight) == 0 && now > last) {
		uint64_t halvings = (now - last) / DECAY_NS;

		ewma = halvings >= 64 ? 0 : ewma >> halvings;
	}
	return ewma;
}

static uint64_t
worst_latency(struct dn_store *s)
{
	uint64_t now = zc_now_ns(), worst = 0;

	for (unsigned i = 0; i < s->ndrives; i++) {
		uint64_t l;

		if (!dn_drive_ok(&s->drives[i]))
			continue;
		l = drive_latency(&s->drives[i], now);
		if (l > worst)
			worst = l;
	}
	return worst;
}

static int
level_of(struct dn_store *s, uint64_t lat)
{
	if (s->o.adm_l3_ns && lat > s->o.adm_l3_ns)
		return DN_ADM_REFUSE;
	if (s->o.adm_l2_ns && lat > s->o.adm_l2_ns)
		return DN_ADM_QUEUE;
	if (s->o.adm_l1_ns && lat > s->o.adm_l1_ns)
		return DN_ADM_PACE;
	return DN_ADM_OK;
}

int
dn_admission_level(struct dn_store *s)
{
	return level_of(s, worst_latency(s));
}

int
dn_admission_enter(struct dn_store *s)
{
	uint64_t lat = worst_latency(s);
	int level = level_of(s, lat);

	if (level == DN_ADM_REFUSE) {
		atomic_fetch_add(&s->adm_refused, 1);
		return -EAGAIN;
	}
	if (level == DN_ADM_QUEUE) {
		uint64_t until = zc_now_ns() + s->o.wait_ns;

		pthread_mutex_lock(&s->adm.lock);
		if (atomic_load(&s->adm.waiting) >= s->o.adm_queue) {
			pthread_mutex_unlock(&s->adm.lock);
			atomic_fetch_add(&s->adm_refused, 1);
			return -EAGAIN;
		}
		atomic_fetch_add(&s->adm.waiting, 1);
		atomic_fetch_add(&s->adm_queued, 1);
		/* Woken by completions; the bound covers the idle decay, which none signals. */
		while ((level = dn_admission_level(s)) >= DN_ADM_QUEUE) {
			uint64_t now = zc_now_ns();
			struct timespec ts;

			if (now >= until)
				break;
			dn_deadline(&ts, until - now < DECAY_NS ? until - now : DECAY_NS);
			pthread_cond_timedwait(&s->adm.cond, &s->adm.lock, &ts);
		}
		atomic_fetch_sub(&s->adm.waiting, 1);
		pthread_mutex_unlock(&s->adm.lock);
		if (level >= DN_ADM_QUEUE) {
			atomic_fetch_add(&s->adm_refused, 1);
			return -EAGAIN;
		}
		lat = worst_latency(s);
	}
	if (level_of(s, lat) == DN_ADM_PACE) {
		/* Pace by how far the drive is over L1, at most 50 ms. */
		uint64_t over = lat - s->o.adm_l1_ns;
		struct timespec ts;

		if (over > 50000000)
			over = 50000000;
		ts.tv_sec = 0;
		ts.tv_nsec = (long)over;
		atomic_fetch_add(&s->adm_paced, 1);
		nanosleep(&ts, NULL);
	}
	return 0;
}
