/*
 * dn_coord_place: a block group's placement over the write's membership view and the
 * lengths of its cells (the single-node layout, so readers and healers compute the same).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "dn_coord_internal.h"
#include "zc.h"

uint32_t
dn_coord_ngroups(uint64_t size, unsigned k, uint32_t cell_size, uint32_t spg)
{
	uint64_t gb = (uint64_t)k * cell_size * spg;

	return (uint32_t)((size + gb - 1) / gb);
}

uint64_t
dn_coord_cell_len(uint64_t size, unsigned k, uint32_t cell_size, uint32_t spg, uint32_t group,
                  unsigned cell)
{
	uint64_t sb = (uint64_t)k * cell_size, gb = sb * spg, start = (uint64_t)group * gb;
	uint64_t gl, ns, last_off, tail;

	if (start >= size)
		return 0;
	gl = size - start < gb ? size - start : gb;
	ns = (gl + sb - 1) / sb;
	/* Every stripe but the last is whole; in the last, data cell j holds what is left past
	 * j cells, and a parity cell is as long as the first (longest) data cell. */
	last_off = (ns - 1) * sb + (uint64_t)(cell < k ? cell : 0) * cell_size;
	tail = gl > last_off ? gl - last_off : 0;
	if (tail > cell_size)
		tail = cell_size;
	return (ns - 1) * cell_size + tail;
}

int
dn_coord_tolerance(const unsigned *node, unsigned n, uint32_t durable, unsigned k)
{
	unsigned cnt[ZC_PLACE_MAX_SLOTS], nn = 0, left = 0;

	if (n > ZC_PLACE_MAX_SLOTS)
		n = ZC_PLACE_MAX_SLOTS;
	/* durable cells per node (a node holding none costs nothing to lose) */
	for (unsigned i = 0; i < n; i++) {
		unsigned j;

		if (!(durable & (1u << i)))
			continue;
		left++;
		for (j = 0; j < i; j++)
			if ((durable & (1u << j)) && node[j] == node[i])
				break;
		if (j < i)
			continue; /* counted with the first durable cell of its node */
		cnt[nn] = 0;
		for (j = i; j < n; j++)
			cnt[nn] += (durable & (1u << j)) && node[j] == node[i];
		nn++;
	}
	if (left < k)
		return -1;
	return zc_place_losable(cnt, nn, left, k);
}

/* The tolerance a placement over the live view gives, logged when it changes (a view of
 * fewer than k + m nodes). */
static void
note_tolerance(const struct dn_coord_write *w, const struct zc_place_slots *sl, int ft)
{
	unsigned need = w->quorum - w->k;

	if (atomic_exchange(&w->c->last_tolerance_logged, (unsigned)ft + 1) != (unsigned)ft + 1)
		ZC_INFO("coord",
		        "placement of %u+%u over %zu live nodes: at most %u cells of a group per "
		        "node, fault tolerance %d nodes (write quorum %u needs %u%s)",
		        w->k, w->m, w->view->n, sl->max_per_node, ft, w->quorum, need,
		        ft < (int)need ? ": writes refused" : "");
}

uint32_t
dn_coord_group_live(const struct dn_coord_write *w, const struct cgroup *g)
{
	uint32_t live = 0;

	for (unsigned i = 0; i < w->n; i++)
		if (!g->cells[i].failed)
			live |= 1u << i;
	return live;
}

bool
dn_coord_group_ok(const struct dn_coord_write *w, const struct cgroup *g, uint32_t cells)
{
	return dn_coord_quorum_ok(g->sl.node, w->n, cells, w->k, w->quorum);
}

void
dn_coord_group_msg(const struct dn_coord_write *w, const struct cgroup *g, uint32_t cells,
                   const char *what, char *msg, size_t cap)
{
	dn_coord_quorum_msg(w, g->idx, g->sl.node, cells, what, msg, cap);
}

