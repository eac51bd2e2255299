/*
 * rpc client, Write and WriteCell streams: the caller's segments go on the wire without a
 * copy, queued under an in-flight bound, then the commit chunk and the WriteResult
 * (CellResult). A WriteCell stream differs only in its open, its chunk message (same
 * fields 1-5) and its result.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "rpc_client_internal.h"
#include "zc_crc.h"
#include "zc.h"

/* ------------------------------------------------------------------ Write */

struct qmsg {
	struct qmsg *next;
	grpc_byte_buffer *bb;
	size_t len;
	bool last;
};

struct rpc_cwrite {
	struct rpc_client *cl;
	enum rpc_method m; /* RPC_WRITE or RPC_WRITE_CELL */
	grpc_call *call;
	pthread_mutex_t mu;
	int refs;
	struct rpc_cwrite_cbs cbs;
	void *arg;
	struct ctag t_send, t_recv;
	ProtobufCMessage *open; /* WriteOpen or CellOpen, until the first message is built */
	struct qmsg *head, *tail, *sending;
	size_t inflight;
	uint64_t offset;
	bool want_writable, committed, done, failed;
	grpc_metadata_array md_initial, md_trailing;
	grpc_byte_buffer *resp;
	grpc_status_code status;
	grpc_slice details;
	struct rpc_cli_timed timed; /* armed while a send is out or the reply is owed */
#ifdef ZC_FAULTS
	unsigned n_msgs; /* messages queued so far: "peer.send"'s hit */
#endif
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
		protobuf_c_message_free_unpacked(w->open, NULL);
	grpc_metadata_array_destroy(&w->md_initial);
	grpc_metadata_array_destroy(&w->md_trailing);
	if (w->resp)
		grpc_byte_buffer_destroy(w->resp);
	grpc_slice_unref(w->details);
	rpc_cli_watch_unlink(w->cl, &w->timed); /* before the call goes */
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
	rpc_cli_timed_arm(&w->timed); /* the peer owes us taking this message */
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
	/* the transport took a message: progress. Now the next one is out (armed by the
	 * kick), or the reply is owed, or the caller has the turn */
	if (!w->sending && w->committed && !w->done && !w->failed)
		rpc_cli_timed_arm(&w->timed);
	else if (!w->sending)
		rpc_cli_timed_idle(&w->timed);
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
	const ProtobufCMessageDescriptor *desc = rpc_method_response(w->m);
	ProtobufCMessage *res = NULL;
	struct rpc_status st;

	(void)success; /* RECV_STATUS_ON_CLIENT always succeeds */
	rpc_status_from_wire(&st, w->status, w->details, &w->md_trailing);
	if (!st.err) {
		res = rpc_unpack_message(desc, w->resp);
		if (!res)
			rpc_status_set(&st, -EIO, "missing or malformed %s", desc->short_name);
	}
	pthread_mutex_lock(&w->mu);
	w->done = true;
	rpc_cli_timed_idle(&w->timed);
	pthread_mutex_unlock(&w->mu);
	if (w->m == RPC_WRITE_CELL) {
		const Zest__CellResult *cr = (const Zest__CellResult *)res;
		struct rpc_write_result r = { .size = cr ? cr->length : 0,
			                      .crc32c = cr ? cr->crc32c : 0 };

		w->cbs.done(w->arg, w, &st, res ? &r : NULL);
	} else {
		struct rpc_write_result r;

		if (res)
			rpc_msg_result_from_pb((const Zest__WriteResult *)res, &r);
		w->cbs.done(w->arg, w, &st, res ? &r : NULL);
	}
	if (res)
		protobuf_c_message_free_unpacked(res, NULL);
	pthread_mutex_lock(&w->mu);
	cwrite_unref_locked(w);
}

/* A copy of msg owned by the stream (freed with protobuf_c_message_free_unpacked). */
static ProtobufCMessage *
msg_dup(const ProtobufCMessage *msg)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *tmp = malloc(len ? len : 1);
	ProtobufCMessage *copy;

	if (!tmp)
		return NULL;
	protobuf_c_message_pack(msg, tmp);
	copy = protobuf_c_message_unpack(msg->descriptor, NULL, len, tmp);
	free(tmp);
	return copy;
}

