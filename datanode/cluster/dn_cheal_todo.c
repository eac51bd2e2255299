/*
 * What lets a healer's pass skip reading every record (dn_cheal.h): the marking of lost
 * cells with their record's to-do key, the pass over the to-do keys, the members the view
 * lacks, and this store's check against the records (its own lost cells marked, and
 * /zest/cellcheck/ once that is complete).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dn_cheal_internal.h"
#include "dn.h" /* the store's drives and dn_store_lost_at_open (dn_store.h) */
#include "cl_meta.h"
#include "cl_index.h"
#include "zc.h"

#define HEAL_END    "/zest/heal0" /* '/' + 1: the end of the to-do keys' range */
#define MEMBERS     "/zest/members/"
#define MEMBERS_END "/zest/members0"

/* ---- marking ---- */

/* The slot of cell id in rec: its extent and group, or NULL. */
static struct cl_rec_group *
find_cell(struct cl_rec_object *rec, struct dn_cell_id id, struct cl_rec_extent **ep)
{
	for (size_t x = 0; x < rec->nextents; x++) {
		struct cl_rec_extent *e = &rec->extents[x];

		if (e->id != id.extent)
			continue;
		if (id.group >= e->ngroups || id.cell >= e->k + e->m)
			return NULL;
		*ep = e;
		return &e->groups[id.group];
	}
	return NULL;
}

int
dn_cheal_mark_missing(struct cl_etcd *etcd, const char *record_key, struct cl_rec_object *rec,
                      int64_t *mod_revision, const char *node, const struct dn_cell_id *cells,
                      size_t n, unsigned timeout_ms)
{
	char hk[4096], hv[CL_META_HEAL_VALUE_CAP], why[CL_REC_WHY_MAX];
	size_t rl, hvl;
	uint8_t *buf;
	size_t len;
	int hkl, marked = 0, rc;

	if (!etcd || !record_key || !rec || !mod_revision || (n && !cells))
		return -EINVAL;
	rl = strlen(record_key);
	hkl = cl_meta_heal_key(record_key, rl, hk, sizeof(hk));
	if (hkl < 0)
		return hkl;
	for (size_t i = 0; i < n; i++) {
		struct cl_rec_extent *e = NULL;
		struct cl_rec_group *gr = find_cell(rec, cells[i], &e);
		uint32_t bit = 1u << cells[i].cell;

		if (!gr || (gr->missing & bit) ||
		    (node && strcmp(e->nodes[gr->cell[cells[i].cell]], node) != 0))
			continue;
		gr->missing |= bit;
		marked++;
	}
	if (!marked)
		return 0;
	rc = cl_rec_object_encode(rec, &buf, &len, why, sizeof(why));
	if (rc) {
		ZC_ERR("cheal", "cannot encode the record key=%s: %s", record_key, why);
		return rc;
	}
	hvl = cl_meta_heal_value(rec, hv);
	{
		struct cl_etcd_cmp cmp = { .key = record_key,
			                   .key_len = rl,
			                   .target = CL_ETCD_CMP_MOD,
			                   .op = CL_ETCD_EQUAL,
			                   .num = *mod_revision };
		struct cl_etcd_op ops[2] = {
			{ .type = CL_ETCD_OP_PUT,
			  .r = { .key = record_key, .key_len = rl },
			  .value = buf,
			  .value_len = len },
			{ .type = CL_ETCD_OP_PUT,
			  .r = { .key = hk, .key_len = (size_t)hkl },
			  .value = hv,
			  .value_len = hvl },
		};
		struct cl_etcd_txn txn = { &cmp, 1, ops, 2, NULL, 0 };
		struct cl_etcd_txn_result res = { 0 };

		rc = cl_etcd_txn(etcd, &txn, &res, timeout_ms);
		if (rc == 0 && res.succeeded) {
			*mod_revision = res.revision;
			rc = marked;
		} else if (rc == 0) {
			rc = ZC_E(ZC_CHANGED);
		}
		cl_etcd_txn_result_fini(&res);
	}
	free(buf);
	return rc;
}

/* ---- the to-do keys ---- */

