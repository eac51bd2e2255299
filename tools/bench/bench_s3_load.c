/*
 * The S3 load engine (bench_s3_load.h): workers on libcurl, one handle each, and the
 * preload, run and clean-up phases over them.
 */
#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>

#include "bench_s3_load.h"
#include "zc.h"

const char *const bench_s3_op_names[BENCH_S3_OPS] = { "PUT", "GET", "DELETE" };

struct worker {
	pthread_t thread;
	unsigned id;
	struct bench_s3_load *load;
	CURL *curl;
	uint64_t rng;
	struct bench_stats stats[BENCH_S3_OPS];
	uint64_t put_seq; /* objects this worker PUT: key <prefix>/w<id>/<seq> */
	uint64_t del_seq; /* objects of its own it deleted */
	char err[128];    /* start of an error response body */
	size_t err_len;
	uint64_t got; /* body bytes received */
};

struct bench_s3_load {
	struct bench_s3_config cfg;
	char prefix[64];            /* keys of this load */
	uint8_t *payload;           /* obj_size bytes, shared read-only */
	struct curl_slist *headers; /* every handle's extra headers; outlives the handles */
	struct worker *ws;
	/* the run in progress */
	unsigned mix[BENCH_S3_OPS];
	uint64_t warmup_ns, duration_ns;
	atomic_ullong progress_bytes, progress_ops, progress_errors;
	atomic_bool stop_now;
	atomic_uint preload_next; /* next preloaded object to upload or clean up */
	atomic_uint delete_next;  /* DELETE of preloaded objects: the next one */
	unsigned preloaded;       /* preloaded objects that exist (from delete_next on) */
};

struct upload_pos {
	const struct bench_s3_load *load;
	uint64_t pos;
};

static size_t
read_payload(char *buf, size_t size, size_t n, void *arg)
{
	struct upload_pos *p = arg;
	size_t want = size * n, left = p->load->cfg.obj_size - p->pos;

	if (want > left)
		want = left;
	/* curl owns buf; filling it is the one copy an HTTP client library makes. */
	memcpy(buf, p->load->payload + p->pos, want);
	p->pos += want;
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

/*
 * One request into rep (bench_s3_load_request); returns the HTTP status, or 0 with w->err
 * set on a transport error (never a status: run_op's -status - 1 makes it a failure).
 */
static long
request(struct worker *w, enum bench_s3_op op, const char *key, struct bench_s3_reply *rep)
{
	const struct bench_s3_config *cfg = &w->load->cfg;
	struct upload_pos pos = { w->load, 0 };
	bool upload = op == BENCH_S3_PUT && key; /* a PUT without a key creates the bucket */
	char url[2048];
	CURLcode rc;
	long status = 0;

	snprintf(url, sizeof(url), "%s://%s/%s%s%s", cfg->tls ? "https" : "http", cfg->host,
	         cfg->bucket, key ? "/" : "", key ? key : "");
	w->err_len = 0;
	w->got = 0;
	curl_easy_setopt(w->curl, CURLOPT_URL, url);
	curl_easy_setopt(w->curl, CURLOPT_UPLOAD, upload ? 1L : 0L);
	curl_easy_setopt(w->curl, CURLOPT_CUSTOMREQUEST, upload ? NULL : bench_s3_op_names[op]);
	if (upload) {
		curl_easy_setopt(w->curl, CURLOPT_READFUNCTION, read_payload);
		curl_easy_setopt(w->curl, CURLOPT_READDATA, &pos);
		curl_easy_setopt(w->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)cfg->obj_size);
	}
	rep->start_ns = zc_now_ns();
	rc = curl_easy_perform(w->curl);
	rep->end_ns = zc_now_ns();
	w->err[w->err_len] = 0;
	if (rc != CURLE_OK)
		snprintf(w->err, sizeof(w->err), "%s", curl_easy_strerror(rc));
	else
		curl_easy_getinfo(w->curl, CURLINFO_RESPONSE_CODE, &status);
	rep->status = status;
	rep->bytes = w->got;
	rep->err = w->err;
	return status;
}

static void
key_of(const struct bench_s3_load *l, unsigned worker, uint64_t seq, char *out, size_t n)
{
	snprintf(out, n, "%s/w%u/%llu", l->prefix, worker, (unsigned long long)seq);
}

static void
preload_key(const struct bench_s3_load *l, unsigned i, char *out, size_t n)
{
	snprintf(out, n, "%s/pre/%u", l->prefix, i);
}

