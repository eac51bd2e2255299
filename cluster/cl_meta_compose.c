/*
 * Compose (cl_meta.h): a multipart Complete as one etcd Txn. The bucket, the target and
 * every part are read in one read-only Txn (one snapshot); the new record is built from
 * the parts' extents; then one Txn
 *
 *   compare: version(B) > 0, the target as read (version 0 or its mod_revision),
 *            mod_revision(P_i) == r_i for every part
 *   then:    [Put T, Delete P_i..., Put X(e) = T for every extent e of the parts,
 *             Delete X(e) for every extent of the record T replaces]
 *   else:    [Range B keys-only, Range T]
 *
 * moves the parts' extents to the target. A failed compare is told apart by the else
 * branch: our own value in T (a repeated Txn) is success; an upload's compose whose
 * upload record changed (an Abort marked it) is ZC_NO_KEY, never read again; a changed
 * target fails the caller's condition or (no condition) is read again; else a part
 * changed, and everything is read again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "cl_meta_internal.h"
#include "zc.h"
#include "zc_crc.h"

#ifdef ZC_FAULTS
static void (*fault_fn)(void *, unsigned);
static void *fault_arg;

void
cl_meta_compose_fault(void (*fn)(void *arg, unsigned attempt), void *arg)
{
	fault_fn = fn;
	fault_arg = arg;
}
#endif

struct part_seen {
	bool exists;
	int64_t mod_revision;
	struct cl_rec_object o;
};

struct part_key {
	const char *k; /* pk[i] */
	size_t i;
};

struct compose {
	struct cl_etcd *c;
	const char *bucket, *key;
	const struct cl_meta_part *parts;
	size_t n;
	char bk[CL_META_KEY_CAP], tk[CL_META_KEY_CAP];
	size_t bkl, tkl;
	char **pk; /* the parts' etcd keys */
	size_t *pkl;
	struct cl_meta_seen base; /* bucket and target as read */
	struct part_seen *ps;
	size_t txn_bytes; /* about what the last Txn sent weighs */
	/* an upload's compose (cl_meta_compose_upload): */
	const struct cl_meta_upload *up;
	char lo[CL_META_KEY_CAP], hi[CL_META_KEY_CAP]; /* the parts: [lo, hi) */
	char fk[CL_META_KEY_CAP], mk[CL_META_KEY_CAP]; /* fence, moved key */
	size_t lol, hil, fkl, mkl;
	struct part_key *order; /* the parts in key order */
	int64_t rev;            /* the read's revision */
	bool fence_seen;        /* up->fence existed at rev */
	int64_t fence_mod;      /* and its mod_revision */
	bool fence_moved;       /* a failed Txn found it changed or gone since */
};

/* Parts of an upload read per Range: ~200 bytes a record, so ~200 kB a reply. */
#define UPLOAD_PAGE 1000

/* etcd's default --max-request-bytes: no smaller request is refused for its size. */
#define ETCD_DEFAULT_REQUEST_BYTES (1536u * 1024)

static void
parts_clear(struct compose *x)
{
	for (size_t i = 0; x->ps && i < x->n; i++) {
		cl_rec_object_fini(&x->ps[i].o);
		memset(&x->ps[i], 0, sizeof(x->ps[i]));
	}
	cl_meta_seen_fini(&x->base);
}

