/*
 * s3_md5x8: MD5 of eight independent messages at once, one per 32-bit lane of AVX2
 * registers. MD5 is serial within a message (each step needs the previous one), so one
 * upload cannot go faster than OpenSSL's ~0.58 GiB/s on this CPU; eight uploads side by
 * side can share the vector unit. Debian ships no ISA-L crypto (md5_mb), hence this.
 * Plain C with intrinsics; the scalar reference is OpenSSL (tests compare against it).
 */
#include <errno.h>
#include <string.h>

#include <immintrin.h>

#include "s3_sum_internal.h"

static const uint32_t K[64] = {
	0xd76aa478, 0xe8c7b756, 0x242070db, 0xc1bdceee, 0xf57c0faf, 0x4787c62a, 0xa8304613,
	0xfd469501, 0x698098d8, 0x8b44f7af, 0xffff5bb1, 0x895cd7be, 0x6b901122, 0xfd987193,
	0xa679438e, 0x49b40821, 0xf61e2562, 0xc040b340, 0x265e5a51, 0xe9b6c7aa, 0xd62f105d,
	0x02441453, 0xd8a1e681, 0xe7d3fbc8, 0x21e1cde6, 0xc33707d6, 0xf4d50d87, 0x455a14ed,
	0xa9e3e905, 0xfcefa3f8, 0x676f02d9, 0x8d2a4c8a, 0xfffa3942, 0x8771f681, 0x6d9d6122,
	0xfde5380c, 0xa4beea44, 0x4bdecfa9, 0xf6bb4b60, 0xbebfbc70, 0x289b7ec6, 0xeaa127fa,
	0xd4ef3085, 0x04881d05, 0xd9d4d039, 0xe6db99e5, 0x1fa27cf8, 0xc4ac5665, 0xf4292244,
	0x432aff97, 0xab9423a7, 0xfc93a039, 0x655b59c3, 0x8f0ccc92, 0xffeff47d, 0x85845dd1,
	0x6fa87e4f, 0xfe2ce6e0, 0xa3014314, 0x4e0811a1, 0xf7537e82, 0xbd3af235, 0x2ad7d2bb,
	0xeb86d391,
};

#define ROTL(x, s) _mm256_or_si256(_mm256_slli_epi32((x), (s)), _mm256_srli_epi32((x), 32 - (s)))
#define STEP(f, a, b, c, d, w, k, s)                                                               \
	do {                                                                                       \
		a = _mm256_add_epi32(                                                              \
		        a, _mm256_add_epi32(f, _mm256_add_epi32(w, _mm256_set1_epi32((int)(k))))); \
		a = _mm256_add_epi32(b, ROTL(a, s));                                               \
	} while (0)
#define FF(b, c, d) _mm256_or_si256(_mm256_and_si256(b, c), _mm256_andnot_si256(b, d))
#define GG(b, c, d) _mm256_or_si256(_mm256_and_si256(d, b), _mm256_andnot_si256(d, c))
#define HH(b, c, d) _mm256_xor_si256(_mm256_xor_si256(b, c), d)
#define II(b, c, d) _mm256_xor_si256(c, _mm256_or_si256(b, _mm256_xor_si256(d, ones)))

/*
 * Words j..j+7 of the block at off of each lane, as w[j] = (lane 0's word j, ..., lane 7's):
 * one 32-byte load per lane and an 8x8 transpose of 32-bit elements in registers (24
 * shuffles). Gathering the words one by one through memory cost a store-forwarding stall
 * per vector.
 */
__attribute__((target("avx2"))) static inline void
load_words(__m256i w[8], const uint8_t *const p[8], size_t off)
{
	__m256i r[8], t[8], u[8];

	for (int l = 0; l < 8; l++)
		r[l] = _mm256_loadu_si256((const __m256i *)(p[l] + off));
	for (int i = 0; i < 8; i += 2) {
		t[i] = _mm256_unpacklo_epi32(r[i], r[i + 1]);     /* a0 b0 a1 b1 | a4 b4 a5 b5 */
		t[i + 1] = _mm256_unpackhi_epi32(r[i], r[i + 1]); /* a2 b2 a3 b3 | a6 b6 a7 b7 */
	}
	for (int i = 0; i < 8; i += 4) {
		u[i] = _mm256_unpacklo_epi64(t[i], t[i + 2]);         /* a0 b0 c0 d0 | a4 .. d4 */
		u[i + 1] = _mm256_unpackhi_epi64(t[i], t[i + 2]);     /* a1 .. d1 | a5 .. d5 */
		u[i + 2] = _mm256_unpacklo_epi64(t[i + 1], t[i + 3]); /* a2 .. d2 | a6 .. d6 */
		u[i + 3] = _mm256_unpackhi_epi64(t[i + 1], t[i + 3]); /* a3 .. d3 | a7 .. d7 */
	}
	for (int j = 0; j < 4; j++) {
		w[j] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x20);
		w[j + 4] = _mm256_permute2x128_si256(u[j], u[j + 4], 0x31);
	}
}

