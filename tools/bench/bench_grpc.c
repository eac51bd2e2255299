/*
 * zest-bench grpc: stream objects straight to a datanode's Write RPC and report the
 * throughput. N streams run concurrently on the rpc client's completion-queue thread(s)
 * (the way the S3 gateway drives them): each sends --chunk sized WriteChunks from one
 * static source buffer (sent without a copy), refills on `writable`, and opens the next
 * object from its done callback. Objects started during --warmup are not counted; the
 * report (warp's shape, latency table, --json) is the one every zest-bench load shares.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "bench_report.h"
#include "rpc_client.h"
#include "zc.h"

struct bench;

struct slot {
	struct bench *b;
	pthread_mutex_t mu;
	struct rpc_cwrite *w;
	uint64_t off, t0;
	int id;
	unsigned seq;
	bool active;
};

struct bench {
	struct rpc_client *cl;
	uint64_t obj_size, chunk, objects_max, deadline_ns, measure_from;
	const char *bucket;
	char prefix[48]; /* keys of this run, so a rerun never overwrites the last one */
	uint8_t *src;
	struct slot *slots;
	unsigned n_slots;
	atomic_ullong started;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned active;
	struct bench_stats stats; /* under mu: callbacks may run on several CQ threads */
};

static void slot_start(struct slot *s);

/* Send until the object is committed or the stream is at its in-flight cap. */
static void
slot_pump(struct slot *s)
{
	struct bench *b = s->b;

	pthread_mutex_lock(&s->mu);
	while (s->w && s->off < b->obj_size + (b->obj_size == 0)) {
		uint64_t n = b->obj_size - s->off < b->chunk ? b->obj_size - s->off : b->chunk;
		struct zc_seg seg = { b->src, n, NULL }; /* static memory: no ref */
		int rc;

		if (s->off + n == b->obj_size) {
			rc = rpc_cwrite_commit(s->w, &seg, n ? 1 : 0, NULL);
			s->off = b->obj_size + 1; /* committed */
			if (rc)
				rpc_cwrite_cancel(s->w);
			break;
		}
		rc = rpc_cwrite_send(s->w, &seg, 1);
		if (rc == -EAGAIN)
			break; /* `writable` calls us again */
		if (rc) {
			rpc_cwrite_cancel(s->w);
			break;
		}
		s->off += n;
	}
	pthread_mutex_unlock(&s->mu);
}

static void
slot_writable(void *arg, struct rpc_cwrite *w)
{
	(void)w;
	slot_pump(arg);
}

static void
slot_done(void *arg, struct rpc_cwrite *w, const struct rpc_status *st,
          const struct rpc_write_result *res)
{
	struct slot *s = arg;
	struct bench *b = s->b;
	uint64_t now = zc_now_ns();

	pthread_mutex_lock(&b->mu);
	if (s->t0 < b->measure_from) {
		/* warm-up: neither counted nor timed */
	} else if (!st->err && res && res->size == b->obj_size) {
		bench_stats_ok(&b->stats, s->t0 - b->measure_from, now - s->t0, b->obj_size);
	} else {
		bench_stats_error(&b->stats, "err %d: %s", st->err, st->msg);
	}
	pthread_mutex_unlock(&b->mu);
	pthread_mutex_lock(&s->mu);
	s->w = NULL;
	pthread_mutex_unlock(&s->mu);
	rpc_cwrite_destroy(w);
	slot_start(s);
}

/* Open the slot's next object, or retire the slot when the run is over. */
static void
slot_start(struct slot *s)
{
	struct bench *b = s->b;
	struct rpc_write_open open = { 0 };
	struct rpc_cwrite_cbs cbs = { slot_writable, slot_done };
	struct rpc_cwrite *w;
	char key[64];
	bool stop = zc_now_ns() >= b->deadline_ns;

	if (!stop && b->objects_max) {
		uint64_t n = atomic_fetch_add(&b->started, 1);

		stop = n >= b->objects_max;
	}
	if (!stop) {
		snprintf(key, sizeof(key), "%s/%d/%u", b->prefix, s->id, s->seq++);
		open.bucket = b->bucket;
		open.key = key;
		open.size = b->obj_size;
		open.size_known = true;
		pthread_mutex_lock(&s->mu);
		s->off = 0;
		s->t0 = zc_now_ns();
		if (rpc_cwrite_open(b->cl, &open, &cbs, s, &w)) {
			pthread_mutex_unlock(&s->mu);
			pthread_mutex_lock(&b->mu);
			bench_stats_error(&b->stats, "cannot open a Write stream");
			pthread_mutex_unlock(&b->mu);
			stop = true;
		} else {
			s->w = w;
			pthread_mutex_unlock(&s->mu);
			slot_pump(s);
			return;
		}
	}
	pthread_mutex_lock(&b->mu);
	b->active--;
	pthread_cond_broadcast(&b->cond);
	pthread_mutex_unlock(&b->mu);
}

