/*
 * The extent index (cl_meta.h): /zest/extents/<16 hex id> -> the etcd key of the record
 * that names the extent. The writes ride in the records' own Txns (cl_meta.c,
 * cl_meta_compose.c) through the op lists here; the reads serve the collector.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cl_meta_internal.h"
#include "zc.h"

int
cl_meta_extent_key(uint64_t id, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, CL_META_EXTENTS "%016" PRIx64, id);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

int
cl_meta_fence_key(uint64_t id, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, CL_META_FENCES "%016" PRIx64, id);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

int
cl_meta_extent_fence(struct cl_etcd *c, uint64_t id, unsigned timeout_ms)
{
	char xk[CL_META_EXTENT_KEY_CAP], fk[CL_META_EXTENT_KEY_CAP];
	int xn = cl_meta_extent_key(id, xk, sizeof(xk)), fn = cl_meta_fence_key(id, fk, sizeof(fk));
	struct cl_etcd_cmp cmp = { .key = xk, .target = CL_ETCD_CMP_VERSION, .op = CL_ETCD_EQUAL };
	struct cl_etcd_op put = { .type = CL_ETCD_OP_PUT, .value = "", .value_len = 0 };
	struct cl_etcd_txn txn = { .cmp = &cmp, .n_cmp = 1, .then = &put, .n_then = 1 };
	struct cl_etcd_txn_result res = { 0 };
	int err;

	if (!c || xn < 0 || fn < 0)
		return -EINVAL;
	cmp.key_len = (size_t)xn;
	put.r.key = fk;
	put.r.key_len = (size_t)fn;
	/* Put twice (a retried Txn) is the same fence: idempotent. */
	err = cl_meta_etcd_err(cl_etcd_txn(c, &txn, &res, timeout_ms));
	if (err)
		return err;
	err = res.succeeded ? 1 : 0;
	cl_etcd_txn_result_fini(&res);
	return err;
}

int
cl_meta_ops_init(struct cl_meta_ops *o, size_t cap)
{
	memset(o, 0, sizeof(*o));
	o->v = calloc(cap ? cap : 1, sizeof(*o->v));
	o->keys = calloc(cap ? cap : 1, sizeof(*o->keys));
	if (!o->v || !o->keys) {
		cl_meta_ops_fini(o);
		return -ENOMEM;
	}
	o->cap = cap;
	return 0;
}

void
cl_meta_ops_fini(struct cl_meta_ops *o)
{
	free(o->v);
	free(o->keys);
	memset(o, 0, sizeof(*o));
}

void
cl_meta_ops_add(struct cl_meta_ops *o, enum cl_etcd_op_type type, const char *key, size_t key_len,
                const void *value, size_t value_len)
{
	if (o->n >= o->cap)
		return; /* sized by the caller; never reached */
	o->v[o->n++] = (struct cl_etcd_op){ .type = type,
		                            .r = { .key = key, .key_len = key_len },
		                            .value = value,
		                            .value_len = value_len };
}

static void
ix_add(struct cl_meta_ops *o, enum cl_etcd_op_type type, uint64_t id, const char *value,
       size_t value_len)
{
	int n;

	if (o->n >= o->cap)
		return;
	n = cl_meta_extent_key(id, o->keys[o->n], sizeof(o->keys[o->n]));
	cl_meta_ops_add(o, type, o->keys[o->n], (size_t)n, value, value_len);
}

void
cl_meta_ops_ix_put(struct cl_meta_ops *o, uint64_t id, const char *record_key,
                   size_t record_key_len)
{
	ix_add(o, CL_ETCD_OP_PUT, id, record_key, record_key_len);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void
cl_meta_ops_ix_del(struct cl_meta_ops *o, const struct cl_rec_object *old, const uint64_t *keep,
                   size_t nkeep)
{
	uint64_t *sorted = NULL;

	if (!old || !old->nextents)
		return;
	/* A compose over a big object replaced by another: bsearch, not n x m. */
	if (nkeep) {
		sorted = malloc(nkeep * sizeof(*sorted));
		if (!sorted)
			return; /* the keys stay: the collector's to remove */
		memcpy(sorted, keep, nkeep * sizeof(*sorted));
		qsort(sorted, nkeep, sizeof(*sorted), cmp_u64);
	}
	for (size_t i = 0; i < old->nextents; i++) {
		uint64_t id = old->extents[i].id;

		/* etcd refuses a Txn that writes one key twice; a kept id is put anyway. */
		if (sorted && bsearch(&id, sorted, nkeep, sizeof(*sorted), cmp_u64))
			continue;
		ix_add(o, CL_ETCD_OP_DELETE, id, NULL, 0);
	}
	free(sorted);
}

void
cl_meta_ops_moved_del(struct cl_meta_ops *o, const struct cl_rec_object *old)
{
	if (old && old->moved && old->moved[0])
		cl_meta_ops_add(o, CL_ETCD_OP_DELETE, old->moved, strlen(old->moved), NULL, 0);
}

bool
cl_meta_ids_distinct(const uint64_t *ids, size_t n)
{
	uint64_t *v;
	bool ok = true;

	if (n < 2)
		return true;
	v = malloc(n * sizeof(*v));
	if (!v)
		return false;
	memcpy(v, ids, n * sizeof(*v));
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 1; ok && i < n; i++)
		ok = v[i] != v[i - 1];
	free(v);
	return ok;
}

