/*
 * zest-bench s3: an S3 load generator in warp's shape, on libcurl (CURLOPT_AWS_SIGV4).
 *
 * Each of --concurrent worker threads owns one curl handle (one keep-alive connection)
 * and issues operations back to back until --duration ends; operations that start during
 * --warmup are not counted. get, delete and mixed first upload --objects objects to read
 * or delete. Objects this run created are deleted at the end unless --noclear.
 */
#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench.h"
#include "bench_report.h"
#include "zc.h"

enum op { OP_PUT, OP_GET, OP_DELETE, OP_COUNT };
static const char *const op_names[OP_COUNT] = { "PUT", "GET", "DELETE" };

struct config {
	const char *host, *access_key, *secret_key, *bucket, *region;
	bool tls, insecure, json, noclear;
	uint64_t obj_size, duration_ns, warmup_ns;
	unsigned concurrent, objects;
	unsigned mix[OP_COUNT]; /* percent per op */
	char prefix[64];        /* keys of this run */
	const uint8_t *payload; /* obj_size bytes, shared read-only */
	struct curl_slist *headers; /* every handle's extra headers; bench_s3_main owns it */
};

struct worker {
	pthread_t thread;
	unsigned id;
	const struct config *cfg;
	CURL *curl;
	uint64_t rng;
	struct bench_stats stats[OP_COUNT];
	uint64_t put_seq;   /* objects this worker PUT: key <prefix>/w<id>/<seq> */
	uint64_t del_seq;   /* objects of its own it deleted (mixed) */
	char err[128];      /* start of an error response body */
	size_t err_len;
	uint64_t got;       /* body bytes received */
};

static atomic_ullong progress_bytes, progress_ops, progress_errors;
static atomic_bool stop_now;
static atomic_uint preload_next; /* next preloaded object to upload or clean up */
static atomic_uint delete_next;  /* delete mode: next preloaded object to delete */

static size_t
read_payload(char *buf, size_t size, size_t n, void *arg)
{
	uint64_t *pos = arg;
	const struct config *cfg = (const struct config *)pos[1];
	size_t want = size * n, left = cfg->obj_size - pos[0];

	if (want > left)
		want = left;
	/* curl owns buf; filling it is the one copy an HTTP client library makes. */
	memcpy(buf, cfg->payload + pos[0], want);
	pos[0] += want;
	return want;
}

static size_t
write_body(char *buf, size_t size, size_t n, void *arg)
{
	struct worker *w = arg;
	size_t len = size * n;

	if (w->err_len < sizeof(w->err) - 1) {
		size_t take = sizeof(w->err) - 1 - w->err_len;

		take = len < take ? len : take;
		memcpy(w->err + w->err_len, buf, take);
		w->err_len += take;
	}
	w->got += len;
	return len;
}

static void
object_url(const struct config *cfg, const char *key, char *out, size_t n)
{
	snprintf(out, n, "%s://%s/%s%s%s", cfg->tls ? "https" : "http", cfg->host, cfg->bucket,
		 key ? "/" : "", key ? key : "");
}

/* One request; returns the HTTP status, or -1 with w->err set on a transport error. */
static long
request(struct worker *w, const char *method, const char *key, bool upload)
{
	const struct config *cfg = w->cfg;
	char url[2048];
	uint64_t pos[2] = { 0, (uint64_t)(uintptr_t)cfg };
	CURLcode rc;
	long status = 0;

	object_url(cfg, key, url, sizeof(url));
	w->err_len = 0;
	w->got = 0;
	curl_easy_setopt(w->curl, CURLOPT_URL, url);
	curl_easy_setopt(w->curl, CURLOPT_UPLOAD, upload ? 1L : 0L);
	curl_easy_setopt(w->curl, CURLOPT_NOBODY, !strcmp(method, "HEAD") ? 1L : 0L);
	curl_easy_setopt(w->curl, CURLOPT_CUSTOMREQUEST, upload ? NULL : method);
	if (upload) {
		curl_easy_setopt(w->curl, CURLOPT_READFUNCTION, read_payload);
		curl_easy_setopt(w->curl, CURLOPT_READDATA, pos);
		curl_easy_setopt(w->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)cfg->obj_size);
	}
	rc = curl_easy_perform(w->curl);
	if (rc != CURLE_OK) {
		snprintf(w->err, sizeof(w->err), "%s", curl_easy_strerror(rc));
		return -1;
	}
	curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
	w->err[w->err_len] = 0;
	return status;
}

