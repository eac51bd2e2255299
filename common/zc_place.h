/*
 * zc_place: rendezvous (highest-random-weight) placement over a list of nodes named by
 * strings. The gateway uses it to pick the datanode for bucket/key (single-node mode: the
 * --datanode list; cluster mode: the coordinator among the live nodes), a coordinator to
 * pick the k+m nodes of each block group (docs/cluster.md, Placement).
 *
 * Pure functions of their arguments, no I/O, any thread. Node names must be distinct;
 * the order of the list does not matter (except for ties, which need equal 64-bit weights).
 */
#ifndef ZEST_ZC_PLACE_H
#define ZEST_ZC_PLACE_H

#include <stddef.h>
#include <stdint.h>

#define ZC_PLACE_MAX_SLOTS 32 /* k + m, as EC_MAX_CELLS */

/*
 * The placement key of a byte string: 64-bit FNV-1a, chained (pass the previous result as
 * h; start with ZC_PLACE_SEED). s3gw hashes bucket (with its NUL) then key this way, and
 * multipart upload ids carry that value, so it never changes.
 */
#define ZC_PLACE_SEED 0xcbf29ce484222325ull
uint64_t zc_place_hash(uint64_t h, const void *p, size_t n);

/* The placement key of a block group: the hash of the extent id and the group number
 * (little-endian bytes), as the coordinator ranks them. */
uint64_t zc_place_group_key(uint64_t extent_id, uint32_t group);

/* The weight of node for key; the highest weight wins. */
uint64_t zc_place_weight(uint64_t key, const char *node);

/* The index in [0, n) of the node with the highest weight for key; n >= 1. Removing or
 * adding one node moves only the keys that node owned or wins. */
unsigned zc_place_first(uint64_t key, const char *const *nodes, unsigned n);

/*
 * All n nodes by descending weight for key: order[0] is zc_place_first(), order[1] the
 * node that takes over when it is gone, and so on (the gateway tries them in this order).
 * order has room for n. Returns 0, -EINVAL (n == 0) or -ENOMEM.
 */
int zc_place_rank(uint64_t key, const char *const *nodes, unsigned n, unsigned *order);

/* Where the cells of one block group go. */
struct zc_place_slots {
	unsigned node[ZC_PLACE_MAX_SLOTS]; /* cell i -> index into the node list */
	unsigned nslots;                   /* k + m */
	unsigned max_per_node;             /* 1 with n >= k + m, else ceil((k + m) / n) */
};

/*
 * Place the k + m cells of a group on n nodes. Each slot in turn takes the node of highest
 * weight for (key, slot) among the nodes not yet taken: so with n >= k + m every cell is on
 * its own node, and a node that joins or leaves changes only the groups whose slots it
 * wins or held (the other slots of such a group move only when the slot that changed takes
 * a node a later slot held). With n < k + m the slots are taken in rounds of n, each round
 * node-distinct: a node holds ceil((k + m) / n) or one fewer, the spread that loses the
 * fewest cells to any t nodes (docs/cluster.md, "The write quorum").
 *
 * self: the index of the calling node (the coordinator), or -1. When it won no slot, it
 * takes slot 0 (so one cell of every group it coordinates stays local).
 *
 * Returns 0, or -EINVAL (n == 0, k == 0, k + m > ZC_PLACE_MAX_SLOTS, self >= n).
 */
int zc_place_group(uint64_t key, const char *const *nodes, unsigned n, unsigned k, unsigned m,
                   int self, struct zc_place_slots *out);

/* Set sl->max_per_node from sl->node[0 .. nslots): the most slots one node holds. */
void zc_place_count_per_node(struct zc_place_slots *sl);

/*
 * How many holders of a group's cells may be lost with at least k of its `left` cells
 * left, the worst case: cnt[0 .. n) the cells each holder (a node, a zone) has, reordered.
 * The node and the zone tolerances both count so.
 */
int zc_place_losable(unsigned *cnt, unsigned n, unsigned left, unsigned k);

/* The weight of node for slot `slot` of the group of key, as zc_place_group ranks them. */
uint64_t zc_place_slot_weight(uint64_t key, const char *node, unsigned slot);

/* One candidate node of zc_place_spread. */
struct zc_place_node {
	const char *name;
	const char *zone; /* failure domain; NULL: a zone of its own */
	uint64_t weight;  /* relative share of new cells (free bytes); 0: takes none */
};

/*
 * Place the k + m cells of a group over weighted nodes in zones (zc_place_spread.c). Each
 * slot in turn takes, among the nodes of non-zero weight, one holding the fewest cells of
 * the group so far, then of those one in the zone holding the fewest, then the highest
 * weighted rendezvous score -weight / ln(u), u the slot's hash in (0, 1) (a node's share
 * of a slot is its share of the weight). So with at least k + m nodes every cell is on its
 * own node, and when each zone has at least ceil((k + m) / zones) nodes no zone holds more
 * than that many cells; node-distinctness comes first when the zones are uneven. With
 * fewer nodes than cells they take turns, as in zc_place_group.
 *
 * With every weight equal and every node its own zone the result is zc_place_group's,
 * exactly. self as in zc_place_group (a node of weight 0 is never forced in): when it won
 * no slot it takes the first slot of its zone, else slot 0, so the zone counts stay.
 *
 * Returns 0, -EINVAL (as zc_place_group), or -ENOSPC (every weight 0).
 */
int zc_place_spread(uint64_t key, const struct zc_place_node *nodes, unsigned n, unsigned k,
                    unsigned m, int self, struct zc_place_slots *out);

/* The number of distinct zones among nodes of non-zero weight (NULL zone: the name). */
unsigned zc_place_zones(const struct zc_place_node *nodes, unsigned n);

/* How many whole zones the group sl (over nodes) may lose with k of its cells left: the
 * worst zones are those holding the most. -1 when it holds fewer than k cells. */
int zc_place_zone_tolerance(const struct zc_place_slots *sl, const struct zc_place_node *nodes,
                            unsigned k);

#endif
