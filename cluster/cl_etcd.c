/*
 * cl_etcd: endpoints, one channel each, and the blocking call every request goes
 * through: the deadline on the call, failover to the next endpoint on UNAVAILABLE.
 *
 * Calls complete on the client's one completion queue, served by one thread that wakes
 * the waiting caller. A queue per call would be simpler but does not work: gRPC core
 * drives a channel's reconnection from the pollsets of the queues its calls use, and a
 * queue destroyed with its failed call cancels the connect in flight ("tcp handshaker
 * shutdown"), so a member that was down once would never be reached again.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "cl_etcd_internal.h"
#include "rpc_chan.h"
#include "zc.h"

#define RECONNECT_BACKOFF_MAX_MS 1000 /* a restarted member is used again within this */
#define RECONNECT_WINDOW_MS      1200 /* retry a refusing cluster this long (> the above) */

static const char *const method_path[ETCD_METHOD_COUNT] = {
	[ETCD_RANGE] = "/etcdserverpb.KV/Range",
	[ETCD_PUT] = "/etcdserverpb.KV/Put",
	[ETCD_DELETE_RANGE] = "/etcdserverpb.KV/DeleteRange",
	[ETCD_TXN] = "/etcdserverpb.KV/Txn",
	[ETCD_LEASE_GRANT] = "/etcdserverpb.Lease/LeaseGrant",
	[ETCD_LEASE_REVOKE] = "/etcdserverpb.Lease/LeaseRevoke",
	[ETCD_LEASE_KEEPALIVE] = "/etcdserverpb.Lease/LeaseKeepAlive",
};

/* A caller waiting for its call's batch. */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done, success;
};