/* Start a stream of method m whose first message will carry open_pb. */
static int
cwrite_start(struct rpc_client *c, enum rpc_method m, const ProtobufCMessage *open_pb,
             const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out)
{
	struct rpc_cwrite *w;
	grpc_op ops[4];

	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	/* Own a copy of open until the first message carries it. */
	w->open = msg_dup(open_pb);
	if (!w->open) {
		free(w);
		return -ENOMEM;
	}
	w->m = m;
	w->cl = c;
	w->cbs = *cbs;
	w->arg = arg;
	w->t_send = (struct ctag){ cwrite_on_send, w };
	w->t_recv = (struct ctag){ cwrite_on_recv, w };
	pthread_mutex_init(&w->mu, NULL);
	grpc_metadata_array_init(&w->md_initial);
	grpc_metadata_array_init(&w->md_trailing);
	w->details = grpc_empty_slice();
	w->call = rpc_client_new_call(c, m);
	w->timed.call = w->call;
	if (c->progress_timeout_ms)
		rpc_cli_watch_set(c, &w->timed, c->progress_timeout_ms); /* -EAGAIN: unwatched */
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

int
rpc_cwrite_open(struct rpc_client *c, const struct rpc_write_open *open,
                const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out)
{
	Zest__WriteOpen pb;

	if (!cbs || !cbs->done || !open)
		return -EINVAL;
	rpc_msg_open_to_pb(open, &pb);
	return cwrite_start(c, RPC_WRITE, &pb.base, cbs, arg, out);
}

int
rpc_cwrite_open_cell(struct rpc_client *c, const struct rpc_cell_open *open,
                     const struct rpc_cwrite_cbs *cbs, void *arg, struct rpc_cwrite **out)
{
	Zest__CellOpen pb;
	Zest__CellId id;

	if (!cbs || !cbs->done || !open)
		return -EINVAL;
	rpc_msg_cell_open_to_pb(open, &pb, &id);
	return cwrite_start(c, RPC_WRITE_CELL, &pb.base, cbs, arg, out);
}

/* Under w->mu: build and queue one WriteChunk (CellChunk). */
static int
cwrite_queue(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs, size_t len,
             bool commit, const struct rpc_commit *last, const uint32_t *given_crc)
{
	Zest__WriteChunk wc = ZEST__WRITE_CHUNK__INIT;
	Zest__CellChunk cc = ZEST__CELL_CHUNK__INIT;
	Zest__WriteCondition cond;
	struct rpc_arena a = { 0 };
	struct qmsg *q = calloc(1, sizeof(*q));
	uint32_t crc = 0;

	if (!q)
		return -ENOMEM;
	if (rpc_msg_commit_to_pb(last, &wc, &cond, &a)) {
		rpc_arena_free(&a);
		free(q);
		return -ENOMEM;
	}
	if (given_crc)
		crc = *given_crc;
	else
		for (size_t i = 0; i < n_segs; i++)
			crc = zc_crc32c(crc, segs[i].ptr, segs[i].len);
	if (w->m == RPC_WRITE_CELL) {
		cc.open = (Zest__CellOpen *)w->open;
		cc.offset = w->offset;
		cc.crc32c = crc;
		cc.commit = commit;
		q->bb = rpc_marshal_send(&cc.base, 3, segs, n_segs, len);
	} else {
		wc.open = (Zest__WriteOpen *)w->open;
		wc.offset = w->offset;
		wc.crc32c = crc;
		wc.commit = commit;
		q->bb = rpc_marshal_send(&wc.base, 3, segs, n_segs, len);
	}
	rpc_arena_free(&a); /* the commit fields were packed */
	if (!q->bb) {
		free(q);
		return -ENOMEM;
	}
	if (w->open) {
		protobuf_c_message_free_unpacked(w->open, NULL);
		w->open = NULL;
	}
	if (w->m == RPC_WRITE_CELL) {
		/* test builds: a delay sleeps here under w->mu (a slow link: holding the lock is
		 * the point); drop and reset lose the message */
		int fault = ZC_FAULT(ZC_FP_PEER_SEND, w->cl->fault_inst, ++w->n_msgs);

		if (fault == ZC_FAULT_DROP || fault == ZC_FAULT_RESET) {
			qmsg_free(q);
			w->offset += len; /* a dropped message leaves its gap */
			if (fault == ZC_FAULT_RESET) {
				w->failed =
				        true; /* later sends: -ECANCELED; `done` says CANCELLED */
				grpc_call_cancel(w->call, NULL);
			}
			return 0;
		}
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

static int
cwrite_send(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs, const uint32_t *crc)
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
		rc = cwrite_queue(w, segs, n_segs, len, false, NULL, crc);
	}
	pthread_mutex_unlock(&w->mu);
	return rc;
}

int
rpc_cwrite_send(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs)
{
	return cwrite_send(w, segs, n_segs, NULL);
}

int
rpc_cwrite_send_crc(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs, uint32_t crc32c)
{
	return cwrite_send(w, segs, n_segs, &crc32c);
}

int
rpc_cwrite_commit(struct rpc_cwrite *w, const struct zc_seg *segs, size_t n_segs,
                  const struct rpc_commit *commit)
{
	size_t len = 0;
	int rc;

	for (size_t i = 0; i < n_segs; i++)
		len += segs[i].len;
	pthread_mutex_lock(&w->mu);
	if (w->committed || w->done || w->failed)
		rc = -ECANCELED;
	else if (commit && w->m == RPC_WRITE_CELL)
		rc = -EINVAL; /* a CellChunk's commit carries no fields */
	else if (len > w->cl->max_message)
		rc = -EINVAL;
	else
		rc = cwrite_queue(w, segs, n_segs, len, true, commit, NULL);
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

int
rpc_cwrite_progress_timeout(struct rpc_cwrite *w, unsigned timeout_ms)
{
	return rpc_cli_watch_set(w->cl, &w->timed, timeout_ms);
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
