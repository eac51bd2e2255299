/*
 * The extent index (rpc_cmeta.h): /zest/extents/<16 hex id> -> the etcd key of the record
 * that names the extent. The writes ride in the records' own Txns (rpc_cmeta.c,
 * rpc_cmeta_compose.c) through the op lists here; the reads serve the collector.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_cmeta_internal.h"
#include "zc.h"

int
rpc_cmeta_extent_key(uint64_t id, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, RPC_CMETA_EXTENTS "%016" PRIx64, id);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

int
rpc_cmeta_ops_init(struct rpc_cmeta_ops *o, size_t cap)
{
	memset(o, 0, sizeof(*o));
	o->v = calloc(cap ? cap : 1, sizeof(*o->v));
	o->keys = calloc(cap ? cap : 1, sizeof(*o->keys));
	if (!o->v || !o->keys) {
		rpc_cmeta_ops_fini(o);
		return -ENOMEM;
	}
	o->cap = cap;
	return 0;
}

void
rpc_cmeta_ops_fini(struct rpc_cmeta_ops *o)
{
	free(o->v);
	free(o->keys);
	memset(o, 0, sizeof(*o));
}

void
rpc_cmeta_ops_add(struct rpc_cmeta_ops *o, enum rpc_etcd_op_type type, const char *key,
                  size_t key_len, const void *value, size_t value_len)
{
	if (o->n >= o->cap)
		return; /* sized by the caller; never reached */
	o->v[o->n++] = (struct rpc_etcd_op){ .type = type,
		                             .r = { .key = key, .key_len = key_len },
		                             .value = value,
		                             .value_len = value_len };
}

static void
ix_add(struct rpc_cmeta_ops *o, enum rpc_etcd_op_type type, uint64_t id, const char *value,
       size_t value_len)
{
	int n;

	if (o->n >= o->cap)
		return;
	n = rpc_cmeta_extent_key(id, o->keys[o->n], sizeof(o->keys[o->n]));
	rpc_cmeta_ops_add(o, type, o->keys[o->n], (size_t)n, value, value_len);
}

void
rpc_cmeta_ops_ix_put(struct rpc_cmeta_ops *o, uint64_t id, const char *record_key,
                     size_t record_key_len)
{
	ix_add(o, RPC_ETCD_OP_PUT, id, record_key, record_key_len);
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void
rpc_cmeta_ops_ix_del(struct rpc_cmeta_ops *o, const struct rpc_cl_object *old, const uint64_t *keep,
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
		ix_add(o, RPC_ETCD_OP_DELETE, id, NULL, 0);
	}
	free(sorted);
}

void
rpc_cmeta_ops_moved_del(struct rpc_cmeta_ops *o, const struct rpc_cl_object *old)
{
	if (old && old->moved && old->moved[0])
		rpc_cmeta_ops_add(o, RPC_ETCD_OP_DELETE, old->moved, strlen(old->moved), NULL, 0);
}

bool
rpc_cmeta_ids_distinct(const uint64_t *ids, size_t n)
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
rpc_cmeta_moved_key(const char *record_key, char *buf, size_t cap)
{
	size_t ol = sizeof(RPC_CMETA_OBJECTS) - 1, ml = sizeof(RPC_CMETA_MOVED) - 1;
	const char *rest, *slash;
	size_t n;

	if (!record_key || strncmp(record_key, RPC_CMETA_OBJECTS, ol) != 0)
		return -EINVAL;
	rest = record_key + ol;
	slash = strchr(rest, '/'); /* after the bucket */
	if (!slash || !strchr(slash + 1, '/'))
		return -EINVAL;
	slash = strrchr(rest, '/');
	n = ml + (size_t)(slash + 1 - rest);
	if (n >= cap)
		return -ENAMETOOLONG;
	memcpy(buf, RPC_CMETA_MOVED, ml);
	memcpy(buf + ml, rest, n - ml);
	buf[n] = 0;
	return (int)n;
}

static bool
has_extent(const struct rpc_cl_object *o, uint64_t id)
{
	for (size_t i = 0; i < o->nextents; i++)
		if (o->extents[i].id == id)
			return true;
	return false;
}

/* The record a part record's moved key names, if it has extent id, as of revision rev:
 * 1 with *out, *key (free() it) and *mod_revision; 0 none; or an error. */