static void
compose_fini(struct compose *x)
{
	parts_clear(x);
	for (size_t i = 0; x->pk && i < x->n; i++)
		free(x->pk[i]);
	free(x->pk);
	free(x->pkl);
	free(x->ps);
	free(x->order);
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int
cmp_order(const void *a, const void *b)
{
	return strcmp(((const struct part_key *)a)->k, ((const struct part_key *)b)->k);
}

/* An upload's compose: every part under the prefix, the range, the fence and moved keys,
 * and the parts in key order (to match the Range's records against). */
static int
upload_keys(struct compose *x)
{
	const struct cl_meta_upload *up = x->up;
	size_t pl = up->prefix ? strlen(up->prefix) : 0;
	int n;

	if (!pl || up->prefix[pl - 1] != '/')
		return -EINVAL;
	for (size_t i = 0; i < x->n; i++) {
		const char *k = x->parts[i].key;

		if (!x->parts[i].bucket || strcmp(x->parts[i].bucket, up->bucket) != 0 ||
		    strncmp(k, up->prefix, pl) != 0 || !k[pl] || strchr(k + pl, '/')) {
			ZC_WARN("cmeta", "compose into %s: part %s/%s is not under %s/%s", x->tk,
			        x->parts[i].bucket, k, up->bucket, up->prefix);
			return ZC_E(ZC_INVALID);
		}
	}
	n = cl_meta_object_key(up->bucket, up->prefix, x->lo, sizeof(x->lo));
	if (n < 0)
		return n;
	x->lol = (size_t)n;
	memcpy(x->hi, x->lo, x->lol);
	x->hi[x->lol - 1]++; /* '/' + 1: the end of the prefix */
	x->hil = x->lol;
	if (strncmp(x->tk, x->lo, x->lol) == 0) {
		ZC_WARN("cmeta", "compose into %s: the target is under the parts' prefix", x->tk);
		return ZC_E(ZC_INVALID);
	}
	n = cl_meta_moved_key(x->pk[0], x->mk, sizeof(x->mk));
	if (n < 0)
		return n;
	x->mkl = (size_t)n;
	if (up->fence) {
		if (strncmp(up->fence, up->prefix, pl) == 0)
			return -EINVAL;
		n = cl_meta_object_key(up->bucket, up->fence, x->fk, sizeof(x->fk));
		if (n < 0)
			return n;
		x->fkl = (size_t)n;
	}
	x->order = calloc(x->n, sizeof(*x->order));
	if (!x->order)
		return -ENOMEM;
	for (size_t i = 0; i < x->n; i++)
		x->order[i] = (struct part_key){ x->pk[i], i };
	qsort(x->order, x->n, sizeof(*x->order), cmp_order);
	return 0;
}

/* The parts' keys; ZC_INVALID for a part named twice or the target among them. */
static int
compose_keys(struct compose *x)
{
	char buf[CL_META_KEY_CAP];
	char **sorted;
	int n, err = 0;

	x->pk = calloc(x->n, sizeof(*x->pk));
	x->pkl = calloc(x->n, sizeof(*x->pkl));
	x->ps = calloc(x->n, sizeof(*x->ps));
	sorted = calloc(x->n, sizeof(*sorted));
	if (!x->pk || !x->pkl || !x->ps || !sorted) {
		free(sorted);
		return -ENOMEM;
	}
	for (size_t i = 0; i < x->n; i++) {
		n = cl_meta_object_key(x->parts[i].bucket, x->parts[i].key, buf, sizeof(buf));
		if (n < 0) {
			free(sorted);
			return n;
		}
		x->pk[i] = strdup(buf);
		if (!x->pk[i]) {
			free(sorted);
			return -ENOMEM;
		}
		x->pkl[i] = (size_t)n;
		sorted[i] = x->pk[i];
	}
	if (x->up && !err)
		err = upload_keys(x);
	qsort(sorted, x->n, sizeof(*sorted), cmp_str);
	for (size_t i = 0; !err && i < x->n; i++) {
		if ((i && strcmp(sorted[i], sorted[i - 1]) == 0) || strcmp(sorted[i], x->tk) == 0) {
			ZC_WARN("cmeta", "compose into %s: part %s named twice or is the target",
			        x->tk, sorted[i]);
			err = ZC_E(ZC_INVALID);
		}
	}
	free(sorted);
	return err;
}

/* etcd refused the Txn as malformed: ours are well formed, so it was its size. */
static int
too_big(const struct compose *x, int err)
{
	if (err == -EINVAL) {
		ZC_WARN("cmeta",
		        "compose into %s of %zu parts: etcd refused the Txn (more than its "
		        "--max-txn-ops or --max-request-bytes)",
		        x->tk, x->n);
		return ZC_E(ZC_INVALID);
	}
	/* RESOURCE_EXHAUSTED: etcd busy or out of space (503, try later), or a message past
	 * its gRPC limit (--max-request-bytes + 512 KiB), which only a Txn bigger than the
	 * default limit can meet: SlowDown, not ZC_CHANGED (a part changed). */
	if (zc_err_is(err, ZC_SLOW_DOWN) && x->txn_bytes > ETCD_DEFAULT_REQUEST_BYTES) {
		ZC_WARN("cmeta",
		        "compose into %s of %zu parts: etcd refused a Txn of ~%zu bytes (more "
		        "than its --max-request-bytes)",
		        x->tk, x->n, x->txn_bytes);
		return ZC_E(ZC_INVALID);
	}
	return err;
}

/* Read bucket, target and parts in one snapshot. */
static int
compose_read(struct compose *x, unsigned timeout_ms)
{
	struct cl_etcd_op *ops = calloc(x->n + 2, sizeof(*ops));
	struct cl_etcd_txn txn = { .then = ops, .n_then = x->n + 2 };
	struct cl_etcd_txn_result res = { 0 };
	int err;

	if (!ops)
		return -ENOMEM;
	parts_clear(x);
	ops[0] = (struct cl_etcd_op){ .type = CL_ETCD_OP_RANGE,
		                      .r = { .key = x->bk, .key_len = x->bkl, .keys_only = true } };
	ops[1] = (struct cl_etcd_op){ .type = CL_ETCD_OP_RANGE,
		                      .r = { .key = x->tk, .key_len = x->tkl } };
	x->txn_bytes = x->bkl + x->tkl;
	for (size_t i = 0; i < x->n; i++) {
		ops[2 + i] = (struct cl_etcd_op){ .type = CL_ETCD_OP_RANGE,
			                          .r = { .key = x->pk[i], .key_len = x->pkl[i] } };
		x->txn_bytes += x->pkl[i] + 8;
	}
	err = too_big(x, cl_meta_etcd_err(cl_etcd_txn(x->c, &txn, &res, timeout_ms)));
	free(ops);
	if (err)
		return err;
	if (res.n_op != x->n + 2) {
		err = -EIO;
		goto out;
	}
	err = cl_meta_seen_take(&x->base, &res.op[0].kvs, &res.op[1].kvs);
	for (size_t i = 0; !err && i < x->n; i++) {
		const struct cl_etcd_kvs *k = &res.op[2 + i].kvs;
		char why[CL_REC_WHY_MAX];

		if (!k->n)
			continue;
		x->ps[i].exists = true;
		x->ps[i].mod_revision = k->kv[0].mod_revision;
		err = cl_rec_object_decode(k->kv[0].value, k->kv[0].value_len, &x->ps[i].o, why,
		                           sizeof(why));
		if (err)
			ZC_WARN("cmeta", "part %s does not decode why=\"%s\"", x->pk[i], why);
	}
out:
	cl_etcd_txn_result_fini(&res);
	return err;
}

/* The records of a page of the upload's range that are listed parts: decoded into ps. */
static int
upload_take(struct compose *x, const struct cl_etcd_kvs *k)
{
	char why[CL_REC_WHY_MAX], key[CL_META_KEY_CAP];
	int err = 0;

	for (size_t j = 0; !err && j < k->n; j++) {
		const struct cl_etcd_kv *kv = &k->kv[j];
		struct part_key want = { key, 0 }, *hit;

		if (kv->key_len >= sizeof(key))
			continue;
		memcpy(key, kv->key, kv->key_len);
		key[kv->key_len] = 0;
		hit = bsearch(&want, x->order, x->n, sizeof(*x->order), cmp_order);
		if (!hit)
			continue; /* a part the Complete does not list: deleted with the rest */
		x->ps[hit->i].exists = true;
		x->ps[hit->i].mod_revision = kv->mod_revision;
		err = cl_rec_object_decode(kv->value, kv->value_len, &x->ps[hit->i].o, why,
		                           sizeof(why));
		if (err)
			ZC_WARN("cmeta", "part %s does not decode why=\"%s\"", key, why);
	}
	return err;
}

/* An upload's read: bucket, target, fence and the first page of the parts in one Txn
 * (its revision is the snapshot), the other pages by Ranges pinned to it. */
static int
upload_read(struct compose *x, const struct cl_meta_deadline *d)
{
	struct cl_etcd_op ops[4] = {
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = x->bk, .key_len = x->bkl, .keys_only = true } },
		{ .type = CL_ETCD_OP_RANGE, .r = { .key = x->tk, .key_len = x->tkl } },
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = x->lo,
		         .key_len = x->lol,
		         .end = x->hi,
		         .end_len = x->hil,
		         .limit = UPLOAD_PAGE } },
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = x->fk, .key_len = x->fkl, .keys_only = true } },
	};
	struct cl_etcd_txn txn = { .then = ops, .n_then = x->fkl ? 4 : 3 };
	struct cl_etcd_txn_result res = { 0 };
	char after[CL_META_KEY_CAP + 1];
	size_t afl = 0;
	bool more;
	unsigned left = cl_meta_deadline_left(d);
	int err;

	parts_clear(x);
	x->fence_seen = false;
	x->txn_bytes = x->bkl + x->tkl + x->lol + x->hil + x->fkl;
	if (!left)
		return ZC_E(ZC_UNAVAILABLE);
	err = too_big(x, cl_meta_etcd_err(cl_etcd_txn(x->c, &txn, &res, left)));
	if (err)
		return err;
	if (res.n_op != txn.n_then) {
		err = -EIO;
		goto out;
	}
	x->rev = res.revision;
	if (x->fkl && res.op[3].kvs.n) {
		x->fence_seen = true;
		x->fence_mod = res.op[3].kvs.kv[0].mod_revision;
	}
	err = cl_meta_seen_take(&x->base, &res.op[0].kvs, &res.op[1].kvs);
	err = err ? err : upload_take(x, &res.op[2].kvs);
	more = res.op[2].kvs.more && res.op[2].kvs.n;
	if (more) {
		const struct cl_etcd_kv *last = &res.op[2].kvs.kv[res.op[2].kvs.n - 1];

		afl = last->key_len < CL_META_KEY_CAP ? last->key_len : CL_META_KEY_CAP;
		memcpy(after, last->key, afl);
		after[afl++] = 0; /* the first key after it */
	}
	while (!err && more) {
		struct cl_etcd_kvs k = { 0 };
		struct cl_etcd_range r = { .key = after,
			                   .key_len = afl,
			                   .end = x->hi,
			                   .end_len = x->hil,
			                   .limit = UPLOAD_PAGE,
			                   .revision = x->rev };

		left = cl_meta_deadline_left(d);
		err = left ? cl_meta_etcd_err(cl_etcd_range(x->c, &r, &k, left))
		           : ZC_E(ZC_UNAVAILABLE);
		err = err ? err : upload_take(x, &k);
		more = !err && k.more && k.n;
		if (more) {
			const struct cl_etcd_kv *last = &k.kv[k.n - 1];

			afl = last->key_len < CL_META_KEY_CAP ? last->key_len : CL_META_KEY_CAP;
			memcpy(after, last->key, afl);
			after[afl++] = 0;
		}
		cl_etcd_kvs_fini(&k);
	}