static void
key_of(const struct config *cfg, unsigned worker, uint64_t seq, char *out, size_t n)
{
	snprintf(out, n, "%s/w%u/%llu", cfg->prefix, worker, (unsigned long long)seq);
}

static void
preload_key(const struct config *cfg, unsigned i, char *out, size_t n)
{
	snprintf(out, n, "%s/pre/%u", cfg->prefix, i);
}

static CURL *
new_handle(const struct config *cfg, struct worker *w)
{
	char sigv4[128], userpwd[512];
	CURL *c = curl_easy_init();

	if (!c)
		return NULL;
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", cfg->region);
	snprintf(userpwd, sizeof(userpwd), "%s:%s", cfg->access_key, cfg->secret_key);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
	curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, cfg->headers); /* not copied: must outlive c */
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 300L);
	if (cfg->insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	return c;
}

static enum op
pick_op(struct worker *w)
{
	unsigned r = (unsigned)(((w->rng = w->rng * 6364136223846793005ULL + 1442695040888963407ULL) >>
				 33) % 100);

	for (int op = 0; op < OP_COUNT; op++) {
		if (r < w->cfg->mix[op])
			return (enum op)op;
		r -= w->cfg->mix[op];
	}
	return OP_PUT;
}

/* Run one op; returns bytes moved (>= 0) or -1 on failure (recorded by the caller). */
static long long
run_op(struct worker *w, enum op op)
{
	const struct config *cfg = w->cfg;
	char key[256];
	long status;

	switch (op) {
	case OP_PUT:
		key_of(cfg, w->id, w->put_seq, key, sizeof(key));
		status = request(w, "PUT", key, true);
		if (status != 200)
			return -status - 1;
		w->put_seq++;
		return (long long)cfg->obj_size;
	case OP_GET:
		preload_key(cfg, (unsigned)((w->rng >> 17) % cfg->objects), key, sizeof(key));
		status = request(w, "GET", key, false);
		return status == 200 ? (long long)w->got : -status - 1;
	case OP_DELETE:
		if (cfg->mix[OP_PUT] == 0) { /* delete mode: the preloaded objects, once each */
			unsigned i = atomic_fetch_add(&delete_next, 1);

			if (i >= cfg->objects) {
				atomic_store(&stop_now, true);
				return -1;
			}
			preload_key(cfg, i, key, sizeof(key));
		} else if (w->del_seq < w->put_seq) {
			key_of(cfg, w->id, w->del_seq++, key, sizeof(key));
		} else {
			return 0; /* nothing of ours to delete yet */
		}
		status = request(w, "DELETE", key, false);
		return status == 204 || status == 200 ? 0 : -status - 1;
	default:
		return -1;
	}
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	const struct config *cfg = w->cfg;
	uint64_t start = zc_now_ns(), measure_from = start + cfg->warmup_ns;
	uint64_t end = measure_from + cfg->duration_ns;

	for (;;) {
		uint64_t t0 = zc_now_ns(), t1;
		enum op op;
		long long r;

		if (t0 >= end || atomic_load(&stop_now))
			break;
		op = pick_op(w);
		r = run_op(w, op);
		t1 = zc_now_ns();
		if (r == -1 && atomic_load(&stop_now))
			break;
		if (t0 < measure_from)
			continue;
		if (r < 0) {
			bench_stats_error(&w->stats[op], "%s: HTTP %lld %s", op_names[op], -r - 1,
					  w->err);
			atomic_fetch_add(&progress_errors, 1);
		} else {
			bench_stats_ok(&w->stats[op], t0 - measure_from, t1 - t0, (uint64_t)r);
			atomic_fetch_add(&progress_bytes, (unsigned long long)r);
			atomic_fetch_add(&progress_ops, 1);
		}
	}
	return NULL;
}

/* Upload the objects that get, delete and mixed work on, with every worker's handle. */
static void *
preload_main(void *arg)
{
	struct worker *w = arg;
	char key[256];

	for (;;) {
		unsigned i = atomic_fetch_add(&preload_next, 1);
		long status;

		if (i >= w->cfg->objects)
			break;
		preload_key(w->cfg, i, key, sizeof(key));
		status = request(w, "PUT", key, true);
		if (status != 200) {
			fprintf(stderr, "zest-bench s3: preload %s: HTTP %ld %s\n", key, status,
				w->err);
			atomic_store(&stop_now, true);
			break;
		}
	}
	return NULL;
}

