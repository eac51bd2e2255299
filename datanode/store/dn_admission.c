/*
 * Storage-aware admission: each drive keeps an EWMA (alpha 1/8) of write latency, from
 * enqueue to completion, so queueing inside the datanode counts. The worst healthy drive
 * sets the level: above L1 new writes are paced, above L2 they wait in a bounded queue,
 * above L3 they are refused with -EAGAIN (RESOURCE_EXHAUSTED at the gRPC edge). An idle
 * drive's average halves every 100 ms, so a drive that was slow once does not block
 * writes forever.
 *
 * A paced or queued Write is parked: a struct dn_admit on the store's list, no thread.
 * One admission thread (dn-admit) lets them in: a paced one when its delay is over, the
 * queued ones when the level falls below L2. The level moves only at a write completion
 * (which signals the thread while Writes queue) or by decay, at the next 100 ms halving
 * of an idle drive, which the thread computes and sleeps until; nothing polls. So a queue
 * of adm_queue Writes costs list entries, not write workers, and the Writes already
 * admitted keep the workers. dn_admission_enter is the same wait for a caller that may
 * block (the library API, tests).
 *
 * Buffers. A Write holds cells of the drives' registered pools while it fills them (a
 * stripe's parity, with data_direct the data cell being filled) across the gaps between
 * its messages, when no worker runs it. Were buffers taken on demand, Writes holding
 * buffers would wait for a worker while the workers wait in the pool for those buffers
 * (measured: 160 writers of 1 MiB against a 384-buffer pool, throughput / 10, broken only
 * by the pool's 2 s timeouts). So a Write is let in only with a reservation (dn_claim) of
 * one buffer on each drive its block group can hold one on at once, all or nothing, first
 * come first in; a Write whose buffers are reserved by others waits here, as a queued
 * one does. The reservations on a drive never exceed its pool, so a Write that is filling
 * never waits for a buffer another filling Write holds: at worst for an io in flight,
 * which its drive thread completes without any worker (docs/architecture.md).
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <time.h>

#include "dn_store.h"

#define DECAY_NS 100000000ull
#define PACE_MAX 50000000ull

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
	/* The store above comes before this load: either the admission thread sees the
	 * new average when it scans, or we see its queued Write and wake it. */
	if (atomic_load(&d->store->adm.waiting)) {
		pthread_mutex_lock(&d->store->adm.lock);
		pthread_cond_signal(&d->store->adm.cond);
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
	uint64_t now = zc_now_ns(), worst = ZC_FAULT_LEVEL_NS(ZC_FP_ADM_LATENCY);

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

/*
 * When the level can next fall by decay: the next halving of an idle drive above L2. A
 * busy drive's average moves at its completions, which signal. At most DECAY_NS ahead, so
 * a completion counted as in flight at the scan but ending without a signal costs at most
 * one decay step.
 */
static uint64_t
next_decay(struct dn_store *s, uint64_t now)
{
	uint64_t wake = now + DECAY_NS;

	for (unsigned i = 0; i < s->ndrives; i++) {
		struct dn_drive *d = &s->drives[i];
		uint64_t last = atomic_load(&d->last_done_ns), at;

		if (!dn_drive_ok(d) || atomic_load(&d->writes_inflight) ||
		    drive_latency(d, now) <= s->o.adm_l2_ns)
			continue;
		at = now > last ? last + ((now - last) / DECAY_NS + 1) * DECAY_NS : now + DECAY_NS;
		if (at < wake)
			wake = at;
	}
	return wake;
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

/* A paced Write waits by how far the drive is over L1, at most 50 ms. */
static uint64_t
pace_ns(struct dn_store *s, uint64_t lat)
{
	uint64_t over = lat - s->o.adm_l1_ns;

	return over > PACE_MAX ? PACE_MAX : over;
}

/* Under adm.lock. */
static void
park(struct dn_adm *a, struct dn_admit *e)
{
	e->next = NULL;
	e->prev = a->tail;
	if (a->tail)
		a->tail->next = e;
	else
		a->head = e;
	a->tail = e;
	e->parked = true;
	atomic_fetch_add(&a->parked, 1);
}

/* Under adm.lock. */
static void
unpark(struct dn_adm *a, struct dn_admit *e)
{
	if (e->prev)
		e->prev->next = e->next;
	else
		a->head = e->next;
	if (e->next)
		e->next->prev = e->prev;
	else
		a->tail = e->prev;
	e->parked = false;
	if (e->queued)
		atomic_fetch_sub(&a->waiting, 1);
	if (e->bufwait)
		a->bufwait--;
	e->bufwait = false;
	atomic_fetch_sub(&a->parked, 1);
}

void
dn_admit_bufs(struct dn_admit *a, unsigned k, unsigned m, uint64_t size, bool size_known)
{
	a->bufs = true;
	a->k = k;
	a->m = m;
	a->size = size;
	a->size_known = size_known;
	a->base = UINT_MAX; /* placed at the first try */
	a->claim = (struct dn_claim){ 0 };
}

/*
 * Under adm.lock: the drives e's Write can hold a buffer on at once, placed now. One
 * block group: its parity drives and (data_direct) the data cells its size reaches, each
 * drive holding one cell of the group; past one group (or size unknown) any drive.
 */
static uint64_t
claim_need(struct dn_store *s, struct dn_admit *e)
{
	unsigned k = e->k ? e->k : s->o.k, m = e->k ? e->m : s->o.m, n = k + m, ndata = 0;
	uint64_t cell = s->o.cell_size, need = 0;

	e->claim.placed = false;
	if (s->o.discard || (e->size_known && e->size == 0) || n > s->ndrives || n > 32)
		return 0; /* nothing will be held (a bad scheme is refused at begin) */
	if (!e->size_known || e->size > (uint64_t)k * cell * s->o.stripes_per_group)
		return s->ndrives == 64 ? UINT64_MAX : (1ull << s->ndrives) - 1;
	if (e->base == UINT_MAX)
		e->base = atomic_fetch_add(&s->next_base, 1);
	dn_store_place(s, e->base, n, e->claim.place, NULL, NULL);
	e->claim.placed = true;
	if (s->o.data_direct)
		ndata = e->size >= (uint64_t)k * cell ? k : (unsigned)((e->size + cell - 1) / cell);
	for (unsigned c = 0; c < n; c++)
		if (c >= k || c < ndata)
			need |= 1ull << e->claim.place[c];
	return need;
}

/* Under adm.lock: reserve e's buffers, all or nothing. */
static bool
claim_take(struct dn_store *s, struct dn_admit *e)
{
	uint64_t need;

	if (!e->bufs)
		return true;
	need = claim_need(s, e);
	for (unsigned d = 0; d < s->ndrives; d++)
		if ((need >> d & 1) && s->drives[d].claimed >= s->drives[d].pool_n)
			return false;
	for (unsigned d = 0; d < s->ndrives; d++)
		if (need >> d & 1)
			s->drives[d].claimed++;
	e->claim.drives = need;
	return true;
}

/* Under adm.lock: e waits for its buffers (queued, first come first in). */
static void
wait_bufs(struct dn_store *s, struct dn_admit *e)
{
	if (!e->queued) {
		e->queued = true;
		atomic_fetch_add(&s->adm.waiting, 1);
	}
	if (!e->bufwait) {
		e->bufwait = true;
		s->adm.bufwait++;
		atomic_fetch_add(&s->adm_bufwaits, 1);
	}
}

void
dn_admission_release(struct dn_store *s, struct dn_claim *c)
{
	struct dn_adm *a = &s->adm;

	if (!c->drives)
		return;
	pthread_mutex_lock(&a->lock);
	for (unsigned d = 0; d < s->ndrives; d++)
		if (c->drives >> d & 1)
			s->drives[d].claimed--;
	c->drives = 0;
	if (a->bufwait)
		pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
}

void
dn_admission_kick(struct dn_store *s)
{
	pthread_mutex_lock(&s->adm.lock);
	pthread_cond_signal(&s->adm.cond); /* the level moved without a completion */
	pthread_mutex_unlock(&s->adm.lock);
}

int
dn_admission_try(struct dn_store *s, struct dn_admit *e, dn_admit_cb cb, void *arg)
{
	struct dn_adm *a = &s->adm;
	uint64_t lat = worst_latency(s);
	int level = level_of(s, lat);

	if (level == DN_ADM_REFUSE) {
		atomic_fetch_add(&s->adm_refused, 1);
		return -EAGAIN;
	}
	if (level == DN_ADM_OK && !e->bufs)
		return 0;
	e->cb = cb;
	e->arg = arg;
	e->err = 0;
	e->queued = false;
	e->bufwait = false;
	pthread_mutex_lock(&a->lock);
	/* Nobody waits for buffers before us and ours are free: in at once. */
	if (level == DN_ADM_OK && a->bufwait == 0 && claim_take(s, e)) {
		pthread_mutex_unlock(&a->lock);
		return 0;
	}
	if (a->stop || !a->thread_ok) {
		pthread_mutex_unlock(&a->lock);
		return -ECANCELED;
	}
	e->until_ns = zc_now_ns() + s->o.wait_ns;
	if (level == DN_ADM_QUEUE) {
		if (atomic_load(&a->waiting) >= s->o.adm_queue) {
			pthread_mutex_unlock(&a->lock);
			atomic_fetch_add(&s->adm_refused, 1);
			return -EAGAIN;
		}
		e->queued = true;
		atomic_fetch_add(&a->waiting, 1);
		atomic_fetch_add(&s->adm_queued, 1);
	} else if (level == DN_ADM_PACE) {
		e->queued = false;
		e->due_ns = zc_now_ns() + pace_ns(s, lat);
		atomic_fetch_add(&s->adm_paced, 1);
	} else {
		/* Waiting for buffers is not bounded by adm_queue: an admitted Write would
		 * hold as much of the call's memory, and more of the pools. */
		e->queued = false;
		wait_bufs(s, e);
	}
	park(a, e);
	/* The thread may sleep past this entry's time: let it look again. */
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	return 1;
}

bool
dn_admission_cancel(struct dn_store *s, struct dn_admit *e)
{
	struct dn_adm *a = &s->adm;
	bool was;

	pthread_mutex_lock(&a->lock);
	was = e->parked;
	if (was)
		unpark(a, e);
	pthread_mutex_unlock(&a->lock);
	return was;
}

/*
 * Under adm.lock: move every parked Write whose turn came to *done (linked by next, err
 * set); returns when to look again (UINT64_MAX: nothing parked).
 */
static uint64_t
scan(struct dn_store *s, struct dn_admit **done)
{
	struct dn_adm *a = &s->adm;
	uint64_t now = zc_now_ns(), lat = worst_latency(s), wake = UINT64_MAX;
	int level = level_of(s, lat);
	struct dn_admit *e = a->head, **tail = done;
	bool blocked = false; /* an earlier Write waits for buffers: the later ones wait too */

	while (e) {
		struct dn_admit *next = e->next;
		int err = 1;

		if (a->stop) {
			err = -ECANCELED;
		} else if (!e->queued) {
			if (e->due_ns <= now)
				err = 0;
		} else if (level < DN_ADM_QUEUE) {
			/* Let in from the queue; still over L1: paced as a new Write would be
			 * (not one that waits for buffers: its delay was served). */
			if (level == DN_ADM_PACE && !e->bufwait) {
				atomic_fetch_sub(&a->waiting, 1);
				e->queued = false;
				e->due_ns = now + pace_ns(s, lat);
				atomic_fetch_add(&s->adm_paced, 1);
			} else {
				err = 0;
			}
		}
		if (err == 0 && (blocked || !claim_take(s, e))) {
			err = 1;
			blocked = true;
			wait_bufs(s, e);
		}
		if (err == 1 && e->queued && e->until_ns <= now) {
			err = -EAGAIN;
			atomic_fetch_add(&s->adm_refused, 1);
		}
		if (err <= 0) {
			unpark(a, e);
			e->err = err;
			e->next = NULL;
			*tail = e;
			tail = &e->next;
		} else {
			uint64_t at = e->queued ? e->until_ns : e->due_ns;

			if (at < wake)
				wake = at;
		}
		e = next;
	}
	if (atomic_load(&a->waiting)) {
		uint64_t d = next_decay(s, now);

		if (d < wake)
			wake = d;
	}
	return wake;
}

static void *
adm_main(void *arg)
{
	struct dn_store *s = arg;
	struct dn_adm *a = &s->adm;

	pthread_mutex_lock(&a->lock);
	for (;;) {
		struct dn_admit *done = NULL;
		uint64_t wake = scan(s, &done), now;
		struct timespec ts;

		if (done) {
			/* Callbacks take their caller's locks: never under ours. */
			pthread_mutex_unlock(&a->lock);
			while (done) {
				struct dn_admit *next = done->next;

				done->cb(done->arg, done->err); /* done may be freed now */
				done = next;
			}
			pthread_mutex_lock(&a->lock);
			continue;
		}
		if (a->stop)
			break;
		if (wake == UINT64_MAX) {
			pthread_cond_wait(&a->cond, &a->lock);
			continue;
		}
		now = zc_now_ns();
		if (wake <= now)
			continue;
		zc_deadline(&ts, CLOCK_REALTIME, wake - now);
		pthread_cond_timedwait(&a->cond, &a->lock, &ts);
	}
	pthread_mutex_unlock(&a->lock);
	return NULL;
}

int
dn_admission_start(struct dn_store *s)
{
	struct dn_adm *a = &s->adm;
	int err = -pthread_create(&a->thread, NULL, adm_main, s);

	if (err)
		return err;
	pthread_setname_np(a->thread, "dn-admit");
	pthread_mutex_lock(&a->lock);
	a->thread_ok = true;
	pthread_mutex_unlock(&a->lock);
	return 0;
}

void
dn_admission_stop(struct dn_store *s)
{
	struct dn_adm *a = &s->adm;
	bool running;

	pthread_mutex_lock(&a->lock);
	running = a->thread_ok;
	a->stop = true;
	pthread_cond_signal(&a->cond);
	pthread_mutex_unlock(&a->lock);
	if (running)
		pthread_join(a->thread, NULL); /* it fails what is still parked: -ECANCELED */
}

struct sync_wait {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	int err;
};

static void
sync_done(void *arg, int err)
{
	struct sync_wait *w = arg;

	pthread_mutex_lock(&w->mu);
	w->err = err;
	w->done = true;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->mu);
}

int
dn_admission_enter(struct dn_store *s, struct dn_admit *e)
{
	struct sync_wait w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, 0 };
	int rc = dn_admission_try(s, e, sync_done, &w);

	if (rc != 1)
		return rc;
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.mu);
	pthread_mutex_unlock(&w.mu);
	/* sync_done signalled under w.mu: nobody touches w once we hold it with done set. */
	pthread_mutex_destroy(&w.mu);
	pthread_cond_destroy(&w.cond);
	return w.err;
}
