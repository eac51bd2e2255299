/*
 * rpc_client against the in-test sink server: backpressure (-EAGAIN, then `writable`),
 * size refusal, the caller's memory referenced until gRPC lets go (never copied), many
 * streams on one client thread, async unary calls, and waiting for the channels to connect.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <grpc/grpc.h>

#include "rpc_test_sink.h"
#include "rpc_stats.h"
#include "zc.h"

struct env {
	struct sink sink;
	struct rpc_server *srv;
	struct rpc_client *cl;
	char target[64];
};

static void
env_up_ch(struct env *e, size_t max_inflight, size_t max_message, unsigned channels)
{
	struct rpc_server_opts so = { .listen = "127.0.0.1:0", .tls.insecure = true };
	struct rpc_client_opts co = { .max_inflight = max_inflight,
		                      .max_message = max_message,
		                      .channels = channels,
		                      .tls.insecure = true };
	struct rpc_server_handlers h;

	sink_init(&e->sink, true, false);
	sink_handlers(&e->sink, &h);
	assert_int_equal(rpc_server_create(&so, &h, &e->srv), 0);
	snprintf(e->target, sizeof(e->target), "127.0.0.1:%d", rpc_server_port(e->srv));
	co.target = e->target;
	assert_int_equal(rpc_client_create(&co, &e->cl), 0);
}

static void
env_up(struct env *e, size_t max_inflight, size_t max_message)
{
	env_up_ch(e, max_inflight, max_message, 1);
}

static void
env_down(struct env *e)
{
	rpc_client_destroy(e->cl);
	rpc_server_destroy(e->srv, 1000);
	sink_fini(&e->sink);
	assert_int_equal(rpc_live_buffers(), 0);
	assert_int_equal(zc_ref_live(), 0);
	assert_int_equal(atomic_load(&e->sink.bad_bytes), 0);
}

/* The caller's buffer: released (through zc_ref) only when gRPC has let go. */
struct owner {
	struct zc_ref ref;
	atomic_int released;
	uint8_t *buf;
};

static void
owner_release(struct zc_ref *ref)
{
	atomic_store(&((struct owner *)ref)->released, 1);
}

struct stream {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	struct owner *own;
	struct rpc_cwrite *w;
	size_t len, chunk, off;
	int eagain, writable;
	bool done, committed;
	struct rpc_status st;
	uint64_t size;
	uint32_t crc;
	char etag[64];
};

/* Send as much as the cap allows; commit at the end. Called under s->mu. */
static void
stream_pump(struct stream *s)
{
	while (!s->committed) {
		size_t n = s->len - s->off < s->chunk ? s->len - s->off : s->chunk;
		struct zc_seg seg = { s->own->buf + s->off, n, &s->own->ref };
		int rc;

		if (s->off + n == s->len) {
			assert_int_equal(
			        rpc_cwrite_commit(s->w, &seg, 1,
			                          &(struct rpc_commit){ .etag = "\"etag\"" }),
			        0);
			s->committed = true;
			break;
		}
		rc = rpc_cwrite_send(s->w, &seg, 1);
		if (rc == -EAGAIN) {
			s->eagain++;
			assert_true(rpc_cwrite_inflight(s->w) > 0);
			break;
		}
		assert_int_equal(rc, 0);
		s->off += n;
	}
}

static void
on_writable(void *arg, struct rpc_cwrite *w)
{
	struct stream *s = arg;

	(void)w;
	pthread_mutex_lock(&s->mu);
	s->writable++;
	stream_pump(s);
	pthread_mutex_unlock(&s->mu);
}

