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

/* The fault tolerance a placement gives, logged when it changes. */
static void
note_tolerance(struct dn_coord *c, const struct zc_place_slots *sl, size_t nodes)
{
	unsigned ft = sl->fault_tolerance;

	if (atomic_exchange(&c->last_tolerance_logged, ft + 1) != ft + 1)
		ZC_INFO("coord",
		        "placement over %zu live nodes: at most %u cells of a group per node, "
		        "fault tolerance %u nodes",
		        nodes, sl->max_per_node, ft);
}

int
dn_coord_group_open(struct dn_coord_write *w, uint32_t gi, char *msg, size_t cap)
{
	struct cgroup *g = calloc(1, sizeof(*g));
	int rc;

	if (!g) {
		snprintf(msg, cap, "out of memory");
		return -ENOMEM;
	}
	g->idx = gi;
	rc = zc_place_group(zc_place_group_key(w->id, gi), w->view->names, (unsigned)w->view->n,
	                    w->k, w->m, w->self, &g->sl);
	if (rc) {
		free(g);
		snprintf(msg, cap, "no placement for %u+%u over %zu live nodes", w->k, w->m,
		         w->view->n);
		return ZC_E(ZC_UNAVAILABLE);
	}
	note_tolerance(w->c, &g->sl, w->view->n);
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
	pthread_mutex_unlock(&w->mu);
	if (rc)
		snprintf(msg, cap,
		         "write quorum not met: group %" PRIu32 " has %u of %u cells (quorum %u)",
		         gi, w->n - g->nfailed, w->n, w->quorum);
	return rc;
}
