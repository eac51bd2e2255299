/*
 * dn_meta_rec: the record codec: object and extent records, and the little-endian
 * byte buffers they are written with.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dn_meta_internal.h"

/* ---- encoding ---- */
void
dn_wbuf_bytes(struct wbuf *b, const void *v, size_t n)
{
	if (b->err || !n) /* an empty field may come as NULL: memcpy(.., NULL, 0) is undefined */
		return;
	if (b->len + n > b->cap) {
		size_t cap = b->cap ? b->cap * 2 : 256;
		uint8_t *p;

		while (cap < b->len + n)
			cap *= 2;
		p = realloc(b->p, cap);
		if (!p) {
			b->err = -ENOMEM;
			return;
		}
		b->p = p;
		b->cap = cap;
	}
	memcpy(b->p + b->len, v, n);
	b->len += n;
}
void
dn_wbuf_u32(struct wbuf *b, uint32_t v)
{
	dn_wbuf_bytes(b, &v, 4);
}
static void
dn_wbuf_u64(struct wbuf *b, uint64_t v)
{
	dn_wbuf_bytes(b, &v, 8);
}
static void
dn_wbuf_str(struct wbuf *b, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) : 0;

	dn_wbuf_u32(b, n);
	dn_wbuf_bytes(b, s, n);
}

static void
dn_rbuf_bytes(struct rbuf *b, void *v, size_t n)
{
	if (b->err || b->len - b->at < n) {
		b->err = -EBADMSG;
		memset(v, 0, n);
		return;
	}
	memcpy(v, b->p + b->at, n);
	b->at += n;
}
/* n bytes in place (NULL on a short buffer: b->err is set). */
const uint8_t *
dn_rbuf_span(struct rbuf *b, size_t n)
{
	const uint8_t *p;

	if (b->err || b->len - b->at < n) {
		b->err = -EBADMSG;
		return NULL;
	}
	p = b->p + b->at;
	b->at += n;
	return p;
}
uint32_t
dn_rbuf_u32(struct rbuf *b)
{
	uint32_t v;

	dn_rbuf_bytes(b, &v, 4);
	return v;
}
static uint64_t
dn_rbuf_u64(struct rbuf *b)
{
	uint64_t v;

	dn_rbuf_bytes(b, &v, 8);
	return v;
}
static char *
dn_rbuf_str(struct rbuf *b)
{
	uint32_t n = dn_rbuf_u32(b);
	char *s;

	if (b->err || b->len - b->at < n) {
		b->err = -EBADMSG;
		return NULL;
	}
	s = malloc(n + 1);
	if (!s) {
		b->err = -ENOMEM;
		return NULL;
	}
	memcpy(s, b->p + b->at, n);
	s[n] = 0;
	b->at += n;
	return s;
}

/* ---- records ---- */
void
dn_obj_fini(struct dn_obj *o)
{
	free(o->etag);
	for (size_t i = 0; i < o->nattrs; i++) {
		free(o->attrs[i].name);
		free(o->attrs[i].value);
	}
	free(o->attrs);
	free(o->pieces);
	memset(o, 0, sizeof(*o));
}

int
dn_meta_obj_encode(const struct dn_obj *o, struct wbuf *b)
{
	dn_wbuf_u32(b, OBJ_VER);
	dn_wbuf_u64(b, o->size);
	dn_wbuf_u64(b, o->mtime_ns);
	dn_wbuf_u32(b, o->crc32c);
	dn_wbuf_u32(b, o->k);
	dn_wbuf_u32(b, o->m);
	dn_wbuf_str(b, o->etag);
	dn_wbuf_u32(b, (uint32_t)o->nattrs);
	for (size_t i = 0; i < o->nattrs; i++) {
		dn_wbuf_str(b, o->attrs[i].name);
		dn_wbuf_str(b, o->attrs[i].value);
	}
	dn_wbuf_u32(b, (uint32_t)o->npieces);
	for (size_t i = 0; i < o->npieces; i++) {
		dn_wbuf_u64(b, o->pieces[i].ext_id);
		dn_wbuf_u64(b, o->pieces[i].size);
	}
	return b->err;
}

int
dn_meta_obj_decode(const MDB_val *v, struct dn_obj *o)
{
	struct rbuf b = { .p = v->mv_data, .len = v->mv_size };
	uint32_t n;

	memset(o, 0, sizeof(*o));
	if (dn_rbuf_u32(&b) != OBJ_VER)
		return -EBADMSG;
	o->size = dn_rbuf_u64(&b);
	o->mtime_ns = dn_rbuf_u64(&b);
	o->crc32c = dn_rbuf_u32(&b);
	o->k = dn_rbuf_u32(&b);
	o->m = dn_rbuf_u32(&b);
	o->etag = dn_rbuf_str(&b);
	n = dn_rbuf_u32(&b);
	if (b.err || n > 10000)
		goto bad;
	o->attrs = calloc(n ? n : 1, sizeof(*o->attrs));
	if (!o->attrs)
		goto bad;
	for (; o->nattrs < n && !b.err; o->nattrs++) {
		o->attrs[o->nattrs].name = dn_rbuf_str(&b);
		o->attrs[o->nattrs].value = dn_rbuf_str(&b);
	}
	n = dn_rbuf_u32(&b);
	if (b.err || n > v->mv_size / 16)
		goto bad;
	o->pieces = calloc(n ? n : 1, sizeof(*o->pieces));
	if (!o->pieces)
		goto bad;
	for (; o->npieces < n; o->npieces++) {
		o->pieces[o->npieces].ext_id = dn_rbuf_u64(&b);
		o->pieces[o->npieces].size = dn_rbuf_u64(&b);
	}
	if (b.err)
		goto bad;
	return 0;
bad:
	dn_obj_fini(o);
	return b.err ? b.err : -ENOMEM;
}