void
dn_coord_quorum_msg(const struct dn_coord_write *w, uint32_t group, const unsigned *node,
                    uint32_t cells, const char *what, char *msg, size_t cap)
{
	int t = dn_coord_tolerance(node, w->n, cells, w->k);
	unsigned nodes = 0, have = (unsigned)__builtin_popcount(cells);

	for (unsigned i = 0; i < w->n; i++) {
		unsigned j = 0;

		if (!(cells & (1u << i)))
			continue;
		while (j < i && !((cells & (1u << j)) && node[j] == node[i]))
			j++;
		nodes += j == i;
	}
	if (t < 0)
		snprintf(msg, cap,
		         "write quorum not met: group %" PRIu32 " has %u of %u cells %s, fewer "
		         "than k = %u; write quorum %u",
		         group, have, w->n, what, w->k, w->quorum);
	else
		snprintf(msg, cap,
		         "write quorum not met: group %" PRIu32 " has %u of %u cells %s on %u of "
		         "%zu live nodes, surviving the loss of %d nodes; write quorum %u needs %u",
		         group, have, w->n, what, nodes, w->view->n, t, w->quorum,
		         w->quorum - w->k);
}

/* The view's nodes as placement candidates (zc_place_spread): their zones, and their free
 * bytes above the reserve as weights (cl_rec_node_weight: a full node weighs 0). NULL on
 * no memory. */
static struct zc_place_node *
view_nodes(const struct cl_members_view *v)
{
	struct zc_place_node *pn = calloc(v->n ? v->n : 1, sizeof(*pn));

	for (size_t i = 0; pn && i < v->n; i++) {
		const struct cl_rec_node *nd = &v->nodes[i];

		pn[i].name = v->names[i];
		pn[i].zone = nd->zone && nd->zone[0] ? nd->zone : NULL; /* NULL: its own */
		pn[i].weight = cl_rec_node_weight(nd);
	}
	return pn;
}

static struct zc_place_node *
place_nodes(const struct dn_coord_write *w)
{
	return view_nodes(w->view);
}

int
dn_coord_view_spread(const struct cl_members_view *v, int self, unsigned k, unsigned m,
                     struct zc_place_slots *sl, int *zones_ft)
{
	struct zc_place_node *pn = view_nodes(v);
	int rc = pn ? 0 : -ENOMEM;

	*zones_ft = -1;
	if (!rc && !v->n)
		rc = -EINVAL;
	if (!rc)
		rc = zc_place_spread(zc_place_group_key(0, 0), pn, (unsigned)v->n, k, m, self, sl);
	if (!rc)
		*zones_ft = zc_place_zone_tolerance(sl, pn, k);
	free(pn);
	return rc;
}

/* The zone of v's node j (its name when it registered none). */
static const char *
view_zone(const struct cl_members_view *v, size_t j)
{
	const char *z = v->nodes[j].zone;

	return z && z[0] ? z : v->names[j];
}

int
dn_coord_cell_replace(struct dn_coord_write *w, struct cgroup *g, unsigned i)
{
	const struct cl_members_view *v = w->view;
	uint64_t key = zc_place_group_key(w->id, g->idx), best_h = 0;
	unsigned old = g->cells[i].node, best_zc = 0;
	long who = -1;

	pthread_mutex_lock(&w->mu);
	w->node_failed[old] = true; /* the later groups go around it */
	for (size_t j = 0; j < v->n; j++) {
		unsigned zc = 0;
		bool in = false;
		uint64_t h;

		if (w->node_failed[j] || !cl_rec_node_weight(&v->nodes[j]))
			continue;
		for (unsigned t = 0; t < w->n; t++) {
			in |= g->sl.node[t] == j;
			zc += t != i && !strcmp(view_zone(v, g->sl.node[t]), view_zone(v, j));
		}
		if (in)
			continue;
		/* zc_place_spread's order for one slot: the emptier zone, then the hash */
		h = zc_place_slot_weight(key, v->names[j], i);
		if (who < 0 || zc < best_zc || (zc == best_zc && h > best_h)) {
			who = (long)j;
			best_zc = zc;
			best_h = h;
		}
	}
	pthread_mutex_unlock(&w->mu);
	if (who < 0)
		return -ENOSPC;
	g->sl.node[i] = (unsigned)who;
	g->cells[i].node = (unsigned)who;
	g->cells[i].local = w->self >= 0 && (unsigned)who == (unsigned)w->self;
	return 0;
}

/* Place group gi over pn; when every node left is full or failed, over the view's own
 * weights (the write then fails on the quorum, saying why). */
