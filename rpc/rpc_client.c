/*
 * rpc client: the channels to one datanode and the completion-queue threads every
 * stream and call completes on (rpc_client_internal.h says which file holds what).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "rpc_client_internal.h"
#include "zc_crc.h"
#include "zc.h"

#define RPC_CONNECT_MS 5000 /* longest connection attempt (TCP + TLS handshake) */

/* ------------------------------------------------------------------ common */

static void *
cq_thread(void *arg)
{
	struct rpc_client *c = arg;

	for (;;) {
		grpc_event ev =
		        grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		struct ctag *t;

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		t = ev.tag;
		t->fn(t->obj, ev.success != 0);
	}
	return NULL;
}

grpc_call *
rpc_client_new_call(struct rpc_client *c, enum rpc_method m)
{
	/* calls go round-robin over the channels, each its own TCP connection */
	unsigned i = atomic_fetch_add_explicit(&c->next_channel, 1, memory_order_relaxed) %
	             c->n_channels;
	gpr_timespec dl = gpr_inf_future(GPR_CLOCK_REALTIME);

	if (c->unary_deadline_ms && !rpc_method_is_stream(m))
		dl = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
		                  gpr_time_from_millis(c->unary_deadline_ms, GPR_TIMESPAN));
	return grpc_channel_create_registered_call(c->ch[i], NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
	                                           c->methods[i][m], dl, NULL);
}

grpc_call *
rpc_client_new_unary(struct rpc_client *c, enum rpc_method m, gpr_timespec dl, bool *ready)
{
	unsigned i = atomic_fetch_add_explicit(&c->next_channel, 1, memory_order_relaxed) %
	             c->n_channels;

	*ready = grpc_channel_check_connectivity_state(c->ch[i], 0) == GRPC_CHANNEL_READY;
	return grpc_channel_create_registered_call(c->ch[i], NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
	                                           c->methods[i][m], dl, NULL);
}

int
rpc_client_create(const struct rpc_client_opts *opts, struct rpc_client **out)
{
	grpc_channel_credentials *creds;
	char tls_err[RPC_TLS_ERR_MAX];
	struct rpc_client *c;
	struct rpc_chan_args args;
	unsigned n;
	int rc;

	if (!opts || !opts->target)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->max_message = opts->max_message ? opts->max_message : RPC_DEFAULT_MAX_MESSAGE;
	c->max_inflight = opts->max_inflight ? opts->max_inflight : 4u << 20;
	c->unary_deadline_ms = opts->unary_deadline_ms;
	c->unary_retry_ms = opts->unary_retry_ms ? opts->unary_retry_ms : RPC_UNARY_RETRY_MS;
	c->progress_timeout_ms = opts->progress_timeout_ms;
	n = opts->cq_threads ? opts->cq_threads : 1;
	c->threads = calloc(n, sizeof(*c->threads));
	if (!c->threads) {
		free(c);
		return -ENOMEM;
	}
	grpc_init();
	if (rpc_unix_is_target(opts->target)) {
		rc = rpc_unix_channel_creds(&creds);
		snprintf(tls_err, sizeof(tls_err), "gRPC refused local credentials");
	} else {
		rc = rpc_tls_channel_creds(&opts->tls, &creds, tls_err, sizeof(tls_err));
	}
	if (rc) {
		ZC_ERR("rpc", "tls: %s (target %s)", tls_err, opts->target);
		grpc_shutdown();
		free(c->threads);
		free(c);
		return rc;
	}
	/* A restarted datanode is found within a second: gRPC's default backoff grows to
	 * 120 s, and every call fails at once while the channel waits to reconnect. Calls stay
	 * fail-fast (no GRPC_INITIAL_METADATA_WAIT_FOR_READY): they carry no deadline, so a
	 * wait-for-ready call to a datanode that is down or shows a certificate we refuse waits
	 * for ever (tried: test_internal_tls hung, the gateway ignored SIGTERM), and a deadline
	 * would bound the whole call, a long Write or Read stream included.
	 * connect_ms: gRPC takes it as the floor of one connection attempt's deadline, TLS
	 * handshake included: at 200 ms, handshakes on a loaded 2-core host under ASan timed
	 * out ("tcp handshaker shutdown"). A refused connection still fails at once. */
	rpc_chan_args_init(
	        &args,
	        &(struct rpc_chan_opts){
	                .max_message = 2 * (c->max_message + RPC_MAX_META),
	                .own_connection = true, /* each channel its own */
	                .reconnect_first_ms = RPC_RECONNECT_MS / 5,
	                .reconnect_max_ms = RPC_RECONNECT_MS,
	                .connect_ms = RPC_CONNECT_MS,
	                .stream_window = opts->stream_window,
	                .peer_name = rpc_unix_is_target(opts->target) ? NULL : opts->peer_name,
	        });
	c->n_channels = opts->channels ? opts->channels : 1;
	if (c->n_channels > MAX_CHANNELS)
		c->n_channels = MAX_CHANNELS;
	for (unsigned i = 0; i < c->n_channels; i++) {
		c->ch[i] = grpc_channel_create(opts->target, creds, &args.args);
		for (int m = 0; m < RPC_METHOD_COUNT; m++)
			c->methods[i][m] = grpc_channel_register_call(c->ch[i], rpc_method_path(m),
			                                              NULL, NULL);
	}
	grpc_channel_credentials_release(creds);
	rpc_cli_watch_init(c);
	c->cq = grpc_completion_queue_create_for_next(NULL);
	for (unsigned i = 0; i < n; i++) {
		if (pthread_create(&c->threads[i], NULL, cq_thread, c))
			break;
		pthread_setname_np(c->threads[i], "rpc-cli-cq");
		c->n_threads++;
	}
	if (!c->n_threads) {
		rpc_client_destroy(c);
		return -EAGAIN;
	}
#ifdef ZC_FAULTS
	c->fault_inst = strdup(opts->target); /* NULL (no memory): only instance-less rules */
#endif
	*out = c;
	return 0;
}

