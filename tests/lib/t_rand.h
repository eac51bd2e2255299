/* A seeded PRNG for tests: the same bytes on every run unless ZEST_TEST_SEED says otherwise. */
#ifndef ZEST_TEST_T_RAND_H
#define ZEST_TEST_T_RAND_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

/* xorshift64*: reproducible across runs; the seed is printed by each test. */
static inline uint64_t
test_rand(uint64_t *state)
{
	uint64_t x = *state;

	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*state = x;
	return x * 0x2545F4914F6CDD1DULL;
}

static inline void
test_fill(uint64_t *state, uint8_t *buf, size_t len)
{
	for (size_t i = 0; i < len; i++)
		buf[i] = (uint8_t)(test_rand(state) >> 56);
}

/* A seed from ZEST_TEST_SEED, or a fixed default so CI runs are reproducible. */
static inline uint64_t
test_seed(void)
{
	const char *s = getenv("ZEST_TEST_SEED");

	return s ? strtoull(s, NULL, 0) | 1 : 0x5eed5eedULL;
}

#endif
