/*
 * The client's progress timeout (rpc_cli_watch.c) against a real gRPC server of this
 * module whose handlers misbehave on purpose, chosen by the key: "stop" stops reading a
 * Write (paused for good) or stops sending a Read after its first chunk; "slow" reads or
 * sends, but slowly (a message every few ms, the whole stream much longer than the
 * timeout); anything else is served at once. A stopped stream must end with UNAVAILABLE /
 * ZC_UNAVAILABLE and not before its timeout; a slow one, a caller idle between its sends
 * and a Read paused by its caller longer than the timeout must all survive. No speed is
 * asserted. A slow stream is slow for SLOW_MS from its start, measured by the server on
 * its own clock, and the client goes on sending (a Write) until that long has passed too:
 * so it outlasts the timeout however fast or slow the machine is, and a loaded machine
 * only makes it last longer. After that the server is fast: what the windows let the
 * client send ahead (MiBs) must drain within the timeout once the commit is out, since
 * the reply is the next progress the client sees. The timeout is generous (a stall of a
 * few seconds on a loaded machine does not cut a moving stream); every wait is for an
 * event (a callback), never for a time.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "rpc_server.h"
#include "rpc_stats.h"
#include "rpc_client.h"
#include "rpc_status_internal.h" /* what the wire carries */
#include "zc.h"
#include "zc_crc.h"

#define TIMEOUT_MS 4000
#define SLOW_MS    (TIMEOUT_MS * 3 / 2) /* a slow stream lasts at least this long */
#define MSG        (256u << 10)

static uint8_t payload[MSG]; /* static memory: segments with a NULL ref */

/* ------------------------------------------------------------------ the server */

struct srv_call {
	bool slow, stop;
	unsigned sent, n_chunks;
	uint64_t t0; /* the stream's start, on the server */
};

/* Chunks the last Read stream was sent (the server's count, for the client to compare). */
static atomic_uint read_sent;

static bool
still_slow(const struct srv_call *sc)
{
	return sc->slow && zc_now_ns() - sc->t0 < (uint64_t)SLOW_MS * 1000000u;
}

static int
w_open(void *srv_ctx, struct rpc_write *w, const struct rpc_write_open *open, void **call_ctx)
{
	struct srv_call *sc = calloc(1, sizeof(*sc));

	(void)srv_ctx;
	(void)w;
	assert_non_null(sc);
	sc->slow = strcmp(open->key, "slow") == 0;
	sc->stop = strcmp(open->key, "stop") == 0;
	sc->t0 = zc_now_ns();
	*call_ctx = sc;
	return 0;
}

static void
w_data(void *call_ctx, struct rpc_write *w, uint64_t offset, const struct zc_seg *segs,
       size_t n_segs, size_t len, uint32_t crc32c)
{
	struct srv_call *sc = call_ctx;

	(void)offset;
	(void)segs;
	(void)n_segs;
	(void)len;
	(void)crc32c;
	if (sc->stop)
		rpc_write_pause(w); /* and never resume: the client's window stays shut */
	else if (still_slow(sc))
		usleep(10 * 1000); /* a slow disk: about 25 MB/s */
}

static void
w_commit(void *call_ctx, struct rpc_write *w, const struct rpc_commit *commit)
{
	(void)commit;
	free(call_ctx);
	rpc_write_finish(w, &(struct rpc_write_result){ .etag = "e" });
}

static void
w_abort(void *call_ctx, struct rpc_write *w, int err)
{
	free(call_ctx);
	rpc_write_fail(w, err, "aborted");
}

