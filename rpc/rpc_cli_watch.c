/*
 * rpc client, the progress watchdog: one thread per client (started by the first stream it
 * watches) that cancels a stream whose peer has owed it something for longer than the
 * stream's progress timeout: a send the transport did not take (the peer stopped reading,
 * its flow-control window stays shut), a message or the status that does not come. A
 * hung peer (SIGSTOP, a frozen disk) keeps its TCP connections open, so without this the
 * stream and its user would wait for ever; a whole-call deadline would cut long streams
 * that are merely slow. The cancelled stream ends through its `done` with UNAVAILABLE
 * (ZC_UNAVAILABLE): the peer is as good as gone.
 *
 * Cost on the streams' path: one atomic store per progress point. The thread wakes every
 * WATCH_TICK_MS while it watches anything, so a stream is cut between its timeout and a
 * tick later; it sleeps untimed while the list is empty.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "rpc_client_internal.h"
#include "zc.h"

#define WATCH_TICK_MS 100

void
rpc_cli_timed_arm(struct rpc_cli_timed *t)
{
	atomic_store_explicit(&t->since_ns, zc_now_ns(), memory_order_relaxed);
}

/* Under c->watch_mu: cancel every stream past its timeout. */
static void
watch_scan(struct rpc_client *c)
{
	uint64_t now = zc_now_ns();

	for (struct rpc_cli_timed *t = c->watched; t; t = t->next) {
		unsigned ms = atomic_load_explicit(&t->timeout_ms, memory_order_relaxed);
		uint64_t since = atomic_load_explicit(&t->since_ns, memory_order_relaxed);
		char msg[RPC_STATUS_MSG_MAX];

		if (!ms || !since || since > now || now - since < (uint64_t)ms * 1000000u)
			continue;
		/* a stream that made progress since the load keeps its new clock */
		if (!atomic_compare_exchange_strong(&t->since_ns, &since, 0))
			continue;
		rpc_format_status_l(msg, sizeof(msg), ZC_E(ZC_UNAVAILABLE),
		                    "no progress from the peer for %u ms", ms);
		ZC_WARN("rpc", "stream_stalled timeout_ms=%u: cancelled", ms);
		/* the status the stream's `done` gets (without a zest-err trailer UNAVAILABLE
		 * stands for ZC_UNAVAILABLE); the call is alive: it is freed after its unlink */
		grpc_call_cancel_with_status(t->call, GRPC_STATUS_UNAVAILABLE, msg, NULL);
	}
}

static void *
watch_main(void *arg)
{
	struct rpc_client *c = arg;

	pthread_mutex_lock(&c->watch_mu);
	while (!c->watch_stop) {
		watch_scan(c);
		if (c->watched) {
			struct timespec ts;

			zc_deadline(&ts, CLOCK_MONOTONIC, WATCH_TICK_MS * 1000000ull);
			pthread_cond_timedwait(&c->watch_cv, &c->watch_mu, &ts);
		} else {
			pthread_cond_wait(&c->watch_cv, &c->watch_mu);
		}
	}
	pthread_mutex_unlock(&c->watch_mu);
	return NULL;
}

void
rpc_cli_watch_init(struct rpc_client *c)
{
	pthread_condattr_t ca;

	pthread_mutex_init(&c->watch_mu, NULL);
	/* the ticks are on the monotonic clock, as the streams' progress stamps */
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->watch_cv, &ca);
	pthread_condattr_destroy(&ca);
}

void
rpc_cli_watch_fini(struct rpc_client *c)
{
	pthread_mutex_lock(&c->watch_mu);
	c->watch_stop = true;
	pthread_cond_broadcast(&c->watch_cv);
	pthread_mutex_unlock(&c->watch_mu);
	if (c->watch_running)
		pthread_join(c->watch_thread, NULL);
	pthread_cond_destroy(&c->watch_cv);
	pthread_mutex_destroy(&c->watch_mu);
}

int
rpc_cli_watch_set(struct rpc_client *c, struct rpc_cli_timed *t, unsigned timeout_ms)
{
	int rc = 0;

	atomic_store_explicit(&t->timeout_ms, timeout_ms, memory_order_relaxed);
	if (!timeout_ms)
		return 0;
	pthread_mutex_lock(&c->watch_mu);
	if (!c->watch_running) {
		if (pthread_create(&c->watch_thread, NULL, watch_main, c)) {
			atomic_store_explicit(&t->timeout_ms, 0, memory_order_relaxed);
			rc = -EAGAIN;
			goto out;
		}
		pthread_setname_np(c->watch_thread, "rpc-cli-watch");
		c->watch_running = true;
	}
	if (!t->linked) {
		t->prev = NULL;
		t->next = c->watched;
		if (c->watched)
			c->watched->prev = t;
		c->watched = t;
		t->linked = true;
		if (!t->next) /* the list was empty: the thread sleeps untimed */
			pthread_cond_signal(&c->watch_cv);
	}
out:
	pthread_mutex_unlock(&c->watch_mu);
	return rc;
}

void
rpc_cli_watch_unlink(struct rpc_client *c, struct rpc_cli_timed *t)
{
	pthread_mutex_lock(&c->watch_mu);
	if (t->linked) {
		if (t->prev)
			t->prev->next = t->next;
		else
			c->watched = t->next;
		if (t->next)
			t->next->prev = t->prev;
		t->linked = false;
	}
	pthread_mutex_unlock(&c->watch_mu);
}
