/*
 * rpc client: Write streams that put the caller's memory on the wire without a copy,
 * Read streams that hand back zero-copy segments, and unary calls, all completing on
 * the client's own completion-queue threads.
 *
 * Each stream object counts references: one for the caller (dropped by _destroy) and
 * one per batch outstanding, so a stream destroyed inside its done callback stays valid
 * until gRPC has returned every batch.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "ec.h"
#include "rpc_internal.h"
#include "zc.h"

struct ctag {
	void (*fn)(void *obj, bool success);
	void *obj;
};

#define MAX_CHANNELS 16

struct rpc_client {
	grpc_channel *ch[MAX_CHANNELS];
	void *methods[MAX_CHANNELS][RPC_METHOD_COUNT];
	unsigned n_channels;
	atomic_uint next_channel;
	grpc_completion_queue *cq;
	pthread_t *threads;
	unsigned n_threads;
	size_t max_message, max_inflight;
};

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

static grpc_call *
new_call(struct rpc_client *c, enum rpc_method m)
{
	/* calls go round-robin over the channels, each its own TCP connection */
	unsigned i = atomic_fetch_add_explicit(&c->next_channel, 1, memory_order_relaxed) %
		     c->n_channels;

	return grpc_channel_create_registered_call(c->ch[i], NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
						   c->methods[i][m],
						   gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
}

static void
fill_status(struct rpc_status *st, grpc_status_code code, grpc_slice details)
{
	st->code = code;
	rpc_slice_to_str(details, st->msg, sizeof(st->msg));
}

int
rpc_client_create(const struct rpc_client_opts *opts, struct rpc_client **out)
{
	grpc_channel_credentials *creds;
	struct rpc_client *c;
	grpc_channel_args args;
	grpc_arg arg[6];
	size_t limit;
	unsigned n;

	if (!opts || !opts->target)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->max_message = opts->max_message ? opts->max_message : RPC_DEFAULT_MAX_MESSAGE;
	c->max_inflight = opts->max_inflight ? opts->max_inflight : 4u << 20;
	n = opts->cq_threads ? opts->cq_threads : 1;
	c->threads = calloc(n, sizeof(*c->threads));
	if (!c->threads) {
		free(c);
		return -ENOMEM;
	}
	grpc_init();
	limit = 2 * (c->max_message + RPC_MAX_META);
	if (limit > INT32_MAX)
		limit = INT32_MAX;
	arg[0].type = GRPC_ARG_INTEGER;
	arg[0].key = GRPC_ARG_MAX_SEND_MESSAGE_LENGTH;
	arg[0].value.integer = (int)limit;
	arg[1].type = GRPC_ARG_INTEGER;
	arg[1].key = GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH;
	arg[1].value.integer = (int)limit;
	/* No retry policy is used; without this the retry filter would hold sent messages. */
	arg[2].type = GRPC_ARG_INTEGER;
	arg[2].key = GRPC_ARG_ENABLE_RETRIES;
	arg[2].value.integer = 0;
	/* A channel-local subchannel pool: each channel gets its own connection. */
	arg[3].type = GRPC_ARG_INTEGER;
	arg[3].key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
	arg[3].value.integer = 1;
	args.num_args = 4;
	if (opts->stream_window) {
		arg[4].type = GRPC_ARG_INTEGER;
		arg[4].key = GRPC_ARG_HTTP2_BDP_PROBE;
		arg[4].value.integer = 0;
		arg[5].type = GRPC_ARG_INTEGER;
		arg[5].key = GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES;
		arg[5].value.integer =
			opts->stream_window > INT32_MAX ? INT32_MAX : (int)opts->stream_window;
		args.num_args = 6;
	}
	args.args = arg;
	c->n_channels = opts->channels ? opts->channels : 1;
	if (c->n_channels > MAX_CHANNELS)
		c->n_channels = MAX_CHANNELS;
	creds = grpc_insecure_credentials_create();
	for (unsigned i = 0; i < c->n_channels; i++) {
		c->ch[i] = grpc_channel_create(opts->target, creds, &args);
		for (int m = 0; m < RPC_METHOD_COUNT; m++)
			c->methods[i][m] = grpc_channel_register_call(c->ch[i], rpc_method_path(m),
								      NULL, NULL);
	}
	grpc_channel_credentials_release(creds);
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
	*out = c;
	return 0;
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
	grpc_shutdown();
	free(c->threads);
	free(c);
}