int
chl_todo_ensure(struct dn_cheal *h, const struct chl_obj *o)
{
	char rk[4096], hk[4096], hv[CL_META_HEAL_VALUE_CAP];
	size_t hvl = cl_meta_heal_value(&o->rec, hv);
	int rkl = cl_meta_object_key(o->bucket, o->key, rk, sizeof(rk)), hkl, rc;

	if (!hvl || rkl < 0)
		return 0;
	hkl = cl_meta_heal_key(rk, (size_t)rkl, hk, sizeof(hk));
	if (hkl < 0)
		return 0;
	{
		struct cl_etcd_cmp cmp = { .key = rk,
			                   .key_len = (size_t)rkl,
			                   .target = CL_ETCD_CMP_MOD,
			                   .op = CL_ETCD_EQUAL,
			                   .num = o->mod_revision };
		struct cl_etcd_op put = { .type = CL_ETCD_OP_PUT,
			                  .r = { .key = hk, .key_len = (size_t)hkl },
			                  .value = hv,
			                  .value_len = hvl };
		struct cl_etcd_txn txn = { &cmp, 1, &put, 1, NULL, 0 };

		/* a failed compare: the record changed, and whoever changed it wrote its key */
		rc = cl_etcd_txn(h->o.etcd, &txn, NULL, chl_timeout(h));
	}
	return rc;
}

/* Delete the to-do key tk (read at trev) if its record is still at rrev (0: absent): 1, 0
 * when either changed, or an etcd error. */
static int
todo_drop(struct dn_cheal *h, const char *rk, size_t rkl, int64_t rrev, const char *tk, size_t tkl,
          int64_t trev)
{
	struct cl_etcd_cmp cmp[2] = {
		{ .key = rk,
		  .key_len = rkl,
		  .target = CL_ETCD_CMP_MOD,
		  .op = CL_ETCD_EQUAL,
		  .num = rrev },
		{ .key = tk,
		  .key_len = tkl,
		  .target = CL_ETCD_CMP_MOD,
		  .op = CL_ETCD_EQUAL,
		  .num = trev },
	};
	struct cl_etcd_op del = { .type = CL_ETCD_OP_DELETE, .r = { .key = tk, .key_len = tkl } };
	struct cl_etcd_txn txn = { cmp, 2, &del, 1, NULL, 0 };
	struct cl_etcd_txn_result res = { 0 };
	int rc = cl_etcd_txn(h->o.etcd, &txn, &res, chl_timeout(h));

	if (rc == 0)
		rc = res.succeeded ? 1 : 0;
	cl_etcd_txn_result_fini(&res);
	return rc;
}

/*
 * The record of a to-do key is gone: a compose may have moved its extents into another
 * record (a multipart part's), which the extent index names. That record, if it still
 * has a cell marked missing, gets the to-do key instead (one Txn, fenced on both
 * records); else the key goes.
 */
static int
todo_follow(struct dn_cheal *h, const char *rk, size_t rkl, const struct cl_etcd_kv *tkv,
            struct dn_cheal_stats *st)
{
	uint64_t ids[CL_META_HEAL_IDS_MAX];
	size_t nid = cl_meta_heal_ids(tkv->value, tkv->value_len, ids, CL_META_HEAL_IDS_MAX);

	for (size_t i = 0; i < nid; i++) {
		struct cl_rec_object rec = { 0 };
		char *owner = NULL, hk[4096], hv[CL_META_HEAL_VALUE_CAP];
		int64_t orev = 0;
		int rc = cl_meta_extent_record(h->o.etcd, ids[i], true, &rec, &owner, &orev,
		                               chl_timeout(h));
		size_t hvl;
		int hkl;

		if (zc_err_is(rc, ZC_NO_KEY) || rc == -EBADMSG) {
			free(owner);
			continue;
		}
		if (rc) {
			free(owner);
			return rc;
		}
		atomic_fetch_add(&h->records_read, 1);
		st->records++;
		hvl = cl_meta_heal_value(&rec, hv);
		hkl = owner ? cl_meta_heal_key(owner, strlen(owner), hk, sizeof(hk)) : -EINVAL;
		cl_rec_object_fini(&rec);
		if (hvl && hkl > 0 && strcmp(owner, rk) != 0) {
			struct cl_etcd_cmp cmp[3] = {
				{ .key = rk,
				  .key_len = rkl,
				  .target = CL_ETCD_CMP_MOD,
				  .op = CL_ETCD_EQUAL },
				{ .key = owner,
				  .key_len = strlen(owner),
				  .target = CL_ETCD_CMP_MOD,
				  .op = CL_ETCD_EQUAL,
				  .num = orev },
				{ .key = tkv->key,
				  .key_len = tkv->key_len,
				  .target = CL_ETCD_CMP_MOD,
				  .op = CL_ETCD_EQUAL,
				  .num = tkv->mod_revision },
			};
			struct cl_etcd_op ops[2] = {
				{ .type = CL_ETCD_OP_PUT,
				  .r = { .key = hk, .key_len = (size_t)hkl },
				  .value = hv,
				  .value_len = hvl },
				{ .type = CL_ETCD_OP_DELETE,
				  .r = { .key = tkv->key, .key_len = tkv->key_len } },
			};
			struct cl_etcd_txn txn = { cmp, 3, ops, 2, NULL, 0 };

			rc = cl_etcd_txn(h->o.etcd, &txn, NULL, chl_timeout(h));
			if (rc == 0)
				ZC_INFO("cheal", "to-do key=%s follows its extents to key=%s",
				        tkv->key, owner);
			free(owner);
			return rc;
		}
		free(owner);
	}
	{
		int rc = todo_drop(h, rk, rkl, 0, tkv->key, tkv->key_len, tkv->mod_revision);

		return rc < 0 ? rc : 0;
	}
}

