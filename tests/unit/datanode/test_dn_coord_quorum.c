/*
 * The cluster write quorum's measure (datanode/cluster/dn_coord_place.c, docs/cluster.md "The
 * write quorum"): dn_coord_tolerance, the nodes a block group survives losing, checked
 * against a brute-force reference that loses every subset of the live nodes:
 *   - over zc_place_group's placements on 1..k+m+3 nodes (with and without a coordinator),
 *     every cell durable and random cells failed;
 *   - over arbitrary (unbalanced) placements;
 *   - the cases docs/cluster.md names, and the ones where counting cells and counting
 *     nodes disagree (RS(4,2) on two nodes: six cells, no node may go);
 *   - dn_coord_place_check, the refusal at a Write's begin, over a live view of n nodes.
 * No I/O, no etcd: pure functions.
 */
#include "dn_rpc.h"
#include "rpc.h"

#include "dn_test.h"
#include "dn_coord_internal.h"

#define MAX_NODES 14 /* 2^14 subsets per reference call */

static const char *const names[MAX_NODES] = { "dn-1",  "dn-2",  "dn-3",  "dn-4", "dn-5",
	                                      "dn-6",  "dn-7",  "dn-8",  "dn-9", "dn-10",
	                                      "dn-11", "dn-12", "dn-13", "dn-14" };

/* The definition itself: the largest t such that losing ANY t of the nn nodes leaves at
 * least k durable cells; -1 when fewer than k are durable to begin with. */