static void
on_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
        const struct rpc_write_result *res)
{
	struct stream *s = arg;

	(void)w;
	pthread_mutex_lock(&s->mu);
	s->st = *st;
	if (res) {
		s->size = res->size;
		s->crc = res->crc32c;
		snprintf(s->etag, sizeof(s->etag), "%s", res->etag);
	}
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

static void
stream_start(struct env *e, struct stream *s, const char *key, struct owner *own, size_t len,
             size_t chunk)
{
	struct rpc_write_open open = { 0 };
	struct rpc_cwrite_cbs cbs = { on_writable, on_done };

	memset(s, 0, sizeof(*s));
	pthread_mutex_init(&s->mu, NULL);
	pthread_cond_init(&s->cond, NULL);
	s->own = own;
	s->len = len;
	s->chunk = chunk;
	open.bucket = "b";
	open.key = key;
	pthread_mutex_lock(&s->mu);
	assert_int_equal(rpc_cwrite_open(e->cl, &open, &cbs, s, &s->w), 0);
	stream_pump(s);
	pthread_mutex_unlock(&s->mu);
}

static void
stream_wait(struct stream *s)
{
	pthread_mutex_lock(&s->mu);
	while (!s->done)
		pthread_cond_wait(&s->cond, &s->mu);
	pthread_mutex_unlock(&s->mu);
	rpc_cwrite_destroy(s->w);
}

static struct owner *
owner_new(const char *key, size_t len)
{
	struct owner *o = calloc(1, sizeof(*o));

	assert_non_null(o);
	o->buf = malloc(len);
	assert_non_null(o->buf);
	sink_fill(sink_seed(key), 0, o->buf, len);
	zc_ref_init(&o->ref, owner_release);
	return o;
}

static void
owner_drop(struct owner *o)
{
	zc_ref_put(&o->ref);
	for (int i = 0; i < 2000 && !atomic_load(&o->released); i++)
		usleep(1000);
	assert_int_equal(atomic_load(&o->released), 1);
	free(o->buf);
	free(o);
}

static void
test_backpressure_and_writable(void **state)
{
	const size_t len = 24u << 20;
	struct owner *own = owner_new("bp", len);
	struct stream s;
	struct env e;

	(void)state;
	env_up(&e, 1u << 20, 0);
	e.sink.delay_us = 2000; /* a slow drive: the server pauses, the client backs up */
	e.sink.pause_always = true;
	stream_start(&e, &s, "bp", own, len, 256u << 10);
	stream_wait(&s);
	assert_int_equal(rpc_status_from_err(s.st.err), GRPC_STATUS_OK);
	assert_int_equal(s.size, len);
	assert_int_equal(s.crc, zc_crc32c(0, own->buf, len));
	assert_string_equal(s.etag, "\"etag\"");
	assert_true(s.eagain > 0);
	assert_true(s.writable > 0);
	owner_drop(own);
	env_down(&e);
}

static void
test_many_streams_one_thread(void **state)
{
	const size_t len = 3u << 20;
	struct owner *own[16];
	struct stream s[16];
	struct env e;
	char key[16];

	(void)state;
	env_up_ch(&e, 512u << 10, 0, 3); /* 3 connections, calls round-robin */
	for (int i = 0; i < 16; i++) {
		snprintf(key, sizeof(key), "many-%d", i);
		own[i] = owner_new(key, len);
		stream_start(&e, &s[i], key, own[i], len, 128u << 10);
	}
	for (int i = 0; i < 16; i++) {
		stream_wait(&s[i]);
		assert_int_equal(rpc_status_from_err(s[i].st.err), GRPC_STATUS_OK);
		assert_int_equal(s[i].crc, zc_crc32c(0, own[i]->buf, len));
		owner_drop(own[i]);
	}
	assert_int_equal(atomic_load(&e.sink.committed), 16);
	env_down(&e);
}

static void
test_send_refusals(void **state)
{
	struct rpc_write_open open = { 0 };
	struct rpc_cwrite_cbs cbs = { NULL, on_done };
	struct owner *own = owner_new("refuse", 2u << 20);
	struct zc_seg big = { own->buf, 2u << 20, &own->ref };
	struct zc_seg small = { own->buf, 100, &own->ref };
	struct stream s;
	struct env e;

	(void)state;
	env_up(&e, 0, 1u << 20);
	memset(&s, 0, sizeof(s));
	pthread_mutex_init(&s.mu, NULL);
	pthread_cond_init(&s.cond, NULL);
	open.bucket = "b";
	open.key = "refuse";
	assert_int_equal(rpc_cwrite_open(e.cl, &open, &cbs, &s, &s.w), 0);
	assert_int_equal(rpc_cwrite_send(s.w, &big, 1), -EINVAL); /* over max_message */
	assert_int_equal(rpc_cwrite_commit(s.w, &small, 1, NULL), 0);
	assert_int_equal(rpc_cwrite_send(s.w, &small, 1), -ECANCELED); /* after commit */
	assert_int_equal(rpc_cwrite_commit(s.w, &small, 1, NULL), -ECANCELED);
	stream_wait(&s);
	assert_int_equal(rpc_status_from_err(s.st.err), GRPC_STATUS_OK);
	assert_int_equal(s.size, 100);
	owner_drop(own);
	env_down(&e);
}

struct unary_wait {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	int calls;
	grpc_status_code codes[2];
	char key[32];
};

static void
unary_cb(void *arg, const struct rpc_status *st, const struct rpc_unary_resp *resp)
{
	struct unary_wait *u = arg;

	pthread_mutex_lock(&u->mu);
	if (resp) {
		assert_int_equal(resp->method, RPC_STAT);
		snprintf(u->key, sizeof(u->key), "%s", resp->info.key);
	}
	u->codes[u->calls < 2 ? u->calls : 1] = rpc_status_from_err(st->err);
	u->calls++;
	pthread_cond_signal(&u->cond);
	pthread_mutex_unlock(&u->mu);
}

static void
test_unary_async(void **state)
{
	union rpc_unary_req q = { .object = { .bucket = "b", .key = "async-key" } };
	struct unary_wait u;
	struct env e;

	(void)state;
	memset(&u, 0, sizeof(u));
	pthread_mutex_init(&u.mu, NULL);
	pthread_cond_init(&u.cond, NULL);
	env_up(&e, 0, 0);
	assert_int_equal(rpc_client_call_async(e.cl, RPC_STAT, &q, unary_cb, &u), 0);
	pthread_mutex_lock(&u.mu);
	while (u.calls < 1)
		pthread_cond_wait(&u.cond, &u.mu);
	pthread_mutex_unlock(&u.mu);
	q.object.key = "missing";
	assert_int_equal(rpc_client_call_async(e.cl, RPC_STAT, &q, unary_cb, &u), 0);
	pthread_mutex_lock(&u.mu);
	while (u.calls < 2)
		pthread_cond_wait(&u.cond, &u.mu);
	pthread_mutex_unlock(&u.mu);
	assert_int_equal(u.codes[0], GRPC_STATUS_OK);
	assert_string_equal(u.key, "async-key");
	assert_int_equal(u.codes[1], GRPC_STATUS_NOT_FOUND);
	assert_int_equal(rpc_client_call_async(e.cl, RPC_WRITE, &q, unary_cb, &u), -EINVAL);
	assert_int_equal(rpc_client_call_async(e.cl, RPC_STAT, NULL, unary_cb, &u), -EINVAL);
	env_down(&e);
}

static void
test_no_server(void **state)
{
	struct rpc_client_opts co = { .target = "127.0.0.1:1", .tls.insecure = true };
	struct rpc_write_open open = { .bucket = "b", .key = "k" };
	union rpc_unary_req q = { .bucket = { .bucket = "b" } };
	static uint8_t buf[3u << 20];
	struct rpc_unary_resp resp;
	struct rpc_client *cl;
	struct rpc_status st;

	(void)state;
	assert_int_equal(rpc_client_create(&co, &cl), 0);
	assert_int_equal(rpc_client_put(cl, &open, buf, sizeof(buf), 1u << 20, NULL, &st),
	                 ZC_E(ZC_UNAVAILABLE));
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
	assert_int_equal(rpc_client_call(cl, RPC_HEAD_BUCKET, &q, &resp, &st),
	                 ZC_E(ZC_UNAVAILABLE));
	assert_null(resp.mem);
	rpc_unary_resp_fini(&resp);
	rpc_client_destroy(cl);
	assert_int_equal(zc_ref_live(), 0);
}

/* The unary retry policy (rpc_client.h): a datanode that comes up after the client's
 * channel was refused is reached by the same call, which waits for the channel inside
 * gRPC; without one a call reports the first failure, not the budget's deadline. */
static void
test_unary_retry(void **state)
{
	union rpc_unary_req q = { .object = { .bucket = "b", .key = "late-key" } };
	struct rpc_server_opts so = { .listen = "127.0.0.1:0", .tls.insecure = true };
	struct rpc_client_opts co = { .tls.insecure = true, .unary_retry_ms = 60000 };
	struct rpc_server_handlers h;
	struct rpc_unary_resp resp;
	struct rpc_server *srv;
	struct rpc_client *cl;
	struct rpc_status st;
	struct sink sink;
	char target[64];

	(void)state;
	sink_init(&sink, true, false);
	sink_handlers(&sink, &h);
	/* a port that was just served and is closed now */
	assert_int_equal(rpc_server_create(&so, &h, &srv), 0);
	snprintf(target, sizeof(target), "127.0.0.1:%d", rpc_server_port(srv));
	rpc_server_destroy(srv, 1000);
	co.target = target;
	assert_int_equal(rpc_client_create(&co, &cl), 0);
	/* refused: the channel now waits in its reconnect backoff, where a call fails at once */
	assert_int_equal(rpc_client_connect(cl, 5000), ZC_E(ZC_UNAVAILABLE));
	so.listen = target;
	assert_int_equal(rpc_server_create(&so, &h, &srv), 0);
	assert_int_equal(rpc_client_call(cl, RPC_STAT, &q, &resp, &st), 0);
	assert_int_equal(st.err, 0);
	assert_string_equal(resp.info.key, "late-key");
	rpc_unary_resp_fini(&resp);
	rpc_client_destroy(cl);
	rpc_server_destroy(srv, 1000);
	sink_fini(&sink);

	/* nobody serves: the budget runs out and the call reports why it was retried */
	co.unary_retry_ms = 300;
	assert_int_equal(rpc_client_create(&co, &cl), 0);
	assert_int_equal(rpc_client_call(cl, RPC_STAT, &q, &resp, &st), ZC_E(ZC_UNAVAILABLE));
	assert_null(resp.mem);
	rpc_unary_resp_fini(&resp);
	rpc_client_destroy(cl);
	assert_int_equal(zc_ref_live(), 0);
}

/* rpc_client_connect: two channels up at once; a closed port refused within the wait, and
 * at once afterwards (the channel waits in its reconnect backoff). */
static void
test_connect(void **state)
{
	struct rpc_client_opts co = { .target = "127.0.0.1:1", .tls.insecure = true };
	struct rpc_client *cl;
	struct env e;

	(void)state;
	env_up_ch(&e, 0, 0, 2);
	assert_int_equal(rpc_client_connect(e.cl, 5000), 0);
	assert_int_equal(rpc_client_connect(e.cl, 0), 0); /* connected: no wait */
	env_down(&e);
	assert_int_equal(rpc_client_create(&co, &cl), 0);
	/* refused, not timed out: a deadline far past this test's own timeout, so only the
	 * refusal can end these calls */
	assert_int_equal(rpc_client_connect(cl, 3600000), ZC_E(ZC_UNAVAILABLE));
	assert_int_equal(rpc_client_connect(cl, 3600000), ZC_E(ZC_UNAVAILABLE));
	rpc_client_destroy(cl);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_backpressure_and_writable),
		cmocka_unit_test(test_many_streams_one_thread),
		cmocka_unit_test(test_send_refusals),
		cmocka_unit_test(test_unary_async),
		cmocka_unit_test(test_no_server),
		cmocka_unit_test(test_unary_retry),
		cmocka_unit_test(test_connect),
	};

	grpc_init();
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	grpc_shutdown();
	return rc;
}
