/* zc_place: rendezvous placement (zc_place.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "zc_place.h"

uint64_t
zc_place_hash(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	while (n--) {
		h ^= *b++;
		h *= 0x100000001b3ull;
	}
	return h;
}

/* splitmix64's finaliser: FNV alone leaves the high bits poorly mixed. */
static uint64_t
mix(uint64_t z)
{
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

uint64_t
zc_place_group_key(uint64_t extent_id, uint32_t group)
{
	uint8_t b[12];

	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(extent_id >> (8 * i));
	for (int i = 0; i < 4; i++)
		b[8 + i] = (uint8_t)(group >> (8 * i));
	return zc_place_hash(ZC_PLACE_SEED, b, sizeof(b));
}

static uint64_t
node_base(uint64_t key, const char *node)
{
	return zc_place_hash(key, node, strlen(node));
}

uint64_t
zc_place_weight(uint64_t key, const char *node)
{
	return mix(node_base(key, node));
}

/* The weight of a node for one slot of a group: splitmix64's stream seeded by the node's
 * hash, so the slots rank the nodes independently of each other. */
static uint64_t
slot_weight(uint64_t base, unsigned slot)
{
	return mix(base + (uint64_t)(slot + 1) * 0x9e3779b97f4a7c15ull);
}

uint64_t
zc_place_slot_weight(uint64_t key, const char *node, unsigned slot)
{
	return slot_weight(node_base(key, node), slot);
}

unsigned
zc_place_first(uint64_t key, const char *const *nodes, unsigned n)
{
	uint64_t best = 0;
	unsigned who = 0;

	for (unsigned i = 0; i < n; i++) {
		uint64_t w = zc_place_weight(key, nodes[i]);

		if (i == 0 || w > best) {
			best = w;
			who = i;
		}
	}
	return who;
}

struct ranked {
	uint64_t w;
	unsigned i;
};

static int
by_weight(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;

	if (x->w != y->w)
		return x->w > y->w ? -1 : 1;
	return x->i < y->i ? -1 : x->i > y->i; /* ties: the earlier index, as zc_place_first */
}

int
zc_place_rank(uint64_t key, const char *const *nodes, unsigned n, unsigned *order)
{
	struct ranked *r;

	if (n == 0)
		return -EINVAL;
	r = malloc(n * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (unsigned i = 0; i < n; i++) {
		r[i].w = zc_place_weight(key, nodes[i]);
		r[i].i = i;
	}
	qsort(r, n, sizeof(*r), by_weight);
	for (unsigned i = 0; i < n; i++)
		order[i] = r[i].i;
	free(r);
	return 0;
}

void
zc_place_count_per_node(struct zc_place_slots *sl)
{
	unsigned max = 0;

	/* cells per node, counted per slot: no per-node table */
	for (unsigned s = 0; s < sl->nslots; s++) {
		unsigned c = 0;

		for (unsigned t = 0; t < sl->nslots; t++)
			c += sl->node[t] == sl->node[s];
		if (c > max)
			max = c;
	}
	sl->max_per_node = max;
}

int
zc_place_losable(unsigned *cnt, unsigned n, unsigned left, unsigned k)
{
	int t = 0;

	/* the worst to lose hold the most: take them greedily while k cells are left (a
	 * selection sort: n <= ZC_PLACE_MAX_SLOTS) */
	for (unsigned a = 0; a < n; a++) {
		unsigned best = a;

		for (unsigned b = a + 1; b < n; b++)
			if (cnt[b] > cnt[best])
				best = b;
		if (left - cnt[best] < k)
			break;
		left -= cnt[best];
		cnt[best] = cnt[a];
		t++;
	}
	return t;
}

int
zc_place_group(uint64_t key, const char *const *nodes, unsigned n, unsigned k, unsigned m, int self,
               struct zc_place_slots *out)
{
	unsigned w = k + m;
	bool self_in = false;

	if (n == 0 || k == 0 || w > ZC_PLACE_MAX_SLOTS || (self >= 0 && (unsigned)self >= n))
		return -EINVAL;
	memset(out, 0, sizeof(*out));
	out->nslots = w;
	for (unsigned s = 0; s < w; s++) {
		/* rounds of n slots, node-distinct within a round; the round's slots so far
		 * are [round, s): at most 32 to compare, so no per-node table */
		unsigned round = s - s % n, who = 0;
		uint64_t best = 0;
		bool any = false;

		for (unsigned i = 0; i < n; i++) {
			bool taken = false;
			uint64_t wt;

			for (unsigned t = round; t < s && !taken; t++)
				taken = out->node[t] == i;
			if (taken)
				continue;
			wt = slot_weight(node_base(key, nodes[i]), s);
			if (!any || wt > best) {
				best = wt;
				who = i;
				any = true;
			}
		}
		out->node[s] = who;
		self_in |= self >= 0 && who == (unsigned)self;
	}
	if (self >= 0 && !self_in)
		out->node[0] = (unsigned)self; /* only possible with n > w: still node-distinct */
	zc_place_count_per_node(out);
	return 0;
}