static CURL *
new_handle(const struct bench_s3_load *l, struct worker *w)
{
	char sigv4[128], userpwd[512];
	CURL *c = curl_easy_init();

	if (!c)
		return NULL;
	snprintf(sigv4, sizeof(sigv4), "aws:amz:%s:s3", l->cfg.region);
	snprintf(userpwd, sizeof(userpwd), "%s:%s", l->cfg.access_key, l->cfg.secret_key);
	curl_easy_setopt(c, CURLOPT_AWS_SIGV4, sigv4);
	curl_easy_setopt(c, CURLOPT_USERPWD, userpwd);
	curl_easy_setopt(c, CURLOPT_HTTPHEADER, l->headers); /* not copied: must outlive c */
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, write_body);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, w);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, (long)l->cfg.timeout_s);
	if (l->cfg.insecure) {
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	return c;
}

static enum bench_s3_op
pick_op(struct worker *w)
{
	unsigned r =
	        (unsigned)(((w->rng = w->rng * 6364136223846793005ULL + 1442695040888963407ULL) >>
	                    33) %
	                   100);

	for (int op = 0; op < BENCH_S3_OPS; op++) {
		if (r < w->load->mix[op])
			return (enum bench_s3_op)op;
		r -= w->load->mix[op];
	}
	return BENCH_S3_PUT;
}

/*
 * Run one op; returns bytes moved (>= 0) or -status - 1 on a failure (recorded by the
 * caller; -1: no response, or nothing to do once stop_now is set).
 */
static long long
run_op(struct worker *w, enum bench_s3_op op)
{
	struct bench_s3_load *l = w->load;
	struct bench_s3_reply rep;
	char key[256];
	long status;

	switch (op) {
	case BENCH_S3_PUT:
		key_of(l, w->id, w->put_seq, key, sizeof(key));
		status = request(w, BENCH_S3_PUT, key, &rep);
		if (status != 200)
			return -status - 1;
		w->put_seq++;
		return (long long)l->cfg.obj_size;
	case BENCH_S3_GET:
		if (!l->preloaded)
			return -1;
		preload_key(l, (unsigned)((w->rng >> 17) % l->preloaded), key, sizeof(key));
		status = request(w, BENCH_S3_GET, key, &rep);
		return status == 200 ? (long long)rep.bytes : -status - 1;
	case BENCH_S3_DELETE:
		if (l->mix[BENCH_S3_PUT] == 0) { /* the preloaded objects, once each */
			unsigned i = atomic_fetch_add(&l->delete_next, 1);

			if (i >= l->preloaded) {
				atomic_store(&l->stop_now, true);
				return -1;
			}
			preload_key(l, i, key, sizeof(key));
		} else if (w->del_seq < w->put_seq) {
			key_of(l, w->id, w->del_seq++, key, sizeof(key));
		} else {
			return 0; /* nothing of ours to delete yet */
		}
		status = request(w, BENCH_S3_DELETE, key, &rep);
		return status == 204 || status == 200 ? 0 : -status - 1;
	default:
		return -1;
	}
}

static void *
worker_main(void *arg)
{
	struct worker *w = arg;
	struct bench_s3_load *l = w->load;
	uint64_t start = zc_now_ns(), measure_from = start + l->warmup_ns;
	uint64_t end = measure_from + l->duration_ns;

	for (;;) {
		uint64_t t0 = zc_now_ns(), t1;
		enum bench_s3_op op;
		long long r;

		if (t0 >= end || atomic_load(&l->stop_now))
			break;
		op = pick_op(w);
		r = run_op(w, op);
		t1 = zc_now_ns();
		if (r == -1 && atomic_load(&l->stop_now))
			break;
		if (t0 < measure_from)
			continue;
		if (r < 0) {
			bench_stats_error(&w->stats[op], "%s: HTTP %lld %s", bench_s3_op_names[op],
			                  -r - 1, w->err);
			atomic_fetch_add(&l->progress_errors, 1);
		} else {
			bench_stats_ok(&w->stats[op], t0 - measure_from, t1 - t0, (uint64_t)r);
			atomic_fetch_add(&l->progress_bytes, (unsigned long long)r);
			atomic_fetch_add(&l->progress_ops, 1);
		}
	}
	return NULL;
}

/* Upload the objects that GET and DELETE work on, with every worker's handle. */
static void *
preload_main(void *arg)
{
	struct worker *w = arg;
	struct bench_s3_load *l = w->load;
	struct bench_s3_reply rep;
	char key[256];

	for (;;) {
		unsigned i = atomic_fetch_add(&l->preload_next, 1);
		long status;

		if (i >= l->cfg.objects)
			break;
		preload_key(l, i, key, sizeof(key));
		status = request(w, BENCH_S3_PUT, key, &rep);
		if (status != 200) {
			fprintf(stderr, "%s: preload %s: HTTP %ld %s\n", l->cfg.name, key, status,
			        rep.err);
			atomic_store(&l->stop_now, true);
			break;
		}
	}
	return NULL;
}