/* Create the bucket the run writes to; one that already exists is fine. */
static int
ensure_bucket(struct rpc_client *cl, const char *bucket)
{
	union rpc_unary_req req = { .bucket = { .bucket = bucket } };
	struct rpc_unary_resp resp;
	struct rpc_status st;
	int rc;

	rc = rpc_client_call(cl, RPC_CREATE_BUCKET, &req, &resp, &st);
	rpc_unary_resp_fini(&resp);
	if (rc == 0 || zc_err_is(rc, ZC_BUCKET_EXISTS) || zc_err_is(st.err, ZC_NOT_IMPLEMENTED))
		return 0; /* UNIMPLEMENTED: a sink server has no buckets */
	fprintf(stderr, "zest-bench grpc: cannot create bucket %s: %s\n", bucket, st.msg);
	return rc;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "usage: zest-bench grpc --datanode HOST:PORT [options]\n"
	        "  --datanode HOST:PORT   datanode (or rpc_sink_server) to write to (required)\n"
	        "  --obj.size SIZE        object size (default 16MiB)\n"
	        "  --concurrent N         concurrent Write streams (default 8)\n"
	        "  --duration D           run for D (default 10s) ...\n"
	        "  --objects N            ... or until N objects are written\n"
	        "  --warmup D             uncounted time before the measured run (default 0s)\n"
	        "  --bucket NAME          bucket to write to, created if missing (default bench)\n"
	        "  --chunk SIZE           data bytes per WriteChunk (default 1MiB)\n"
	        "  --max-inflight SIZE    unsent bytes per stream (default 4MiB)\n"
	        "  --threads N            client completion-queue threads (default 1)\n"
	        "  --channels N           TCP connections, streams spread over them (default 1)\n"
	        "  --json                 one JSON line instead of text\n"
	        "  --cluster-ca FILE      PEM cluster CA the datanode's certificate must chain to\n"
	        "  --cluster-cert FILE    PEM client certificate signed by that CA\n"
	        "  --cluster-key FILE     its private key\n"
	        "  --insecure             plaintext gRPC (the three --cluster-* flags or this are\n"
	        "                         required)\n");
}

