/*
 * The gRPC binding (datanode/dn_rpc.c) in one process: a store over temp folders, the
 * binding, an rpc server on a loopback port and an rpc client. Covers the paths the
 * integration tests cannot steer: pause/resume with a tiny per-call queue, an engine
 * refusal found after the call was accepted (reported at the next callback), a client
 * cancelling a Write and a Read mid-stream, a server shutdown with a Write in flight, and
 * messages whose CRC32C lies (checked by the engine, not the rpc layer).
 * Every case ends with no live payload ref and no live gRPC buffer.
 */
#include "dn_rpc_test.h"
#include "t_fault.h"
#include "dn_internal.h"
#include "dn_meta_internal.h" /* the metadata write lock, held to stall writes */
#include "rpc_raw.h"

static void
env_up_with(struct t_rpc_env *e, size_t call_cap, void (*tweak)(struct dn_store_opts *o))
{
	t_rpc_env_init(e);
	e->bo.call_cap = call_cap;
	if (tweak)
		tweak(&e->t.o);
	t_rpc_env_open(e, "bkt");
}

static void
tight_admission(struct dn_store_opts *o)
{
	o->adm_l1_ns = 1000000;
	o->adm_l2_ns = 2000000;
	o->adm_l3_ns = 5000000;
}

static void
env_up(struct t_rpc_env *e, size_t call_cap)
{
	env_up_with(e, call_cap, NULL);
}

static int
put(struct t_rpc_env *e, const char *key, const uint8_t *buf, size_t len, size_t chunk, unsigned k,
    struct rpc_status *st)
{
	return t_rpc_put(e->cl, "bkt", key, buf, len, chunk, k, k ? 2 : 0, NULL, st);
}

/* ---- a Read into memory, optionally cancelled after the first chunk ---- */
struct membuf {
	uint8_t *buf;
	size_t cap;
};

static int
mem_sink(void *arg, uint64_t offset, const struct zc_seg *seg)
{
	struct membuf *m = arg;

	CHECK(offset + seg->len <= m->cap);
	memcpy(m->buf + offset, seg->ptr, seg->len);
	return 0;
}

static void
get(struct t_rpc_env *e, const char *key, struct membuf *m, bool cancel, struct t_get *g)
{
	memset(g, 0, sizeof(*g));
	g->sink = mem_sink;
	g->arg = m;
	g->cancel = cancel;
	CHECK_EQ(t_rpc_get(e->cl, "bkt", key, 0, 0, false, g), 0);
	CHECK(!g->bad);
}

static void
test_pause_resume_round_trip(void)
{
	struct t_rpc_env e;
	struct rpc_status st;
	size_t len = (3u << 20) + 12345;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct membuf m = { back, len };
	struct t_get g;

	t_fill(buf, len);
	env_up(&e, 32 << 10); /* pauses after every few 8 KiB messages */
	CHECK_EQ(put(&e, "obj", buf, len, 8 << 10, 0, &st), 0);
	get(&e, "obj", &m, false, &g);
	CHECK_EQ(rpc_status_from_err(g.st.err), GRPC_STATUS_OK);
	CHECK_EQ(g.bytes, len);
	CHECK(memcmp(buf, back, len) == 0);
	t_rpc_env_fini(&e, 1000);
	free(buf);
	free(back);
}

static void
test_refusal_after_accept(void)
{
	struct t_rpc_env e;
	struct rpc_status st;
	size_t len = 2u << 20;
	uint8_t *buf = malloc(len);
	struct dn_object_info info;

	t_fill(buf, len);
	env_up(&e, 0);
	/* 40+2 passes the rpc checks; dn_write_begin refuses it on a worker, after open
	 * accepted the call: many messages (failed from a data callback) ... */
	CHECK_EQ(put(&e, "bad", buf, len, 64 << 10, 40, &st), ZC_E(ZC_INVALID));
	CHECK(strncmp(st.msg, "InvalidArgument:", 16) == 0);
	/* ... and a single open+commit message (failed by the commit job). */
	CHECK_EQ(put(&e, "bad0", buf, 0, 64 << 10, 40, &st), ZC_E(ZC_INVALID));
	CHECK(strncmp(st.msg, "InvalidArgument:", 16) == 0);
	CHECK_EQ(dn_stat(e.t.s, "bkt", "bad", &info), ZC_E(ZC_NO_KEY));
	/* and answered at open */
	{
		struct rpc_write_open op = { .bucket = "nob", .key = "k" };

		CHECK_EQ(rpc_client_put(e.cl, &op, buf, 10, 10, NULL, &st), ZC_E(ZC_NO_BUCKET));
		CHECK(strcmp(st.msg, "NoSuchBucket: nob") == 0);
	}
	t_rpc_env_fini(&e, 1000);
	free(buf);
}

