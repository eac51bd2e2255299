/*
 * Metadata in LMDB, one environment per replica on the first m + 1 drives
 * (<drive>/meta/). Every write transaction is applied to each live replica in turn under
 * one lock, and bumps a generation number in each; on open the replica with the highest
 * generation wins and is copied over the others, so losing any m drives loses nothing.
 * A replica whose write fails is dropped from the live set (on ENOSPC its drive is marked
 * full); the background healer copies the primary over it once its drive is OK again
 * (dn_meta_revive_replica) and it takes writes again, with no restart.
 *
 * Tables: buckets (name -> ctime), objects (bucket \0 key -> object record, so LMDB's
 * byte order is S3's key order; names too long for an LMDB key share a bundle, see
 * "keys"), extents (big-endian id -> extent record), info (gen, next_id, keymax).
 * Records are a small little-endian binary encoding (see w_/r_ helpers).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dn_internal.h"

#define MAX_REPS   EC_MAX_CELLS
#define OBJ_VER    1
#define EXT_VER    2 /* 1: parity cells always full (no short_parity) */
#define BUNDLE_VER 0x42000001u /* bundle format 1; never an OBJ_VER (see "keys") */
#define KEY_MAX    1024
#define BUCKET_MAX 255

struct rep {
	MDB_env *env;
	MDB_dbi buckets, objects, extents, info;
	bool ok;
	char dir[4096];
	uint64_t gen;
	int inject;    /* test hook: the next write transaction here fails with this */
	size_t maxkey; /* mdb_env_get_maxkeysize: a key this long is a bundle's */
};

struct dn_meta {
	struct dn_store *s;
	struct rep rep[MAX_REPS];
	unsigned nrep;
	unsigned primary;
	pthread_mutex_t wlock;
	pthread_rwlock_t envlock;
	atomic_uint_fast64_t next_id;
	/* For /metrics without wlock: written under wlock. */
	atomic_uint nlive;
	atomic_uint_fast64_t revived;
};

/* Under wlock (or before the store runs): publish how many replicas take writes. */
static void
meta_count_live(struct dn_meta *m)
{
	unsigned n = 0;

	for (unsigned i = 0; i < m->nrep; i++)
		n += m->rep[i].ok;
	atomic_store(&m->nlive, n);
}

char *
dn_strdup(const char *s)
{
	return s ? strdup(s) : NULL;
}

/* ---- encoding ---- */
struct wbuf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

