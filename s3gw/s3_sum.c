/*
 * s3_sum: every digest a PUT needs in one pass: each span goes block by block (S3_SUM_BLOCK)
 * through all of them, so the bytes come from memory once and every digest after the
 * first reads them from L1/L2. MD5 dominates (~0.7 GiB/s/core serially); Debian ships no
 * ISA-L crypto (md5_mb), see docs/dependencies.md.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>
#include <strings.h>

#include <isa-l/crc.h>
#include <openssl/evp.h>

#include "zc_crc.h"
#include "s3_sum_internal.h"
#include "s3_util_internal.h"

/* CRC-64/NVME: reflected polynomial 0x9a6c9329ac4bc9b5, init and xorout all ones. ISA-L
 * 2.30 has ECMA, ISO and Jones only (Jones differs), so a slice-by-8 table lives here. */
static uint64_t crc64_tab[8][256];
static pthread_once_t crc64_once = PTHREAD_ONCE_INIT;

static void
crc64_init_tables(void)
{
	for (unsigned i = 0; i < 256; i++) {
		uint64_t c = i;

		for (int b = 0; b < 8; b++)
			c = (c >> 1) ^ (0x9a6c9329ac4bc9b5ull & (0 - (c & 1)));
		crc64_tab[0][i] = c;
	}
	for (unsigned i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc64_tab[t][i] = (crc64_tab[t - 1][i] >> 8) ^
			                  crc64_tab[0][crc64_tab[t - 1][i] & 0xff];
}

uint64_t
s3_crc64nvme(uint64_t crc, const void *buf, size_t n)
{
	const uint8_t *p = buf;

	pthread_once(&crc64_once, crc64_init_tables);
	crc = ~crc;
	while (n >= 8) {
		uint64_t v;

		memcpy(&v, p, 8); /* little-endian host */
		v ^= crc;
		crc = crc64_tab[7][v & 0xff] ^ crc64_tab[6][(v >> 8) & 0xff] ^
		      crc64_tab[5][(v >> 16) & 0xff] ^ crc64_tab[4][(v >> 24) & 0xff] ^
		      crc64_tab[3][(v >> 32) & 0xff] ^ crc64_tab[2][(v >> 40) & 0xff] ^
		      crc64_tab[1][(v >> 48) & 0xff] ^ crc64_tab[0][v >> 56];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ crc64_tab[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

uint32_t
s3_crc32(uint32_t crc, const void *p, size_t n)
{
	return crc32_gzip_refl(crc, p, n);
}

/*
 * Combining reflected CRCs (zlib's crc32_combine method, for any width up to 64):
 * crc(A || B) = crc(A) * x^(8 |B|) + crc(B) in GF(2)[x] modulo the polynomial; in the
 * reflected representation x^0 is the top bit. x^(8n) comes from squaring x^8, one
 * product per bit of n, so a combine costs O(log n) products and never the bytes.
 */
static uint64_t
gf2_mult(uint64_t a, uint64_t b, uint64_t poly, unsigned width)
{
	uint64_t m = 1ull << (width - 1), p = 0;

	while (m) {
		if (a & m)
			p ^= b;
		m >>= 1;
		b = b & 1 ? (b >> 1) ^ poly : b >> 1;
	}
	return p;
}

static uint64_t
crc_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b, uint64_t poly, unsigned width)
{
	uint64_t xp = 1ull << (width - 2), p = 1ull << (width - 1); /* x^1, x^0 */

	if (len_b == 0)
		return crc_a ^ crc_b;
	for (int i = 0; i < 3; i++) /* x^8 */
		xp = gf2_mult(xp, xp, poly, width);
	for (; len_b; len_b >>= 1) {
		if (len_b & 1)
			p = gf2_mult(xp, p, poly, width);
		xp = gf2_mult(xp, xp, poly, width);
	}
	return gf2_mult(p, crc_a, poly, width) ^ crc_b;
}

uint32_t
s3_crc32_combine(uint32_t crc_a, uint32_t crc_b, uint64_t len_b)
{
	return (uint32_t)crc_combine(crc_a, crc_b, len_b, 0xedb88320u, 32);
}

uint64_t
s3_crc64nvme_combine(uint64_t crc_a, uint64_t crc_b, uint64_t len_b)
{
	return crc_combine(crc_a, crc_b, len_b, 0x9a6c9329ac4bc9b5ull, 64);
}

int
s3_sum_init(struct s3_sum *s, unsigned mask)
{
	return s3_sum_init_mb(s, mask, NULL);
}

int
s3_sum_init_mb(struct s3_sum *s, unsigned mask, struct s3_md5mb *mb)
{
	memset(s, 0, sizeof(*s));
	s->mask = mask;
	if ((mask & S3_CK_MD5) && mb) {
		if (s3_md5mb_open(mb, &s->md5mb) < 0)
			goto fail;
	} else if (mask & S3_CK_MD5) {
		s->md5 = EVP_MD_CTX_new();
		if (!s->md5 || !EVP_DigestInit_ex(s->md5, EVP_md5(), NULL))
			goto fail;
	}
	if (mask & S3_CK_SHA1) {
		s->sha1 = EVP_MD_CTX_new();
		if (!s->sha1 || !EVP_DigestInit_ex(s->sha1, EVP_sha1(), NULL))
			goto fail;
	}
	if (mask & S3_CK_SHA256) {
		s->sha256 = EVP_MD_CTX_new();
		if (!s->sha256 || !EVP_DigestInit_ex(s->sha256, EVP_sha256(), NULL))
			goto fail;
	}
	return 0;
fail:
	s3_sum_fini(s);
	return -ENOMEM;
}

/* One block through every digest but a queued MD5, while it is in L1/L2. */
static void
sum_block(struct s3_sum *s, const uint8_t *p, size_t n, bool md5_here, uint32_t *seg_crc)
{
	if (md5_here && s->md5mb) {
		struct zc_seg b = { p, n, NULL }; /* borrowed: hashed on this thread, now */

		s3_md5mb_update(s->md5mb, &b);
	} else if (md5_here && s->md5) {
		EVP_DigestUpdate(s->md5, p, n);
	}
	if (s->chunk_sha)
		EVP_DigestUpdate(s->chunk_sha, p, n);
	if (s->sha256)
		EVP_DigestUpdate(s->sha256, p, n);
	if (s->sha1)
		EVP_DigestUpdate(s->sha1, p, n);
	if (s->mask & S3_CK_CRC32)
		s->crc32 = s3_crc32(s->crc32, p, n);
	if (s->mask & S3_CK_CRC64NVME)
		s->crc64nvme = s3_crc64nvme(s->crc64nvme, p, n);
	if (s->mask & S3_CK_SEG_CRC32C)
		*seg_crc = zc_crc32c(*seg_crc, p, n);
	else if (s->mask & S3_CK_CRC32C)
		s->crc32c = zc_crc32c(s->crc32c, p, n);
}

void
s3_sum_update(struct s3_sum *s, const void *p, size_t n)
{
	struct zc_seg seg = { p, n, NULL };

	s3_sum_update_seg(s, &seg);
}

/*
 * The one pass. An MD5 the service will queue goes first, by reference (nothing is read
 * here; the hasher works on it while this thread runs the rest). The object's CRC32C,
 * when it is also wanted, comes from the span's by zc_crc32c_combine (no bytes read).
 */
void
s3_sum_update_seg(struct s3_sum *s, const struct zc_seg *seg)
{
	const uint8_t *p = seg->ptr;
	size_t n = seg->len, blk = s->block ? s->block : S3_SUM_BLOCK;
	bool queued = s->md5mb && s3_md5mb_would_queue(s->md5mb, seg);
	uint32_t seg_crc = 0;

	if (queued)
		s3_md5mb_update(s->md5mb, seg);
	s->bytes += n;
	for (size_t off = 0; off < n; off += blk)
		sum_block(s, p + off, n - off < blk ? n - off : blk, !queued, &seg_crc);
	if (s->mask & S3_CK_SEG_CRC32C) {
		s->seg_crc32c = seg_crc;
		if (s->mask & S3_CK_CRC32C)
			s->crc32c = zc_crc32c_combine(s->crc32c, seg_crc, n);
	}
}

void
s3_sum_final(struct s3_sum *s, struct s3_sum_out *o)
{
	memset(o, 0, sizeof(*o));
	o->mask = s->mask;
	o->crc32 = s->crc32;
	o->crc32c = s->crc32c;
	o->crc64nvme = s->crc64nvme;
	if (s->md5mb) {
		s3_md5mb_final(s->md5mb, o->md5);
		s->md5mb = NULL;
	}
	if (s->md5)
		EVP_DigestFinal_ex(s->md5, o->md5, NULL);
	if (s->sha1)
		EVP_DigestFinal_ex(s->sha1, o->sha1, NULL);
	if (s->sha256)
		EVP_DigestFinal_ex(s->sha256, o->sha256, NULL);
}

void
s3_sum_fini(struct s3_sum *s)
{
	s3_md5mb_abort(s->md5mb);
	s->md5mb = NULL;
	EVP_MD_CTX_free(s->md5);
	EVP_MD_CTX_free(s->sha1);
	EVP_MD_CTX_free(s->sha256);
	s->md5 = s->sha1 = s->sha256 = NULL;
}

static const struct {
	unsigned ck;
	const char *name, *label;
	unsigned bytes;
} ck_names[] = {
	{ S3_CK_CRC32, "crc32", "CRC32", 4 },
	{ S3_CK_CRC32C, "crc32c", "CRC32C", 4 },
	{ S3_CK_CRC64NVME, "crc64nvme", "CRC64NVME", 8 },
	{ S3_CK_SHA1, "sha1", "SHA1", 20 },
	{ S3_CK_SHA256, "sha256", "SHA256", 32 },
};

unsigned
s3_ck_from_name(const char *name, size_t n)
{
	for (size_t i = 0; i < sizeof(ck_names) / sizeof(ck_names[0]); i++)
		if (strlen(ck_names[i].name) == n && strncasecmp(ck_names[i].name, name, n) == 0)
			return ck_names[i].ck;
	return 0;
}

const char *
s3_ck_name(unsigned ck)
{
	for (size_t i = 0; i < sizeof(ck_names) / sizeof(ck_names[0]); i++)
		if (ck_names[i].ck == ck)
			return ck_names[i].name;
	return "";
}

const char *
s3_ck_label(unsigned ck)
{
	for (size_t i = 0; i < sizeof(ck_names) / sizeof(ck_names[0]); i++)
		if (ck_names[i].ck == ck)
			return ck_names[i].label;
	return "";
}

unsigned
s3_ck_bytes(unsigned ck)
{
	for (size_t i = 0; i < sizeof(ck_names) / sizeof(ck_names[0]); i++)
		if (ck_names[i].ck == ck)
			return ck_names[i].bytes;
	return 0;
}

void
s3_ck_value(const struct s3_sum_out *o, unsigned ck, char *out)
{
	uint8_t be[8];

	switch (ck) {
	case S3_CK_CRC32:
	case S3_CK_CRC32C: {
		uint32_t v = ck == S3_CK_CRC32 ? o->crc32 : o->crc32c;

		for (int i = 0; i < 4; i++)
			be[i] = (uint8_t)(v >> (24 - 8 * i));
		s3_b64_encode(be, 4, out);
		return;
	}
	case S3_CK_CRC64NVME:
		for (int i = 0; i < 8; i++)
			be[i] = (uint8_t)(o->crc64nvme >> (56 - 8 * i));
		s3_b64_encode(be, 8, out);
		return;
	case S3_CK_SHA1:
		s3_b64_encode(o->sha1, 20, out);
		return;
	case S3_CK_SHA256:
		s3_b64_encode(o->sha256, 32, out);
		return;
	case S3_CK_MD5:
		s3_b64_encode(o->md5, 16, out);
		return;
	default:
		out[0] = '\0';
	}
}