static int
moved_record(struct rpc_etcd *c, const char *part_key, uint64_t id, int64_t rev, bool serializable,
             struct rpc_cl_object *out, char **key, int64_t *mod_revision,
             const struct rpc_cmeta_deadline *d)
{
	char mk[RPC_CMETA_KEY_CAP], why[RPC_CL_WHY_MAX];
	struct rpc_etcd_kvs mv = { 0 }, rec = { 0 };
	struct rpc_etcd_range r = { .serializable = serializable, .revision = rev };
	unsigned left;
	int err, n = rpc_cmeta_moved_key(part_key, mk, sizeof(mk));

	if (n < 0)
		return 0; /* not a part's key: nothing moved it */
	r.key = mk;
	r.key_len = (size_t)n;
	left = rpc_cmeta_deadline_left(d);
	err = left ? rpc_cmeta_etcd_err(rpc_etcd_range(c, &r, &mv, left)) : ZC_E(ZC_UNAVAILABLE);
	if (err || !mv.n || !mv.kv[0].value_len)
		goto out;
	r.key = mv.kv[0].value;
	r.key_len = mv.kv[0].value_len;
	left = rpc_cmeta_deadline_left(d);
	err = left ? rpc_cmeta_etcd_err(rpc_etcd_range(c, &r, &rec, left)) : ZC_E(ZC_UNAVAILABLE);
	if (err || !rec.n)
		goto out;
	err = rpc_cl_object_decode(rec.kv[0].value, rec.kv[0].value_len, out, why, sizeof(why));
	if (err) {
		ZC_WARN("cmeta", "record key=%s (moved from %s) does not decode why=\"%s\"",
		        mv.kv[0].value, part_key, why);
		goto out;
	}
	if (!has_extent(out, id)) {
		rpc_cl_object_fini(out);
		goto out;
	}
	*key = strndup(mv.kv[0].value, mv.kv[0].value_len);
	if (!*key) {
		rpc_cl_object_fini(out);
		err = -ENOMEM;
		goto out;
	}
	*mod_revision = rec.kv[0].mod_revision;
	err = 1;
out:
	rpc_etcd_kvs_fini(&mv);
	rpc_etcd_kvs_fini(&rec);
	return err;
}

int
rpc_cmeta_extent_record(struct rpc_etcd *c, uint64_t id, bool serializable,
                        struct rpc_cl_object *out, char **record_key, int64_t *mod_revision,
                        unsigned timeout_ms)
{
	char xk[RPC_CMETA_EXTENT_KEY_CAP], why[RPC_CL_WHY_MAX];
	struct rpc_etcd_kvs ix = { 0 }, rec = { 0 };
	struct rpc_etcd_range r = { .serializable = serializable };
	struct rpc_cmeta_deadline d;
	unsigned left;
	int err, n = rpc_cmeta_extent_key(id, xk, sizeof(xk));

	memset(out, 0, sizeof(*out));
	if (record_key)
		*record_key = NULL;
	if (mod_revision)
		*mod_revision = 0;
	if (!c || n < 0)
		return -EINVAL;
	rpc_cmeta_deadline_init(&d, timeout_ms, 0);
	err = rpc_etcd_get(c, xk, (size_t)n, serializable, &ix, rpc_cmeta_deadline_left(&d));
	if (err)
		return err == -ENOENT ? ZC_E(ZC_NO_KEY) : rpc_cmeta_etcd_err(err);
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
	left = rpc_cmeta_deadline_left(&d);
	if (!r.key_len) {
		err = -EBADMSG;
		goto out;
	}
	err = left ? rpc_cmeta_etcd_err(rpc_etcd_range(c, &r, &rec, left)) : ZC_E(ZC_UNAVAILABLE);
	if (err)
		goto out;
	if (rec.n) {
		err = rpc_cl_object_decode(rec.kv[0].value, rec.kv[0].value_len, out, why,
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
		struct rpc_cl_object moved = { 0 };
		char *mkey = NULL;
		int64_t mrev = 0;
		int m = moved_record(c, ix.kv[0].value, id, ix.revision, serializable, &moved,
		                     &mkey, &mrev, &d);

		if (m < 0) {
			err = m;
		} else if (m == 1) {
			rpc_cl_object_fini(out);
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
	if (err && err != ZC_E(ZC_NO_KEY) && err != -EBADMSG && record_key) {
		free(*record_key);
		*record_key = NULL;
	}
	rpc_etcd_kvs_fini(&ix);
	rpc_etcd_kvs_fini(&rec);
	return err;
}

int
rpc_cmeta_extent_unlink(struct rpc_etcd *c, uint64_t id, const char *record_key,
                        int64_t record_mod_revision, unsigned timeout_ms)
{
	char xk[RPC_CMETA_EXTENT_KEY_CAP];
	int n = rpc_cmeta_extent_key(id, xk, sizeof(xk));
	size_t rl = record_key ? strlen(record_key) : 0;
	struct rpc_etcd_cmp cmp[2] = {
		{ .key = xk,
		  .key_len = (size_t)n,
		  .target = RPC_ETCD_CMP_VALUE,
		  .op = RPC_ETCD_EQUAL,
		  .value = record_key,
		  .value_len = rl },
		{ .key = record_key,
		  .key_len = rl,
		  .target = RPC_ETCD_CMP_MOD,
		  .op = RPC_ETCD_EQUAL,
		  .num = record_mod_revision },
	};
	struct rpc_etcd_op del = { .type = RPC_ETCD_OP_DELETE,
		                   .r = { .key = xk, .key_len = (size_t)n } };
	struct rpc_etcd_txn txn = { .cmp = cmp, .n_cmp = 2, .then = &del, .n_then = 1 };
	struct rpc_etcd_txn_result res = { 0 };
	int err;

	if (!c || n < 0 || !rl || record_mod_revision < 0)
		return -EINVAL;
	err = rpc_cmeta_etcd_err(rpc_etcd_txn(c, &txn, &res, timeout_ms));
	if (err)
		return err;
	err = res.succeeded;
	rpc_etcd_txn_result_fini(&res);
	return err;
}
