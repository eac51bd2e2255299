/*
 * The rebuild of one object (dn_cheal.h): per block group with cells to heal, k good
 * cells are read whole (this node's own from its store, the others over ReadCell, each
 * chunk's CRC checked by the node that reads it), every stripe of the group decoded in
 * place, and each cell to heal written to its new node; a doubled group's extra cell
 * (two cells on one node) is read whole from that node and written to a live node free
 * of the group, by the same calls; then one fenced Txn names them all.
 *
 * Cells of a group lie stripe after stripe in their file, each stripe's part cell_size
 * bytes but the last, which is as long as its data (docs/cluster.md, "The cell store");
 * parity past the longest data cell of the last stripe is zero and not stored. A group is
 * held in memory whole: (k + m) x stripes x cell_size bytes (24 MiB for RS(4,2) with the
 * default 4 stripes of 1 MiB), refused past 1 GiB.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dn_cheal_internal.h"
#include "cl_meta.h"
#include "ec.h"
#include "zc.h"
#include "zc_place.h"

#define GROUP_MAX_BYTES (1ull << 30)
#define TARGET_TRIES    3

/* A cell written and not yet named by the record, or named once the Txn succeeds. */
struct made {
	struct dn_cell_id id;
	char *target, *old; /* node names */
	bool old_live;
};

struct work {
	struct made *v;
	size_t n, cap;
	uint64_t bytes;    /* of the cells written */
	uint64_t first_ns; /* zc_now_ns() of the first cell written */
};

/* The nodes whose cells a heal rebuilds for their absence (not marked missing). The view
 * that judged them absent may be behind etcd: a node registered again, its identity probe
 * not through yet, is live for `zest-admin status` while a healer's view still lacks it.
 * So each is looked up in /zest/nodes/ before anything is rebuilt, and the record's Txn
 * compares that it still has no registration: a late heal never replaces the cells of a
 * node that is back (docs/cluster.md "Heal": absent from /zest/nodes/). */
#define GONE_MAX 16
struct gone {
	char name[GONE_MAX][256];
	char key[GONE_MAX][256 + sizeof(CL_MEMBERS_NODES_PREFIX)];
	bool back[GONE_MAX]; /* registered: not absent for this heal */
	size_t n;
};

static uint32_t
group_stripes(const struct cl_rec_extent *e, size_t g)
{
	uint64_t sb = (uint64_t)e->k * e->cell_size, gb = sb * e->stripes_per_group;
	uint64_t start = (uint64_t)g * gb, gl;

	if (start >= e->size)
		return 0;
	gl = e->size - start < gb ? e->size - start : gb;
	return (uint32_t)((gl + sb - 1) / sb);
}

/* Bytes of data cell j (j < k) in the group's last stripe ns - 1. */
static uint64_t
last_len(const struct cl_rec_extent *e, size_t g, uint32_t ns, unsigned j)
{
	uint64_t sb = (uint64_t)e->k * e->cell_size, gb = sb * e->stripes_per_group;
	uint64_t off = (uint64_t)g * gb + (uint64_t)(ns - 1) * sb + (uint64_t)j * e->cell_size;

	if (off >= e->size)
		return 0;
	return e->size - off < e->cell_size ? e->size - off : e->cell_size;
}

/* The length of data cell j's file; a parity cell's is data cell 0's (short parity). */
static uint64_t
file_len(const struct cl_rec_extent *e, size_t g, uint32_t ns, unsigned j)
{
	return (uint64_t)(ns - 1) * e->cell_size + last_len(e, g, ns, j < e->k ? j : 0);
}

static const char *
view_address(const struct cl_members_view *v, const char *name)
{
	int i = chl_view_find(v, name);

	return i < 0 ? NULL : v->nodes[i].address;
}

/* Read cell c of the group into buf: 0 and *len, or an error (the caller tries another). */
static int
read_cell(struct dn_cheal *h, const struct cl_members_view *v, const char *node,
          struct dn_cell_id id, uint8_t *buf, size_t cap, size_t *len)
{
	const char *addr;
	struct rpc_client *cl;