/* Delete what this run created (cleanup, uncounted). */
static void *
cleanup_main(void *arg)
{
	struct worker *w = arg;
	char key[256];

	for (uint64_t s = w->del_seq; s < w->put_seq; s++) {
		key_of(w->cfg, w->id, s, key, sizeof(key));
		request(w, "DELETE", key, false);
	}
	for (;;) {
		unsigned i = atomic_fetch_add(&preload_next, 1);

		if (i >= w->cfg->objects)
			break;
		preload_key(w->cfg, i, key, sizeof(key));
		request(w, "DELETE", key, false);
	}
	return NULL;
}

static void
run_workers(struct worker *ws, unsigned n, void *(*fn)(void *))
{
	for (unsigned i = 0; i < n; i++)
		pthread_create(&ws[i].thread, NULL, fn, &ws[i]);
	for (unsigned i = 0; i < n; i++)
		pthread_join(ws[i].thread, NULL);
}

static void *
progress_main(void *arg)
{
	const struct config *cfg = arg;
	uint64_t t0 = zc_now_ns();

	while (!atomic_load(&stop_now)) {
		double s = (double)(zc_now_ns() - t0) / 1e9;

		usleep(500000);
		fprintf(stderr, "\r%6.1fs  %10.2f MiB/s  %8.1f obj/s  errors %llu   ", s,
			s > 0 ? (double)atomic_load(&progress_bytes) / 1048576.0 / s : 0,
			s > 0 ? (double)atomic_load(&progress_ops) / s : 0,
			(unsigned long long)atomic_load(&progress_errors));
		if (s * 1e9 > (double)(cfg->duration_ns + cfg->warmup_ns) + 1e9)
			break;
	}
	fprintf(stderr, "\r%78s\r", "");
	return NULL;
}

static const struct profile {
	const char *name;
	uint64_t size;
	unsigned get, put;
} profiles[] = {
	{ "database", 8 << 10, 70, 30 },   { "email", 4 << 10, 60, 40 },
	{ "fileserver", 64 << 10, 90, 10 }, { "streaming", 5 << 20, 80, 20 },
	{ "vdi", 4 << 10, 20, 80 },
};

static void
set_only(unsigned *mix, enum op only)
{
	for (int op = 0; op < OP_COUNT; op++)
		mix[op] = op == (int)only ? 100 : 0;
}

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: zest-bench s3 put|get|mixed|delete [options]\n"
		"  --host HOST:PORT      S3 endpoint (default 127.0.0.1:9000)\n"
		"  --access-key KEY      (default $ZEST_ACCESS_KEY or zestadmin)\n"
		"  --secret-key KEY      (default $ZEST_SECRET_KEY or zestsecret)\n"
		"  --region REGION       SigV4 region (default us-east-1)\n"
		"  --tls, --insecure     HTTPS; do not verify the certificate\n"
		"  --bucket NAME         (default zest-bench; created if missing)\n"
		"  --obj.size SIZE       object size (default 1MiB)\n"
		"  --concurrent N        parallel connections (default 8)\n"
		"  --duration D          measured time (default 30s)\n"
		"  --warmup D            uncounted time before it (default 2s)\n"
		"  --objects N           objects preloaded for get/delete/mixed (default 100)\n"
		"  --get-distrib P, --put-distrib P, --delete-distrib P   mixed percentages\n"
		"                        (default 60/30/10)\n"
		"  --profile NAME        database|email|fileserver|streaming|vdi (size and mix)\n"
		"  --noclear             keep the objects this run created\n"
		"  --json                one JSON object instead of the report\n");
}

static int
ensure_bucket(struct worker *w)
{
	long status = request(w, "PUT", NULL, false);

	if (status == 200 || status == 409)
		return 0;
	fprintf(stderr, "zest-bench s3: cannot create bucket %s: status %ld %s\n", w->cfg->bucket,
		status, w->err);
	return -1;
}

