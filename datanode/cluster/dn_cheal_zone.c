/*
 * dn_cheal_zone: where a rebuilt or moved cell should go first, by failure domain and
 * space: the rendezvous ranking of the group reordered (stably) so that nodes in zones
 * holding fewer of the group's other cells come first and full nodes (no free space above
 * their reserve) last. The group then keeps the spread zc_place_spread gave it.
 */
#include <stdlib.h>
#include <string.h>

#include "dn_cheal_internal.h"

/* The zone of v's node i (its name when it registered none). */
static const char *
zone_at(const struct cl_members_view *v, size_t i)
{
	const char *z = v->nodes[i].zone;

	return z && z[0] ? z : v->names[i];
}

/* Cells of gr other than c, on live nodes of v, in zone. */
static unsigned
zone_cells(const struct cl_members_view *v, const struct cl_rec_extent *e,
           const struct cl_rec_group *gr, unsigned c, const char *zone)
{
	unsigned n = 0;

	for (unsigned d = 0; d < e->k + e->m; d++) {
		int i;

		if (d == c || (gr->missing & (1u << d)))
			continue;
		i = chl_view_find(v, e->nodes[gr->cell[d]]);
		n += i >= 0 && strcmp(zone_at(v, (size_t)i), zone) == 0;
	}
	return n;
}

void
chl_zone_order(const struct cl_members_view *v, const struct cl_rec_extent *e,
               const struct cl_rec_group *gr, unsigned c, unsigned *order)
{
	unsigned *key = malloc(v->n ? v->n * sizeof(*key) : 1);

	if (!key)
		return; /* the plain ranking, still node-distinct */
	for (size_t i = 0; i < v->n; i++) {
		const struct cl_rec_node *nd = &v->nodes[order[i]];

		key[i] = zone_cells(v, e, gr, c, zone_at(v, order[i])) +
		         (cl_rec_node_weight(nd) ? 0 : CL_REC_MAX_CELLS + 1);
	}
	/* insertion sort: stable, and the views are small */
	for (size_t i = 1; i < v->n; i++) {
		unsigned o = order[i], k = key[i];
		size_t j = i;

		for (; j > 0 && key[j - 1] > k; j--) {
			order[j] = order[j - 1];
			key[j] = key[j - 1];
		}
		order[j] = o;
		key[j] = k;
	}
	free(key);
}