/* ------------------------------------------------------------------ Write */

struct qmsg {
	struct qmsg *next;
	grpc_byte_buffer *bb;
	size_t len;
	bool last;
};

struct rpc_cwrite {
	struct rpc_client *cl;
	grpc_call *call;
	pthread_mutex_t mu;
	int refs;
	struct rpc_cwrite_cbs cbs;
	void *arg;
	struct ctag t_send, t_recv;
	Zest__WriteOpen *open; /* until the first message is built */
	struct qmsg *head, *tail, *sending;
	size_t inflight;
	uint64_t offset;
	bool want_writable, committed, done, failed;
	grpc_metadata_array md_initial, md_trailing;
	grpc_byte_buffer *resp;
	grpc_status_code status;
	grpc_slice details;
};

static void
qmsg_free(struct qmsg *q)
{
	grpc_byte_buffer_destroy(q->bb);
	free(q);
}

/* Drop one reference; unlocks. */
static void
cwrite_unref_locked(struct rpc_cwrite *w)
{
	bool last = --w->refs == 0;

	pthread_mutex_unlock(&w->mu);
	if (!last)
		return;
	while (w->head) {
		struct qmsg *q = w->head;

		w->head = q->next;
		qmsg_free(q);
	}
	if (w->open)
		protobuf_c_message_free_unpacked(&w->open->base, NULL);
	grpc_metadata_array_destroy(&w->md_initial);
	grpc_metadata_array_destroy(&w->md_trailing);
	if (w->resp)
		grpc_byte_buffer_destroy(w->resp);
	grpc_slice_unref(w->details);
	grpc_call_unref(w->call);
	pthread_mutex_destroy(&w->mu);
	free(w);
}

/* Under w->mu: start sending the queue head if nothing is being sent. */
static void
cwrite_kick(struct rpc_cwrite *w)
{
	grpc_op ops[2];
	struct qmsg *q = w->head;
	size_t n = 0;

	if (w->sending || !q || w->failed)
		return;
	w->head = q->next;
	if (!w->head)
		w->tail = NULL;
	memset(ops, 0, sizeof(ops));
	ops[n].op = GRPC_OP_SEND_MESSAGE;
	ops[n++].data.send_message.send_message = q->bb;
	if (q->last)
		ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	if (grpc_call_start_batch(w->call, ops, n, &w->t_send, NULL) != GRPC_CALL_OK) {
		w->failed = true;
		w->inflight -= q->len;
		qmsg_free(q);
		grpc_call_cancel(w->call, NULL);
		return;
	}
	w->sending = q;
	w->refs++;
}

static void
cwrite_on_send(void *obj, bool success)
{
	struct rpc_cwrite *w = obj;
	struct qmsg *q;
	bool writable = false;

	pthread_mutex_lock(&w->mu);
	q = w->sending;
	w->sending = NULL;
	w->inflight -= q->len;
	qmsg_free(q);
	if (!success) {
		/* the call is over: drop what is queued; the status arrives via t_recv */
		w->failed = true;
		while (w->head) {
			q = w->head;
			w->head = q->next;
			w->inflight -= q->len;
			qmsg_free(q);
		}
		w->tail = NULL;
	}
	cwrite_kick(w);
	if (w->want_writable && w->inflight < w->cl->max_inflight && !w->done && !w->failed) {
		w->want_writable = false;
		writable = true;
	}
	if (writable && w->cbs.writable) {
		w->refs++;
		pthread_mutex_unlock(&w->mu);
		w->cbs.writable(w->arg, w);
		pthread_mutex_lock(&w->mu);
		w->refs--;
	}
	cwrite_unref_locked(w);
}

