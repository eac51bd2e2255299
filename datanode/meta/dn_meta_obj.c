/*
 * dn_meta_obj: objects and extents: reads, puts (with their conditions), batched puts,
 * deletes, extent reference counts.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dn_meta_internal.h"

/* ---- extents and objects ---- */
int
dn_meta_extent_exists(struct dn_meta *m, uint64_t id)
{
	MDB_txn *txn;
	struct rep *r;
	uint8_t kb[8];
	MDB_val k, v;
	int err = dn_meta_read_txn(m, &txn, &r);

	if (err)
		return err;
	dn_meta_ext_key(id, kb, &k);
	err = mdb_get(txn, r->extents, &k, &v) == 0;
	dn_meta_read_end(m, txn);
	return err;
}

int
dn_meta_get_extent(struct dn_meta *m, uint64_t id, struct dn_extent *e)
{
	MDB_txn *txn;
	struct rep *r;
	uint8_t kb[8];
	MDB_val k, v;
	int err = dn_meta_read_txn(m, &txn, &r);

	if (err)
		return err;
	dn_meta_ext_key(id, kb, &k);
	err = dn_meta_mdb_err(mdb_get(txn, r->extents, &k, &v));
	if (!err)
		err = dn_meta_ext_decode(&v, id, e);
	dn_meta_read_end(m, txn);
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
	int err = dn_meta_obj_name(bucket, key, name, &len);

	if (err)
		return err;
	err = dn_meta_read_txn(m, &txn, &r);
	if (err)
		return err;
	err = dn_meta_rec_get(r, txn, name, len, &v);
	if (!err)
		err = dn_meta_obj_decode(&v, o);
	else if (zc_err_is(err, ZC_NO_KEY) && !dn_meta_bucket_exists_txn(r, txn, bucket))
		err = ZC_E(ZC_NO_BUCKET); /* told apart in the same transaction */
	dn_meta_read_end(m, txn);
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

	dn_meta_ext_key(id, kb, &k);
	err = dn_meta_mdb_err(mdb_get(txn, r->extents, &k, &v));
	if (err) /* a part changed under a compose: the caller reads it again */
		return zc_err_is(err, ZC_NO_KEY) ? -ESTALE : err;
	err = dn_meta_ext_decode(&v, id, &e);
	if (err)
		return err;
	e.refs = (uint32_t)((int)e.refs + delta);
	if (e.refs == 0) {
		err = dn_meta_mdb_err(mdb_del(txn, r->extents, &k, NULL));
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
		err = dn_meta_ext_encode(&e, &b);
		v.mv_data = b.p;
		v.mv_size = b.len;
		if (!err)
			err = dn_meta_mdb_err(mdb_put(txn, r->extents, &k, &v, 0));
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
	int err = dn_meta_rec_get(r, txn, name, len, &v);

	if (zc_err_is(err, ZC_NO_KEY))
		return 0;
	if (err)
		return err;
	err = dn_meta_obj_decode(&v, &old); /* a copy: v's memory changes with the record */
	if (err)
		return err;
	err = dn_meta_rec_set(r, txn, name, len, NULL);
	for (size_t i = 0; i < old.npieces && !err; i++)
		err = ext_adjust(r, txn, old.pieces[i].ext_id, -1, fl);
	dn_obj_fini(&old);
	return err ? err : 1;
}

int
dn_meta_bucket_exists_txn(struct rep *r, MDB_txn *txn, const char *bucket)
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
	bool del;    /* batch: a delete of bucket/key (o unused) */
	int existed; /* del: 1 when the key was there (primary) */
};

static int del_one(struct rep *r, MDB_txn *txn, struct put_args *a, bool first);