static int
brute_tolerance(const unsigned *node, unsigned n, uint32_t durable, unsigned k, unsigned nn)
{
	int worst[MAX_NODES + 1]; /* per t: the fewest durable cells left by losing t nodes */

	for (unsigned t = 0; t <= nn; t++)
		worst[t] = 1 << 30;
	for (uint32_t lost = 0; lost < (1u << nn); lost++) {
		int left = 0;
		unsigned t = (unsigned)__builtin_popcount(lost);

		for (unsigned i = 0; i < n; i++)
			left += (durable & (1u << i)) && !(lost & (1u << node[i]));
		if (left < worst[t])
			worst[t] = left;
	}
	if (worst[0] < (int)k)
		return -1;
	for (unsigned t = 1; t <= nn; t++)
		if (worst[t] < (int)k)
			return (int)t - 1;
	return (int)nn;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t
next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void
check_one(const unsigned *node, unsigned n, uint32_t durable, unsigned k, unsigned nn)
{
	int got = dn_coord_tolerance(node, n, durable, k);
	int want = brute_tolerance(node, n, durable, k, nn);

	if (got != want) {
		fprintf(stderr, "k=%u n=%u nodes=%u durable=%#x:", k, n, nn, durable);
		for (unsigned i = 0; i < n; i++)
			fprintf(stderr, " %u", node[i]);
		fprintf(stderr, ": got %d, want %d\n", got, want);
	}
	CHECK_EQ(got, want);
}

static const unsigned schemes[][2] = { { 4, 2 }, { 6, 3 }, { 2, 1 }, { 1, 5 }, { 3, 3 },
	                               { 2, 2 }, { 8, 4 }, { 1, 1 }, { 5, 1 } };
#define NSCHEMES (sizeof(schemes) / sizeof(schemes[0]))

/* zc_place_group's placements, as the coordinator makes them. */
static void
test_placements(void)
{
	unsigned checked = 0;

	for (size_t s = 0; s < NSCHEMES; s++) {
		unsigned k = schemes[s][0], m = schemes[s][1], w = k + m;

		for (unsigned nn = 1; nn <= w + 3 && nn <= MAX_NODES; nn++)
			for (uint64_t id = 1; id <= 12; id++) {
				struct zc_place_slots sl;
				int self = id % 3 == 0 ? -1 : (int)(id % nn);
				uint32_t all = dn_coord_all_cells(w);

				CHECK_EQ(zc_place_group(zc_place_group_key(id, (uint32_t)id), names,
				                        nn, k, m, self, &sl),
				         0);
				check_one(sl.node, w, all, k, nn);
				/* cells failed at random, as peers do mid-write */
				for (int r = 0; r < 6; r++)
					check_one(sl.node, w, all & (uint32_t)next(), k, nn);
				checked += 7;
			}
	}
	printf("placements: %u cases checked\n", checked);
}

/* Any placement, balanced or not (a healed group, a record read back). */
static void
test_arbitrary(void)
{
	for (int r = 0; r < 3000; r++) {
		const unsigned *sc = schemes[next() % NSCHEMES];
		unsigned k = sc[0], w = sc[0] + sc[1], nn = 1 + (unsigned)(next() % 10);
		unsigned node[ZC_PLACE_MAX_SLOTS];
		uint32_t durable = next() % 4 ? dn_coord_all_cells(w) : (uint32_t)next();

		for (unsigned i = 0; i < w; i++)
			node[i] = (unsigned)(next() % nn);
		check_one(node, w, durable & dn_coord_all_cells(w), k, nn);
	}
}

/* Tolerance of a group placed by zc_place_group over nn nodes, every cell durable. */
static int
placed(unsigned k, unsigned m, unsigned nn)
{
	struct zc_place_slots sl;

	CHECK_EQ(zc_place_group(7, names, nn, k, m, -1, &sl), 0);
	return dn_coord_tolerance(sl.node, k + m, dn_coord_all_cells(k + m), k);
}

static void
test_named_cases(void)
{
	/* docs/cluster.md: RS(4,2) over six nodes survives two, over five, four and three
	 * one, over two none (three cells each: losing either leaves three of the four) */
	CHECK_EQ(placed(4, 2, 6), 2);
	CHECK_EQ(placed(4, 2, 5), 1);
	CHECK_EQ(placed(4, 2, 4), 1);
	CHECK_EQ(placed(4, 2, 3), 1);
	CHECK_EQ(placed(4, 2, 2), 0);
	CHECK_EQ(placed(4, 2, 1), 0);
	/* where m / (most cells on a node) undercounts: 6+3 over eight nodes holds 2,1,...,1
	 * and survives any two (three cells lost at most); 1+5 over four (2,2,1,1) any three */
	CHECK_EQ(placed(6, 3, 8), 2);
	CHECK_EQ(placed(1, 5, 4), 3);
	{
		/* counting cells and counting nodes disagree: 4+2 as 2,2,1,1 with a single cell
		 * failed on a node holding one leaves five cells (k + 1) on three nodes, two of
		 * them with two: losing one of those leaves three */
		const unsigned node[6] = { 0, 1, 2, 3, 0, 1 };

		CHECK_EQ(dn_coord_tolerance(node, 6, 0x3f, 4), 1);
		CHECK_EQ(dn_coord_tolerance(node, 6, 0x3b, 4), 0); /* cell 2 (node 2) failed */
		CHECK(!dn_coord_quorum_ok(node, 6, 0x3b, 4, 5));
		CHECK(dn_coord_quorum_ok(node, 6, 0x3b, 4, 4));
		CHECK_EQ(dn_coord_tolerance(node, 6, 0x0f, 4), 0);
		CHECK_EQ(dn_coord_tolerance(node, 6, 0x07, 4), -1);
		CHECK(!dn_coord_quorum_ok(node, 6, 0x07, 4, 4));
	}
	{
		/* 4+2 over two nodes, three cells each: six durable cells (>= k + 1) and no
		 * node may go; the default quorum refuses it, quorum k takes it */
		const unsigned node[6] = { 0, 1, 0, 1, 0, 1 };

		CHECK_EQ(dn_coord_tolerance(node, 6, 0x3f, 4), 0);
		CHECK(!dn_coord_quorum_ok(node, 6, 0x3f, 4, 5));
		CHECK(dn_coord_quorum_ok(node, 6, 0x3f, 4, 4));
	}
	/* all on one node: nothing may go; none durable */
	{
		const unsigned node[3] = { 5, 5, 5 };

		CHECK_EQ(dn_coord_tolerance(node, 3, 0x7, 2), 0);
		CHECK_EQ(dn_coord_tolerance(node, 3, 0x0, 2), -1);
		CHECK_EQ(dn_coord_tolerance(node, 3, 0x0, 1), -1);
	}
}

/* The check at a Write's begin over a live view of nn nodes (no peers dialled). */
static int
begin_check(unsigned k, unsigned m, unsigned quorum, unsigned nn, char *msg, size_t cap)
{
	struct cl_rec_node nodes[MAX_NODES];
	struct cl_members_view v = { .nodes = nodes, .n = nn, .names = names };
	struct dn_coord c;
	struct dn_coord_write w;

	memset(&c, 0, sizeof(c));
	memset(&w, 0, sizeof(w));
	memset(nodes, 0, sizeof(nodes));
	w.c = &c;
	w.view = &v;
	w.self = 0;
	w.k = k;
	w.m = m;
	w.n = k + m;
	w.quorum = quorum;
	w.id = 0x1234;
	msg[0] = 0;
	return dn_coord_place_check(&w, msg, cap);
}

static void
test_begin(void)
{
	char msg[256];

	CHECK_EQ(begin_check(4, 2, 5, 6, msg, sizeof(msg)), 0);
	CHECK_EQ(begin_check(4, 2, 5, 3, msg, sizeof(msg)), 0);
	CHECK_EQ(begin_check(4, 2, 6, 6, msg, sizeof(msg)), 0);
	/* quorum 6 = k + 2 over three nodes (two cells each): one node may go, not two */
	CHECK_EQ(begin_check(4, 2, 6, 3, msg, sizeof(msg)), ZC_E(ZC_NO_QUORUM));
	CHECK(strstr(msg, "surviving the loss of 1 nodes; write quorum 6 needs 2"));
	CHECK_EQ(begin_check(4, 2, 5, 2, msg, sizeof(msg)), ZC_E(ZC_NO_QUORUM));
	printf("refused: %s\n", msg);
	CHECK(strstr(msg, "write quorum not met: group 0 has 6 of 6 cells placed on 2 of 2 live "
	                  "nodes, surviving the loss of 0 nodes; write quorum 5 needs 1"));
	CHECK_EQ(begin_check(4, 2, 4, 2, msg, sizeof(msg)), 0);
	CHECK_EQ(begin_check(4, 2, 4, 1, msg, sizeof(msg)), 0);
	CHECK_EQ(begin_check(2, 1, 3, 3, msg, sizeof(msg)), 0);
	CHECK_EQ(begin_check(2, 1, 3, 2, msg, sizeof(msg)), ZC_E(ZC_NO_QUORUM));
}

int
main(void)
{
	zc_log_init();
	test_named_cases();
	test_placements();
	test_arbitrary();
	test_begin();
	printf("ok\n");
	return 0;
}
