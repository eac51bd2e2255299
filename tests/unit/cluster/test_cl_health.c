/* The cluster health evaluation (cluster/cl_health.h) over handmade nodes and records:
 * each state, each reason and its counts, the cells of unchecked nodes never available,
 * ok-to-stop's counts with nodes stopping, and the write tolerance over n live nodes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cl_health.h"
#include "zc_err.h"

static char *nodes7[] = { "dn-a", "dn-b", "dn-c", "dn-d", "dn-e", "dn-f", "dn-g" };

/* Two RS(4,2) groups: group g's cell c on node (c + g) % 6, never dn-g. */
struct rec {
	struct cl_rec_object o;
	struct cl_rec_extent e;
	struct cl_rec_group g[2];
};

static void
make_rec(struct rec *r)
{
	memset(r, 0, sizeof(*r));
	r->e.id = 1;
	r->e.k = 4;
	r->e.m = 2;
	r->e.cell_size = 4096;
	r->e.stripes_per_group = 1;
	r->e.size = 2 * 4 * 4096;
	r->e.nodes = nodes7;
	r->e.nnodes = 7;
	r->e.groups = r->g;
	r->e.ngroups = 2;
	for (unsigned g = 0; g < 2; g++)
		for (unsigned c = 0; c < 6; c++)
			r->g[g].cell[c] = (uint16_t)((c + g) % 6);
	r->o.size = r->e.size;
	r->o.extents = &r->e;
	r->o.nextents = 1;
}

/* Every node a member, live and checked, except as the arguments say. */
static void
make_nodes(struct cl_health *h, const char *absent, const char *checking)
{
	cl_health_init(h);
	for (unsigned i = 0; i < 7; i++) {
		bool live = !absent || strcmp(absent, nodes7[i]) != 0;
		bool checked = live && (!checking || strcmp(checking, nodes7[i]) != 0);

		assert_int_equal(cl_health_node_add(h, nodes7[i], true, live, checked), 0);
	}
}

static bool
has_code(const struct cl_health *h, enum cl_health_code code, uint64_t count)
{
	struct cl_health_reason r[CL_HEALTH_NCODES];
	size_t n = cl_health_reasons(h, r, CL_HEALTH_NCODES);

	for (size_t i = 0; i < n; i++)
		if (r[i].code == code)
			return r[i].count == count;
	return false;
}

static void
test_ok(void **state)
{
	struct cl_health h;
	struct rec r;

	(void)state;
	make_nodes(&h, NULL, NULL);
	make_rec(&r);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_OK); /* no record yet */
	cl_health_record_add(&h, "b/k", &r.o);
	cl_health_record_add(&h, "b/k2", &r.o);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_OK);
	assert_int_equal(h.objects, 2);
	assert_int_equal(h.objects_ok, 2);
	assert_int_equal(h.groups, 4);
	assert_int_equal(cl_health_reasons(&h, NULL, 0), 0);
	assert_int_equal(cl_health_nodes_live(&h), 7);
	cl_health_fini(&h);
}

/* A node back with wiped drives, not yet checked: its cells are unknown, never OK. */
static void
test_checking(void **state)
{
	struct cl_health h;
	struct rec r;

	(void)state;
	make_nodes(&h, NULL, "dn-c");
	make_rec(&r);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN); /* the gauge's view too */
	assert_true(has_code(&h, CL_HEALTH_NODE_CHECKING, 1));
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_int_equal(h.objects_ok, 0);
	assert_int_equal(h.objects_unknown, 1);
	assert_int_equal(h.objects_degraded, 1);
	assert_int_equal(h.cells_unknown, 2); /* one per group */
	assert_true(has_code(&h, CL_HEALTH_OBJECTS_UNKNOWN, 1));
	cl_health_fini(&h);

	/* three unchecked nodes under a group of RS(4,2): fewer than k available: ERR */
	cl_health_init(&h);
	for (unsigned i = 0; i < 7; i++)
		assert_int_equal(cl_health_node_add(&h, nodes7[i], true, true, i >= 3), 0);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_ERR);
	assert_int_equal(h.objects_unreadable, 1);
	assert_int_equal(h.groups_unreadable, 2);
	cl_health_fini(&h);
}