static void
cwrite_on_recv(void *obj, bool success)
{
	struct rpc_cwrite *w = obj;
	Zest__WriteResult *res = NULL;
	struct rpc_status st;

	(void)success; /* RECV_STATUS_ON_CLIENT always succeeds */
	fill_status(&st, w->status, w->details);
	if (st.code == GRPC_STATUS_OK) {
		res = (Zest__WriteResult *)rpc_unpack_message(&zest__write_result__descriptor,
							      w->resp);
		if (!res)
			rpc_status_set(&st, -EIO, "missing or malformed WriteResult");
	}
	pthread_mutex_lock(&w->mu);
	w->done = true;
	pthread_mutex_unlock(&w->mu);
	w->cbs.done(w->arg, w, &st, res);
	if (res)
		protobuf_c_message_free_unpacked(&res->base, NULL);
	pthread_mutex_lock(&w->mu);
	cwrite_unref_locked(w);
}

int
rpc_cwrite_open(struct rpc_client *c, const Zest__WriteOpen *open,
		const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out)
{
	struct rpc_cwrite *w;
	grpc_op ops[4];
	uint8_t *tmp;
	size_t len;

	if (!cbs || !cbs->done || !open)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	/* Own a copy of open until the first message carries it. */
	len = protobuf_c_message_get_packed_size(&open->base);
	tmp = malloc(len ? len : 1);
	if (!tmp) {
		free(w);
		return -ENOMEM;
	}
	protobuf_c_message_pack(&open->base, tmp);
	w->open = (Zest__WriteOpen *)protobuf_c_message_unpack(&zest__write_open__descriptor, NULL,
							       len, tmp);
	free(tmp);
	if (!w->open) {
		free(w);
		return -ENOMEM;
	}
	w->cl = c;
	w->cbs = *cbs;
	w->arg = arg;
	w->t_send = (struct ctag){ cwrite_on_send, w };
	w->t_recv = (struct ctag){ cwrite_on_recv, w };
	pthread_mutex_init(&w->mu, NULL);
	grpc_metadata_array_init(&w->md_initial);
	grpc_metadata_array_init(&w->md_trailing);
	w->details = grpc_empty_slice();
	w->call = new_call(c, RPC_WRITE);
	w->refs = 2; /* the caller's, the receive batch's */

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[1].data.recv_initial_metadata.recv_initial_metadata = &w->md_initial;
	ops[2].op = GRPC_OP_RECV_MESSAGE;
	ops[2].data.recv_message.recv_message = &w->resp;
	ops[3].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[3].data.recv_status_on_client.trailing_metadata = &w->md_trailing;
	ops[3].data.recv_status_on_client.status = &w->status;
	ops[3].data.recv_status_on_client.status_details = &w->details;
	pthread_mutex_lock(&w->mu);
	if (grpc_call_start_batch(w->call, ops, 4, &w->t_recv, NULL) != GRPC_CALL_OK) {
		w->refs = 1;
		cwrite_unref_locked(w);
		return -EIO;
	}
	pthread_mutex_unlock(&w->mu);
	*out = w;
	return 0;
}

