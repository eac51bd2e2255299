/* Rendezvous placement (common/zc_place.h): the hash s3gw has always used, node-distinct
 * groups, what moves when a node joins or leaves, spread with fewer nodes than cells, and
 * balance over many keys. */
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

#define NKEYS 10000

static char names[40][32];
static const char *nodes[40];

static void
make_nodes(void)
{
	for (int i = 0; i < 40; i++) {
		snprintf(names[i], sizeof(names[i]), "dn-%02d", i);
		nodes[i] = names[i];
	}
}

static uint64_t
bkey(const char *bucket, const char *key)
{
	return zc_place_hash(zc_place_hash(ZC_PLACE_SEED, bucket, strlen(bucket) + 1), key,
	                     strlen(key));
}

/* Values computed with s3gw/s3_place.c before the hash moved here: single-node gateways
 * placed their objects and multipart upload ids carry these numbers, so they never change. */
static void
test_hash_is_s3gws(void **state)
{
	static const char *const dn[] = { "10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.3:7000",
		                          "10.0.0.4:7000" };
	static const struct {
		const char *key;
		uint64_t hash, w[4];
	} golden[] = {
		{ "a",
		  0x52e51b81f750ae9cull,
		  { 0x1144e1b8ca1bef0aull, 0xab727394c68e9bf3ull, 0xa64b67ae2afd3e05ull,
		    0x11c2c1cdf5b448e0ull } },
		{ "photos/2024/cat.jpg",
		  0x33ed483a9f4d9b57ull,
		  { 0xbecd62262aea1d4bull, 0x6914dc4ac6390912ull, 0x64186e0d812b3374ull,
		    0x1da51bf8b3f6beafull } },
		{ "",
		  0x8e6ec24c374cb095ull,
		  { 0xcea83ad4cb65e36bull, 0x75a9dfa600e5d104ull, 0x603a125850d5ebcdull,
		    0x77bb2f647050f53full } },
	};

	(void)state;
	for (size_t g = 0; g < sizeof(golden) / sizeof(golden[0]); g++) {
		uint64_t h = bkey("bucket", golden[g].key);

		assert_true(h == golden[g].hash);
		for (int i = 0; i < 4; i++)
			assert_true(zc_place_weight(h, dn[i]) == golden[g].w[i]);
	}
	assert_int_equal(zc_place_first(bkey("bucket", "a"), dn, 4), 1);
	assert_int_equal(zc_place_first(bkey("bucket", ""), dn, 4), 0);
}

static void
test_rank(void **state)
{
	unsigned order[40];

	(void)state;
	for (int i = 0; i < 500; i++) {
		char key[32];
		uint64_t h;
		bool seen[40] = { false };

		snprintf(key, sizeof(key), "k%d", i);
		h = bkey("b", key);
		assert_int_equal(zc_place_rank(h, nodes, 17, order), 0);
		assert_int_equal(order[0], zc_place_first(h, nodes, 17));
		for (int j = 0; j < 17; j++) {
			assert_true(order[j] < 17);
			assert_false(seen[order[j]]);
			seen[order[j]] = true;
			if (j)
				assert_true(zc_place_weight(h, nodes[order[j - 1]]) >
				            zc_place_weight(h, nodes[order[j]]));
		}
		/* the runner-up is who wins once the first is gone */
		{
			const char *rest[40];
			unsigned r = 0, won;

			for (int j = 0; j < 17; j++)
				if ((unsigned)j != order[0])
					rest[r++] = nodes[j];
			won = zc_place_first(h, rest, r);
			assert_string_equal(rest[won], nodes[order[1]]);
		}
	}
	assert_int_equal(zc_place_rank(1, nodes, 0, order), -EINVAL);
}

static void
check_distinct(const struct zc_place_slots *p, unsigned n)
{
	for (unsigned s = 0; s < p->nslots; s++) {
		assert_true(p->node[s] < n);
		for (unsigned t = 0; t < s; t++)
			assert_int_not_equal(p->node[s], p->node[t]);
	}
}