static int
r_start(void *srv_ctx, struct rpc_read *r, const struct rpc_read_req *req, void **call_ctx)
{
	struct srv_call *sc = calloc(1, sizeof(*sc));
	struct zc_seg seg = { payload, 64u << 10, NULL };

	(void)srv_ctx;
	assert_non_null(sc);
	sc->slow = strcmp(req->key, "slow") == 0;
	sc->stop = strcmp(req->key, "stop") == 0;
	sc->n_chunks = 16; /* a slow stream: as many as SLOW_MS takes */
	sc->t0 = zc_now_ns();
	*call_ctx = sc;
	sc->sent = 1;
	atomic_store(&read_sent, 1);
	assert_int_equal(rpc_read_send(r, &(struct rpc_object_info){ .key = req->key }, 0,
	                               zc_crc32c(0, seg.ptr, seg.len), &seg, 1),
	                 0);
	return 0;
}

static void
r_sent(void *call_ctx, struct rpc_read *r)
{
	struct srv_call *sc = call_ctx;
	struct zc_seg seg = { payload, 64u << 10, NULL };

	if (sc->stop)
		return; /* silent: the stream stays open, nothing more comes */
	if (sc->slow ? !still_slow(sc) : sc->sent == sc->n_chunks) {
		free(sc);
		rpc_read_finish(r, 0, NULL);
		return;
	}
	if (sc->slow)
		usleep(30 * 1000);
	assert_int_equal(rpc_read_send(r, NULL, (uint64_t)sc->sent * seg.len,
	                               zc_crc32c(0, seg.ptr, seg.len), &seg, 1),
	                 0);
	sc->sent++;
	atomic_store(&read_sent, sc->sent);
}

static void
r_abort(void *call_ctx, struct rpc_read *r, int err)
{
	free(call_ctx);
	rpc_read_finish(r, err, "aborted");
}

/* ------------------------------------------------------------------ the client */

struct env {
	struct rpc_server *srv;
	struct rpc_client *cl;
};

static void
env_up(struct env *e)
{
	struct rpc_server_opts so = { .listen = "127.0.0.1:0", .tls.insecure = true };
	struct rpc_server_handlers h = {
		.write = { .open = w_open, .data = w_data, .commit = w_commit, .abort = w_abort },
		.read = { .start = r_start, .sent = r_sent, .abort = r_abort },
	};
	struct rpc_client_opts co = { .tls.insecure = true,
		                      .max_inflight = 1u << 20,
		                      .progress_timeout_ms = TIMEOUT_MS };
	char target[64];

	assert_int_equal(rpc_server_create(&so, &h, &e->srv), 0);
	snprintf(target, sizeof(target), "127.0.0.1:%d", rpc_server_port(e->srv));
	co.target = target;
	assert_int_equal(rpc_client_create(&co, &e->cl), 0);
}

static void
env_down(struct env *e)
{
	rpc_client_destroy(e->cl);
	rpc_server_destroy(e->srv, 1000);
	assert_int_equal(rpc_live_buffers(), 0);
	assert_int_equal(zc_ref_live(), 0);
}

struct wait {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool done;
	unsigned long writable;
	struct rpc_status st;
	uint64_t chunks;
	bool pause_first; /* Read: pause at the first chunk */
	struct rpc_cread *r;
};

static void
wait_init(struct wait *wt)
{
	memset(wt, 0, sizeof(*wt));
	pthread_mutex_init(&wt->mu, NULL);
	pthread_cond_init(&wt->cv, NULL);
}

static void
wait_fini(struct wait *wt)
{
	pthread_cond_destroy(&wt->cv);
	pthread_mutex_destroy(&wt->mu);
}

static void
cw_writable(void *arg, struct rpc_cwrite *w)
{
	struct wait *wt = arg;

	(void)w;
	pthread_mutex_lock(&wt->mu);
	wt->writable++;
	pthread_cond_broadcast(&wt->cv);
	pthread_mutex_unlock(&wt->mu);
}

static void
cw_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
        const struct rpc_write_result *res)
{
	struct wait *wt = arg;

	(void)w;
	(void)res;
	pthread_mutex_lock(&wt->mu);
	wt->st = *st;
	wt->done = true;
	pthread_cond_broadcast(&wt->cv);
	pthread_mutex_unlock(&wt->mu);
}