static int
todo_one(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o,
         const struct cl_etcd_kv *tkv, uint64_t now, struct dn_cheal_stats *st, struct chl_acc *acc)
{
	char rk[4096], hv[CL_META_HEAL_VALUE_CAP];
	int rkl = cl_meta_object_key(o->bucket, o->key, rk, sizeof(rk)), rc;
	uint64_t healed = st->healed;

	if (rkl < 0)
		return 0;
	rc = cl_meta_get(h->o.etcd, o->bucket, o->key, true, &o->rec, &o->mod_revision,
	                 chl_timeout(h));
	if (zc_err_is(rc, ZC_NO_KEY) || zc_err_is(rc, ZC_NO_BUCKET))
		return todo_follow(h, rk, (size_t)rkl, tkv, st);
	if (rc == -EBADMSG) {
		ZC_WARN("cheal", "record key=%s left as is: does not decode", rk);
		return 0;
	}
	if (rc)
		return rc;
	atomic_fetch_add(&h->records_read, 1);
	st->records++;
	rc = chl_process(h, v, o, now, false, st, acc);
	if (rc)
		return rc;
	/* Nothing marked any more (an overwrite, a heal elsewhere): the key goes. A heal of
	 * the last marked cell deleted it in its own Txn already. */
	if (cl_meta_heal_value(&o->rec, hv) == 0 && st->healed == healed) {
		rc = todo_drop(h, rk, (size_t)rkl, o->mod_revision, tkv->key, tkv->key_len,
		               tkv->mod_revision);
		return rc < 0 ? rc : 0;
	}
	return 0;
}

struct todo_arg {
	const struct cl_members_view *v;
	uint64_t now;
	struct dn_cheal_stats *st;
	struct chl_acc *acc;
};

static int
todo_kv(struct dn_cheal *h, struct cl_etcd_kv *kv, void *arg)
{
	struct todo_arg *a = arg;
	struct chl_obj o = { 0 };
	int err = 0;

	if (chl_obj_parse(&o, CL_META_HEAL, kv->key, kv->key_len))
		return 0;
	/* the object's healer only: the others read no record for it */
	if (chl_responsible(h, a->v, o.bucket, o.key))
		err = todo_one(h, a->v, &o, kv, a->now, a->st, a->acc);
	chl_obj_clear(&o);
	return err;
}

int
chl_todo_pass(struct dn_cheal *h, const struct cl_members_view *v, uint64_t now,
              struct dn_cheal_stats *st, struct chl_acc *acc)
{
	struct todo_arg a = { v, now, st, acc };

	return chl_pages(h, CL_META_HEAL, HEAL_END, todo_kv, &a, &st->todos);
}

/* ---- cells the scrubber found lost ---- */

#define LOST_MAX 4096

void
dn_cheal_cell_lost(struct dn_cheal *h, struct dn_cell_id id)
{
	pthread_mutex_lock(&h->loop.lock);
	if (!h->lost)
		h->lost = calloc(LOST_MAX, sizeof(*h->lost));
	if (h->lost && h->nlost < LOST_MAX)
		h->lost[h->nlost++] = id;
	else
		h->lost_overflow = true;
	pthread_mutex_unlock(&h->loop.lock);
}

void
chl_lost_free(struct dn_cheal *h)
{
	free(h->lost);
	h->lost = NULL;
}

/* Mark one lost cell in the record that names it: 0 (marked, or nothing to mark), or an
 * etcd error. */