static void
test_group_distinct(void **state)
{
	static const unsigned km[][2] = { { 4, 2 }, { 6, 3 }, { 10, 4 }, { 2, 1 }, { 1, 0 } };

	(void)state;
	for (size_t c = 0; c < sizeof(km) / sizeof(km[0]); c++) {
		unsigned k = km[c][0], m = km[c][1];

		for (unsigned n = k + m; n <= 40; n += 7) {
			for (uint64_t id = 1; id < 300; id++) {
				struct zc_place_slots p, q;
				uint64_t key = zc_place_group_key(id * 0x9e3779b97f4a7c15ull, 3);

				assert_int_equal(zc_place_group(key, nodes, n, k, m, -1, &p), 0);
				assert_int_equal(p.nslots, k + m);
				assert_int_equal(p.max_per_node, 1);
				check_distinct(&p, n);
				/* deterministic, and each group of an extent placed on its own */
				assert_int_equal(zc_place_group(key, nodes, n, k, m, -1, &q), 0);
				assert_memory_equal(&p, &q, sizeof(p));
			}
		}
	}
	assert_true(zc_place_group_key(7, 0) != zc_place_group_key(7, 1));
	assert_true(zc_place_group_key(7, 0) != zc_place_group_key(8, 0));
}

/* The slots whose node (compared by name: the lists differ by one node, so indices shift)
 * differs between placement a over na and b over nb; *on_changed: a's slots on `changed`. */
static unsigned
moved_slots(const struct zc_place_slots *a, const char *const *na, const struct zc_place_slots *b,
            const char *const *nb, const char *changed, unsigned *on_changed)
{
	unsigned moved = 0;

	*on_changed = 0;
	for (unsigned s = 0; s < a->nslots; s++) {
		bool was_changed = strcmp(na[a->node[s]], changed) == 0;

		if (was_changed)
			(*on_changed)++;
		if (strcmp(na[a->node[s]], nb[b->node[s]]) != 0)
			moved++;
		else
			assert_false(was_changed); /* the node that left cannot stay */
	}
	return moved;
}

/*
 * A node leaves (and then joins back): a group none of whose slots it held is untouched;
 * a group that held it moves that slot, and other slots only when the slot that moved took
 * a node a later slot had. Measured over 10k groups on 12 nodes, RS(4,2): the moves are
 * 1/12 of all slots plus the knock-on moves, bounded here by half as many again.
 */
static void
test_group_stability(void **state)
{
	const unsigned n = 12, k = 4, m = 2;
	const char *less[40];
	unsigned necessary = 0, moved_total = 0, untouched = 0;

	(void)state;
	for (unsigned i = 0, j = 0; i < n; i++)
		if (i != 5)
			less[j++] = nodes[i];
	for (uint64_t id = 0; id < NKEYS; id++) {
		struct zc_place_slots full, part;
		uint64_t key = zc_place_group_key(id, 0);
		unsigned on, moved;

		assert_int_equal(zc_place_group(key, nodes, n, k, m, -1, &full), 0);
		assert_int_equal(zc_place_group(key, less, n - 1, k, m, -1, &part), 0);
		moved = moved_slots(&full, nodes, &part, less, nodes[5], &on);
		if (on == 0) {
			assert_int_equal(moved, 0);
			untouched++;
		}
		necessary += on;
		moved_total += moved;
		/* joining is the same comparison the other way round */
		assert_int_equal(moved_slots(&part, less, &full, nodes, nodes[5], &on), moved);
		assert_int_equal(on, 0);
	}
	print_message("leave: %u of %u slots held by the node, %u moved (%.3f of all, ideal "
	              "%.3f); %u of %u groups untouched\n",
	              necessary, NKEYS * (k + m), moved_total,
	              (double)moved_total / (NKEYS * (k + m)), 1.0 / n, untouched, NKEYS);
	assert_true(necessary > NKEYS * (k + m) / n * 9 / 10 &&
	            necessary < NKEYS * (k + m) / n * 11 / 10);
	assert_true(moved_total >= necessary);
	assert_true(moved_total < necessary * 3 / 2);
}

/* Fewer nodes than cells: rounds of n distinct nodes, so every node holds floor or ceil of
 * (k+m)/n cells (the nodes that spread survives losing: test_dn_coord_quorum). */
