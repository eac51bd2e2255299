/* cl_health_zones: how many whole zones may fail (cl_health.h), by placing a group over the
 * live nodes as a coordinator would (zc_place_spread) and losing its fullest zones. */
#include <errno.h>
#include <stdlib.h>

#include "cl_health.h"
#include "zc_place.h"

int
cl_health_zone_tolerance(const struct cl_health *h, unsigned k, unsigned m, bool after,
                         unsigned *zones)
{
	struct zc_place_node *pn = calloc(h->nnodes ? h->nnodes : 1, sizeof(*pn));
	struct zc_place_slots sl;
	unsigned n = 0;
	int t = -1;

	*zones = 0;
	if (!pn)
		return -1;
	for (size_t i = 0; i < h->nnodes; i++) {
		const struct cl_health_node *nd = &h->nodes[i];

		if (!nd->live || (after && nd->stopping))
			continue;
		pn[n].name = nd->name;
		pn[n].zone = nd->zone; /* NULL (no registration read): its own */
		pn[n].weight = nd->zone ? nd->weight : CL_REC_WEIGHT_UNKNOWN;
		n++;
	}
	*zones = zc_place_zones(pn, n);
	/* every group over one view spreads alike (zc_place_spread), so any key tells */
	if (n && zc_place_spread(zc_place_group_key(0, 0), pn, n, k, m, -1, &sl) == 0)
		t = zc_place_zone_tolerance(&sl, pn, k);
	free(pn);
	return t;
}
