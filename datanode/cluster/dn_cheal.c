/*
 * The cluster healer (dn_cheal.h): its thread, the absence tracking, the pass and what it
 * does per record, the heal lock and the metrics. The to-do keys, the marking and the
 * store's check are dn_cheal_todo.c, the rebuild of one object dn_cheal_rebuild.c, the
 * calls to peers dn_cheal_peer.c.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dn_cheal_internal.h"
#include "cl_meta.h"
#include "cl_index.h"
#include "zc.h"
#include "zc_place.h"

#define PAGE          256              /* records per Range */
#define OBJECTS_END   "/zest/objects0" /* '/' + 1: the end of the objects' range */
#define VIEW_STALE_NS 5000000000ull    /* a view older than this judges no absence */

/* ---- absence ---- */

int
chl_view_find(const struct cl_members_view *v, const char *name)
{
	for (size_t i = 0; i < v->n; i++)
		if (strcmp(v->names[i], name) == 0)
			return (int)i;
	return -1;
}

/* The entry of name, added (live) when new; NULL without memory. Under h->loop.lock. */
static struct chl_absent *
absent_entry(struct dn_cheal *h, const char *name)
{
	struct chl_absent *a;

	for (size_t i = 0; i < h->nabsent; i++)
		if (strcmp(h->absent[i].name, name) == 0)
			return &h->absent[i];
	if (h->nabsent == h->absent_cap) {
		size_t cap = h->absent_cap ? 2 * h->absent_cap : 16;

		a = realloc(h->absent, cap * sizeof(*a));
		if (!a)
			return NULL;
		h->absent = a;
		h->absent_cap = cap;
	}
	a = &h->absent[h->nabsent];
	a->name = strdup(name);
	if (!a->name)
		return NULL;
	a->since_ns = 0;
	a->seen = false;
	h->nabsent++;
	return a;
}

static bool
view_fresh(const struct cl_members_view *v, uint64_t now)
{
	return v->revision > 0 && now - v->read_ns < VIEW_STALE_NS;
}

/* Live nodes start (or stay) live; a known node the view lacks is absent from now. */
static void
observe(struct dn_cheal *h, const struct cl_members_view *v, uint64_t now)
{
	if (!view_fresh(v, now))
		return;
	pthread_mutex_lock(&h->loop.lock);
	for (size_t i = 0; i < v->n; i++) {
		struct chl_absent *a = absent_entry(h, v->names[i]);

		if (a)
			a->since_ns = 0;
	}
	for (size_t i = 0; i < h->nabsent; i++)
		if (h->absent[i].since_ns == 0 && chl_view_find(v, h->absent[i].name) < 0)
			h->absent[i].since_ns = now;
	pthread_mutex_unlock(&h->loop.lock);
}

void
dn_cheal_observe(struct dn_cheal *h)
{
	const struct cl_members_view *v = cl_members_get(h->o.members);

	observe(h, v, zc_now_ns());
	cl_members_view_put(v);
}

/* A node a record names and the view lacks: absent from the first time we see it so. */
void
chl_note_absent(struct dn_cheal *h, const struct cl_members_view *v, const char *name, uint64_t now)
{
	struct chl_absent *a;

	if (chl_view_find(v, name) >= 0)
		return;
	pthread_mutex_lock(&h->loop.lock);
	a = absent_entry(h, name);
	if (a && a->since_ns == 0)
		a->since_ns = now;
	pthread_mutex_unlock(&h->loop.lock);
}

uint64_t
chl_absent_for(struct dn_cheal *h, const char *name, uint64_t now)
{
	uint64_t d = 0;

	pthread_mutex_lock(&h->loop.lock);
	for (size_t i = 0; i < h->nabsent; i++)
		if (strcmp(h->absent[i].name, name) == 0 && h->absent[i].since_ns)
			d = now - h->absent[i].since_ns;
	pthread_mutex_unlock(&h->loop.lock);
	return d;
}

static uint64_t
heal_after(const struct dn_cheal *h)
{
	return h->o.heal_after_ns ? h->o.heal_after_ns
	                          : (uint64_t)DN_CHEAL_DEFAULT_AFTER_S * 1000000000u;
}