/* The binding checks each message's CRC32C inside the engine's one pass over the bytes. */
static void
test_bad_crc(void)
{
	struct t_rpc_env e;
	struct rpc_status st;
	struct dn_object_info info;
	uint8_t *buf = malloc(300000);
	struct raw_msg later[] = { chunk_msg("crc", 0, 0, 0, 100000, false, 0),
		                   chunk_msg(NULL, 0, 0, 100000, 70000, true, 1) };
	struct raw_msg first[] = { chunk_msg("crc0", 0, 0, 0, 5000, true, 0x100) };
	struct raw_msg over[] = { chunk_msg("keep", 0, 0, 0, 200000, true, 0x80000000u) };

	t_fill(buf, 300000);
	env_up(&e, 0);
	raw_write(e.target, later, 2, true, &st);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_DATA_LOSS);
	CHECK(strstr(st.msg, "BadDigest: CRC32C mismatch at offset 100000") != NULL);
	CHECK_EQ(dn_stat(e.t.s, "bkt", "crc", &info), ZC_E(ZC_NO_KEY));
	raw_write(e.target, first, 1, true, &st);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_DATA_LOSS);
	CHECK(strstr(st.msg, "at offset 0") != NULL);
	CHECK_EQ(dn_stat(e.t.s, "bkt", "crc0", &info), ZC_E(ZC_NO_KEY));
	/* A corrupt overwrite leaves the committed version in place. */
	CHECK_EQ(put(&e, "keep", buf, 300000, 64 << 10, 0, &st), 0);
	raw_write(e.target, over, 1, true, &st);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_DATA_LOSS);
	CHECK_EQ(dn_stat(e.t.s, "bkt", "keep", &info), 0);
	CHECK_EQ(info.size, 300000);
	dn_object_info_fini(&info);
	/* and the same key is writable right after */
	CHECK_EQ(put(&e, "crc", buf, 123456, 64 << 10, 0, &st), 0);
	t_rpc_env_fini(&e, 1000);
	for (size_t i = 0; i < 2; i++)
		free(later[i].bytes);
	free(first[0].bytes);
	free(over[0].bytes);
	free(buf);
}

/* ---- a Write cancelled by its client, and one left open at shutdown ---- */
static struct rpc_cwrite *
open_stream(struct t_rpc_env *e, const char *key, struct t_wstate *s, const uint8_t *buf, size_t n,
            size_t chunk)
{
	struct rpc_write_open op = { .bucket = "bkt", .key = key };
	struct rpc_cwrite *w;

	t_wstate_init(s);
	CHECK_EQ(rpc_cwrite_open(e->cl, &op, &t_wstate_cbs, s, &w), 0);
	for (size_t off = 0; off < n; off += chunk)
		t_cwrite_send(w, buf + off, chunk);
	return w;
}

static void
test_client_cancels(void)
{
	struct t_rpc_env e;
	struct t_wstate s = { 0 };
	struct t_get g;
	struct rpc_status st;
	struct dn_object_info info;
	size_t len = 4u << 20;
	uint8_t *buf = malloc(len), *back = malloc(len);
	struct membuf m = { back, len };
	struct rpc_cwrite *w;

	t_fill(buf, len);
	env_up(&e, 0);
	w = open_stream(&e, "half", &s, buf, len / 2, 64 << 10);
	usleep(100000);
	rpc_cwrite_cancel(w);
	t_wstate_wait(&s, 0);
	rpc_cwrite_destroy(w);
	CHECK_EQ(rpc_status_from_err(s.st.err), GRPC_STATUS_CANCELLED);
	usleep(100000); /* the server's abort runs on a worker */
	CHECK_EQ(dn_stat(e.t.s, "bkt", "half", &info), ZC_E(ZC_NO_KEY));

	/* a Read cancelled after its first chunk */
	CHECK_EQ(put(&e, "big", buf, len, 1 << 20, 0, &st), 0);
	get(&e, "big", &m, true, &g);
	CHECK(rpc_status_from_err(g.st.err) == GRPC_STATUS_CANCELLED ||
	      rpc_status_from_err(g.st.err) == GRPC_STATUS_OK);
	/* a missing key answers at start */
	get(&e, "nokey", &m, false, &g);
	CHECK_EQ(rpc_status_from_err(g.st.err), GRPC_STATUS_NOT_FOUND);
	CHECK(strcmp(g.st.msg, "NoSuchKey: nokey") == 0);
	t_rpc_env_fini(&e, 1000);
	free(buf);
	free(back);
}