out:
	cl_etcd_txn_result_fini(&res);
	return err;
}

/* What the read says of the call before any write: 0 to go on, else the answer. */
static int
compose_judge(const struct compose *x, const struct cl_meta_cond *cond)
{
	bool if_match = cond && cond->if_match && cond->if_match[0];

	if (!x->base.bucket)
		return ZC_E(ZC_NO_BUCKET);
	if (x->fkl && !x->fence_seen)
		return ZC_E(ZC_NO_KEY); /* the upload's record went: aborted or completed */
	for (size_t i = 0; i < x->n; i++) {
		const char *want = x->parts[i].etag;

		if (!x->ps[i].exists)
			return ZC_E(ZC_NO_KEY);
		if (want && want[0] && strcmp(want, x->ps[i].o.etag) != 0)
			return ZC_E(ZC_CHANGED);
	}
	if (cond && cond->if_none_match && x->base.object)
		return ZC_E(ZC_PRECONDITION);
	if (if_match && !x->base.object)
		return ZC_E(ZC_NO_KEY);
	if (if_match && !cl_meta_etag_matches(&x->base, cond->if_match))
		return ZC_E(ZC_PRECONDITION);
	return 0;
}

/* The target's record: the parts' extents in order (borrowed from x->ps), encoded. */
static int
compose_build(const struct compose *x, const char *etag, const struct cl_rec_attr *attrs,
              size_t nattrs, uint64_t mtime_ns, uint8_t **value, size_t *len, uint64_t **ids,
              size_t *nids)
{
	struct cl_rec_object rec = { .etag = (char *)etag,
		                     .mtime_ns = mtime_ns,
		                     .attrs = (struct cl_rec_attr *)attrs,
		                     .nattrs = nattrs,
		                     .moved = x->up ? (char *)x->mk : NULL };
	char why[CL_REC_WHY_MAX];
	size_t ne = 0, j = 0;
	int err;

	for (size_t i = 0; i < x->n; i++)
		ne += x->ps[i].o.nextents;
	rec.extents = calloc(ne ? ne : 1, sizeof(*rec.extents));
	*ids = calloc(ne ? ne : 1, sizeof(**ids));
	if (!rec.extents || !*ids) {
		free(rec.extents);
		return -ENOMEM;
	}
	for (size_t i = 0; i < x->n; i++) {
		const struct cl_rec_object *o = &x->ps[i].o;

		rec.crc32c = i ? zc_crc32c_combine(rec.crc32c, o->crc32c, o->size) : o->crc32c;
		rec.size += o->size;
		for (size_t e = 0; e < o->nextents; e++) {
			rec.extents[j] = o->extents[e];
			(*ids)[j++] = o->extents[e].id;
		}
	}
	rec.nextents = ne;
	*nids = ne;
	if (!cl_meta_ids_distinct(*ids, ne)) {
		/* Two records never share an extent: a part copied by hand into etcd. */
		ZC_WARN("cmeta", "compose into %s: two parts name one extent", x->tk);
		err = ZC_E(ZC_INVALID);
	} else {
		err = cl_rec_object_encode(&rec, value, len, why, sizeof(why));
		if (err)
			ZC_WARN("cmeta", "compose into %s refused why=\"%s\"", x->tk, why);
	}
	free(rec.extents);
	return err;
}

