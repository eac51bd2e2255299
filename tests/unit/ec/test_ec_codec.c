/* ec_codec: encode against a plain reference, every erasure pattern, bad parameters. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>
#include <isa-l/erasure_code.h>

#include "ec.h"
#include "ec_ref.h"

static uint64_t rng;

struct cells {
	unsigned n;
	size_t len;
	uint8_t *p[EC_MAX_CELLS];
};

static void
cells_alloc(struct cells *c, unsigned n, size_t len)
{
	c->n = n;
	c->len = len;
	for (unsigned i = 0; i < n; i++) {
		c->p[i] = malloc(len ? len : 1);
		assert_non_null(c->p[i]);
	}
}

static void
cells_free(struct cells *c)
{
	for (unsigned i = 0; i < c->n; i++)
		free(c->p[i]);
}

static void
test_bad_parameters(void **state)
{
	struct ec_codec *c = NULL;
	static const unsigned bad[][2] = { { 0, 1 },   { 1, 0 },  { 0, 0 },  { 31, 2 },
		                           { 16, 17 }, { 33, 1 }, { 1, 32 }, { 1000, 1000 } };

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_int_equal(ec_codec_create(bad[i][0], bad[i][1], &c), -EINVAL);
		assert_null(c);
	}
	assert_int_equal(ec_codec_create(4, 2, NULL), -EINVAL);
	assert_int_equal(ec_codec_create(31, 1, &c), 0);
	ec_codec_destroy(c);
	assert_int_equal(ec_codec_create(1, 31, &c), 0);
	ec_codec_destroy(c);
	ec_codec_destroy(NULL);
}

static void
test_decode_rejects_too_many_erasures(void **state)
{
	struct ec_codec *c;
	struct cells cl;

	(void)state;
	assert_int_equal(ec_codec_create(4, 2, &c), 0);
	cells_alloc(&cl, 6, 64);
	assert_int_equal(ec_codec_decode(c, 64, cl.p, 0x7), -EINVAL);     /* 3 > m */
	assert_int_equal(ec_codec_decode(c, 64, cl.p, 1u << 6), -EINVAL); /* no such cell */
	assert_int_equal(ec_codec_decode(c, 64, cl.p, 0), 0);
	cells_free(&cl);
	ec_codec_destroy(c);
}

/* Random k, m and lengths: ec_codec_encode == naive GF(2^8) == ISA-L's base encode. */
static void
test_encode_matches_reference(void **state)
{
	(void)state;
	for (int round = 0; round < 60; round++) {
		unsigned k = 1 + test_rand(&rng) % 20, m = 1 + test_rand(&rng) % (32 - k);
		size_t len =
		        test_rand(&rng) % 3 == 0 ? test_rand(&rng) % 40 : test_rand(&rng) % 20000;
		struct cells data, par, ref, base;
		uint8_t a[32 * 32], tables[32 * 32 * 32];
		struct ec_codec *c;

		if (k + m > 32)
			m = 32 - k;
		assert_int_equal(ec_codec_create(k, m, &c), 0);
		cells_alloc(&data, k, len);
		cells_alloc(&par, m, len);
		cells_alloc(&ref, m, len);
		cells_alloc(&base, m, len);
		for (unsigned i = 0; i < k; i++)
			test_fill(&rng, data.p[i], len);

		assert_int_equal(ec_codec_encode(c, len, (const uint8_t *const *)data.p, par.p), 0);
		ref_encode(k, m, len, data.p, ref.p);
		gf_gen_cauchy1_matrix(a, (int)(k + m), (int)k);
		ec_init_tables((int)k, (int)m, a + k * k, tables); /* 2.30: one table format */
		ec_encode_data_base((int)len, (int)k, (int)m, tables, data.p, base.p);
		for (unsigned p = 0; p < m; p++) {
			assert_memory_equal(par.p[p], ref.p[p], len ? len : 1);
			assert_memory_equal(par.p[p], base.p[p], len ? len : 1);
		}
		cells_free(&data);
		cells_free(&par);
		cells_free(&ref);
		cells_free(&base);
		ec_codec_destroy(c);
	}
}