static void
test_shutdown_with_write_open(void)
{
	struct t_rpc_env e;
	struct t_wstate s = { 0 };
	size_t len = 1u << 20;
	uint8_t *buf = malloc(len);
	struct rpc_cwrite *w;
	struct dn_object_info info;

	t_fill(buf, len);
	env_up(&e, 0);
	w = open_stream(&e, "open", &s, buf, len, 64 << 10);
	usleep(100000);
	/* the server cancels the stream after its grace; the binding aborts the write */
	rpc_server_destroy(e.srv, 100);
	e.srv = NULL;
	t_wstate_wait(&s, 0);
	rpc_cwrite_destroy(w);
	CHECK(rpc_status_from_err(s.st.err) != GRPC_STATUS_OK);
	rpc_client_destroy(e.cl);
	e.cl = NULL;
	dn_rpc_destroy(e.b);
	e.b = NULL;
	CHECK_EQ(dn_stat(e.t.s, "bkt", "open", &info), ZC_E(ZC_NO_KEY));
	t_rpc_env_fini(&e, 0);
	free(buf);
}

/* A slow drive pushes admission to its refusal level: RESOURCE_EXHAUSTED "SlowDown: ...". */
static void
test_slowdown(void)
{
	struct t_rpc_env e;
	struct rpc_status st;
	size_t len = 256u << 10;
	uint8_t *buf = malloc(len);
	int rc = 0;

	t_fill(buf, len);
	env_up_with(&e, 0, tight_admission);
	t_fault_delay_idx(ZC_FP_DRIVE_WRITE, 0, 30000000);
	for (int i = 0; i < 20 && rc == 0; i++) {
		char key[16];

		snprintf(key, sizeof(key), "s%d", i);
		rc = put(&e, key, buf, len, 64 << 10, 0, &st);
	}
	CHECK(rc != 0);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_RESOURCE_EXHAUSTED);
	CHECK(strncmp(st.msg, "SlowDown:", 9) == 0);
	t_fault_delay_idx(ZC_FP_DRIVE_WRITE, 0, 0);
	t_rpc_env_fini(&e, 1000);
	free(buf);
}

/* ---- Writes queued by admission hold no write worker ---- */
/* Poll a store counter (test side) until it reaches want, at most ms; returns it. */
static uint64_t
wait_queued(struct dn_store *st, uint64_t want, unsigned ms)
{
	struct dn_counters c;

	for (unsigned i = 0;; i++) {
		dn_counters_get(st, &c);
		if (c.admission_queued >= want || i * 5 >= ms)
			return c.admission_queued;
		usleep(5000);
	}
}

static unsigned
parked_now(struct dn_store *st)
{
	struct dn_counters c;

	dn_counters_get(st, &c);
	return c.admission_parked;
}

/* Queue at L2 only (no pacing, no refusal level), 4 places, and a long queue wait: a
 * queued open that held a worker would hold it for all of wait_ns. */
static void
queue_admission(struct dn_store_opts *o)
{
	o->adm_l1_ns = 0;
	o->adm_l2_ns = 100000000;
	o->adm_l3_ns = 0;
	o->adm_queue = 4;
	o->wait_ns = 30ull * 1000000000u;
}

static void
commit_stream(struct rpc_cwrite *w, const uint8_t *buf, size_t len)
{
	struct zc_seg seg = { (void *)buf, len, NULL };
	struct rpc_commit commit = { .etag = "e" };

	CHECK_EQ(rpc_cwrite_commit(w, &seg, 1, &commit), 0);
}

/*
 * A Write admitted before the drives turned slow keeps going while more opens than there
 * are write workers (2) wait in the admission queue above L2: when a queued open held its
 * worker, the admitted Write's data and commit jobs waited behind them for the whole
 * queue wait (30 s here). The queue then fills (a fifth open is refused with SlowDown), a
 * cancelled open leaves it at once, the others get in when the level falls, and a server
 * shutdown fails one still parked with nothing left behind.
 */
/* Admission sees at least ns of write latency (0: off): a level held for as long as the
 * test needs, without slowing a drive. */
static void
adm_latency(struct dn_store *s, uint64_t ns)
{
	t_fault(ZC_FP_ADM_LATENCY, NULL,
	        ns ? &(struct zc_fault){ .kind = ZC_FAULT_DELAY, .delay_ns = ns } : NULL);
	dn_admission_kick(s); /* the level moved without a completion */
}

