/* CRC32C: known vectors, chaining, and per-chunk checksums over random fragments. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "zc_crc.h"
#include "t_rand.h"

static uint64_t rng;

/* Bitwise CRC32C (reflected polynomial 0x82F63B78), the definition itself. */
static uint32_t
ref_crc32c(uint32_t crc, const uint8_t *p, size_t n)
{
	crc = ~crc;
	while (n--) {
		crc ^= *p++;
		for (int b = 0; b < 8; b++)
			crc = (crc >> 1) ^ (0x82F63B78u & (0u - (crc & 1)));
	}
	return ~crc;
}

static void
test_known_vectors(void **state)
{
	uint8_t zeros[32] = { 0 }, ones[32];

	(void)state;
	memset(ones, 0xff, sizeof(ones));
	/* RFC 3720 B.4 and the classic check value. */
	assert_int_equal(zc_crc32c(0, "123456789", 9), 0xE3069283);
	assert_int_equal(zc_crc32c(0, zeros, 32), 0x8A9136AA);
	assert_int_equal(zc_crc32c(0, ones, 32), 0x62A8AB43);
	assert_int_equal(zc_crc32c(0, "", 0), 0);
}

static void
test_chaining_and_reference(void **state)
{
	uint8_t buf[10000];

	(void)state;
	test_fill(&rng, buf, sizeof(buf));
	for (int i = 0; i < 50; i++) {
		size_t n = test_rand(&rng) % sizeof(buf), cut = n ? test_rand(&rng) % n : 0;
		uint32_t whole = zc_crc32c(0, buf, n);

		assert_int_equal(whole, ref_crc32c(0, buf, n));
		assert_int_equal(zc_crc32c(zc_crc32c(0, buf, cut), buf + cut, n - cut), whole);
	}
}

static void
test_combine(void **state)
{
	static uint8_t buf[200000];

	(void)state;
	test_fill(&rng, buf, sizeof(buf));
	for (int i = 0; i < 200; i++) {
		size_t n = test_rand(&rng) % sizeof(buf), cut = n ? test_rand(&rng) % (n + 1) : 0;
		uint32_t a = zc_crc32c(0, buf, cut), b = zc_crc32c(0, buf + cut, n - cut);
		uint32_t whole = zc_crc32c(0, buf, n);

		assert_int_equal(zc_crc32c_combine(a, b, n - cut), whole);
		/* The other way round: a tail's CRC from the whole and the head. */
		assert_int_equal(whole ^ zc_crc32c_combine(a, 0, n - cut), b);
	}
	/* Empty sides, and lengths past 4 GiB (the table's upper powers) must associate. */
	{
		uint32_t a = zc_crc32c(0, "a", 1), b = zc_crc32c(0, "bc", 2), c = 0x12345678;
		uint64_t lb = (5ull << 30) + 7, lc = (3ull << 32) + 12345;

		assert_int_equal(zc_crc32c_combine(a, 0, 0), a);
		assert_int_equal(zc_crc32c_combine(0, b, 2), b);
		assert_int_equal(zc_crc32c_combine(zc_crc32c_combine(a, b, lb), c, lc),
		                 zc_crc32c_combine(a, zc_crc32c_combine(b, c, lc), lb + lc));
	}
}

static void
test_chunks(void **state)
{
	static uint8_t buf[300000];
	uint32_t out[700];

	(void)state;
	test_fill(&rng, buf, sizeof(buf));
	for (int round = 0; round < 30; round++) {
		size_t len = test_rand(&rng) % sizeof(buf);
		size_t bpc = 1 + test_rand(&rng) % 4096 + (round % 2 ? 512 : 0);
		struct zc_chunk_crc cc;
		size_t at = 0, want = zc_chunk_count(len, bpc);
		uint32_t run = 0, ref_run = 0;

		if (want > 700)
			continue;
		assert_int_equal(zc_chunk_crc_init(&cc, bpc, out, 700), 0);
		while (at < len) {
			size_t n = 1 + test_rand(&rng) % 9000;

			if (n > len - at)
				n = len - at;
			/* Odd rounds also chain the stream's CRC from the same pass. */
			if (round % 2) {
				assert_int_equal(zc_chunk_crc_add_chain(&cc, buf + at, n, &run), 0);
				ref_run = ref_crc32c(ref_run, buf + at, n);
				assert_int_equal(run, ref_run);
			} else {
				assert_int_equal(zc_chunk_crc_add(&cc, buf + at, n), 0);
			}
			at += n;
		}
		assert_int_equal(zc_chunk_crc_finish(&cc), (int)want);
		for (size_t i = 0; i < want; i++) {
			size_t off = i * bpc, n = len - off < bpc ? len - off : bpc;

			assert_int_equal(out[i], ref_crc32c(0, buf + off, n));
		}
	}
}

static void
test_chunk_limits(void **state)
{
	struct zc_chunk_crc cc;
	uint32_t out[2];
	uint8_t buf[10] = { 0 };

	(void)state;
	assert_int_equal(zc_chunk_crc_init(&cc, 0, out, 2), -EINVAL);
	assert_int_equal(zc_chunk_crc_init(&cc, 4, out, 2), 0);
	assert_int_equal(zc_chunk_crc_add(&cc, buf, 8), 0);
	assert_int_equal(zc_chunk_crc_add(&cc, buf, 1), 0);
	assert_int_equal(zc_chunk_crc_finish(&cc), -ENOSPC);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_known_vectors), cmocka_unit_test(test_chaining_and_reference),
		cmocka_unit_test(test_combine),       cmocka_unit_test(test_chunks),
		cmocka_unit_test(test_chunk_limits),
	};

	rng = test_seed();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