static void *
cq_thread(void *arg)
{
	struct cl_etcd *c = arg;

	for (;;) {
		grpc_event ev =
		        grpc_completion_queue_next(c->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
		struct waiter *w = ev.tag;

		if (ev.type == GRPC_QUEUE_SHUTDOWN)
			break;
		if (ev.type != GRPC_OP_COMPLETE)
			continue;
		pthread_mutex_lock(&w->mu);
		w->done = true;
		w->success = ev.success != 0;
		pthread_cond_signal(&w->cond);
		pthread_mutex_unlock(&w->mu);
	}
	return NULL;
}

/* ------------------------------------------------------------------ endpoints */

/* Split "a:1,http://b:2" into targets; all endpoints must share one scheme. */
static int
parse_endpoints(struct cl_etcd *c, const char *list, bool *tls)
{
	int scheme = -1; /* 0 plain, 1 TLS */
	const char *p = list;

	for (;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		int s = 0;

		if (len > 7 && !strncmp(p, "http://", 7)) {
			p += 7;
			len -= 7;
		} else if (len > 8 && !strncmp(p, "https://", 8)) {
			p += 8;
			len -= 8;
			s = 1;
		}
		/* host:port with a non-empty host and a numeric port, no path */
		const char *colon = memrchr(p, ':', len);
		if (!len || !colon || colon == p || colon + 1 == p + len || memchr(p, '/', len))
			return -EINVAL;
		for (const char *d = colon + 1; d < p + len; d++)
			if (*d < '0' || *d > '9')
				return -EINVAL;
		if ((scheme >= 0 && s != scheme) || c->n_ep == CL_ETCD_MAX_ENDPOINTS)
			return -EINVAL;
		scheme = s;
		c->ep[c->n_ep].target = strndup(p, len);
		if (!c->ep[c->n_ep].target)
			return -ENOMEM;
		c->n_ep++;
		if (!end)
			break;
		p = end + 1;
	}
	*tls = scheme == 1;
	return c->n_ep ? 0 : -EINVAL;
}

int
cl_etcd_create(const char *endpoints, const struct cl_etcd_opts *opts, struct cl_etcd **out)
{
	static const struct cl_etcd_opts defaults;
	grpc_channel_credentials *creds = NULL;
	struct cl_etcd *c;
	struct rpc_chan_args args;
	bool tls = false;
	int rc;

	*out = NULL;
	if (!endpoints)
		return -EINVAL;
	if (!opts)
		opts = &defaults;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->timeout_ms = opts->timeout_ms ? opts->timeout_ms : CL_ETCD_DEFAULT_TIMEOUT_MS;
	pthread_mutex_init(&c->lease_mu, NULL);
	grpc_init();
	rc = parse_endpoints(c, endpoints, &tls);
	if (rc)
		goto fail;
	rc = tls ? cl_etcd_tls_credentials(opts, &creds) : 0;
	if (rc)
		goto fail;
	if (!tls)
		creds = grpc_insecure_credentials_create();
	/* A range can be large (etcd itself caps a request at 1.5 MiB by default). Failover
	 * is ours. A restarted member is used again within a second (gRPC's backoff grows to
	 * 120 s, and calls to a channel waiting to reconnect fail at once). connect_ms: at
	 * 200 ms a busy machine failed handshakes to a live member ("timed out before
	 * receiving SETTINGS frame"); a dead member refuses at once, a hung one costs a call
	 * its deadline slice. */
	rpc_chan_args_init(&args,
	                   &(struct rpc_chan_opts){ .max_recv = 64 << 20,
	                                            .reconnect_first_ms = 200,
	                                            .reconnect_max_ms = RECONNECT_BACKOFF_MAX_MS,
	                                            .connect_ms = 5000 });
	for (unsigned i = 0; i < c->n_ep; i++) {
		struct etcd_endpoint *ep = &c->ep[i];

		ep->ch = grpc_channel_create(ep->target, creds, &args.args);
		for (int m = 0; m < ETCD_METHOD_COUNT; m++)
			ep->method[m] =
			        grpc_channel_register_call(ep->ch, method_path[m], NULL, NULL);
	}
	grpc_channel_credentials_release(creds);
	c->cq = grpc_completion_queue_create_for_next(NULL);
	if (pthread_create(&c->thread, NULL, cq_thread, c)) {
		rc = -EAGAIN;
		goto fail;
	}
	c->thread_started = true;
	pthread_setname_np(c->thread, "etcd-cq");
	*out = c;
	return 0;
fail:
	cl_etcd_destroy(c);
	return rc;
}

void
cl_etcd_destroy(struct cl_etcd *c)
{
	if (!c)
		return;
	if (c->cq) {
		grpc_completion_queue_shutdown(c->cq);
		if (c->thread_started)
			pthread_join(c->thread, NULL);
		grpc_completion_queue_destroy(c->cq);
	}
	for (unsigned i = 0; i < c->n_ep; i++) {
		if (c->ep[i].ch)
			grpc_channel_destroy(c->ep[i].ch);
		free(c->ep[i].target);
	}
	pthread_mutex_destroy(&c->lease_mu);
	free(c);
	grpc_shutdown();
}

/* ------------------------------------------------------------------ the call */

grpc_slice
cl_etcd_pack(const ProtobufCMessage *msg)
{
	grpc_slice s = grpc_slice_malloc(protobuf_c_message_get_packed_size(msg));

	protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(s));
	return s;
}

ProtobufCMessage *
cl_etcd_unpack(const ProtobufCMessageDescriptor *desc, grpc_byte_buffer *bb)
{
	grpc_byte_buffer_reader r;
	ProtobufCMessage *msg;
	grpc_slice s;

	if (!bb || !grpc_byte_buffer_reader_init(&r, bb))
		return NULL;
	s = grpc_byte_buffer_reader_readall(&r);
	grpc_byte_buffer_reader_destroy(&r);
	msg = protobuf_c_message_unpack(desc, NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
	grpc_slice_unref(s);
	return msg;
}

int
cl_etcd_batch(struct cl_etcd *c, grpc_call *call, const grpc_op *ops, size_t n)
{
	struct waiter w = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, false, false };

	(void)c; /* the call completes on c->cq, which it was created on */
	if (grpc_call_start_batch(call, ops, n, &w, NULL) != GRPC_CALL_OK)
		return -EIO;
	pthread_mutex_lock(&w.mu);
	while (!w.done)
		pthread_cond_wait(&w.cond, &w.mu);
	pthread_mutex_unlock(&w.mu);
	pthread_cond_destroy(&w.cond);
	pthread_mutex_destroy(&w.mu);
	return w.success ? 1 : 0;
}