bool
chl_cell_needs(struct dn_cheal *h, const struct cl_members_view *v, const struct cl_rec_extent *e,
               const struct cl_rec_group *gr, unsigned c, uint64_t now)
{
	const char *n = e->nodes[gr->cell[c]];

	if (gr->missing & (1u << c))
		return true;
	/* a node in a maintenance window may be away that long: nothing is rebuilt for it */
	return chl_view_find(v, n) < 0 && !cl_members_in_maintenance(v, n) &&
	       chl_absent_for(h, n, now) > heal_after(h);
}

/* ---- the lock ---- */

static void
lease_lost(void *arg, int64_t id, int err)
{
	struct dn_cheal *h = arg;

	ZC_WARN("cheal", "node=%s heal lock lease=%lld lost err=%d", h->node, (long long)id, err);
	atomic_store(&h->lease_lost, true);
}

int
chl_ensure_lease(struct dn_cheal *h)
{
	int64_t ttl = h->o.lock_ttl_s ? h->o.lock_ttl_s : 10, got;
	int rc;

	if (h->lease && !atomic_load(&h->lease_lost))
		return 0;
	cl_etcd_keepalive_stop(h->ka);
	h->ka = NULL;
	h->lease = 0;
	atomic_store(&h->lease_lost, false);
	rc = cl_etcd_lease_grant(h->o.etcd, ttl, &h->lease, &got, chl_timeout(h));
	if (rc)
		return rc;
	rc = cl_etcd_keepalive_start(h->o.etcd, h->lease, got, lease_lost, h, &h->ka);
	if (rc) {
		cl_etcd_lease_revoke(h->o.etcd, h->lease, chl_timeout(h));
		h->lease = 0;
	}
	return rc;
}

static int
lock_key(const struct chl_obj *o, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, DN_CHEAL_LOCKS "%s/%s", o->bucket, o->key);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

/* Take the object's lock: 0 and *rev (the lock key's mod_revision), -EBUSY (another healer
 * has it), or an etcd error. */
static int
lock_take(struct dn_cheal *h, const struct chl_obj *o, int64_t *rev)
{
	char key[4096];
	int n = lock_key(o, key, sizeof(key)), rc;

	if (n < 0)
		return n;
	rc = chl_ensure_lease(h);
	if (rc)
		return rc;
	{
		size_t nl = strlen(h->node);
		struct cl_etcd_cmp cmp = { .key = key,
			                   .key_len = (size_t)n,
			                   .target = CL_ETCD_CMP_VERSION,
			                   .op = CL_ETCD_EQUAL,
			                   .num = 0 };
		struct cl_etcd_op put = { .type = CL_ETCD_OP_PUT,
			                  .r = { .key = key, .key_len = (size_t)n },
			                  .value = h->node,
			                  .value_len = nl,
			                  .lease = h->lease };
		struct cl_etcd_op get = { .type = CL_ETCD_OP_RANGE,
			                  .r = { .key = key, .key_len = (size_t)n } };
		struct cl_etcd_txn txn = { &cmp, 1, &put, 1, &get, 1 };
		struct cl_etcd_txn_result res = { 0 };

		rc = cl_etcd_txn(h->o.etcd, &txn, &res, chl_timeout(h));
		if (rc == 0 && res.succeeded) {
			*rev = res.revision;
		} else if (rc == 0) {
			const struct cl_etcd_kvs *k = res.n_op ? &res.op[0].kvs : NULL;

			/* ours already: the client repeated a Txn etcd had applied */
			if (k && k->n && k->kv[0].lease == h->lease && k->kv[0].value_len == nl &&
			    memcmp(k->kv[0].value, h->node, nl) == 0)
				*rev = k->kv[0].mod_revision;
			else
				rc = -EBUSY;
		}
		cl_etcd_txn_result_fini(&res);
	}
	return rc;
}

static void
lock_drop(struct dn_cheal *h, const struct chl_obj *o, int64_t rev)
{
	char key[4096];
	int n = lock_key(o, key, sizeof(key));
	struct cl_etcd_cmp cmp = { .key = key,
		                   .key_len = (size_t)n,
		                   .target = CL_ETCD_CMP_MOD,
		                   .op = CL_ETCD_EQUAL,
		                   .num = rev };
	struct cl_etcd_op del = { .type = CL_ETCD_OP_DELETE,
		                  .r = { .key = key, .key_len = (size_t)n } };
	struct cl_etcd_txn txn = { &cmp, 1, &del, 1, NULL, 0 };

	if (n < 0)
		return;
	/* a failure leaves the key to its lease */
	(void)cl_etcd_txn(h->o.etcd, &txn, NULL, chl_timeout(h));
}

