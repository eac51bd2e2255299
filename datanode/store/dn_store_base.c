/*
 * The store layer's object: option defaults, its init and fini, the codec cache, a block
 * group's write quorum and placement, and the count of live writes close waits for. The io
 * pool and credit are in dn_iopool.c, the commit thread in dn_jobs.c, admission in
 * dn_admission.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_store.h"
#include "zc.h"

void
dn_store_opts_default(struct dn_store_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->k = 4;
	o->m = 2;
	o->cell_size = 1 << 20;
	o->chunk_size = 64 << 10;
	o->stripes_per_group = 16;
	o->queue_depth = 64;
	o->parity_bufs = 32;
	o->inflight_cap = 1ull << 30;
	o->wait_ns = 2000000000ull;
	o->adm_queue = 64;
	o->meta_map_size = 1ull << 30;
	o->full_probe_ns = 1000000000ull;
}

int
dn_store_codec(struct dn_store *s, unsigned k, unsigned m, struct ec_codec **out)
{
	int err = 0;

	if (k == 0 || m == 0 || k + m > EC_MAX_CELLS)
		return -EINVAL;
	pthread_mutex_lock(&s->codec_lock);
	if (!s->codecs[k][m])
		err = ec_codec_create(k, m, &s->codecs[k][m]);
	*out = s->codecs[k][m];
	pthread_mutex_unlock(&s->codec_lock);
	return err;
}

/* ---- quorum and placement of a block group ---- */
unsigned
dn_store_quorum(const struct dn_store *s, unsigned k, unsigned n)
{
	unsigned quorum = s->o.write_quorum ? s->o.write_quorum : k + 1;

	if (quorum > n)
		quorum = n;
	if (quorum < k)
		quorum = k;
	return quorum;
}

void
dn_store_place(struct dn_store *s, unsigned base, unsigned n, uint8_t *drives, uint32_t *missing,
               uint32_t *full)
{
	bool used[DN_MAX_DRIVES] = { false };
	unsigned got = 0;

	/*
	 * Rotate the first drive per group; prefer writable drives, fill up with failed or
	 * full ones, whose cells are missing from the start (no I/O is tried on them).
	 */
	for (unsigned pass = 0; pass < 2 && got < n; pass++)
		for (unsigned i = 0; i < s->ndrives && got < n; i++) {
			unsigned d = (base + i) % s->ndrives;
			bool writable = used[d] ? false : dn_drive_writable(&s->drives[d]);

			if (used[d] || (pass == 0 && !writable))
				continue;
			used[d] = true;
			if (!writable && missing) {
				*missing |= 1u << got;
				if (atomic_load(&s->drives[d].state) == DN_DRIVE_FULL)
					*full |= 1u << got;
			}
			drives[got++] = (uint8_t)d;
		}
}

bool
dn_store_lost_at_open(struct dn_store *s)
{
	return dn_meta_generation(s->meta) == 0 || s->emptied != 0;
}

int
dn_store_base_init(struct dn_store *s)
{
	/* Rings full twice over, plus the cells writers are still filling (k per write). */
	size_t nio = (size_t)s->o.ndrives * s->o.queue_depth * 2 + 1024;

	pthread_mutex_init(&s->codec_lock, NULL);
	pthread_mutex_init(&s->credit_lock, NULL);
	pthread_cond_init(&s->credit_cond, NULL);
	pthread_mutex_init(&s->io_lock, NULL);
	pthread_cond_init(&s->io_cond, NULL);
	pthread_mutex_init(&s->commit_lock, NULL);
	pthread_cond_init(&s->commit_cond, NULL);
	pthread_mutex_init(&s->live_lock, NULL);
	pthread_cond_init(&s->live_cond, NULL);
	pthread_mutex_init(&s->adm.lock, NULL);
	pthread_cond_init(&s->adm.cond, NULL);
	s->io_mem = calloc(nio, sizeof(*s->io_mem));
	if (!s->io_mem)
		return -ENOMEM;
	for (size_t i = 0; i < nio; i++) {
		s->io_mem[i].next = s->io_free;
		s->io_free = &s->io_mem[i];
	}
	return 0;
}

void
dn_store_base_fini(struct dn_store *s)
{
	for (unsigned k = 0; k <= EC_MAX_CELLS; k++)
		for (unsigned m = 0; m <= EC_MAX_CELLS; m++)
			ec_codec_destroy(s->codecs[k][m]);
	free(s->io_mem);
	s->io_mem = NULL;
	pthread_mutex_destroy(&s->codec_lock);
	pthread_mutex_destroy(&s->credit_lock);
	pthread_cond_destroy(&s->credit_cond);
	pthread_mutex_destroy(&s->io_lock);
	pthread_cond_destroy(&s->io_cond);
	pthread_mutex_destroy(&s->commit_lock);
	pthread_cond_destroy(&s->commit_cond);
	pthread_mutex_destroy(&s->live_lock);
	pthread_cond_destroy(&s->live_cond);
	pthread_mutex_destroy(&s->adm.lock);
	pthread_cond_destroy(&s->adm.cond);
}

void
dn_store_live_get(struct dn_store *s)
{
	atomic_fetch_add(&s->live_writes, 1);
}

void
dn_store_live_put(struct dn_store *s)
{
	if (atomic_fetch_sub(&s->live_writes, 1) == 1) {
		pthread_mutex_lock(&s->live_lock);
		pthread_cond_broadcast(&s->live_cond);
		pthread_mutex_unlock(&s->live_lock);
	}
}

int
dn_store_live_wait(struct dn_store *s, uint64_t wait_ns)
{
	struct timespec until;
	int err = 0;

	zc_deadline(&until, CLOCK_REALTIME, wait_ns);
	pthread_mutex_lock(&s->live_lock);
	while (atomic_load(&s->live_writes) > 0 && !err)
		err = -pthread_cond_timedwait(&s->live_cond, &s->live_lock, &until);
	pthread_mutex_unlock(&s->live_lock);
	if (err)
		ZC_ERR("store", "close: writes=%u still live after %llu ms: closing anyway",
		       atomic_load(&s->live_writes), (unsigned long long)(wait_ns / 1000000u));
	return err;
}
