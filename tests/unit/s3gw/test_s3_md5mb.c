/* The multi-buffer MD5 service (s3gw/s3_md5mb.c) against OpenSSL's MD5: random stream
 * counts (1..16 at once, each on its own thread as the gateway's workers are), random sizes
 * (0..3 MiB), random split points, spans by reference (each in its own refcounted buffer
 * that the test drops right after update(), so only the service's reference keeps it alive:
 * ASan sees a use after free otherwise) and borrowed (NULL reference), streams aborted
 * midway, small queue bounds (backpressure), and zc_ref_live() back to 0 at the end. */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "s3_sum_internal.h"

struct span {
	struct zc_ref ref;
	uint8_t data[];
};

static void
span_release(struct zc_ref *ref)
{
	free((struct span *)ref);
}

struct job {
	struct s3_md5mb *mb;
	unsigned seed;
	size_t size, abort_at; /* abort_at < size: abort after that many bytes */
	bool use_sum;          /* through s3_sum (with CRC32C beside) instead of the service */
	uint8_t want[16], got[16];
	int rc;
};

static void
openssl_md5(const uint8_t *p, size_t n, uint8_t out[16])
{
	EVP_MD_CTX *c = EVP_MD_CTX_new();

	EVP_DigestInit_ex(c, EVP_md5(), NULL);
	EVP_DigestUpdate(c, p, n);
	EVP_DigestFinal_ex(c, out, NULL);
	EVP_MD_CTX_free(c);
}

static void *
run_job(void *arg)
{
	struct job *j = arg;
	unsigned seed = j->seed;
	uint8_t *src = malloc(j->size + 1);
	struct s3_md5mb_stream *s = NULL;
	struct s3_sum sum;
	size_t off = 0;

	for (size_t i = 0; i < j->size; i++)
		src[i] = (uint8_t)rand_r(&seed);
	openssl_md5(src, j->size, j->want);
	if (j->use_sum)
		j->rc = s3_sum_init_mb(&sum, S3_CK_MD5 | S3_CK_CRC32C, j->mb);
	else
		j->rc = s3_md5mb_open(j->mb, &s);
	if (j->rc < 0)
		goto out;
	while (off < j->size && off < j->abort_at) {
		/* split points: mostly small and odd, sometimes large */
		unsigned r = (unsigned)rand_r(&seed);
		size_t n = r % 4 == 0 ? r % 300000 : r % 4 == 1 ? r % 70 : r % 9000;
		struct zc_seg seg;
		struct span *sp = NULL;

		if (n == 0)
			n = 1;
		if (n > j->size - off)
			n = j->size - off;
		if (r % 7 == 3) { /* borrowed: the bytes live only during the call */
			seg = (struct zc_seg){ src + off, n, NULL };
		} else {
			sp = malloc(sizeof(*sp) + n);
			memcpy(sp->data, src + off, n);
			zc_ref_init(&sp->ref, span_release);
			seg = (struct zc_seg){ sp->data, n, &sp->ref };
		}
		if (j->use_sum)
			s3_sum_update_seg(&sum, &seg);
		else
			s3_md5mb_update(s, &seg);
		if (sp) /* from here only the service's reference keeps the bytes */
			zc_ref_put(&sp->ref);
		off += n;
	}
	if (off < j->size || j->abort_at < j->size) {
		if (j->use_sum)
			s3_sum_fini(&sum);
		else
			s3_md5mb_abort(s);
		memcpy(j->got, j->want, 16); /* aborted: nothing to compare */
	} else if (j->use_sum) {
		struct s3_sum_out o;

		s3_sum_final(&sum, &o);
		s3_sum_fini(&sum);
		memcpy(j->got, o.md5, 16);
	} else {
		s3_md5mb_final(s, j->got);
	}
out:
	free(src);
	return NULL;
}