/* Does the record the put replaces (name) satisfy cond? 0, ZC_E(ZC_PRECONDITION) or NoSuchKey. */
static int
cond_check(struct rep *r, MDB_txn *txn, const char *name, size_t len, const struct dn_cond *c)
{
	struct dn_obj cur;
	MDB_val v;
	int err = dn_meta_rec_get(r, txn, name, len, &v);

	if (err && !zc_err_is(err, ZC_NO_KEY))
		return err;
	if (c->if_none_match && !err)
		return ZC_E(ZC_PRECONDITION);
	if (!c->if_match || !c->if_match[0])
		return 0;
	if (err)
		return ZC_E(ZC_NO_KEY);
	if (strcmp(c->if_match, "*") == 0)
		return 0;
	err = dn_meta_obj_decode(&v, &cur);
	if (err)
		return err;
	err = cur.etag && strcmp(cur.etag, c->if_match) == 0 ? 0 : ZC_E(ZC_PRECONDITION);
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

	if (!dn_meta_bucket_exists_txn(r, txn, a->bucket))
		return ZC_E(ZC_NO_BUCKET);
	/* The primary decides; replicas apply what it committed (a lagging one must not
	 * refuse, and a refusal on the primary never reaches them). */
	if (a->cond && first) {
		err = dn_meta_obj_name(a->bucket, a->key, name, &len);
		if (!err)
			err = cond_check(r, txn, name, len, a->cond);
		if (err)
			return err;
	}
	if (a->e) {
		uint8_t ekb[8];

		a->e->refs = 0;
		err = dn_meta_ext_encode(a->e, &b);
		dn_meta_ext_key(a->e->id, ekb, &k);
		v.mv_data = b.p;
		v.mv_size = b.len;
		if (!err)
			err = dn_meta_mdb_err(mdb_put(txn, r->extents, &k, &v, 0));
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

		err = dn_meta_obj_name(db && db[0] ? db : a->bucket, a->drop[i], name, &len);
		if (!err)
			err = obj_drop(r, txn, name, len, fl);
		if (err < 0)
			return err;
	}
	err = dn_meta_obj_name(a->bucket, a->key, name, &len);
	if (!err)
		err = obj_drop(r, txn, name, len, fl);
	if (err < 0)
		return err;
	err = dn_meta_obj_encode(a->o, &b);
	v.mv_data = b.p;
	v.mv_size = b.len;
	if (!err)
		err = dn_meta_rec_set(r, txn, name, len, &v);
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
	struct put_args a = { .bucket = bucket,
		              .key = key,
		              .o = o,
		              .e = e,
		              .drop_buckets = drop_buckets,
		              .drop = drop_keys,
		              .ndrop = ndrop,
		              .cond = cond };
	int err = dn_meta_write(m, put_fn, &a);

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
			a->existed = 0;
			freelist_drop(&a->fl);
		} else if (a->err) {
			continue; /* refused on the primary: replicas skip it as well */
		}
		rc = mdb_txn_begin(r->env, txn, 0, &child);
		if (rc)
			return dn_meta_mdb_err(rc);
		err = a->del ? del_one(r, child, a, first) : put_fn(r, child, a, first);
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
			return dn_meta_mdb_err(rc);
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
			                  .drop_buckets = v[i].drop_buckets,
			                  .drop = v[i].drop_keys,
			                  .ndrop = v[i].ndrop,
			                  .cond = v[i].cond,
			                  .del = v[i].o == NULL };
	err = dn_meta_write(m, batch_fn, &b);
	for (size_t i = 0; i < n; i++) {
		if (err < 0) {
			freelist_drop(&a[i].fl);
			v[i].err = err;
			continue;
		}
		v[i].err = a[i].err;
		v[i].freed = a[i].fl.v;
		v[i].nfreed = a[i].fl.n;
		v[i].existed = a[i].existed == 1;
	}
	return err < 0 ? err : 0;
}

/* Delete bucket/key in txn (alone or in a batch): the primary's run (first) collects the
 * freed extents in *fl and whether it existed in *existed. */
static int
obj_delete(struct rep *r, MDB_txn *txn, const char *bucket, const char *key, bool first,
           struct freelist *fl, int *existed)
{
	char name[NAME_MAX_LEN];
	size_t len;
	int err;

	if (!dn_meta_bucket_exists_txn(r, txn, bucket))
		return ZC_E(ZC_NO_BUCKET);
	err = dn_meta_obj_name(bucket, key, name, &len);
	if (!err)
		err = obj_drop(r, txn, name, len, first ? fl : NULL);
	if (err >= 0 && first)
		*existed = err;
	return err;
}