int
bench_grpc_main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "datanode", required_argument, NULL, 'd' },
		{ "obj.size", required_argument, NULL, 's' },
		{ "concurrent", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 't' },
		{ "objects", required_argument, NULL, 'n' },
		{ "chunk", required_argument, NULL, 'k' },
		{ "max-inflight", required_argument, NULL, 'i' },
		{ "threads", required_argument, NULL, 'T' },
		{ "channels", required_argument, NULL, 'C' },
		{ "json", no_argument, NULL, 'j' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "bucket", required_argument, NULL, 'b' },
		{ "cluster-ca", required_argument, NULL, 'A' },
		{ "cluster-cert", required_argument, NULL, 'E' },
		{ "cluster-key", required_argument, NULL, 'K' },
		{ "insecure", no_argument, NULL, 'I' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rpc_client_opts co = { 0 };
	struct bench b;
	uint64_t duration = 10ull * 1000000000ull, warmup = 0, t0, v, period;
	unsigned concurrent = 8;
	bool json = false, have_objects = false;
	double secs;
	int c, rc = 0;

	memset(&b, 0, sizeof(b));
	b.obj_size = 16u << 20;
	b.chunk = 1u << 20;
	b.bucket = "bench";
	snprintf(b.prefix, sizeof(b.prefix), "bench-%lx-%d", (long)time(NULL), getpid());
	optind = 1;
	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		switch (c) {
		case 'd':
			co.target = optarg;
			break;
		case 's':
		case 'k':
		case 'i':
			if (zc_parse_size(optarg, &v)) {
				fprintf(stderr, "zest-bench grpc: bad size '%s'\n", optarg);
				return 2;
			}
			if (c == 's')
				b.obj_size = v;
			else if (c == 'k')
				b.chunk = v;
			else
				co.max_inflight = v;
			break;
		case 'c':
			concurrent = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 't':
			if (zc_parse_duration_ns(optarg, &duration)) {
				fprintf(stderr, "zest-bench grpc: bad duration '%s'\n", optarg);
				return 2;
			}
			break;
		case 'n':
			b.objects_max = strtoull(optarg, NULL, 10);
			have_objects = true;
			break;
		case 'T':
			co.cq_threads = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'C':
			co.channels = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'j':
			json = true;
			break;
		case 'w':
			if (zc_parse_duration_ns(optarg, &warmup)) {
				fprintf(stderr, "zest-bench grpc: bad warmup '%s'\n", optarg);
				return 2;
			}
			break;
		case 'b':
			b.bucket = optarg;
			break;
		case 'A':
			co.tls.ca_file = optarg;
			break;
		case 'E':
			co.tls.cert_file = optarg;
			break;
		case 'K':
			co.tls.key_file = optarg;
			break;
		case 'I':
			co.tls.insecure = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!co.target || !concurrent || !b.chunk || (have_objects && !b.objects_max)) {
		usage(stderr);
		return 2;
	}
	if (b.chunk > RPC_DEFAULT_MAX_MESSAGE)
		co.max_message = b.chunk;
	b.src = malloc(b.chunk);
	b.slots = calloc(concurrent, sizeof(*b.slots));
	bench_stats_init(&b.stats, "grpc-put");
	if (!b.src || !b.slots) {
		fprintf(stderr, "zest-bench grpc: out of memory\n");
		return 1;
	}
	for (uint64_t i = 0; i < b.chunk; i++)
		b.src[i] = (uint8_t)(i * 131 + (i >> 9));
	if (rpc_client_create(&co, &b.cl)) {
		fprintf(stderr, "zest-bench grpc: cannot create a client for %s\n", co.target);
		return 1;
	}
	if (ensure_bucket(b.cl, b.bucket) < 0) {
		rpc_client_destroy(b.cl);
		return 1;
	}
	pthread_mutex_init(&b.mu, NULL);
	pthread_cond_init(&b.cond, NULL);
	b.n_slots = concurrent;
	b.active = concurrent;
	t0 = zc_now_ns();
	b.measure_from = have_objects ? t0 : t0 + warmup;
	b.deadline_ns = have_objects ? UINT64_MAX : b.measure_from + duration;
	for (unsigned i = 0; i < concurrent; i++) {
		b.slots[i].b = &b;
		b.slots[i].id = (int)i;
		pthread_mutex_init(&b.slots[i].mu, NULL);
	}
	for (unsigned i = 0; i < concurrent; i++)
		slot_start(&b.slots[i]);
	pthread_mutex_lock(&b.mu);
	while (b.active)
		pthread_cond_wait(&b.cond, &b.mu);
	pthread_mutex_unlock(&b.mu);
	secs = (double)(zc_now_ns() - b.measure_from) / 1e9;
	rpc_client_destroy(b.cl);

	/* A timed run is measured over --duration; objects still open then count as late. */
	period = have_objects ? (uint64_t)(secs * 1e9) : duration;
	if (json) {
		bench_report_json(stdout, &b.stats, period);
		printf("\n");
	} else {
		bench_print_context(stdout, argc, argv);
		bench_report_text(stdout, &b.stats, concurrent, period);
	}
	if (b.stats.errors) {
		fprintf(stderr, "zest-bench grpc: %llu errors, first: %s\n",
		        (unsigned long long)b.stats.errors, b.stats.first_errors[0]);
		rc = 1;
	}
	bench_stats_fini(&b.stats);
	for (unsigned i = 0; i < concurrent; i++)
		pthread_mutex_destroy(&b.slots[i].mu);
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.mu);
	free(b.slots);
	free(b.src);
	return rc;
}