	if (strcmp(node, h->node) == 0)
		return chl_local_read(h, id, buf, cap, len);
	addr = view_address(v, node);
	if (!addr)
		return ZC_E(ZC_UNAVAILABLE);
	cl = chl_peer(h, node, addr);
	return cl ? chl_peer_read(h, cl, id, buf, cap, len) : -ENOMEM;
}

static int
delete_cell(struct dn_cheal *h, const struct cl_members_view *v, const char *node,
            struct dn_cell_id id)
{
	const char *addr;
	struct rpc_client *cl;
	int rc;

	if (strcmp(node, h->node) == 0) {
		rc = dn_cell_delete(h->o.store, id);
		return rc < 0 ? rc : 0;
	}
	addr = view_address(v, node);
	if (!addr)
		return ZC_E(ZC_UNAVAILABLE);
	cl = chl_peer(h, node, addr);
	return cl ? chl_peer_cells(h, cl, RPC_DELETE_CELLS, id) : -ENOMEM;
}

static int
commit_cell(struct dn_cheal *h, const struct cl_members_view *v, const char *node,
            struct dn_cell_id id)
{
	const char *addr;
	struct rpc_client *cl;

	if (strcmp(node, h->node) == 0)
		return dn_cell_commit(h->o.store, id);
	addr = view_address(v, node);
	if (!addr)
		return ZC_E(ZC_UNAVAILABLE);
	cl = chl_peer(h, node, addr);
	return cl ? chl_peer_cells(h, cl, RPC_COMMIT_CELLS, id) : -ENOMEM;
}

/* Write the rebuilt cell to node; a stale cell of that name there (the record does not
 * name it: an earlier heal fenced off, or the lost cell itself) is deleted first. */
static int
write_cell(struct dn_cheal *h, const struct cl_members_view *v, const struct chl_obj *o,
           const struct cl_rec_extent *e, struct dn_cell_id id, const char *node,
           const uint8_t *buf, uint64_t len)
{
	struct dn_cell_spec spec = { .id = id,
		                     .length = len,
		                     .k = e->k,
		                     .m = e->m,
		                     .cell_size = (uint32_t)e->cell_size,
		                     .stripes_per_group = e->stripes_per_group,
		                     .bucket = o->bucket,
		                     .key = o->key };
	struct rpc_cell_open op = { .id = { id.extent, id.group, id.cell },
		                    .length = len,
		                    .ec_k = e->k,
		                    .ec_m = e->m,
		                    .cell_size = (uint32_t)e->cell_size,
		                    .stripes_per_group = e->stripes_per_group,
		                    .bucket = o->bucket,
		                    .key = o->key };
	bool local = strcmp(node, h->node) == 0;
	struct rpc_client *cl = NULL;
	int rc = 0;

	if (!local) {
		const char *addr = view_address(v, node);

		if (!addr)
			return ZC_E(ZC_UNAVAILABLE);
		cl = chl_peer(h, node, addr);
		if (!cl)
			return -ENOMEM;
	}
	for (int tries = 0; tries < 2; tries++) {
		rc = local ? chl_local_write(h, &spec, buf) : chl_peer_write(h, cl, &op, buf);
		if (!zc_err_is(rc, ZC_CELL_EXISTS))
			break;
		rc = delete_cell(h, v, node, id);
		if (rc)
			break;
	}
	return rc;
}

static bool
group_has(const struct cl_rec_extent *e, const struct cl_rec_group *gr, unsigned skip,
          const char *node)
{
	for (unsigned c = 0; c < e->k + e->m; c++)
		if (c != skip && strcmp(e->nodes[gr->cell[c]], node) == 0)
			return true;
	return false;
}

/* The node table index of name, appended when new; -1 without memory or room. */
static int
node_index(struct cl_rec_extent *e, const char *name)
{
	char **nn;

	for (size_t i = 0; i < e->nnodes; i++)
		if (strcmp(e->nodes[i], name) == 0)
			return (int)i;
	if (e->nnodes >= CL_REC_MAX_EXTENT_NODES)
		return -1;
	nn = realloc(e->nodes, (e->nnodes + 1) * sizeof(*nn));
	if (!nn)
		return -1;
	e->nodes = nn;
	e->nodes[e->nnodes] = strdup(name);
	if (!e->nodes[e->nnodes])
		return -1;
	return (int)e->nnodes++;
}

