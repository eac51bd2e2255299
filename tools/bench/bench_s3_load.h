/*
 * The S3 load engine of `zest-bench s3`, shared with `zest-prof --s3`: warp-shaped workers
 * on libcurl (CURLOPT_AWS_SIGV4, `UNSIGNED-PAYLOAD`), each owning one curl handle (one
 * keep-alive connection) and issuing operations back to back for a period.
 *
 * A load object keeps its handles, its payload and the keys it created across runs, so that
 * a caller can preload objects, run PUTs, then GETs, and take its own measurements between
 * the phases (zest-prof reads the daemons' /proc and /metrics there). Keys are
 * <prefix>/w<worker>/<seq> for PUTs and <prefix>/pre/<i> for preloaded objects, the prefix
 * unique per load.
 *
 * A caller with a loop of its own (`zest-bench admission put`: jobs retried with backoff)
 * issues single requests on the load's handles instead of runs (bench_s3_load_request).
 *
 * Threading: one caller thread drives a load; a run starts and joins the workers. Several
 * loads may exist, but curl_global_init is not thread-safe: create them from one thread.
 */
#ifndef ZEST_BENCH_S3_LOAD_H
#define ZEST_BENCH_S3_LOAD_H

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>

#include "bench_report.h"

enum bench_s3_op { BENCH_S3_PUT, BENCH_S3_GET, BENCH_S3_DELETE, BENCH_S3_OPS };

/* "PUT", "GET", "DELETE". */
extern const char *const bench_s3_op_names[BENCH_S3_OPS];

struct bench_s3_config {
	const char *host; /* HOST:PORT */
	const char *access_key, *secret_key, *bucket, *region;
	bool tls, insecure; /* HTTPS; do not verify its certificate */
	uint64_t obj_size;
	unsigned concurrent; /* workers, 1..1024 */
	unsigned objects;    /* objects bench_s3_load_preload uploads (GET and DELETE read them) */
	const char *name;    /* the program in messages; NULL: "zest-bench s3" */
	unsigned timeout_s;  /* a request's limit; 0: 300 s */
};

/*
 * The endpoint and load flags `zest-bench s3` and `zest-bench admission put` share, as
 * getopt_long entries for their tables (the letters H a s r T k b z c are taken), and the
 * endpoint's --help lines; --bucket, --obj.size and --concurrent each caller explains itself
 * (the defaults differ).
 */
/* one flag a line */
/* clang-format off */
#define BENCH_S3_OPTIONS                                \
	{ "host", required_argument, NULL, 'H' },       \
	{ "access-key", required_argument, NULL, 'a' }, \
	{ "secret-key", required_argument, NULL, 's' }, \
	{ "region", required_argument, NULL, 'r' },     \
	{ "tls", no_argument, NULL, 'T' },              \
	{ "insecure", no_argument, NULL, 'k' },         \
	{ "bucket", required_argument, NULL, 'b' },     \
	{ "obj.size", required_argument, NULL, 'z' },   \
	{ "concurrent", required_argument, NULL, 'c' }
/* clang-format on */
#define BENCH_S3_USAGE_ENDPOINT                                              \
	"  --host HOST:PORT      S3 endpoint (default 127.0.0.1:9000)\n"     \
	"  --access-key KEY      (default $ZEST_ACCESS_KEY or zestadmin)\n"  \
	"  --secret-key KEY      (default $ZEST_SECRET_KEY or zestsecret)\n" \
	"  --region REGION       SigV4 region (default us-east-1)\n"         \
	"  --tls, --insecure     HTTPS; do not verify the certificate\n"

/*
 * The defaults of those flags: 127.0.0.1:9000, $ZEST_ACCESS_KEY or zestadmin,
 * $ZEST_SECRET_KEY or zestsecret, us-east-1, 1 MiB objects; the rest of c zeroed.
 */
void bench_s3_config_defaults(struct bench_s3_config *c);

/*
 * One getopt_long result (opt, its optarg) into c when it is one of BENCH_S3_OPTIONS.
 * Returns 1 when it was, 0 when opt is another flag, -EINVAL for a bad value (the caller
 * says so, with its name). --concurrent takes 1..1024, --obj.size any size (0 too).
 */
int bench_s3_parse_opt(int opt, const char *arg, struct bench_s3_config *c);

struct bench_s3_load;

/*
 * Copies cfg (its strings are borrowed and must outlive the load), makes the payload and
 * one handle per worker, and creates the bucket (an existing one is fine). Returns 0 or
 * -ENOMEM, -EIO (the bucket could not be created; the reason is printed).
 */
int bench_s3_load_create(const struct bench_s3_config *cfg, struct bench_s3_load **out);

/* Uploads cfg->objects objects with every worker. Returns 0, or -EIO (printed) on a failure. */
int bench_s3_load_preload(struct bench_s3_load *l);

/*
 * One run: every worker picks operations by mix (percent per op, summing to 100) until
 * warmup_ns + duration_ns have passed; operations that start in the warm-up are not counted.
 * DELETE removes this load's own PUT objects when mix has PUTs, else the preloaded objects,
 * once each (the run ends when they are gone). progress: a status line on stderr every
 * 0.5 s. Initialises total[op] for every op (the caller bench_stats_fini()s them) with the
 * merged figures of all workers. Returns 0, or -ENOMEM.
 */
int bench_s3_load_run(struct bench_s3_load *l, const unsigned mix[BENCH_S3_OPS], uint64_t warmup_ns,
                      uint64_t duration_ns, bool progress, struct bench_stats total[BENCH_S3_OPS]);

/* What one request came back with. */
struct bench_s3_reply {
	long status;               /* the HTTP status; 0: no response (err has curl's reason) */
	uint64_t start_ns, end_ns; /* zc_now_ns() before and after it */
	uint64_t bytes;            /* body bytes received */
	const char *err; /* the body's start (an S3 error's XML), NUL-terminated, or curl's reason;
	                  * the load's, valid until the handle's next request */
};

/*
 * One signed request on handle `worker` (0 .. concurrent-1), timed: PUT uploads obj_size
 * bytes of the payload to key (key NULL: creates the bucket), GET reads key (the body is
 * counted, not kept), DELETE removes it. Keys are the caller's (none of the load's prefix);
 * such objects are not the load's to clear. One thread per handle, and not during
 * bench_s3_load_run, _preload or _clear, which use every handle. Returns reply->status.
 */
long bench_s3_load_request(struct bench_s3_load *l, unsigned worker, enum bench_s3_op op,
                           const char *key, struct bench_s3_reply *reply);

/* Deletes every object this load created and has not deleted yet (uncounted). */
void bench_s3_load_clear(struct bench_s3_load *l);

/* Frees the handles and the payload; the objects stay. NULL is a no-op. */
void bench_s3_load_destroy(struct bench_s3_load *l);

#endif
