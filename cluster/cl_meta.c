/*
 * The commit Txn and its neighbours (cl_meta.h). Every write here has the same shape:
 * read the key (or guess it absent), then one Txn whose compares are the bucket, the
 * caller's condition and a fence on what was read (mod_revision, or version 0), and whose
 * failure branch reads back the bucket and the key, so a failed compare says why without
 * another round trip. A Txn the etcd client sent twice (the first reply lost with a member)
 * fails its fence the second time and finds its own value in the key: that is success.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cl_meta_internal.h"
#include "zc.h"

#define KEY_CAP CL_META_KEY_CAP

void
cl_meta_deadline_init(struct cl_meta_deadline *d, unsigned timeout_ms, uint64_t not_after_real_ns)
{
	d->end_ns = zc_now_ns() +
	            (uint64_t)(timeout_ms ? timeout_ms : CL_ETCD_DEFAULT_TIMEOUT_MS) * 1000000u;
	d->not_after_real_ns = not_after_real_ns;
}

static uint64_t
real_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

unsigned
cl_meta_deadline_left(const struct cl_meta_deadline *d)
{
	uint64_t now = zc_now_ns(), left, real;

	if (now >= d->end_ns)
		return 0;
	left = d->end_ns - now;
	if (d->not_after_real_ns) {
		/* The call's own deadline too: an attempt the client sends again to the next
		 * member, or holds until a connection is back, must not outlive not_after. */
		real = real_ns();
		if (real >= d->not_after_real_ns)
			return 0;
		if (d->not_after_real_ns - real < left)
			left = d->not_after_real_ns - real;
	}
	return (unsigned)((left + 999999) / 1000000);
}

int
cl_meta_etcd_err(int err)
{
	return err == -ETIMEDOUT ? ZC_E(ZC_UNAVAILABLE) : err;
}

bool
cl_meta_bucket_ok(const char *b)
{
	return b && b[0] && !strchr(b, '/');
}

int
cl_meta_object_key(const char *bucket, const char *key, char *buf, size_t cap)
{
	int n;

	if (!cl_meta_bucket_ok(bucket) || !key || !key[0])
		return -EINVAL;
	n = snprintf(buf, cap, CL_META_OBJECTS "%s/%s", bucket, key);
	return n < 0 ? -EINVAL : (size_t)n >= cap ? -ENAMETOOLONG : n;
}