/* One attempt on one endpoint; the call's own deadline bounds the wait. */
static grpc_status_code
attempt(struct cl_etcd *c, struct etcd_endpoint *ep, enum etcd_method m, grpc_slice req,
        gpr_timespec deadline, grpc_byte_buffer **resp, char *msg, size_t msg_len)
{
	/* a new buffer each attempt: sending empties it (gRPC takes its slices) */
	grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&req, 1);
	grpc_metadata_array md_initial, md_trailing;
	grpc_status_code status = GRPC_STATUS_UNKNOWN;
	grpc_slice details = grpc_empty_slice();
	grpc_call *call;
	grpc_op ops[6];

	*resp = NULL;
	grpc_metadata_array_init(&md_initial);
	grpc_metadata_array_init(&md_trailing);
	call = grpc_channel_create_registered_call(ep->ch, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
	                                           ep->method[m], deadline, NULL);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &md_initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = resp;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &md_trailing;
	ops[5].data.recv_status_on_client.status = &status;
	ops[5].data.recv_status_on_client.status_details = &details;
	/* the call's deadline bounds the wait; the batch completes even when the call fails */
	if (cl_etcd_batch(c, call, ops, 6) < 0) {
		status = GRPC_STATUS_INTERNAL;
		details = grpc_slice_from_static_string("cannot start the call");
	}
	snprintf(msg, msg_len, "%.*s", (int)GRPC_SLICE_LENGTH(details),
	         (const char *)GRPC_SLICE_START_PTR(details));
	/* The deadline we sent passed inside etcd first (a proposal that waits for a quorum):
	 * etcd answers with Go's bare context error, which gRPC-Go sends as UNKNOWN. It is the
	 * call's deadline all the same, whichever side noticed it first. */
	if (status == GRPC_STATUS_UNKNOWN &&
	    !grpc_slice_str_cmp(details, "context deadline exceeded"))
		status = GRPC_STATUS_DEADLINE_EXCEEDED;
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md_initial);
	grpc_metadata_array_destroy(&md_trailing);
	grpc_call_unref(call);
	grpc_byte_buffer_destroy(send);
	if (status != GRPC_STATUS_OK && *resp) {
		grpc_byte_buffer_destroy(*resp);
		*resp = NULL;
	}
	return status;
}

/* What an etcd status stands for (etcd's api/v3rpc/rpctypes: no leader and request
 * timeouts are UNAVAILABLE, a lease not found NOT_FOUND, compacted/future revisions
 * OUT_OF_RANGE, too many requests and no space RESOURCE_EXHAUSTED). */
static int
err_from_status(grpc_status_code code)
{
	switch (code) {
	case GRPC_STATUS_OK:
		return 0;
	case GRPC_STATUS_UNAVAILABLE:
		return ZC_E(ZC_NO_QUORUM);
	case GRPC_STATUS_DEADLINE_EXCEEDED:
		return -ETIMEDOUT;
	case GRPC_STATUS_INVALID_ARGUMENT:
		return -EINVAL;
	case GRPC_STATUS_NOT_FOUND:
		return ZC_E(ZC_NO_KEY);
	case GRPC_STATUS_OUT_OF_RANGE:
		return -ERANGE;
	case GRPC_STATUS_RESOURCE_EXHAUSTED:
		return ZC_E(ZC_SLOW_DOWN);
	case GRPC_STATUS_FAILED_PRECONDITION:
		return ZC_E(ZC_PRECONDITION);
	case GRPC_STATUS_PERMISSION_DENIED:
	case GRPC_STATUS_UNAUTHENTICATED:
		return -EACCES;
	case GRPC_STATUS_CANCELLED:
		return -ECANCELED;
	default:
		return -EIO;
	}
}