static int
work_add(struct work *wk, struct dn_cell_id id, const char *target, const char *old, bool old_live)
{
	struct made *m;

	if (wk->n == wk->cap) {
		size_t cap = wk->cap ? 2 * wk->cap : 8;

		m = realloc(wk->v, cap * sizeof(*m));
		if (!m)
			return -ENOMEM;
		wk->v = m;
		wk->cap = cap;
	}
	m = &wk->v[wk->n];
	m->id = id;
	m->target = strdup(target);
	m->old = strdup(old);
	m->old_live = old_live;
	if (!m->target || !m->old) {
		free(m->target);
		free(m->old);
		return -ENOMEM;
	}
	if (!wk->first_ns)
		wk->first_ns = zc_now_ns();
	wk->n++;
	return 0;
}

uint32_t
chl_group_extra(const struct cl_rec_extent *e, const struct cl_rec_group *gr, uint32_t skip)
{
	uint32_t extra = 0;

	for (unsigned c = 1; c < e->k + e->m; c++)
		for (unsigned d = 0; d < c && !(skip & (1u << c)); d++)
			if (!(skip & (1u << d)) && gr->cell[c] == gr->cell[d]) {
				extra |= 1u << c;
				break;
			}
	return extra;
}

bool
chl_free_node(const struct cl_members_view *v, const struct cl_rec_extent *e,
              const struct cl_rec_group *gr)
{
	for (size_t i = 0; i < v->n; i++)
		if (!group_has(e, gr, CL_REC_MAX_CELLS, v->names[i]) &&
		    cl_members_placeable(v, v->names[i]))
			return true;
	return false;
}

unsigned
chl_doubled_groups(const struct cl_rec_object *rec)
{
	unsigned n = 0;

	for (size_t x = 0; x < rec->nextents; x++)
		for (size_t g = 0; g < rec->extents[x].ngroups; g++)
			n += cl_meta_heal_group_doubled(&rec->extents[x],
			                                &rec->extents[x].groups[g]);
	return n;
}

/*
 * Place cell c (rebuilt, or with move read whole from its node to leave a doubled group):
 * a rebuilt cell goes back to the node that lost it when that node is live again and
 * holds no other cell of the group; else, and for a move, to live nodes that hold no
 * cell of the group in the rendezvous order of (extent, group), zones with fewer of its
 * cells and nodes with room first (chl_zone_order); a rebuilt cell whose
 * live old node holds another cell of the group goes back there only when none of those
 * takes it (a cell doubled beats a cell missing). Returns 0 when it was written and the
 * record copy names it (the missing bit cleared), else an error.
 */
static int
place_cell(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o,
           struct cl_rec_extent *e, size_t g, unsigned c, const uint8_t *buf, uint64_t len,
           bool move, struct work *wk)
{
	struct cl_rec_group *gr = &e->groups[g];
	struct dn_cell_id id = { e->id, (uint32_t)g, c };
	char *old = strdup(e->nodes[gr->cell[c]]);
	bool old_live = old && chl_view_find(v, old) >= 0;
	/* a drained or maintenance node takes no cell, not even its own back */
	bool old_ok = old_live && cl_members_placeable(v, old);
	bool back_first = old_ok && !move && !group_has(e, gr, c, old);
	bool back_last = old_ok && !move && !back_first;
	unsigned *order = calloc(v->n ? v->n : 1, sizeof(*order)), tries = 0;
	int rc = ZC_E(ZC_UNAVAILABLE), idx;

	if (!old || !order) {
		free(old);
		free(order);
		return -ENOMEM;
	}
	if (v->n) {
		zc_place_rank(zc_place_group_key(e->id, (uint32_t)g), v->names, (unsigned)v->n,
		              order);
		chl_zone_order(v, e, gr, c, order);
	}
	/* i = -1: back to the old node; 0 .. n - 1: the ranking; n: the old node last */
	for (long i = back_first ? -1 : 0; i <= (long)v->n && tries < TARGET_TRIES; i++) {
		const char *t = i < 0 || i == (long)v->n ? old : v->names[order[i]];

		if (i == (long)v->n && !back_last)
			break;
		if (i >= 0 && i < (long)v->n &&
		    (strcmp(t, old) == 0 || group_has(e, gr, c, t) || !cl_members_placeable(v, t)))
			continue;
		tries++;
		rc = write_cell(h, v, o, e, id, t, buf, len);
		if (rc) {
			ZC_WARN("cheal",
			        "cell %016llx.%u.%u of bucket=%s key=%s: write to node=%s "
			        "failed err=%d",
			        (unsigned long long)id.extent, id.group, id.cell, o->bucket, o->key,
			        t, rc);
			continue;
		}
		idx = node_index(e, t);
		if (idx < 0 || work_add(wk, id, t, old, old_live)) {
			(void)delete_cell(h, v, t, id);
			rc = -ENOMEM;
			break;
		}
		gr->cell[c] = (uint16_t)idx;
		gr->missing &= ~(1u << c);
		wk->bytes += len;
		ZC_INFO("cheal",
		        "%s cell %016llx.%u.%u of bucket=%s key=%s on node=%s "
		        "(was node=%s)",
		        move ? "moved" : "rebuilt", (unsigned long long)id.extent, id.group,
		        id.cell, o->bucket, o->key, t, old);
		break;
	}
	if (zc_err_is(rc, ZC_UNAVAILABLE) && !tries)
		ZC_WARN("cheal",
		        "cell %016llx.%u.%u of bucket=%s key=%s: no live node outside "
		        "its group to take it",
		        (unsigned long long)id.extent, id.group, id.cell, o->bucket, o->key);
	free(old);
	free(order);
	return rc;
}