static int
parse_args(int argc, char **argv, struct config *cfg, const char **mode)
{
	static const struct option opts[] = {
		{ "host", required_argument, NULL, 'H' },
		{ "access-key", required_argument, NULL, 'a' },
		{ "secret-key", required_argument, NULL, 's' },
		{ "region", required_argument, NULL, 'r' },
		{ "tls", no_argument, NULL, 'T' },
		{ "insecure", no_argument, NULL, 'k' },
		{ "bucket", required_argument, NULL, 'b' },
		{ "obj.size", required_argument, NULL, 'z' },
		{ "concurrent", required_argument, NULL, 'c' },
		{ "duration", required_argument, NULL, 'd' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "objects", required_argument, NULL, 'o' },
		{ "get-distrib", required_argument, NULL, 'G' },
		{ "put-distrib", required_argument, NULL, 'P' },
		{ "delete-distrib", required_argument, NULL, 'D' },
		{ "profile", required_argument, NULL, 'p' },
		{ "noclear", no_argument, NULL, 'n' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	int opt, idx = 0;

	while ((opt = getopt_long(argc, argv, "h", opts, &idx)) != -1) {
		switch (opt) {
		case 'H': cfg->host = optarg; break;
		case 'a': cfg->access_key = optarg; break;
		case 's': cfg->secret_key = optarg; break;
		case 'r': cfg->region = optarg; break;
		case 'T': cfg->tls = true; break;
		case 'k': cfg->insecure = true; break;
		case 'b': cfg->bucket = optarg; break;
		case 'n': cfg->noclear = true; break;
		case 'j': cfg->json = true; break;
		case 'z':
			if (zc_parse_size(optarg, &cfg->obj_size) < 0)
				goto bad;
			break;
		case 'c':
			cfg->concurrent = (unsigned)atoi(optarg);
			if (cfg->concurrent < 1 || cfg->concurrent > 1024)
				goto bad;
			break;
		case 'd':
			if (zc_parse_duration_ns(optarg, &cfg->duration_ns) < 0)
				goto bad;
			break;
		case 'w':
			if (zc_parse_duration_ns(optarg, &cfg->warmup_ns) < 0)
				goto bad;
			break;
		case 'o':
			cfg->objects = (unsigned)atoi(optarg);
			if (cfg->objects < 1)
				goto bad;
			break;
		case 'G': cfg->mix[OP_GET] = (unsigned)atoi(optarg); break;
		case 'P': cfg->mix[OP_PUT] = (unsigned)atoi(optarg); break;
		case 'D': cfg->mix[OP_DELETE] = (unsigned)atoi(optarg); break;
		case 'p': {
			size_t i;

			for (i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++)
				if (!strcmp(optarg, profiles[i].name))
					break;
			if (i == sizeof(profiles) / sizeof(profiles[0]))
				goto bad;
			cfg->obj_size = profiles[i].size;
			cfg->mix[OP_GET] = profiles[i].get;
			cfg->mix[OP_PUT] = profiles[i].put;
			cfg->mix[OP_DELETE] = 0;
			*mode = "mixed";
			break;
		}
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return -EINVAL;
		}
	}
	if (optind < argc)
		*mode = argv[optind];
	return 0;
bad:
	fprintf(stderr, "zest-bench s3: bad value '%s' for --%s\n", optarg, opts[idx].name);
	return -EINVAL;
}

int
bench_s3_main(int argc, char **argv)
{
	struct config cfg = {
		.host = "127.0.0.1:9000",
		.access_key = getenv("ZEST_ACCESS_KEY") ? getenv("ZEST_ACCESS_KEY") : "zestadmin",
		.secret_key = getenv("ZEST_SECRET_KEY") ? getenv("ZEST_SECRET_KEY") : "zestsecret",
		.bucket = "zest-bench",
		.region = "us-east-1",
		.obj_size = 1 << 20,
		.duration_ns = 30000000000ull,
		.warmup_ns = 2000000000ull,
		.concurrent = 8,
		.objects = 100,
		.mix = { [OP_GET] = 60, [OP_PUT] = 30, [OP_DELETE] = 10 },
	};
	const char *mode = NULL;
	struct worker *ws;
	pthread_t progress;
	bool show_progress;
	uint8_t *payload;
	int rc = 0;

	if (parse_args(argc, argv, &cfg, &mode) < 0)
		return 2;
	if (!mode) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(mode, "put")) {
		set_only(cfg.mix, OP_PUT);
		cfg.objects = 0;
	} else if (!strcmp(mode, "get")) {
		set_only(cfg.mix, OP_GET);
	} else if (!strcmp(mode, "delete")) {
		set_only(cfg.mix, OP_DELETE);
		cfg.warmup_ns = 0;
	} else if (strcmp(mode, "mixed") != 0) {
		fprintf(stderr, "zest-bench s3: unknown mode '%s'\n", mode);
		return 2;
	}
	if (cfg.mix[OP_GET] + cfg.mix[OP_PUT] + cfg.mix[OP_DELETE] != 100) {
		fprintf(stderr, "zest-bench s3: the distribution must add up to 100\n");
		return 2;
	}

	payload = malloc(cfg.obj_size ? cfg.obj_size : 1);
	ws = calloc(cfg.concurrent, sizeof(*ws));
	/* curl 7.88 does not add it itself; S3 needs it in the signed headers. No "Expect:" to
	 * switch 100-continue off: curl 7.88 signs that removed header ("expect" in
	 * SignedHeaders) without sending it, so every request fails with
	 * SignatureDoesNotMatch; the gateway answers 100-continue at once. */
	cfg.headers = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (!payload || !ws || !cfg.headers) {
		curl_slist_free_all(cfg.headers);
		free(ws);
		free(payload);
		return 1;
	}
	for (uint64_t i = 0; i < cfg.obj_size; i++)
		payload[i] = (uint8_t)(i * 2654435761u >> 13);
	cfg.payload = payload;
	snprintf(cfg.prefix, sizeof(cfg.prefix), "bench-%lx-%d", (long)time(NULL), getpid());

	curl_global_init(CURL_GLOBAL_DEFAULT);
	for (unsigned i = 0; i < cfg.concurrent; i++) {
		ws[i].id = i;
		ws[i].cfg = &cfg;
		ws[i].rng = 0x9E3779B97F4A7C15ull * (i + 1);
		ws[i].curl = new_handle(&cfg, &ws[i]);
		for (int op = 0; op < OP_COUNT; op++)
			bench_stats_init(&ws[i].stats[op], op_names[op]);
	}
	if (ensure_bucket(&ws[0]) < 0) {
		rc = 1;
		goto out;
	}
	if (cfg.objects && cfg.mix[OP_PUT] != 100)
		run_workers(ws, cfg.concurrent, preload_main);
	if (atomic_load(&stop_now)) {
		rc = 1;
		goto out;
	}
	atomic_store(&preload_next, 0);

	show_progress = !cfg.json && isatty(STDERR_FILENO);
	if (show_progress)
		pthread_create(&progress, NULL, progress_main, &cfg);
	run_workers(ws, cfg.concurrent, worker_main);
	if (show_progress) {
		atomic_store(&stop_now, true);
		pthread_join(progress, NULL);
	}

	{
		struct bench_stats total[OP_COUNT];
		bool first = true;

		for (int op = 0; op < OP_COUNT; op++) {
			bench_stats_init(&total[op], op_names[op]);
			for (unsigned i = 0; i < cfg.concurrent; i++)
				bench_stats_merge(&total[op], &ws[i].stats[op]);
		}
		if (cfg.json) {
			printf("{\"mode\":\"%s\",\"concurrent\":%u,\"obj_size\":%llu,\"ops\":[", mode,
			       cfg.concurrent, (unsigned long long)cfg.obj_size);
			for (int op = 0; op < OP_COUNT; op++) {
				if (!cfg.mix[op])
					continue;
				printf("%s", first ? "" : ",");
				bench_report_json(stdout, &total[op], cfg.duration_ns);
				first = false;
			}
			printf("]}\n");
		} else {
			bench_print_context(stdout, argc, argv);
			for (int op = 0; op < OP_COUNT; op++)
				if (cfg.mix[op])
					bench_report_text(stdout, &total[op], cfg.concurrent,
							  cfg.duration_ns);
		}
		for (int op = 0; op < OP_COUNT; op++) {
			if (total[op].errors)
				rc = 1;
			bench_stats_fini(&total[op]);
		}
	}
	if (!cfg.noclear) {
		atomic_store(&stop_now, false);
		/* In delete mode the run already removed the preloaded objects before delete_next. */
		atomic_store(&preload_next, atomic_load(&delete_next) < cfg.objects
						    ? atomic_load(&delete_next) : cfg.objects);
		run_workers(ws, cfg.concurrent, cleanup_main);
	}
out:
	for (unsigned i = 0; i < cfg.concurrent; i++) {
		curl_easy_cleanup(ws[i].curl);
		for (int op = 0; op < OP_COUNT; op++)
			bench_stats_fini(&ws[i].stats[op]);
	}
	curl_slist_free_all(cfg.headers); /* after the last handle that used it */
	curl_global_cleanup();
	free(ws);
	free(payload);
	return rc;
}
