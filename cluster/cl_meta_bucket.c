/*
 * Buckets in etcd (cl_meta.h): /zest/buckets/<bucket> holds a BucketRecord. Create and
 * delete are Txns fenced like the object writes, so a repeated Txn reports what the first
 * did rather than a spurious "exists" or "no such bucket".
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cl_meta.h"
#include "zc.h"

#define KEY_CAP 128

static int
etcd_err(int err)
{
	return err == -ETIMEDOUT ? ZC_E(ZC_UNAVAILABLE) : err;
}

static int
bucket_key(const char *bucket, char *buf, size_t cap)
{
	int n;

	if (!bucket || !bucket[0] || strchr(bucket, '/'))
		return -EINVAL;
	n = snprintf(buf, cap, CL_META_BUCKETS "%s", bucket);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

int
cl_meta_bucket_create(struct cl_etcd *c, const char *bucket, uint64_t ctime_ns, unsigned timeout_ms)
{
	struct cl_rec_bucket rec = { .ctime_ns = ctime_ns };
	struct cl_etcd_txn_result res = { 0 };
	char bk[KEY_CAP];
	uint8_t *value = NULL;
	size_t len = 0;
	int bkl = bucket_key(bucket, bk, sizeof(bk)), err;

	if (bkl < 0)
		return bkl;
	err = cl_rec_bucket_encode(&rec, &value, &len, NULL, 0);
	if (err)
		return err;
	struct cl_etcd_cmp cmp = { .key = bk,
		                   .key_len = (size_t)bkl,
		                   .target = CL_ETCD_CMP_VERSION,
		                   .op = CL_ETCD_EQUAL };
	struct cl_etcd_op then = { .type = CL_ETCD_OP_PUT,
		                   .r = { .key = bk, .key_len = (size_t)bkl },
		                   .value = value,
		                   .value_len = len };
	struct cl_etcd_op els = { .type = CL_ETCD_OP_RANGE,
		                  .r = { .key = bk, .key_len = (size_t)bkl } };
	struct cl_etcd_txn txn = { &cmp, 1, &then, 1, &els, 1 };

	err = etcd_err(cl_etcd_txn(c, &txn, &res, timeout_ms));
	if (!err && !res.succeeded) {
		const struct cl_etcd_kvs *k = res.n_op == 1 ? &res.op[0].kvs : NULL;

		/* The same value is our own repeated Txn (ctime in ns: no one else's). */
		err = k && k->n == 1 && k->kv[0].value_len == len &&
		                      memcmp(k->kv[0].value, value, len) == 0
		              ? 0
		              : ZC_E(ZC_BUCKET_EXISTS);
	}
	cl_etcd_txn_result_fini(&res);
	free(value);
	return err;
}

int
cl_meta_bucket_delete(struct cl_etcd *c, const char *bucket, unsigned timeout_ms)
{
	char bk[KEY_CAP], ob[KEY_CAP], oe[KEY_CAP];
	struct cl_etcd_kvs kvs = { 0 };
	struct cl_etcd_txn_result res = { 0 };
	int bkl = bucket_key(bucket, bk, sizeof(bk)), obl, err;
	int64_t rev;

	if (bkl < 0)
		return bkl;
	obl = snprintf(ob, sizeof(ob), CL_META_OBJECTS "%s/", bucket);
	if (obl < 0 || (size_t)obl >= sizeof(ob))
		return -ENAMETOOLONG;
	memcpy(oe, ob, (size_t)obl);
	oe[obl - 1] = '/' + 1; /* [".../<bucket>/", ".../<bucket>0"): the bucket's objects */

	/* Read the bucket for the fence, and refuse a non-empty bucket before asking etcd to
	 * compare over the whole range (which reads every key in it). */
	err = cl_etcd_get(c, bk, (size_t)bkl, false, &kvs, timeout_ms);
	rev = !err ? kvs.kv[0].mod_revision : 0;
	cl_etcd_kvs_fini(&kvs);
	if (err)
		return zc_err_is(err, ZC_NO_KEY) ? ZC_E(ZC_NO_BUCKET) : etcd_err(err);

	struct cl_etcd_cmp cmp[2] = {
		{ .key = bk, .key_len = (size_t)bkl, .target = CL_ETCD_CMP_MOD, .num = rev },
		/* no key in the range: version == 0 over [ob, oe) */
		{ .key = ob,
		  .key_len = (size_t)obl,
		  .target = CL_ETCD_CMP_VERSION,
		  .op = CL_ETCD_EQUAL,
		  .end = oe,
		  .end_len = (size_t)obl },
	};
	struct cl_etcd_op then = { .type = CL_ETCD_OP_DELETE,
		                   .r = { .key = bk, .key_len = (size_t)bkl } };
	struct cl_etcd_op els[2] = {
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = bk, .key_len = (size_t)bkl, .keys_only = true } },
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = ob,
		         .key_len = (size_t)obl,
		         .end = oe,
		         .end_len = (size_t)obl,
		         .limit = 1,
		         .keys_only = true } },
	};
	struct cl_etcd_txn txn = { cmp, 2, &then, 1, els, 2 };

	err = etcd_err(cl_etcd_txn(c, &txn, &res, timeout_ms));
	if (!err && !res.succeeded) {
		if (res.n_op != 2)
			err = -EIO;
		else if (res.op[1].kvs.n)
			err = ZC_E(ZC_BUCKET_NOT_EMPTY);
		else if (!res.op[0].kvs.n)
			err = 0; /* gone since the read: our repeated Txn, or another deleter */
		else
			err = ZC_E(
			        ZC_PRECONDITION); /* re-created meanwhile: let the caller retry */
	}
	cl_etcd_txn_result_fini(&res);
	return err;
}

