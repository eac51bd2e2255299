/*
 * s3_mpu_parts: what a multipart object keeps of its parts once they are composed: the
 * object checksum made from the part checksums (COMPOSITE or FULL_OBJECT) and the part
 * table that GET/HEAD ?partNumber=N reads.
 *
 * Also the multipart ETag (MD5 of the part MD5s) and each part's stored checksum.
 *
 * The part table. Parts are gone after Compose, so Complete records their sizes. Objects'
 * attrs are capped at S3_ATTRS_MAX (4096) bytes, which cannot hold 10000 sizes as text
 * (or even as 4-byte integers), but every SDK cuts an upload into parts of one size and a
 * shorter last part, so the table is stored run-length encoded in the attribute
 * "zest-parts:<size>[*<count>],..." -- "16777216*7,1048576" is 7 parts of 16 MiB and one
 * of 1 MiB. Never sent to clients (zest- attributes are internal). Only when the runs do
 * not fit beside the object's other attributes does the table go to its own record
 * "t/<bucket>/<upload-id>" in S3_RESERVED_BUCKET, and the attribute says
 * "zest-parts:@<upload-id>". That record outlives the object if it is deleted or
 * overwritten (a few KiB per such upload; the upload id keeps a stale one from being read
 * for another object): the price of not adding a read to every DELETE and PUT.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "zc_crc.h"
#include "s3_ops_internal.h"
#include "zc.h"

#define PTAB_REC "t/"

/* ------------------------------------------------------------------ checksums */

int
s3_mpu_sum_init(struct s3_mpu_sum *m, unsigned ck, bool full)
{
	memset(m, 0, sizeof(*m));
	m->ck = ck;
	m->full = full;
	if (!ck || full)
		return 0;
	return s3_sum_init(&m->sum, ck);
}

void
s3_mpu_sum_fini(struct s3_mpu_sum *m)
{
	if (m->ck && !m->full)
		s3_sum_fini(&m->sum);
}

int
s3_mpu_sum_add(struct s3_mpu_sum *m, const char *b64, uint64_t size)
{
	uint8_t bin[32];
	unsigned nb = s3_ck_bytes(m->ck);
	uint64_t v = 0;

	if (!m->ck)
		return 0;
	if (s3_b64_decode(b64, strlen(b64), bin, sizeof(bin)) != (int)nb)
		return -EINVAL;
	m->nparts++;
	m->size += size;
	if (!m->full) {
		/* COMPOSITE: the checksum of the concatenated binary part checksums */
		s3_sum_update(&m->sum, bin, nb);
		return 0;
	}
	for (unsigned i = 0; i < nb; i++)
		v = v << 8 | bin[i];
	switch (m->ck) {
	case S3_CK_CRC32:
		m->crc = s3_crc32_combine((uint32_t)m->crc, (uint32_t)v, size);
		break;
	case S3_CK_CRC32C:
		m->crc = zc_crc32c_combine((uint32_t)m->crc, (uint32_t)v, size);
		break;
	case S3_CK_CRC64NVME:
		m->crc = s3_crc64nvme_combine(m->crc, v, size);
		break;
	default:
		return -EINVAL; /* SHA-1/SHA-256 have no full-object form */
	}
	return 0;
}

void
s3_mpu_sum_value(struct s3_mpu_sum *m, char *out)
{
	struct s3_sum_out o;

	out[0] = '\0';
	if (!m->ck)
		return;
	if (m->full) {
		memset(&o, 0, sizeof(o));
		o.crc32 = o.crc32c = (uint32_t)m->crc;
		o.crc64nvme = m->crc;
		s3_ck_value(&o, m->ck, out);
		return;
	}
	s3_sum_final(&m->sum, &o);
	s3_ck_value(&o, m->ck, out);
	sprintf(out + strlen(out), "-%zu", m->nparts);
}

bool
s3_mpu_ck_matches(const char *mine, const char *given, bool composite)
{
	const char *dash = strchr(mine, '-');
	size_t bl = dash ? (size_t)(dash - mine) : strlen(mine);

	if (strcmp(mine, given) == 0)
		return true;
	/* clients send a composite value with or without its "-<parts>" suffix */
	return composite && strlen(given) == bl && strncmp(mine, given, bl) == 0;
}

/* The stored checksum of one algorithm of a part (base64, NUL-terminated into out[64]):
 * 1 found, 0 none, < 0 the part cannot be read. */
int
s3_mpu_part_checksum(struct s3_req *rq, const char *pkey, unsigned ck, char out[64])
{
	struct s3_obj_info *pi = malloc(sizeof(*pi));
	char name[48];
	const char *v;
	int rc, vl;

	if (!pi)
		return -ENOMEM;
	rc = rq->be->stat(rq->be->ctx, S3_RESERVED_BUCKET, pkey, pi);
	if (rc < 0) {
		free(pi);
		return rc;
	}
	snprintf(name, sizeof(name), "x-amz-checksum-%s", s3_ck_name(ck));
	vl = s3_attr_get(pi->attrs, pi->attrs_len, name, &v);
	rc = vl > 0 && vl < 64;
	if (rc) {
		memcpy(out, v, (size_t)vl);
		out[vl] = '\0';
	}
	free(pi);
	return rc;
}