/* Delete what this load created (clean-up, uncounted). */
static void *
cleanup_main(void *arg)
{
	struct worker *w = arg;
	struct bench_s3_load *l = w->load;
	struct bench_s3_reply rep;
	char key[256];

	for (; w->del_seq < w->put_seq; w->del_seq++) {
		key_of(l, w->id, w->del_seq, key, sizeof(key));
		request(w, BENCH_S3_DELETE, key, &rep);
	}
	for (;;) {
		unsigned i = atomic_fetch_add(&l->preload_next, 1);

		if (i >= l->preloaded)
			break;
		preload_key(l, i, key, sizeof(key));
		request(w, BENCH_S3_DELETE, key, &rep);
	}
	return NULL;
}

static void
run_workers(struct bench_s3_load *l, void *(*fn)(void *))
{
	for (unsigned i = 0; i < l->cfg.concurrent; i++)
		pthread_create(&l->ws[i].thread, NULL, fn, &l->ws[i]);
	for (unsigned i = 0; i < l->cfg.concurrent; i++)
		pthread_join(l->ws[i].thread, NULL);
}

static void *
progress_main(void *arg)
{
	struct bench_s3_load *l = arg;
	uint64_t t0 = zc_now_ns();

	while (!atomic_load(&l->stop_now)) {
		double s = (double)(zc_now_ns() - t0) / 1e9;

		usleep(500000);
		fprintf(stderr, "\r%6.1fs  %10.2f MiB/s  %8.1f obj/s  errors %llu   ", s,
		        s > 0 ? (double)atomic_load(&l->progress_bytes) / 1048576.0 / s : 0,
		        s > 0 ? (double)atomic_load(&l->progress_ops) / s : 0,
		        (unsigned long long)atomic_load(&l->progress_errors));
		if (s * 1e9 > (double)(l->duration_ns + l->warmup_ns) + 1e9)
			break;
	}
	fprintf(stderr, "\r%78s\r", "");
	return NULL;
}

static int
ensure_bucket(struct worker *w)
{
	struct bench_s3_reply rep;
	long status = request(w, BENCH_S3_PUT, NULL, &rep);

	if (status == 200 || status == 409)
		return 0;
	fprintf(stderr, "%s: cannot create bucket %s: HTTP %ld %s\n", w->load->cfg.name,
	        w->load->cfg.bucket, status, rep.err);
	return -EIO;
}

void
bench_s3_config_defaults(struct bench_s3_config *c)
{
	*c = (struct bench_s3_config){ .host = "127.0.0.1:9000",
		                       .access_key = getenv("ZEST_ACCESS_KEY") ?: "zestadmin",
		                       .secret_key = getenv("ZEST_SECRET_KEY") ?: "zestsecret",
		                       .region = "us-east-1",
		                       .obj_size = 1 << 20 };
}

int
bench_s3_parse_opt(int opt, const char *arg, struct bench_s3_config *c)
{
	unsigned long v;
	char *end;

	switch (opt) {
	case 'H':
		c->host = arg;
		return 1;
	case 'a':
		c->access_key = arg;
		return 1;
	case 's':
		c->secret_key = arg;
		return 1;
	case 'r':
		c->region = arg;
		return 1;
	case 'T':
		c->tls = true;
		return 1;
	case 'k':
		c->insecure = true;
		return 1;
	case 'b':
		c->bucket = arg;
		return 1;
	case 'z':
		return zc_parse_size(arg, &c->obj_size) < 0 ? -EINVAL : 1;
	case 'c':
		errno = 0;
		v = strtoul(arg, &end, 10);
		if (errno || end == arg || *end || v < 1 || v > 1024)
			return -EINVAL;
		c->concurrent = (unsigned)v;
		return 1;
	default:
		return 0;
	}
}

long
bench_s3_load_request(struct bench_s3_load *l, unsigned worker, enum bench_s3_op op,
                      const char *key, struct bench_s3_reply *reply)
{
	assert(worker < l->cfg.concurrent);
	return request(&l->ws[worker], op, key, reply);
}