static int
lost_one(struct dn_cheal *h, struct dn_cell_id id, struct dn_cheal_stats *st)
{
	for (int attempt = 0; attempt < 3; attempt++) {
		struct cl_rec_object rec = { 0 };
		char *rk = NULL;
		int64_t rev = 0;
		int rc = cl_meta_extent_record(h->o.etcd, id.extent, false, &rec, &rk, &rev,
		                               chl_timeout(h));

		if (zc_err_is(rc, ZC_NO_KEY) || rc == -EBADMSG) {
			free(rk);
			return 0; /* no record names it: the collector's */
		}
		if (rc) {
			free(rk);
			return rc;
		}
		atomic_fetch_add(&h->records_read, 1);
		st->records++;
		rc = dn_cheal_mark_missing(h->o.etcd, rk, &rec, &rev, h->node, &id, 1,
		                           chl_timeout(h));
		if (rc > 0) {
			ZC_WARN("cheal", "cell %016llx.%u.%u of key=%s lost here: marked missing",
			        (unsigned long long)id.extent, id.group, id.cell, rk);
			atomic_fetch_add(&h->marked, 1);
			st->marked++;
		}
		cl_rec_object_fini(&rec);
		free(rk);
		if (!zc_err_is(rc, ZC_CHANGED))
			return rc < 0 ? rc : 0;
	}
	return 0; /* changing under us: the record's writer decides, as for any cell */
}

int
chl_lost_pass(struct dn_cheal *h, struct dn_cheal_stats *st)
{
	struct dn_cell_id *v;
	size_t n, i = 0;
	bool overflow;
	int err = 0;

	pthread_mutex_lock(&h->loop.lock);
	v = h->lost;
	n = h->nlost;
	overflow = h->lost_overflow;
	h->lost = NULL;
	h->nlost = 0;
	h->lost_overflow = false;
	pthread_mutex_unlock(&h->loop.lock);
	if (overflow)
		h->must_check = true; /* the entries went with the cells: the check finds them */
	for (; i < n && !err && !chl_stopping(h); i++)
		err = lost_one(h, v[i], st);
	if (err)
		i--;       /* that one again too */
	for (; i < n; i++) /* left for the next pass */
		dn_cheal_cell_lost(h, v[i]);
	free(v);
	return err;
}

/* ---- members ---- */

int
chl_members_note(struct dn_cheal *h, const struct cl_members_view *v, uint64_t now)
{
	struct cl_etcd_range r = { .key = MEMBERS,
		                   .key_len = strlen(MEMBERS),
		                   .end = MEMBERS_END,
		                   .end_len = strlen(MEMBERS_END),
		                   .serializable = true,
		                   .keys_only = true };
	struct cl_etcd_kvs kvs = { 0 };
	int err = cl_etcd_range(h->o.etcd, &r, &kvs, chl_timeout(h));

	for (size_t i = 0; !err && i < kvs.n; i++) {
		size_t pl = strlen(MEMBERS), nl = kvs.kv[i].key_len - pl;
		char name[256];

		if (kvs.kv[i].key_len <= pl || nl >= sizeof(name))
			continue;
		memcpy(name, (const char *)kvs.kv[i].key + pl, nl);
		name[nl] = '\0';
		chl_note_absent(h, v, name, now);
	}
	cl_etcd_kvs_fini(&kvs);
	return err;
}

/* ---- this store's check against the records ---- */

/* Up to cap cells o names on this node, not marked, that the store has no entry for. */
static size_t
own_lost(struct dn_cheal *h, const struct chl_obj *o, struct dn_cell_id *lost, size_t cap,
         bool *more)
{
	size_t n = 0;

	*more = false;
	for (size_t x = 0; x < o->rec.nextents; x++) {
		const struct cl_rec_extent *e = &o->rec.extents[x];

		for (size_t g = 0; g < e->ngroups; g++) {
			const struct cl_rec_group *gr = &e->groups[g];

			for (unsigned c = 0; c < e->k + e->m; c++) {
				struct dn_cell_id id = { e->id, (uint32_t)g, c };
				struct dn_cell_info ci;
				int rc;

				if ((gr->missing & (1u << c)) ||
				    strcmp(e->nodes[gr->cell[c]], h->node) != 0)
					continue;
				rc = dn_cell_stat(h->o.store, id, &ci);
				if (rc == 0) {
					dn_cell_info_fini(&ci);
					continue;
				}
				if (!zc_err_is(rc, ZC_NO_KEY))
					continue; /* the store's trouble, not evidence of a loss */
				if (n == cap) {
					*more = true;
					return n;
				}
				lost[n++] = id;
			}
		}
	}
	return n;
}