int
cl_meta_moved_key(const char *record_key, char *buf, size_t cap)
{
	size_t ol = sizeof(CL_META_OBJECTS) - 1, ml = sizeof(CL_META_MOVED) - 1;
	const char *rest, *slash;
	size_t n;

	if (!record_key || strncmp(record_key, CL_META_OBJECTS, ol) != 0)
		return -EINVAL;
	rest = record_key + ol;
	slash = strchr(rest, '/'); /* after the bucket */
	if (!slash || !strchr(slash + 1, '/'))
		return -EINVAL;
	slash = strrchr(rest, '/');
	n = ml + (size_t)(slash + 1 - rest);
	if (n >= cap)
		return -ENAMETOOLONG;
	memcpy(buf, CL_META_MOVED, ml);
	memcpy(buf + ml, rest, n - ml);
	buf[n] = 0;
	return (int)n;
}

static bool
has_extent(const struct cl_rec_object *o, uint64_t id)
{
	for (size_t i = 0; i < o->nextents; i++)
		if (o->extents[i].id == id)
			return true;
	return false;
}

/* The record a part record's moved key names, if it has extent id, as of revision rev:
 * 1 with *out, *key (free() it) and *mod_revision; 0 none; or an error. */
static int
moved_record(struct cl_etcd *c, const char *part_key, uint64_t id, int64_t rev, bool serializable,
             struct cl_rec_object *out, char **key, int64_t *mod_revision,
             const struct cl_meta_deadline *d)
{
	char mk[CL_META_KEY_CAP], why[CL_REC_WHY_MAX];
	struct cl_etcd_kvs mv = { 0 }, rec = { 0 };
	struct cl_etcd_range r = { .serializable = serializable, .revision = rev };
	unsigned left;
	int err, n = cl_meta_moved_key(part_key, mk, sizeof(mk));

	if (n < 0)
		return 0; /* not a part's key: nothing moved it */
	r.key = mk;
	r.key_len = (size_t)n;
	left = cl_meta_deadline_left(d);
	err = left ? cl_meta_etcd_err(cl_etcd_range(c, &r, &mv, left)) : ZC_E(ZC_UNAVAILABLE);
	if (err || !mv.n || !mv.kv[0].value_len)
		goto out;
	r.key = mv.kv[0].value;
	r.key_len = mv.kv[0].value_len;
	left = cl_meta_deadline_left(d);
	err = left ? cl_meta_etcd_err(cl_etcd_range(c, &r, &rec, left)) : ZC_E(ZC_UNAVAILABLE);
	if (err || !rec.n)
		goto out;
	err = cl_rec_object_decode(rec.kv[0].value, rec.kv[0].value_len, out, why, sizeof(why));
	if (err) {
		ZC_WARN("cmeta", "record key=%s (moved from %s) does not decode why=\"%s\"",
		        mv.kv[0].value, part_key, why);
		goto out;
	}
	if (!has_extent(out, id)) {
		cl_rec_object_fini(out);
		goto out;
	}
	*key = strndup(mv.kv[0].value, mv.kv[0].value_len);
	if (!*key) {
		cl_rec_object_fini(out);
		err = -ENOMEM;
		goto out;
	}
	*mod_revision = rec.kv[0].mod_revision;
	err = 1;
out:
	cl_etcd_kvs_fini(&mv);
	cl_etcd_kvs_fini(&rec);
	return err;
}