/* ---- the pass ---- */

bool
chl_stopping(struct dn_cheal *h)
{
	return zc_loop_stopping(&h->loop);
}

bool
chl_is_etcd_err(int err)
{
	return zc_err_is(err, ZC_NO_QUORUM) || zc_err_is(err, ZC_UNAVAILABLE) ||
	       zc_err_is(err, ZC_SLOW_DOWN) || err == -EIO;
}

bool
chl_responsible(struct dn_cheal *h, const struct cl_members_view *v, const char *bucket,
                const char *key)
{
	uint64_t hk = zc_place_hash(ZC_PLACE_SEED, bucket, strlen(bucket) + 1);

	hk = zc_place_hash(hk, key, strlen(key));
	return v->n && strcmp(v->names[zc_place_first(hk, v->names, (unsigned)v->n)], h->node) == 0;
}

/* What o needs now. */
struct needs {
	unsigned cells;   /* to rebuild: marked missing, or on a node absent past heal_after */
	unsigned moves;   /* the extras of doubled groups and the cells on draining nodes */
	uint64_t bytes;   /* of the cells and moves */
	unsigned doubled; /* groups with two cells on one node */
	bool movable;     /* some extra is on a live node and has a live node to go to */
	bool degraded;    /* a cell missing or on an absent node, or a group doubled */
};

static void
count_needs(struct dn_cheal *h, const struct cl_members_view *v, const struct chl_obj *o,
            uint64_t now, struct needs *n)
{
	memset(n, 0, sizeof(*n));
	for (size_t x = 0; x < o->rec.nextents; x++) {
		const struct cl_rec_extent *e = &o->rec.extents[x];

		for (size_t g = 0; g < e->ngroups; g++) {
			const struct cl_rec_group *gr = &e->groups[g];
			uint32_t need = 0, extra;

			for (unsigned c = 0; c < e->k + e->m; c++) {
				const char *nn = e->nodes[gr->cell[c]];

				chl_note_absent(h, v, nn, now);
				if ((gr->missing & (1u << c)) || chl_view_find(v, nn) < 0)
					n->degraded = true;
				if (chl_cell_needs(h, v, e, gr, c, now)) {
					need |= 1u << c;
					n->cells++;
					n->bytes += chl_cell_bytes(e, g);
				}
			}
			extra = chl_drain_cells(v, e, gr, need);
			for (unsigned c = 0; c < e->k + e->m; c++)
				if (extra & (1u << c)) {
					n->moves++;
					n->bytes += chl_cell_bytes(e, g);
					n->movable |= chl_free_node(v, e, gr);
				}
			need |= extra;
			if (!cl_meta_heal_group_doubled(e, gr))
				continue;
			n->doubled++;
			n->degraded = true;
			extra = chl_group_extra(e, gr, need);
			for (unsigned c = 0; c < e->k + e->m; c++)
				if (extra & (1u << c)) {
					n->moves++;
					n->bytes += chl_cell_bytes(e, g);
					n->movable |=
					        chl_view_find(v, e->nodes[gr->cell[c]]) >= 0 &&
					        chl_free_node(v, e, gr);
				}
		}
	}
}

void
chl_obj_clear(struct chl_obj *o)
{
	cl_rec_object_fini(&o->rec);
	o->bucket = o->key = NULL;
}

int
chl_obj_parse(struct chl_obj *o, const char *prefix, const char *k, size_t klen)
{
	size_t pl = strlen(prefix);
	const char *b, *slash;

	if (klen <= pl || klen - pl >= sizeof(o->okey) - 1 || memcmp(k, prefix, pl) != 0)
		return -EINVAL;
	b = k + pl;
	slash = memchr(b, '/', klen - pl);
	if (!slash || slash == b || slash + 1 == k + klen)
		return -EINVAL;
	memcpy(o->okey, b, klen - pl);
	o->okey[slash - b] = '\0';
	o->okey[klen - pl] = '\0';
	o->bucket = o->okey;
	o->key = o->okey + (slash - b) + 1;
	return 0;
}

