/*
 * Compose (rpc_cmeta.h): a multipart Complete as one etcd Txn. The bucket, the target and
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
 * branch: our own value in T (a repeated Txn) is success; a changed target fails the
 * caller's condition or (no condition) is read again; else a part changed, and everything
 * is read again.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_cmeta_internal.h"
#include "zc.h"
#include "zc_crc.h"

#ifdef RPC_FAULTS
static void (*fault_fn)(void *, unsigned);
static void *fault_arg;

void
rpc_cmeta_compose_fault(void (*fn)(void *arg, unsigned attempt), void *arg)
{
	fault_fn = fn;
	fault_arg = arg;
}
#endif

struct part_seen {
	bool exists;
	int64_t mod_revision;
	struct rpc_cl_object o;
};

struct compose {
	struct rpc_etcd *c;
	const char *bucket, *key;
	const struct rpc_cmeta_part *parts;
	size_t n;
	char bk[RPC_CMETA_KEY_CAP], tk[RPC_CMETA_KEY_CAP];
	size_t bkl, tkl;
	char **pk; /* the parts' etcd keys */
	size_t *pkl;
	struct rpc_cmeta_seen base; /* bucket and target as read */
	struct part_seen *ps;
	size_t txn_bytes; /* about what the last Txn sent weighs */
};

/* etcd's default --max-request-bytes: no smaller request is refused for its size. */
#define ETCD_DEFAULT_REQUEST_BYTES (1536u * 1024)

static void
parts_clear(struct compose *x)
{
	for (size_t i = 0; x->ps && i < x->n; i++) {
		rpc_cl_object_fini(&x->ps[i].o);
		memset(&x->ps[i], 0, sizeof(x->ps[i]));
	}
	rpc_cmeta_seen_fini(&x->base);
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
}

static int
cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The parts' keys; ZC_INVALID for a part named twice or the target among them. */
static int
compose_keys(struct compose *x)
{
	char buf[RPC_CMETA_KEY_CAP];
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
		n = rpc_cmeta_object_key(x->parts[i].bucket, x->parts[i].key, buf, sizeof(buf));
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
	 * default limit can meet. Never -EAGAIN: that means "a part changed" to the caller. */
	if (err == -EAGAIN && x->txn_bytes > ETCD_DEFAULT_REQUEST_BYTES) {
		ZC_WARN("cmeta",
		        "compose into %s of %zu parts: etcd refused a Txn of ~%zu bytes (more "
		        "than its --max-request-bytes)",
		        x->tk, x->n, x->txn_bytes);
		return ZC_E(ZC_INVALID);
	}
	return err == -EAGAIN ? ZC_E(ZC_SLOW_DOWN) : err;
}

/* Read bucket, target and parts in one snapshot. */
static int
compose_read(struct compose *x, unsigned timeout_ms)
{
	struct rpc_etcd_op *ops = calloc(x->n + 2, sizeof(*ops));
	struct rpc_etcd_txn txn = { .then = ops, .n_then = x->n + 2 };
	struct rpc_etcd_txn_result res = { 0 };
	int err;

	if (!ops)
		return -ENOMEM;
	parts_clear(x);
	ops[0] =
	        (struct rpc_etcd_op){ .type = RPC_ETCD_OP_RANGE,
		                      .r = { .key = x->bk, .key_len = x->bkl, .keys_only = true } };
	ops[1] = (struct rpc_etcd_op){ .type = RPC_ETCD_OP_RANGE,
		                       .r = { .key = x->tk, .key_len = x->tkl } };
	x->txn_bytes = x->bkl + x->tkl;
	for (size_t i = 0; i < x->n; i++) {
		ops[2 + i] = (struct rpc_etcd_op){ .type = RPC_ETCD_OP_RANGE,
			                           .r = { .key = x->pk[i], .key_len = x->pkl[i] } };
		x->txn_bytes += x->pkl[i] + 8;
	}
	err = too_big(x, rpc_cmeta_etcd_err(rpc_etcd_txn(x->c, &txn, &res, timeout_ms)));
	free(ops);
	if (err)
		return err;
	if (res.n_op != x->n + 2) {
		err = -EIO;
		goto out;
	}
	err = rpc_cmeta_seen_take(&x->base, &res.op[0].kvs, &res.op[1].kvs);
	for (size_t i = 0; !err && i < x->n; i++) {
		const struct rpc_etcd_kvs *k = &res.op[2 + i].kvs;
		char why[RPC_CL_WHY_MAX];

		if (!k->n)
			continue;
		x->ps[i].exists = true;
		x->ps[i].mod_revision = k->kv[0].mod_revision;
		err = rpc_cl_object_decode(k->kv[0].value, k->kv[0].value_len, &x->ps[i].o, why,
		                           sizeof(why));
		if (err)
			ZC_WARN("cmeta", "part %s does not decode why=\"%s\"", x->pk[i], why);
	}
out:
	rpc_etcd_txn_result_fini(&res);
	return err;
}

