/*
 * zc_place_spread: a group's cells over weighted nodes in failure domains (zc_place.h).
 * The weighted rendezvous of Schindelhauer and Schomaker: a node's score for a slot is
 * -w / ln(u) with u its hash for the slot in (0, 1); the highest wins, so a node wins a
 * slot with probability w / (sum of w), and a weight change moves only the slots whose
 * winner changes.
 */
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "zc_place.h"

static const char *
zone_of(const struct zc_place_node *nd)
{
	return nd->zone ? nd->zone : nd->name;
}

static bool
same_zone(const struct zc_place_node *a, const struct zc_place_node *b)
{
	if (a == b)
		return true;
	if (!a->zone && !b->zone)
		return false; /* distinct nodes, each a zone of its own */
	return strcmp(zone_of(a), zone_of(b)) == 0;
}

static double
score(uint64_t w, uint64_t h)
{
	double u = ((double)(h >> 11) + 0.5) * 0x1p-53; /* in (0, 1) */

	return (double)w / -log(u);
}

/* Does (wa, ha) beat (wb, hb)? Equal weights compare the hashes themselves: exact, and the
 * order the scores would give, so equal weights rank as zc_place_group does. */
static bool
beats(uint64_t wa, uint64_t ha, uint64_t wb, uint64_t hb)
{
	if (wa == wb)
		return ha > hb;
	return score(wa, ha) > score(wb, hb);
}

unsigned
zc_place_zones(const struct zc_place_node *nodes, unsigned n)
{
	unsigned z = 0;

	for (unsigned i = 0; i < n; i++) {
		unsigned j;

		if (!nodes[i].weight)
			continue;
		for (j = 0; j < i; j++)
			if (nodes[j].weight && same_zone(&nodes[i], &nodes[j]))
				break;
		z += j == i;
	}
	return z;
}

int
zc_place_spread(uint64_t key, const struct zc_place_node *nodes, unsigned n, unsigned k, unsigned m,
                int self, struct zc_place_slots *out)
{
	unsigned w = k + m;
	bool any_weight = false, self_in = false;

	if (n == 0 || k == 0 || w > ZC_PLACE_MAX_SLOTS || (self >= 0 && (unsigned)self >= n))
		return -EINVAL;
	for (unsigned i = 0; i < n && !any_weight; i++)
		any_weight = nodes[i].weight != 0;
	if (!any_weight)
		return -ENOSPC;
	memset(out, 0, sizeof(*out));
	out->nslots = w;
	for (unsigned s = 0; s < w; s++) {
		unsigned who = 0, best_nc = 0, best_zc = 0;
		uint64_t best_h = 0;
		bool any = false;

		for (unsigned i = 0; i < n; i++) {
			unsigned nc = 0, zc = 0;
			uint64_t h;

			if (!nodes[i].weight)
				continue;
			/* the group's cells so far on this node and in its zone: at most 32 */
			for (unsigned t = 0; t < s; t++) {
				nc += out->node[t] == i;
				zc += same_zone(&nodes[out->node[t]], &nodes[i]);
			}
			if (any && (nc > best_nc || (nc == best_nc && zc > best_zc)))
				continue;
			h = zc_place_slot_weight(key, nodes[i].name, s);
			if (any && nc == best_nc && zc == best_zc &&
			    !beats(nodes[i].weight, h, nodes[who].weight, best_h))
				continue;
			who = i;
			best_nc = nc;
			best_zc = zc;
			best_h = h;
			any = true;
		}
		out->node[s] = who;
		self_in |= self >= 0 && who == (unsigned)self;
	}
	if (self >= 0 && !self_in && nodes[self].weight) {
		/* self won no slot, so it is not in the group: swapping it for a node of its
		 * own zone (or, none there, for slot 0's) keeps both spreads */
		unsigned t = 0;

		while (t < w && !same_zone(&nodes[out->node[t]], &nodes[self]))
			t++;
		out->node[t < w ? t : 0] = (unsigned)self;
	}
	zc_place_count_per_node(out);
	return 0;
}

int
zc_place_zone_tolerance(const struct zc_place_slots *sl, const struct zc_place_node *nodes,
                        unsigned k)
{
	unsigned cnt[ZC_PLACE_MAX_SLOTS], nz = 0, left = sl->nslots;

	if (left < k)
		return -1;
	/* cells per zone, counted at each zone's first slot */
	for (unsigned s = 0; s < sl->nslots; s++) {
		unsigned u;

		for (u = 0; u < s; u++)
			if (same_zone(&nodes[sl->node[u]], &nodes[sl->node[s]]))
				break;
		if (u < s)
			continue;
		cnt[nz] = 0;
		for (u = s; u < sl->nslots; u++)
			cnt[nz] += same_zone(&nodes[sl->node[u]], &nodes[sl->node[s]]);
		nz++;
	}
	return zc_place_losable(cnt, nz, left, k);
}