__attribute__((target("avx2"))) static void
blocks_x8(uint32_t st[4][8], const uint8_t *const p[8], size_t nblocks)
{
	__m256i a0 = _mm256_loadu_si256((const __m256i *)st[0]);
	__m256i b0 = _mm256_loadu_si256((const __m256i *)st[1]);
	__m256i c0 = _mm256_loadu_si256((const __m256i *)st[2]);
	__m256i d0 = _mm256_loadu_si256((const __m256i *)st[3]);
	const __m256i ones = _mm256_set1_epi32(-1);

	for (size_t blk = 0; blk < nblocks; blk++) {
		__m256i w[16], a = a0, b = b0, c = c0, d = d0;
		size_t off = blk * 64;

		load_words(w, p, off);
		load_words(w + 8, p, off + 32);
		for (int i = 0; i < 16; i += 4) {
			STEP(FF(b, c, d), a, b, c, d, w[i], K[i], 7);
			STEP(FF(a, b, c), d, a, b, c, w[i + 1], K[i + 1], 12);
			STEP(FF(d, a, b), c, d, a, b, w[i + 2], K[i + 2], 17);
			STEP(FF(c, d, a), b, c, d, a, w[i + 3], K[i + 3], 22);
		}
		for (int i = 16; i < 32; i += 4) {
			STEP(GG(b, c, d), a, b, c, d, w[(5 * i + 1) % 16], K[i], 5);
			STEP(GG(a, b, c), d, a, b, c, w[(5 * (i + 1) + 1) % 16], K[i + 1], 9);
			STEP(GG(d, a, b), c, d, a, b, w[(5 * (i + 2) + 1) % 16], K[i + 2], 14);
			STEP(GG(c, d, a), b, c, d, a, w[(5 * (i + 3) + 1) % 16], K[i + 3], 20);
		}
		for (int i = 32; i < 48; i += 4) {
			STEP(HH(b, c, d), a, b, c, d, w[(3 * i + 5) % 16], K[i], 4);
			STEP(HH(a, b, c), d, a, b, c, w[(3 * (i + 1) + 5) % 16], K[i + 1], 11);
			STEP(HH(d, a, b), c, d, a, b, w[(3 * (i + 2) + 5) % 16], K[i + 2], 16);
			STEP(HH(c, d, a), b, c, d, a, w[(3 * (i + 3) + 5) % 16], K[i + 3], 23);
		}
		for (int i = 48; i < 64; i += 4) {
			STEP(II(b, c, d), a, b, c, d, w[(7 * i) % 16], K[i], 6);
			STEP(II(a, b, c), d, a, b, c, w[(7 * (i + 1)) % 16], K[i + 1], 10);
			STEP(II(d, a, b), c, d, a, b, w[(7 * (i + 2)) % 16], K[i + 2], 15);
			STEP(II(c, d, a), b, c, d, a, w[(7 * (i + 3)) % 16], K[i + 3], 21);
		}
		a0 = _mm256_add_epi32(a0, a);
		b0 = _mm256_add_epi32(b0, b);
		c0 = _mm256_add_epi32(c0, c);
		d0 = _mm256_add_epi32(d0, d);
	}
	_mm256_storeu_si256((__m256i *)st[0], a0);
	_mm256_storeu_si256((__m256i *)st[1], b0);
	_mm256_storeu_si256((__m256i *)st[2], c0);
	_mm256_storeu_si256((__m256i *)st[3], d0);
}

void
s3_md5x8_blocks(uint32_t st[4][8], const uint8_t *const p[8], size_t nblocks)
{
	blocks_x8(st, p, nblocks);
}

bool
s3_md5x8_supported(void)
{
	return __builtin_cpu_supports("avx2");
}

int
s3_md5x8(const uint8_t *const data[8], size_t len, uint8_t out[8][16])
{
	uint32_t st[4][8];
	size_t full = len / 64, rem = len % 64, tail_blocks;
	uint8_t tail[8][128];
	const uint8_t *tp[8];
	uint64_t bits = (uint64_t)len * 8;

	if (!s3_md5x8_supported())
		return -ENOTSUP;
	for (int l = 0; l < 8; l++) {
		st[0][l] = 0x67452301;
		st[1][l] = 0xefcdab89;
		st[2][l] = 0x98badcfe;
		st[3][l] = 0x10325476;
	}
	blocks_x8(st, data, full);
	tail_blocks = rem < 56 ? 1 : 2;
	for (int l = 0; l < 8; l++) {
		memset(tail[l], 0, sizeof(tail[l]));
		memcpy(tail[l], data[l] + full * 64, rem);
		tail[l][rem] = 0x80;
		for (int i = 0; i < 8; i++)
			tail[l][tail_blocks * 64 - 8 + i] = (uint8_t)(bits >> (8 * i));
		tp[l] = tail[l];
	}
	blocks_x8(st, tp, tail_blocks);
	for (int l = 0; l < 8; l++)
		for (int w = 0; w < 4; w++)
			for (int i = 0; i < 4; i++)
				out[l][4 * w + i] = (uint8_t)(st[w][l] >> (8 * i));
	return 0;
}