/* Cells the record names on this node that the store has no entry for: marked missing, in
 * markings of up to 64 cells (a big multipart object's node may have lost thousands). */
int
chl_own_check(struct dn_cheal *h, struct chl_obj *o, struct dn_cheal_stats *st)
{
	struct dn_cell_id lost[64];
	char key[4096];
	bool more = true;
	int rc = cl_meta_object_key(o->bucket, o->key, key, sizeof(key));

	if (rc < 0)
		return rc;
	while (more) {
		size_t n = own_lost(h, o, lost, sizeof(lost) / sizeof(lost[0]), &more);

		if (!n)
			return 0;
		/* sets the bits in o->rec and moves o->mod_revision on: the next round skips them
		 */
		rc = dn_cheal_mark_missing(h->o.etcd, key, &o->rec, &o->mod_revision, h->node, lost,
		                           n, chl_timeout(h));
		if (rc <= 0) /* ZC_CHANGED: changed meanwhile (an overwrite, a heal), looked at
		              * again by the next pass over the records */
			return rc;
		ZC_WARN("cheal", "marked %d cells of bucket=%s key=%s missing: not in this store",
		        rc, o->bucket, o->key);
		atomic_fetch_add(&h->marked, (unsigned)rc);
		st->marked += (unsigned)rc;
	}
	return 0;
}

void
chl_store_init(struct dn_cheal *h)
{
	struct dn_store *s = h->o.store;
	char path[4096], line[160];
	FILE *f;

	strcpy(h->store_id, "unknown");
	/* every drive of a store names the same store (dn_store.c refuses a mix) */
	snprintf(path, sizeof(path), "%s/zest-drive", s->drives[0].root);
	f = fopen(path, "r");
	if (f) {
		if (!fgets(line, sizeof(line), f) ||
		    sscanf(line, "zest-drive v1 store=%32s", h->store_id) != 1)
			strcpy(h->store_id, "unknown");
		fclose(f);
	}
	/* A store that lost cells (empty metadata: a new node, or one back with every copy
	 * lost; or a drive back empty) is checked whatever /zest/cellcheck/ says: the drives'
	 * identity files, and the store's id, may have survived the loss. */
	h->store_fresh = dn_store_lost_at_open(s);
}

static int
check_key(const struct dn_cheal *h, char *buf, size_t cap)
{
	int n = snprintf(buf, cap, DN_CHEAL_CHECKED "%s", h->node);

	return n < 0 || (size_t)n >= cap ? -ENAMETOOLONG : n;
}

int
chl_check_read(struct dn_cheal *h)
{
	char key[512];
	struct cl_etcd_kvs kvs = { 0 };
	int n = check_key(h, key, sizeof(key)), rc;

	if (n < 0)
		return n;
	if (h->store_fresh) {
		struct cl_etcd_range r = { .key = key, .key_len = (size_t)n };

		/* gone before any check starts: a crash in the middle checks again */
		rc = cl_etcd_delete(h->o.etcd, &r, NULL, NULL, chl_timeout(h));
		if (rc)
			return rc;
		h->store_fresh = false;
		h->must_check = true;
	}
	if (h->must_check)
		return 0;
	rc = cl_etcd_get(h->o.etcd, key, (size_t)n, true, &kvs, chl_timeout(h));
	if (zc_err_is(rc, ZC_NO_KEY) ||
	    (rc == 0 && (kvs.kv[0].value_len != strlen(h->store_id) ||
	                 memcmp(kvs.kv[0].value, h->store_id, kvs.kv[0].value_len) != 0))) {
		ZC_INFO("cheal",
		        "node=%s store=%s not checked against the records yet: reading them",
		        h->node, h->store_id);
		h->must_check = true;
		rc = 0;
	}
	cl_etcd_kvs_fini(&kvs);
	return rc;
}

int
chl_check_done(struct dn_cheal *h)
{
	char key[512];
	int n = check_key(h, key, sizeof(key)), rc;

	if (n < 0)
		return n;
	rc = cl_etcd_put(h->o.etcd, key, (size_t)n, h->store_id, strlen(h->store_id), 0, NULL,
	                 chl_timeout(h));
	if (rc == 0) {
		ZC_INFO("cheal", "node=%s store=%s checked against every record", h->node,
		        h->store_id);
		h->must_check = false;
	}
	return rc;
}