/* The multipart ETag: MD5 of the binary part MD5s, "-<parts>". -EINVAL: not an MD5. */
int
s3_mpu_etag(const struct s3_complete_req *cr, char etag[48])
{
	EVP_MD_CTX *md = EVP_MD_CTX_new();
	uint8_t d[16];

	if (!md || !EVP_DigestInit_ex(md, EVP_md5(), NULL)) {
		EVP_MD_CTX_free(md);
		return -ENOMEM;
	}
	for (size_t i = 0; i < cr->n; i++) {
		uint8_t bin[16];

		if (strlen(cr->parts[i].etag) != 32 ||
		    strspn(cr->parts[i].etag, "0123456789abcdefABCDEF") != 32) {
			EVP_MD_CTX_free(md);
			return -EINVAL;
		}
		for (int k = 0; k < 16; k++) {
			unsigned v;

			sscanf(cr->parts[i].etag + 2 * k, "%2x", &v);
			bin[k] = (uint8_t)v;
		}
		EVP_DigestUpdate(md, bin, 16);
	}
	EVP_DigestFinal_ex(md, d, NULL);
	EVP_MD_CTX_free(md);
	s3_hex(d, 16, etag);
	snprintf(etag + 32, 16, "-%zu", cr->n);
	return 0;
}

/* ------------------------------------------------------------------ part table */

void
s3_ptab_init(struct s3_ptab *t)
{
	memset(t, 0, sizeof(*t));
	s3_buf_init(&t->text, 256u << 10);
}

void
s3_ptab_fini(struct s3_ptab *t)
{
	s3_buf_fini(&t->text);
}

static void
ptab_flush(struct s3_ptab *t)
{
	if (!t->run)
		return;
	s3_buf_printf(&t->text, "%s%" PRIu64, t->text.len ? "," : "", t->run_size);
	if (t->run > 1)
		s3_buf_printf(&t->text, "*%zu", t->run);
	t->run = 0;
}

void
s3_ptab_add(struct s3_ptab *t, uint64_t size)
{
	if (t->run && size != t->run_size)
		ptab_flush(t);
	t->run_size = size;
	t->run++;
	t->n++;
}

int
s3_ptab_store(struct s3_req *rq, const char *uid, struct s3_ptab *t, struct s3_buf *attrs)
{
	char rk[160];
	struct s3_obj_info *info;
	int rc;

	ptab_flush(t);
	if (t->text.err)
		return t->text.err;
	/* inline when it fits beside the other attributes, NUL of the backend's copy too */
	if (attrs->len + 12 + t->text.len < S3_ATTRS_MAX - 1) {
		s3_attr_add(attrs, "zest-parts", 10, t->text.p, t->text.len);
		return attrs->err;
	}
	snprintf(rk, sizeof(rk), PTAB_REC "%s/%s", rq->bucket, uid);
	info = malloc(sizeof(*info));
	if (!info)
		return -ENOMEM;
	rc = s3_mpu_put_record(rq, rk, t->text.p, t->text.len, "", "", 0, NULL, info);
	free(info);
	if (rc < 0)
		return rc;
	{
		char v[40];

		snprintf(v, sizeof(v), "@%s", uid);
		s3_attr_add(attrs, "zest-parts", 10, v, strlen(v));
	}
	return attrs->err;
}

static int
ptab_emit(void *arg, const uint8_t *p, size_t n)
{
	return s3_buf_add(arg, p, n);
}

static int
ptab_info(void *arg, const struct s3_obj_info *info)
{
	(void)arg;
	(void)info;
	return 0;
}

int
s3_ptab_locate(struct s3_req *rq, const struct s3_obj_info *info, unsigned pn, uint64_t *off,
               uint64_t *len, unsigned *count)
{
	const char *v;
	int vl = s3_attr_get(info->attrs, info->attrs_len, "zest-parts", &v);
	struct s3_buf rec;
	const char *p, *end;
	uint64_t o = 0;
	unsigned n = 0;
	bool found = false;
	int rc = 0;

	if (vl <= 0) {
		/* not a multipart object: part 1 is the whole object, there is no other */
		*count = 1;
		*off = 0;
		*len = info->size;
		return pn == 1 ? 1 : -ERANGE;
	}
	s3_buf_init(&rec, 256u << 10);
	if (v[0] == '@') {
		char rk[160];

		snprintf(rk, sizeof(rk), PTAB_REC "%s/%.*s", rq->bucket, vl - 1, v + 1);
		rc = s3_backend_get(rq->be, S3_RESERVED_BUCKET, rk, 0, 0, false, ptab_info,
		                    ptab_emit, &rec);
		if (rc < 0 || rec.err || !rec.len) {
			s3_buf_fini(&rec);
			return rc < 0 ? rc : -EIO;
		}
		v = rec.p;
		vl = (int)rec.len;
	}
	p = v;
	end = v + vl;
	while (p < end) {
		char *e;
		uint64_t size = strtoull(p, &e, 10);
		unsigned long cnt = 1;

		if (e < end && *e == '*')
			cnt = strtoul(e + 1, &e, 10);
		if (e == p || cnt == 0 || cnt > S3_PARTS_MAX) {
			rc = -EIO;
			break;
		}
		if (!found && pn > n && pn <= n + cnt) {
			*off = o + (uint64_t)(pn - n - 1) * size;
			*len = size;
			found = true;
		}
		o += size * cnt;
		n += (unsigned)cnt;
		p = e < end ? e + 1 : end;
	}
	s3_buf_fini(&rec);
	if (rc < 0)
		return rc;
	*count = n;
	return found ? 0 : -ERANGE;
}
