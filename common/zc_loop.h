/*
 * zc_loop: a background thread that runs passes, sleeps between them, and stops at once
 * when asked: the cluster collector and the healer. The lock and condition are also the
 * owner's, to guard its own state with (the waits release them).
 *
 * Threading: init, start, stop and fini from the owner's thread; wait and stopping from
 * any (the loop's thread, mostly).
 */
#ifndef ZEST_ZC_LOOP_H
#define ZEST_ZC_LOOP_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

struct zc_loop {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* on CLOCK_MONOTONIC */
	pthread_t thread;
	bool running, stop;
};

/* Set up l's lock and condition; no thread yet. */
void zc_loop_init(struct zc_loop *l);
/* Start fn(arg) on a thread named name (at most 15 bytes): 0 or -EAGAIN. */
int zc_loop_start(struct zc_loop *l, const char *name, void *(*fn)(void *), void *arg);
/* Sleep ns nanoseconds, or less when stop is asked: false once it has been. */
bool zc_loop_wait(struct zc_loop *l, uint64_t ns);
/* Has stop been asked? */
bool zc_loop_stopping(struct zc_loop *l);
/* Ask the thread to stop, wake it and join it. Again, or with no thread: only marks it. */
void zc_loop_stop(struct zc_loop *l);
/* Release the lock and condition, after zc_loop_stop. */
void zc_loop_fini(struct zc_loop *l);

#endif