/* Read o again (linearizable, under the lock) and heal it: the cells healed (*moved of
 * them moved) or an error. */
static int
heal_locked(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o, unsigned *moved)
{
	struct cl_rec_object fresh = { 0 };
	int64_t rev = 0;
	int rc = cl_meta_get(h->o.etcd, o->bucket, o->key, false, &fresh, &rev, chl_timeout(h));

	if (zc_err_is(rc, ZC_NO_KEY) || zc_err_is(rc, ZC_NO_BUCKET))
		return 0; /* deleted meanwhile */
	if (rc)
		return rc;
	atomic_fetch_add(&h->records_read, 1);
	cl_rec_object_fini(&o->rec);
	o->rec = fresh;
	o->mod_revision = rev;
	return chl_heal_object(h, v, o, moved);
}

static int
heal_one(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o,
         struct dn_cheal_stats *st)
{
	int64_t lrev = 0;
	unsigned moved = 0;
	int rc = lock_take(h, o, &lrev);

	if (rc == -EBUSY)
		return 0; /* another healer works on it (a view that differs from ours) */
	if (rc)
		return rc;
	rc = heal_locked(h, v, o, &moved);
	lock_drop(h, o, lrev);
	if (rc > 0) {
		atomic_fetch_add(&h->healed, (unsigned)rc);
		atomic_fetch_add(&h->moved, moved);
		st->healed += (unsigned)rc;
		st->moved += moved;
	} else if (rc < 0) {
		atomic_fetch_add(&h->failed, 1);
		st->failed++;
	}
	return rc;
}

int
chl_process(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o, uint64_t now,
            bool own, struct dn_cheal_stats *st, struct chl_acc *acc)
{
	struct needs nd;
	unsigned need, doubled;
	int rc = own ? chl_own_check(h, o, st) : 0;

	if (zc_err_is(rc, ZC_CHANGED)) {
		acc->fenced = true; /* the record changed: this pass leaves it */
		return 0;
	}
	if (rc)
		return chl_is_etcd_err(rc) ? rc : 0;
	if (chl_view_find(v, h->node) < 0 || !chl_responsible(h, v, o->bucket, o->key))
		return 0;
	count_needs(h, v, o, now, &nd);
	need = nd.cells + nd.moves;
	doubled = nd.doubled;
	/* a doubled group with no live node free of it (fewer than k + m live) stays as it
	 * is, pending: no lock taken for it */
	if (nd.cells || nd.movable) {
		rc = heal_one(h, v, o, st);
		if (rc > 0) {
			need = need > (unsigned)rc ? need - (unsigned)rc : 0;
			doubled = chl_doubled_groups(&o->rec); /* the record as put */
		}
		if (rc < 0)
			acc->failed++;
		if (rc < 0 && rc != -EAGAIN && chl_is_etcd_err(rc)) {
			acc->pending += need;
			acc->doubled += doubled;
			acc->degraded += nd.degraded;
			return rc;
		}
	}
	acc->pending += need;
	acc->pending_bytes += need ? nd.bytes : 0; /* as read, like the degraded count */
	acc->doubled += doubled;
	acc->degraded += nd.degraded; /* as read: counted until a pass finds it whole */
	/* Marked cells or doubled groups left for later, found by reading every record (a
	 * record from before the to-do keys, or one whose key went astray): its key makes
	 * sure the later passes find it without reading every record. */
	if (own && need)
		return chl_todo_ensure(h, o);
	return 0;
}

