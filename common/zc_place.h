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

#endif