/* A delete in a batch. */
static int
del_one(struct rep *r, MDB_txn *txn, struct put_args *a, bool first)
{
	return obj_delete(r, txn, a->bucket, a->key, first, &a->fl, &a->existed);
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

	return obj_delete(r, txn, a->bucket, a->key, first, &a->fl, &a->existed);
}

int
dn_meta_del_obj(struct dn_meta *m, const char *bucket, const char *key, struct dn_extent **freed,
                size_t *nfreed)
{
	struct del_args a = { bucket, key, { 0 }, 0 };
	int err = dn_meta_write(m, del_fn, &a);

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
	dn_meta_ext_key(e->id, kb, &k);
	err = dn_meta_mdb_err(mdb_get(txn, r->extents, &k, &v));
	if (err)
		return err;
	/* Keep the current refcount: only placement and missing marks change here. */
	err = dn_meta_ext_decode(&v, e->id, &cur);
	if (err)
		return err;
	e->refs = cur.refs;
	dn_extent_free(&cur);
	err = dn_meta_ext_encode(e, &b);
	v.mv_data = b.p;
	v.mv_size = b.len;
	if (!err)
		err = dn_meta_mdb_err(mdb_put(txn, r->extents, &k, &v, 0));
	free(b.p);
	return err;
}

int
dn_meta_update_extent(struct dn_meta *m, struct dn_extent *e)
{
	return dn_meta_write(m, upd_fn, e);
}

struct mark_args {
	uint64_t id;
	uint32_t group;
	unsigned cell, drive;
	int marked;
};

/* Read, set the bit, write back in one transaction: a heal updating the extent meanwhile
 * either sees the mark or is seen by it. */
static int
mark_fn(struct rep *r, MDB_txn *txn, void *arg, bool first)
{
	struct mark_args *a = arg;
	struct dn_extent cur;
	struct wbuf b = { 0 };
	uint8_t kb[8];
	MDB_val k, v;
	int err;

	dn_meta_ext_key(a->id, kb, &k);
	err = dn_meta_mdb_err(mdb_get(txn, r->extents, &k, &v));
	if (err)
		return err;
	err = dn_meta_ext_decode(&v, a->id, &cur);
	if (err)
		return err;
	if (a->group >= cur.ngroups || a->cell >= cur.g.k + cur.g.m ||
	    cur.groups[a->group].drives[a->cell] != a->drive ||
	    (cur.groups[a->group].missing & (1u << a->cell))) {
		dn_extent_free(&cur);
		if (first)
			a->marked = 0;
		return 0; /* moved or marked meanwhile: nothing to do */
	}
	cur.groups[a->group].missing |= 1u << a->cell;
	err = dn_meta_ext_encode(&cur, &b);
	dn_extent_free(&cur);
	v.mv_data = b.p;
	v.mv_size = b.len;
	if (!err)
		err = dn_meta_mdb_err(mdb_put(txn, r->extents, &k, &v, 0));
	free(b.p);
	if (!err && first)
		a->marked = 1;
	return err;
}

int
dn_meta_mark_missing(struct dn_meta *m, uint64_t id, uint32_t group, unsigned cell, unsigned drive)
{
	struct mark_args a = { id, group, cell, drive, 0 };
	int err = dn_meta_write(m, mark_fn, &a);

	return err < 0 ? err : a.marked;
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

		err = dn_meta_read_txn(m, &txn, &r);
		if (err)
			return err;
		dn_meta_ext_key(id, kb, &k);
		rc = mdb_cursor_open(txn, r->extents, &cur);
		if (!rc) {
			rc = mdb_cursor_get(cur, &k, &v, MDB_SET_RANGE);
			if (rc)
				mdb_cursor_close(cur);
		}
		if (rc) {
			dn_meta_read_end(m, txn);
			return rc == MDB_NOTFOUND ? 0 : dn_meta_mdb_err(rc);
		}
		id = 0;
		for (int i = 0; i < 8; i++)
			id = id << 8 | ((uint8_t *)k.mv_data)[i];
		err = dn_meta_ext_decode(&v, id, &e);
		mdb_cursor_close(cur); /* read-only txns do not free their cursors */
		dn_meta_read_end(m, txn);
		if (err)
			return err;
		err = fn(arg, &e);
		dn_extent_free(&e);
		if (err < 0)
			return err;
		id++;
	}
}