/* The compares and ops of an upload's Txn (see cl_meta_compose_upload): the parts'
 * range fenced by one compare and deleted by one op, the moved key put. */
static void
upload_txn(struct compose *x, struct cl_etcd_cmp *cmp, size_t *ncmp, struct cl_meta_ops *then)
{
	cmp[(*ncmp)++] = (struct cl_etcd_cmp){ .key = x->lo,
		                               .key_len = x->lol,
		                               .target = CL_ETCD_CMP_MOD,
		                               .op = CL_ETCD_LESS,
		                               .num = x->rev + 1,
		                               .end = x->hi,
		                               .end_len = x->hil };
	if (x->fkl)
		cmp[(*ncmp)++] = (struct cl_etcd_cmp){ .key = x->fk,
			                               .key_len = x->fkl,
			                               .target = CL_ETCD_CMP_MOD,
			                               .op = CL_ETCD_EQUAL,
			                               .num = x->fence_mod };
	then->v[then->n++] = (struct cl_etcd_op){
		.type = CL_ETCD_OP_DELETE,
		.r = { .key = x->lo, .key_len = x->lol, .end = x->hi, .end_len = x->hil }
	};
	cl_meta_ops_add(then, CL_ETCD_OP_PUT, x->mk, x->mkl, x->tk, x->tkl);
}

