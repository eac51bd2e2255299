/* The store's pool of io requests and its in-flight payload credit. */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_store.h"
#include "zc.h"

struct dn_io *
dn_io_get(struct dn_store *s, uint64_t wait_ns)
{
	struct timespec until;
	struct dn_io *io;

	zc_deadline(&until, CLOCK_REALTIME, wait_ns);
	pthread_mutex_lock(&s->io_lock);
	while (!s->io_free)
		if (pthread_cond_timedwait(&s->io_cond, &s->io_lock, &until) == ETIMEDOUT)
			break;
	io = s->io_free;
	if (io)
		s->io_free = io->next;
	pthread_mutex_unlock(&s->io_lock);
	if (io)
		io->dsync = false;
	return io;
}

void
dn_io_put(struct dn_store *s, struct dn_io *io)
{
	pthread_mutex_lock(&s->io_lock);
	io->next = s->io_free;
	s->io_free = io;
	pthread_cond_signal(&s->io_cond);
	pthread_mutex_unlock(&s->io_lock);
}

struct dn_io *
dn_iov_start(struct dn_store *s)
{
	struct dn_io *io = dn_io_get(s, s->o.wait_ns);

	if (io) {
		io->niov = 0;
		io->len = 0;
		io->heap = false;
	}
	return io;
}

void
dn_iov_add(struct dn_store *s, struct dn_io *io, const uint8_t *p, size_t len, struct zc_ref *ref)
{
	if (ref)
		zc_ref_get(ref);
	dn_credit_add(s, len);
	io->iov[io->niov].iov_base = (void *)p;
	io->iov[io->niov].iov_len = len;
	io->refs[io->niov++] = ref;
	io->len += len;
}

void
dn_iov_release(struct dn_store *s, struct dn_io *io)
{
	for (unsigned i = 0; i < io->niov; i++)
		if (io->refs[i])
			zc_ref_put(io->refs[i]);
	dn_credit_give(s, io->len);
}

void
dn_credit_add(struct dn_store *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->credit_lock);
	s->inflight += bytes;
	pthread_mutex_unlock(&s->credit_lock);
}

bool
dn_credit_over(struct dn_store *s)
{
	bool over;

	pthread_mutex_lock(&s->credit_lock);
	over = s->inflight > s->o.inflight_cap;
	pthread_mutex_unlock(&s->credit_lock);
	return over;
}

int
dn_credit_wait(struct dn_store *s)
{
	struct timespec until;
	int err = 0;

	zc_deadline(&until, CLOCK_REALTIME, s->o.wait_ns);
	pthread_mutex_lock(&s->credit_lock);
	while (s->inflight > s->o.inflight_cap) {
		if (pthread_cond_timedwait(&s->credit_cond, &s->credit_lock, &until) == ETIMEDOUT) {
			err = -EAGAIN;
			break;
		}
	}
	pthread_mutex_unlock(&s->credit_lock);
	return err;
}

void
dn_credit_give(struct dn_store *s, uint64_t bytes)
{
	pthread_mutex_lock(&s->credit_lock);
	s->inflight -= bytes;
	pthread_cond_broadcast(&s->credit_cond);
	pthread_mutex_unlock(&s->credit_lock);
}