int
bench_s3_load_create(const struct bench_s3_config *cfg, struct bench_s3_load **out)
{
	static atomic_uint seq;
	struct bench_s3_load *l = calloc(1, sizeof(*l));
	int rc = -ENOMEM;

	*out = NULL;
	if (!l)
		return -ENOMEM;
	l->cfg = *cfg;
	if (!l->cfg.name)
		l->cfg.name = "zest-bench s3";
	if (!l->cfg.timeout_s)
		l->cfg.timeout_s = 300;
	snprintf(l->prefix, sizeof(l->prefix), "bench-%lx-%d-%u", (long)time(NULL), getpid(),
	         atomic_fetch_add(&seq, 1));
	curl_global_init(CURL_GLOBAL_DEFAULT);
	l->payload = malloc(cfg->obj_size ? cfg->obj_size : 1);
	l->ws = calloc(cfg->concurrent, sizeof(*l->ws));
	/* curl 7.88 does not add it itself; S3 needs it in the signed headers. No "Expect:" to
	 * switch 100-continue off: curl 7.88 signs that removed header ("expect" in
	 * SignedHeaders) without sending it, so every request fails with
	 * SignatureDoesNotMatch; the gateway answers 100-continue at once. */
	l->headers = curl_slist_append(NULL, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
	if (!l->payload || !l->ws || !l->headers)
		goto fail;
	for (uint64_t i = 0; i < cfg->obj_size; i++)
		l->payload[i] = (uint8_t)(i * 2654435761u >> 13);
	for (unsigned i = 0; i < cfg->concurrent; i++) {
		l->ws[i].id = i;
		l->ws[i].load = l;
		l->ws[i].rng = 0x9E3779B97F4A7C15ull * (i + 1);
		l->ws[i].curl = new_handle(l, &l->ws[i]);
		if (!l->ws[i].curl)
			goto fail;
	}
	rc = ensure_bucket(&l->ws[0]);
	if (rc < 0)
		goto fail;
	*out = l;
	return 0;
fail:
	bench_s3_load_destroy(l);
	return rc;
}

int
bench_s3_load_preload(struct bench_s3_load *l)
{
	atomic_store(&l->stop_now, false);
	atomic_store(&l->preload_next, 0);
	run_workers(l, preload_main);
	/* on a failure, the objects up to the failed one may exist: clean-up tries them all */
	l->preloaded = l->cfg.objects;
	atomic_store(&l->delete_next, 0);
	return atomic_load(&l->stop_now) ? -EIO : 0;
}

int
bench_s3_load_run(struct bench_s3_load *l, const unsigned mix[BENCH_S3_OPS], uint64_t warmup_ns,
                  uint64_t duration_ns, bool progress, struct bench_stats total[BENCH_S3_OPS])
{
	pthread_t progress_thread;
	int rc = 0;

	memcpy(l->mix, mix, sizeof(l->mix));
	l->warmup_ns = warmup_ns;
	l->duration_ns = duration_ns;
	atomic_store(&l->stop_now, false);
	atomic_store(&l->progress_bytes, 0);
	atomic_store(&l->progress_ops, 0);
	atomic_store(&l->progress_errors, 0);
	for (unsigned i = 0; i < l->cfg.concurrent; i++)
		for (int op = 0; op < BENCH_S3_OPS; op++)
			bench_stats_init(&l->ws[i].stats[op], bench_s3_op_names[op]);
	if (progress && pthread_create(&progress_thread, NULL, progress_main, l) != 0)
		progress = false;
	run_workers(l, worker_main);
	if (progress) {
		atomic_store(&l->stop_now, true);
		pthread_join(progress_thread, NULL);
	}
	for (int op = 0; op < BENCH_S3_OPS; op++) {
		bench_stats_init(&total[op], bench_s3_op_names[op]);
		for (unsigned i = 0; i < l->cfg.concurrent; i++)
			if (bench_stats_merge(&total[op], &l->ws[i].stats[op]) < 0)
				rc = -ENOMEM;
	}
	for (unsigned i = 0; i < l->cfg.concurrent; i++)
		for (int op = 0; op < BENCH_S3_OPS; op++)
			bench_stats_fini(&l->ws[i].stats[op]);
	return rc;
}

void
bench_s3_load_clear(struct bench_s3_load *l)
{
	unsigned d = atomic_load(&l->delete_next);

	atomic_store(&l->stop_now, false);
	/* DELETE runs already removed the preloaded objects before delete_next. */
	atomic_store(&l->preload_next, d < l->preloaded ? d : l->preloaded);
	run_workers(l, cleanup_main);
	l->preloaded = 0;
	atomic_store(&l->delete_next, 0);
}

void
bench_s3_load_destroy(struct bench_s3_load *l)
{
	if (!l)
		return;
	for (unsigned i = 0; l->ws && i < l->cfg.concurrent; i++)
		if (l->ws[i].curl)
			curl_easy_cleanup(l->ws[i].curl);
	curl_slist_free_all(l->headers); /* after the last handle that used it */
	curl_global_cleanup();
	free(l->ws);
	free(l->payload);
	free(l);
}