static void
test_queued_opens_hold_no_worker(void)
{
	enum { NP = 4 };
	struct t_rpc_env e;
	struct t_wstate a = { 0 }, p[NP], over = { 0 }, last = { 0 };
	struct rpc_cwrite *wa, *wp[NP], *wover, *wlast;
	struct dn_object_info info;
	size_t len = 256u << 10, part = 64u << 10;
	uint8_t *buf = malloc(len);
	char key[16];

	memset(p, 0, sizeof(p));
	t_fill(buf, len);
	env_up_with(&e, 0, queue_admission);
	/* A is admitted (its write begun) while the drives are fine. */
	wa = open_stream(&e, "live", &a, buf, part, part);
	for (int i = 0; i < 1000 && atomic_load(&e.t.s->live_writes) == 0; i++)
		usleep(5000);
	CHECK_EQ(atomic_load(&e.t.s->live_writes), 1);
	adm_latency(e.t.s, 1000000000ull); /* 1 s: above L2 */
	CHECK_EQ(dn_admission_level(e.t.s), DN_ADM_QUEUE);
	for (int i = 0; i < NP; i++) {
		snprintf(key, sizeof(key), "q%d", i);
		wp[i] = open_stream(&e, key, &p[i], buf, part, part);
	}
	wait_queued(e.t.s, NP, 3000);
	/* The rest of A and its commit while NP > workers opens are queued. */
	for (size_t off = part; off + part < len; off += part)
		t_cwrite_send(wa, buf + off, part);
	commit_stream(wa, buf + len - part, part);
	CHECK(t_wstate_wait(&a, 10000)); /* normal: milliseconds; before: the 30 s queue wait */
	CHECK_EQ(rpc_status_from_err(a.st.err), GRPC_STATUS_OK);
	rpc_cwrite_destroy(wa);
	CHECK_EQ(dn_stat(e.t.s, "bkt", "live", &info), 0);
	CHECK_EQ(info.size, len);
	dn_object_info_fini(&info);
	/* The queue really holds NP opens now; one more is refused at once. */
	CHECK_EQ(wait_queued(e.t.s, NP, 10000), NP);
	CHECK_EQ(parked_now(e.t.s), NP);
	wover = open_stream(&e, "over", &over, buf, part, part);
	commit_stream(wover, buf + part, part); /* the refusal is told at the next callback */
	CHECK(t_wstate_wait(&over, 10000));
	CHECK_EQ(rpc_status_from_err(over.st.err), GRPC_STATUS_RESOURCE_EXHAUSTED);
	CHECK(strncmp(over.st.msg, "SlowDown:", 9) == 0);
	rpc_cwrite_destroy(wover);
	for (int i = 0; i < NP; i++)
		CHECK(!p[i].done);
	/* A cancelled open leaves the queue without waiting for its turn. */
	rpc_cwrite_cancel(wp[0]);
	CHECK(t_wstate_wait(&p[0], 10000));
	CHECK_EQ(rpc_status_from_err(p[0].st.err), GRPC_STATUS_CANCELLED);
	rpc_cwrite_destroy(wp[0]);
	for (int i = 0; i < 1000 && parked_now(e.t.s) != NP - 1; i++)
		usleep(5000);
	CHECK_EQ(parked_now(e.t.s), NP - 1);
	/* The level falls: the others are let in and commit. */
	adm_latency(e.t.s, 0);
	for (int i = 1; i < NP; i++) {
		commit_stream(wp[i], buf + part, part);
		CHECK(t_wstate_wait(&p[i], 10000));
		CHECK_EQ(rpc_status_from_err(p[i].st.err), GRPC_STATUS_OK);
		rpc_cwrite_destroy(wp[i]);
		snprintf(key, sizeof(key), "q%d", i);
		CHECK_EQ(dn_stat(e.t.s, "bkt", key, &info), 0);
		CHECK_EQ(info.size, 2 * part);
		dn_object_info_fini(&info);
	}
	CHECK_EQ(dn_stat(e.t.s, "bkt", "q0", &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(parked_now(e.t.s), 0);
	/* Shutdown with an open parked: the server cancels it, nothing leaks (t_rpc_env_fini). */
	adm_latency(e.t.s, 1000000000ull);
	wlast = open_stream(&e, "last", &last, buf, part, part);
	for (int i = 0; i < 1000 && parked_now(e.t.s) != 1; i++)
		usleep(5000);
	CHECK_EQ(parked_now(e.t.s), 1);
	rpc_server_destroy(e.srv, 100);
	e.srv = NULL;
	CHECK(t_wstate_wait(&last, 10000));
	CHECK(rpc_status_from_err(last.st.err) != GRPC_STATUS_OK);
	rpc_cwrite_destroy(wlast);
	CHECK_EQ(parked_now(e.t.s), 0);
	t_rpc_env_fini(&e, 1000);
	free(buf);
}

/*
 * Engine errors of a Write -> status and message: a lost quorum (drives failed) is its
 * own code, sent as UNAVAILABLE "ServiceUnavailable: write quorum not met" (S3 503
 * ServiceUnavailable); an -EIO, which is now only the metadata's, is INTERNAL "InternalError:
 * metadata I/O error" (S3 500). Then both for real, through the wire.
 */
static void
test_error_mapping(void)
{
	static const struct {
		int err;
		grpc_status_code code;
		enum zc_code zc; /* what the wire's "zest-err" trailer carries */
		const char *prefix;
	} rows[] = {
		{ ZC_E(ZC_NO_QUORUM), GRPC_STATUS_UNAVAILABLE, ZC_NO_QUORUM,
		  "write quorum not met: " },
		{ -EIO, GRPC_STATUS_INTERNAL, ZC_INTERNAL,
		  "metadata I/O error on write of bkt/k: " },
		{ -ENOSPC, GRPC_STATUS_RESOURCE_EXHAUSTED, ZC_NO_SPACE, "No space: " },
		{ ZC_E(ZC_NO_BUCKET), GRPC_STATUS_NOT_FOUND, ZC_NO_BUCKET, "bkt" },
		{ -EAGAIN, GRPC_STATUS_RESOURCE_EXHAUSTED, ZC_SLOW_DOWN, "the datanode's drives" },
		{ -EINVAL, GRPC_STATUS_INVALID_ARGUMENT, ZC_INVALID, "write of bkt/k refused" },
		{ -EBADMSG, GRPC_STATUS_DATA_LOSS, ZC_BAD_DIGEST, "write of bkt/k failed: " },
	};
	struct t_rpc_env e;
	struct rpc_status st;
	uint8_t buf[50000];
	char msg[RPC_STATUS_MSG_MAX];

	t_fill(buf, sizeof(buf));
	env_up(&e, 0);
	for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
		int rc =
		        dn_rpc_write_errmsg(e.t.s, 0, 0, "bkt", "k", rows[i].err, msg, sizeof(msg));

		if (rpc_status_from_err(rc) != rows[i].code || zc_err_code(rc) != rows[i].zc ||
		    strncmp(msg, rows[i].prefix, strlen(rows[i].prefix)) != 0) {
			fprintf(stderr, "row %zu: err %d -> code %d \"%s\"\n", i, rows[i].err,
			        rpc_status_from_err(rc), msg);
			abort();
		}
	}
	/* Every metadata replica fails its commit: the cells are durable, the write is not. */
	CHECK_EQ(put(&e, "ok", buf, sizeof(buf), 16 << 10, 0, &st), 0);
	for (unsigned r = 0; r <= e.t.o.m; r++)
		t_fault_err_idx(ZC_FP_META_TXN, r, -EIO, 1);
	CHECK(put(&e, "metaio", buf, sizeof(buf), 16 << 10, 0, &st) != 0);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_INTERNAL);
	CHECK_EQ(zc_err_code(st.err), ZC_INTERNAL);
	CHECK(strncmp(st.msg, "InternalError: metadata I/O error on write of bkt/metaio", 55) == 0);
	t_rpc_env_fini(&e, 1000);
	/* Two failed drives of six: 4 < quorum 5, refused at open as before. */
	env_up(&e, 0);
	CHECK_EQ(dn_drive_fail(e.t.s, 1), 0);
	CHECK_EQ(dn_drive_fail(e.t.s, 4), 0);
	CHECK(put(&e, "quorum", buf, sizeof(buf), 16 << 10, 0, &st) != 0);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_UNAVAILABLE);
	CHECK(strncmp(st.msg, "ServiceUnavailable: write quorum not met: 4 of 6 drives (quorum 5)",
	              66) == 0);
	t_rpc_env_fini(&e, 1000);
}

