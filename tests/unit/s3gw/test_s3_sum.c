/* Checksums: check values of every algorithm, chaining across spans, the one pass against
 * OpenSSL and the CRC definitions on random split points and block sizes, S3 header
 * encodings, and the small helpers (base64, percent-decoding, XML escaping, error table). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/evp.h>

#include "s3_sum_internal.h"
#include "s3_util_internal.h"
#include "zc.h"

/* Bitwise CRC-64/NVME, the definition. */
static uint64_t
ref_crc64nvme(const uint8_t *p, size_t n)
{
	uint64_t c = ~0ull;

	while (n--) {
		c ^= *p++;
		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (0x9a6c9329ac4bc9b5ull & (0 - (c & 1)));
	}
	return ~c;
}

/* Bitwise reflected CRC-32 (gzip, poly 0xedb88320) and CRC-32C (0x82f63b78), the definitions. */
static uint32_t
ref_crc32r(uint32_t poly, const uint8_t *p, size_t n)
{
	uint32_t c = ~0u;

	while (n--) {
		c ^= *p++;
		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (poly & (0 - (c & 1)));
	}
	return ~c;
}

static void
ref_digest(const EVP_MD *md, const uint8_t *p, size_t n, uint8_t *out)
{
	unsigned len;

	assert_int_equal(EVP_Digest(p, n, out, &len, md, NULL), 1);
}

static void
nop_release(struct zc_ref *ref)
{
	(void)ref;
}

/*
 * The one pass: every digest, the span CRC32C and the borrowed chunk SHA-256, with MD5
 * serial, inline in the service (one stream), and queued to it (a second stream open),
 * over random spans (0 bytes to several blocks) and block sizes, against references.
 */
static void
test_one_pass_random(void **state)
{
	enum { N = 300 * 1024 + 77 };
	static const size_t blocks[] = { 0, 1, 63, 4096, 32 * 1024, 1 << 20 };
	uint8_t *buf = malloc(N), want_md5[16], want_sha1[20], want_sha256[32];
	struct s3_md5mb *mb = NULL;
	bool have_mb;
	struct zc_ref ref;
	uint32_t want_crc32, want_crc32c;
	uint64_t want_crc64;

	(void)state;
	assert_non_null(buf);
	srand(23);
	for (size_t i = 0; i < N; i++)
		buf[i] = (uint8_t)rand();
	zc_ref_init(&ref, nop_release);
	have_mb = s3_md5mb_create(NULL, &mb) == 0;
	for (int round = 0; round < 36; round++) {
		size_t n = round == 0 ? 0 : (size_t)rand() % N;
		int md5_mode = round % 3; /* 0 serial, 1 service alone, 2 service with company */
		struct s3_md5mb_stream *other = NULL;
		struct s3_sum s;
		struct s3_sum_out o;
		EVP_MD_CTX *chunk = EVP_MD_CTX_new();
		uint8_t got_chunk[32];
		unsigned mask = S3_CK_FLEXIBLE | S3_CK_MD5 | (round & 4 ? S3_CK_SEG_CRC32C : 0);

		if (md5_mode && !have_mb)
			md5_mode = 0;
		ref_digest(EVP_md5(), buf, n, want_md5);
		ref_digest(EVP_sha1(), buf, n, want_sha1);
		ref_digest(EVP_sha256(), buf, n, want_sha256);
		want_crc32 = ref_crc32r(0xedb88320u, buf, n);
		want_crc32c = ref_crc32r(0x82f63b78u, buf, n);
		want_crc64 = ref_crc64nvme(buf, n);
		if (md5_mode == 2)
			assert_int_equal(s3_md5mb_open(mb, &other), 0);
		assert_int_equal(s3_sum_init_mb(&s, mask, md5_mode ? mb : NULL), 0);
		s.block = blocks[round % 6];
		assert_non_null(chunk);
		assert_int_equal(EVP_DigestInit_ex(chunk, EVP_sha256(), NULL), 1);
		s.chunk_sha = chunk;
		for (size_t off = 0; off < n;) {
			size_t len = (size_t)rand() % (round & 1 ? 200000 : 700);
			struct zc_seg seg = { buf + off, len, &ref };

			if (len > n - off)
				len = n - off;
			seg.len = len;
			s3_sum_update_seg(&s, &seg);
			if (mask & S3_CK_SEG_CRC32C)
				assert_int_equal(s.seg_crc32c,
				                 ref_crc32r(0x82f63b78u, buf + off, len));
			off += len;
		}
		s3_sum_final(&s, &o);
		s3_sum_fini(&s);
		if (other)
			s3_md5mb_abort(other);
		EVP_DigestFinal_ex(chunk, got_chunk, NULL);
		EVP_MD_CTX_free(chunk);
		assert_memory_equal(o.md5, want_md5, 16);
		assert_memory_equal(o.sha1, want_sha1, 20);
		assert_memory_equal(o.sha256, want_sha256, 32);
		assert_memory_equal(got_chunk, want_sha256, 32);
		assert_int_equal(o.crc32, want_crc32);
		assert_int_equal(o.crc32c, want_crc32c);
		assert_int_equal(o.crc64nvme, want_crc64);
	}
	s3_md5mb_destroy(mb); /* the hasher has put its references: ref may go */
	zc_ref_put(&ref);
	free(buf);
}