/* Has some cell of `need` a node to go to? (Else reading the group is wasted work.) */
static bool
has_target(const struct cl_members_view *v, const struct cl_rec_extent *e,
           const struct cl_rec_group *gr, uint32_t need)
{
	for (unsigned c = 0; c < e->k + e->m; c++) {
		const char *old = e->nodes[gr->cell[c]];

		if (!(need & (1u << c)))
			continue;
		if (chl_view_find(v, old) >= 0 && cl_members_placeable(v, old))
			return true;
		for (size_t i = 0; i < v->n; i++)
			if (strcmp(v->names[i], old) != 0 && !group_has(e, gr, c, v->names[i]) &&
			    cl_members_placeable(v, v->names[i]))
				return true;
	}
	return false;
}

/* Read cell c of group g whole into buf (per bytes): 0 with *len, or an error (logged). */
static int
read_whole(struct dn_cheal *h, const struct cl_members_view *v, const struct cl_rec_extent *e,
           size_t g, unsigned c, uint32_t ns, uint8_t *buf, uint64_t per, size_t *len)
{
	const char *n = e->nodes[e->groups[g].cell[c]];
	struct dn_cell_id id = { e->id, (uint32_t)g, c };
	int rc = read_cell(h, v, n, id, buf, per, len);

	if (!rc && c < e->k && *len != file_len(e, g, ns, c))
		rc = -EBADMSG;
	if (rc) {
		ZC_WARN("cheal", "cell %016llx.%u.%u on node=%s unreadable err=%d",
		        (unsigned long long)e->id, (unsigned)g, c, n, rc);
		memset(buf, 0, per);
	}
	return rc;
}

/*
 * Heal the cells `need` of group g (rebuilt from k others) and move the cells `move` (a
 * doubled group's extras, read whole from their own node, which keeps them until the
 * record names the new one): how many were placed (*moved of them moves), or an error
 * when none could.
 */
static int
heal_group(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o,
           struct cl_rec_extent *e, size_t g, uint32_t need, uint32_t move, struct ec_codec *codec,
           struct work *wk, unsigned *moved)
{
	struct cl_rec_group *gr = &e->groups[g];
	unsigned w = e->k + e->m, got = 0, placed = 0;
	uint32_t ns = group_stripes(e, g), have = 0;
	uint64_t per, parity_len = 0;
	uint8_t *bufs, *ptr[CL_REC_MAX_CELLS];
	size_t lens[CL_REC_MAX_CELLS] = { 0 };
	int rc = 0;