/* Compose with a condition and a pinned part over the wire: the codes the gateway maps. */
static int
compose(struct t_rpc_env *e, const char *key, const char *part, const char *part_etag,
        const struct rpc_write_cond *cond, struct rpc_status *st)
{
	struct rpc_object_req pr = { .bucket = "bkt", .key = part, .etag = part_etag };
	union rpc_unary_req req = { .compose = { .bucket = "bkt",
		                                 .key = key,
		                                 .parts = &pr,
		                                 .n_parts = 1,
		                                 .etag = "copied",
		                                 .cond = cond } };
	struct rpc_unary_resp resp;
	int rc;

	rc = rpc_client_call(e->cl, RPC_COMPOSE, &req, &resp, st);
	rpc_unary_resp_fini(&resp);
	return rc;
}

static void
test_compose_conditions(void)
{
	struct rpc_write_cond inm = { 0 }, im = { 0 };
	struct t_rpc_env e;
	struct rpc_status st;
	uint8_t buf[30000];

	t_fill(buf, sizeof(buf));
	env_up(&e, 0);
	inm.if_none_match = true;
	im.if_match = "nope";
	CHECK_EQ(put(&e, "src", buf, sizeof(buf), 16 << 10, 0, &st), 0);
	CHECK_EQ(compose(&e, "dst", "src", "", &inm, &st), 0);
	CHECK(compose(&e, "dst", "src", "", &inm, &st) != 0);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_FAILED_PRECONDITION);
	CHECK(strncmp(st.msg, "PreconditionFailed: ", 20) == 0);
	CHECK(compose(&e, "dst", "src", "", &im, &st) != 0);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_FAILED_PRECONDITION);
	/* If-Match on a missing target names the key; a missing part stays NoSuchKey too */
	CHECK(compose(&e, "none", "src", "", &im, &st) != 0);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_NOT_FOUND);
	CHECK(strncmp(st.msg, "NoSuchKey: bkt/none", 19) == 0);
	/* the part pinned to another version: SlowDown, nothing changes */
	CHECK(compose(&e, "dst2", "src", "other", NULL, &st) != 0);
	CHECK_EQ(rpc_status_from_err(st.err), GRPC_STATUS_RESOURCE_EXHAUSTED);
	CHECK(strncmp(st.msg, "SlowDown: ", 10) == 0);
	CHECK(compose(&e, "dst2", "dst", "copied", NULL, &st) == 0);
	t_rpc_env_fini(&e, 1000);
}