/* Write n_msgs messages of MSG bytes (idle_ms between the first two), and with until_slow
 * more until SLOW_MS passed, then commit; wait for done. timeout_ms: the stream's progress
 * timeout (0: the client's). Returns the elapsed ms. */
static uint64_t
put_as(struct env *e, const char *key, unsigned n_msgs, unsigned idle_ms, unsigned timeout_ms,
       bool until_slow, struct rpc_status *st)
{
	static const struct rpc_cwrite_cbs cbs = { cw_writable, cw_done };
	struct zc_seg seg = { payload, MSG, NULL };
	uint64_t t0 = zc_now_ns();
	struct rpc_cwrite *w;
	struct wait wt;

	wait_init(&wt);
	assert_int_equal(rpc_cwrite_open(e->cl,
	                                 &(struct rpc_write_open){ .bucket = "b", .key = key },
	                                 &cbs, &wt, &w),
	                 0);
	if (timeout_ms)
		assert_int_equal(rpc_cwrite_progress_timeout(w, timeout_ms), 0);
	for (unsigned i = 0;
	     i < n_msgs || (until_slow && zc_now_ns() - t0 < (uint64_t)SLOW_MS * 1000000u);) {
		unsigned long gen;
		int rc;

		pthread_mutex_lock(&wt.mu);
		gen = wt.writable;
		pthread_mutex_unlock(&wt.mu);
		rc = rpc_cwrite_send(w, &seg, 1);
		if (rc == 0) {
			/* the caller's time: never the peer's fault */
			if (i++ == 0 && idle_ms)
				usleep(idle_ms * 1000u);
			continue;
		}
		if (rc == -ECANCELED)
			break;
		assert_int_equal(rc, -EAGAIN);
		pthread_mutex_lock(&wt.mu);
		while (wt.writable == gen && !wt.done)
			pthread_cond_wait(&wt.cv, &wt.mu);
		pthread_mutex_unlock(&wt.mu);
	}
	rpc_cwrite_commit(w, NULL, 0, &(struct rpc_commit){ .etag = "e" });
	pthread_mutex_lock(&wt.mu);
	while (!wt.done)
		pthread_cond_wait(&wt.cv, &wt.mu);
	*st = wt.st;
	pthread_mutex_unlock(&wt.mu);
	rpc_cwrite_destroy(w);
	wait_fini(&wt);
	return (zc_now_ns() - t0) / 1000000u;
}

static uint64_t
put(struct env *e, const char *key, unsigned n_msgs, unsigned idle_ms, unsigned timeout_ms,
    struct rpc_status *st)
{
	return put_as(e, key, n_msgs, idle_ms, timeout_ms, false, st);
}

static int
cr_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
         const struct zc_seg *segs, size_t n_segs, size_t len)
{
	struct wait *wt = arg;
	int pause;

	(void)r;
	(void)info;
	(void)offset;
	(void)segs;
	(void)n_segs;
	(void)len;
	pthread_mutex_lock(&wt->mu);
	pause = wt->pause_first && wt->chunks == 0;
	wt->chunks++;
	pthread_cond_broadcast(&wt->cv);
	pthread_mutex_unlock(&wt->mu);
	return pause;
}

static void
cr_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct wait *wt = arg;

	(void)r;
	pthread_mutex_lock(&wt->mu);
	wt->st = *st;
	wt->done = true;
	pthread_cond_broadcast(&wt->cv);
	pthread_mutex_unlock(&wt->mu);
}

