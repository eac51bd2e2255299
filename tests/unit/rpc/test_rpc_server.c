/*
 * rpc_server + rpc_client over real gRPC on 127.0.0.1:0, with the in-test sink handler
 * (tests/unit/rpc/rpc_test_sink.h): puts through both marshallers with byte and CRC
 * checks, the bad-input table sent as raw messages, Read and unary calls, 1 GiB per
 * marshaller (128 MiB under sanitizers), and no refs or buffers left at shutdown.
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
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include "rpc_internal.h"
#include "rpc_stats.h"
#include "rpc_test_sink.h"
#include "rpc_raw.h"
#include "zc.h"

#if defined(__SANITIZE_ADDRESS__)
#define BIG_TOTAL (128ull << 20)
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define BIG_TOTAL (128ull << 20)
#endif
#endif
#ifndef BIG_TOTAL
#define BIG_TOTAL (1ull << 30)
#endif

struct env {
	struct sink sink;
	struct rpc_server *srv;
	struct rpc_client *cl;
	char target[64];
};

static void
env_up(struct env *e, enum rpc_marshaller m, bool verify, size_t max_message)
{
	struct rpc_server_opts so = { .listen = "127.0.0.1:0",
		                      .cq_threads = 2,
		                      .marshaller = m,
		                      .max_message = max_message,
		                      .tls.insecure = true };
	struct rpc_client_opts co = { .tls.insecure = true };
	struct rpc_server_handlers h;

	sink_init(&e->sink, verify, false);
	sink_handlers(&e->sink, &h);
	assert_int_equal(rpc_server_create(&so, &h, &e->srv), 0);
	snprintf(e->target, sizeof(e->target), "127.0.0.1:%d", rpc_server_port(e->srv));
	co.target = e->target;
	co.max_message = max_message;
	assert_int_equal(rpc_client_create(&co, &e->cl), 0);
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

static uint8_t *
pattern_buf(const char *key, size_t len)
{
	uint8_t *p = malloc(len ? len : 1);

	assert_non_null(p);
	sink_fill(sink_seed(key), 0, p, len);
	return p;
}

static void
put_ok(struct env *e, const char *key, size_t len, size_t chunk)
{
	struct rpc_write_open open = { 0 };
	struct rpc_write_result res = { 0 };
	struct rpc_status st;
	uint8_t *buf = pattern_buf(key, len);
	int rc;

	open.bucket = "b";
	open.key = key;
	open.size = len;
	open.size_known = len & 1;
	rc = rpc_client_put(e->cl, &open, buf, len, chunk, &res, &st);
	if (rc)
		fail_msg("put %s: rc %d status %d '%s'", key, rc, rpc_status_from_err(st.err),
		         st.msg);
	assert_int_equal(res.size, len);
	assert_int_equal(res.crc32c, zc_crc32c(0, buf, len));
	free(buf);
}

static void
run_puts(enum rpc_marshaller m)
{
	struct env e;
	static const size_t sizes[] = { 0, 1, 4095, 65536, 1000003, 5u << 20, 33u << 20 };
	char key[32];

	env_up(&e, m, true, 0);
	e.sink.delay_us = 200;
	e.sink.pause_always = true;
	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		snprintf(key, sizeof(key), "obj-%zu", i);
		put_ok(&e, key, sizes[i], i & 1 ? 1u << 20 : 300000);
	}
	assert_int_equal(atomic_load(&e.sink.committed), 7);
	assert_int_equal(atomic_load(&e.sink.aborted), 0);
	assert_true(atomic_load(&e.sink.pauses) > 40); /* paused and resumed per message */
	env_down(&e);
}

static void
test_put_zerocopy(void **state)
{
	(void)state;
	run_puts(RPC_MARSHAL_ZEROCOPY);
}

static void
test_put_copy(void **state)
{
	(void)state;
	run_puts(RPC_MARSHAL_COPY);
}

/* ---- raw Write calls carrying hand-made (bad) messages: rpc_raw.h */

static const char *
long_key(void)
{
	static char k[1026];

	memset(k, 'k', sizeof(k) - 1);
	return k;
}

struct bad_call {
	const char *name;
	struct raw_msg msgs[3];
	size_t n;
	grpc_status_code code;
	const char *want;
};