int
cl_meta_bucket_key(const char *bucket, char *buf, size_t cap)
{
	int n;

	if (!cl_meta_bucket_ok(bucket))
		return -EINVAL;
	n = snprintf(buf, cap, CL_META_BUCKETS "%s", bucket);
	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

void
cl_meta_old_fini(struct cl_meta_old *old)
{
	if (!old)
		return;
	cl_rec_object_fini(&old->o);
	memset(old, 0, sizeof(*old));
}

/* ------------------------------------------------------------------ building the record */

static void
extent_fini(struct cl_rec_extent *e)
{
	free(e->nodes); /* the names are borrowed from the put */
	free(e->groups);
}

static void
built_fini(struct cl_rec_object *o)
{
	for (size_t i = 0; o->extents && i < o->nextents; i++)
		extent_fini(&o->extents[i]);
	free(o->extents);
	memset(o, 0, sizeof(*o));
}

static int
node_index(struct cl_rec_extent *e, const char *name, size_t cap)
{
	for (size_t i = 0; i < e->nnodes; i++)
		if (strcmp(e->nodes[i], name) == 0)
			return (int)i;
	if (e->nnodes >= cap)
		return -EINVAL;
	e->nodes[e->nnodes] = (char *)name;
	return (int)e->nnodes++;
}

static int
build_extent(const struct cl_meta_extent *in, unsigned quorum, size_t xi, struct cl_rec_extent *e,
             char *why, size_t cap)
{
	unsigned cells = in->k + in->m;
	size_t ncap;

	*e = (struct cl_rec_extent){ .id = in->id,
		                     .size = in->size,
		                     .k = in->k,
		                     .m = in->m,
		                     .cell_size = in->cell_size,
		                     .stripes_per_group = in->stripes_per_group };
	/* an empty object's one extent has no groups (and no cells) */
	if (!in->k || cells > CL_REC_MAX_CELLS || (in->size && (!in->groups || !in->ngroups))) {
		snprintf(why, cap, "extents[%zu]: scheme %u+%u or no groups", xi, in->k, in->m);
		return -EINVAL;
	}
	ncap = in->ngroups * cells < CL_REC_MAX_EXTENT_NODES ? in->ngroups * cells
	                                                     : CL_REC_MAX_EXTENT_NODES;
	e->nodes = calloc(ncap, sizeof(*e->nodes));
	e->groups = calloc(in->ngroups, sizeof(*e->groups));
	if (!e->nodes || !e->groups)
		return -ENOMEM;
	e->ngroups = in->ngroups;
	if (!quorum)
		quorum = in->k + 1;
	if (quorum > cells)
		quorum = cells;
	for (size_t g = 0; g < in->ngroups; g++) {
		const struct cl_meta_group *gi = &in->groups[g];
		unsigned durable = 0;

		if (gi->missing >> cells) {
			snprintf(why, cap, "extents[%zu].groups[%zu]: missing bits past cell %u",
			         xi, g, cells);
			return -EINVAL;
		}
		for (unsigned i = 0; i < cells; i++) {
			int ni;

			if (!gi->node[i] || !cl_rec_node_name_ok(gi->node[i])) {
				snprintf(why, cap,
				         "extents[%zu].groups[%zu].node[%u]: bad node name", xi, g,
				         i);
				return -EINVAL;
			}
			ni = node_index(e, gi->node[i], ncap);
			if (ni < 0) {
				snprintf(why, cap, "extents[%zu]: more than %zu nodes", xi, ncap);
				return -EINVAL;
			}
			e->groups[g].cell[i] = (uint16_t)ni;
			durable += !(gi->missing & (1u << i));
		}
		e->groups[g].missing = gi->missing;
		/* The write quorum is the coordinator's promise; the record must never hold a
		 * group that promise does not cover. */
		if (durable < quorum) {
			snprintf(why, cap, "extents[%zu].groups[%zu]: %u durable cells, quorum %u",
			         xi, g, durable, quorum);
			return ZC_E(ZC_NO_QUORUM);
		}
	}
	return 0;
}

/* The record, not yet checked by the encoder; its strings and node names are p's. */
static int
build_record(const struct cl_meta_put *p, struct cl_rec_object *out, char *why, size_t cap)
{
	int err = 0;

	memset(out, 0, sizeof(*out));
	if (!p || !p->etag || !p->extents || !p->nextents) {
		snprintf(why, cap, "no etag or no extents");
		return -EINVAL;
	}
	*out = (struct cl_rec_object){ .size = p->size,
		                       .etag = (char *)p->etag,
		                       .crc32c = p->crc32c,
		                       .mtime_ns = p->mtime_ns,
		                       .attrs = (struct cl_rec_attr *)p->attrs,
		                       .nattrs = p->nattrs };
	out->extents = calloc(p->nextents, sizeof(*out->extents));
	if (!out->extents)
		return -ENOMEM;
	out->nextents = p->nextents;
	for (size_t i = 0; i < p->nextents; i++) {
		err = build_extent(&p->extents[i], p->write_quorum, i, &out->extents[i], why, cap);
		if (err)
			break;
	}
	if (err)
		built_fini(out);
	return err;
}

int
cl_meta_encode(const struct cl_meta_put *p, uint8_t **buf, size_t *len, char *why, size_t cap)
{
	struct cl_rec_object rec;
	int err = build_record(p, &rec, why, cap);

	if (err)
		return err;
	/* The encoder checks every rule a reader relies on (sizes, group counts, names). */
	err = cl_rec_object_encode(&rec, buf, len, why, cap);
	built_fini(&rec);
	return err;
}

/* ------------------------------------------------------------------ commit */

void
cl_meta_seen_fini(struct cl_meta_seen *s)
{
	free(s->value);
	memset(s, 0, sizeof(*s));
}

int
cl_meta_seen_take(struct cl_meta_seen *s, const struct cl_etcd_kvs *b, const struct cl_etcd_kvs *o)
{
	cl_meta_seen_fini(s);
	s->bucket = b->n > 0;
	if (o->n) {
		s->object = true;
		s->mod_revision = o->kv[0].mod_revision;
		s->value = malloc(o->kv[0].value_len + 1);
		if (!s->value)
			return -ENOMEM;
		memcpy(s->value, o->kv[0].value, o->kv[0].value_len);
		s->value_len = o->kv[0].value_len;
	}
	return 0;
}

int
cl_meta_old_from(struct cl_meta_old *old, const struct cl_meta_seen *base, int64_t revision)
{
	char why[CL_REC_WHY_MAX];
	int err;

	memset(old, 0, sizeof(*old));
	old->revision = revision;
	if (!base->object)
		return 0;
	err = cl_rec_object_decode(base->value, base->value_len, &old->o, why, sizeof(why));
	if (err) {
		/* The new record is in; only the old cells' collection is left to the scan. */
		ZC_WARN("cmeta", "replaced record does not decode err=%d why=\"%s\"", err, why);
		memset(&old->o, 0, sizeof(old->o));
	}
	old->had = true;
	old->mod_revision = base->mod_revision;
	return 0;
}

bool
cl_meta_etag_matches(const struct cl_meta_seen *s, const char *want)
{
	struct cl_rec_object o;
	char why[CL_REC_WHY_MAX];
	bool ok;

	if (strcmp(want, "*") == 0)
		return true;
	if (cl_rec_object_decode(s->value, s->value_len, &o, why, sizeof(why)))
		return false;
	ok = strcmp(o.etag, want) == 0;
	cl_rec_object_fini(&o);
	return ok;
}

/* Read bucket and object in one Txn (no compares): one snapshot. */
static int
read_both(struct cl_etcd *c, const char *bk, size_t bkl, const char *ok, size_t okl,
          struct cl_meta_seen *s, unsigned timeout_ms)
{
	struct cl_etcd_op ops[2] = {
		{ .type = CL_ETCD_OP_RANGE, .r = { .key = bk, .key_len = bkl, .keys_only = true } },
		{ .type = CL_ETCD_OP_RANGE, .r = { .key = ok, .key_len = okl } },
	};
	struct cl_etcd_txn txn = { .then = ops, .n_then = 2 };
	struct cl_etcd_txn_result res = { 0 };
	int err = cl_etcd_txn(c, &txn, &res, timeout_ms);

	if (err)
		return cl_meta_etcd_err(err);
	err = res.n_op == 2 ? cl_meta_seen_take(s, &res.op[0].kvs, &res.op[1].kvs) : -EIO;
	cl_etcd_txn_result_fini(&res);
	return err;
}

/* The extent ids of p, for the index keys the commit keeps. */
static uint64_t *
put_ids(const struct cl_meta_put *p)
{
	uint64_t *ids = calloc(p->nextents, sizeof(*ids));

	for (size_t i = 0; ids && i < p->nextents; i++)
		ids[i] = p->extents[i].id;
	return ids;
}

/*
 * One fenced Txn: compare bucket exists and the object is as base says (absent: version 0;
 * present: its mod_revision), put value and the index keys of p's extents, and (with
 * ix_old) delete those of the record base holds. 1 when it went in, 0 when a compare failed
 * (*now holds what the failure branch read), or an error.
 */
static int
fenced_put(struct cl_etcd *c, const char *bk, size_t bkl, const char *ok, size_t okl,
           const struct cl_meta_seen *base, const struct cl_meta_put *p, const uint64_t *ids,
           bool ix_old, const uint8_t *value, size_t value_len, struct cl_meta_seen *now,
           int64_t *revision, unsigned timeout_ms)
{
	struct cl_etcd_cmp *cmp = calloc(2 + p->nextents, sizeof(*cmp));
	char (*fk)[CL_META_EXTENT_KEY_CAP] = calloc(p->nextents ? p->nextents : 1, sizeof(*fk));
	struct cl_etcd_op els[2] = {
		{ .type = CL_ETCD_OP_RANGE, .r = { .key = bk, .key_len = bkl, .keys_only = true } },
		{ .type = CL_ETCD_OP_RANGE, .r = { .key = ok, .key_len = okl } },
	};
	struct cl_rec_object was = { 0 };
	struct cl_meta_ops then = { 0 };
	struct cl_etcd_txn txn = { .cmp = cmp, .n_cmp = 2 + p->nextents, .els = els, .n_els = 2 };
	struct cl_etcd_txn_result res = { 0 };
	char why[CL_REC_WHY_MAX], hk[KEY_CAP], hv[CL_META_HEAL_VALUE_CAP];
	size_t hvl = 0;
	int err, hkl;

	/* A replaced record that does not decode keeps its index keys: they name this key,
	 * whose new record does not name their extents, so the collector judges their cells
	 * garbage all the same (and removes the keys). */
	if (base->object &&
	    cl_rec_object_decode(base->value, base->value_len, &was, why, sizeof(why)))
		memset(&was, 0, sizeof(was));
	if (!cmp || !fk) {
		err = -ENOMEM;
		goto out;
	}
	cmp[0] = (struct cl_etcd_cmp){ .key = bk, .key_len = bkl, .target = CL_ETCD_CMP_VERSION,
		                       .op = CL_ETCD_GREATER };
	cmp[1] = (struct cl_etcd_cmp){ .key = ok,
		                       .key_len = okl,
		                       .target = base->object ? CL_ETCD_CMP_MOD
		                                              : CL_ETCD_CMP_VERSION,
		                       .op = CL_ETCD_EQUAL,
		                       .num = base->object ? base->mod_revision : 0 };
	/* No collector has given up an extent of ours (cl_meta_extent_fence): a Txn that
	 * arrives after its deadline cannot name cells deleted meanwhile. */
	for (size_t i = 0; i < p->nextents; i++)
		cmp[2 + i] = (struct cl_etcd_cmp){
			.key = fk[i],
			.key_len = (size_t)cl_meta_fence_key(ids[i], fk[i], sizeof(fk[i])),
			.target = CL_ETCD_CMP_VERSION,
			.op = CL_ETCD_EQUAL
		};
	err = cl_meta_ops_init(&then, 1 + 2 * p->nextents + was.nextents + 1 + 1);
	if (err)
		goto out;
	cl_meta_ops_add(&then, CL_ETCD_OP_PUT, ok, okl, value, value_len);
	/* "Absent" is the one compare that can hold again: a copy of this Txn that etcd gets
	 * late (sent into a cut connection, delivered when the partition heals) would find
	 * the key absent once more after a DELETE and bring this record back over it. So the
	 * Txn marks its extents' fences, which it compares absent: a second copy fails. The
	 * marks go by themselves (a shared lease, CL_META_MARK_TTL_S), long after any copy
	 * still in flight (TCP gives up retransmitting within ~15 minutes). */
	if (!base->object) {
		int64_t lease;

		err = cl_etcd_lease_shared(c, CL_META_MARK_TTL_S, CL_META_MARK_RENEW_S, &lease,
		                           timeout_ms);
		if (err) {
			err = cl_meta_etcd_err(err);
			goto out;
		}
		for (size_t i = 0; i < p->nextents; i++) {
			cl_meta_ops_add(&then, CL_ETCD_OP_PUT, cmp[2 + i].key, cmp[2 + i].key_len,
			                "committed", 9);
			then.v[then.n - 1].lease = lease;
		}
	}
	/* A record short of some cells, or with two cells of a group on one node (written
	 * while fewer than k + m nodes were live), names itself to the healers
	 * (cl_meta_heal_key), so they need not read every record to find it. */
	hvl = cl_meta_heal_value_put(p, hv);
	if (hvl) {
		hkl = cl_meta_heal_key(ok, okl, hk, sizeof(hk));
		if (hkl < 0) {
			err = hkl;
			goto out;
		}
		cl_meta_ops_add(&then, CL_ETCD_OP_PUT, hk, (size_t)hkl, hv, hvl);
	}
	for (size_t i = 0; i < p->nextents; i++)
		cl_meta_ops_ix_put(&then, ids[i], ok, okl);
	if (ix_old)
		cl_meta_ops_ix_del(&then, &was, ids, p->nextents);
	cl_meta_ops_moved_del(&then, &was); /* even without them: one op */
	txn.then = then.v;
	txn.n_then = then.n;
	err = cl_meta_etcd_err(cl_etcd_txn(c, &txn, &res, timeout_ms));
	if (err)
		goto out;
	*revision = res.revision;
	if (res.succeeded)
		err = 1;
	else
		err = res.n_op == 2 ? cl_meta_seen_take(now, &res.op[0].kvs, &res.op[1].kvs) : -EIO;
	cl_etcd_txn_result_fini(&res);
out:
	cl_meta_ops_fini(&then);
	cl_rec_object_fini(&was);
	free(cmp);
	free(fk);
	return err;
}

int
cl_meta_commit(struct cl_etcd *c, const struct cl_meta_put *p, struct cl_meta_old *old)
{
	char bk[KEY_CAP], ok[KEY_CAP], why[CL_REC_WHY_MAX] = "";
	struct cl_meta_seen base = { 0 }, now = { 0 };
	struct cl_meta_deadline d;
	uint8_t *value = NULL;
	uint64_t *ids = NULL;
	size_t value_len = 0;
	int bkl, okl, err;
	int64_t revision = 0;
	bool if_match = p && p->cond.if_match && p->cond.if_match[0], ix_old = true;

	if (old)
		memset(old, 0, sizeof(*old));
	if (!c || !p || !old)
		return -EINVAL;
	cl_meta_deadline_init(&d, p->timeout_ms, p->not_after_ns);
	bkl = cl_meta_bucket_key(p->bucket, bk, sizeof(bk));
	okl = cl_meta_object_key(p->bucket, p->key, ok, sizeof(ok));
	if (bkl < 0 || okl < 0)
		return bkl < 0 ? bkl : okl;
	err = cl_meta_encode(p, &value, &value_len, why, sizeof(why));
	if (err) {
		ZC_WARN("cmeta", "record of bucket=%s key=%s refused err=%d why=\"%s\"", p->bucket,
		        p->key, err, why);
		return err;
	}
	ids = put_ids(p);
	if (!ids) {
		err = -ENOMEM;
		goto out;
	}
	if (!cl_meta_ids_distinct(ids, p->nextents)) {
		ZC_WARN("cmeta", "record of bucket=%s key=%s names an extent twice", p->bucket,
		        p->key);
		err = -EINVAL;
		goto out;
	}
	/* If-Match must see the record it compares; the others guess "absent" (a new key,
	 * the common case: one Txn) and learn the truth from a failed fence. */
	if (if_match) {
		unsigned left = cl_meta_deadline_left(&d);

		err = left ? read_both(c, bk, (size_t)bkl, ok, (size_t)okl, &base, left)
		           : ZC_E(ZC_UNAVAILABLE);
		if (err)
			goto out;
		if (!base.bucket) {
			err = ZC_E(ZC_NO_BUCKET);
			goto out;
		}
		if (!base.object) {
			err = ZC_E(ZC_NO_KEY);
			goto out;
		}
		if (!cl_meta_etag_matches(&base, p->cond.if_match)) {
			err = ZC_E(ZC_PRECONDITION);
			goto out;
		}
	}
	for (;;) {
		unsigned left = cl_meta_deadline_left(&d);

		if (!left) {
			err = ZC_E(ZC_UNAVAILABLE);
			break;
		}
		err = fenced_put(c, bk, (size_t)bkl, ok, (size_t)okl, &base, p, ids, ix_old, value,
		                 value_len, &now, &revision, left);
		if (err == -EINVAL && ix_old && base.object) {
			/* etcd refused the Txn's size (--max-txn-ops, --max-request-bytes): the
			 * replaced record has many extents. Their index keys stay, naming this
			 * key, which no longer names them: the collector removes them. */
			ZC_WARN("cmeta",
			        "commit bucket=%s key=%s: etcd refused the Txn with the replaced "
			        "record's index keys, sent without them",
			        p->bucket, p->key);
			ix_old = false;
			continue;
		}
		if (err == 1) {
			err = cl_meta_old_from(old, &base, revision);
			break;
		}
		if (err)
			break;
		if (now.object && now.value_len == value_len &&
		    memcmp(now.value, value, value_len) == 0) {
			/* Our own Txn, applied by an attempt whose reply was lost: the record
			 * holds a fresh random extent id, so no other writer has this value. */
			err = cl_meta_old_from(old, &base, now.mod_revision);
			break;
		}
		if (!now.bucket) {
			err = ZC_E(ZC_NO_BUCKET);
			break;
		}
		if (now.object == base.object &&
		    (!now.object || now.mod_revision == base.mod_revision)) {
			/* Bucket and key as fenced: a collector gave up an extent of ours
			 * (past the deadline). Never to go in; its cells are the collector's. */
			ZC_WARN("cmeta", "commit bucket=%s key=%s: an extent was collected meanwhile",
			        p->bucket, p->key);
			err = ZC_E(ZC_UNAVAILABLE);
			break;
		}
		if (p->cond.if_none_match && now.object) {
			err = ZC_E(ZC_PRECONDITION);
			break;
		}
		if (if_match) {
			/* The record changed after we read it: a concurrent overwrite must not
			 * slip between the check and the put. */
			err = now.object ? ZC_E(ZC_PRECONDITION) : ZC_E(ZC_NO_KEY);
			break;
		}
		/* No condition (or If-None-Match on a key that went): fence on what is there
		 * now. Last writer wins. */
		cl_meta_seen_fini(&base);
		base = now;
		memset(&now, 0, sizeof(now));
	}
out:
	if (err < 0)
		ZC_DBG("cmeta", "commit bucket=%s key=%s err=%d", p->bucket, p->key, err);
	cl_meta_seen_fini(&base);
	cl_meta_seen_fini(&now);
	free(value);
	free(ids);
	return err;
}

/* ------------------------------------------------------------------ delete */

int
cl_meta_delete(struct cl_etcd *c, const char *bucket, const char *key, int64_t if_mod_revision,
               struct cl_meta_old *old, unsigned timeout_ms)
{
	char bk[KEY_CAP], ok[KEY_CAP];
	struct cl_meta_seen base = { 0 }, now = { 0 };
	struct cl_meta_deadline d;
	int bkl, okl, err;
	bool ix_old = true;

	if (old)
		memset(old, 0, sizeof(*old));
	if (!c || !old || if_mod_revision < 0)
		return -EINVAL;
	bkl = cl_meta_bucket_key(bucket, bk, sizeof(bk));
	okl = cl_meta_object_key(bucket, key, ok, sizeof(ok));
	if (bkl < 0 || okl < 0)
		return bkl < 0 ? bkl : okl;
	cl_meta_deadline_init(&d, timeout_ms, 0);
	/* Read first so that the Txn is fenced and the old record comes back exactly once
	 * even when the client repeats the Txn. */
	err = read_both(c, bk, (size_t)bkl, ok, (size_t)okl, &base, cl_meta_deadline_left(&d));
	for (; !err;) {
		struct cl_etcd_cmp cmp = { .key = ok,
			                   .key_len = (size_t)okl,
			                   .target = CL_ETCD_CMP_MOD,
			                   .op = CL_ETCD_EQUAL,
			                   .num = base.mod_revision };
		struct cl_etcd_op els[2] = {
			{ .type = CL_ETCD_OP_RANGE,
			  .r = { .key = bk, .key_len = (size_t)bkl, .keys_only = true } },
			{ .type = CL_ETCD_OP_RANGE, .r = { .key = ok, .key_len = (size_t)okl } },
		};
		struct cl_etcd_txn txn = { .cmp = &cmp, .n_cmp = 1, .els = els, .n_els = 2 };
		struct cl_etcd_txn_result res = { 0 };
		struct cl_meta_ops then = { 0 };
		struct cl_rec_object was = { 0 };
		char why[CL_REC_WHY_MAX];
		unsigned left;

		if (!base.bucket) {
			err = ZC_E(ZC_NO_BUCKET);
			break;
		}
		if (if_mod_revision && (!base.object || base.mod_revision != if_mod_revision)) {
			err = ZC_E(ZC_PRECONDITION);
			break;
		}
		if (!base.object) {
			old->revision = 0;
			break; /* nothing to delete: 0 */
		}
		/* The record's index keys go with it (an undecodable record's stay: see
		 * fenced_put). */
		if (cl_rec_object_decode(base.value, base.value_len, &was, why, sizeof(why)))
			memset(&was, 0, sizeof(was));
		err = cl_meta_ops_init(&then, 1 + was.nextents + 1);
		if (err) {
			cl_rec_object_fini(&was);
			break;
		}
		cl_meta_ops_add(&then, CL_ETCD_OP_DELETE, ok, (size_t)okl, NULL, 0);
		if (ix_old)
			cl_meta_ops_ix_del(&then, &was, NULL, 0);
		cl_meta_ops_moved_del(&then, &was); /* its op points into was */
		txn.then = then.v;
		txn.n_then = then.n;
		left = cl_meta_deadline_left(&d);
		err = left ? cl_meta_etcd_err(cl_etcd_txn(c, &txn, &res, left))
		           : ZC_E(ZC_UNAVAILABLE);
		cl_meta_ops_fini(&then);
		cl_rec_object_fini(&was);
		if (err == -EINVAL && ix_old) {
			ZC_WARN("cmeta",
			        "delete bucket=%s key=%s: etcd refused the Txn with the record's "
			        "index keys, sent without them",
			        bucket, key);
			ix_old = false;
			err = 0;
			continue;
		}
		if (err)
			break;
		if (res.succeeded) {
			err = cl_meta_old_from(old, &base, res.revision);
			cl_etcd_txn_result_fini(&res);
			err = err ? err : 1;
			break;
		}
		err = res.n_op == 2 ? cl_meta_seen_take(&now, &res.op[0].kvs, &res.op[1].kvs)
		                    : -EIO;
		cl_etcd_txn_result_fini(&res);
		if (err)
			break;
		if (!now.object) {
			/* Gone since the read: our own repeated Txn or another deleter. Either way
			 * base was the last record; a second collection of its cells is harmless.
			 */
			err = cl_meta_old_from(old, &base, res.revision);
			err = err ? err : 1;
			break;
		}
		cl_meta_seen_fini(&base);
		base = now;
		memset(&now, 0, sizeof(now));
	}
	cl_meta_seen_fini(&base);
	cl_meta_seen_fini(&now);
	return err;
}

int
cl_meta_get(struct cl_etcd *c, const char *bucket, const char *key, bool serializable,
            struct cl_rec_object *out, int64_t *mod_revision, unsigned timeout_ms)
{
	char bk[KEY_CAP], ok[KEY_CAP], why[CL_REC_WHY_MAX];
	struct cl_etcd_kvs kvs = { 0 };
	struct cl_meta_deadline d;
	int bkl, okl, err;
	unsigned left;

	memset(out, 0, sizeof(*out));
	bkl = cl_meta_bucket_key(bucket, bk, sizeof(bk));
	okl = cl_meta_object_key(bucket, key, ok, sizeof(ok));
	if (bkl < 0 || okl < 0)
		return bkl < 0 ? bkl : okl;
	cl_meta_deadline_init(&d, timeout_ms, 0);
	err = cl_etcd_get(c, ok, (size_t)okl, serializable, &kvs, timeout_ms);
	if (zc_err_is(err, ZC_NO_KEY)) {
		/* Which 404: a second read only on the miss path, within the same deadline. */
		left = cl_meta_deadline_left(&d);
		err = left ? cl_etcd_get(c, bk, (size_t)bkl, serializable, &kvs, left) : -ETIMEDOUT;
		cl_etcd_kvs_fini(&kvs);
		return zc_err_is(err, ZC_NO_KEY) ? ZC_E(ZC_NO_BUCKET)
		       : err                     ? cl_meta_etcd_err(err)
		                                 : ZC_E(ZC_NO_KEY);
	}
	if (err)
		return cl_meta_etcd_err(err);
	err = cl_rec_object_decode(kvs.kv[0].value, kvs.kv[0].value_len, out, why, sizeof(why));
	if (err)
		ZC_WARN("cmeta", "record bucket=%s key=%s does not decode why=\"%s\"", bucket, key,
		        why);
	else if (mod_revision)
		*mod_revision = kvs.kv[0].mod_revision;
	cl_etcd_kvs_fini(&kvs);
	return err;
}