	if (!ns)
		return 0;
	if (need && !has_target(v, e, gr, need)) {
		ZC_WARN("cheal",
		        "group %016llx.%u of bucket=%s key=%s: no live node outside the group to "
		        "take its cells (%zu live)",
		        (unsigned long long)e->id, (unsigned)g, o->bucket, o->key, v->n);
		need = 0;
	}
	if (move && !chl_free_node(v, e, gr))
		move = 0; /* fewer live nodes than k + m: the group stays doubled */
	if (!need && !move)
		return -EAGAIN;
	per = (uint64_t)ns * e->cell_size;
	if (per * w > GROUP_MAX_BYTES) {
		ZC_WARN("cheal", "group of %llu bytes per cell too large to heal in memory",
		        (unsigned long long)per);
		return -EFBIG;
	}
	bufs = calloc(w, per);
	if (!bufs)
		return -ENOMEM;
	/* the cells to move first: read whole, they need no decode and are survivors too */
	for (unsigned c = 0; c < w; c++) {
		if (!(move & (1u << c)))
			continue;
		if (read_whole(h, v, e, g, c, ns, bufs + c * per, per, &lens[c])) {
			move &= ~(1u << c);
			continue;
		}
		if (c >= e->k)
			parity_len = lens[c];
		have |= 1u << c;
		got++;
	}
	/* survivors: this node's own cells first (no network), then the others in order */
	for (int pass = 0; need && pass < 2 && got < e->k; pass++)
		for (unsigned c = 0; c < w && got < e->k; c++) {
			const char *n = e->nodes[gr->cell[c]];
			bool self = strcmp(n, h->node) == 0;

			if (((need | have) & (1u << c)) || (gr->missing & (1u << c)) ||
			    self != (pass == 0) || (!self && chl_view_find(v, n) < 0))
				continue;
			if (read_whole(h, v, e, g, c, ns, bufs + c * per, per, &lens[c]))
				continue;
			if (c >= e->k)
				parity_len = lens[c];
			have |= 1u << c;
			got++;
		}
	if (need && got < e->k) {
		ZC_WARN("cheal",
		        "group %016llx.%u of bucket=%s key=%s: %u of %u cells readable, "
		        "cannot heal now",
		        (unsigned long long)e->id, (unsigned)g, o->bucket, o->key, got, e->k);
		need = 0;
	}
	if (!parity_len)
		parity_len = file_len(e, g, ns, e->k);
	for (uint32_t s = 0; need && s < ns; s++) {
		for (unsigned c = 0; c < w; c++)
			ptr[c] = bufs + c * per + (uint64_t)s * e->cell_size;
		rc = ec_codec_decode(codec, e->cell_size, ptr, ((1u << w) - 1) & ~have);
		if (rc) {
			free(bufs);
			return rc;
		}
	}
	for (unsigned c = 0; c < w; c++) {
		bool mv = move & (1u << c);
		uint64_t len = mv ? lens[c] : c < e->k ? file_len(e, g, ns, c) : parity_len;

		if (!((need | move) & (1u << c)))
			continue;
		if (place_cell(h, v, o, e, g, c, bufs + c * per, len, mv, wk) == 0) {
			placed++;
			*moved += mv;
		}
	}
	free(bufs);
	return placed ? (int)placed : -EAGAIN;
}