int
cl_meta_extent_record(struct cl_etcd *c, uint64_t id, bool serializable, struct cl_rec_object *out,
                      char **record_key, int64_t *mod_revision, unsigned timeout_ms)
{
	char xk[CL_META_EXTENT_KEY_CAP], why[CL_REC_WHY_MAX];
	struct cl_etcd_kvs ix = { 0 }, rec = { 0 };
	struct cl_etcd_range r = { .serializable = serializable };
	struct cl_meta_deadline d;
	unsigned left;
	int err, n = cl_meta_extent_key(id, xk, sizeof(xk));

	memset(out, 0, sizeof(*out));
	if (record_key)
		*record_key = NULL;
	if (mod_revision)
		*mod_revision = 0;
	if (!c || n < 0)
		return -EINVAL;
	cl_meta_deadline_init(&d, timeout_ms, 0);
	err = cl_etcd_get(c, xk, (size_t)n, serializable, &ix, cl_meta_deadline_left(&d));
	if (err)
		return zc_err_is(err, ZC_NO_KEY) ? ZC_E(ZC_NO_KEY) : cl_meta_etcd_err(err);
	if (record_key) {
		*record_key = strdup(ix.kv[0].value ? ix.kv[0].value : "");
		if (!*record_key) {
			err = -ENOMEM;
			goto out;
		}
	}
	/* The record as of the index read: the two agree (a compose re-points the index in
	 * the Txn that writes the record). */
	r.key = ix.kv[0].value;
	r.key_len = ix.kv[0].value_len;
	r.revision = ix.revision;
	left = cl_meta_deadline_left(&d);
	if (!r.key_len) {
		err = -EBADMSG;
		goto out;
	}
	err = left ? cl_meta_etcd_err(cl_etcd_range(c, &r, &rec, left)) : ZC_E(ZC_UNAVAILABLE);
	if (err)
		goto out;
	if (rec.n) {
		err = cl_rec_object_decode(rec.kv[0].value, rec.kv[0].value_len, out, why,
		                           sizeof(why));
		if (err) {
			ZC_WARN("cmeta",
			        "record key=%s of extent=%016" PRIx64 " does not decode why=\"%s\"",
			        ix.kv[0].value, id, why);
			goto out;
		}
		if (has_extent(out, id)) {
			if (mod_revision)
				*mod_revision = rec.kv[0].mod_revision;
			goto out;
		}
	}
	/* The part record is gone (or lacks the extent): a Complete may have moved it. */
	{
		struct cl_rec_object moved = { 0 };
		char *mkey = NULL;
		int64_t mrev = 0;
		int m = moved_record(c, ix.kv[0].value, id, ix.revision, serializable, &moved,
		                     &mkey, &mrev, &d);

		if (m < 0) {
			err = m;
		} else if (m == 1) {
			cl_rec_object_fini(out);
			*out = moved;
			if (record_key) {
				free(*record_key);
				*record_key = mkey;
			} else {
				free(mkey);
			}
			if (mod_revision)
				*mod_revision = mrev;
			err = 0;
		} else if (!rec.n) {
			err = ZC_E(ZC_NO_KEY);
		} else if (mod_revision) {
			*mod_revision = rec.kv[0].mod_revision;
		}
	}
out:
	if (err && !zc_err_is(err, ZC_NO_KEY) && err != -EBADMSG && record_key) {
		free(*record_key);
		*record_key = NULL;
	}
	cl_etcd_kvs_fini(&ix);
	cl_etcd_kvs_fini(&rec);
	return err;
}

int
cl_meta_extent_unlink(struct cl_etcd *c, uint64_t id, const char *record_key,
                      int64_t record_mod_revision, unsigned timeout_ms)
{
	char xk[CL_META_EXTENT_KEY_CAP];
	int n = cl_meta_extent_key(id, xk, sizeof(xk));
	size_t rl = record_key ? strlen(record_key) : 0;
	struct cl_etcd_cmp cmp[2] = {
		{ .key = xk,
		  .key_len = (size_t)n,
		  .target = CL_ETCD_CMP_VALUE,
		  .op = CL_ETCD_EQUAL,
		  .value = record_key,
		  .value_len = rl },
		{ .key = record_key,
		  .key_len = rl,
		  .target = CL_ETCD_CMP_MOD,
		  .op = CL_ETCD_EQUAL,
		  .num = record_mod_revision },
	};
	struct cl_etcd_op del = { .type = CL_ETCD_OP_DELETE,
		                  .r = { .key = xk, .key_len = (size_t)n } };
	struct cl_etcd_txn txn = { .cmp = cmp, .n_cmp = 2, .then = &del, .n_then = 1 };
	struct cl_etcd_txn_result res = { 0 };
	int err;

	if (!c || n < 0 || !rl || record_mod_revision < 0)
		return -EINVAL;
	err = cl_meta_etcd_err(cl_etcd_txn(c, &txn, &res, timeout_ms));
	if (err)
		return err;
	err = res.succeeded;
	cl_etcd_txn_result_fini(&res);
	return err;
}