/* Read key; with pause_ms, pause at the first chunk for that long. Returns the chunks. */
static uint64_t
get(struct env *e, const char *key, unsigned pause_ms, struct rpc_status *st, uint64_t *ms)
{
	static const struct rpc_cread_cbs cbs = { cr_chunk, cr_done };
	uint64_t t0 = zc_now_ns(), n;
	struct rpc_cread *r;
	struct wait wt;

	wait_init(&wt);
	wt.pause_first = pause_ms > 0;
	assert_int_equal(rpc_cread_open(e->cl, &(struct rpc_read_req){ .bucket = "b", .key = key },
	                                &cbs, &wt, &r),
	                 0);
	if (pause_ms) {
		pthread_mutex_lock(&wt.mu);
		while (!wt.chunks && !wt.done)
			pthread_cond_wait(&wt.cv, &wt.mu);
		pthread_mutex_unlock(&wt.mu);
		usleep(pause_ms * 1000u); /* paused by us: the server owes nothing */
		rpc_cread_resume(r);
	}
	pthread_mutex_lock(&wt.mu);
	while (!wt.done)
		pthread_cond_wait(&wt.cv, &wt.mu);
	*st = wt.st;
	n = wt.chunks;
	pthread_mutex_unlock(&wt.mu);
	rpc_cread_destroy(r);
	wait_fini(&wt);
	*ms = (zc_now_ns() - t0) / 1000000u;
	return n;
}

/* ------------------------------------------------------------------ tests */

static void
test_write_peer_stops_reading(void **state)
{
	struct rpc_status st;
	struct env e;
	uint64_t ms;

	(void)state;
	env_up(&e);
	/* far more than every window and socket buffer between us and the paused handler */
	ms = put(&e, "stop", 4096, 0, 0, &st);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
	assert_int_equal(st.err, ZC_E(ZC_UNAVAILABLE));
	assert_non_null(strstr(st.msg, "no progress"));
	assert_true(ms >= TIMEOUT_MS); /* never before the timeout */
	/* the client goes on: the next stream works */
	put(&e, "ok", 8, 0, 0, &st);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_OK);
	env_down(&e);
}

static void
test_write_slow_or_idle_survives(void **state)
{
	struct rpc_status st;
	struct env e;

	(void)state;
	env_up(&e);
	/* ~25 MB/s for SLOW_MS, then 8 fast: the stream lasts longer than the timeout, but
	 * moves */
	assert_true(put_as(&e, "slow", 8, 0, 0, true, &st) >= SLOW_MS);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_OK);
	/* the caller is idle for twice the timeout between two sends */
	put(&e, "ok", 4, 2 * TIMEOUT_MS, 0, &st);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_OK);
	/* a stream's own timeout, shorter than the client's, cuts a stopped peer the same */
	put(&e, "stop", 4096, 0, TIMEOUT_MS / 2, &st);
	assert_int_equal(st.err, ZC_E(ZC_UNAVAILABLE));
	put(&e, "ok", 4, 0, TIMEOUT_MS / 2, &st);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_OK);
	env_down(&e);
}

static void
test_read_peer_stops_sending(void **state)
{
	struct rpc_status st;
	struct env e;
	uint64_t n, ms;

	(void)state;
	env_up(&e);
	n = get(&e, "stop", 0, &st, &ms);
	assert_int_equal(n, 1);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
	assert_int_equal(st.err, ZC_E(ZC_UNAVAILABLE));
	assert_true(ms >= TIMEOUT_MS);
	env_down(&e);
}

static void
test_read_slow_or_paused_survives(void **state)
{
	struct rpc_status st;
	struct env e;
	uint64_t ms, n;

	(void)state;
	env_up(&e);
	/* chunks 30 ms apart for SLOW_MS: longer than the timeout, every one delivered */
	n = get(&e, "slow", 0, &st, &ms);
	assert_int_equal(n, atomic_load(&read_sent));
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_OK);
	assert_true(ms >= SLOW_MS);
	assert_true(atomic_load(&read_sent) > 1);
	/* paused by the caller for twice the timeout */
	assert_int_equal(get(&e, "ok", 2 * TIMEOUT_MS, &st, &ms), 16);
	assert_int_equal(rpc_status_from_err(st.err), GRPC_STATUS_OK);
	env_down(&e);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_write_peer_stops_reading),
		cmocka_unit_test(test_write_slow_or_idle_survives),
		cmocka_unit_test(test_read_peer_stops_sending),
		cmocka_unit_test(test_read_slow_or_paused_survives),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