/* Under w->mu: build and queue one WriteChunk. */
static int
cwrite_queue(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs, size_t len,
	     bool commit, const char *etag, Zest__Attr *const *attrs, size_t n_attrs)
{
	Zest__WriteChunk wc = ZEST__WRITE_CHUNK__INIT;
	struct qmsg *q = calloc(1, sizeof(*q));
	uint32_t crc = 0;

	if (!q)
		return -ENOMEM;
	for (size_t i = 0; i < n_segs; i++)
		crc = ec_crc32c(crc, segs[i].ptr, segs[i].len);
	wc.open = w->open;
	wc.offset = w->offset;
	wc.crc32c = crc;
	wc.commit = commit;
	wc.etag = (char *)(etag ? etag : "");
	wc.attrs = (Zest__Attr **)attrs;
	wc.n_attrs = n_attrs;
	q->bb = rpc_marshal_send(&wc.base, 3, segs, n_segs, len);
	if (!q->bb) {
		free(q);
		return -ENOMEM;
	}
	if (w->open) {
		protobuf_c_message_free_unpacked(&w->open->base, NULL);
		w->open = NULL;
	}
	q->len = len;
	q->last = commit;
	w->offset += len;
	w->inflight += len;
	if (w->tail)
		w->tail->next = q;
	else
		w->head = q;
	w->tail = q;
	cwrite_kick(w);
	return 0;
}