int
rpc_client_connect(struct rpc_client *c, unsigned timeout_ms)
{
	grpc_connectivity_state st[MAX_CHANNELS];
	grpc_completion_queue *cq = NULL;
	gpr_timespec deadline;
	bool ready = true;
	int rc = 0;

	if (!c)
		return -EINVAL;
	/* the common case, every channel connected, costs a state read per channel */
	for (unsigned i = 0; i < c->n_channels; i++) {
		st[i] = grpc_channel_check_connectivity_state(c->ch[i], 1);
		ready &= st[i] == GRPC_CHANNEL_READY;
	}
	if (ready)
		return 0;
	deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
	                        gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
	for (unsigned i = 0; i < c->n_channels && rc == 0; i++) {
		while (st[i] != GRPC_CHANNEL_READY) {
			grpc_event ev;

			/* in reconnect backoff or shut down: a call now would fail at once */
			if (st[i] == GRPC_CHANNEL_TRANSIENT_FAILURE ||
			    st[i] == GRPC_CHANNEL_SHUTDOWN) {
				rc = ZC_E(ZC_UNAVAILABLE);
				break;
			}
			if (!cq)
				cq = grpc_completion_queue_create_for_next(NULL);
			grpc_channel_watch_connectivity_state(c->ch[i], st[i], deadline, cq, NULL);
			ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME),
			                                NULL);
			if (!ev.success) { /* the deadline passed before the state changed */
				rc = ZC_E(ZC_UNAVAILABLE);
				break;
			}
			st[i] = grpc_channel_check_connectivity_state(c->ch[i], 1);
		}
	}
	if (cq) {
		grpc_completion_queue_shutdown(cq);
		while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		               .type != GRPC_QUEUE_SHUTDOWN)
			;
		grpc_completion_queue_destroy(cq);
	}
	return rc;
}

void
rpc_client_destroy(struct rpc_client *c)
{
	if (!c)
		return;
	for (unsigned i = 0; i < c->n_channels; i++)
		grpc_channel_destroy(c->ch[i]);
	grpc_completion_queue_shutdown(c->cq);
	for (unsigned i = 0; i < c->n_threads; i++)
		pthread_join(c->threads[i], NULL);
	if (!c->n_threads)
		while (grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
		               .type != GRPC_QUEUE_SHUTDOWN)
			;
	grpc_completion_queue_destroy(c->cq);
	rpc_cli_watch_fini(c);
	grpc_shutdown();
#ifdef ZC_FAULTS
	free(c->fault_inst);
#endif
	free(c->threads);
	free(c);
}
