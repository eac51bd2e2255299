/*
 * zest-bench sums: what the gateway's per-byte work costs on this CPU. Feeds a buffer in
 * spans (64 KiB by default, the size reads arrive in) through the digest sets a PUT can
 * need: in s3_sum's one pass (each block of a span through every digest while it is in
 * L1/L2), as s3_sum did before (each digest over the whole span in turn: --block equal to
 * the span), and as separate whole-buffer passes, one per digest. Baseline: memcpy of the
 * same bytes in the same run. Reports the median of the trials, GiB/s, CPU-s per GiB and
 * the ratios of the one pass to the others.
 */
#include <getopt.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"
#include "s3_sum_internal.h"
#include "zc.h"

static size_t span = 64u * 1024u; /* bytes per s3_sum_update: what a socket read hands over */
static size_t total = 256u << 20;
static int trials = 5;
static size_t block; /* s3_sum's block; 0: S3_SUM_BLOCK */

static double
run_sum(const uint8_t *buf, unsigned mask)
{
	struct s3_sum s;
	struct s3_sum_out o;
	uint64_t t0 = zc_thread_cpu_ns();

	s3_sum_init(&s, mask);
	s.block = block;
	for (size_t off = 0; off < total; off += span)
		s3_sum_update(&s, buf + off, total - off < span ? total - off : span);
	s3_sum_final(&s, &o);
	s3_sum_fini(&s);
	return (double)(zc_thread_cpu_ns() - t0) / 1e9;
}

/* The same set as separate passes over the whole buffer (what a layered design does). */
static double
run_separate(const uint8_t *buf, unsigned mask)
{
	double t = 0;

	for (unsigned bit = 1; bit <= S3_CK_SEG_CRC32C; bit <<= 1)
		if (mask & bit)
			t += run_sum(buf, bit);
	return t;
}

static double
run_memcpy(const uint8_t *buf)
{
	uint8_t *dst = malloc(span);
	uint64_t t0 = zc_thread_cpu_ns();

	for (size_t off = 0; off < total; off += span)
		memcpy(dst, buf + off, span);
	__asm__ volatile("" : : "r"(dst) : "memory");
	free(dst);
	return (double)(zc_thread_cpu_ns() - t0) / 1e9;
}

/* Eight uploads hashed together: each lane one eighth of the buffer (aggregate rate). */
static double
run_md5x8(const uint8_t *buf, unsigned mask)
{
	const uint8_t *p[8];
	uint8_t out[8][16];
	size_t part = total / 8;
	uint64_t t0 = zc_thread_cpu_ns();

	(void)mask;
	for (int l = 0; l < 8; l++)
		p[l] = buf + (size_t)l * part;
	s3_md5x8(p, part, out);
	return (double)(zc_thread_cpu_ns() - t0) / 1e9;
}

static uint64_t
process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void
static_release(struct zc_ref *ref)
{
	(void)ref; /* the buffer is the benchmark's */
}

struct feeder {
	struct s3_md5mb *mb;
	const uint8_t *p;
	size_t len;
	struct zc_ref ref; /* the hasher may put its last reference after final() returned:
	                    * it lives until s3_md5mb_destroy() */
};

/* One upload: its share of the buffer in 64 KiB spans by reference, as a worker hands them. */
static void *
feed(void *arg)
{
	struct feeder *f = arg;
	struct s3_md5mb_stream *s;
	uint8_t md5[16];

	zc_ref_init(&f->ref, static_release);
	if (s3_md5mb_open(f->mb, &s) == 0) {
		for (size_t off = 0; off < f->len; off += span) {
			struct zc_seg seg = { f->p + off, f->len - off < span ? f->len - off : span,
				              &f->ref };

			s3_md5mb_update(s, &seg);
		}
		s3_md5mb_final(s, md5);
	}
	zc_ref_put(&f->ref);
	return NULL;
}

/* The MD5 service with nstreams uploads at once (each a thread): its threads' CPU, all of it
 * (the hasher's, the handoffs', the feeders' waits), over the bytes. */