/* What the read says of the call before any write: 0 to go on, else the answer. */
static int
compose_judge(const struct compose *x, const struct rpc_cmeta_cond *cond)
{
	bool if_match = cond && cond->if_match && cond->if_match[0];

	if (!x->base.bucket)
		return ZC_E(ZC_NO_BUCKET);
	for (size_t i = 0; i < x->n; i++) {
		const char *want = x->parts[i].etag;

		if (!x->ps[i].exists)
			return ZC_E(ZC_NO_KEY);
		if (want && want[0] && strcmp(want, x->ps[i].o.etag) != 0)
			return -EAGAIN;
	}
	if (cond && cond->if_none_match && x->base.object)
		return ZC_E(ZC_PRECONDITION);
	if (if_match && !x->base.object)
		return ZC_E(ZC_NO_KEY);
	if (if_match && !rpc_cmeta_etag_matches(&x->base, cond->if_match))
		return ZC_E(ZC_PRECONDITION);
	return 0;
}

/* The target's record: the parts' extents in order (borrowed from x->ps), encoded. */
static int
compose_build(const struct compose *x, const char *etag, const struct rpc_cl_attr *attrs,
              size_t nattrs, uint64_t mtime_ns, uint8_t **value, size_t *len, uint64_t **ids,
              size_t *nids)
{
	struct rpc_cl_object rec = { .etag = (char *)etag,
		                     .mtime_ns = mtime_ns,
		                     .attrs = (struct rpc_cl_attr *)attrs,
		                     .nattrs = nattrs };
	char why[RPC_CL_WHY_MAX];
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
		const struct rpc_cl_object *o = &x->ps[i].o;

		rec.crc32c = i ? zc_crc32c_combine(rec.crc32c, o->crc32c, o->size) : o->crc32c;
		rec.size += o->size;
		for (size_t e = 0; e < o->nextents; e++) {
			rec.extents[j] = o->extents[e];
			(*ids)[j++] = o->extents[e].id;
		}
	}
	rec.nextents = ne;
	*nids = ne;
	if (!rpc_cmeta_ids_distinct(*ids, ne)) {
		/* Two records never share an extent: a part copied by hand into etcd. */
		ZC_WARN("cmeta", "compose into %s: two parts name one extent", x->tk);
		err = ZC_E(ZC_INVALID);
	} else {
		err = rpc_cl_object_encode(&rec, value, len, why, sizeof(why));
		if (err)
			ZC_WARN("cmeta", "compose into %s refused why=\"%s\"", x->tk, why);
	}
	free(rec.extents);
	return err;
}

/* The write: 1 in, 0 a compare failed (*now: the else branch), or an error. */
static int
compose_txn(struct compose *x, const uint8_t *value, size_t len, const uint64_t *ids, size_t nids,
            bool ix_old, struct rpc_cmeta_seen *now, int64_t *revision, unsigned timeout_ms)
{
	struct rpc_etcd_cmp *cmp = calloc(x->n + 2, sizeof(*cmp));
	struct rpc_etcd_op els[2] = {
		{ .type = RPC_ETCD_OP_RANGE,
		  .r = { .key = x->bk, .key_len = x->bkl, .keys_only = true } },
		{ .type = RPC_ETCD_OP_RANGE, .r = { .key = x->tk, .key_len = x->tkl } },
	};
	struct rpc_cl_object was = { 0 };
	struct rpc_cmeta_ops then = { 0 };
	struct rpc_etcd_txn txn = { .cmp = cmp, .n_cmp = x->n + 2, .els = els, .n_els = 2 };
	struct rpc_etcd_txn_result res = { 0 };
	char why[RPC_CL_WHY_MAX];
	int err = cmp ? 0 : -ENOMEM;

	if (ix_old && x->base.object &&
	    rpc_cl_object_decode(x->base.value, x->base.value_len, &was, why, sizeof(why)))
		memset(&was, 0, sizeof(was));
	if (!err)
		err = rpc_cmeta_ops_init(&then, 1 + x->n + nids + was.nextents);
	if (err)
		goto out;
	cmp[0] = (struct rpc_etcd_cmp){ .key = x->bk,
		                        .key_len = x->bkl,
		                        .target = RPC_ETCD_CMP_VERSION,
		                        .op = RPC_ETCD_GREATER };
	cmp[1] = (struct rpc_etcd_cmp){ .key = x->tk,
		                        .key_len = x->tkl,
		                        .target = x->base.object ? RPC_ETCD_CMP_MOD
		                                                 : RPC_ETCD_CMP_VERSION,
		                        .op = RPC_ETCD_EQUAL,
		                        .num = x->base.object ? x->base.mod_revision : 0 };
	rpc_cmeta_ops_add(&then, RPC_ETCD_OP_PUT, x->tk, x->tkl, value, len);
	for (size_t i = 0; i < x->n; i++) {
		cmp[2 + i] = (struct rpc_etcd_cmp){ .key = x->pk[i],
			                            .key_len = x->pkl[i],
			                            .target = RPC_ETCD_CMP_MOD,
			                            .op = RPC_ETCD_EQUAL,
			                            .num = x->ps[i].mod_revision };
		rpc_cmeta_ops_add(&then, RPC_ETCD_OP_DELETE, x->pk[i], x->pkl[i], NULL, 0);
	}
	for (size_t i = 0; i < nids; i++)
		rpc_cmeta_ops_ix_put(&then, ids[i], x->tk, x->tkl);
	rpc_cmeta_ops_ix_del(&then, &was, ids, nids);
	txn.then = then.v;
	txn.n_then = then.n;
	/* each compare and op: its key, value and ~8 bytes of framing */
	x->txn_bytes = 0;
	for (size_t i = 0; i < txn.n_cmp; i++)
		x->txn_bytes += cmp[i].key_len + 8;
	for (size_t i = 0; i < then.n; i++)
		x->txn_bytes += then.v[i].r.key_len + then.v[i].value_len + 8;
	err = rpc_cmeta_etcd_err(rpc_etcd_txn(x->c, &txn, &res, timeout_ms));
	if (err)
		goto out;
	*revision = res.revision;
	if (res.succeeded)
		err = 1;
	else
		err = res.n_op == 2 ? rpc_cmeta_seen_take(now, &res.op[0].kvs, &res.op[1].kvs)
		                    : -EIO;
	rpc_etcd_txn_result_fini(&res);
out:
	rpc_cmeta_ops_fini(&then);
	rpc_cl_object_fini(&was);
	free(cmp);
	return err;
}