static void
w_bytes(struct wbuf *b, const void *v, size_t n)
{
	if (b->err)
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
static void
w_u32(struct wbuf *b, uint32_t v)
{
	w_bytes(b, &v, 4);
}
static void
w_u64(struct wbuf *b, uint64_t v)
{
	w_bytes(b, &v, 8);
}
static void
w_str(struct wbuf *b, const char *s)
{
	uint32_t n = s ? (uint32_t)strlen(s) : 0;

	w_u32(b, n);
	w_bytes(b, s, n);
}

struct rbuf {
	const uint8_t *p;
	size_t len, at;
	int err;
};
static void
r_bytes(struct rbuf *b, void *v, size_t n)
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
static const uint8_t *
r_span(struct rbuf *b, size_t n)
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
static uint32_t
r_u32(struct rbuf *b)
{
	uint32_t v;

	r_bytes(b, &v, 4);
	return v;
}
static uint64_t
r_u64(struct rbuf *b)
{
	uint64_t v;

	r_bytes(b, &v, 8);
	return v;
}
static char *
r_str(struct rbuf *b)
{
	uint32_t n = r_u32(b);
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

static int
obj_encode(const struct dn_obj *o, struct wbuf *b)
{
	w_u32(b, OBJ_VER);
	w_u64(b, o->size);
	w_u64(b, o->mtime_ns);
	w_u32(b, o->crc32c);
	w_u32(b, o->k);
	w_u32(b, o->m);
	w_str(b, o->etag);
	w_u32(b, (uint32_t)o->nattrs);
	for (size_t i = 0; i < o->nattrs; i++) {
		w_str(b, o->attrs[i].name);
		w_str(b, o->attrs[i].value);
	}
	w_u32(b, (uint32_t)o->npieces);
	for (size_t i = 0; i < o->npieces; i++) {
		w_u64(b, o->pieces[i].ext_id);
		w_u64(b, o->pieces[i].size);
	}
	return b->err;
}

static int
obj_decode(const MDB_val *v, struct dn_obj *o)
{
	struct rbuf b = { .p = v->mv_data, .len = v->mv_size };
	uint32_t n;

	memset(o, 0, sizeof(*o));
	if (r_u32(&b) != OBJ_VER)
		return -EBADMSG;
	o->size = r_u64(&b);
	o->mtime_ns = r_u64(&b);
	o->crc32c = r_u32(&b);
	o->k = r_u32(&b);
	o->m = r_u32(&b);
	o->etag = r_str(&b);
	n = r_u32(&b);
	if (b.err || n > 10000)
		goto bad;
	o->attrs = calloc(n ? n : 1, sizeof(*o->attrs));
	if (!o->attrs)
		goto bad;
	for (; o->nattrs < n && !b.err; o->nattrs++) {
		o->attrs[o->nattrs].name = r_str(&b);
		o->attrs[o->nattrs].value = r_str(&b);
	}
	n = r_u32(&b);
	if (b.err || n > v->mv_size / 16)
		goto bad;
	o->pieces = calloc(n ? n : 1, sizeof(*o->pieces));
	if (!o->pieces)
		goto bad;
	for (; o->npieces < n; o->npieces++) {
		o->pieces[o->npieces].ext_id = r_u64(&b);
		o->pieces[o->npieces].size = r_u64(&b);
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
	return ec_chunk_count(dn_geom_file_len(&e->g, group, c), e->g.chunk);
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

static int
ext_encode(const struct dn_extent *e, struct wbuf *b)
{
	unsigned n = e->g.k + e->g.m;

	w_u32(b, e->g.short_parity ? EXT_VER : 1); /* an older extent keeps its layout */
	w_u32(b, e->refs);
	w_u64(b, e->g.size);
	w_u32(b, e->g.k);
	w_u32(b, e->g.m);
	w_u32(b, e->g.cell);
	w_u32(b, e->g.spg);
	w_u32(b, e->g.chunk);
	for (uint32_t g = 0; g < e->ngroups; g++) {
		w_bytes(b, e->groups[g].drives, n);
		w_u32(b, e->groups[g].missing);
	}
	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < n; c++)
			w_bytes(b, dn_extent_crcs(e, g, c), 4 * dn_extent_ncrc(e, g, c));
	return b->err;
}

static int
ext_decode(const MDB_val *v, uint64_t id, struct dn_extent *e)
{
	struct rbuf b = { .p = v->mv_data, .len = v->mv_size };
	unsigned n;
	uint32_t ver;
	int err;

	memset(e, 0, sizeof(*e));
	e->id = id;
	ver = r_u32(&b);
	if (ver != 1 && ver != EXT_VER)
		return -EBADMSG;
	e->g.short_parity = ver >= 2;
	e->refs = r_u32(&b);
	e->g.size = r_u64(&b);
	e->g.k = r_u32(&b);
	e->g.m = r_u32(&b);
	e->g.cell = r_u32(&b);
	e->g.spg = r_u32(&b);
	e->g.chunk = r_u32(&b);
	n = e->g.k + e->g.m;
	if (b.err || !e->g.k || !e->g.m || n > EC_MAX_CELLS || !e->g.cell || !e->g.spg ||
	    !e->g.chunk)
		return -EBADMSG;
	err = dn_extent_alloc(e);
	if (err)
		return err;
	for (uint32_t g = 0; g < e->ngroups; g++) {
		r_bytes(&b, e->groups[g].drives, n);
		e->groups[g].missing = r_u32(&b);
	}
	for (uint32_t g = 0; g < e->ngroups; g++)
		for (unsigned c = 0; c < n; c++)
			r_bytes(&b, dn_extent_crcs(e, g, c), 4 * dn_extent_ncrc(e, g, c));
	if (b.err) {
		dn_extent_free(e);
		return b.err;
	}
	return 0;
}

static int
mdb_err(int rc)
{
	switch (rc) {
	case 0:
		return 0;
	case MDB_NOTFOUND:
		return -ENOENT;
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

/* ---- keys ---- */
/*
 * An object's name is `bucket \0 key` (at most NAME_MAX_LEN bytes). LMDB refuses keys of
 * maxkey (mdb_env_get_maxkeysize, 511 on Debian) bytes or more, so a name shorter than
 * maxkey is its own LMDB key, and a longer one lives in the *bundle* stored under its
 * first maxkey bytes: every long name with that prefix, as (rest of the name, object
 * record) entries sorted by rest. A key of exactly maxkey bytes marks a bundle (or a
 * plain record from before bundles: see bundle_open). LMDB's byte order over these keys,
 * with each bundle expanded in place, is the names' order.
 */
#define NAME_MAX_LEN (BUCKET_MAX + 1 + KEY_MAX)

static int
obj_name(const char *bucket, const char *key, char *buf, size_t *len)
{
	size_t bl = strlen(bucket), kl = strlen(key);

	if (bl == 0 || bl > BUCKET_MAX || kl == 0 || kl > KEY_MAX)
		return -EINVAL;
	memcpy(buf, bucket, bl + 1);
	memcpy(buf + bl + 1, key, kl);
	*len = bl + 1 + kl;
	return 0;
}

/* The LMDB key a name lives under: the name itself, or its bundle's prefix. */
static void
obj_lkey(const struct rep *r, const char *name, size_t len, MDB_val *k)
{
	k->mv_data = (void *)name;
	k->mv_size = len < r->maxkey ? len : r->maxkey;
}

static void
ext_key(uint64_t id, uint8_t *buf, MDB_val *k)
{
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(id >> (56 - 8 * i));
	k->mv_data = buf;
	k->mv_size = 8;
}

/* Byte-order comparison of two counted strings. */
static int
span_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c)
		return c;
	return al < bl ? -1 : al > bl;
}

/* ---- bundles ---- */
struct bundle_rd {
	struct rbuf b;
	uint32_t left;
	bool plain; /* an object record stored before bundles existed: one entry, rest "" */
};

/*
 * LMDB takes keys of exactly maxkey bytes, so a store written before bundles may hold a
 * plain object record under a key of that length: its name is the key, i.e. the entry
 * with rest "" of the bundle that key now stands for. It is read as that one-entry bundle
 * (BUNDLE_VER is never an OBJ_VER) and becomes a real bundle at its next write.
 */
static int
bundle_open(const MDB_val *v, struct bundle_rd *br)
{
	uint32_t ver;

	br->b = (struct rbuf){ .p = v->mv_data, .len = v->mv_size };
	br->plain = false;
	ver = r_u32(&br->b);
	if (br->b.err)
		return br->b.err;
	if (ver != BUNDLE_VER) { /* an object record of any OBJ_VER: obj_decode checks it */
		br->plain = true;
		br->left = 1;
		return 0;
	}
	br->left = r_u32(&br->b);
	return br->b.err;
}

/* The next entry (pointers into the bundle's value): 1, 0 at the end, or -EBADMSG. */
static int
bundle_next(struct bundle_rd *br, size_t maxkey, MDB_val *rest, MDB_val *rec)
{
	if (!br->left)
		return br->b.at == br->b.len ? 0 : -EBADMSG;
	br->left--;
	if (br->plain) {
		*rest = (MDB_val){ 0, (void *)br->b.p };
		*rec = (MDB_val){ br->b.len, (void *)br->b.p };
		br->b.at = br->b.len;
		return 1;
	}
	rest->mv_size = r_u32(&br->b);
	rest->mv_data = (void *)r_span(&br->b, rest->mv_size);
	rec->mv_size = r_u32(&br->b);
	rec->mv_data = (void *)r_span(&br->b, rec->mv_size);
	if (br->b.err || maxkey + rest->mv_size > NAME_MAX_LEN)
		return -EBADMSG;
	return 1;
}

static void
bundle_put_entry(struct wbuf *b, const void *rest, size_t rl, const MDB_val *rec)
{
	w_u32(b, (uint32_t)rl);
	w_bytes(b, rest, rl);
	w_u32(b, (uint32_t)rec->mv_size);
	w_bytes(b, rec->mv_data, rec->mv_size);
}

/* ---- object records by name (any transaction) ---- */
/* Find name's record: 0 (rec points into LMDB's memory, valid in txn), -ENOENT, -errno. */
static int
obj_rec_get(struct rep *r, MDB_txn *txn, const char *name, size_t len, MDB_val *rec)
{
	struct bundle_rd br;
	MDB_val k, v, rest;
	int err, got, c;

	obj_lkey(r, name, len, &k);
	err = mdb_err(mdb_get(txn, r->objects, &k, &v));
	if (err || len < r->maxkey) {
		*rec = v;
		return err;
	}
	err = bundle_open(&v, &br);
	while (!err && (got = bundle_next(&br, r->maxkey, &rest, rec)) != 0) {
		if (got < 0)
			return got;
		c = span_cmp(rest.mv_data, rest.mv_size, name + r->maxkey, len - r->maxkey);

		if (c == 0)
			return 0;
		if (c > 0)
			break; /* sorted: it is not here */
	}
	return err ? err : -ENOENT;
}

/*
 * Store rec as name's record, or with rec NULL remove it (-ENOENT when absent). A long
 * name's bundle is rewritten in this transaction; an emptied bundle is deleted.
 */
static int
obj_rec_set(struct rep *r, MDB_txn *txn, const char *name, size_t len, const MDB_val *rec)
{
	const char *tail = name + r->maxkey;
	size_t tl = len - r->maxkey;
	struct wbuf b = { 0 };
	struct bundle_rd br;
	MDB_val k, v, rest, erec;
	uint32_t empty[2] = { BUNDLE_VER, 0 }, n = 0;
	bool found = false, placed = false;
	int err, got;

	obj_lkey(r, name, len, &k);
	if (len < r->maxkey)
		return mdb_err(rec ? mdb_put(txn, r->objects, &k, (MDB_val *)rec, 0)
		                   : mdb_del(txn, r->objects, &k, NULL));
	err = mdb_err(mdb_get(txn, r->objects, &k, &v));
	if (err == -ENOENT) {
		if (!rec)
			return -ENOENT;
		v = (MDB_val){ sizeof(empty), empty };
		err = 0;
	}
	if (!err)
		err = bundle_open(&v, &br);
	if (err)
		return err;
	/* The new value is built before LMDB writes: v's memory stays valid meanwhile. */
	w_u32(&b, BUNDLE_VER);
	w_u32(&b, 0); /* the count, filled in below */
	while ((got = bundle_next(&br, r->maxkey, &rest, &erec)) > 0) {
		int c = span_cmp(rest.mv_data, rest.mv_size, tail, tl);

		if (c == 0) {
			found = true;
			continue; /* the old version: replaced or removed */
		}
		if (c > 0 && rec && !placed) {
			bundle_put_entry(&b, tail, tl, rec);
			placed = true;
			n++;
		}
		bundle_put_entry(&b, rest.mv_data, rest.mv_size, &erec);
		n++;
	}
	if (rec && !placed) {
		bundle_put_entry(&b, tail, tl, rec);
		n++;
	}
	err = got < 0 ? got : b.err;
	if (!err && !rec && !found)
		err = -ENOENT;
	if (!err && n == 0) {
		err = mdb_err(mdb_del(txn, r->objects, &k, NULL));
	} else if (!err) {
		memcpy(b.p + 4, &n, 4);
		v.mv_data = b.p;
		v.mv_size = b.len;
		err = mdb_err(mdb_put(txn, r->objects, &k, &v, 0));
	}
	free(b.p);
	return err;
}

/*
 * Walk the objects table in name order, bundles expanded: after a seek or next returns 1,
 * name[0..len) and rec (LMDB's memory, valid in the transaction) are the current object.
 * Every iteration over objects goes through here.
 */
struct obj_iter {
	struct rep *r;
	MDB_cursor *cur;
	bool bundle; /* the cursor sits on a bundle with entries left in br */
	struct bundle_rd br;
	char name[NAME_MAX_LEN];
	size_t len;
	MDB_val rec;
};

static int
obj_iter_open(struct obj_iter *it, struct rep *r, MDB_txn *txn)
{
	memset(it, 0, sizeof(*it));
	it->r = r;
	return mdb_err(mdb_cursor_open(txn, r->objects, &it->cur));
}

static void
obj_iter_close(struct obj_iter *it)
{
	if (it->cur)
		mdb_cursor_close(it->cur); /* read-only txns do not free their cursors */
	it->cur = NULL;
}

/* The bundle's next entry as the current object: 1, or 0 when it has none left. */
static int
iter_bundle_next(struct obj_iter *it)
{
	MDB_val rest;
	int got = bundle_next(&it->br, it->r->maxkey, &rest, &it->rec);

	if (got <= 0) {
		it->bundle = false;
		return got;
	}
	memcpy(it->name + it->r->maxkey, rest.mv_data, rest.mv_size);
	it->len = it->r->maxkey + rest.mv_size;
	return 1;
}

/* Make the cursor's record (rc from mdb_cursor_get) current, moving on past empty ones. */
static int
iter_load(struct obj_iter *it, int rc)
{
	MDB_val k, v;
	int err;

	for (;;) {
		if (rc == 0)
			rc = mdb_cursor_get(it->cur, &k, &v, MDB_GET_CURRENT);
		if (rc)
			return rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
		if (k.mv_size > it->r->maxkey)
			return -EBADMSG;
		memcpy(it->name, k.mv_data, k.mv_size);
		if (k.mv_size < it->r->maxkey) {
			it->len = k.mv_size;
			it->rec = v;
			it->bundle = false;
			return 1;
		}
		err = bundle_open(&v, &it->br);
		if (err)
			return err;
		it->bundle = true;
		err = iter_bundle_next(it);
		if (err)
			return err;
		rc = mdb_cursor_get(it->cur, &k, &v, MDB_NEXT); /* an empty bundle: skip it */
	}
}

static int
obj_iter_next(struct obj_iter *it)
{
	MDB_val k, v;

	if (it->bundle) {
		int got = iter_bundle_next(it);

		if (got)
			return got;
	}
	return iter_load(it, mdb_cursor_get(it->cur, &k, &v, MDB_NEXT));
}

/* Go to the first object whose name is >= name[0..len). */
static int
obj_iter_seek(struct obj_iter *it, const char *name, size_t len)
{
	MDB_val k, v;
	int got;

	/* No record under a key below name's LMDB key holds a name >= name; only the bundle
	 * under exactly that key can hold names on both sides. */
	obj_lkey(it->r, name, len, &k);
	got = iter_load(it, mdb_cursor_get(it->cur, &k, &v, MDB_SET_RANGE));
	while (got > 0 && span_cmp(it->name, it->len, name, len) < 0)
		got = obj_iter_next(it);
	return got;
}

/* ---- open / replicate ---- */
static int
rep_open(struct dn_meta *m, struct rep *r)
{
	MDB_txn *txn;
	MDB_val k = { 3, "gen" }, v;
	int rc;

	if (mkdir(r->dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	rc = mdb_env_create(&r->env);
	if (rc)
		return mdb_err(rc);
	mdb_env_set_maxdbs(r->env, 8);
	mdb_env_set_mapsize(r->env, m->s->o.meta_map_size);
	rc = mdb_env_open(r->env, r->dir, MDB_NOTLS, 0644);
	if (rc)
		goto close_env;
	rc = mdb_txn_begin(r->env, NULL, 0, &txn);
	if (rc)
		goto close_env;
	if ((rc = mdb_dbi_open(txn, "buckets", MDB_CREATE, &r->buckets)) ||
	    (rc = mdb_dbi_open(txn, "objects", MDB_CREATE, &r->objects)) ||
	    (rc = mdb_dbi_open(txn, "extents", MDB_CREATE, &r->extents)) ||
	    (rc = mdb_dbi_open(txn, "info", MDB_CREATE, &r->info))) {
		mdb_txn_abort(txn);
		goto close_env;
	}
	r->gen = 0;
	if (mdb_get(txn, r->info, &k, &v) == 0 && v.mv_size == 8)
		memcpy(&r->gen, v.mv_data, 8);
	/*
	 * Which names are bundled depends on LMDB's key limit: it is part of the format. A
	 * replica written under another limit would be misread, so refuse it; one with none
	 * recorded (older, or new) cannot hold a bundle yet and takes ours.
	 */
	r->maxkey = (size_t)mdb_env_get_maxkeysize(r->env);
	if (r->maxkey <= BUCKET_MAX + 1 || r->maxkey > NAME_MAX_LEN) {
		ZC_ERR("meta", "replica=%s lmdb_max_key=%zu unsupported", r->dir, r->maxkey);
		mdb_txn_abort(txn);
		rc = MDB_INCOMPATIBLE;
		goto close_env;
	}
	{
		MDB_val mk = { 6, "keymax" }, mv;
		uint32_t want = (uint32_t)r->maxkey, have = 0;

		rc = mdb_get(txn, r->info, &mk, &mv);
		if (rc == MDB_NOTFOUND) {
			mv = (MDB_val){ 4, &want };
			rc = mdb_put(txn, r->info, &mk, &mv, 0);
		} else if (rc == 0) {
			if (mv.mv_size == 4)
				memcpy(&have, mv.mv_data, 4);
			if (mv.mv_size != 4 || have != want) {
				ZC_ERR("meta",
				       "replica=%s written with another LMDB key limit "
				       "(not %u): refused",
				       r->dir, want);
				rc = MDB_INCOMPATIBLE;
			}
		}
		if (rc) {
			mdb_txn_abort(txn);
			goto close_env;
		}
	}
	rc = mdb_txn_commit(txn);
	if (rc)
		goto close_env;
	r->ok = true;
	return 0;
close_env:
	mdb_env_close(r->env);
	r->env = NULL;
	return mdb_err(rc);
}

/* Replace replica r with a copy of the primary. */
static int
rep_resync(struct dn_meta *m, struct rep *r)
{
	struct rep *p = &m->rep[m->primary];
	char tmp[4200], from[4300], to[4300];
	int rc;

	if (r->env)
		mdb_env_close(r->env);
	r->env = NULL;
	r->ok = false;
	snprintf(tmp, sizeof(tmp), "%s.tmp", r->dir);
	snprintf(from, sizeof(from), "%s/data.mdb", tmp);
	unlink(from);
	if (mkdir(tmp, 0755) < 0 && errno != EEXIST)
		return -errno;
	rc = mdb_env_copy(p->env, tmp);
	if (rc) {
		/* A partial copy on a drive that filled up again: give the space back. */
		unlink(from);
		rmdir(tmp);
		return mdb_err(rc);
	}
	snprintf(to, sizeof(to), "%s/data.mdb", r->dir);
	if (mkdir(r->dir, 0755) < 0 && errno != EEXIST) /* a replaced, empty drive folder */
		return -errno;
	if (rename(from, to) < 0)
		return -errno;
	rmdir(tmp);
	snprintf(to, sizeof(to), "%s/lock.mdb", r->dir);
	unlink(to);
	return rep_open(m, r);
}

int
dn_meta_open(struct dn_store *s, struct dn_meta **out)
{
	struct dn_meta *m = calloc(1, sizeof(*m));
	uint64_t best = 0;
	bool any = false;
	int err;

	if (!m)
		return -ENOMEM;
	m->s = s;
	pthread_mutex_init(&m->wlock, NULL);
	{
		pthread_rwlockattr_t a;

		/* Writers (moving the primary, closing a replica) hold wlock meanwhile: they must
		 * not starve behind a stream of overlapping readers. No reader nests read_txn. */
		pthread_rwlockattr_init(&a);
		pthread_rwlockattr_setkind_np(&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
		pthread_rwlock_init(&m->envlock, &a);
		pthread_rwlockattr_destroy(&a);
	}
	m->nrep = s->o.m + 1 < s->ndrives ? s->o.m + 1 : s->ndrives;
	for (unsigned i = 0; i < m->nrep; i++) {
		struct rep *r = &m->rep[i];

		snprintf(r->dir, sizeof(r->dir), "%s/meta", s->drives[i].root);
		err = rep_open(m, r);
		if (err) {
			ZC_WARN("meta", "replica=%s unusable err=%s", r->dir, strerror(-err));
			continue;
		}
		if (!any || r->gen > best) {
			best = r->gen;
			m->primary = i;
			any = true;
		}
	}
	if (!any) {
		ZC_ERR("meta", "no usable metadata replica");
		dn_meta_close(m);
		return -EIO;
	}
	for (unsigned i = 0; i < m->nrep; i++) {
		struct rep *r = &m->rep[i];

		if (i == m->primary || (r->ok && r->gen == best))
			continue;
		ZC_INFO("meta", "replica=%s gen=%llu behind gen=%llu: copying", r->dir,
		        (unsigned long long)r->gen, (unsigned long long)best);
		err = rep_resync(m, r);
		if (err)
			ZC_WARN("meta", "replica=%s resync failed err=%s", r->dir, strerror(-err));
	}
	{
		struct rep *p = &m->rep[m->primary];
		MDB_txn *txn;
		MDB_val k = { 7, "next_id" }, v;
		uint64_t id = 1;

		if (mdb_txn_begin(p->env, NULL, MDB_RDONLY, &txn) == 0) {
			if (mdb_get(txn, p->info, &k, &v) == 0 && v.mv_size == 8)
				memcpy(&id, v.mv_data, 8);
			mdb_txn_abort(txn);
		}
		atomic_store(&m->next_id, id);
	}
	meta_count_live(m);
	*out = m;
	return 0;
}

void
dn_meta_close(struct dn_meta *m)
{
	if (!m)
		return;
	for (unsigned i = 0; i < m->nrep; i++)
		if (m->rep[i].env)
			mdb_env_close(m->rep[i].env);
	pthread_mutex_destroy(&m->wlock);
	pthread_rwlock_destroy(&m->envlock);
	free(m);
}

uint64_t
dn_meta_generation(struct dn_meta *m)
{
	uint64_t gen;

	pthread_mutex_lock(&m->wlock);
	gen = m->rep[m->primary].gen;
	pthread_mutex_unlock(&m->wlock);
	return gen;
}

int
dn_meta_rebuild_replica(struct dn_meta *m, unsigned drive)
{
	struct rep *r;
	int err = 0;

	if (drive >= m->nrep)
		return 0; /* this drive holds no replica */
	r = &m->rep[drive];
	pthread_mutex_lock(&m->wlock);
	pthread_rwlock_wrlock(&m->envlock);
	if (m->primary == drive) {
		/* Copy from another live replica: they all carry the same generation. */
		for (unsigned j = 1; j < m->nrep; j++)
			if (m->rep[(drive + j) % m->nrep].ok) {
				m->primary = (drive + j) % m->nrep;
				break;
			}
	}
	if (m->primary == drive) {
		/* The only live copy: keep it as it is. */
		pthread_rwlock_unlock(&m->envlock);
		pthread_mutex_unlock(&m->wlock);
		ZC_WARN("meta", "replica=%s is the only live copy: not rebuilt", r->dir);
		return 0;
	} else {
		err = rep_resync(m, r);
		if (!err)
			r->gen = m->rep[m->primary].gen;
	}
	meta_count_live(m);
	pthread_rwlock_unlock(&m->envlock);
	pthread_mutex_unlock(&m->wlock);
	if (err)
		ZC_ERR("meta", "replica=%s rebuild failed err=%s", r->dir, strerror(-err));
	else
		ZC_INFO("meta", "replica=%s rebuilt from the primary", r->dir);
	return err;
}

int
dn_meta_revive_replica(struct dn_meta *m, unsigned drive)
{
	const char *how = "rebuilt from the primary";
	struct rep *r;
	uint64_t gen;
	unsigned live;
	int err;

	if (drive >= m->nrep)
		return 0;
	r = &m->rep[drive];
	/* wlock: no write transaction runs while the live set changes, and the copy is
	 * exactly the primary's last generation. */
	pthread_mutex_lock(&m->wlock);
	if (r->ok) {
		pthread_mutex_unlock(&m->wlock);
		return 0;
	}
	if (m->primary == drive) {
		/*
		 * Every replica was dropped, this one last: it holds the newest commit (a failed
		 * LMDB commit leaves the last good one). Reopen it in place; readers use the
		 * primary's environment, so they are kept out by envlock meanwhile.
		 */
		pthread_rwlock_wrlock(&m->envlock);
		if (r->env)
			mdb_env_close(r->env);
		r->env = NULL;
		err = rep_open(m, r);
		pthread_rwlock_unlock(&m->envlock);
		how = "the newest: reopened in place";
	} else if (!m->rep[m->primary].ok) {
		err = -EAGAIN; /* no live primary yet to copy: the last dropped one comes first */
	} else {
		/*
		 * Not the primary; but it may have been until a failed write moved the primary
		 * on, and a reader that picked it before may still be in a transaction there:
		 * close it under envlock (waiting for those only). New readers pick the new
		 * primary, so the copy itself runs with wlock alone, readers going on.
		 */
		pthread_rwlock_wrlock(&m->envlock);
		if (r->env)
			mdb_env_close(r->env);
		r->env = NULL;
		pthread_rwlock_unlock(&m->envlock);
		err = rep_resync(m, r);
		if (!err)
			r->gen = m->rep[m->primary].gen;
	}
	if (err == -ENOSPC)
		dn_drive_mark_full(&m->s->drives[drive]); /* not yet room for the copy: wait */
	gen = r->gen;
	meta_count_live(m);
	live = atomic_load(&m->nlive);
	pthread_mutex_unlock(&m->wlock);
	if (err) {
		if (err != -EAGAIN)
			ZC_WARN("meta", "replica=%s rebuild failed err=%s: still dropped", r->dir,
			        strerror(-err));
		return err;
	}
	atomic_fetch_add(&m->revived, 1);
	ZC_INFO("meta", "replica=%s gen=%llu %s: live again (%u of %u)", r->dir,
	        (unsigned long long)gen, how, live, m->nrep);
	return 1;
}

unsigned
dn_meta_replicas(struct dn_meta *m, unsigned *live, uint64_t *revived)
{
	if (live)
		*live = (unsigned)atomic_load(&m->nlive);
	if (revived)
		*revived = atomic_load(&m->revived);
	return m->nrep;
}

bool
dn_meta_replica_live(struct dn_meta *m, unsigned drive)
{
	bool ok;

	if (drive >= m->nrep)
		return false;
	pthread_mutex_lock(&m->wlock);
	ok = m->rep[drive].ok;
	pthread_mutex_unlock(&m->wlock);
	return ok;
}

uint64_t
dn_meta_replica_generation(struct dn_meta *m, unsigned drive)
{
	uint64_t gen;

	if (drive >= m->nrep)
		return 0;
	pthread_mutex_lock(&m->wlock);
	gen = m->rep[drive].gen;
	pthread_mutex_unlock(&m->wlock);
	return gen;
}

void
dn_meta_inject_error(struct dn_meta *m, unsigned drive, int err)
{
	if (drive >= m->nrep)
		return;
	pthread_mutex_lock(&m->wlock);
	m->rep[drive].inject = err;
	pthread_mutex_unlock(&m->wlock);
}

uint64_t
dn_meta_next_id(struct dn_meta *m)
{
	return atomic_fetch_add(&m->next_id, 1);
}

/* ---- transactions ---- */
typedef int (*txn_fn)(struct rep *r, MDB_txn *txn, void *arg, bool first);

/* Apply fn to every live replica; the first (the primary) decides the outcome. */
static int
meta_write(struct dn_meta *m, txn_fn fn, void *arg)
{
	bool first = true;
	int result = -EIO;

	pthread_mutex_lock(&m->wlock);
	for (unsigned n = 0; n < m->nrep; n++) {
		unsigned i = (m->primary + n) % m->nrep;
		struct rep *r = &m->rep[i];
		MDB_val k = { 3, "gen" }, v = { 8, &r->gen };
		uint64_t gen = r->gen + 1;
		MDB_txn *txn;
		int err, rc;

		if (!r->ok)
			continue;
		rc = mdb_txn_begin(r->env, NULL, 0, &txn);
		if (rc) {
			err = mdb_err(rc);
			goto rep_failed;
		}
		err = fn(r, txn, arg, first);
		if (err < 0) {
			mdb_txn_abort(txn);
			if (first) {
				result = err; /* a logical refusal: nothing changes anywhere */
				break;
			}
			goto rep_failed;
		}
		v.mv_data = &gen;
		rc = mdb_put(txn, r->info, &k, &v, 0);
		if (!rc) {
			MDB_val nk = { 7, "next_id" };
			uint64_t nid = atomic_load(&m->next_id);
			MDB_val nv = { 8, &nid };

			rc = mdb_put(txn, r->info, &nk, &nv, 0);
		}
		if (rc) {
			mdb_txn_abort(txn);
			err = mdb_err(rc);
			goto rep_failed;
		}
		if (r->inject) {
			mdb_txn_abort(txn);
			err = r->inject;
			r->inject = 0;
			goto rep_failed;
		}
		rc = mdb_txn_commit(txn);
		if (rc) {
			err = mdb_err(rc);
			goto rep_failed;
		}
		r->gen = gen;
		if (first)
			result = err;
		first = false;
		continue;
rep_failed:
		/* Stale from now on: the healer (or the next open) copies the primary over it
		 * once its drive is OK; a full drive is marked so, to wait for room first. */
		ZC_ERR("meta", "replica=%s write failed err=%s: dropped until its drive is OK",
		       r->dir, strerror(-err));
		r->ok = false;
		if (err == -ENOSPC)
			dn_drive_mark_full(&m->s->drives[i]);
		dn_heal_note(m->s);
		if (first) {
			/* The primary failed before committing: promote the next live one, retry.
			 */
			bool found = false;

			/* Readers pick m->primary under envlock: move it under the write lock. */
			pthread_rwlock_wrlock(&m->envlock);
			for (unsigned j = 1; j < m->nrep && !found; j++)
				if (m->rep[(i + j) % m->nrep].ok) {
					m->primary = (i + j) % m->nrep;
					found = true;
				}
			pthread_rwlock_unlock(&m->envlock);
			if (!found)
				break;
			n = (unsigned)-1; /* the loop's n++ makes it 0: start over at the primary */
		}
	}
	meta_count_live(m);
	pthread_mutex_unlock(&m->wlock);
	return result;
}

/*
 * Readers use the primary's environment under a read lock: a heal that replaces a replica
 * (and may move the primary), a write that moves the primary, and the healer closing a
 * dropped replica (maybe a primary until lately) take it for writing, so no reader is
 * inside an environment being closed and m->primary only changes with no reader about.
 */
static int
read_txn(struct dn_meta *m, MDB_txn **txn, struct rep **r)
{
	int err;

	pthread_rwlock_rdlock(&m->envlock);
	*r = &m->rep[m->primary];
	if (!(*r)->env) { /* every replica dropped and the primary's reopen failed */
		pthread_rwlock_unlock(&m->envlock);
		return -EIO;
	}
	err = mdb_err(mdb_txn_begin((*r)->env, NULL, MDB_RDONLY, txn));
	if (err)
		pthread_rwlock_unlock(&m->envlock);
	return err;
}

static void
read_end(struct dn_meta *m, MDB_txn *txn)
{
	mdb_txn_abort(txn);
	pthread_rwlock_unlock(&m->envlock);
}

/* ---- extents and objects ---- */
int
dn_meta_extent_exists(struct dn_meta *m, uint64_t id)
{
	MDB_txn *txn;
	struct rep *r;
	uint8_t kb[8];
	MDB_val k, v;
	int err = read_txn(m, &txn, &r);

	if (err)
		return err;
	ext_key(id, kb, &k);
	err = mdb_get(txn, r->extents, &k, &v) == 0;
	read_end(m, txn);
	return err;
}

int
dn_meta_get_extent(struct dn_meta *m, uint64_t id, struct dn_extent *e)
{
	MDB_txn *txn;
	struct rep *r;
	uint8_t kb[8];
	MDB_val k, v;
	int err = read_txn(m, &txn, &r);

	if (err)
		return err;
	ext_key(id, kb, &k);
	err = mdb_err(mdb_get(txn, r->extents, &k, &v));
	if (!err)
		err = ext_decode(&v, id, e);
	read_end(m, txn);
	return err;
}

int
dn_meta_get_obj(struct dn_meta *m, const char *bucket, const char *key, struct dn_obj *o)
{
	char name[NAME_MAX_LEN];
	size_t len;
	MDB_txn *txn;
	struct rep *r;
	MDB_val v;
	int err = obj_name(bucket, key, name, &len);

	if (err)
		return err;
	err = read_txn(m, &txn, &r);
	if (err)
		return err;
	err = obj_rec_get(r, txn, name, len, &v);
	if (!err)
		err = obj_decode(&v, o);
	read_end(m, txn);
	return err;
}

struct freelist {
	struct dn_extent *v;
	size_t n, cap;
};

/* Change an extent's refs by delta; at zero delete it (and on the primary, collect it). */
static int
ext_adjust(struct rep *r, MDB_txn *txn, uint64_t id, int delta, struct freelist *fl)
{
	struct dn_extent e;
	struct wbuf b = { 0 };
	uint8_t kb[8];
	MDB_val k, v;
	int err;

	ext_key(id, kb, &k);
	err = mdb_err(mdb_get(txn, r->extents, &k, &v));
	if (err) /* a part changed under a compose: the caller reads it again */
		return err == -ENOENT ? -ESTALE : err;
	err = ext_decode(&v, id, &e);
	if (err)
		return err;
	e.refs = (uint32_t)((int)e.refs + delta);
	if (e.refs == 0) {
		err = mdb_err(mdb_del(txn, r->extents, &k, NULL));
		if (!err && fl) {
			if (fl->n == fl->cap) {
				size_t cap = fl->cap ? fl->cap * 2 : 4;
				struct dn_extent *nv = realloc(fl->v, cap * sizeof(*nv));

				if (!nv) {
					dn_extent_free(&e);
					return -ENOMEM;
				}
				fl->v = nv;
				fl->cap = cap;
			}
			fl->v[fl->n++] = e;
			return 0;
		}
	} else {
		err = ext_encode(&e, &b);
		v.mv_data = b.p;
		v.mv_size = b.len;
		if (!err)
			err = mdb_err(mdb_put(txn, r->extents, &k, &v, 0));
		free(b.p);
	}
	dn_extent_free(&e);
	return err;
}

/* Remove an object's record and release its extents. Returns 1 if it existed. */
static int
obj_drop(struct rep *r, MDB_txn *txn, const char *name, size_t len, struct freelist *fl)
{
	struct dn_obj old;
	MDB_val v;
	int err = obj_rec_get(r, txn, name, len, &v);

	if (err == -ENOENT)
		return 0;
	if (err)
		return err;
	err = obj_decode(&v, &old); /* a copy: v's memory changes with the record */
	if (err)
		return err;
	err = obj_rec_set(r, txn, name, len, NULL);
	for (size_t i = 0; i < old.npieces && !err; i++)
		err = ext_adjust(r, txn, old.pieces[i].ext_id, -1, fl);
	dn_obj_fini(&old);
	return err ? err : 1;
}

static int
bucket_exists(struct rep *r, MDB_txn *txn, const char *bucket)
{
	MDB_val k = { strlen(bucket), (void *)bucket }, v;

	return mdb_get(txn, r->buckets, &k, &v) == 0;
}

struct put_args {
	const char *bucket, *key;
	struct dn_obj *o;
	struct dn_extent *e;
	const char *const *drop_buckets; /* NULL or NULL/"" entries: bucket */
	const char *const *drop;
	size_t ndrop;
	struct freelist fl;
	int err; /* batch: this put's own outcome on the primary */
	const struct dn_cond *cond;
};

/* Does the record the put replaces (name) satisfy cond? 0, DN_ECONDITION or -ENOENT. */
static int
cond_check(struct rep *r, MDB_txn *txn, const char *name, size_t len, const struct dn_cond *c)
{
	struct dn_obj cur;
	MDB_val v;
	int err = obj_rec_get(r, txn, name, len, &v);

	if (err && err != -ENOENT)
		return err;
	if (c->if_none_match && !err)
		return DN_ECONDITION;
	if (!c->if_match || !c->if_match[0])
		return 0;
	if (err)
		return -ENOENT;
	if (strcmp(c->if_match, "*") == 0)
		return 0;
	err = obj_decode(&v, &cur);
	if (err)
		return err;
	err = cur.etag && strcmp(cur.etag, c->if_match) == 0 ? 0 : DN_ECONDITION;
	dn_obj_fini(&cur);
	return err;
}

static int
put_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct put_args *a = arg;
	struct freelist *fl = first ? &a->fl : NULL;
	char name[NAME_MAX_LEN];
	struct wbuf b = { 0 };
	size_t len;
	MDB_val k, v;
	int err;

	if (!bucket_exists(r, txn, a->bucket))
		return -ENOENT;
	/* The primary decides; replicas apply what it committed (a lagging one must not
	 * refuse, and a refusal on the primary never reaches them). */
	if (a->cond && first) {
		err = obj_name(a->bucket, a->key, name, &len);
		if (!err)
			err = cond_check(r, txn, name, len, a->cond);
		if (err)
			return err;
	}
	if (a->e) {
		uint8_t ekb[8];

		a->e->refs = 0;
		err = ext_encode(a->e, &b);
		ext_key(a->e->id, ekb, &k);
		v.mv_data = b.p;
		v.mv_size = b.len;
		if (!err)
			err = mdb_err(mdb_put(txn, r->extents, &k, &v, 0));
		free(b.p);
		b = (struct wbuf){ 0 };
		if (err)
			return err;
	}
	/* New references first, so extents shared with the old version survive. */
	for (size_t i = 0; i < a->o->npieces; i++) {
		err = ext_adjust(r, txn, a->o->pieces[i].ext_id, +1, NULL);
		if (err)
			return err;
	}
	for (size_t i = 0; i < a->ndrop; i++) {
		const char *db = a->drop_buckets ? a->drop_buckets[i] : NULL;

		err = obj_name(db && db[0] ? db : a->bucket, a->drop[i], name, &len);
		if (!err)
			err = obj_drop(r, txn, name, len, fl);
		if (err < 0)
			return err;
	}
	err = obj_name(a->bucket, a->key, name, &len);
	if (!err)
		err = obj_drop(r, txn, name, len, fl);
	if (err < 0)
		return err;
	err = obj_encode(a->o, &b);
	v.mv_data = b.p;
	v.mv_size = b.len;
	if (!err)
		err = obj_rec_set(r, txn, name, len, &v);
	free(b.p);
	return err;
}

static void
freelist_drop(struct freelist *fl)
{
	for (size_t i = 0; i < fl->n; i++)
		dn_extent_free(&fl->v[i]);
	free(fl->v);
	*fl = (struct freelist){ 0 };
}

int
dn_meta_put_obj(struct dn_meta *m, const char *bucket, const char *key, struct dn_obj *o,
                struct dn_extent *e, const char *const *drop_buckets, const char *const *drop_keys,
                size_t ndrop, struct dn_extent **freed, size_t *nfreed)
{
	return dn_meta_put_obj_if(m, bucket, key, o, e, drop_buckets, drop_keys, ndrop, NULL, freed,
	                          nfreed);
}

int
dn_meta_put_obj_if(struct dn_meta *m, const char *bucket, const char *key, struct dn_obj *o,
                   struct dn_extent *e, const char *const *drop_buckets,
                   const char *const *drop_keys, size_t ndrop, const struct dn_cond *cond,
                   struct dn_extent **freed, size_t *nfreed)
{
	struct put_args a = { bucket, key, o, e, drop_buckets, drop_keys, ndrop, { 0 }, 0, cond };
	int err = meta_write(m, put_fn, &a);

	if (err < 0) {
		freelist_drop(&a.fl);
		return err;
	}
	*freed = a.fl.v;
	*nfreed = a.fl.n;
	return 0;
}

struct batch_args {
	struct put_args *a;
	size_t n;
};

static int
batch_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct batch_args *b = arg;

	for (size_t i = 0; i < b->n; i++) {
		struct put_args *a = &b->a[i];
		MDB_txn *child;
		int err, rc;

		if (first) {
			/* Also a retry on a new primary: forget the failed attempt's outputs. */
			a->err = 0;
			freelist_drop(&a->fl);
		} else if (a->err) {
			continue; /* refused on the primary: replicas skip it as well */
		}
		rc = mdb_txn_begin(r->env, txn, 0, &child);
		if (rc)
			return mdb_err(rc);
		err = put_fn(r, child, a, first);
		if (err < 0) {
			mdb_txn_abort(child);
			if (!first)
				return err; /* this replica diverged from the primary */
			a->err = err;
			freelist_drop(&a->fl);
			continue;
		}
		rc = mdb_txn_commit(child);
		if (rc)
			return mdb_err(rc);
	}
	return 0;
}

int
dn_meta_put_batch(struct dn_meta *m, struct dn_meta_put *v, size_t n)
{
	struct put_args a[DN_BATCH_MAX];
	struct batch_args b = { a, n };
	int err;

	if (n > DN_BATCH_MAX)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		a[i] = (struct put_args){ .bucket = v[i].bucket,
			                  .key = v[i].key,
			                  .o = v[i].o,
			                  .e = v[i].e,
			                  .cond = v[i].cond };
	err = meta_write(m, batch_fn, &b);
	for (size_t i = 0; i < n; i++) {
		if (err < 0) {
			freelist_drop(&a[i].fl);
			v[i].err = err;
			continue;
		}
		v[i].err = a[i].err;
		v[i].freed = a[i].fl.v;
		v[i].nfreed = a[i].fl.n;
	}
	return err < 0 ? err : 0;
}

struct del_args {
	const char *bucket, *key;
	struct freelist fl;
	int existed;
};

static int
del_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct del_args *a = arg;
	char name[NAME_MAX_LEN];
	size_t len;
	int err;

	if (!bucket_exists(r, txn, a->bucket))
		return -ENOENT;
	err = obj_name(a->bucket, a->key, name, &len);
	if (!err)
		err = obj_drop(r, txn, name, len, first ? &a->fl : NULL);
	if (err >= 0 && first)
		a->existed = err;
	return err;
}

int
dn_meta_del_obj(struct dn_meta *m, const char *bucket, const char *key, struct dn_extent **freed,
                size_t *nfreed)
{
	struct del_args a = { bucket, key, { 0 }, 0 };
	int err = meta_write(m, del_fn, &a);

	if (err < 0) {
		freelist_drop(&a.fl);
		return err;
	}
	*freed = a.fl.v;
	*nfreed = a.fl.n;
	return a.existed;
}

static int
upd_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct dn_extent *e = arg, cur;
	struct wbuf b = { 0 };
	uint8_t kb[8];
	MDB_val k, v;
	int err;

	(void)first;
	ext_key(e->id, kb, &k);
	err = mdb_err(mdb_get(txn, r->extents, &k, &v));
	if (err)
		return err;
	/* Keep the current refcount: only placement and missing marks change here. */
	err = ext_decode(&v, e->id, &cur);
	if (err)
		return err;
	e->refs = cur.refs;
	dn_extent_free(&cur);
	err = ext_encode(e, &b);
	v.mv_data = b.p;
	v.mv_size = b.len;
	if (!err)
		err = mdb_err(mdb_put(txn, r->extents, &k, &v, 0));
	free(b.p);
	return err;
}

int
dn_meta_update_extent(struct dn_meta *m, struct dn_extent *e)
{
	return meta_write(m, upd_fn, e);
}

int
dn_meta_each_extent(struct dn_meta *m, int (*fn)(void *arg, struct dn_extent *e), void *arg)
{
	uint64_t id = 0;
	int err = 0;

	/* One short read transaction per extent, so fn may write metadata. */
	for (;;) {
		MDB_txn *txn;
		MDB_cursor *cur;
		struct rep *r;
		struct dn_extent e;
		uint8_t kb[8];
		MDB_val k, v;
		int rc;

		err = read_txn(m, &txn, &r);
		if (err)
			return err;
		ext_key(id, kb, &k);
		rc = mdb_cursor_open(txn, r->extents, &cur);
		if (!rc) {
			rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
			if (rc)
				mdb_cursor_close(cur);
		}
		if (rc) {
			read_end(m, txn);
			return rc == MDB_NOTFOUND ? 0 : mdb_err(rc);
		}
		id = 0;
		for (int i = 0; i < 8; i++)
			id = id << 8 | ((uint8_t *)k.mv_data)[i];
		err = ext_decode(&v, id, &e);
		mdb_cursor_close(cur); /* read-only txns do not free their cursors */
		read_end(m, txn);
		if (err)
			return err;
		err = fn(arg, &e);
		dn_extent_free(&e);
		if (err < 0)
			return err;
		id++;
	}
}

/* ---- buckets ---- */
struct bucket_args {
	const char *name;
	uint64_t ctime;
};

static int
bcreate_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct bucket_args *a = arg;
	MDB_val k = { strlen(a->name), (void *)a->name }, v = { 8, &a->ctime };

	(void)first;
	if (bucket_exists(r, txn, a->name))
		return -EEXIST;
	return mdb_err(mdb_put(txn, r->buckets, &k, &v, 0));
}

int
dn_meta_bucket_create(struct dn_meta *m, const char *name, uint64_t *ctime)
{
	struct timespec ts;
	struct bucket_args a = { name, 0 };
	int err;

	if (!name || !*name || strlen(name) > BUCKET_MAX)
		return -EINVAL;
	clock_gettime(CLOCK_REALTIME, &ts);
	a.ctime = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
	err = meta_write(m, bcreate_fn, &a);
	if (err == -EEXIST && ctime)
		dn_meta_bucket_head(m, name, ctime);
	else if (!err && ctime)
		*ctime = a.ctime;
	return err;
}

static int
bdelete_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct bucket_args *a = arg;
	size_t bl = strlen(a->name);
	MDB_val k = { bl, (void *)a->name };
	struct obj_iter it;
	int got;

	(void)first;
	if (!bucket_exists(r, txn, a->name))
		return -ENOENT;
	got = obj_iter_open(&it, r, txn);
	if (got)
		return got;
	/* "name\0" comes before any of its objects' names. */
	got = obj_iter_seek(&it, a->name, bl + 1);
	if (got > 0)
		got = it.len > bl && memcmp(it.name, a->name, bl + 1) == 0;
	obj_iter_close(&it);
	if (got < 0)
		return got;
	if (got)
		return -ENOTEMPTY;
	return mdb_err(mdb_del(txn, r->buckets, &k, NULL));
}