static double
run_md5mb(const uint8_t *buf, unsigned nstreams)
{
	struct s3_md5mb *mb;
	struct feeder f[16];
	pthread_t th[16];
	size_t part = total / nstreams;
	uint64_t t0;

	if (s3_md5mb_create(NULL, &mb) < 0)
		return 0;
	t0 = process_cpu_ns();
	for (unsigned i = 0; i < nstreams; i++) {
		f[i] = (struct feeder){ .mb = mb, .p = buf + (size_t)i * part, .len = part };
		pthread_create(&th[i], NULL, feed, &f[i]);
	}
	for (unsigned i = 0; i < nstreams; i++)
		pthread_join(th[i], NULL);
	t0 = process_cpu_ns() - t0;
	s3_md5mb_destroy(mb);
	return (double)t0 / 1e9;
}

static double
median_of(double (*fn)(const uint8_t *, unsigned), const uint8_t *buf, unsigned mask)
{
	double v[32];

	fn(buf, mask); /* warm up */
	for (int i = 0; i < trials; i++)
		v[i] = fn(buf, mask);
	return zc_median(v, (size_t)trials);
}

/* The same set, each digest over the whole span in turn (s3_sum before the one pass). */
static double
run_per_span(const uint8_t *buf, unsigned mask)
{
	size_t b = block;
	double t;

	block = span;
	t = run_sum(buf, mask);
	block = b;
	return t;
}

static double
memcpy_adapter(const uint8_t *buf, unsigned mask)
{
	(void)mask;
	return run_memcpy(buf);
}

