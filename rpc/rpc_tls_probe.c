/*
 * rpc_tls_probe: one mTLS connection to check a server's identity (rpc_tls.h).
 *
 * A probe is a channel of its own (a local subchannel pool, so it never reuses another
 * channel's connection) whose expected peer name is the node's: gRPC's handshake checks
 * the server's chain against our CA and `name` against its subjectAltName. Asked to
 * connect, the channel goes IDLE -> CONNECTING -> READY (the check passed) or
 * TRANSIENT_FAILURE (refused, unreachable, or the certificate failed the check); the
 * state changes arrive on the prober's completion queue (watch_connectivity_state), so
 * no thread waits on one probe and many run side by side.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "rpc_chan.h"
#include "rpc_tls.h"
#include "rpc_tls_internal.h"

#define PROBE_DEFAULT_MS 5000

struct probe {
	struct rpc_tls_prober *p;
	grpc_channel *ch;
	gpr_timespec deadline;
	rpc_tls_probe_cb cb;
	void *arg;
};

struct rpc_tls_prober {
	grpc_channel_credentials *creds;
	grpc_completion_queue *cq;
	pthread_t thread;
	unsigned timeout_ms;
	pthread_mutex_t mu; /* inflight, stopping */
	pthread_cond_t cv;
	unsigned inflight;
	bool stopping;
};

static void
finish(struct probe *pr, bool ok)
{
	struct rpc_tls_prober *p = pr->p;

	grpc_channel_destroy(pr->ch);
	pr->cb(pr->arg, ok);
	free(pr);
	pthread_mutex_lock(&p->mu);
	if (--p->inflight == 0)
		pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

/* The channel's state changed (or the deadline passed): done, or watch on. */
static void
step(struct probe *pr, bool changed)
{
	grpc_connectivity_state st;

	if (!changed) {
		finish(pr, false);
		return;
	}
	st = grpc_channel_check_connectivity_state(pr->ch, 0);
	if (st == GRPC_CHANNEL_READY || st == GRPC_CHANNEL_TRANSIENT_FAILURE ||
	    st == GRPC_CHANNEL_SHUTDOWN) {
		finish(pr, st == GRPC_CHANNEL_READY);
		return;
	}
	grpc_channel_watch_connectivity_state(pr->ch, st, pr->deadline, pr->p->cq, pr);
}

static void *
run(void *arg)
{
	struct rpc_tls_prober *p = arg;

	for (;;) {
		grpc_event ev =
		        grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type == GRPC_OP_COMPLETE)
			step(ev.tag, ev.success != 0);
	}
	return NULL;
}

int
rpc_tls_prober_create(const struct rpc_tls *t, unsigned timeout_ms, struct rpc_tls_prober **out,
                      char *err, size_t len)
{
	struct rpc_tls_prober *p;
	int rc;

	if (!t || t->insecure)
		return rpc_tls_fail(err, len, -EINVAL, "an identity probe needs TLS");
	p = calloc(1, sizeof(*p));
	if (!p)
		return rpc_tls_fail(err, len, -ENOMEM, "out of memory");
	p->timeout_ms = timeout_ms ? timeout_ms : PROBE_DEFAULT_MS;
	grpc_init();
	rc = rpc_tls_channel_creds(t, &p->creds, err, len);
	if (rc) {
		grpc_shutdown();
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	p->cq = grpc_completion_queue_create_for_next(NULL);
	if (pthread_create(&p->thread, NULL, run, p)) {
		grpc_completion_queue_shutdown(p->cq);
		while (grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		               .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(p->cq);
		grpc_channel_credentials_release(p->creds);
		pthread_cond_destroy(&p->cv);
		pthread_mutex_destroy(&p->mu);
		grpc_shutdown();
		free(p);
		return rpc_tls_fail(err, len, -EAGAIN, "no thread for the prober");
	}
	pthread_setname_np(p->thread, "rpc-probe");
	*out = p;
	return 0;
}

int
rpc_tls_probe(struct rpc_tls_prober *p, const char *address, const char *name, rpc_tls_probe_cb cb,
              void *arg)
{
	struct rpc_chan_args args;
	struct probe *pr;
	grpc_connectivity_state st;

	pr = calloc(1, sizeof(*pr));
	if (!pr)
		return -ENOMEM;
	pthread_mutex_lock(&p->mu);
	if (p->stopping) {
		pthread_mutex_unlock(&p->mu);
		free(pr);
		return -ECANCELED;
	}
	p->inflight++;
	pthread_mutex_unlock(&p->mu);
	pr->p = p;
	pr->cb = cb;
	pr->arg = arg;
	/* one attempt: the connect floor is the whole probe's time, no retry within it */
	rpc_chan_args_init(&args, &(struct rpc_chan_opts){ .own_connection = true,
	                                                   .connect_ms = p->timeout_ms,
	                                                   .reconnect_first_ms = p->timeout_ms,
	                                                   .reconnect_max_ms = p->timeout_ms,
	                                                   .peer_name = name });
	pr->ch = grpc_channel_create(address, p->creds, &args.args); /* copies the args */
	pr->deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
	                            gpr_time_from_millis(p->timeout_ms, GPR_TIMESPAN));
	st = grpc_channel_check_connectivity_state(pr->ch, 1);
	grpc_channel_watch_connectivity_state(pr->ch, st, pr->deadline, p->cq, pr);
	return 0;
}

void
rpc_tls_prober_destroy(struct rpc_tls_prober *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	while (p->inflight)
		pthread_cond_wait(&p->cv, &p->mu);
	pthread_mutex_unlock(&p->mu);
	grpc_completion_queue_shutdown(p->cq);
	pthread_join(p->thread, NULL);
	grpc_completion_queue_destroy(p->cq);
	grpc_channel_credentials_release(p->creds);
	pthread_cond_destroy(&p->cv);
	pthread_mutex_destroy(&p->mu);
	grpc_shutdown();
	free(p);
}