size_t
dn_extent_ncrc(const struct dn_extent *e, uint32_t group, unsigned c)
{
	return zc_chunk_count(dn_geom_file_len(&e->g, group, c), e->g.chunk);
}

uint32_t *
dn_extent_crcs(const struct dn_extent *e, uint32_t group, unsigned c)
{
	uint32_t *p = e->groups[group].crcs;

	for (unsigned i = 0; i < c; i++)
		p += dn_extent_ncrc(e, group, i);
	return p;
}

int
dn_extent_alloc(struct dn_extent *e)
{
	size_t total = 0;
	unsigned n = e->g.k + e->g.m;

	e->ngroups = dn_geom_ngroups(&e->g);
	e->groups = calloc(e->ngroups ? e->ngroups : 1, sizeof(*e->groups));
	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < n; c++)
			total += dn_extent_ncrc(e, g, c);
	e->crc_mem = calloc(total ? total : 1, sizeof(uint32_t));
	if (!e->groups || !e->crc_mem) {
		dn_extent_free(e);
		return -ENOMEM;
	}
	total = 0;
	for (uint32_t g = 0; g < e->ngroups; g++) {
		e->groups[g].crcs = e->crc_mem + total;
		for (unsigned c = 0; c < n; c++)
			total += dn_extent_ncrc(e, g, c);
	}
	return 0;
}

void
dn_extent_free(struct dn_extent *e)
{
	if (!e)
		return;
	free(e->groups);
	free(e->crc_mem);
	e->groups = NULL;
	e->crc_mem = NULL;
}

int
dn_meta_ext_encode(const struct dn_extent *e, struct wbuf *b)
{
	unsigned n = e->g.k + e->g.m;

	dn_wbuf_u32(b, e->g.short_parity ? EXT_VER : 1); /* an older extent keeps its layout */
	dn_wbuf_u32(b, e->refs);
	dn_wbuf_u64(b, e->g.size);
	dn_wbuf_u32(b, e->g.k);
	dn_wbuf_u32(b, e->g.m);
	dn_wbuf_u32(b, e->g.cell);
	dn_wbuf_u32(b, e->g.spg);
	dn_wbuf_u32(b, e->g.chunk);
	for (uint32_t g = 0; g < e->ngroups; g++) {
		dn_wbuf_bytes(b, e->groups[g].drives, n);
		dn_wbuf_u32(b, e->groups[g].missing);
	}
	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < n; c++)
			dn_wbuf_bytes(b, dn_extent_crcs(e, g, c), 4 * dn_extent_ncrc(e, g, c));
	return b->err;
}

int
dn_meta_ext_decode(const MDB_val *v, uint64_t id, struct dn_extent *e)
{
	struct rbuf b = { .p = v->mv_data, .len = v->mv_size };
	unsigned n;
	uint32_t ver;
	int err;

	memset(e, 0, sizeof(*e));
	e->id = id;
	ver = dn_rbuf_u32(&b);
	if (ver != 1 && ver != EXT_VER)
		return -EBADMSG;
	e->g.short_parity = ver >= 2;
	e->refs = dn_rbuf_u32(&b);
	e->g.size = dn_rbuf_u64(&b);
	e->g.k = dn_rbuf_u32(&b);
	e->g.m = dn_rbuf_u32(&b);
	e->g.cell = dn_rbuf_u32(&b);
	e->g.spg = dn_rbuf_u32(&b);
	e->g.chunk = dn_rbuf_u32(&b);
	n = e->g.k + e->g.m;
	if (b.err || !e->g.k || !e->g.m || n > EC_MAX_CELLS || !e->g.cell || !e->g.spg ||
	    !e->g.chunk)
		return -EBADMSG;
	err = dn_extent_alloc(e);
	if (err)
		return err;
	for (uint32_t g = 0; g < e->ngroups; g++) {
		dn_rbuf_bytes(&b, e->groups[g].drives, n);
		e->groups[g].missing = dn_rbuf_u32(&b);
	}
	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < n; c++)
			dn_rbuf_bytes(&b, dn_extent_crcs(e, g, c), 4 * dn_extent_ncrc(e, g, c));
	if (b.err) {
		dn_extent_free(e);
		return b.err;
	}
	return 0;
}

int
dn_meta_mdb_err(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return ZC_E(ZC_NO_KEY);
	case MDB_MAP_FULL:
		return -ENOSPC;
	case MDB_CORRUPTED:
	case MDB_PAGE_NOTFOUND:
	case MDB_INVALID:
	case MDB_VERSION_MISMATCH:
	case MDB_INCOMPATIBLE:
		return -EBADMSG;
	default:
		return rc > 0 ? -rc : -EIO;
	}
}