int
bench_sums_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "size", required_argument, NULL, 's' },
		{ "trials", required_argument, NULL, 't' },
		{ "span", required_argument, NULL, 'p' },
		{ "block", required_argument, NULL, 'b' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	static const struct {
		const char *name;
		unsigned mask;
	} sets[] = {
		{ "md5 (ETag)", S3_CK_MD5 },
		{ "crc32 (isa-l)", S3_CK_CRC32 },
		{ "crc32c (isa-l)", S3_CK_CRC32C },
		{ "crc64nvme (table)", S3_CK_CRC64NVME },
		{ "sha1", S3_CK_SHA1 },
		{ "sha256", S3_CK_SHA256 },
		{ "md5+crc32 (boto3 PUT)", S3_CK_MD5 | S3_CK_CRC32 },
		{ "md5+crc32c (minio-go part)", S3_CK_MD5 | S3_CK_CRC32C },
		{ "md5+sha256 (signed payload)", S3_CK_MD5 | S3_CK_SHA256 },
		/* what the gateway runs per request, the message CRC32C included (seg) */
		{ "crc32c msg (the datanode's)", S3_CK_SEG_CRC32C },
		{ "md5+msg (unsigned PUT)", S3_CK_MD5 | S3_CK_SEG_CRC32C },
		{ "md5+crc32+msg (boto3)", S3_CK_MD5 | S3_CK_CRC32 | S3_CK_SEG_CRC32C },
		{ "md5+crc32c+msg (minio-go)", S3_CK_MD5 | S3_CK_CRC32C | S3_CK_SEG_CRC32C },
		{ "md5+sha256+msg (signed chunks)", S3_CK_MD5 | S3_CK_SHA256 | S3_CK_SEG_CRC32C },
		{ "md5+sha256+crc64+msg",
		  S3_CK_MD5 | S3_CK_SHA256 | S3_CK_CRC64NVME | S3_CK_SEG_CRC32C },
		{ "md5+sha256+sha1+msg", S3_CK_MD5 | S3_CK_SHA256 | S3_CK_SHA1 | S3_CK_SEG_CRC32C },
	};
	uint64_t v;
	int c;

	optind = 1;
	uint8_t *buf;
	double base;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (zc_parse_size(optarg, &v) < 0 || v < 64) {
				fprintf(stderr, "zest-bench sums: bad --size\n");
				return 2;
			}
			total = (size_t)v;
			break;
		case 'p':
		case 'b':
			if (zc_parse_size(optarg, &v) < 0 || v < 64 || v > (64u << 20)) {
				fprintf(stderr, "zest-bench sums: bad --%s\n",
				        c == 'p' ? "span" : "block");
				return 2;
			}
			if (c == 'p')
				span = (size_t)v;
			else
				block = (size_t)v;
			break;
		case 't':
			trials = atoi(optarg);
			if (trials < 1 || trials > 32) {
				fprintf(stderr, "zest-bench sums: --trials 1..32\n");
				return 2;
			}
			break;
		case 'h':
			printf("usage: zest-bench sums [--size SIZE (default 256MiB)] [--trials N "
			       "(default 5)]\n"
			       "       [--span SIZE (default 64KiB)] [--block SIZE (default: "
			       "s3_sum's, 32KiB)]\n"
			       "Per-byte cost of the gateway's digests: s3_sum's one pass (blocks "
			       "through\n"
			       "every digest) vs each digest over the whole span in turn vs "
			       "separate\n"
			       "whole-buffer passes, against memcpy measured in the same run.\n");
			return 0;
		default:
			return 2;
		}
	}
	if (total < span)
		total = span;
	total = total / span * span;
	buf = malloc(total);
	if (!buf)
		return 1;
	for (size_t i = 0; i < total; i++)
		buf[i] = (uint8_t)(i * 131 + (i >> 13));
	bench_print_context(stdout, argc, argv);
	printf("# %zu MiB in %zu KiB spans, one pass in %zu KiB blocks, median of %d trials\n",
	       total >> 20, span >> 10, (block ? block : S3_SUM_BLOCK) >> 10, trials);
	base = median_of(memcpy_adapter, buf, 0);
	printf("%-30s %9s %12s %10s\n", "work", "GiB/s", "CPU-s/GiB", "vs memcpy");
	printf("%-30s %9.2f %12.3f %10s\n", "memcpy (baseline)", (double)total / base / (1 << 30),
	       base / ((double)total / (1 << 30)), "1.00x");
	for (size_t i = 0; i < sizeof(sets) / sizeof(sets[0]); i++) {
		double t = median_of(run_sum, buf, sets[i].mask);

		printf("%-30s %9.2f %12.3f %9.2fx\n", sets[i].name, (double)total / t / (1 << 30),
		       t / ((double)total / (1 << 30)), t / base);
		if (__builtin_popcount(sets[i].mask) > 1) {
			double ps = median_of(run_per_span, buf, sets[i].mask);
			double s = median_of(run_separate, buf, sets[i].mask);

			printf("%-30s %9.2f %12.3f %9.2fx  one pass %.3f of it\n",
			       "  same, each over the span", (double)total / ps / (1 << 30),
			       ps / ((double)total / (1 << 30)), ps / base, t / ps);
			printf("%-30s %9.2f %12.3f %9.2fx  one pass %.3f of it\n",
			       "  same, separate passes", (double)total / s / (1 << 30),
			       s / ((double)total / (1 << 30)), s / base, t / s);
		}
	}
	if (s3_md5x8_supported()) {
		double t = median_of(run_md5x8, buf, 0);

		printf("%-30s %9.2f %12.3f %9.2fx\n", "md5 x8 lanes (avx2, aggregate)",
		       (double)total / t / (1 << 30), t / ((double)total / (1 << 30)), t / base);
		for (unsigned n = 1; n <= 16; n *= 2) {
			char name[48];

			t = median_of(run_md5mb, buf, n);
			snprintf(name, sizeof(name), "md5 service, %u stream%s (CPU)", n,
			         n > 1 ? "s" : "");
			printf("%-30s %9.2f %12.3f %9.2fx\n", name, (double)total / t / (1 << 30),
			       t / ((double)total / (1 << 30)), t / base);
		}
	}
	free(buf);
	return 0;
}