static void
test_check_values(void **state)
{
	struct s3_sum s;
	struct s3_sum_out o;
	char v[64], hex[65];

	(void)state;
	assert_int_equal(s3_crc32(0, "123456789", 9), 0xCBF43926u);
	assert_int_equal(s3_crc64nvme(0, "123456789", 9), 0xAE8B14860A799888ull);
	assert_int_equal(s3_sum_init(&s, S3_CK_FLEXIBLE | S3_CK_MD5), 0);
	s3_sum_update(&s, "1234", 4);
	s3_sum_update(&s, "56789", 5);
	s3_sum_final(&s, &o);
	s3_sum_fini(&s);
	assert_int_equal(o.crc32, 0xCBF43926u);
	assert_int_equal(o.crc32c, 0xE3069283u);
	assert_int_equal(o.crc64nvme, 0xAE8B14860A799888ull);
	s3_hex(o.md5, 16, hex);
	assert_string_equal(hex, "25f9e794323b453885f5181f1b624d0b");
	s3_hex(o.sha1, 20, hex);
	assert_string_equal(hex, "f7c3bc1d808e04732adf679965ccc34ca7ae3441");
	s3_hex(o.sha256, 32, hex);
	assert_string_equal(hex,
	                    "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225");
	s3_ck_value(&o, S3_CK_CRC32, v);
	assert_string_equal(v, "y/Q5Jg==");
	s3_ck_value(&o, S3_CK_CRC32C, v);
	assert_string_equal(v, "4waSgw==");
	s3_ck_value(&o, S3_CK_CRC64NVME, v);
	assert_string_equal(v, "rosUhgp5mIg=");
}

static void
test_crc64_random(void **state)
{
	uint8_t buf[4099];

	(void)state;
	srand(7);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	for (size_t n = 0; n < sizeof(buf); n += 97) {
		size_t cut = n / 3;
		uint64_t c = s3_crc64nvme(s3_crc64nvme(0, buf, cut), buf + cut, n - cut);

		assert_int_equal(c, ref_crc64nvme(buf, n));
	}
}

/* FULL_OBJECT multipart checksums: the CRC of the whole from the parts' CRCs and sizes. */
static void
test_crc_combine(void **state)
{
	static uint8_t buf[70000];

	(void)state;
	srand(11);
	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rand();
	for (size_t n = 0; n < sizeof(buf); n += 6997) {
		for (size_t cut = 0; cut <= n; cut += n / 3 + 1) {
			size_t lb = n - cut;

			assert_int_equal(s3_crc32_combine(s3_crc32(0, buf, cut),
			                                  s3_crc32(0, buf + cut, lb), lb),
			                 s3_crc32(0, buf, n));
			assert_int_equal(s3_crc64nvme_combine(s3_crc64nvme(0, buf, cut),
			                                      s3_crc64nvme(0, buf + cut, lb), lb),
			                 s3_crc64nvme(0, buf, n));
		}
	}
	/* lengths past 4 GiB: chaining a zero CRC over a long run of zeros is the same as
	 * combining, and combining A with B then C equals A with (B || C) */
	{
		uint32_t a = s3_crc32(0, "abc", 3), b = s3_crc32(0, "defgh", 5);
		uint32_t bc = s3_crc32_combine(b, b, 5);
		uint64_t big = 5ull << 30;

		assert_int_equal(s3_crc32_combine(s3_crc32_combine(a, b, big), b, big),
		                 s3_crc32_combine(a, s3_crc32_combine(b, b, big), 2 * big));
		assert_int_equal(s3_crc32_combine(a, bc, 10), s3_crc32(0, "abcdefghdefgh", 13));
	}
}

static void
test_names(void **state)
{
	(void)state;
	assert_string_equal(s3_ck_label(S3_CK_CRC64NVME), "CRC64NVME");
	assert_string_equal(s3_ck_label(S3_CK_SHA256), "SHA256");
	assert_int_equal(s3_ck_bytes(S3_CK_SHA1), 20);
	assert_int_equal(s3_ck_bytes(S3_CK_CRC32C), 4);
	assert_int_equal(s3_ck_from_name("CRC32C", 6), S3_CK_CRC32C);
	assert_int_equal(s3_ck_from_name("crc64nvme", 9), S3_CK_CRC64NVME);
	assert_int_equal(s3_ck_from_name("md5", 3), 0);
	assert_string_equal(s3_ck_name(S3_CK_SHA256), "sha256");
}