int
chl_pages(struct dn_cheal *h, const char *prefix, const char *end, chl_kv_fn fn, void *arg,
          uint64_t *n_read)
{
	char start[4096];
	size_t start_len = strlen(prefix);
	bool more = true;
	int err = 0;

	memcpy(start, prefix, start_len + 1);
	while (more && !err && !chl_stopping(h)) {
		struct cl_etcd_range r = { .key = start,
			                   .key_len = start_len,
			                   .end = end,
			                   .end_len = strlen(end),
			                   .limit = PAGE,
			                   .serializable = true };
		struct cl_etcd_kvs kvs = { 0 };

		err = cl_etcd_range(h->o.etcd, &r, &kvs, chl_timeout(h));
		if (err)
			break;
		more = kvs.more && kvs.n;
		if (n_read)
			*n_read += kvs.n;
		for (size_t i = 0; i < kvs.n && !err && !chl_stopping(h); i++)
			err = fn(h, &kvs.kv[i], arg);
		if (kvs.n && kvs.kv[kvs.n - 1].key_len + 1 < sizeof(start)) {
			/* the next page starts right after the last key */
			start_len = kvs.kv[kvs.n - 1].key_len;
			memcpy(start, kvs.kv[kvs.n - 1].key, start_len);
			start[start_len++] = '\0';
		} else {
			more = false;
		}
		cl_etcd_kvs_fini(&kvs);
	}
	return err;
}

struct scan_arg {
	const struct cl_members_view *v;
	uint64_t now;
	struct dn_cheal_stats *st;
	struct chl_acc *acc;
};

static int
scan_one(struct dn_cheal *h, struct cl_etcd_kv *kv, void *arg)
{
	struct scan_arg *a = arg;
	struct chl_obj o = { 0 };
	char why[CL_REC_WHY_MAX];
	int err;

	atomic_fetch_add(&h->records_read, 1);
	if (chl_obj_parse(&o, CL_META_OBJECTS, kv->key, kv->key_len) ||
	    cl_rec_object_decode(kv->value, kv->value_len, &o.rec, why, sizeof(why))) {
		ZC_WARN("cheal", "record key=%s left as is: does not decode", kv->key);
		return 0;
	}
	o.mod_revision = kv->mod_revision;
	chl_own_count(h, &o, a->acc);
	err = chl_process(h, a->v, &o, a->now, true, a->st, a->acc);
	chl_obj_clear(&o);
	return err;
}

/* Every record, in pages (chl_pages). */
static int
scan_pass(struct dn_cheal *h, const struct cl_members_view *v, uint64_t now,
          struct dn_cheal_stats *st, struct chl_acc *acc)
{
	struct scan_arg a = { v, now, st, acc };

	atomic_fetch_add(&h->scans, 1);
	st->scans++;
	return chl_pages(h, CL_META_OBJECTS, OBJECTS_END, scan_one, &a, &st->records);
}

/* The nodes absent from the view for longer than heal_after, as one number (each absence
 * by name and since when, so a node that comes back and leaves again counts anew): a pass
 * over every record that left nothing to heal need not run again while it stays. */
static uint64_t
expired_fp(struct dn_cheal *h, const struct cl_members_view *v, uint64_t now, unsigned *n)
{
	uint64_t fp = 0;

	*n = 0;
	pthread_mutex_lock(&h->loop.lock);
	for (size_t i = 0; i < h->nabsent; i++) {
		const struct chl_absent *a = &h->absent[i];

		if (!a->since_ns || now - a->since_ns <= heal_after(h) ||
		    chl_view_find(v, a->name) >= 0 || cl_members_in_maintenance(v, a->name))
			continue;
		fp += zc_place_hash(a->since_ns, a->name, strlen(a->name)); /* order-free */
		(*n)++;
	}
	pthread_mutex_unlock(&h->loop.lock);
	return fp;
}

