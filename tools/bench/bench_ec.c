/*
 * zest-bench ec: our codec against raw ISA-L on the same buffers in the same run.
 *
 * Per scheme and trial, four measurements alternate: raw ec_encode_data, our full-stripe
 * encode, our streaming encode fed 64 KiB fragments (the datanode's path), and a decode
 * of m lost data cells. Rates count data bytes (k cells) per second; each figure is the
 * median over the trials.
 */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <isa-l/erasure_code.h>

#include "bench.h"
#include "ec.h"
#include "zc.h"

#define MAX_TRIALS 101

struct scheme {
	unsigned k, m;
};

struct result {
	struct scheme s;
	double raw, encode, stream, decode; /* GiB/s of data */
	double encode_ratio, stream_ratio;  /* median of per-trial ours / raw */
};

struct bufs {
	unsigned k, m;
	size_t cell;
	uint8_t *cells[EC_MAX_CELLS]; /* data, then parity */
	uint8_t *spare[EC_MAX_CELLS]; /* decode output */
	unsigned char *raw_tables;
};

enum which { RAW, ENCODE, STREAM, DECODE };

static void
run_once(enum which w, struct bufs *b, struct ec_codec *c, size_t frag)
{
	switch (w) {
	case RAW:
		ec_encode_data((int)b->cell, (int)b->k, (int)b->m, b->raw_tables, b->cells,
		               b->cells + b->k);
		break;
	case ENCODE:
		ec_codec_encode(c, b->cell, (const uint8_t *const *)b->cells, b->cells + b->k);
		break;
	case STREAM: {
		struct ec_stripe st;

		ec_stripe_init(&st, c, b->cell, b->cells + b->k);
		for (unsigned i = 0; i < b->k; i++)
			for (size_t off = 0; off < b->cell; off += frag)
				ec_stripe_add(&st, i, b->cells[i] + off,
				              b->cell - off < frag ? b->cell - off : frag);
		ec_stripe_finish(&st);
		break;
	}
	case DECODE: {
		uint8_t *cells[EC_MAX_CELLS];
		uint32_t erased = 0;

		/* Worst case: m data cells lost, rebuilt from the rest. */
		for (unsigned i = 0; i < b->k + b->m; i++)
			cells[i] = b->cells[i];
		for (unsigned i = 0; i < b->m && i < b->k; i++) {
			erased |= 1u << i;
			cells[i] = b->spare[i];
		}
		ec_codec_decode(c, b->cell, cells, erased);
		break;
	}
	}
}

/* GiB/s of data over `iters` runs. */
static double
measure(enum which w, struct bufs *b, struct ec_codec *c, size_t frag, unsigned iters)
{
	uint64_t t0 = zc_now_ns(), dt;

	for (unsigned i = 0; i < iters; i++)
		run_once(w, b, c, frag);
	dt = zc_now_ns() - t0;
	return (double)b->k * (double)b->cell * iters / (1u << 30) / ((double)dt / 1e9);
}

static int
bench_scheme(struct scheme s, size_t cell, unsigned trials, double seconds, size_t frag,
             struct result *r)
{
	struct bufs b = { .k = s.k, .m = s.m, .cell = cell };
	double v[4][MAX_TRIALS], er[MAX_TRIALS], sr[MAX_TRIALS];
	unsigned char matrix[EC_MAX_CELLS * EC_MAX_CELLS];
	struct ec_codec *c;
	unsigned iters;
	int rc;

	rc = ec_codec_create(s.k, s.m, &c);
	if (rc < 0)
		return rc;
	b.raw_tables = malloc((size_t)32 * s.k * s.m);
	for (unsigned i = 0; i < s.k + s.m; i++) {
		if (posix_memalign((void **)&b.cells[i], 64, cell) ||
		    posix_memalign((void **)&b.spare[i], 64, cell))
			return -ENOMEM;
		for (size_t j = 0; j < cell; j++)
			b.cells[i][j] = (uint8_t)(rand() >> 7);
	}
	gf_gen_cauchy1_matrix(matrix, (int)(s.k + s.m), (int)s.k);
	ec_init_tables((int)s.k, (int)s.m, matrix + s.k * s.k, b.raw_tables);

	/* Size a measurement to about `seconds` of raw encoding. */
	run_once(RAW, &b, c, frag);
	iters = 1;
	for (;;) {
		uint64_t t0 = zc_now_ns();

		for (unsigned i = 0; i < iters; i++)
			run_once(RAW, &b, c, frag);
		if ((double)(zc_now_ns() - t0) / 1e9 >= seconds / 4 || iters >= 1u << 20)
			break;
		iters *= 2;
	}
	iters *= 4;

	/*
	 * Ratios pair each of our runs with the raw run next to it, so a noisy neighbour
	 * slows both sides of a pair alike; the order flips each trial.
	 */
	for (unsigned t = 0; t < trials; t++) {
		for (int i = 0; i <= DECODE; i++) {
			int w = t % 2 ? DECODE - i : i;

			v[w][t] = measure((enum which)w, &b, c, frag, iters);
		}
		er[t] = v[ENCODE][t] / v[RAW][t];
		sr[t] = v[STREAM][t] / v[RAW][t];
	}
	r->encode_ratio = zc_median(er, trials);
	r->stream_ratio = zc_median(sr, trials);