/* ---- Reads whose client stopped receiving hold no reader thread ---- */
struct stalled {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned chunks;
	bool done;
};

static int
stalled_chunk(void *arg, struct rpc_cread *r, const struct rpc_object_info *info, uint64_t offset,
              const struct zc_seg *segs, size_t n_segs, size_t len)
{
	struct stalled *s = arg;

	(void)r, (void)info, (void)offset, (void)segs, (void)n_segs, (void)len;
	pthread_mutex_lock(&s->mu);
	s->chunks++;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
	return 1; /* pause: no more RECV_MESSAGE, HTTP/2 flow control stops the sender */
}

static void
stalled_done(void *arg, struct rpc_cread *r, const struct rpc_status *st)
{
	struct stalled *s = arg;

	(void)r, (void)st;
	pthread_mutex_lock(&s->mu);
	s->done = true;
	pthread_cond_signal(&s->cond);
	pthread_mutex_unlock(&s->mu);
}

/*
 * Four Reads of a 24 MiB object whose client pauses after the first chunk, against two
 * reader threads: each datanode send soon waits on flow control. A reader that waited for
 * its send to complete would be stuck on them and the next Read would never start; it must
 * be served while the four stay open, and the four must still end when cancelled.
 */
static void
test_stalled_reads_hold_no_reader(void)
{
	static const struct rpc_cread_cbs cbs = { stalled_chunk, stalled_done };
	enum { NSTALL = 4 };
	struct t_rpc_env e;
	struct rpc_status st;
	size_t len = 24u << 20, small = 100000;
	uint8_t *buf = malloc(len), *back = malloc(small);
	struct membuf m = { back, small };
	struct stalled s[NSTALL];
	struct rpc_cread *r[NSTALL];
	struct t_get g;
	uint64_t t0;

	t_fill(buf, len);
	env_up(&e, 0);
	CHECK_EQ(put(&e, "huge", buf, len, 1 << 20, 0, &st), 0);
	CHECK_EQ(put(&e, "small", buf, small, 64 << 10, 0, &st), 0);
	for (int i = 0; i < NSTALL; i++) {
		struct rpc_read_req req = { .bucket = "bkt", .key = "huge" };

		memset(&s[i], 0, sizeof(s[i]));
		pthread_mutex_init(&s[i].mu, NULL);
		pthread_cond_init(&s[i].cond, NULL);
		CHECK_EQ(rpc_cread_open(e.cl, &req, &cbs, &s[i], &r[i]), 0);
	}
	for (int i = 0; i < NSTALL; i++) {
		pthread_mutex_lock(&s[i].mu);
		while (!s[i].chunks)
			pthread_cond_wait(&s[i].cond, &s[i].mu);
		pthread_mutex_unlock(&s[i].mu);
	}
	usleep(300000); /* the datanode's next sends of each fill the windows and stall */
	t0 = zc_now_ns();
	get(&e, "small", &m, false, &g);
	CHECK_EQ(rpc_status_from_err(g.st.err), GRPC_STATUS_OK);
	CHECK_EQ(g.bytes, small);
	CHECK(memcmp(buf, back, small) == 0);
	/* a hang check, not speed (normal: milliseconds): a stuck reader never serves it */
	CHECK(zc_now_ns() - t0 < 60ull * 1000000000u);
	for (int i = 0; i < NSTALL; i++) {
		CHECK(!s[i].done);
		rpc_cread_cancel(r[i]);
		rpc_cread_resume(r[i]); /* a paused stream sees its cancel through a resume */
		pthread_mutex_lock(&s[i].mu);
		while (!s[i].done)
			pthread_cond_wait(&s[i].cond, &s[i].mu);
		pthread_mutex_unlock(&s[i].mu);
		rpc_cread_destroy(r[i]);
		pthread_mutex_destroy(&s[i].mu);
		pthread_cond_destroy(&s[i].cond);
	}
	t_rpc_env_fini(&e, 1000);
	free(buf);
	free(back);
}