int
rpc_cmeta_compose(struct rpc_etcd *c, const char *bucket, const char *key,
                  const struct rpc_cmeta_part *parts, size_t nparts, const char *etag,
                  const struct rpc_cl_attr *attrs, size_t nattrs, const struct rpc_cmeta_cond *cond,
                  uint64_t mtime_ns, unsigned timeout_ms, uint64_t *size, struct rpc_cmeta_old *old)
{
	struct compose x = { .c = c, .bucket = bucket, .key = key, .parts = parts, .n = nparts };
	struct rpc_cmeta_seen now = { 0 };
	struct rpc_cmeta_deadline d;
	bool has_cond = cond && (cond->if_none_match || (cond->if_match && cond->if_match[0]));
	bool ix_old = true;
	int n, err;
#ifdef RPC_FAULTS
	unsigned attempt = 0;
#endif

	if (old)
		memset(old, 0, sizeof(*old));
	if (size)
		*size = 0;
	if (!c || !old || !etag || !etag[0])
		return -EINVAL;
	if (!parts || !nparts || nparts > RPC_CL_MAX_PARTS)
		return ZC_E(ZC_INVALID);
	n = rpc_cmeta_bucket_key(bucket, x.bk, sizeof(x.bk));
	if (n < 0)
		return n;
	x.bkl = (size_t)n;
	n = rpc_cmeta_object_key(bucket, key, x.tk, sizeof(x.tk));
	if (n < 0)
		return n;
	x.tkl = (size_t)n;
	rpc_cmeta_deadline_init(&d, timeout_ms, 0);
	err = compose_keys(&x);
	while (!err) {
		uint8_t *value = NULL;
		uint64_t *ids = NULL;
		size_t len = 0, nids = 0;
		int64_t revision = 0;
		unsigned left = rpc_cmeta_deadline_left(&d);

		err = left ? compose_read(&x, left) : ZC_E(ZC_UNAVAILABLE);
		err = err ? err : compose_judge(&x, cond);
		err = err ? err
		          : compose_build(&x, etag, attrs, nattrs, mtime_ns, &value, &len, &ids,
		                          &nids);
#ifdef RPC_FAULTS
		if (!err && fault_fn)
			fault_fn(fault_arg, ++attempt);
#endif
		for (; !err;) {
			left = rpc_cmeta_deadline_left(&d);
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
			err = rpc_cmeta_old_from(old, &x.base, revision);
		} else if (!err) {
			if (now.object && now.value_len == len &&
			    memcmp(now.value, value, len) == 0)
				/* our own Txn, applied by an attempt whose reply was lost */
				err = rpc_cmeta_old_from(old, &x.base, now.mod_revision);
			else if (!now.bucket)
				err = ZC_E(ZC_NO_BUCKET);
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
		rpc_cmeta_seen_fini(&now);
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