	r->s = s;
	r->raw = zc_median(v[RAW], trials);
	r->encode = zc_median(v[ENCODE], trials);
	r->stream = zc_median(v[STREAM], trials);
	r->decode = zc_median(v[DECODE], trials);

	for (unsigned i = 0; i < s.k + s.m; i++) {
		free(b.cells[i]);
		free(b.spare[i]);
	}
	free(b.raw_tables);
	ec_codec_destroy(c);
	return 0;
}

static int
parse_schemes(const char *arg, struct scheme *out, unsigned max)
{
	unsigned n = 0;
	const char *p = arg;

	while (*p && n < max) {
		unsigned k, m;
		int used;

		if (sscanf(p, "%u+%u%n", &k, &m, &used) != 2 || k < 1 || m < 1 ||
		    k + m > EC_MAX_CELLS)
			return -EINVAL;
		out[n++] = (struct scheme){ k, m };
		p += used;
		if (*p == ',')
			p++;
		else if (*p)
			return -EINVAL;
	}
	return n ? (int)n : -EINVAL;
}

static void
usage(FILE *out)
{
	fprintf(out,
	        "usage: zest-bench ec [options]\n"
	        "  --schemes LIST   comma-separated K+M schemes (default 3+2,4+2,6+3,8+2,10+4)\n"
	        "  --cell SIZE      cell size, e.g. 64KiB, 1MiB (default 1MiB)\n"
	        "  --frag SIZE      fragment size for the streaming encoder (default 64KiB)\n"
	        "  --trials N       trials per figure, median reported (default 7, min 5)\n"
	        "  --seconds S      length of one measurement (default 0.2)\n"
	        "  --json           one JSON object instead of the table\n");
}

int
bench_ec_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{ "schemes", required_argument, NULL, 's' },
		{ "cell", required_argument, NULL, 'c' },
		{ "frag", required_argument, NULL, 'f' },
		{ "trials", required_argument, NULL, 't' },
		{ "seconds", required_argument, NULL, 'S' },
		{ "json", no_argument, NULL, 'j' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	struct scheme schemes[16];
	struct result results[16];
	int nschemes = parse_schemes("3+2,4+2,6+3,8+2,10+4", schemes, 16);
	uint64_t cell = 1 << 20, frag = 64 << 10;
	unsigned trials = 7;
	double seconds = 0.2;
	bool json = false;
	int opt;

	while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (opt) {
		case 's':
			nschemes = parse_schemes(optarg, schemes, 16);
			if (nschemes < 0) {
				fprintf(stderr, "zest-bench ec: bad --schemes '%s'\n", optarg);
				return 2;
			}
			break;
		case 'c':
			if (zc_parse_size(optarg, &cell) < 0 || cell == 0 || cell > (1u << 30)) {
				fprintf(stderr, "zest-bench ec: bad --cell '%s'\n", optarg);
				return 2;
			}
			break;
		case 'f':
			if (zc_parse_size(optarg, &frag) < 0 || frag == 0) {
				fprintf(stderr, "zest-bench ec: bad --frag '%s'\n", optarg);
				return 2;
			}
			break;
		case 't':
			trials = (unsigned)atoi(optarg);
			if (trials < 5 || trials > MAX_TRIALS) {
				fprintf(stderr, "zest-bench ec: --trials must be 5..%d\n",
				        MAX_TRIALS);
				return 2;
			}
			break;
		case 'S':
			seconds = atof(optarg);
			if (seconds <= 0) {
				fprintf(stderr, "zest-bench ec: bad --seconds '%s'\n", optarg);
				return 2;
			}
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

	if (!json) {
		bench_print_context(stdout, argc, argv);
		printf("# GiB/s of data bytes, median of %u trials; ratio = median of paired ours "
		       "/ raw ISA-L\n",
		       trials);
		printf("%-6s %9s %9s %9s %7s %9s %7s %9s\n", "scheme", "cell", "raw", "encode",
		       "ratio", "stream", "ratio", "decode");
	}
	for (int i = 0; i < nschemes; i++) {
		struct result *r = &results[i];

		if (bench_scheme(schemes[i], cell, trials, seconds, frag, r) < 0) {
			fprintf(stderr, "zest-bench ec: out of memory\n");
			return 1;
		}
		if (!json) {
			printf("%u+%-4u %9llu %9.2f %9.2f %7.3f %9.2f %7.3f %9.2f\n", r->s.k,
			       r->s.m, (unsigned long long)cell, r->raw, r->encode, r->encode_ratio,
			       r->stream, r->stream_ratio, r->decode);
			fflush(stdout);
		}
	}
	if (json) {
		printf("{\"ec\":[");
		for (int i = 0; i < nschemes; i++) {
			struct result *r = &results[i];

			printf("%s{\"scheme\":\"%u+%u\",\"cell\":%llu,\"encode_gibps\":%.3f,"
			       "\"raw_gibps\":%.3f,\"ratio\":%.3f,\"stream_gibps\":%.3f,"
			       "\"stream_ratio\":%.3f,\"decode_gibps\":%.3f}",
			       i ? "," : "", r->s.k, r->s.m, (unsigned long long)cell, r->encode,
			       r->raw, r->encode_ratio, r->stream, r->stream_ratio, r->decode);
		}
		printf("],\"trials\":%u,\"frag\":%llu}\n", trials, (unsigned long long)frag);
	}
	return 0;
}