/* ---- Unary calls that write never hold a CQ thread ---- */
struct ucount {
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned done;
	int last_code;
};

static void
ucount_cb(void *arg, const struct rpc_status *st, const struct rpc_unary_resp *resp)
{
	struct ucount *u = arg;

	(void)resp;
	pthread_mutex_lock(&u->mu);
	u->done++;
	u->last_code = rpc_status_from_err(st->err);
	pthread_cond_broadcast(&u->cond);
	pthread_mutex_unlock(&u->mu);
}

/* Wait until u->done reaches n, at most ms; returns what it reached. */
static unsigned
ucount_wait(struct ucount *u, unsigned n, unsigned ms)
{
	struct timespec ts = t_deadline(ms);
	unsigned got;

	pthread_mutex_lock(&u->mu);
	while (u->done < n && pthread_cond_timedwait(&u->cond, &u->mu, &ts) == 0)
		;
	got = u->done;
	pthread_mutex_unlock(&u->mu);
	return got;
}

/*
 * Deletes stalled in the metadata write (the test holds its lock, as a slow fsync would)
 * must not hold the server's 2 CQ threads: a Stat sent after 4 of them still answers.
 * When the unary calls ran on the CQ threads, the Stat waited for the lock too.
 */
static void
test_unary_writes_off_cq(void)
{
	struct ucount dels = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct ucount stat = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	union rpc_unary_req dr = { .object = { .bucket = "bkt", .key = "gone" } };
	union rpc_unary_req sr = { .object = { .bucket = "bkt", .key = "keep" } };
	struct rpc_status st;
	struct t_rpc_env e;
	uint8_t buf[1000];

	t_fill(buf, sizeof(buf));
	env_up(&e, 0);
	CHECK_EQ(put(&e, "keep", buf, sizeof(buf), 1000, 0, &st), 0);
	pthread_mutex_lock(&e.t.s->meta->wlock);
	for (int i = 0; i < 4; i++)
		CHECK_EQ(rpc_client_call_async(e.cl, RPC_DELETE, &dr, ucount_cb, &dels), 0);
	CHECK_EQ(rpc_client_call_async(e.cl, RPC_STAT, &sr, ucount_cb, &stat), 0);
	CHECK_EQ(ucount_wait(&stat, 1, 10000), 1);
	CHECK_EQ(stat.last_code, GRPC_STATUS_OK);
	CHECK_EQ(ucount_wait(&dels, 1, 200), 0); /* the deletes still wait for the lock */
	pthread_mutex_unlock(&e.t.s->meta->wlock);
	CHECK_EQ(ucount_wait(&dels, 4, 10000), 4);
	CHECK_EQ(dels.last_code, GRPC_STATUS_OK);
	t_rpc_env_fini(&e, 1000);
}

/* Does the commit thread's queue hold a Write's commit (not a metadata call)? */
static bool
write_commit_queued(struct dn_store *st)
{
	bool found = false;

	pthread_mutex_lock(&st->commit_lock);
	for (struct dn_job *j = st->jhead; j && !found; j = j->next)
		found = !dn_mcall_job(j);
	pthread_mutex_unlock(&st->commit_lock);
	return found;
}

/*
 * Deletes (and composes) that arrive together share the commit thread's metadata
 * transactions: 32 Deletes sent while the test holds the metadata lock (as a slow sync
 * would) take at most 2 transactions, the one that was waiting for the lock and one for the
 * rest, which a Write's commit queued among them shares. Two composes of one key with
 * If-None-Match in the same batch: exactly one wins, the other sees it (PreconditionFailed),
 * as if they had run one after the other.
 */