/* The write: 1 in, 0 a compare failed (*now: the else branch), or an error. */
static int
compose_txn(struct compose *x, const uint8_t *value, size_t len, const uint64_t *ids, size_t nids,
            bool ix_old, struct cl_meta_seen *now, int64_t *revision, unsigned timeout_ms)
{
	size_t ncmp = x->up ? 4 : x->n + 2;
	struct cl_etcd_cmp *cmp = calloc(ncmp, sizeof(*cmp));
	struct cl_etcd_op els[3] = {
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = x->bk, .key_len = x->bkl, .keys_only = true } },
		{ .type = CL_ETCD_OP_RANGE, .r = { .key = x->tk, .key_len = x->tkl } },
		{ .type = CL_ETCD_OP_RANGE,
		  .r = { .key = x->fk, .key_len = x->fkl, .keys_only = true } },
	};
	struct cl_rec_object was = { 0 };
	struct cl_meta_ops then = { 0 };
	struct cl_etcd_txn txn = { .cmp = cmp, .els = els, .n_els = x->fkl ? 3 : 2 };
	struct cl_etcd_txn_result res = { 0 };
	char why[CL_REC_WHY_MAX];
	int err = cmp ? 0 : -ENOMEM;

	if (x->base.object &&
	    cl_rec_object_decode(x->base.value, x->base.value_len, &was, why, sizeof(why)))
		memset(&was, 0, sizeof(was));
	/* the ops: Put T, then per part or per upload, then the replaced record's index
	 * keys and its moved key */
	if (!err)
		err = cl_meta_ops_init(&then, 1 + (x->up ? 2 : x->n + nids) + was.nextents + 1);
	if (err)
		goto out;
	cmp[0] = (struct cl_etcd_cmp){ .key = x->bk,
		                       .key_len = x->bkl,
		                       .target = CL_ETCD_CMP_VERSION,
		                       .op = CL_ETCD_GREATER };
	cmp[1] = (struct cl_etcd_cmp){ .key = x->tk,
		                       .key_len = x->tkl,
		                       .target = x->base.object ? CL_ETCD_CMP_MOD
		                                                : CL_ETCD_CMP_VERSION,
		                       .op = CL_ETCD_EQUAL,
		                       .num = x->base.object ? x->base.mod_revision : 0 };
	ncmp = 2;
	cl_meta_ops_add(&then, CL_ETCD_OP_PUT, x->tk, x->tkl, value, len);
	if (x->up) {
		upload_txn(x, cmp, &ncmp, &then);
	} else {
		for (size_t i = 0; i < x->n; i++) {
			cmp[ncmp++] = (struct cl_etcd_cmp){ .key = x->pk[i],
				                            .key_len = x->pkl[i],
				                            .target = CL_ETCD_CMP_MOD,
				                            .op = CL_ETCD_EQUAL,
				                            .num = x->ps[i].mod_revision };
			cl_meta_ops_add(&then, CL_ETCD_OP_DELETE, x->pk[i], x->pkl[i], NULL, 0);
		}
		for (size_t i = 0; i < nids; i++)
			cl_meta_ops_ix_put(&then, ids[i], x->tk, x->tkl);
	}
	if (ix_old)
		cl_meta_ops_ix_del(&then, &was, ids, nids);
	cl_meta_ops_moved_del(&then, &was);
	txn.n_cmp = ncmp;
	txn.then = then.v;
	txn.n_then = then.n;
	/* each compare and op: its key, value and ~8 bytes of framing */
	x->txn_bytes = 0;
	for (size_t i = 0; i < txn.n_cmp; i++)
		x->txn_bytes += cmp[i].key_len + cmp[i].end_len + 8;
	for (size_t i = 0; i < then.n; i++)
		x->txn_bytes += then.v[i].r.key_len + then.v[i].value_len + 8;
	err = cl_meta_etcd_err(cl_etcd_txn(x->c, &txn, &res, timeout_ms));
	if (err)
		goto out;
	*revision = res.revision;
	x->fence_moved = false;
	if (res.succeeded)
		err = 1;
	else
		err = res.n_op == txn.n_els ? cl_meta_seen_take(now, &res.op[0].kvs, &res.op[1].kvs)
		                            : -EIO;
	/* The upload's record changed since the read: an Abort's mark (or its delete) went
	 * in, and the parts are that Abort's to delete from now on */
	if (!err && x->fkl)
		x->fence_moved =
		        !res.op[2].kvs.n || res.op[2].kvs.kv[0].mod_revision != x->fence_mod;
	cl_etcd_txn_result_fini(&res);
