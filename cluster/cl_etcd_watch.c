/*
 * cl_etcd: watches. Each watch is a thread of its own holding one Watch stream (one
 * watcher on it) to the client's current endpoint. When the stream ends for any reason
 * but a stop, the thread opens a new one on the next endpoint, asking for events from the
 * revision after the last one delivered, so callers see each event once and in order.
 *
 * The stream carries etcd's "hasleader" metadata: a member that loses its leader then
 * ends the stream (UNAVAILABLE) instead of going quiet, and the watch moves to a member
 * that still has one.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/support/time.h>

#include "cl_etcd_internal.h"
#include "zc.h"

#define RETRY_MS 500 /* between attempts while no endpoint keeps a stream open */

struct cl_etcd_watch {
	struct cl_etcd *c;
	void *key, *end; /* copies; end NULL: key alone */
	size_t key_len, end_len;
	int64_t next_rev; /* the first revision not yet delivered; 0: from now */
	cl_etcd_watch_cb cb;
	void *arg;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool stop;
	bool created;    /* etcd confirmed the first stream: _start may return */
	grpc_call *call; /* the stream in use, under mu: _stop cancels it */
};

static bool
stopped(struct cl_etcd_watch *w)
{
	bool s;

	pthread_mutex_lock(&w->mu);
	s = w->stop;
	pthread_mutex_unlock(&w->mu);
	return s;
}

/* Hand one response's events to the callback; the kvs are borrowed for the call. */
static int
deliver(struct cl_etcd_watch *w, const Etcdserverpb__WatchResponse *r)
{
	Mvccpb__KeyValue **kv;
	struct cl_etcd_event *ev;
	struct cl_etcd_kvs kvs;
	int rc;

	if (!r->n_events)
		return 0;
	kv = calloc(r->n_events, sizeof(*kv));
	ev = calloc(r->n_events, sizeof(*ev));
	if (!kv || !ev) {
		free(kv);
		free(ev);
		return -ENOMEM;
	}
	for (size_t i = 0; i < r->n_events; i++) {
		static Mvccpb__KeyValue empty = MVCCPB__KEY_VALUE__INIT;

		kv[i] = r->events[i]->kv ? r->events[i]->kv : &empty;
	}
	rc = etcd_kvs_copy(kv, r->n_events, &kvs);
	if (!rc) {
		for (size_t i = 0; i < r->n_events; i++) {
			ev[i].type = r->events[i]->type == MVCCPB__EVENT__EVENT_TYPE__DELETE
			                     ? CL_ETCD_EVENT_DELETE
			                     : CL_ETCD_EVENT_PUT;
			ev[i].kv = kvs.kv[i];
		}
		w->cb(w->arg, ev, r->n_events, 0);
		w->next_rev = kv[r->n_events - 1]->mod_revision + 1;
		cl_etcd_kvs_fini(&kvs);
	}
	free(kv);
	free(ev);
	return rc;
}

/*
 * One stream on endpoint ep until it ends: 0 after a stop, -ERANGE when etcd has
 * compacted the revisions we need (the watch cannot go on), else the error that ended it
 * (try elsewhere). *opened: the stream delivered its "created" answer.
 */