static void
run_round(struct s3_md5mb *mb, unsigned seed, unsigned nstreams)
{
	struct job jobs[16];
	pthread_t th[16];

	memset(jobs, 0, sizeof(jobs));
	for (unsigned i = 0; i < nstreams; i++) {
		unsigned r = (unsigned)rand_r(&seed);

		jobs[i].mb = mb;
		jobs[i].seed = seed + i * 7919;
		jobs[i].size = r % 5 == 0 ? r % 200 : r % (3u << 20);
		jobs[i].abort_at = r % 6 == 1 ? jobs[i].size / 2 : (size_t)-1;
		jobs[i].use_sum = r % 3 == 0;
		assert_int_equal(pthread_create(&th[i], NULL, run_job, &jobs[i]), 0);
	}
	for (unsigned i = 0; i < nstreams; i++) {
		pthread_join(th[i], NULL);
		assert_int_equal(jobs[i].rc, 0);
		assert_memory_equal(jobs[i].got, jobs[i].want, 16);
	}
}

static void
rounds(const struct s3_md5mb_opts *o, unsigned n, unsigned seed)
{
	struct s3_md5mb *mb;
	struct s3_md5mb_stats st;

	if (!s3_md5x8_supported()) {
		skip();
		return;
	}
	assert_int_equal(s3_md5mb_create(o, &mb), 0);
	for (unsigned k = 0; k < n; k++)
		run_round(mb, seed + k, 1 + (unsigned)rand_r(&seed) % 16);
	s3_md5mb_stats(mb, &st);
	s3_md5mb_destroy(mb);
	assert_int_equal(zc_ref_live(), 0);
	/* both paths ran (with 8 lanes needed, company may never come) */
	if (!o)
		assert_true(st.serial_blocks > 0);
	if (!o || o->min_lanes < 8)
		assert_true(st.x8_blocks > 0);
	print_message("x8_blocks=%llu idle=%llu serial=%llu carry=%llu waits=%llu\n",
	              (unsigned long long)st.x8_blocks, (unsigned long long)st.x8_idle_blocks,
	              (unsigned long long)st.serial_blocks, (unsigned long long)st.carry_bytes,
	              (unsigned long long)st.waits);
}

static void
test_random_defaults(void **state)
{
	(void)state;
	rounds(NULL, 12, 1);
}

/* A tiny queue bound: update() waits for the hasher often (backpressure), and a span larger
 * than the bound goes alone. */
static void
test_random_small_queue(void **state)
{
	struct s3_md5mb_opts o = { .max_queued = 4096, .alone_us = 1 };

	(void)state;
	rounds(&o, 8, 2);
}

/* Eight lanes only when 8 streams have data: most runs go serial, and back. */
static void
test_random_min_lanes8(void **state)
{
	struct s3_md5mb_opts o = { .min_lanes = 8, .alone_us = 2000 };

	(void)state;
	rounds(&o, 6, 3);
}

/* The padding boundaries, one stream alone, one span each. */
static void
test_edges(void **state)
{
	static const size_t lens[] = { 0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129 };
	struct s3_md5mb *mb;
	uint8_t buf[256], want[16], got[16];

	(void)state;
	if (!s3_md5x8_supported()) {
		skip();
		return;
	}
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 31 + 7);
	assert_int_equal(s3_md5mb_create(NULL, &mb), 0);
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		struct s3_md5mb_stream *s;
		struct zc_seg seg = { buf, lens[k], NULL };

		assert_int_equal(s3_md5mb_open(mb, &s), 0);
		s3_md5mb_update(s, &seg);
		s3_md5mb_final(s, got);
		openssl_md5(buf, lens[k], want);
		assert_memory_equal(got, want, 16);
	}
	s3_md5mb_abort(NULL);
	s3_md5mb_destroy(mb);
	s3_md5mb_destroy(NULL);
}

/* The lanes even for one stream: lane refills, idle lanes and leaving a run midway. */
static void
test_random_min_lanes1(void **state)
{
	struct s3_md5mb_opts o = { .min_lanes = 1, .max_queued = 65536 };

	(void)state;
	rounds(&o, 6, 4);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_edges),
		cmocka_unit_test(test_random_defaults),
		cmocka_unit_test(test_random_small_queue),
		cmocka_unit_test(test_random_min_lanes8),
		cmocka_unit_test(test_random_min_lanes1),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
