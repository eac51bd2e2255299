/* Weighted placement over zones (zc_place_spread, common/zc_place.h): zc_place_group's
 * result with equal weights and a zone per node, cells spread evenly over zones, shares
 * proportional to the weights, and a node of weight 0 never chosen. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "zc_place.h"

#define MAXN 40

static char names[MAXN][32], zones[MAXN][16];
static const char *names_p[MAXN];

static void
make(struct zc_place_node *nd, unsigned n, unsigned nzones, uint64_t weight)
{
	for (unsigned i = 0; i < n; i++) {
		snprintf(names[i], sizeof(names[i]), "dn-%02u", i);
		snprintf(zones[i], sizeof(zones[i]), "rack-%u", nzones ? i % nzones : i);
		names_p[i] = names[i];
		nd[i] = (struct zc_place_node){ .name = names[i],
			                        .zone = nzones ? zones[i] : NULL,
			                        .weight = weight };
	}
}

static void
counts(const struct zc_place_slots *p, const struct zc_place_node *nd, unsigned n,
       unsigned *max_zone, bool *distinct)
{
	*max_zone = 0;
	*distinct = true;
	for (unsigned s = 0; s < p->nslots; s++) {
		unsigned z = 0;

		assert_true(p->node[s] < n);
		for (unsigned t = 0; t < p->nslots; t++) {
			z += !strcmp(
			        nd[p->node[t]].zone ? nd[p->node[t]].zone : nd[p->node[t]].name,
			        nd[p->node[s]].zone ? nd[p->node[s]].zone : nd[p->node[s]].name);
			if (t != s && p->node[t] == p->node[s])
				*distinct = false;
		}
		if (z > *max_zone)
			*max_zone = z;
	}
}

/* Equal weights, a zone per node (NULL zones, and named zones one per node): exactly
 * zc_place_group, with and without a coordinator, with fewer and more nodes than cells. */
static void
test_identity(void **state)
{
	static const unsigned km[][2] = { { 4, 2 }, { 1, 0 }, { 3, 2 }, { 8, 3 }, { 10, 4 } };
	struct zc_place_node nd[MAXN];

	(void)state;
	for (unsigned n = 1; n <= MAXN; n++)
		for (unsigned c = 0; c < sizeof(km) / sizeof(km[0]); c++)
			for (uint64_t id = 0; id < 200; id++) {
				uint64_t key = zc_place_group_key(id * 31 + n, (uint32_t)id);
				int self = id % 3 ? (int)(id % n) : -1;
				struct zc_place_slots p, q;

				make(nd, n, id % 2 ? n : 0, 1000 + n);
				assert_int_equal(zc_place_group(key, names_p, n, km[c][0], km[c][1],
				                                self, &p),
				                 0);
				assert_int_equal(
				        zc_place_spread(key, nd, n, km[c][0], km[c][1], self, &q),
				        0);
				assert_memory_equal(&p, &q, sizeof(p));
			}
}

/* 9 nodes in 3 zones, RS(4,2): two cells per zone, each on its own node; 12 in 4 zones:
 * at most 2 (ceil(6 / 4)); 5 zones of 2, RS(8,2): exactly 2 each. */
static void
test_spread(void **state)
{
	static const unsigned cases[][4] = {
		/* n, zones, k, m */
		{ 9, 3, 4, 2 }, { 12, 4, 4, 2 }, { 10, 5, 8, 2 }, { 16, 4, 10, 4 }, { 6, 2, 4, 2 },
	};
	struct zc_place_node nd[MAXN];

	(void)state;
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		unsigned n = cases[c][0], z = cases[c][1], w = cases[c][2] + cases[c][3];
		unsigned cap = (w + z - 1) / z;

		make(nd, n, z, 1ull << 40);
		for (unsigned i = 0; i < n; i++)
			nd[i].weight += (uint64_t)i << 30; /* unequal weights: the spread holds */
		assert_int_equal(zc_place_zones(nd, n), z);
		for (uint64_t id = 0; id < 3000; id++) {
			struct zc_place_slots p;
			unsigned maxz;
			bool distinct;

			assert_int_equal(zc_place_spread(zc_place_group_key(id, 0), nd, n,
			                                 cases[c][2], cases[c][3],
			                                 id % 4 ? (int)(id % n) : -1, &p),
			                 0);
			counts(&p, nd, n, &maxz, &distinct);
			assert_true(distinct);
			assert_true(maxz <= cap);
			assert_int_equal(p.max_per_node, 1);
			if (c == 0) /* 2 cells in each of 3 zones: one zone may go */
				assert_int_equal(zc_place_zone_tolerance(&p, nd, 4), 1);
			if (c == 3) /* 4, 4, 3, 3 of RS(10,4): one */
				assert_int_equal(zc_place_zone_tolerance(&p, nd, 10), 1);
			if (c == 4) /* 3 and 3 of RS(4,2): none */
				assert_int_equal(zc_place_zone_tolerance(&p, nd, 4), 0);
		}
	}
}