int
dn_meta_bucket_delete(struct dn_meta *m, const char *name)
{
	struct bucket_args a = { name, 0 };

	if (!name || !*name || strlen(name) > BUCKET_MAX)
		return -EINVAL;
	return meta_write(m, bdelete_fn, &a);
}

int
dn_meta_bucket_head(struct dn_meta *m, const char *name, uint64_t *ctime)
{
	MDB_val k = { strlen(name), (void *)name }, v;
	MDB_txn *txn;
	struct rep *r;
	int err;

	if (!*name || strlen(name) > BUCKET_MAX)
		return -EINVAL;
	err = read_txn(m, &txn, &r);
	if (err)
		return err;
	err = mdb_err(mdb_get(txn, r->buckets, &k, &v));
	if (!err && ctime && v.mv_size == 8)
		memcpy(ctime, v.mv_data, 8);
	read_end(m, txn);
	return err;
}

int
dn_meta_bucket_list(struct dn_meta *m, struct dn_bucket_info **out, size_t *n)
{
	struct dn_bucket_info *v = NULL;
	size_t cnt = 0, cap = 0;
	MDB_cursor *cur = NULL;
	MDB_txn *txn;
	struct rep *r;
	MDB_val k, d;
	int err = read_txn(m, &txn, &r), rc;

	if (err)
		return err;
	rc = mdb_cursor_open(txn, r->buckets, &cur);
	for (int op = MDB_FIRST; !rc; op = MDB_NEXT) {
		rc = mdb_cursor_get(cur, &k, &d, op);
		if (rc)
			break;
		if (cnt == cap) {
			struct dn_bucket_info *nv;

			cap = cap ? cap * 2 : 8;
			nv = realloc(v, cap * sizeof(*v));
			if (!nv) {
				rc = ENOMEM;
				break;
			}
			v = nv;
		}
		v[cnt].name = strndup(k.mv_data, k.mv_size);
		v[cnt].ctime_ns = 0;
		if (d.mv_size == 8)
			memcpy(&v[cnt].ctime_ns, d.mv_data, 8);
		cnt++;
	}
	if (cur)
		mdb_cursor_close(cur);
	read_end(m, txn);
	if (rc != MDB_NOTFOUND) {
		dn_bucket_list_free(v, cnt);
		return mdb_err(rc);
	}
	*out = v;
	*n = cnt;
	return 0;
}