static void
test_helpers(void **state)
{
	uint8_t out[16];
	char s[64];
	struct s3_buf b;

	(void)state;
	assert_int_equal(s3_b64_decode("aGVsbG8=", 8, out, sizeof(out)), 5);
	assert_memory_equal(out, "hello", 5);
	assert_int_equal(s3_b64_decode("aGVsbG8", 7, out, sizeof(out)), -EINVAL);
	assert_int_equal(s3_b64_decode("a=Vs", 4, out, sizeof(out)), -EINVAL);
	assert_int_equal(s3_b64_decode("!!!!", 4, out, sizeof(out)), -EINVAL);
	s3_b64_encode((const uint8_t *)"hello", 5, s);
	assert_string_equal(s, "aGVsbG8=");
	assert_int_equal(s3_uri_decode("a%28b%29+c%2F", 13, s, sizeof(s), true), 7);
	assert_string_equal(s, "a(b) c/");
	assert_int_equal(s3_uri_decode("a%2", 3, s, sizeof(s), false), -EINVAL);
	assert_int_equal(s3_uri_decode("a%zz", 4, s, sizeof(s), false), -EINVAL);
	s3_buf_init(&b, 64);
	s3_buf_add_xml(&b, "<a&'\"\x01>", 7);
	assert_string_equal(b.p, "&lt;a&amp;&apos;&quot;&#x1;&gt;");
	s3_buf_fini(&b);
	s3_buf_init(&b, 16);
	assert_int_equal(s3_buf_adds(&b, "0123456789abcdefg"), -EMSGSIZE);
	assert_int_equal(s3_buf_adds(&b, "x"), -EMSGSIZE); /* sticky */
	s3_buf_fini(&b);
	assert_string_equal(s3_err_info(S3E_NO_SUCH_KEY)->code, "NoSuchKey");
	assert_int_equal(s3_err_info(S3E_SLOW_DOWN)->http, 503);
	/* the one table from zest codes; every code has an answer */
	assert_int_equal(s3_err_from_errno(ZC_E(ZC_BUCKET_NOT_EMPTY)), S3E_BUCKET_NOT_EMPTY);
	assert_int_equal(s3_err_from_errno(ZC_E(ZC_NO_BUCKET)), S3E_NO_SUCH_BUCKET);
	assert_int_equal(s3_err_from_errno(ZC_E(ZC_NO_KEY)), S3E_NO_SUCH_KEY);
	assert_int_equal(s3_err_from_errno(ZC_E(ZC_NO_QUORUM)), S3E_SERVICE_UNAVAILABLE);
	assert_int_equal(s3_err_from_errno(ZC_E(ZC_PRECONDITION)), S3E_PRECONDITION_FAILED);
	for (int c = 1; c < ZC_CODE_COUNT; c++)
		assert_int_not_equal(s3_err_from_errno(ZC_E(c)), S3_OK);
	assert_int_equal(s3_err_from_errno(S3_E(S3E_NO_SUCH_UPLOAD)), S3E_NO_SUCH_UPLOAD);
	assert_int_equal(s3_err_from_errno(-EAGAIN), S3E_SLOW_DOWN);
	{
		/* a heap copy that owns its bytes until its one reference is put */
		long live = zc_ref_live();
		struct zc_seg seg;
		char key[] = "bucket/key";

		assert_int_equal(s3_seg_dup(key, 10, &seg), 0);
		key[0] = 'X';
		assert_memory_equal(seg.ptr, "bucket/key", 10);
		assert_int_equal(seg.len, 10);
		assert_int_equal(zc_ref_live(), live + 1);
		zc_ref_put(seg.ref);
		assert_int_equal(zc_ref_live(), live);
	}
}

/* The 8-lane MD5 against OpenSSL's, at every padding boundary. */
static void
test_md5x8(void **state)
{
	static const size_t lens[] = { 0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 128, 1000, 100003 };
	uint8_t *buf[8];
	const uint8_t *p[8];
	uint8_t out[8][16];

	(void)state;
	if (!s3_md5x8_supported()) {
		skip();
		return;
	}
	srand(11);
	for (int l = 0; l < 8; l++) {
		buf[l] = malloc(100003);
		for (size_t i = 0; i < 100003; i++)
			buf[l][i] = (uint8_t)rand();
		p[l] = buf[l];
	}
	for (size_t k = 0; k < sizeof(lens) / sizeof(lens[0]); k++) {
		assert_int_equal(s3_md5x8(p, lens[k], out), 0);
		for (int l = 0; l < 8; l++) {
			struct s3_sum s;
			struct s3_sum_out o;

			s3_sum_init(&s, S3_CK_MD5);
			s3_sum_update(&s, buf[l], lens[k]);
			s3_sum_final(&s, &o);
			s3_sum_fini(&s);
			assert_memory_equal(out[l], o.md5, 16);
		}
	}
	for (int l = 0; l < 8; l++)
		free(buf[l]);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_check_values),    cmocka_unit_test(test_crc64_random),
		cmocka_unit_test(test_names),           cmocka_unit_test(test_helpers),
		cmocka_unit_test(test_md5x8),           cmocka_unit_test(test_crc_combine),
		cmocka_unit_test(test_one_pass_random),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