int
rpc_cwrite_send(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs)
{
	size_t len = 0;
	int rc;

	for (size_t i = 0; i < n_segs; i++)
		len += segs[i].len;
	pthread_mutex_lock(&w->mu);
	if (w->committed || w->done || w->failed) {
		rc = -ECANCELED;
	} else if (len > w->cl->max_message) {
		rc = -EINVAL;
	} else if (w->inflight && w->inflight + len > w->cl->max_inflight) {
		w->want_writable = true;
		rc = -EAGAIN;
	} else {
		rc = cwrite_queue(w, segs, n_segs, len, false, NULL, NULL, 0);
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int
rpc_cwrite_commit(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
		  const char *etag, Zest__Attr *const *attrs, size_t n_attrs)
{
	size_t len = 0;
	int rc;

	for (size_t i = 0; i < n_segs; i++)
		len += segs[i].len;
	pthread_mutex_lock(&w->mu);
	if (w->committed || w->done || w->failed)
		rc = -ECANCELED;
	else if (len > w->cl->max_message)
		rc = -EINVAL;
	else
		rc = cwrite_queue(w, segs, n_segs, len, true, etag, attrs, n_attrs);
	if (!rc)
		w->committed = true;
	pthread_mutex_unlock(&w->mu);
	return rc;
}

void
rpc_cwrite_cancel(struct rpc_cwrite *w)
{
	grpc_call_cancel(w->call, NULL);
}

size_t
rpc_cwrite_inflight(const struct rpc_cwrite *w)
{
	return w->inflight;
}

void
rpc_cwrite_destroy(struct rpc_cwrite *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	cwrite_unref_locked(w);
}

/* ------------------------------------------------------------------ Read */

struct rpc_cread {
	struct rpc_client *cl;
	grpc_call *call;
	pthread_mutex_t mu;
	int refs;
	struct rpc_cread_cbs cbs;
	void *arg;
	struct ctag t_start, t_recv, t_status;
	grpc_byte_buffer *req_bb, *recv_bb;
	bool paused, recv_idle, recv_ended, status_got, done_called, bad;
	bool in_chunk, resume_early; /* a resume that raced the chunk callback's pause */
	struct rpc_status bad_st;
	uint64_t next_off;
	struct rpc_chunk chunk;
	grpc_metadata_array md_initial, md_trailing;
	grpc_status_code status;
	grpc_slice details;
};

static void
cread_unref_locked(struct rpc_cread *r)
{
	bool last = --r->refs == 0;

	pthread_mutex_unlock(&r->mu);
	if (!last)
		return;
	if (r->req_bb)
		grpc_byte_buffer_destroy(r->req_bb);
	rpc_chunk_fini(&r->chunk);
	grpc_metadata_array_destroy(&r->md_initial);
	grpc_metadata_array_destroy(&r->md_trailing);
	grpc_slice_unref(r->details);
	grpc_call_unref(r->call);
	pthread_mutex_destroy(&r->mu);
	free(r);
}

/* Under r->mu. */
static void
cread_post_recv(struct rpc_cread *r)
{
	grpc_op op = { .op = GRPC_OP_RECV_MESSAGE };

	op.data.recv_message.recv_message = &r->recv_bb;
	r->recv_bb = NULL;
	if (grpc_call_start_batch(r->call, &op, 1, &r->t_recv, NULL) == GRPC_CALL_OK)
		r->refs++;
	else
		r->recv_ended = true;
}

/* Under r->mu: call done once both the stream and the status ended. Unlocks+unrefs. */
static void
cread_maybe_done(struct rpc_cread *r)
{
	if (r->recv_ended && r->status_got && !r->done_called) {
		struct rpc_status st;

		r->done_called = true;
		if (r->bad)
			st = r->bad_st;
		else
			fill_status(&st, r->status, r->details);
		r->refs++;
		pthread_mutex_unlock(&r->mu);
		r->cbs.done(r->arg, r, &st);
		pthread_mutex_lock(&r->mu);
		r->refs--;
	}
	cread_unref_locked(r);
}

static void
cread_on_start(void *obj, bool success)
{
	struct rpc_cread *r = obj;

	(void)success;
	pthread_mutex_lock(&r->mu);
	cread_unref_locked(r);
}

static void
cread_on_status(void *obj, bool success)
{
	struct rpc_cread *r = obj;

	(void)success;
	pthread_mutex_lock(&r->mu);
	r->status_got = true;
	cread_maybe_done(r);
}

static void
cread_on_recv(void *obj, bool success)
{
	struct rpc_cread *r = obj;
	struct zc_ref *hold = NULL;
	grpc_byte_buffer *bb;
	int rc, verdict = 0;

	pthread_mutex_lock(&r->mu);
	bb = r->recv_bb;
	r->recv_bb = NULL;
	if (!success || !bb || r->bad) {
		if (bb)
			grpc_byte_buffer_destroy(bb);
		r->recv_ended = true;
		cread_maybe_done(r);
		return;
	}
	pthread_mutex_unlock(&r->mu);

	rc = rpc_marshal_recv(RPC_MARSHAL_ZEROCOPY, &zest__read_chunk__descriptor, 3, bb,
			      &r->chunk, &hold);
	if (!rc) {
		Zest__ReadChunk *rch = (Zest__ReadChunk *)r->chunk.msg;
		uint32_t crc = 0;

		for (size_t i = 0; i < r->chunk.n_segs; i++)
			crc = ec_crc32c(crc, r->chunk.segs[i].ptr, r->chunk.segs[i].len);
		if (r->chunk.data_len && crc != rch->crc32c) {
			rpc_status_set(&r->bad_st, -EBADMSG,
				       "ReadChunk CRC32C mismatch at offset %llu",
				       (unsigned long long)rch->offset);
			rc = -EBADMSG;
		} else {
			pthread_mutex_lock(&r->mu);
			r->in_chunk = true;
			r->resume_early = false;
			pthread_mutex_unlock(&r->mu);
			verdict = r->cbs.chunk(r->arg, r, rch->info, rch->offset, r->chunk.segs,
					       r->chunk.n_segs, r->chunk.data_len);
		}
		rpc_chunk_clear(&r->chunk);
		zc_ref_put(hold);
	} else {
		rpc_status_set(&r->bad_st, -EBADMSG, "bad ReadChunk: %s", r->chunk.err);
	}
	pthread_mutex_lock(&r->mu);
	r->in_chunk = false;
	if (verdict == 1 && r->resume_early)
		verdict = 0;
	if (rc) {
		r->bad = true;
		r->recv_ended = true;
		grpc_call_cancel(r->call, NULL);
	} else if (verdict == 1) {
		r->paused = true;
		r->recv_idle = true;
	} else {
		cread_post_recv(r);
	}
	cread_maybe_done(r);
}

int
rpc_cread_open(struct rpc_client *c, const Zest__ReadRequest *req,
	       const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out)
{
	struct rpc_cread *r;
	grpc_op ops[4], st;

	if (!cbs || !cbs->chunk || !cbs->done)
		return -EINVAL;
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->cl = c;
	r->cbs = *cbs;
	r->arg = arg;
	r->t_start = (struct ctag){ cread_on_start, r };
	r->t_recv = (struct ctag){ cread_on_recv, r };
	r->t_status = (struct ctag){ cread_on_status, r };
	pthread_mutex_init(&r->mu, NULL);
	grpc_metadata_array_init(&r->md_initial);
	grpc_metadata_array_init(&r->md_trailing);
	r->details = grpc_empty_slice();
	r->req_bb = rpc_pack_message(&req->base);
	r->call = new_call(c, RPC_READ);
	r->refs = 1;

	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = r->req_bb;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &r->md_initial;
	memset(&st, 0, sizeof(st));
	st.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	st.data.recv_status_on_client.trailing_metadata = &r->md_trailing;
	st.data.recv_status_on_client.status = &r->status;
	st.data.recv_status_on_client.status_details = &r->details;
	pthread_mutex_lock(&r->mu);
	if (grpc_call_start_batch(r->call, ops, 4, &r->t_start, NULL) != GRPC_CALL_OK ||
	    grpc_call_start_batch(r->call, &st, 1, &r->t_status, NULL) != GRPC_CALL_OK) {
		cread_unref_locked(r);
		return -EIO;
	}
	r->refs += 2;
	cread_post_recv(r);
	pthread_mutex_unlock(&r->mu);
	*out = r;
	return 0;
}

void
rpc_cread_resume(struct rpc_cread *r)
{
	pthread_mutex_lock(&r->mu);
	r->paused = false;
	if (r->recv_idle) {
		r->recv_idle = false;
		cread_post_recv(r);
	} else if (r->in_chunk) {
		r->resume_early = true; /* the callback's pause has not taken effect yet */
	}
	pthread_mutex_unlock(&r->mu);
}

void
rpc_cread_cancel(struct rpc_cread *r)
{
	grpc_call_cancel(r->call, NULL);
	pthread_mutex_lock(&r->mu);
	if (r->recv_idle) {
		/* paused: no receive will come back to end the stream */
		r->recv_idle = false;
		r->recv_ended = true;
		r->refs++;
		cread_maybe_done(r);
		return;
	}
	pthread_mutex_unlock(&r->mu);
}

void
rpc_cread_destroy(struct rpc_cread *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	cread_unref_locked(r);
}

/* ------------------------------------------------------------------ unary */

struct ucall {
	struct ctag tag;
	grpc_call *call;
	enum rpc_method m;
	rpc_unary_cb cb;
	void *arg;
	ProtobufCMessage **steal; /* blocking wrapper: keep the response */
	grpc_byte_buffer *req, *resp;
	grpc_metadata_array md_initial, md_trailing;
	grpc_status_code status;
	grpc_slice details;
};

static void
ucall_done(void *obj, bool success)
{
	struct ucall *u = obj;
	ProtobufCMessage *resp = NULL;
	struct rpc_status st;

	(void)success;
	fill_status(&st, u->status, u->details);
	if (st.code == GRPC_STATUS_OK) {
		resp = rpc_unpack_message(rpc_method_response(u->m), u->resp);
		if (!resp)
			rpc_status_set(&st, -EIO, "missing or malformed %s response",
				       rpc_method_path(u->m));
	}
	if (u->steal && resp) {
		*u->steal = resp;
		resp = NULL;
	}
	u->cb(u->arg, &st, resp);
	if (resp)
		protobuf_c_message_free_unpacked(resp, NULL);
	grpc_byte_buffer_destroy(u->req);
	if (u->resp)
		grpc_byte_buffer_destroy(u->resp);
	grpc_metadata_array_destroy(&u->md_initial);
	grpc_metadata_array_destroy(&u->md_trailing);
	grpc_slice_unref(u->details);
	grpc_call_unref(u->call);
	free(u);
}

static int
unary_start(struct rpc_client *c, enum rpc_method m, const ProtobufCMessage *req,
	    rpc_unary_cb cb, void *arg, ProtobufCMessage **steal)
{
	struct ucall *u;
	grpc_op ops[6];

	if ((unsigned)m >= RPC_METHOD_COUNT || m == RPC_WRITE || m == RPC_READ || !cb ||
	    req->descriptor != rpc_method_request(m))
		return -EINVAL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->tag = (struct ctag){ ucall_done, u };
	u->m = m;
	u->cb = cb;
	u->arg = arg;
	u->steal = steal;
	u->req = rpc_pack_message(req);
	u->details = grpc_empty_slice();
	grpc_metadata_array_init(&u->md_initial);
	grpc_metadata_array_init(&u->md_trailing);
	u->call = new_call(c, m);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = u->req;
	ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
	ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
	ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->md_initial;
	ops[4].op = GRPC_OP_RECV_MESSAGE;
	ops[4].data.recv_message.recv_message = &u->resp;
	ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
	ops[5].data.recv_status_on_client.trailing_metadata = &u->md_trailing;
	ops[5].data.recv_status_on_client.status = &u->status;
	ops[5].data.recv_status_on_client.status_details = &u->details;
	if (grpc_call_start_batch(u->call, ops, 6, &u->tag, NULL) != GRPC_CALL_OK) {
		grpc_byte_buffer_destroy(u->req);
		grpc_metadata_array_destroy(&u->md_initial);
		grpc_metadata_array_destroy(&u->md_trailing);
		grpc_call_unref(u->call);
		free(u);
		return -EIO;
	}
	return 0;
}

int
rpc_client_call_async(struct rpc_client *c, enum rpc_method m, const ProtobufCMessage *req,
		      rpc_unary_cb cb, void *arg)
{
	return unary_start(c, m, req, cb, arg, NULL);
}

/* A one-shot wait for blocking wrappers. */
struct waiter {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done;
	struct rpc_status st;
};

static void
waiter_init(struct waiter *wt)
{
	memset(wt, 0, sizeof(*wt));
	pthread_mutex_init(&wt->mu, NULL);
	pthread_cond_init(&wt->cond, NULL);
}

static void
waiter_fini(struct waiter *wt)
{
	pthread_cond_destroy(&wt->cond);
	pthread_mutex_destroy(&wt->mu);
}

static void
waiter_wait(struct waiter *wt)
{
	pthread_mutex_lock(&wt->mu);
	while (!wt->done)
		pthread_cond_wait(&wt->cond, &wt->mu);
	pthread_mutex_unlock(&wt->mu);
}

static void
waiter_wake(struct waiter *wt)
{
	pthread_mutex_lock(&wt->mu);
	wt->done = true;
	pthread_cond_broadcast(&wt->cond);
	pthread_mutex_unlock(&wt->mu);
}

static void
call_cb(void *arg, const struct rpc_status *st, const ProtobufCMessage *resp)
{
	struct waiter *wt = arg;

	(void)resp; /* kept through steal */
	wt->st = *st;
	waiter_wake(wt);
}

int
rpc_client_call(struct rpc_client *c, enum rpc_method m, const ProtobufCMessage *req,
		ProtobufCMessage **resp, struct rpc_status *st)
{
	struct waiter wt;
	int rc;

	*resp = NULL;
	waiter_init(&wt);
	rc = unary_start(c, m, req, call_cb, &wt, resp);
	if (rc) {
		waiter_fini(&wt);
		if (st)
			rpc_status_set(st, rc, "cannot start %s", rpc_method_path(m));
		return rc;
	}
	waiter_wait(&wt);
	waiter_fini(&wt);
	if (st)
		*st = wt.st;
	if (wt.st.code != GRPC_STATUS_OK && *resp) {
		protobuf_c_message_free_unpacked(*resp, NULL);
		*resp = NULL;
	}
	return rpc_err_from_status(wt.st.code);
}

/* ------------------------------------------------------------------ blocking put */

struct put {
	struct waiter wt;
	bool writable;
	Zest__WriteResult *res;
	struct zc_ref ref; /* counts gRPC's hold on buf */
	bool released;
};

static void
put_writable(void *arg, struct rpc_cwrite *w)
{
	struct put *p = arg;

	(void)w;
	pthread_mutex_lock(&p->wt.mu);
	p->writable = true;
	pthread_cond_broadcast(&p->wt.cond);
	pthread_mutex_unlock(&p->wt.mu);
}

static void
put_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
	 const Zest__WriteResult *res)
{
	struct put *p = arg;

	(void)w;
	if (res && p->res) {
		p->res->size = res->size;
		p->res->crc32c = res->crc32c;
		p->res->mtime_ns = res->mtime_ns;
	}
	pthread_mutex_lock(&p->wt.mu);
	p->wt.st = *st;
	p->wt.done = true;
	pthread_cond_broadcast(&p->wt.cond);
	pthread_mutex_unlock(&p->wt.mu);
}

static void
put_release(struct zc_ref *ref)
{
	struct put *p = (struct put *)((char *)ref - offsetof(struct put, ref));

	pthread_mutex_lock(&p->wt.mu);
	p->released = true;
	pthread_cond_broadcast(&p->wt.cond);
	pthread_mutex_unlock(&p->wt.mu);
}

int
rpc_client_put(struct rpc_client *c, const Zest__WriteOpen *open, const void *buf, size_t len,
	       size_t chunk, Zest__WriteResult *res, struct rpc_status *st)
{
	const uint8_t *p8 = buf;
	struct rpc_cwrite_cbs cbs = { put_writable, put_done };
	struct rpc_cwrite *w;
	struct put p;
	size_t off = 0;
	int rc;

	if (!chunk || chunk > c->max_message)
		chunk = c->max_message < (1u << 20) ? c->max_message : (1u << 20);
	if (st)
		rpc_status_set(st, 0, NULL);
	memset(&p, 0, sizeof(p));
	waiter_init(&p.wt);
	p.res = res;
	zc_ref_init(&p.ref, put_release);
	rc = rpc_cwrite_open(c, open, &cbs, &p, &w);
	if (rc)
		goto out;
	for (;;) {
		size_t n = len - off < chunk ? len - off : chunk;
		struct zc_seg seg = { p8 + off, n, &p.ref };
		bool last = off + n == len;

		if (last) {
			rc = rpc_cwrite_commit(w, &seg, n ? 1 : 0, NULL, NULL, 0);
			break;
		}
		rc = rpc_cwrite_send(w, &seg, 1);
		if (rc == -EAGAIN) {
			pthread_mutex_lock(&p.wt.mu);
			while (!p.writable && !p.wt.done)
				pthread_cond_wait(&p.wt.cond, &p.wt.mu);
			p.writable = false;
			pthread_mutex_unlock(&p.wt.mu);
			continue;
		}
		if (rc)
			break;
		off += n;
	}
	if (rc)
		rpc_cwrite_cancel(w);
	waiter_wait(&p.wt);
	rpc_cwrite_destroy(w);
	/* the call's own status says more than a local -ECANCELED from a dead stream */
	if (rpc_err_from_status(p.wt.st.code))
		rc = rpc_err_from_status(p.wt.st.code);
	if (st)
		*st = p.wt.st;
out:
	/* buf is borrowed until return: wait until gRPC has let go of every slice */
	zc_ref_put(&p.ref);
	pthread_mutex_lock(&p.wt.mu);
	while (!p.released)
		pthread_cond_wait(&p.wt.cond, &p.wt.mu);
	pthread_mutex_unlock(&p.wt.mu);
	if (rc && st && st->code == GRPC_STATUS_OK)
		rpc_status_set(st, rc, "write not started");
	waiter_fini(&p.wt);
	return rc;
}