void
dn_bucket_list_free(struct dn_bucket_info *v, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(v[i].name);
	free(v);
}

/* ---- list ---- */
static int
push_str(char ***v, size_t *n, const char *s, size_t len)
{
	char **nv = realloc(*v, (*n + 1) * sizeof(char *));

	if (!nv)
		return -ENOMEM;
	*v = nv;
	nv[*n] = strndup(s, len);
	if (!nv[*n])
		return -ENOMEM;
	(*n)++;
	return 0;
}

int
dn_meta_list(struct dn_meta *m, const char *bucket, const char *prefix, const char *start_after,
             unsigned limit, const char *delimiter, struct dn_list_result *out)
{
	size_t bl = strlen(bucket), pl = strlen(prefix ? prefix : ""),
	       dl = strlen(delimiter ? delimiter : ""), sl = strlen(start_after ? start_after : "");
	char seek[BUCKET_MAX + KEY_MAX + 8];
	const char *last = NULL;
	size_t last_len = 0, count = 0;
	struct obj_iter it;
	MDB_txn *txn;
	struct rep *r;
	int err, got;

	memset(out, 0, sizeof(*out));
	if (!bl || bl > BUCKET_MAX || pl > KEY_MAX || sl > KEY_MAX)
		return -EINVAL;
	if (limit == 0)
		limit = 1000;
	prefix = prefix ? prefix : "";
	start_after = start_after ? start_after : "";
	err = read_txn(m, &txn, &r);
	if (err)
		return err;
	if (!bucket_exists(r, txn, bucket)) {
		read_end(m, txn);
		return -ENOENT;
	}
	memcpy(seek, bucket, bl + 1);
	got = obj_iter_open(&it, r, txn);
	if (got)
		goto done;
	if (sl && strcmp(start_after, prefix) >= 0) { /* == : the key prefix itself is not after */
		memcpy(seek + bl + 1, start_after, sl);
		seek[bl + 1 + sl] = 0; /* the smallest name strictly after start_after */
		got = obj_iter_seek(&it, seek, bl + 2 + sl);
	} else {
		memcpy(seek + bl + 1, prefix, pl);
		got = obj_iter_seek(&it, seek, bl + 1 + pl);
	}
	while (got > 0) {
		const char *key = it.name + bl + 1;
		size_t kl = it.len - bl - 1;
		const char *d;

		if (it.len <= bl || memcmp(it.name, bucket, bl + 1) != 0 || kl < pl ||
		    memcmp(key, prefix, pl) != 0)
			break;
		d = dl ? memmem(key + pl, kl - pl, delimiter, dl) : NULL;
		if (d) {
			size_t cl = (size_t)(d - key) + dl;

			if (span_cmp(key, cl, start_after, sl) > 0 &&
			    !(last && last_len == cl && memcmp(last, key, cl) == 0)) {
				if (count == limit) {
					out->truncated = true;
					break;
				}
				got = push_str(&out->prefixes, &out->nprefixes, key, cl);
				if (got)
					break;
				last = out->prefixes[out->nprefixes - 1];
				last_len = cl;
				count++;
			}
			/* Skip every key under this common prefix (keys are UTF-8: no 0xff). */
			memcpy(seek + bl + 1, key, cl);
			seek[bl + 1 + cl] = (char)0xff;
			got = obj_iter_seek(&it, seek, bl + 2 + cl);
			continue;
		}
		if (count == limit) {
			out->truncated = true;
			break;
		}
		{
			struct dn_object_info *nv =
			        realloc(out->entries, (out->nentries + 1) * sizeof(*nv));
			struct dn_obj o;

			if (!nv) {
				got = -ENOMEM;
				break;
			}
			out->entries = nv;
			got = obj_decode(&it.rec, &o);
			if (got)
				break;
			memset(&nv[out->nentries], 0, sizeof(*nv));
			nv[out->nentries].key = strndup(key, kl);
			nv[out->nentries].size = o.size;
			nv[out->nentries].etag = o.etag;
			o.etag = NULL;
			nv[out->nentries].mtime_ns = o.mtime_ns;
			nv[out->nentries].crc32c = o.crc32c;
			nv[out->nentries].k = o.k;
			nv[out->nentries].m = o.m;
			dn_obj_fini(&o);
			if (!nv[out->nentries].key) {
				got = -ENOMEM;
				break;
			}
			last = nv[out->nentries].key;
			last_len = kl;
			out->nentries++;
			count++;
		}
		got = obj_iter_next(&it);
	}
	err = got < 0 ? got : 0;
	if (!err && out->truncated && last) {
		out->next_start_after = strndup(last, last_len);
		if (!out->next_start_after)
			err = -ENOMEM;
	}
done:
	if (got < 0)
		err = got;
	obj_iter_close(&it);
	read_end(m, txn);
	if (err)
		dn_list_result_fini(out);
	return err;
}

void
dn_list_result_fini(struct dn_list_result *r)
{
	for (size_t i = 0; i < r->nentries; i++)
		dn_object_info_fini(&r->entries[i]);
	free(r->entries);
	for (size_t i = 0; i < r->nprefixes; i++)
		free(r->prefixes[i]);
	free(r->prefixes);
	free(r->next_start_after);
	memset(r, 0, sizeof(*r));
}