/* Uneven zones: one zone of one node, one of five, RS(4,2): node-distinct first (no node
 * holds two cells, so losing any node costs one); the big zone takes the rest. */
static void
test_uneven_zones(void **state)
{
	struct zc_place_node nd[6];

	(void)state;
	make(nd, 6, 2, 100);
	for (unsigned i = 0; i < 6; i++)
		nd[i].zone = i == 0 ? "small" : "big";
	for (uint64_t id = 0; id < 1000; id++) {
		struct zc_place_slots p;
		unsigned maxz;
		bool distinct;

		assert_int_equal(zc_place_spread(zc_place_group_key(id, 1), nd, 6, 4, 2, -1, &p),
		                 0);
		counts(&p, nd, 6, &maxz, &distinct);
		assert_true(distinct);
		assert_int_equal(maxz, 5);
	}
}

/* A node wins slot 0 in proportion to its weight (within 5% over 200k keys), and a node of
 * weight 0 never holds a cell, even as the coordinator. */
static void
test_weights(void **state)
{
	static const uint64_t wt[8] = { 1, 2, 3, 4, 0, 4, 8, 2 };
	struct zc_place_node nd[8];
	unsigned first[8] = { 0 }, cells[8] = { 0 };
	uint64_t sum = 0;
	const unsigned nk = 200000;

	(void)state;
	make(nd, 8, 0, 0);
	for (unsigned i = 0; i < 8; i++) {
		nd[i].weight = wt[i] << 30;
		sum += wt[i];
	}
	for (unsigned id = 0; id < nk; id++) {
		struct zc_place_slots p;

		assert_int_equal(zc_place_spread(zc_place_group_key(id, 7), nd, 8, 1, 0, -1, &p),
		                 0);
		first[p.node[0]]++;
		assert_int_equal(
		        zc_place_spread(zc_place_group_key(id, 7), nd, 8, 4, 2, (int)(id % 8), &p),
		        0);
		for (unsigned s = 0; s < 6; s++)
			cells[p.node[s]]++;
	}
	for (unsigned i = 0; i < 8; i++) {
		double want = (double)nk * (double)wt[i] / (double)sum;

		if (!wt[i]) {
			assert_int_equal(first[i], 0);
			assert_int_equal(cells[i], 0);
			continue;
		}
		assert_true(first[i] > want * 0.95 && first[i] < want * 1.05);
	}
	/* with 6 of 7 nodes in each group the heavier still hold more */
	assert_true(cells[6] > cells[0]);
}

/* Fewer nodes of weight than cells: they take turns (rounds), the full ones sit out; all
 * full: -ENOSPC; bad arguments: -EINVAL. */
static void
test_full_and_errors(void **state)
{
	struct zc_place_node nd[6];
	struct zc_place_slots p;

	(void)state;
	make(nd, 6, 3, 10);
	nd[1].weight = nd[4].weight = 0;
	for (uint64_t id = 0; id < 500; id++) {
		assert_int_equal(zc_place_spread(zc_place_group_key(id, 0), nd, 6, 4, 2, 1, &p), 0);
		for (unsigned s = 0; s < 6; s++)
			assert_true(p.node[s] != 1 && p.node[s] != 4);
		assert_int_equal(p.max_per_node, 2);
	}
	/* 4 nodes in 2 zones, 3 cells each: no zone may go; fewer cells than k: -1 */
	assert_int_equal(zc_place_zone_tolerance(&p, nd, 3), 1);
	assert_int_equal(zc_place_zone_tolerance(&p, nd, 4), 0);
	assert_int_equal(zc_place_zone_tolerance(&p, nd, 7), -1);
	for (unsigned i = 0; i < 6; i++)
		nd[i].weight = 0;
	assert_int_equal(zc_place_zones(nd, 6), 0);
	assert_int_equal(zc_place_spread(1, nd, 6, 4, 2, -1, &p), -ENOSPC);
	nd[0].weight = 1;
	assert_int_equal(zc_place_spread(1, nd, 0, 4, 2, -1, &p), -EINVAL);
	assert_int_equal(zc_place_spread(1, nd, 6, 0, 2, -1, &p), -EINVAL);
	assert_int_equal(zc_place_spread(1, nd, 6, 30, 3, -1, &p), -EINVAL);
	assert_int_equal(zc_place_spread(1, nd, 6, 4, 2, 6, &p), -EINVAL);
	assert_int_equal(zc_place_spread(1, nd, 6, 4, 2, -1, &p), 0);
	assert_int_equal(p.max_per_node, 6);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_identity),        cmocka_unit_test(test_spread),
		cmocka_unit_test(test_uneven_zones),    cmocka_unit_test(test_weights),
		cmocka_unit_test(test_full_and_errors),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