int
cl_etcd_call(struct cl_etcd *c, enum etcd_method m, const ProtobufCMessage *req,
             const ProtobufCMessageDescriptor *resp_desc, ProtobufCMessage **resp,
             unsigned timeout_ms)
{
	int64_t timeout = timeout_ms ? timeout_ms : c->timeout_ms;
	gpr_timespec start = gpr_now(GPR_CLOCK_MONOTONIC);
	gpr_timespec deadline = gpr_time_add(start, gpr_time_from_millis(timeout, GPR_TIMESPAN));
	unsigned first = atomic_load_explicit(&c->cur, memory_order_relaxed) % c->n_ep;
	grpc_status_code status = GRPC_STATUS_UNAVAILABLE;
	grpc_slice out = cl_etcd_pack(req);
	grpc_byte_buffer *in = NULL;
	unsigned i = first, unavailable = 0;
	char msg[256] = "";

	*resp = NULL;
	for (unsigned tried = 0;; tried++) {
		gpr_timespec until = deadline;

		i = (first + tried) % c->n_ep;
		if (tried && gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), deadline) >= 0) {
			status = GRPC_STATUS_DEADLINE_EXCEEDED;
			break;
		}
		/*
		 * With another member to ask, an attempt gets half the time (at least a
		 * second): a proposal a follower forwarded to a leader that died is never
		 * answered until etcd's own request timeout (about 7 s), while the same
		 * request sent again is served as soon as a new leader is elected.
		 */
		if (c->n_ep > 1) {
			gpr_timespec slice = gpr_time_add(
			        gpr_now(GPR_CLOCK_MONOTONIC),
			        gpr_time_from_millis(timeout / 2 > 1000 ? timeout / 2 : 1000,
			                             GPR_TIMESPAN));

			if (gpr_time_cmp(slice, deadline) < 0)
				until = slice;
		}
		status = attempt(c, &c->ep[i], m, out, until, &in, msg, sizeof(msg));
		if (status == GRPC_STATUS_OK) {
			if (i != first)
				atomic_store_explicit(&c->cur, i, memory_order_relaxed);
			break;
		}
		if (status == GRPC_STATUS_UNAVAILABLE) {
			ZC_DBG("etcd", "endpoint=%s method=%s unavailable: %s", c->ep[i].target,
			       method_path[m], msg);
			/*
			 * Every member refused: say so now rather than at the deadline, but
			 * only after RECONNECT_WINDOW_MS. A channel that failed to connect
			 * earlier (its member was down, or not up yet) refuses calls at once
			 * until its reconnect backoff (at most 1 s) has passed, even when the
			 * member is back; a later pass finds it connected.
			 */
			if (++unavailable >= c->n_ep &&
			    gpr_time_cmp(gpr_time_sub(gpr_now(GPR_CLOCK_MONOTONIC), start),
			                 gpr_time_from_millis(RECONNECT_WINDOW_MS, GPR_TIMESPAN)) >=
			            0)
				break;
			if ((i + 1) % c->n_ep == first) /* a pass is over: pause a little */
				gpr_sleep_until(gpr_time_min(
				        deadline,
				        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
				                     gpr_time_from_millis(100, GPR_TIMESPAN))));
			continue;
		}
		if (status == GRPC_STATUS_DEADLINE_EXCEEDED && gpr_time_cmp(until, deadline) < 0) {
			ZC_WARN("etcd", "endpoint=%s method=%s no answer in time, trying the next",
			        c->ep[i].target, method_path[m]);
			continue;
		}
		/* a member that let the deadline pass may be hung: start elsewhere next time */
		if (status == GRPC_STATUS_DEADLINE_EXCEEDED)
			atomic_compare_exchange_strong(&c->cur, &first, (i + 1) % c->n_ep);
		break;
	}
	grpc_slice_unref(out);
	if (status == GRPC_STATUS_OK) {
		*resp = cl_etcd_unpack(resp_desc, in);
		if (in)
			grpc_byte_buffer_destroy(in);
		if (!*resp) {
			ZC_WARN("etcd", "endpoint=%s method=%s malformed reply", c->ep[i].target,
			        method_path[m]);
			return -EIO;
		}
		return 0;
	}
	if (status == GRPC_STATUS_DEADLINE_EXCEEDED)
		ZC_WARN("etcd", "endpoint=%s method=%s deadline passed", c->ep[i].target,
		        method_path[m]);
	else if (status == GRPC_STATUS_UNAVAILABLE)
		ZC_WARN("etcd", "method=%s no endpoint available, last endpoint=%s: %s",
		        method_path[m], c->ep[i].target, msg);
	else if (err_from_status(status) == -EIO) /* a status etcd is not known to send */
		ZC_WARN("etcd", "endpoint=%s method=%s status=%d: %s", c->ep[i].target,
		        method_path[m], (int)status, msg);
	else
		ZC_DBG("etcd", "endpoint=%s method=%s status=%d: %s", c->ep[i].target,
		       method_path[m], (int)status, msg);
	return err_from_status(status);
}