int
cl_meta_bucket_head(struct cl_etcd *c, const char *bucket, struct cl_rec_bucket *out,
                    unsigned timeout_ms)
{
	struct cl_etcd_kvs kvs = { 0 };
	struct cl_rec_bucket rec;
	char bk[KEY_CAP], why[CL_REC_WHY_MAX];
	int bkl = bucket_key(bucket, bk, sizeof(bk)), err;

	if (bkl < 0)
		return bkl;
	err = cl_etcd_get(c, bk, (size_t)bkl, false, &kvs, timeout_ms);
	if (err) {
		cl_etcd_kvs_fini(&kvs);
		return zc_err_is(err, ZC_NO_KEY) ? ZC_E(ZC_NO_BUCKET) : etcd_err(err);
	}
	err = cl_rec_bucket_decode(kvs.kv[0].value, kvs.kv[0].value_len, &rec, why, sizeof(why));
	if (!err && out)
		*out = rec;
	cl_etcd_kvs_fini(&kvs);
	return err;
}

void
cl_meta_bucket_list_free(struct cl_meta_bucket_entry *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++)
		free(v[i].name);
	free(v);
}

int
cl_meta_bucket_list(struct cl_etcd *c, struct cl_meta_bucket_entry **out, size_t *n,
                    unsigned timeout_ms)
{
	struct cl_etcd_range r = { .key = CL_META_BUCKETS,
		                   .key_len = strlen(CL_META_BUCKETS),
		                   .prefix = true };
	struct cl_etcd_kvs kvs = { 0 };
	struct cl_meta_bucket_entry *v;
	size_t nv = 0;
	int err = etcd_err(cl_etcd_range(c, &r, &kvs, timeout_ms));

	*out = NULL;
	*n = 0;
	if (err)
		return err;
	v = calloc(kvs.n ? kvs.n : 1, sizeof(*v));
	if (!v) {
		cl_etcd_kvs_fini(&kvs);
		return -ENOMEM;
	}
	for (size_t i = 0; i < kvs.n; i++) {
		struct cl_rec_bucket rec;
		char why[CL_REC_WHY_MAX];
		const char *name = kvs.kv[i].key + r.key_len;

		if (cl_rec_bucket_decode(kvs.kv[i].value, kvs.kv[i].value_len, &rec, why,
		                         sizeof(why))) {
			ZC_WARN("cmeta", "bucket key=%s does not decode why=\"%s\": left out",
			        kvs.kv[i].key, why);
			continue;
		}
		v[nv].name = strdup(name);
		if (!v[nv].name) {
			cl_meta_bucket_list_free(v, nv);
			cl_etcd_kvs_fini(&kvs);
			return -ENOMEM;
		}
		v[nv++].ctime_ns = rec.ctime_ns;
	}
	cl_etcd_kvs_fini(&kvs);
	*out = v;
	*n = nv;
	return 0;
}