out:
	cl_meta_ops_fini(&then);
	cl_rec_object_fini(&was);
	free(cmp);
	return err;
}

static int
compose_run(struct cl_etcd *c, const char *bucket, const char *key, const struct cl_meta_upload *up,
            const struct cl_meta_part *parts, size_t nparts, const char *etag,
            const struct cl_rec_attr *attrs, size_t nattrs, const struct cl_meta_cond *cond,
            uint64_t mtime_ns, unsigned timeout_ms, uint64_t *size, struct cl_meta_old *old)
{
	struct compose x = {
		.c = c, .bucket = bucket, .key = key, .parts = parts, .n = nparts, .up = up
	};
	struct cl_meta_seen now = { 0 };
	struct cl_meta_deadline d;
	bool has_cond = cond && (cond->if_none_match || (cond->if_match && cond->if_match[0]));
	bool ix_old = true;
	int n, err;
#ifdef ZC_FAULTS
	unsigned attempt = 0;
#endif

	if (old)
		memset(old, 0, sizeof(*old));
	if (size)
		*size = 0;
	if (!c || !old || !etag || !etag[0])
		return -EINVAL;
	if (!parts || !nparts || nparts > CL_REC_MAX_PARTS)
		return ZC_E(ZC_INVALID);
	n = cl_meta_bucket_key(bucket, x.bk, sizeof(x.bk));
	if (n < 0)
		return n;
	x.bkl = (size_t)n;
	n = cl_meta_object_key(bucket, key, x.tk, sizeof(x.tk));
	if (n < 0)
		return n;
	x.tkl = (size_t)n;
	cl_meta_deadline_init(&d, timeout_ms, 0);
	err = compose_keys(&x);
	while (!err) {
		uint8_t *value = NULL;
		uint64_t *ids = NULL;
		size_t len = 0, nids = 0;
		int64_t revision = 0;
		unsigned left = cl_meta_deadline_left(&d);

		if (up)
			err = upload_read(&x, &d);
		else
			err = left ? compose_read(&x, left) : ZC_E(ZC_UNAVAILABLE);
		err = err ? err : compose_judge(&x, cond);
		err = err ? err
		          : compose_build(&x, etag, attrs, nattrs, mtime_ns, &value, &len, &ids,
		                          &nids);
#ifdef ZC_FAULTS
		if (!err && fault_fn)
			fault_fn(fault_arg, ++attempt);
#endif
		for (; !err;) {
			left = cl_meta_deadline_left(&d);
			err = left ? compose_txn(&x, value, len, ids, nids, ix_old, &now, &revision,
			                         left)
			           : ZC_E(ZC_UNAVAILABLE);
			if (err != -EINVAL || !ix_old || !x.base.object) {
				err = too_big(&x, err);
				break;
			}
			/* The replaced target's index keys made the Txn too big: they stay,
			 * naming the target, which no longer names them (the collector's). */
			ix_old = false;
			err = 0;
		}
		if (err == 1) {
			err = cl_meta_old_from(old, &x.base, revision);
		} else if (!err) {
			if (now.object && now.value_len == len &&
			    memcmp(now.value, value, len) == 0)
				/* our own Txn, applied by an attempt whose reply was lost */
				err = cl_meta_old_from(old, &x.base, now.mod_revision);
			else if (!now.bucket)
				err = ZC_E(ZC_NO_BUCKET);
			else if (x.fence_moved)
				/* the upload was ended meanwhile: never read again and compose
				 * what an Abort is deleting */
				err = ZC_E(ZC_NO_KEY);
			else if (has_cond && (now.object != x.base.object ||
			                      now.mod_revision != x.base.mod_revision))
				/* the target changed between the check and the write */
				err = cond->if_match && cond->if_match[0] && !now.object
				              ? ZC_E(ZC_NO_KEY)
				              : ZC_E(ZC_PRECONDITION);
			else
				err = -EINPROGRESS; /* a part or the target changed: read again */
		}
		if (!err && size) {
			*size = 0;
			for (size_t i = 0; i < x.n; i++)
				*size += x.ps[i].o.size;
		}
		cl_meta_seen_fini(&now);
		free(value);
		free(ids);
		if (err == -EINPROGRESS)
			err = 0;
		else
			break;
	}
	if (err < 0)
		ZC_DBG("cmeta", "compose bucket=%s key=%s parts=%zu err=%d", bucket, key, nparts,
		       err);
	compose_fini(&x);
	return err;
}

