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
 * Threading: one caller thread drives a load; a run starts and joins the workers. Several
 * loads may exist, but curl_global_init is not thread-safe: create them from one thread.
 */
#ifndef ZEST_BENCH_S3_LOAD_H
#define ZEST_BENCH_S3_LOAD_H

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
};

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

/* Deletes every object this load created and has not deleted yet (uncounted). */
void bench_s3_load_clear(struct bench_s3_load *l);

/* Frees the handles and the payload; the objects stay. NULL is a no-op. */
void bench_s3_load_destroy(struct bench_s3_load *l);

#endif