int
dn_cheal_pass(struct dn_cheal *h, struct dn_cheal_stats *st)
{
	struct dn_cheal_stats local = { 0 };
	struct chl_acc todo = { 0 }, scan = { 0 };
	const struct cl_members_view *v = cl_members_get(h->o.members);
	uint64_t now = zc_now_ns(), fp = 0;
	unsigned nexpired = 0;
	bool self_live, want_scan = false;
	int err;

	if (!st)
		st = &local;
	if (h->retired) {
		cl_members_view_put(v);
		return 0; /* decommissioned: this node is no member any more */
	}
	h->pass_wall_ms = chl_wall_ms();
	if (!view_fresh(v, now)) {
		cl_members_view_put(v);
		return ZC_E(ZC_UNAVAILABLE); /* the view no longer moves: etcd is away */
	}
	observe(h, v, now);
	self_live = chl_view_find(v, h->node) >= 0;
	/* O(nodes): the members the view lacks, and whether this store is checked; then the
	 * cells the scrubber found lost, so their to-do keys are read below */
	err = chl_members_note(h, v, now);
	if (!err)
		err = chl_check_read(h);
	if (!err)
		err = chl_lost_pass(h, st);
	if (!err && self_live)
		err = chl_todo_pass(h, v, now, st, &todo);
	if (!err) {
		fp = expired_fp(h, v, now, &nexpired);
		want_scan = h->must_check || (self_live && nexpired &&
		                              (!h->scanned || h->scan_fp != fp || !h->scan_clean));
		/* a drain's cells are named by no to-do key: every healer reads every record
		 * while some node drains, to move the cells of the objects it heals */
		want_scan |= self_live && cl_members_ndraining(v) > 0;
	}
	if (!err && want_scan && !chl_stopping(h))
		err = scan_pass(h, v, now, st, &scan);
	if (!err && !chl_stopping(h)) {
		const struct chl_acc *acc = want_scan ? &scan : &todo;

		if (want_scan && self_live) {
			h->scanned = true;
			h->scan_fp = fp;
			h->scan_clean = !scan.pending && !scan.failed && !scan.fenced;
		}
		if (want_scan && h->must_check && !scan.fenced)
			err = chl_check_done(h);
		atomic_store(&h->pending, acc->pending);
		atomic_store(&h->degraded, acc->degraded);
		atomic_store(&h->doubled, acc->doubled);
		st->pending += acc->pending;
		st->degraded += acc->degraded;
		st->doubled += acc->doubled;
		atomic_fetch_add(&h->passes, 1);
		if (!err)
			err = chl_stat_pass(h, v, acc, want_scan, want_scan && !scan.fenced);
	}
	cl_members_view_put(v);
	return err;
}

/* ---- the thread ---- */

static bool
wait_ns(struct dn_cheal *h, uint64_t ns)
{
	return zc_loop_wait(&h->loop, ns);
}

static void *
run(void *arg)
{
	struct dn_cheal *h = arg;
	uint64_t period = h->o.period_ns, next;

	if (!period) {
		period = heal_after(h) / 4;
		if (period > 60000000000ull)
			period = 60000000000ull;
		if (period < 1000000000ull)
			period = 1000000000ull;
	}
	next = zc_now_ns() + period;
	/* the view every second, so an absence is dated to the second, not to the pass */
	while (wait_ns(h, period < 1000000000ull ? period : 1000000000ull)) {
		int err;

		dn_cheal_observe(h);
		if (zc_now_ns() < next)
			continue;
		err = dn_cheal_pass(h, NULL);
		if (err)
			ZC_WARN("cheal", "pass stopped err=%d (%s)", err,
			        zc_code_word(zc_err_code(err)));
		next = zc_now_ns() + period;
	}
	return NULL;
}

static void
lost_hook(void *arg, struct dn_cell_id id)
{
	dn_cheal_cell_lost(arg, id);
}

int
dn_cheal_create(const struct dn_cheal_opts *o, struct dn_cheal **out)
{
	struct dn_cheal *h;

	if (!o || !o->store || !o->etcd || !o->members || !o->node || !o->node[0] || !out)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	h->o = *o;
	h->node = strdup(o->node);
	if (!h->node) {
		free(h);
		return -ENOMEM;
	}
	h->o.node = h->node;
	chl_store_init(h);
	zc_loop_init(&h->loop);
	dn_cell_lost_hook(o->store, lost_hook, h);
	h->hooked = true;
	if (!o->no_thread && zc_loop_start(&h->loop, "dn-cheal", run, h)) {
		dn_cheal_destroy(h);
		return -EAGAIN;
	}
	*out = h;
	return 0;
}

void
dn_cheal_stop(struct dn_cheal *h)
{
	if (!h)
		return;
	/* the store may be closed after this (the daemon's order): no call into it, and no
	 * call from it into h, once this returns */
	if (h->hooked) {
		dn_cell_lost_hook(h->o.store, NULL, NULL);
		h->hooked = false;
	}
	zc_loop_stop(&h->loop);
}

void
dn_cheal_destroy(struct dn_cheal *h)
{
	if (!h)
		return;
	dn_cheal_stop(h);
	cl_etcd_keepalive_stop(h->ka);
	if (h->lease)
		(void)cl_etcd_lease_revoke(h->o.etcd, h->lease, 2000);
	chl_peers_free(h);
	for (size_t i = 0; i < h->nabsent; i++)
		free(h->absent[i].name);
	free(h->absent);
	chl_lost_free(h);
	zc_loop_fini(&h->loop);
	free(h->node);
	free(h);
}