/* Encode, erase the cells of `erased`, decode, compare with the originals. */
static void
check_pattern(struct ec_codec *c, const struct cells *orig, struct cells *work, uint32_t erased)
{
	unsigned n = ec_codec_k(c) + ec_codec_m(c);

	for (unsigned i = 0; i < n; i++) {
		if (erased & (1u << i))
			memset(work->p[i], 0xA5, work->len);
		else
			memcpy(work->p[i], orig->p[i], work->len);
	}
	assert_int_equal(ec_codec_decode(c, work->len, work->p, erased), 0);
	for (unsigned i = 0; i < n; i++)
		if (erased & (1u << i))
			assert_memory_equal(work->p[i], orig->p[i], work->len);
}

static void
encoded_stripe(struct ec_codec *c, size_t len, struct cells *orig, struct cells *work)
{
	unsigned k = ec_codec_k(c), n = k + ec_codec_m(c);

	cells_alloc(orig, n, len);
	cells_alloc(work, n, len);
	for (unsigned i = 0; i < k; i++)
		test_fill(&rng, orig->p[i], len);
	assert_int_equal(ec_codec_encode(c, len, (const uint8_t *const *)orig->p, orig->p + k), 0);
}

static void
every_pattern(unsigned k, unsigned m, size_t len)
{
	struct ec_codec *c;
	struct cells orig, work;
	unsigned checked = 0;

	assert_int_equal(ec_codec_create(k, m, &c), 0);
	encoded_stripe(c, len, &orig, &work);
	for (uint32_t erased = 1; erased < (1u << (k + m)); erased++) {
		if ((unsigned)__builtin_popcount(erased) > m)
			continue;
		check_pattern(c, &orig, &work, erased);
		checked++;
	}
	/* Twice over: the second pass is served from the decode-table cache. */
	for (uint32_t erased = 1; erased < (1u << (k + m)); erased++)
		if ((unsigned)__builtin_popcount(erased) <= m)
			check_pattern(c, &orig, &work, erased);
	assert_true(checked > 0);
	cells_free(&orig);
	cells_free(&work);
	ec_codec_destroy(c);
}

static void
test_every_pattern_4_2(void **state)
{
	(void)state;
	every_pattern(4, 2, 4096 + 17);
}

static void
test_every_pattern_6_3(void **state)
{
	(void)state;
	every_pattern(6, 3, 1000);
}

static void
random_patterns(unsigned k, unsigned m, unsigned rounds)
{
	struct ec_codec *c;
	struct cells orig, work;

	assert_int_equal(ec_codec_create(k, m, &c), 0);
	encoded_stripe(c, 8192 + 3, &orig, &work);
	for (unsigned r = 0; r < rounds; r++) {
		unsigned want = 1 + test_rand(&rng) % m;
		uint32_t erased = 0;

		while ((unsigned)__builtin_popcount(erased) < want)
			erased |= 1u << (test_rand(&rng) % (k + m));
		check_pattern(c, &orig, &work, erased);
	}
	cells_free(&orig);
	cells_free(&work);
	ec_codec_destroy(c);
}

static void
test_random_patterns_10_4(void **state)
{
	(void)state;
	random_patterns(10, 4, 300);
}

static void
test_random_patterns_12_4(void **state)
{
	(void)state;
	random_patterns(12, 4, 300);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_bad_parameters),
		cmocka_unit_test(test_decode_rejects_too_many_erasures),
		cmocka_unit_test(test_encode_matches_reference),
		cmocka_unit_test(test_every_pattern_4_2),
		cmocka_unit_test(test_every_pattern_6_3),
		cmocka_unit_test(test_random_patterns_10_4),
		cmocka_unit_test(test_random_patterns_12_4),
	};

	rng = test_seed();
	printf("seed=0x%llx (set ZEST_TEST_SEED to replay)\n", (unsigned long long)rng);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
