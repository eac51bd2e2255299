/*
 * dn_meta_key: object names as LMDB keys, the bundles that hold names too long for an
 * LMDB key, and the iterator over the objects table in name order.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dn_meta_internal.h"

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

int
dn_meta_obj_name(const char *bucket, const char *key, char *buf, size_t *len)
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

void
dn_meta_ext_key(uint64_t id, uint8_t *buf, MDB_val *k)
{
	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)(id >> (56 - 8 * i));
	k->mv_data = buf;
	k->mv_size = 8;
}

/* Byte-order comparison of two counted strings. */
int
dn_meta_span_cmp(const char *a, size_t al, const char *b, size_t bl)
{
	int c = memcmp(a, b, al < bl ? al : bl);

	if (c)
		return c;
	return al < bl ? -1 : al > bl;
}

/* ---- bundles ---- */

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
	ver = dn_rbuf_u32(&br->b);
	if (br->b.err)
		return br->b.err;
	if (ver != BUNDLE_VER) { /* an object record of any OBJ_VER: obj_decode checks it */
		br->plain = true;
		br->left = 1;
		return 0;
	}
	br->left = dn_rbuf_u32(&br->b);
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
	rest->mv_size = dn_rbuf_u32(&br->b);
	rest->mv_data = (void *)dn_rbuf_span(&br->b, rest->mv_size);
	rec->mv_size = dn_rbuf_u32(&br->b);
	rec->mv_data = (void *)dn_rbuf_span(&br->b, rec->mv_size);
	if (br->b.err || maxkey + rest->mv_size > NAME_MAX_LEN)
		return -EBADMSG;
	return 1;
}

static void
bundle_put_entry(struct wbuf *b, const void *rest, size_t rl, const MDB_val *rec)
{
	dn_wbuf_u32(b, (uint32_t)rl);
	dn_wbuf_bytes(b, rest, rl);
	dn_wbuf_u32(b, (uint32_t)rec->mv_size);
	dn_wbuf_bytes(b, rec->mv_data, rec->mv_size);
}

/* ---- object records by name (any transaction) ---- */
/* Find name's record: 0 (rec points into LMDB's memory, valid in txn), ZC_E(ZC_NO_KEY), -errno. */
int
dn_meta_rec_get(struct rep *r, MDB_txn *txn, const char *name, size_t len, MDB_val *rec)
{
	struct bundle_rd br;
	MDB_val k, v, rest;
	int err, got, c;

	obj_lkey(r, name, len, &k);
	err = dn_meta_mdb_err(mdb_get(txn, r->objects, &k, &v));
	if (err || len < r->maxkey) {
		*rec = v;
		return err;
	}
	err = bundle_open(&v, &br);
	while (!err && (got = bundle_next(&br, r->maxkey, &rest, rec)) != 0) {
		if (got < 0)
			return got;
		c = dn_meta_span_cmp(rest.mv_data, rest.mv_size, name + r->maxkey, len - r->maxkey);

		if (c == 0)
			return 0;
		if (c > 0)
			break; /* sorted: it is not here */
	}
	return err ? err : ZC_E(ZC_NO_KEY);
}

/*
 * Store rec as name's record, or with rec NULL remove it (ZC_E(ZC_NO_KEY) when absent). A long
 * name's bundle is rewritten in this transaction; an emptied bundle is deleted.
 */
int
dn_meta_rec_set(struct rep *r, MDB_txn *txn, const char *name, size_t len, const MDB_val *rec)
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
		return dn_meta_mdb_err(rec ? mdb_put(txn, r->objects, &k, (MDB_val *)rec, 0)
		                           : mdb_del(txn, r->objects, &k, NULL));
	err = dn_meta_mdb_err(mdb_get(txn, r->objects, &k, &v));
	if (zc_err_is(err, ZC_NO_KEY)) {
		if (!rec)
			return ZC_E(ZC_NO_KEY);
		v = (MDB_val){ sizeof(empty), empty };
		err = 0;
	}
	if (!err)
		err = bundle_open(&v, &br);
	if (err)
		return err;
	/* The new value is built before LMDB writes: v's memory stays valid meanwhile. */
	dn_wbuf_u32(&b, BUNDLE_VER);
	dn_wbuf_u32(&b, 0); /* the count, filled in below */
	while ((got = bundle_next(&br, r->maxkey, &rest, &erec)) > 0) {
		int c = dn_meta_span_cmp(rest.mv_data, rest.mv_size, tail, tl);

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
		err = ZC_E(ZC_NO_KEY);
	if (!err && n == 0) {
		err = dn_meta_mdb_err(mdb_del(txn, r->objects, &k, NULL));
	} else if (!err) {
		memcpy(b.p + 4, &n, 4);
		v.mv_data = b.p;
		v.mv_size = b.len;
		err = dn_meta_mdb_err(mdb_put(txn, r->objects, &k, &v, 0));
	}
	free(b.p);
	return err;
}

int
dn_meta_iter_open(struct obj_iter *it, struct rep *r, MDB_txn *txn)
{
	memset(it, 0, sizeof(*it));
	it->r = r;
	return dn_meta_mdb_err(mdb_cursor_open(txn, r->objects, &it->cur));
}

void
dn_meta_iter_close(struct obj_iter *it)
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
			return rc == MDB_NOTFOUND ? 0 : dn_meta_mdb_err(rc);
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

int
dn_meta_iter_next(struct obj_iter *it)
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
int
dn_meta_iter_seek(struct obj_iter *it, const char *name, size_t len)
{
	MDB_val k, v;
	int got;

	/* No record under a key below name's LMDB key holds a name >= name; only the bundle
	 * under exactly that key can hold names on both sides. */
	obj_lkey(it->r, name, len, &k);
	got = iter_load(it, mdb_cursor_get(it->cur, &k, &v, MDB_SET_RANGE));
	while (got > 0 && dn_meta_span_cmp(it->name, it->len, name, len) < 0)
		got = dn_meta_iter_next(it);
	return got;
}
