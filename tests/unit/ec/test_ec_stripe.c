/* ec_stripe: random fragmentation at unaligned addresses equals the full encode. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include <cmocka.h>

#include "ec.h"
#include "ec_ref.h"

static uint64_t rng;

/*
 * Feed cell data in random fragments, cells interleaved in random order (or one after
 * the other, as the datanode does), each fragment copied first to a deliberately
 * misaligned address (as gRPC slices are).
 */
static void
stream_stripe(unsigned k, unsigned m, size_t cell_len, const size_t *cell_fill, unsigned max_frag,
              bool in_order)
{
	struct ec_codec *c;
	struct ec_stripe st;
	uint8_t *data[EC_MAX_CELLS], *full[EC_MAX_CELLS], *streamed[EC_MAX_CELLS];
	uint8_t *bounce = malloc(max_frag + 64);
	size_t sent[EC_MAX_CELLS] = { 0 };
	size_t left = 0;

	assert_non_null(bounce);
	assert_int_equal(ec_codec_create(k, m, &c), 0);
	for (unsigned i = 0; i < k; i++) {
		/* Cells shorter than cell_len are zero-padded for the full encode. */
		data[i] = calloc(1, cell_len);
		test_fill(&rng, data[i], cell_fill[i]);
		left += cell_fill[i];
	}
	for (unsigned p = 0; p < m; p++) {
		full[p] = malloc(cell_len);
		streamed[p] =
		        (uint8_t *)malloc(cell_len + 1) + 1; /* odd address for the parity, too */
		memset(streamed[p], 0xa5,
		       cell_len); /* stale bytes: the stripe must not need zeros */
	}
	assert_int_equal(ec_codec_encode(c, cell_len, (const uint8_t *const *)data, full), 0);
	assert_int_equal(ec_stripe_init(&st, c, cell_len, streamed), 0);

	while (left > 0) {
		unsigned cell = test_rand(&rng) % k;
		size_t room, n = 1 + test_rand(&rng) % max_frag;
		uint8_t *at = bounce + test_rand(&rng) % 64;

		if (in_order)
			for (cell = 0; sent[cell] == cell_fill[cell]; cell++)
				;
		room = cell_fill[cell] - sent[cell];

		if (room == 0)
			continue;
		if (n > room)
			n = room;
		memcpy(at, data[cell] + sent[cell], n);
		assert_int_equal(ec_stripe_add(&st, cell, at, n), 0);
		sent[cell] += n;
		left -= n;
		assert_int_equal(ec_stripe_filled(&st, cell), sent[cell]);
	}
	ec_stripe_finish(&st);
	for (unsigned p = 0; p < m; p++)
		assert_memory_equal(streamed[p], full[p], cell_len);

	for (unsigned i = 0; i < k; i++)
		free(data[i]);
	for (unsigned p = 0; p < m; p++) {
		free(full[p]);
		free(streamed[p] - 1);
	}
	free(bounce);
	ec_codec_destroy(c);
}

static void
test_random_fragments(void **state)
{
	(void)state;
	for (int round = 0; round < 40; round++) {
		unsigned k = 1 + test_rand(&rng) % 12, m = 1 + test_rand(&rng) % 4;
		size_t cell = 1 + test_rand(&rng) % 70000, fill[EC_MAX_CELLS];
		unsigned max_frag = round % 2 ? 65536 : 1 + test_rand(&rng) % 300;

		for (unsigned i = 0; i < k; i++)
			fill[i] = cell;
		stream_stripe(k, m, cell, fill, max_frag, round % 3 == 0);
	}
}

/* The end of an object: some cells short or empty. */
static void
test_short_cells(void **state)
{
	(void)state;
	for (int round = 0; round < 30; round++) {
		unsigned k = 2 + test_rand(&rng) % 8, m = 1 + test_rand(&rng) % 3;
		size_t cell = 1000 + test_rand(&rng) % 5000, fill[EC_MAX_CELLS];

		for (unsigned i = 0; i < k; i++)
			fill[i] = test_rand(&rng) % 3 == 0 ? 0 : test_rand(&rng) % (cell + 1);
		stream_stripe(k, m, cell, fill, 777, round % 2);
	}
}

/* gRPC-shaped input: 64 KiB fragments into 1 MiB cells of RS(6,3). */
static void
test_grpc_shaped(void **state)
{
	size_t fill[EC_MAX_CELLS];

	(void)state;
	for (unsigned i = 0; i < 6; i++)
		fill[i] = 1 << 20;
	stream_stripe(6, 3, 1 << 20, fill, 65536, true);
	stream_stripe(6, 3, 1 << 20, fill, 65536, false);
}

static void
test_rejects_overflow_and_bad_cell(void **state)
{
	struct ec_codec *c;
	struct ec_stripe st;
	uint8_t par0[16], par1[16], buf[32] = { 0 };
	uint8_t *par[] = { par0, par1 };

	(void)state;
	assert_int_equal(ec_codec_create(3, 2, &c), 0);
	assert_int_equal(ec_stripe_init(&st, c, 0, par), -EINVAL);
	assert_int_equal(ec_stripe_init(&st, c, 16, par), 0);
	assert_int_equal(ec_stripe_add(&st, 3, buf, 1), -EINVAL);
	assert_int_equal(ec_stripe_add(&st, 0, buf, 17), -EINVAL);
	assert_int_equal(ec_stripe_add(&st, 0, buf, 10), 0);
	assert_int_equal(ec_stripe_add(&st, 0, buf, 7), -EINVAL);
	assert_int_equal(ec_stripe_add(&st, 0, buf, 6), 0);
	assert_int_equal(ec_stripe_filled(&st, 0), 16);
	ec_codec_destroy(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_random_fragments),
		cmocka_unit_test(test_short_cells),
		cmocka_unit_test(test_grpc_shaped),
		cmocka_unit_test(test_rejects_overflow_and_bad_cell),
	};

	rng = test_seed();
	printf("seed=0x%llx (set ZEST_TEST_SEED to replay)\n", (unsigned long long)rng);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
