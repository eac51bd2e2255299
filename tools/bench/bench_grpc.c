/*
 * zest-bench grpc: stream objects straight to a datanode's Write RPC and report the
 * throughput. N streams run concurrently on the rpc client's completion-queue thread(s)
 * (the way the S3 gateway drives them): each sends --chunk sized WriteChunks from one
 * static source buffer (sent without a copy), refills on `writable`, and opens the next
 * object from its done callback. Per-object latency is reported as p50/p99/p99.9.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "rpc.h"
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
	uint64_t obj_size, chunk, objects_max, deadline_ns;
	uint8_t *src;
	struct slot *slots;
	unsigned n_slots;
	atomic_ullong started, done_objects, bytes, errors;
	pthread_mutex_t mu;
	pthread_cond_t cond;
	unsigned active;
	double *lat_ms;
	size_t n_lat, cap_lat;
	char first_error[RPC_STATUS_MSG_MAX + 32];
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
			rc = rpc_cwrite_commit(s->w, &seg, n ? 1 : 0, NULL, NULL, 0);
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
	  const Zest__WriteResult *res)
{
	struct slot *s = arg;
	struct bench *b = s->b;
	double ms = (double)(zc_now_ns() - s->t0) / 1e6;

	if (st->code == GRPC_STATUS_OK && res && res->size == b->obj_size) {
		atomic_fetch_add(&b->done_objects, 1);
		atomic_fetch_add(&b->bytes, b->obj_size);
	} else {
		atomic_fetch_add(&b->errors, 1);
		pthread_mutex_lock(&b->mu);
		if (!b->first_error[0])
			snprintf(b->first_error, sizeof(b->first_error), "status %d: %s", st->code,
				 st->msg);
		pthread_mutex_unlock(&b->mu);
	}
	pthread_mutex_lock(&b->mu);
	if (b->n_lat < b->cap_lat)
		b->lat_ms[b->n_lat++] = ms;
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
	Zest__WriteOpen open = ZEST__WRITE_OPEN__INIT;
	struct rpc_cwrite_cbs cbs = { slot_writable, slot_done };
	struct rpc_cwrite *w;
	char key[64];
	bool stop = zc_now_ns() >= b->deadline_ns;

	if (!stop && b->objects_max) {
		uint64_t n = atomic_fetch_add(&b->started, 1);

		stop = n >= b->objects_max;
	}
	if (!stop) {
		snprintf(key, sizeof(key), "bench/%d/%u", s->id, s->seq++);
		open.bucket = "bench";
		open.key = key;
		open.size = b->obj_size;
		open.size_known = true;
		pthread_mutex_lock(&s->mu);
		s->off = 0;
		s->t0 = zc_now_ns();
		if (rpc_cwrite_open(b->cl, &open, &cbs, s, &w)) {
			pthread_mutex_unlock(&s->mu);
			atomic_fetch_add(&b->errors, 1);
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

static int
cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double
pct(const double *v, size_t n, double p)
{
	size_t i;

	if (!n)
		return 0;
	i = (size_t)(p * (double)(n - 1) + 0.5);
	return v[i < n ? i : n - 1];
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
		"  --chunk SIZE           data bytes per WriteChunk (default 1MiB)\n"
		"  --max-inflight SIZE    unsent bytes per stream (default 4MiB)\n"
		"  --threads N            client completion-queue threads (default 1)\n"
		"  --channels N           TCP connections, streams spread over them (default 1)\n"
		"  --json                 one JSON line instead of text\n");
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
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct rpc_client_opts co = { 0 };
	struct bench b;
	uint64_t duration = 10ull * 1000000000ull, t0, v;
	unsigned concurrent = 8;
	bool json = false, have_objects = false;
	double secs;
	int c, rc = 0;

	memset(&b, 0, sizeof(b));
	b.obj_size = 16u << 20;
	b.chunk = 1u << 20;
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
	b.cap_lat = 1u << 20;
	b.lat_ms = malloc(b.cap_lat * sizeof(*b.lat_ms));
	if (!b.src || !b.slots || !b.lat_ms) {
		fprintf(stderr, "zest-bench grpc: out of memory\n");
		return 1;
	}
	for (uint64_t i = 0; i < b.chunk; i++)
		b.src[i] = (uint8_t)(i * 131 + (i >> 9));
	if (rpc_client_create(&co, &b.cl)) {
		fprintf(stderr, "zest-bench grpc: cannot create a client for %s\n", co.target);
		return 1;
	}
	pthread_mutex_init(&b.mu, NULL);
	pthread_cond_init(&b.cond, NULL);
	b.n_slots = concurrent;
	b.active = concurrent;
	t0 = zc_now_ns();
	b.deadline_ns = have_objects ? UINT64_MAX : t0 + duration;
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
	secs = (double)(zc_now_ns() - t0) / 1e9;
	rpc_client_destroy(b.cl);

	qsort(b.lat_ms, b.n_lat, sizeof(*b.lat_ms), cmp_double);
	{
		unsigned long long objs = atomic_load(&b.done_objects);
		unsigned long long bytes = atomic_load(&b.bytes);
		unsigned long long errs = atomic_load(&b.errors);
		double mibs = secs > 0 ? (double)bytes / 1048576.0 / secs : 0;

		if (json) {
			printf("{\"operation\":\"grpc-put\",\"objects\":%llu,\"bytes\":%llu,"
			       "\"seconds\":%.3f,\"mib_per_s\":%.1f,\"errors\":%llu,"
			       "\"p50_ms\":%.2f,\"p99_ms\":%.2f,\"p999_ms\":%.2f}\n",
			       objs, bytes, secs, mibs, errs, pct(b.lat_ms, b.n_lat, 0.5),
			       pct(b.lat_ms, b.n_lat, 0.99), pct(b.lat_ms, b.n_lat, 0.999));
		} else {
			bench_print_context(stdout, argc, argv);
			printf("grpc-put  objects %llu  bytes %llu  seconds %.3f  %.1f MiB/s  "
			       "errors %llu\n",
			       objs, bytes, secs, mibs, errs);
			printf("latency per object: p50 %.2f ms  p99 %.2f ms  p99.9 %.2f ms\n",
			       pct(b.lat_ms, b.n_lat, 0.5), pct(b.lat_ms, b.n_lat, 0.99),
			       pct(b.lat_ms, b.n_lat, 0.999));
		}
		if (errs) {
			fprintf(stderr, "zest-bench grpc: %llu errors, first: %s\n", errs,
				b.first_error);
			rc = 1;
		}
	}
	for (unsigned i = 0; i < concurrent; i++)
		pthread_mutex_destroy(&b.slots[i].mu);
	pthread_cond_destroy(&b.cond);
	pthread_mutex_destroy(&b.mu);
	free(b.lat_ms);
	free(b.slots);
	free(b.src);
	return rc;
}