static void
test_unary_writes_batched(void)
{
	enum { ND = 32, NKEEP = 8 };
	struct ucount dels = { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 };
	struct ucount cu[2] = { { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 },
		                { PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0 } };
	struct rpc_write_cond inm = { .if_none_match = true };
	struct rpc_object_req pr = { .bucket = "bkt", .key = "src" };
	union rpc_unary_req dr[ND], creq = { .compose = { .bucket = "bkt",
		                                          .key = "dst",
		                                          .parts = &pr,
		                                          .n_parts = 1,
		                                          .etag = "copied",
		                                          .cond = &inm } };
	char keys[ND][16];
	struct dn_object_info info;
	struct dn_counters c0, c1;
	struct rpc_status st;
	struct t_wstate wst = { 0 };
	struct rpc_cwrite *wmix;
	struct t_rpc_env e;
	uint8_t buf[3000];
	int ok;

	t_fill(buf, sizeof(buf));
	env_up(&e, 0);
	for (int i = 0; i < ND; i++) {
		snprintf(keys[i], sizeof(keys[i]), "d%d", i);
		if (i < NKEEP)
			CHECK_EQ(put(&e, keys[i], buf, sizeof(buf), 1000, 0, &st), 0);
	}
	CHECK_EQ(put(&e, "src", buf, sizeof(buf), 1000, 0, &st), 0);
	dn_counters_get(e.t.s, &c0);
	pthread_mutex_lock(&e.t.s->meta->wlock);
	for (int i = 0; i < ND; i++) {
		dr[i] = (union rpc_unary_req){ .object = { .bucket = "bkt", .key = keys[i] } };
		CHECK_EQ(rpc_client_call_async(e.cl, RPC_DELETE, &dr[i], ucount_cb, &dels), 0);
	}
	for (int i = 0; i < 2; i++)
		CHECK_EQ(rpc_client_call_async(e.cl, RPC_COMPOSE, &creq, ucount_cb, &cu[i]), 0);
	/* Every call queued on the commit thread before the lock goes. */
	for (int i = 0; i < 2000; i++) {
		dn_counters_get(e.t.s, &c1);
		if (c1.mcalls - c0.mcalls == ND + 2)
			break;
		usleep(5000);
	}
	CHECK_EQ(c1.mcalls - c0.mcalls, ND + 2);
	/* and a Write's commit among them: it shares their transaction */
	wmix = open_stream(&e, "wmix", &wst, buf, 0, 1);
	commit_stream(wmix, buf, sizeof(buf));
	for (int i = 0; i < 2000 && !write_commit_queued(e.t.s); i++)
		usleep(5000);
	CHECK(write_commit_queued(e.t.s));
	pthread_mutex_unlock(&e.t.s->meta->wlock);
	CHECK(t_wstate_wait(&wst, 10000));
	CHECK_EQ(rpc_status_from_err(wst.st.err), GRPC_STATUS_OK);
	rpc_cwrite_destroy(wmix);
	CHECK_EQ(ucount_wait(&dels, ND, 10000), ND);
	CHECK_EQ(dels.last_code, GRPC_STATUS_OK);
	CHECK_EQ(ucount_wait(&cu[0], 1, 10000), 1);
	CHECK_EQ(ucount_wait(&cu[1], 1, 10000), 1);
	ok = (cu[0].last_code == GRPC_STATUS_OK) + (cu[1].last_code == GRPC_STATUS_OK);
	CHECK_EQ(ok, 1);
	CHECK(cu[0].last_code == GRPC_STATUS_FAILED_PRECONDITION ||
	      cu[1].last_code == GRPC_STATUS_FAILED_PRECONDITION);
	dn_counters_get(e.t.s, &c1);
	fprintf(stderr, "batched: %llu calls in %llu metadata transactions\n",
	        (unsigned long long)(c1.mcalls - c0.mcalls),
	        (unsigned long long)(c1.mcall_txns - c0.mcall_txns));
	CHECK(c1.mcall_txns - c0.mcall_txns <= 2);
	for (int i = 0; i < NKEEP; i++)
		CHECK_EQ(dn_stat(e.t.s, "bkt", keys[i], &info), ZC_E(ZC_NO_KEY));
	CHECK_EQ(dn_stat(e.t.s, "bkt", "dst", &info), 0);
	CHECK_EQ(info.size, sizeof(buf));
	dn_object_info_fini(&info);
	CHECK_EQ(dn_stat(e.t.s, "bkt", "wmix", &info), 0);
	CHECK_EQ(info.size, sizeof(buf));
	dn_object_info_fini(&info);
	t_rpc_env_fini(&e, 1000);
}

int
main(void)
{
	test_pause_resume_round_trip();
	test_refusal_after_accept();
	test_bad_crc();
	test_client_cancels();
	test_shutdown_with_write_open();
	test_slowdown();
	test_queued_opens_hold_no_worker();
	test_error_mapping();
	test_compose_conditions();
	test_stalled_reads_hold_no_reader();
	test_unary_writes_off_cq();
	test_unary_writes_batched();
	printf("test_dn_rpc: ok\n");
	return 0;
}
