/*
 * rpc client, unary calls (asynchronous and blocking) and rpc_client_put, the
 * blocking Write of one buffer.
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

/* ------------------------------------------------------------------ unary */

struct ucall {
	struct ctag tag;
	struct rpc_client *c;
	grpc_call *call;
	enum rpc_method m;
	rpc_unary_cb cb;
	void *arg;
	struct rpc_unary_resp *steal; /* blocking wrapper: keep the response */
	grpc_byte_buffer *req, *resp; /* req: the packed request, kept for retries */
	grpc_byte_buffer *sent;       /* this attempt's copy of req (gRPC empties it) */
	grpc_metadata_array md_initial, md_trailing;
	grpc_status_code status;
	grpc_slice details;
	/* the retry policy (rpc_client.h, unary_retry_ms) */
	gpr_timespec deadline; /* the call's, or (budget_only) the end of its retry budget */
	bool budget_only;      /* no caller deadline: deadline is the retry budget */
	bool ready;            /* this attempt's channel was connected when it was made */
	unsigned attempts;
	bool have_first;
	struct rpc_status first; /* the first failure, reported if the retries run out */
};

#define UNARY_MAX_ATTEMPTS 8

static int ucall_attempt(struct ucall *u, bool wait_for_ready);

static bool
read_only(enum rpc_method m)
{
	return m == RPC_STAT || m == RPC_LIST || m == RPC_HEAD_BUCKET || m == RPC_LIST_BUCKETS;
}

/* Whether the finished attempt with status st may be sent again (rpc_client.h). */
static bool
retry_ok(const struct ucall *u, const struct rpc_status *st)
{
	/* a zest error is the peer's answer; only "could not reach it" is retried */
	if (u->status != GRPC_STATUS_UNAVAILABLE || st->err != ZC_E(ZC_UNAVAILABLE))
		return false;
	for (size_t i = 0; i < u->md_trailing.count; i++)
		if (!grpc_slice_str_cmp(u->md_trailing.metadata[i].key, RPC_ERR_KEY))
			return false;
	if (u->attempts >= UNARY_MAX_ATTEMPTS)
		return false;
	if (gpr_time_cmp(gpr_now(GPR_CLOCK_MONOTONIC), u->deadline) >= 0)
		return false;
	return read_only(u->m) || (u->attempts == 1 && !u->ready);
}

/* Drop a finished attempt's call and received state (not req) for the next one. */
static void
ucall_reset(struct ucall *u)
{
	grpc_byte_buffer_destroy(u->sent);
	u->sent = NULL;
	if (u->resp)
		grpc_byte_buffer_destroy(u->resp);
	u->resp = NULL;
	grpc_metadata_array_destroy(&u->md_initial);
	grpc_metadata_array_destroy(&u->md_trailing);
	grpc_metadata_array_init(&u->md_initial);
	grpc_metadata_array_init(&u->md_trailing);
	grpc_slice_unref(u->details);
	u->details = grpc_empty_slice();
	grpc_call_unref(u->call);
	u->call = NULL;
}

static void
ucall_free(struct ucall *u)
{
	grpc_byte_buffer_destroy(u->req);
	if (u->sent)
		grpc_byte_buffer_destroy(u->sent);
	if (u->resp)
		grpc_byte_buffer_destroy(u->resp);
	grpc_metadata_array_destroy(&u->md_initial);
	grpc_metadata_array_destroy(&u->md_trailing);
	grpc_slice_unref(u->details);
	if (u->call)
		grpc_call_unref(u->call);
	free(u);
}

static void
ucall_done(void *obj, bool success)
{
	struct ucall *u = obj;
	struct rpc_unary_resp resp;
	struct rpc_status st;
	bool have = false;
	int rc;

	(void)success;
	memset(&resp, 0, sizeof(resp));
	rpc_status_from_wire(&st, u->status, u->details, &u->md_trailing);
	if (st.err && retry_ok(u, &st)) {
		if (!u->have_first) {
			u->first = st;
			u->have_first = true;
		}
		ucall_reset(u);
		/* wait for the channel to be ready this time: gRPC's reconnect backoff is the
		 * pause between attempts, and the deadline bounds it */
		if (!ucall_attempt(u, true))
			return;
		st = u->first;
	} else if (u->have_first && u->budget_only && u->status == GRPC_STATUS_DEADLINE_EXCEEDED) {
		st = u->first; /* the retry budget ran out, not a deadline of the caller's */
	}
	if (!st.err) {
		rc = rpc_msg_unpack_resp(u->m, u->resp, &resp);
		have = rc == 0;
		if (rc == -ENOMEM)
			rpc_status_set(&st, rc, "no memory for the %s response",
			               rpc_method_path(u->m));
		else if (rc)
			rpc_status_set(&st, -EIO, "missing or malformed %s response",
			               rpc_method_path(u->m));
	}
	if (u->steal && have) {
		/* before the callback: it wakes the blocking caller, who owns it now */
		*u->steal = resp;
		u->cb(u->arg, &st, u->steal);
	} else {
		u->cb(u->arg, &st, have ? &resp : NULL);
		rpc_unary_resp_fini(&resp);
	}
	ucall_free(u);
}