static void
test_absent_missing_doubled(void **state)
{
	struct cl_health h;
	struct cl_health_reason rs[CL_HEALTH_NCODES];
	struct rec r;

	(void)state;
	make_nodes(&h, "dn-a", NULL);
	make_rec(&r);
	assert_true(has_code(&h, CL_HEALTH_NODE_ABSENT, 1));
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_int_equal(h.objects_degraded, 1);
	assert_int_equal(h.cells_absent, 2);
	assert_int_equal(cl_health_nodes_absent(&h), 1);
	cl_health_fini(&h);

	/* a missing bit */
	make_nodes(&h, NULL, NULL);
	r.g[1].missing = 1u << 3;
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_int_equal(h.cells_missing, 1);
	assert_true(has_code(&h, CL_HEALTH_OBJECTS_DEGRADED, 1));
	cl_health_fini(&h);

	/* two cells of a group on one node: every cell there, still not OK */
	make_nodes(&h, NULL, NULL);
	make_rec(&r);
	r.g[0].cell[5] = r.g[0].cell[0];
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_int_equal(h.groups_doubled, 1);
	assert_true(has_code(&h, CL_HEALTH_GROUPS_DOUBLED, 1));
	cl_health_fini(&h);

	/* a node the record names that is neither a member nor live: absent */
	cl_health_init(&h);
	for (unsigned i = 1; i < 7; i++)
		assert_int_equal(cl_health_node_add(&h, nodes7[i], true, true, true), 0);
	make_rec(&r);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(h.cells_absent, 2);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	cl_health_fini(&h);

	/* three absent under a group: ERR, reported first */
	cl_health_init(&h);
	for (unsigned i = 0; i < 7; i++)
		assert_int_equal(cl_health_node_add(&h, nodes7[i], true, i >= 3, i >= 3), 0);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_ERR);
	assert_int_equal(cl_health_reasons(&h, rs, CL_HEALTH_NCODES), 2);
	assert_int_equal(rs[0].code, CL_HEALTH_OBJECTS_UNREADABLE);
	assert_int_equal(rs[0].count, 1);
	assert_non_null(strstr(rs[0].message, "b/k"));
	assert_int_equal(rs[1].code, CL_HEALTH_NODE_ABSENT);
	assert_int_equal(rs[1].count, 3);
	assert_non_null(strstr(rs[1].message, "dn-a, dn-b, dn-c"));
	assert_string_equal(cl_health_code_name(rs[1].code), "node_absent");
	cl_health_fini(&h);
}

static void
test_todo_and_bad(void **state)
{
	struct cl_health h;

	(void)state;
	make_nodes(&h, NULL, NULL);
	h.todo_keys = 3;
	h.heal_locks = 1;
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_true(has_code(&h, CL_HEALTH_HEAL_PENDING, 3));
	h.todo_keys = 0;
	assert_int_equal(cl_health_state(&h), CL_HEALTH_OK);
	cl_health_record_bad(&h, "b/x");
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_true(has_code(&h, CL_HEALTH_RECORDS_BAD, 1));
	assert_int_equal(cl_health_node_add(&h, "bad/name", true, false, false), -EINVAL);
	cl_health_fini(&h);
}

static void
test_ok_to_stop(void **state)
{
	struct cl_health h;
	struct rec r;

	(void)state;
	make_rec(&r);
	/* two nodes of RS(4,2): every group keeps 4 */
	make_nodes(&h, NULL, NULL);
	assert_int_equal(cl_health_node_stop(&h, "dn-a"), 0);
	assert_int_equal(cl_health_node_stop(&h, "dn-b"), 0);
	assert_true(zc_err_is(cl_health_node_stop(&h, "dn-z"), ZC_NO_KEY));
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(h.objects_unreadable_after, 0);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_OK); /* stopping changes no state */
	cl_health_fini(&h);

	/* m + 1 */
	make_nodes(&h, NULL, NULL);
	for (unsigned i = 0; i < 3; i++)
		assert_int_equal(cl_health_node_stop(&h, nodes7[i]), 0);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(h.objects_unreadable_after, 1);
	assert_int_equal(h.groups_unreadable_after, 2);
	cl_health_fini(&h);

	/* one absent already: one more is fine, two more are not */
	make_nodes(&h, "dn-a", NULL);
	assert_int_equal(cl_health_node_stop(&h, "dn-b"), 0);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(h.objects_unreadable_after, 0);
	cl_health_fini(&h);
	make_nodes(&h, "dn-a", NULL);
	assert_int_equal(cl_health_node_stop(&h, "dn-b"), 0);
	assert_int_equal(cl_health_node_stop(&h, "dn-c"), 0);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(h.objects_unreadable_after, 1);
	cl_health_fini(&h);

	/* dn-g holds no cell: stopping it costs no group a cell */
	make_nodes(&h, NULL, NULL);
	assert_int_equal(cl_health_node_stop(&h, "dn-g"), 0);
	assert_int_equal(cl_health_node_stop(&h, "dn-f"), 0);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_int_equal(h.objects_unreadable_after, 0);
	cl_health_fini(&h);
}

/* docs/cluster.md "The write quorum"'s table, and RS(3,2) */
static void
test_tolerance(void **state)
{
	static const int rs42[] = { -1, 0, 0, 1, 1, 1, 2, 2, 2 };
	unsigned k, m;
	struct cl_health h;
	struct rec r;

	(void)state;
	for (unsigned n = 0; n < sizeof(rs42) / sizeof(rs42[0]); n++)
		assert_int_equal(cl_health_tolerance(4, 2, n), rs42[n]);
	assert_int_equal(cl_health_tolerance(3, 2, 7), 2);
	assert_int_equal(cl_health_tolerance(3, 2, 4), 1);
	assert_int_equal(cl_health_tolerance(3, 2, 2), 0);
	assert_int_equal(cl_health_tolerance(1, 0, 3), 0);
	make_nodes(&h, NULL, NULL);
	assert_false(cl_health_scheme(&h, &k, &m));
	make_rec(&r);
	cl_health_record_add(&h, "b/k", &r.o);
	assert_true(cl_health_scheme(&h, &k, &m));
	assert_int_equal(k, 4);
	assert_int_equal(m, 2);
	cl_health_fini(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_ok),
		cmocka_unit_test(test_checking),
		cmocka_unit_test(test_absent_missing_doubled),
		cmocka_unit_test(test_todo_and_bad),
		cmocka_unit_test(test_ok_to_stop),
		cmocka_unit_test(test_tolerance),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