static void
test_bad_input_over_the_wire(void **state)
{
	struct env e;
	static uint8_t garbage[] = { 0x0a, 0x02, 'b', 'k', 0x1a, 0x09, 'a' };

	struct bad_call cases[] = {
		{ "no open",
		  { chunk_msg(NULL, 0, 0, 0, 10, true, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "InvalidArgument: the first WriteChunk carries no open" },
		{ "gap",
		  { chunk_msg("k1", 0, 0, 0, 10, 0, 0), chunk_msg(NULL, 0, 0, 20, 5, 0, 0) },
		  2,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "offset 20, expected 10 (gap)" },
		{ "overlap",
		  { chunk_msg("k2", 0, 0, 0, 10, 0, 0), chunk_msg(NULL, 0, 0, 5, 5, 0, 0) },
		  2,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "offset 5, expected 10 (overlap)" },
		{ "crc",
		  { chunk_msg("k3", 0, 0, 0, 10, 0, 0), chunk_msg(NULL, 0, 0, 10, 7, 1, 1) },
		  2,
		  GRPC_STATUS_DATA_LOSS,
		  "BadDigest: CRC32C mismatch at offset 10" },
		{ "garbage",
		  { { garbage, sizeof(garbage) } },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "length 9 past the end (1 bytes left)" },
		{ "no commit",
		  { chunk_msg("k4", 0, 0, 0, 10, 0, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "stream ended after 10 bytes without commit" },
		{ "open twice",
		  { chunk_msg("k5", 0, 0, 0, 10, 0, 0), chunk_msg("k5", 0, 0, 10, 1, 0, 0) },
		  2,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "open repeated after 10 bytes" },
		{ "past size",
		  { chunk_msg("k6", 5, 1, 0, 10, 0, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "data past the declared size of 5 bytes" },
		{ "short commit",
		  { chunk_msg("k7", 20, 1, 0, 10, 1, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "commit after 10 bytes, declared size 20" },
		{ "empty key",
		  { chunk_msg("", 0, 0, 0, 10, 1, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "InvalidArgument: empty key" },
		{ "long key",
		  { chunk_msg(long_key(), 0, 0, 0, 10, 1, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "key longer than 1024 bytes" },
		{ "refused",
		  { chunk_msg("refused", 0, 0, 0, 10, 1, 0) },
		  1,
		  GRPC_STATUS_NOT_FOUND,
		  "NoSuchBucket: nosuchbucket" },
		{ "data over max",
		  { chunk_msg("k8", 0, 0, 0, (1u << 20) + 1, 1, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "data of 1048577 bytes exceeds the max message" },
		{ "message over limit",
		  { chunk_msg("k9", 0, 0, 0, (2u << 20) + 1, 1, 0) },
		  1,
		  GRPC_STATUS_INVALID_ARGUMENT,
		  "exceeds the limit of 2097152" },
		{ "message over gRPC's limit",
		  { chunk_msg("k10", 0, 0, 0, (4u << 20) + 1, 1, 0) },
		  1,
		  GRPC_STATUS_RESOURCE_EXHAUSTED,
		  "" },
	};
	long opened_before;

	(void)state;
	env_up(&e, RPC_MARSHAL_ZEROCOPY, false, 1u << 20); /* raw messages carry 'x' bytes */
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct rpc_status st;

		raw_write(e.target, cases[i].msgs, cases[i].n, true, &st);
		if (rpc_status_from_err(st.err) != cases[i].code || !strstr(st.msg, cases[i].want))
			fail_msg("case '%s': status %d '%s', want %d '%s'", cases[i].name,
			         rpc_status_from_err(st.err), st.msg, cases[i].code, cases[i].want);
		for (size_t k = 0; k < cases[i].n; k++)
			if (cases[i].msgs[k].bytes != garbage)
				free(cases[i].msgs[k].bytes);
		/* the server keeps serving */
		put_ok(&e, "after-bad", 100000, 30000);
		if (getenv("RPC_TEST_DEBUG"))
			print_message("case %s: live buffers %ld refs %ld\n", cases[i].name,
			              rpc_live_buffers(), zc_ref_live());
	}
	/* nothing of a rejected object reached commit; every opened one was aborted */
	opened_before = atomic_load(&e.sink.opened);
	assert_int_equal(atomic_load(&e.sink.committed), (long)(sizeof(cases) / sizeof(cases[0])));
	env_down(&e);
	assert_int_equal(atomic_load(&e.sink.aborted) + atomic_load(&e.sink.committed),
	                 opened_before);
}

/* ---- client cancel mid-stream: the handler gets abort, refs come back */
struct cancel_ctx {
	struct waiter_simple {
		pthread_mutex_t mu;
		pthread_cond_t cond;
		bool done;
	} w;
	struct rpc_status st;
};

static void
cancel_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
            const struct rpc_write_result *res)
{
	struct cancel_ctx *c = arg;

	(void)w;
	(void)res;
	pthread_mutex_lock(&c->w.mu);
	c->st = *st;
	c->w.done = true;
	pthread_cond_signal(&c->w.cond);
	pthread_mutex_unlock(&c->w.mu);
}

static void
test_client_cancel(void **state)
{
	struct env e;
	struct rpc_write_open open = { 0 };
	struct rpc_cwrite_cbs cbs = { NULL, cancel_done };
	struct cancel_ctx c;
	struct rpc_cwrite *w;
	uint8_t *buf = pattern_buf("cancelled", 1u << 20);
	struct zc_seg seg = { buf, 1u << 20, NULL };

	(void)state;
	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.w.mu, NULL);
	pthread_cond_init(&c.w.cond, NULL);
	env_up(&e, RPC_MARSHAL_ZEROCOPY, true, 0);
	open.bucket = "b";
	open.key = "cancelled";
	assert_int_equal(rpc_cwrite_open(e.cl, &open, &cbs, &c, &w), 0);
	assert_int_equal(rpc_cwrite_send(w, &seg, 1), 0);
	while (atomic_load(&e.sink.bytes) < (1u << 20))
		usleep(1000);
	rpc_cwrite_cancel(w);
	pthread_mutex_lock(&c.w.mu);
	while (!c.w.done)
		pthread_cond_wait(&c.w.cond, &c.w.mu);
	pthread_mutex_unlock(&c.w.mu);
	assert_int_equal(rpc_status_from_err(c.st.err), GRPC_STATUS_CANCELLED);
	assert_int_equal(rpc_cwrite_send(w, &seg, 1), -ECANCELED);
	rpc_cwrite_destroy(w);
	env_down(&e);
	assert_int_equal(atomic_load(&e.sink.aborted), 1);
	assert_int_equal(atomic_load(&e.sink.committed), 0);
	free(buf);
}

/* ---- server shutdown with a call in flight: the handler is aborted, nothing leaks */
static void
test_shutdown_in_flight(void **state)
{
	struct env e;
	struct rpc_write_open open = { 0 };
	struct rpc_cwrite_cbs cbs = { NULL, cancel_done };
	struct cancel_ctx c;
	struct rpc_cwrite *w;
	uint8_t *buf = pattern_buf("inflight", 1u << 20);
	struct zc_seg seg = { buf, 1u << 20, NULL };

	(void)state;
	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.w.mu, NULL);
	pthread_cond_init(&c.w.cond, NULL);
	env_up(&e, RPC_MARSHAL_COPY, true, 0);
	open.bucket = "b";
	open.key = "inflight";
	assert_int_equal(rpc_cwrite_open(e.cl, &open, &cbs, &c, &w), 0);
	assert_int_equal(rpc_cwrite_send(w, &seg, 1), 0);
	while (atomic_load(&e.sink.bytes) < (1u << 20))
		usleep(1000);
	rpc_server_destroy(e.srv, 50);
	pthread_mutex_lock(&c.w.mu);
	while (!c.w.done)
		pthread_cond_wait(&c.w.cond, &c.w.mu);
	pthread_mutex_unlock(&c.w.mu);
	assert_int_not_equal(rpc_status_from_err(c.st.err), GRPC_STATUS_OK);
	rpc_cwrite_destroy(w);
	rpc_client_destroy(e.cl);
	sink_fini(&e.sink);
	assert_int_equal(atomic_load(&e.sink.aborted), 1);
	assert_int_equal(rpc_live_buffers(), 0);
	assert_int_equal(zc_ref_live(), 0);
	free(buf);
}

/* ---- graceful shutdown: a call in flight may still commit within the grace period */
struct destroyer {
	struct rpc_server *srv;
	unsigned grace_ms;
};

static void *
destroy_main(void *arg)
{
	struct destroyer *d = arg;

	rpc_server_destroy(d->srv, d->grace_ms);
	return NULL;
}

static void
test_shutdown_graceful(void **state)
{
	struct env e;
	struct rpc_write_open open = { 0 };
	struct rpc_cwrite_cbs cbs = { NULL, cancel_done };
	struct cancel_ctx c;
	struct rpc_cwrite *w;
	uint8_t *buf = pattern_buf("graceful", 2u << 20);
	struct zc_seg a = { buf, 1u << 20, NULL }, b = { buf + (1u << 20), 1u << 20, NULL };
	struct destroyer d;
	pthread_t th;

	(void)state;
	memset(&c, 0, sizeof(c));
	pthread_mutex_init(&c.w.mu, NULL);
	pthread_cond_init(&c.w.cond, NULL);
	env_up(&e, RPC_MARSHAL_ZEROCOPY, true, 0);
	open.bucket = "b";
	open.key = "graceful";
	assert_int_equal(rpc_cwrite_open(e.cl, &open, &cbs, &c, &w), 0);
	assert_int_equal(rpc_cwrite_send(w, &a, 1), 0);
	while (atomic_load(&e.sink.bytes) < (1u << 20))
		usleep(1000);
	d = (struct destroyer){ e.srv, 10000 };
	assert_int_equal(pthread_create(&th, NULL, destroy_main, &d), 0);
	usleep(100000); /* the server is shutting down now */
	assert_int_equal(rpc_cwrite_commit(w, &b, 1, NULL), 0);
	pthread_mutex_lock(&c.w.mu);
	while (!c.w.done)
		pthread_cond_wait(&c.w.cond, &c.w.mu);
	pthread_mutex_unlock(&c.w.mu);
	pthread_join(th, NULL);
	assert_int_equal(rpc_status_from_err(c.st.err), GRPC_STATUS_OK);
	rpc_cwrite_destroy(w);
	rpc_client_destroy(e.cl);
	sink_fini(&e.sink);
	assert_int_equal(atomic_load(&e.sink.committed), 1);
	assert_int_equal(atomic_load(&e.sink.aborted), 0);
	assert_int_equal(rpc_live_buffers(), 0);
	assert_int_equal(zc_ref_live(), 0);
	free(buf);
}

/* ---- Read and unary */
struct read_ctx {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	bool done, paused_once;
	struct rpc_status st;
	uint32_t seed;
	uint64_t next, start, size_info;
	long bad;
	struct rpc_cread *r;
};

static int
read_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
           const struct zc_seg *segs, size_t n, size_t len)
{
	struct read_ctx *c = arg;

	(void)r;
	if (info)
		c->size_info = info->size;
	if (offset != c->next)
		c->bad++;
	for (size_t i = 0; i < n; i++) {
		for (size_t b = 0; b < segs[i].len; b++)
			if (segs[i].ptr[b] != sink_pattern(c->seed, offset + b))
				c->bad++;
		offset += segs[i].len;
	}
	c->next += len;
	if (!c->paused_once) {
		c->paused_once = true;
		return 1; /* the test thread resumes */
	}
	return 0;
}

static void
read_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct read_ctx *c = arg;

	(void)r;
	pthread_mutex_lock(&c->mu);
	c->st = *st;
	c->done = true;
	pthread_cond_signal(&c->cond);
	pthread_mutex_unlock(&c->mu);
}

static void
do_read(struct env *e, const char *key, uint64_t off, uint64_t len, bool has_len,
        struct read_ctx *c)
{
	struct rpc_read_req req = { 0 };
	struct rpc_cread_cbs cbs = { read_chunk, read_done };

	memset(c, 0, sizeof(*c));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cond, NULL);
	c->seed = sink_seed(key);
	c->next = c->start = off;
	req.bucket = "b";
	req.key = key;
	req.offset = off;
	req.length = len;
	req.has_length = has_len;
	assert_int_equal(rpc_cread_open(e->cl, &req, &cbs, c, &c->r), 0);
	for (int i = 0; i < 200 && !c->paused_once; i++)
		usleep(2000);
	rpc_cread_resume(c->r);
	pthread_mutex_lock(&c->mu);
	while (!c->done)
		pthread_cond_wait(&c->cond, &c->mu);
	pthread_mutex_unlock(&c->mu);
	rpc_cread_destroy(c->r);
}

static void
test_read_and_unary(void **state)
{
	struct env e;
	struct read_ctx c;
	union rpc_unary_req oreq = { .object = { .bucket = "b", .key = "some" } };
	union rpc_unary_req breq = { .bucket = { .bucket = "nb" } };
	struct rpc_unary_resp resp;
	struct rpc_status st;

	(void)state;
	env_up(&e, RPC_MARSHAL_ZEROCOPY, true, 0);
	do_read(&e, "r1", 0, 0, false, &c);
	assert_int_equal(rpc_status_from_err(c.st.err), GRPC_STATUS_OK);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.next, 3u << 20);
	assert_int_equal(c.size_info, 3u << 20);
	do_read(&e, "r2", 12345, 700000, true, &c);
	assert_int_equal(rpc_status_from_err(c.st.err), GRPC_STATUS_OK);
	assert_int_equal(c.bad, 0);
	assert_int_equal(c.next, 12345 + 700000);
	do_read(&e, "missing", 0, 0, false, &c);
	assert_int_equal(rpc_status_from_err(c.st.err), GRPC_STATUS_NOT_FOUND);
	assert_int_equal(c.st.err, ZC_E(ZC_NO_KEY)); /* the code came in the trailer */
	assert_string_equal(c.st.msg, "NoSuchKey: missing");

	assert_int_equal(rpc_client_call(e.cl, RPC_STAT, &oreq, &resp, &st), 0);
	assert_int_equal(resp.method, RPC_STAT);
	assert_string_equal(resp.info.key, "some");
	assert_int_equal(resp.info.size, 42);
	assert_int_equal(resp.info.n_attrs, 2);
	assert_string_equal(resp.info.attrs[1].name, "x-amz-meta-b");
	assert_string_equal(resp.info.attrs[1].value, "2");
	rpc_unary_resp_fini(&resp);
	assert_null(resp.mem);
	oreq.object.key = "missing";
	assert_int_equal(rpc_client_call(e.cl, RPC_STAT, &oreq, &resp, &st), ZC_E(ZC_NO_KEY));
	assert_null(resp.mem);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_NOT_FOUND);
	assert_string_equal(st.msg, "NoSuchKey: b/missing");
	/* a handler answering with another method's type is refused by the server */
	oreq.object.key = "wrongtype";
	assert_int_equal(rpc_client_call(e.cl, RPC_STAT, &oreq, &resp, &st), ZC_E(ZC_INVALID));
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_INVALID_ARGUMENT);
	assert_int_equal(rpc_client_call(e.cl, RPC_CREATE_BUCKET, &breq, &resp, &st), 0);
	assert_string_equal(resp.bucket.name, "nb");
	assert_int_equal(resp.bucket.ctime_ns, 7);
	rpc_unary_resp_fini(&resp);
	assert_int_equal(rpc_client_call(e.cl, RPC_DELETE_BUCKET, &breq, &resp, &st),
	                 ZC_E(ZC_NOT_IMPLEMENTED));
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNIMPLEMENTED);
	/* a missing request is refused locally */
	assert_int_equal(rpc_client_call(e.cl, RPC_STAT, NULL, &resp, &st), -EINVAL);
	env_down(&e);
}

/* ---- 1 GiB per marshaller: 4 streams of 64 MiB objects, 1 MiB chunks */

struct big_worker {
	struct env *e;
	const uint8_t *buf;
	size_t obj, count;
	uint32_t crc;
	int id, errors;
};

static void *
big_worker_main(void *arg)
{
	struct big_worker *bw = arg;

	for (size_t i = 0; i < bw->count; i++) {
		struct rpc_write_open open = { 0 };
		struct rpc_write_result res = { 0 };
		struct rpc_status st;
		char key[32];

		snprintf(key, sizeof(key), "big-%d-%zu", bw->id, i);
		open.bucket = "b";
		open.key = key;
		open.size = bw->obj;
		open.size_known = true;
		if (rpc_client_put(bw->e->cl, &open, bw->buf, bw->obj, 1u << 20, &res, &st) ||
		    res.size != bw->obj || res.crc32c != bw->crc)
			bw->errors++;
	}
	return NULL;
}

static void
run_big(enum rpc_marshaller m)
{
	const size_t obj = 64u << 20, streams = 4;
	const size_t per = BIG_TOTAL / obj / streams ? BIG_TOTAL / obj / streams : 1;
	struct big_worker bw[4];
	pthread_t th[4];
	struct rpc_stats before, after;
	uint64_t copied = 0, t0, cpu0;
	uint8_t *buf = malloc(obj);
	struct env e;
	double secs;

	assert_non_null(buf);
	for (size_t i = 0; i < obj; i++)
		buf[i] = (uint8_t)(i * 7 + (i >> 12));
	env_up(&e, m, false, 0);
	rpc_stats_get(&before);
	t0 = zc_now_ns();
	(void)cpu0;
	for (size_t i = 0; i < streams; i++) {
		bw[i] = (struct big_worker){ &e, buf, obj, per, zc_crc32c(0, buf, obj), (int)i, 0 };
		assert_int_equal(pthread_create(&th[i], NULL, big_worker_main, &bw[i]), 0);
	}
	for (size_t i = 0; i < streams; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(bw[i].errors, 0);
	}
	secs = (double)(zc_now_ns() - t0) / 1e9;
	rpc_stats_get(&after);
	for (int s = 0; s < RPC_STAGE_COUNT; s++)
		copied += after.copied_bytes[s] - before.copied_bytes[s];
	assert_int_equal(after.received_bytes - before.received_bytes, obj * per * streams);
	if (m == RPC_MARSHAL_ZEROCOPY)
		assert_int_equal(copied, 0);
	else
		assert_true(copied >= obj * per * streams);
	print_message("%s: %zu MiB in %.2f s (%.0f MiB/s), copied/received %.2f\n",
	              m == RPC_MARSHAL_COPY ? "copy" : "zerocopy", obj * per * streams >> 20, secs,
	              (double)(obj * per * streams >> 20) / secs,
	              (double)copied / (double)(after.received_bytes - before.received_bytes));
	env_down(&e);
	free(buf);
}

static void
test_big_zerocopy(void **state)
{
	(void)state;
	run_big(RPC_MARSHAL_ZEROCOPY);
}

static void
test_big_copy(void **state)
{
	(void)state;
	run_big(RPC_MARSHAL_COPY);
}

static void
test_listen_errors(void **state)
{
	struct rpc_server_opts so = { .listen = "127.0.0.1:0", .tls.insecure = true };
	struct rpc_server_handlers h = { 0 };
	struct rpc_server *a, *b = NULL;
	char addr[64];

	(void)state;
	assert_int_equal(rpc_server_create(&so, &h, &a), 0);
	snprintf(addr, sizeof(addr), "127.0.0.1:%d", rpc_server_port(a));
	so.listen = addr;
	assert_int_equal(rpc_server_create(&so, &h, &b), -EADDRINUSE);
	so.listen = "not-an-address:x";
	assert_int_equal(rpc_server_create(&so, &h, &b), -EADDRINUSE);
	assert_int_equal(rpc_server_create(NULL, &h, &b), -EINVAL);
	rpc_server_destroy(a, 0);
	rpc_server_destroy(NULL, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_listen_errors),
		cmocka_unit_test(test_put_zerocopy),
		cmocka_unit_test(test_put_copy),
		cmocka_unit_test(test_bad_input_over_the_wire),
		cmocka_unit_test(test_client_cancel),
		cmocka_unit_test(test_shutdown_in_flight),
		cmocka_unit_test(test_shutdown_graceful),
		cmocka_unit_test(test_read_and_unary),
		cmocka_unit_test(test_big_zerocopy),
		cmocka_unit_test(test_big_copy),
	};

	grpc_init();
	if (getenv("RPC_TEST_FILTER"))
		cmocka_set_test_filter(getenv("RPC_TEST_FILTER"));
	int rc = cmocka_run_group_tests(tests, NULL, NULL);

	grpc_shutdown();
	return rc;
}
