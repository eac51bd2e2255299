/*
 * rpc client, Read streams: ReadChunks handed back as zero-copy segments, one
 * message received at a time so a paused reader pushes back on the datanode.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "rpc_client_internal.h"
#include "zc_crc.h"
#include "zc.h"

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
	struct rpc_cli_timed timed; /* armed while a receive is posted */
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
	rpc_cli_watch_unlink(r->cl, &r->timed); /* before the call goes */
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
	if (grpc_call_start_batch(r->call, &op, 1, &r->t_recv, NULL) == GRPC_CALL_OK) {
		r->refs++;
		/* opened, a chunk handled or resumed: the peer's turn */
		rpc_cli_timed_arm(&r->timed);
	} else {
		r->recv_ended = true;
	}
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
			rpc_status_from_wire(&st, r->status, r->details, &r->md_trailing);
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
	rpc_cli_timed_idle(&r->timed); /* a message or the end came; the caller's turn */
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

	rc = rpc_marshal_recv(RPC_MARSHAL_ZEROCOPY, &zest__read_chunk__descriptor, 3, bb, &r->chunk,
	                      &hold);
	if (!rc) {
		Zest__ReadChunk *rch = (Zest__ReadChunk *)r->chunk.msg;
		struct rpc_object_info info;
		struct rpc_arena a = { 0 };
		uint32_t crc = 0;

		for (size_t i = 0; i < r->chunk.n_segs; i++)
			crc = zc_crc32c(crc, r->chunk.segs[i].ptr, r->chunk.segs[i].len);
		if (r->chunk.data_len && crc != rch->crc32c) {
			rpc_status_set(&r->bad_st, -EBADMSG,
			               "ReadChunk CRC32C mismatch at offset %llu",
			               (unsigned long long)rch->offset);
			rc = -EBADMSG;
		} else if (rch->info && rpc_msg_info_from_pb(rch->info, &info, &a)) {
			rpc_status_set(&r->bad_st, -ENOMEM, "no memory for the ReadChunk's info");
			rc = -ENOMEM;
		} else {
			pthread_mutex_lock(&r->mu);
			r->in_chunk = true;
			r->resume_early = false;
			pthread_mutex_unlock(&r->mu);
			verdict = r->cbs.chunk(r->arg, r, rch->info ? &info : NULL, rch->offset,
			                       r->chunk.segs, r->chunk.n_segs, r->chunk.data_len);
		}
		rpc_arena_free(&a);
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

/* Start a stream of method m (Read or ReadCell) with its packed request. */
static int
cread_start(struct rpc_client *c, enum rpc_method m, grpc_byte_buffer *req_bb,
            const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out)
{
	struct rpc_cread *r;
	grpc_op ops[4], st;

	r = calloc(1, sizeof(*r));
	if (!r) {
		grpc_byte_buffer_destroy(req_bb);
		return -ENOMEM;
	}
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
	r->req_bb = req_bb;
	r->call = rpc_client_new_call(c, m);
	r->timed.call = r->call;
	if (c->progress_timeout_ms)
		rpc_cli_watch_set(c, &r->timed, c->progress_timeout_ms); /* -EAGAIN: unwatched */
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

int
rpc_cread_open(struct rpc_client *c, const struct rpc_read_req *req,
               const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out)
{
	Zest__ReadRequest pb;

	if (!cbs || !cbs->chunk || !cbs->done || !req)
		return -EINVAL;
	rpc_msg_read_req_to_pb(req, &pb);
	return cread_start(c, RPC_READ, rpc_pack_message(&pb.base), cbs, arg, out);
}

int
rpc_cread_open_cell(struct rpc_client *c, const struct rpc_cell_read_req *req,
                    const struct rpc_cread_cbs *cbs, void *arg, struct rpc_cread **out)
{
	Zest__CellReadRequest pb;
	Zest__CellId id;

	if (!cbs || !cbs->chunk || !cbs->done || !req)
		return -EINVAL;
	rpc_msg_cell_read_req_to_pb(req, &pb, &id);
	return cread_start(c, RPC_READ_CELL, rpc_pack_message(&pb.base), cbs, arg, out);
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

int
rpc_cread_progress_timeout(struct rpc_cread *r, unsigned timeout_ms)
{
	return rpc_cli_watch_set(r->cl, &r->timed, timeout_ms);
}

void
rpc_cread_destroy(struct rpc_cread *r)
{
	if (!r)
		return;
	pthread_mutex_lock(&r->mu);
	cread_unref_locked(r);
}