int
cl_meta_compose(struct cl_etcd *c, const char *bucket, const char *key,
                const struct cl_meta_part *parts, size_t nparts, const char *etag,
                const struct cl_rec_attr *attrs, size_t nattrs, const struct cl_meta_cond *cond,
                uint64_t mtime_ns, unsigned timeout_ms, uint64_t *size, struct cl_meta_old *old)
{
	return compose_run(c, bucket, key, NULL, parts, nparts, etag, attrs, nattrs, cond, mtime_ns,
	                   timeout_ms, size, old);
}

int
cl_meta_compose_upload(struct cl_etcd *c, const char *bucket, const char *key,
                       const struct cl_meta_upload *up, const struct cl_meta_part *parts,
                       size_t nparts, const char *etag, const struct cl_rec_attr *attrs,
                       size_t nattrs, const struct cl_meta_cond *cond, uint64_t mtime_ns,
                       unsigned timeout_ms, uint64_t *size, struct cl_meta_old *old)
{
	if (!up || !up->bucket || !up->prefix) {
		if (old)
			memset(old, 0, sizeof(*old));
		return -EINVAL;
	}
	return compose_run(c, bucket, key, up, parts, nparts, etag, attrs, nattrs, cond, mtime_ns,
	                   timeout_ms, size, old);
}