void
dn_cheal_metrics(struct dn_cheal *h, FILE *out)
{
	fprintf(out,
	        "# HELP zest_heal_pending_cells Cells this node heals that need healing, at the "
	        "last pass.\n"
	        "# TYPE zest_heal_pending_cells gauge\n"
	        "zest_heal_pending_cells %llu\n"
	        "# HELP zest_heal_cells_total Cells this node rebuilt or moved and put in their "
	        "record.\n"
	        "# TYPE zest_heal_cells_total counter\n"
	        "zest_heal_cells_total %llu\n"
	        "# HELP zest_heal_moved_cells_total Cells this node moved out of a group with two "
	        "cells on one node.\n"
	        "# TYPE zest_heal_moved_cells_total counter\n"
	        "zest_heal_moved_cells_total %llu\n"
	        "# HELP zest_cluster_degraded_objects Objects this node heals with a cell missing, "
	        "on an absent node or doubled, at the last pass.\n"
	        "# TYPE zest_cluster_degraded_objects gauge\n"
	        "zest_cluster_degraded_objects %llu\n"
	        "# HELP zest_cluster_doubled_groups Block groups with two cells on one node among "
	        "the objects this node heals, at the last pass.\n"
	        "# TYPE zest_cluster_doubled_groups gauge\n"
	        "zest_cluster_doubled_groups %llu\n"
	        "# HELP zest_heal_marked_cells_total Cells records named on this node that its "
	        "store lacked, marked missing.\n"
	        "# TYPE zest_heal_marked_cells_total counter\n"
	        "zest_heal_marked_cells_total %llu\n"
	        "# HELP zest_heal_failed_total Heals of an object that failed or were fenced off.\n"
	        "# TYPE zest_heal_failed_total counter\n"
	        "zest_heal_failed_total %llu\n"
	        "# HELP zest_heal_records_read_total Object records the healer read from etcd.\n"
	        "# TYPE zest_heal_records_read_total counter\n"
	        "zest_heal_records_read_total %llu\n"
	        "# HELP zest_heal_scans_total Healer passes that read every object record.\n"
	        "# TYPE zest_heal_scans_total counter\n"
	        "zest_heal_scans_total %llu\n"
	        "# HELP zest_heal_passes_total Healer passes completed (each puts its progress "
	        "in /zest/healstat/).\n"
	        "# TYPE zest_heal_passes_total counter\n"
	        "zest_heal_passes_total %llu\n"
	        "# HELP zest_heal_pending_bytes Bytes of the cells counted in "
	        "zest_heal_pending_cells (about: 1/k of their group each).\n"
	        "# TYPE zest_heal_pending_bytes gauge\n"
	        "zest_heal_pending_bytes %llu\n"
	        "# HELP zest_heal_bytes_total Bytes of the cells counted in "
	        "zest_heal_cells_total.\n"
	        "# TYPE zest_heal_bytes_total counter\n"
	        "zest_heal_bytes_total %llu\n"
	        "# HELP zest_heal_own_cells Cells records name on this node, at its last pass "
	        "over every record (what a drain has left).\n"
	        "# TYPE zest_heal_own_cells gauge\n"
	        "zest_heal_own_cells %llu\n",
	        (unsigned long long)atomic_load(&h->pending),
	        (unsigned long long)atomic_load(&h->healed),
	        (unsigned long long)atomic_load(&h->moved),
	        (unsigned long long)atomic_load(&h->degraded),
	        (unsigned long long)atomic_load(&h->doubled),
	        (unsigned long long)atomic_load(&h->marked),
	        (unsigned long long)atomic_load(&h->failed),
	        (unsigned long long)atomic_load(&h->records_read),
	        (unsigned long long)atomic_load(&h->scans),
	        (unsigned long long)atomic_load(&h->passes),
	        (unsigned long long)atomic_load(&h->pending_bytes),
	        (unsigned long long)atomic_load(&h->healed_bytes),
	        (unsigned long long)atomic_load(&h->own_cells));
}