int
chl_put_record(struct dn_cheal *h, struct chl_obj *o, const char *const *unreg, size_t nunreg)
{
	char key[4096], why[CL_REC_WHY_MAX];
	uint8_t *buf;
	size_t len;
	int n = cl_meta_object_key(o->bucket, o->key, key, sizeof(key)), rc;

	if (n < 0)
		return n;
	rc = cl_rec_object_encode(&o->rec, &buf, &len, why, sizeof(why));
	if (rc) {
		ZC_ERR("cheal", "cannot encode the record bucket=%s key=%s: %s", o->bucket, o->key,
		       why);
		return rc;
	}
	{
		char hk[4096], hv[CL_META_HEAL_VALUE_CAP];
		int hkl = cl_meta_heal_key(key, (size_t)n, hk, sizeof(hk));
		struct cl_etcd_cmp cmp[1 + GONE_MAX] = { { .key = key,
			                                   .key_len = (size_t)n,
			                                   .target = CL_ETCD_CMP_MOD,
			                                   .op = CL_ETCD_EQUAL,
			                                   .num = o->mod_revision } };
		struct cl_etcd_op ops[2] = {
			{ .type = CL_ETCD_OP_PUT,
			  .r = { .key = key, .key_len = (size_t)n },
			  .value = buf,
			  .value_len = len },
			{ .type = CL_ETCD_OP_DELETE, .r = { .key = hk, .key_len = (size_t)hkl } },
		};
		struct cl_etcd_txn txn = { cmp, 1, ops, 2, NULL, 0 };
		struct cl_etcd_txn_result res = { 0 };

		/* each node whose cells were rebuilt for its absence: still unregistered */
		for (size_t i = 0; i < nunreg && i < GONE_MAX; i++)
			cmp[txn.n_cmp++] = (struct cl_etcd_cmp){ .key = unreg[i],
				                                 .key_len = strlen(unreg[i]),
				                                 .target = CL_ETCD_CMP_VERSION,
				                                 .op = CL_ETCD_EQUAL,
				                                 .num = 0 };
		/* The last missing bit cleared and the last doubled cell moved: the record's
		 * to-do key goes in the same Txn (else it stays). */
		if (hkl < 0 || cl_meta_heal_value(&o->rec, hv) > 0)
			txn.n_then = 1;

		rc = cl_etcd_txn(h->o.etcd, &txn, &res, chl_timeout(h));
		if (rc == 0 && res.succeeded) {
			o->mod_revision = res.revision;
			rc = 1;
		}
		cl_etcd_txn_result_fini(&res);
	}
	free(buf);
	return rc;
}

static int
gone_find(const struct gone *gn, const char *name)
{
	for (size_t i = 0; i < gn->n; i++)
		if (strcmp(gn->name[i], name) == 0)
			return (int)i;
	return -1;
}

/* May a cell on name be rebuilt for its node's absence? Only a node gone_read found
 * unregistered (one past GONE_MAX waits for a later heal). */
static bool
gone_absent(const struct gone *gn, const char *name)
{
	int i = gone_find(gn, name);

	return i >= 0 && !gn->back[i];
}

/* Collect the absent nodes o's cells need healing for, then read (linearizable, keys
 * only) which of them are registered again. 0 or an etcd error. */
static int
gone_read(struct dn_cheal *h, const struct cl_members_view *v, const struct chl_obj *o,
          uint64_t now, struct gone *gn)
{
	static const char prefix[] = CL_MEMBERS_NODES_PREFIX;
	struct cl_etcd_range r = {
		.key = prefix, .key_len = sizeof(prefix) - 1, .prefix = true, .keys_only = true
	};
	struct cl_etcd_kvs kvs = { 0 };
	int err;

	gn->n = 0;
	for (size_t x = 0; x < o->rec.nextents; x++) {
		const struct cl_rec_extent *e = &o->rec.extents[x];

		for (size_t g = 0; g < e->ngroups; g++) {
			const struct cl_rec_group *gr = &e->groups[g];

			for (unsigned c = 0; c < e->k + e->m; c++) {
				const char *n = e->nodes[gr->cell[c]];

				if ((gr->missing & (1u << c)) ||
				    !chl_cell_needs(h, v, e, gr, c, now) || gone_find(gn, n) >= 0 ||
				    gn->n == GONE_MAX || strlen(n) >= sizeof(gn->name[0]))
					continue;
				strcpy(gn->name[gn->n], n);
				snprintf(gn->key[gn->n], sizeof(gn->key[0]), "%s%s", prefix, n);
				gn->back[gn->n++] = false;
			}
		}
	}
	if (!gn->n)
		return 0;
	err = cl_etcd_range(h->o.etcd, &r, &kvs, chl_timeout(h));
	for (size_t i = 0; !err && i < kvs.n; i++) {
		const struct cl_etcd_kv *kv = &kvs.kv[i];

		for (size_t j = 0; j < gn->n; j++)
			if (kv->key_len == strlen(gn->key[j]) &&
			    memcmp(kv->key, gn->key[j], kv->key_len) == 0)
				gn->back[j] = true;
	}
	cl_etcd_kvs_fini(&kvs);
	return err;
}

static void
work_fini(struct work *wk)
{
	for (size_t i = 0; i < wk->n; i++) {
		free(wk->v[i].target);
		free(wk->v[i].old);
	}
	free(wk->v);
}

