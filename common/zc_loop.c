/* zc_loop: a stoppable background thread (zc_loop.h). */
#include <errno.h>
#include <time.h>

#include "zc.h"
#include "zc_loop.h"

void
zc_loop_init(struct zc_loop *l)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&l->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&l->cond, &ca);
	pthread_condattr_destroy(&ca);
	l->running = l->stop = false;
}

int
zc_loop_start(struct zc_loop *l, const char *name, void *(*fn)(void *), void *arg)
{
	if (pthread_create(&l->thread, NULL, fn, arg))
		return -EAGAIN;
	pthread_setname_np(l->thread, name);
	l->running = true;
	return 0;
}

bool
zc_loop_wait(struct zc_loop *l, uint64_t ns)
{
	struct timespec ts;
	bool stop;

	zc_deadline(&ts, CLOCK_MONOTONIC, ns);
	pthread_mutex_lock(&l->lock);
	while (!l->stop && pthread_cond_timedwait(&l->cond, &l->lock, &ts) != ETIMEDOUT)
		;
	stop = l->stop;
	pthread_mutex_unlock(&l->lock);
	return !stop;
}

bool
zc_loop_stopping(struct zc_loop *l)
{
	bool s;

	pthread_mutex_lock(&l->lock);
	s = l->stop;
	pthread_mutex_unlock(&l->lock);
	return s;
}

void
zc_loop_stop(struct zc_loop *l)
{
	pthread_mutex_lock(&l->lock);
	l->stop = true;
	pthread_cond_broadcast(&l->cond);
	pthread_mutex_unlock(&l->lock);
	if (l->running)
		pthread_join(l->thread, NULL);
	l->running = false;
}

void
zc_loop_fini(struct zc_loop *l)
{
	pthread_cond_destroy(&l->cond);
	pthread_mutex_destroy(&l->lock);
}