static int
place(struct dn_coord_write *w, uint32_t gi, struct zc_place_node *pn, struct zc_place_slots *sl)
{
	uint64_t key = zc_place_group_key(w->id, gi);
	unsigned n = (unsigned)w->view->n;
	int rc = zc_place_spread(key, pn, n, w->k, w->m, w->self, sl);

	if (rc == -ENOSPC) {
		for (unsigned i = 0; i < n; i++)
			pn[i].weight = cl_rec_node_weight(&w->view->nodes[i]);
		rc = zc_place_spread(key, pn, n, w->k, w->m, w->self, sl);
	}
	return rc;
}

int
dn_coord_place_check(const struct dn_coord_write *w, char *msg, size_t cap)
{
	struct zc_place_slots sl;
	struct zc_place_node *pn = place_nodes(w);
	uint32_t all = dn_coord_all_cells(w->n);
	int ft, rc;

	if (!pn) {
		snprintf(msg, cap, "out of memory");
		return -ENOMEM;
	}
	/* Every group's placement over a view holds the same number of cells per node
	 * (zc_place_spread: rounds of distinct nodes), so group 0's tells for all. */
	rc = zc_place_spread(zc_place_group_key(w->id, 0), pn, (unsigned)w->view->n, w->k, w->m,
	                     w->self, &sl);
	free(pn);
	if (rc == -ENOSPC) {
		snprintf(msg, cap, "none of the %zu live nodes has free space above its reserve",
		         w->view->n);
		return ZC_E(ZC_UNAVAILABLE);
	}
	if (rc) {
		snprintf(msg, cap, "no placement for %u+%u over %zu live nodes", w->k, w->m,
		         w->view->n);
		return ZC_E(ZC_UNAVAILABLE);
	}
	ft = dn_coord_tolerance(sl.node, w->n, all, w->k);
	note_tolerance(w, &sl, ft);
	if (ft >= (int)(w->quorum - w->k))
		return 0;
	dn_coord_quorum_msg(w, 0, sl.node, all, "placed", msg, cap);
	return ZC_E(ZC_NO_QUORUM);
}

int
dn_coord_group_open(struct dn_coord_write *w, uint32_t gi, char *msg, size_t cap)
{
	struct cgroup *g = calloc(1, sizeof(*g));
	struct zc_place_node *pn = place_nodes(w);
	int rc;

	if (!g || !pn) {
		free(g);
		free(pn);
		snprintf(msg, cap, "out of memory");
		return -ENOMEM;
	}
	/* a node a stream failed to earlier in this write (refused, reset, out of space)
	 * takes no cell of the later groups: they keep their full redundancy elsewhere */
	pthread_mutex_lock(&w->mu);
	for (size_t i = 0; i < w->view->n; i++)
		if (w->node_failed[i])
			pn[i].weight = 0;
	pthread_mutex_unlock(&w->mu);
	g->idx = gi;
	rc = place(w, gi, pn, &g->sl);
	free(pn);
	if (rc) {
		free(g);
		snprintf(msg, cap, "no placement for %u+%u over %zu live nodes", w->k, w->m,
		         w->view->n);
		return ZC_E(ZC_UNAVAILABLE);
	}
	for (unsigned i = 0; i < w->n; i++) {
		struct ccell *cc = &g->cells[i];

		cc->w = w;
		cc->group = gi;
		cc->cell = i;
		cc->node = g->sl.node[i];
		cc->local = w->self >= 0 && cc->node == (unsigned)w->self;
		cc->length = dn_coord_cell_len(w->size, w->k, w->cell, w->spg, gi, i);
	}
	w->groups[gi] = g;
	w->opened = gi + 1;
	if (!w->first_ns)
		w->first_ns = dn_coord_realtime_ns();
	for (unsigned i = 0; i < w->n; i++)
		dn_coord_cell_start(w, g, i);
	pthread_mutex_lock(&w->mu);
	rc = w->lost ? ZC_E(ZC_NO_QUORUM) : 0;
	if (rc)
		dn_coord_group_msg(w, g, dn_coord_group_live(w, g), "left", msg, cap);
	pthread_mutex_unlock(&w->mu);
	return rc;
}