int
chl_heal_object(struct dn_cheal *h, const struct cl_members_view *v, struct chl_obj *o,
                unsigned *moved)
{
	uint64_t now = zc_now_ns(), grace = h->o.gc_grace_ns ? h->o.gc_grace_ns : 600000000000ull;
	struct work wk = { 0 };
	struct gone gn;
	const char *unreg[GONE_MAX];
	size_t nunreg = 0;
	bool blocked = false;
	unsigned nmoved = 0;
	int rc = gone_read(h, v, o, now, &gn);

	*moved = 0;
	if (rc)
		return rc;
	for (size_t i = 0; i < gn.n; i++)
		if (!gn.back[i])
			unreg[nunreg++] = gn.key[i];
	for (size_t x = 0; x < o->rec.nextents && rc != -ENOMEM; x++) {
		struct cl_rec_extent *e = &o->rec.extents[x];
		struct ec_codec *codec = NULL;

		for (size_t g = 0; g < e->ngroups; g++) {
			struct cl_rec_group *gr = &e->groups[g];
			uint32_t need = 0, move;

			for (unsigned c = 0; c < e->k + e->m; c++)
				if (chl_cell_needs(h, v, e, gr, c, now) &&
				    ((gr->missing & (1u << c)) ||
				     gone_absent(&gn, e->nodes[gr->cell[c]])))
					need |= 1u << c;
			/* a doubled group's extras on a live node move; those with no
			 * live node free of the group wait, counted pending, not failed */
			move = chl_group_extra(e, gr, need);
			for (unsigned c = 0; c < e->k + e->m; c++)
				if ((move & (1u << c)) &&
				    chl_view_find(v, e->nodes[gr->cell[c]]) < 0)
					move &= ~(1u << c);
			/* a draining node's cells move too, by the same copy-then-retire path */
			move |= chl_drain_cells(v, e, gr, need);
			if (!need && (!move || !chl_free_node(v, e, gr)))
				continue;
			if (need && !codec && (rc = ec_codec_create(e->k, e->m, &codec)) != 0)
				break;
			rc = heal_group(h, v, o, e, g, need, move, codec, &wk, &nmoved);
			if (rc < 0)
				blocked = true;
			if (rc == -ENOMEM)
				break;
		}
		ec_codec_destroy(codec);
	}
	if (!wk.n) {
		work_fini(&wk);
		return blocked ? -EAGAIN : 0;
	}
	/* A rebuilt cell is pending on its node: its collector deletes it after the grace
	 * unless a record names it, so the Txn must come well before. */
#ifdef ZC_FAULTS
	if (h->o.test_before_txn)
		h->o.test_before_txn(h->o.test_arg, o->bucket, o->key);
#endif
	if (zc_now_ns() - wk.first_ns > grace / 2)
		rc = 0;
	else
		rc = chl_put_record(h, o, unreg, nunreg);
	if (rc == 0) {
		ZC_WARN("cheal",
		        "bucket=%s key=%s changed while healing (or a node it healed around "
		        "registered again, or too slow): dropping "
		        "%zu rebuilt cells",
		        o->bucket, o->key, wk.n);
		for (size_t i = 0; i < wk.n; i++)
			(void)delete_cell(h, v, wk.v[i].target, wk.v[i].id);
		work_fini(&wk);
		return ZC_E(ZC_CHANGED);
	}
	if (rc < 0) {
		/* ambiguous: the Txn may be in; the collectors settle the cells by the record */
		work_fini(&wk);
		return rc;
	}
	for (size_t i = 0; i < wk.n; i++) {
		struct made *m = &wk.v[i];
		int err = commit_cell(h, v, m->target, m->id);

		if (err) /* the collector commits it: the record names it */
			ZC_WARN("cheal", "commit of cell %016llx.%u.%u on node=%s failed err=%d",
			        (unsigned long long)m->id.extent, m->id.group, m->id.cell,
			        m->target, err);
		if (m->old_live && strcmp(m->old, m->target) != 0)
			(void)delete_cell(h, v, m->old, m->id);
	}
	rc = (int)wk.n;
	*moved = nmoved;
	atomic_fetch_add(&h->healed_bytes, wk.bytes);
	work_fini(&wk);
	return rc;
}