/* Start one attempt of u. 0, or -EIO (u->call is then NULL). */
static int
ucall_attempt(struct ucall *u, bool wait_for_ready)
{
	grpc_op ops[6];

	/* without a caller's deadline the first attempt has none either (as a unary call
	 * always had): the budget bounds only the retries */
	gpr_timespec dl =
	        u->budget_only && !u->attempts ? gpr_inf_future(GPR_CLOCK_MONOTONIC) : u->deadline;

	/* a send takes the message's slices out of its byte buffer: each attempt gets a copy
	 * (it refs the slices, nothing is copied) */
	u->sent = grpc_byte_buffer_copy(u->req);
	u->attempts++;
	u->call = rpc_client_new_unary(u->c, u->m, dl, &u->ready);
	memset(ops, 0, sizeof(ops));
	ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
	if (wait_for_ready)
		ops[0].flags = GRPC_INITIAL_METADATA_WAIT_FOR_READY |
		               GRPC_INITIAL_METADATA_WAIT_FOR_READY_EXPLICITLY_SET;
	ops[1].op = GRPC_OP_SEND_MESSAGE;
	ops[1].data.send_message.send_message = u->sent;
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
		grpc_call_unref(u->call);
		u->call = NULL;
		return -EIO;
	}
	return 0;
}

static int
unary_start(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
            rpc_unary_cb cb, void *arg, struct rpc_unary_resp *steal)
{
	unsigned ms;
	struct ucall *u;

	if ((unsigned)m >= RPC_METHOD_COUNT || rpc_method_is_stream(m) || !cb ||
	    (!req && m != RPC_LIST_BUCKETS))
		return -EINVAL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->req = rpc_msg_pack_req(m, req);
	if (!u->req) {
		free(u);
		return -ENOMEM;
	}
	u->tag = (struct ctag){ ucall_done, u };
	u->c = c;
	u->m = m;
	u->cb = cb;
	u->arg = arg;
	u->steal = steal;
	u->details = grpc_empty_slice();
	grpc_metadata_array_init(&u->md_initial);
	grpc_metadata_array_init(&u->md_trailing);
	u->budget_only = !c->unary_deadline_ms;
	ms = c->unary_deadline_ms ? c->unary_deadline_ms : c->unary_retry_ms;
	u->deadline =
	        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
	if (ucall_attempt(u, false)) {
		ucall_free(u);
		return -EIO;
	}
	return 0;
}

int
rpc_client_call_async(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
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
call_cb(void *arg, const struct rpc_status *st, const struct rpc_unary_resp *resp)
{
	struct waiter *wt = arg;

	(void)resp; /* kept through steal */
	wt->st = *st;
	waiter_wake(wt);
}

int
rpc_client_call(struct rpc_client *c, enum rpc_method m, const union rpc_unary_req *req,
                struct rpc_unary_resp *resp, struct rpc_status *st)
{
	struct waiter wt;
	int rc;

	memset(resp, 0, sizeof(*resp));
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
	if (wt.st.err)
		rpc_unary_resp_fini(resp);
	return wt.st.err;
}

/* ------------------------------------------------------------------ blocking put */

struct put {
	struct waiter wt;
	bool writable;
	struct rpc_write_result *res;
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
         const struct rpc_write_result *res)
{
	struct put *p = arg;

	(void)w;
	if (res && p->res) {
		p->res->size = res->size;
		p->res->crc32c = res->crc32c;
		p->res->mtime_ns = res->mtime_ns;
		p->res->etag = NULL; /* the result's memory ends with the callback */
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
rpc_client_put(struct rpc_client *c, const struct rpc_write_open *open, const void *buf, size_t len,
               size_t chunk, struct rpc_write_result *res, struct rpc_status *st)
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
			rc = rpc_cwrite_commit(w, &seg, n ? 1 : 0, NULL);
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
	if (p.wt.st.err)
		rc = p.wt.st.err;
	if (st)
		*st = p.wt.st;
out:
	/* buf is borrowed until return: wait until gRPC has let go of every slice */
	zc_ref_put(&p.ref);
	pthread_mutex_lock(&p.wt.mu);
	while (!p.released)
		pthread_cond_wait(&p.wt.cond, &p.wt.mu);
	pthread_mutex_unlock(&p.wt.mu);
	if (rc && st && !st->err)
		rpc_status_set(st, rc, "write not started");
	waiter_fini(&p.wt);
	return rc;
}