static int
stream(struct cl_etcd_watch *w, struct etcd_endpoint *ep, bool *opened)
{
	Etcdserverpb__WatchCreateRequest create = ETCDSERVERPB__WATCH_CREATE_REQUEST__INIT;
	Etcdserverpb__WatchRequest req = ETCDSERVERPB__WATCH_REQUEST__INIT;
	grpc_metadata md = { grpc_slice_from_static_string("hasleader"),
		             grpc_slice_from_static_string("true"),
		             { { NULL, NULL, NULL, NULL } } };
	grpc_metadata_array md_initial, md_trailing;
	grpc_status_code status = GRPC_STATUS_OK;
	grpc_slice details = grpc_empty_slice();
	grpc_byte_buffer *send, *in = NULL;
	grpc_slice packed;
	grpc_call *call;
	grpc_op ops[3];
	bool ended = false;
	int rc = -EIO;

	*opened = false;
	create.key = (ProtobufCBinaryData){ w->key_len, w->key };
	create.range_end = (ProtobufCBinaryData){ w->end_len, w->end };
	create.start_revision = w->next_rev;
	req.request_union_case = ETCDSERVERPB__WATCH_REQUEST__REQUEST_UNION_CREATE_REQUEST;
	req.create_request = &create;
	packed = etcd_pack(&req.base);
	send = grpc_raw_byte_buffer_create(&packed, 1);
	grpc_slice_unref(packed);
	grpc_metadata_array_init(&md_initial);
	grpc_metadata_array_init(&md_trailing);
	call = grpc_channel_create_registered_call(ep->ch, NULL, GRPC_PROPAGATE_DEFAULTS, w->c->cq,
	                                           ep->method[ETCD_WATCH],
	                                           gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
	pthread_mutex_lock(&w->mu);
	w->call = call;
	if (w->stop)
		grpc_call_cancel(call, NULL);
	pthread_mutex_unlock(&w->mu);

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[0].data.send_initial_metadata.count = 1;
	ops[0].data.send_initial_metadata.metadata = &md;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = send;
	ops[2].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[2].data.recv_initial_metadata.recv_initial_metadata = &md_initial;
	if (etcd_batch(w->c, call, ops, 3) <= 0)
		goto status;
	for (;;) {
		Etcdserverpb__WatchResponse *r;

		memset(ops, 0, sizeof(ops));
		ops[0].op = GRPC_OP_RECV_MESSAGE;
		ops[0].data.recv_message.recv_message = &in;
		if (etcd_batch(w->c, call, ops, 1) <= 0 || !in) {
			ended = true; /* by the server or the transport: its status says why */
			break;
		}
		r = (Etcdserverpb__WatchResponse *)etcd_unpack(
		        &etcdserverpb__watch_response__descriptor, in);
		grpc_byte_buffer_destroy(in);
		in = NULL;
		if (!r) {
			rc = -EIO;
			break;
		}
		if (r->created && !*opened) {
			*opened = true;
			/* "from now" means from the revision the watch was created at */
			if (!w->next_rev && r->header)
				w->next_rev = r->header->revision + 1;
			pthread_mutex_lock(&w->mu);
			w->created = true;
			pthread_cond_broadcast(&w->cond);
			pthread_mutex_unlock(&w->mu);
		}
		if (r->canceled || r->compact_revision) {
			rc = r->compact_revision ? -ERANGE : -EIO;
			ZC_WARN("etcd", "endpoint=%s watch canceled compact_revision=%lld: %s",
			        ep->target, (long long)r->compact_revision,
			        r->cancel_reason ? r->cancel_reason : "");
			protobuf_c_message_free_unpacked(&r->base, NULL);
			grpc_call_cancel(call, NULL);
			break;
		}
		rc = deliver(w, r);
		protobuf_c_message_free_unpacked(&r->base, NULL);
		if (rc) {
			grpc_call_cancel(call, NULL);
			break;
		}
		rc = -EIO;
	}
status:
	/* collect the status; a stream we leave ourselves is cancelled first */
	if (!ended)
		grpc_call_cancel(call, NULL);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[0].data.recv_status_on_client.trailing_metadata = &md_trailing;
	ops[0].data.recv_status_on_client.status = &status;
	ops[0].data.recv_status_on_client.status_details = &details;
	etcd_batch(w->c, call, ops, 1);
	if (!stopped(w) && rc == -EIO)
		ZC_WARN("etcd", "endpoint=%s watch stream ended status=%d: %.*s", ep->target,
		        (int)status, (int)GRPC_SLICE_LENGTH(details),
		        (const char *)GRPC_SLICE_START_PTR(details));
	pthread_mutex_lock(&w->mu);
	w->call = NULL;
	pthread_mutex_unlock(&w->mu);
	grpc_slice_unref(details);
	grpc_metadata_array_destroy(&md_initial);
	grpc_metadata_array_destroy(&md_trailing);
	grpc_byte_buffer_destroy(send);
	grpc_call_unref(call);
	return stopped(w) ? 0 : rc;
}

static void *
watch_thread(void *arg)
{
	struct cl_etcd_watch *w = arg;
	struct cl_etcd *c = w->c;
	unsigned i = atomic_load_explicit(&c->cur, memory_order_relaxed) % c->n_ep, failed = 0;

	while (!stopped(w)) {
		bool opened;
		int rc = stream(w, &c->ep[i], &opened);

		if (stopped(w))
			break;
		if (rc == -ERANGE || rc == -ENOMEM) {
			w->cb(w->arg, NULL, 0, rc);
			break;
		}
		failed = opened ? 1 : failed + 1;
		i = (i + 1) % c->n_ep;
		if (failed >= c->n_ep) {
			/* every member refused in turn: pause before the next round */
			struct timespec ts;

			clock_gettime(CLOCK_MONOTONIC, &ts);
			ts.tv_nsec += RETRY_MS * 1000000L;
			ts.tv_sec += ts.tv_nsec / 1000000000L;
			ts.tv_nsec %= 1000000000L;
			pthread_mutex_lock(&w->mu);
			while (!w->stop && pthread_cond_timedwait(&w->cond, &w->mu, &ts) == 0)
				;
			pthread_mutex_unlock(&w->mu);
			failed = 0;
		}
	}
	return NULL;
}

/* Wait for the first "created", up to the client's default deadline. */
static bool
wait_created(struct cl_etcd_watch *w)
{
	struct timespec ts;
	bool created;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += w->c->timeout_ms / 1000;
	ts.tv_nsec += (long)(w->c->timeout_ms % 1000) * 1000000L;
	ts.tv_sec += ts.tv_nsec / 1000000000L;
	ts.tv_nsec %= 1000000000L;
	pthread_mutex_lock(&w->mu);
	while (!w->created && pthread_cond_timedwait(&w->cond, &w->mu, &ts) == 0)
		;
	created = w->created;
	pthread_mutex_unlock(&w->mu);
	return created;
}

int
cl_etcd_watch_start(struct cl_etcd *c, const struct cl_etcd_range *r, int64_t start_revision,
                     cl_etcd_watch_cb cb, void *arg, struct cl_etcd_watch **out)
{
	struct cl_etcd_watch *w;
	ProtobufCBinaryData key, end;
	pthread_condattr_t ca;
	uint8_t *owned = NULL;
	int rc;

	*out = NULL;
	if (!c || !r || !cb || start_revision < 0 || r->limit || r->revision || r->serializable ||
	    r->keys_only)
		return -EINVAL;
	rc = etcd_range_bounds(r, &key, &end, &owned);
	if (rc)
		return rc;
	w = calloc(1, sizeof(*w));
	if (!w)
		goto nomem;
	w->key = malloc(key.len);
	w->end = end.len ? malloc(end.len) : NULL;
	if (!w->key || (end.len && !w->end))
		goto nomem;
	memcpy(w->key, key.data, key.len);
	w->key_len = key.len;
	if (end.len)
		memcpy(w->end, end.data, end.len);
	w->end_len = end.len;
	free(owned);
	w->c = c;
	w->next_rev = start_revision;
	w->cb = cb;
	w->arg = arg;
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cond, &ca);
	pthread_condattr_destroy(&ca);
	if (pthread_create(&w->thread, NULL, watch_thread, w)) {
		pthread_cond_destroy(&w->cond);
		pthread_mutex_destroy(&w->mu);
		free(w->key);
		free(w->end);
		free(w);
		return -EAGAIN;
	}
	pthread_setname_np(w->thread, "etcd-watch");
	/* return once etcd has the watch, so every change after the return is seen */
	if (!wait_created(w)) {
		cl_etcd_watch_stop(w);
		return ZC_E(ZC_NO_QUORUM);
	}
	*out = w;
	return 0;
nomem:
	if (w) {
		free(w->key);
		free(w->end);
	}
	free(w);
	free(owned);
	return -ENOMEM;
}

void
cl_etcd_watch_stop(struct cl_etcd_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	w->stop = true;
	if (w->call)
		grpc_call_cancel(w->call, NULL);
	pthread_cond_broadcast(&w->cond);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	pthread_cond_destroy(&w->cond);
	pthread_mutex_destroy(&w->mu);
	free(w->key);
	free(w->end);
	free(w);
}