static void
test_group_fewer_nodes(void **state)
{
	static const unsigned km[][2] = { { 4, 2 }, { 6, 3 }, { 10, 4 } };

	(void)state;
	for (size_t c = 0; c < sizeof(km) / sizeof(km[0]); c++) {
		unsigned k = km[c][0], m = km[c][1], w = k + m;

		for (unsigned n = 1; n < w; n++) {
			unsigned ceil_ = (w + n - 1) / n;

			for (uint64_t id = 0; id < 200; id++) {
				struct zc_place_slots p;
				unsigned cnt[40] = { 0 };

				assert_int_equal(zc_place_group(zc_place_group_key(id, 1), nodes, n,
				                                k, m, -1, &p),
				                 0);
				for (unsigned s = 0; s < w; s++)
					cnt[p.node[s]]++;
				for (unsigned i = 0; i < n; i++)
					assert_true(cnt[i] == w / n || cnt[i] == ceil_);
				/* each round is node-distinct */
				for (unsigned s = 0; s < w; s++)
					for (unsigned t = s - s % n; t < s; t++)
						assert_int_not_equal(p.node[s], p.node[t]);
				assert_int_equal(p.max_per_node, ceil_);
			}
		}
	}
}

/* 10k objects over 8 nodes: coordinators and cells within 10% (5%) of even; expected
 * deviations are ~3% and ~0.6% (one standard deviation). */
static void
test_balance(void **state)
{
	const unsigned n = 8, k = 4, m = 2;
	unsigned first[40] = { 0 }, cells[40] = { 0 }, slot0[40] = { 0 };

	(void)state;
	for (int i = 0; i < NKEYS; i++) {
		char key[32];
		struct zc_place_slots p;

		snprintf(key, sizeof(key), "obj-%d", i);
		first[zc_place_first(bkey("bucket", key), nodes, n)]++;
		assert_int_equal(zc_place_group(zc_place_group_key((uint64_t)i * 7919, 0), nodes, n,
		                                k, m, -1, &p),
		                 0);
		for (unsigned s = 0; s < k + m; s++)
			cells[p.node[s]]++;
		slot0[p.node[0]]++;
	}
	for (unsigned i = 0; i < n; i++) {
		unsigned ce = NKEYS * (k + m) / n, fe = NKEYS / n;

		assert_true(first[i] > fe * 9 / 10 && first[i] < fe * 11 / 10);
		assert_true(slot0[i] > fe * 9 / 10 && slot0[i] < fe * 11 / 10);
		assert_true(cells[i] > ce * 95 / 100 && cells[i] < ce * 105 / 100);
	}
}

/* The coordinator keeps the slot it won, or takes slot 0 when it won none. */
static void
test_group_self(void **state)
{
	unsigned took0 = 0;

	(void)state;
	for (uint64_t id = 0; id < 2000; id++) {
		struct zc_place_slots p, q;
		uint64_t key = zc_place_group_key(id, 2);
		int self = (int)(id % 10);
		bool won = false;

		assert_int_equal(zc_place_group(key, nodes, 10, 4, 2, -1, &p), 0);
		assert_int_equal(zc_place_group(key, nodes, 10, 4, 2, self, &q), 0);
		check_distinct(&q, 10);
		for (unsigned s = 0; s < 6; s++)
			won |= p.node[s] == (unsigned)self;
		if (won) {
			assert_memory_equal(&p, &q, sizeof(p));
		} else {
			took0++;
			assert_int_equal(q.node[0], self);
			for (unsigned s = 1; s < 6; s++)
				assert_int_equal(q.node[s], p.node[s]);
		}
		assert_int_equal(q.max_per_node, 1);
	}
	assert_true(took0 > 600 && took0 < 1000); /* 4 in 10 coordinators win no slot */
}

static void
test_group_errors(void **state)
{
	struct zc_place_slots p;

	(void)state;
	assert_int_equal(zc_place_group(1, nodes, 0, 4, 2, -1, &p), -EINVAL);
	assert_int_equal(zc_place_group(1, nodes, 6, 0, 2, -1, &p), -EINVAL);
	assert_int_equal(zc_place_group(1, nodes, 6, 30, 3, -1, &p), -EINVAL);
	assert_int_equal(zc_place_group(1, nodes, 6, 4, 2, 6, &p), -EINVAL);
	assert_int_equal(zc_place_group(1, nodes, 40, 30, 2, 39, &p), 0);
	check_distinct(&p, 40);
	assert_int_equal(zc_place_group(1, nodes, 1, 4, 2, 0, &p), 0);
	assert_int_equal(p.max_per_node, 6);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hash_is_s3gws),     cmocka_unit_test(test_rank),
		cmocka_unit_test(test_group_distinct),    cmocka_unit_test(test_group_stability),
		cmocka_unit_test(test_group_fewer_nodes), cmocka_unit_test(test_balance),
		cmocka_unit_test(test_group_self),        cmocka_unit_test(test_group_errors),
	};

	make_nodes();
	return cmocka_run_group_tests(tests, NULL, NULL);
}
