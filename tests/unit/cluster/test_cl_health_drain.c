/* Drains, maintenance windows and heal progress in the health state (cluster/cl_health.h,
 * cl_healstat.h, cl_members.h's mark values): the progress value's round trip and its
 * refusals, rates and estimates from one reading, the mark values, and the reasons with
 * their counts (maintenance reported instead of absence, WARN while a drain runs). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cl_health.h"
#include "cl_healstat.h"
#include "cl_members.h"

static const struct cl_health_reason *
reason(const struct cl_health *h, enum cl_health_code code, struct cl_health_reason *r)
{
	size_t n = cl_health_reasons(h, r, CL_HEALTH_NCODES);

	for (size_t i = 0; i < n && i < CL_HEALTH_NCODES; i++)
		if (r[i].code == code)
			return &r[i];
	return NULL;
}

static void
test_healstat_roundtrip(void **state)
{
	struct cl_healstat s = { .t_ms = 1700000010000,
		                 .passes = 7,
		                 .pending_cells = 40,
		                 .pending_bytes = 40 << 20,
		                 .healed_cells = 120,
		                 .healed_bytes = 120 << 20,
		                 .prev_t_ms = 1700000008000,
		                 .prev_healed_cells = 100,
		                 .prev_healed_bytes = 100 << 20,
		                 .own_cells = 30,
		                 .own_bytes = 30 << 20,
		                 .own_t_ms = 1700000010000,
		                 .prev_own_cells = 50,
		                 .prev_own_t_ms = 1700000005000,
		                 .own_drain_s = 1699999990 },
	                   back;
	char buf[CL_HEALSTAT_CAP];
	int n;

	(void)state;
	n = cl_healstat_format(&s, buf, sizeof(buf));
	assert_true(n > 0);
	assert_int_equal(cl_healstat_parse(buf, (size_t)n, &back), 0);
	assert_memory_equal(&s, &back, sizeof(s));
	/* 20 cells in 2 s; own count down 20 in 5 s */
	assert_true(cl_healstat_rate(&back) > 9.99 && cl_healstat_rate(&back) < 10.01);
	assert_true(cl_healstat_own_rate(&back) > 3.99 && cl_healstat_own_rate(&back) < 4.01);
	assert_int_equal(cl_healstat_eta(40, 10.0), 4);
	assert_int_equal(cl_healstat_eta(41, 10.0), 5); /* rounded up */
	assert_int_equal(cl_healstat_eta(0, 0), 0);
	assert_int_equal(cl_healstat_eta(5, 0), -1); /* unknown */
	assert_int_equal(cl_healstat_format(&s, buf, 20), -ENOSPC);
}

static void
test_healstat_parse(void **state)
{
	struct cl_healstat s;
	const char *ok = "v=1 t_ms=5 later_field=abc pending_cells=3";

	(void)state;
	/* unknown fields are skipped; a value not counted stays unknown (-1) */
	assert_int_equal(cl_healstat_parse(ok, strlen(ok), &s), 0);
	assert_int_equal(s.t_ms, 5);
	assert_int_equal(s.pending_cells, 3);
	assert_int_equal(s.own_cells, -1);
	assert_true(cl_healstat_rate(&s) == 0); /* no previous pass */
	assert_true(cl_healstat_own_rate(&s) == 0);
	assert_int_equal(cl_healstat_parse("pending_cells=3", 15, &s), -EINVAL); /* no t_ms */
	assert_int_equal(cl_healstat_parse("t_ms=x", 6, &s), -EINVAL);
	assert_int_equal(cl_healstat_parse("t_ms=-5", 7, &s), -EINVAL); /* unsigned field */
	assert_int_equal(cl_healstat_parse("t_ms=5 own_cells=-1", 19, &s), 0);
	assert_int_equal(cl_healstat_parse("t_ms=5 junk", 11, &s), -EINVAL);
	assert_int_equal(cl_healstat_parse(NULL, 0, &s), -EINVAL);
	/* a counter that went back (a restarted healer) gives no rate, not a negative one */
	assert_int_equal(cl_healstat_parse("t_ms=9 prev_t_ms=5 healed_cells=1 "
	                                   "prev_healed_cells=9",
	                                   53, &s),
	                 0);
	assert_true(cl_healstat_rate(&s) == 0);
}

static void
test_mark_parse(void **state)
{
	enum cl_members_mark_kind k;
	int64_t at;

	(void)state;
	assert_int_equal(cl_members_mark_parse("drain 1700000000", 16, false, &k, &at), 0);
	assert_int_equal(k, CL_MEMBERS_DRAIN);
	assert_int_equal(at, 1700000000);
	assert_int_equal(cl_members_mark_parse("decommission 12", 15, false, &k, &at), 0);
	assert_int_equal(k, CL_MEMBERS_DECOMMISSION);
	assert_int_equal(at, 12);
	assert_int_equal(cl_members_mark_parse("1700000300", 10, true, &k, &at), 0);
	assert_int_equal(k, CL_MEMBERS_MAINTENANCE);
	assert_int_equal(at, 1700000300);
	assert_int_equal(cl_members_mark_parse("drain", 5, false, &k, &at), -EINVAL);
	assert_int_equal(cl_members_mark_parse("drain x", 7, false, &k, &at), -EINVAL);
	assert_int_equal(cl_members_mark_parse("evict 5", 7, false, &k, &at), -EINVAL);
	assert_int_equal(cl_members_mark_parse("drain 5", 7, true, &k, &at), -EINVAL);
	assert_int_equal(cl_members_mark_parse(NULL, 0, true, &k, &at), -EINVAL);
}

static void
add_nodes(struct cl_health *h, unsigned n, int absent)
{
	char name[16];

	cl_health_init(h);
	for (unsigned i = 0; i < n; i++) {
		snprintf(name, sizeof(name), "dn-%u", i);
		assert_int_equal(
		        cl_health_node_add(h, name, true, (int)i != absent, (int)i != absent), 0);
	}
}

/* A node in maintenance and absent: WARN "maintenance", not node_absent. */
static void
test_maintenance(void **state)
{
	struct cl_health h;
	struct cl_health_reason r[CL_HEALTH_NCODES];
	const struct cl_health_reason *x;

	(void)state;
	add_nodes(&h, 6, 2);
	assert_int_equal(cl_health_nodes_absent(&h), 1);
	assert_int_equal(cl_health_node_mark(&h, "dn-2", CL_MEMBERS_MAINTENANCE, 1700000000), 0);
	assert_int_equal(cl_health_nodes_absent(&h), 0);
	assert_int_equal(cl_health_nodes_maintenance(&h), 1);
	assert_null(reason(&h, CL_HEALTH_NODE_ABSENT, r));
	x = reason(&h, CL_HEALTH_MAINTENANCE, r);
	assert_non_null(x);
	assert_int_equal(x->severity, CL_HEALTH_WARN);
	assert_int_equal(x->count, 1);
	assert_non_null(strstr(x->message, "maintenance: dn-2 until 2023-11-14T22:13:20Z"));
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_int_equal(cl_health_node_mark(&h, "dn-2", 99, 1), -EINVAL);
	assert_int_equal(cl_health_node_mark(&h, "not a name", CL_MEMBERS_DRAIN, 1), -EINVAL);
	cl_health_fini(&h);
}

/* A drain: WARN with cells left, rate and estimate from the node's own counts; WARN still
 * once nothing is left, until the key goes. */
static void
test_drain_progress(void **state)
{
	struct cl_health h;
	struct cl_health_reason r[CL_HEALTH_NCODES];
	const struct cl_health_reason *x;
	struct cl_health_progress p;
	struct cl_healstat s = { .t_ms = 20000,
		                 .own_cells = 30,
		                 .own_bytes = 3000,
		                 .own_t_ms = 20000,
		                 .prev_own_cells = 50,
		                 .prev_own_t_ms = 10000,
		                 .own_drain_s = 5 },
	                   other = { .t_ms = 20000,
		                     .pending_cells = 6,
		                     .pending_bytes = 600,
		                     .healed_cells = 10,
		                     .prev_t_ms = 18000,
		                     .prev_healed_cells = 4,
		                     .own_cells = -1,
		                     .prev_own_cells = -1 };

	(void)state;
	add_nodes(&h, 6, -1);
	assert_int_equal(cl_health_state(&h), CL_HEALTH_OK);
	assert_int_equal(cl_health_node_mark(&h, "dn-1", CL_MEMBERS_DRAIN, 5), 0);
	/* counted nothing yet */
	x = reason(&h, CL_HEALTH_NODE_DRAINING, r);
	assert_non_null(x);
	assert_int_equal(x->count, 1);
	assert_non_null(strstr(x->message, "not counted yet"));
	/* a count of 0 from a pass that began before the key (the node's check at start):
	 * no progress of this drain */
	s.own_drain_s = 0;
	s.own_cells = 0;
	assert_int_equal(cl_health_node_stat(&h, "dn-1", &s), 0);
	cl_health_drain_progress(&h, cl_health_node_find(&h, "dn-1"), &p);
	assert_false(p.known);
	x = reason(&h, CL_HEALTH_NODE_DRAINING, r);
	assert_non_null(strstr(x->message, "not counted yet"));
	s.own_drain_s = 5;
	s.own_cells = 30;
	assert_int_equal(cl_health_node_stat(&h, "dn-1", &s), 0);
	assert_int_equal(cl_health_node_stat(&h, "dn-3", &other), 0);
	cl_health_drain_progress(&h, cl_health_node_find(&h, "dn-1"), &p);
	assert_true(p.known);
	assert_int_equal(p.cells, 30);
	assert_int_equal(p.bytes, 3000);
	assert_true(p.rate > 1.99 && p.rate < 2.01); /* 20 cells in 10 s */
	assert_int_equal(p.eta_s, 15);
	x = reason(&h, CL_HEALTH_NODE_DRAINING, r);
	assert_non_null(strstr(x->message, "draining dn-1: 30 cells (3000 bytes) left, rate 2.0 "
	                                   "cells/s, ETA 15 s"));
	/* the healers' progress: dn-3's 6 cells at 3 cells/s */
	cl_health_heal_progress(&h, &p);
	assert_int_equal(p.cells, 6);
	assert_int_equal(p.eta_s, 2);
	x = reason(&h, CL_HEALTH_HEAL_PROGRESS, r);
	assert_non_null(x);
	assert_int_equal(x->count, 6);
	assert_non_null(strstr(x->message, "heal in progress: 6 cells (600 bytes) left, rate 3.0 "
	                                   "cells/s, ETA 2 s"));
	/* one own count only: the drain's rate is the healers' */
	s.prev_own_cells = -1;
	assert_int_equal(cl_health_node_stat(&h, "dn-1", &s), 0);
	cl_health_drain_progress(&h, cl_health_node_find(&h, "dn-1"), &p);
	assert_true(p.rate > 2.99 && p.rate < 3.01);
	assert_int_equal(p.eta_s, 10);
	/* drained: nothing left, still WARN until undrain or decommission */
	s.own_cells = 0;
	other.pending_cells = 0;
	assert_int_equal(cl_health_node_stat(&h, "dn-1", &s), 0);
	assert_int_equal(cl_health_node_stat(&h, "dn-3", &other), 0);
	x = reason(&h, CL_HEALTH_NODE_DRAINING, r);
	assert_non_null(strstr(x->message, "no cell left (undrain or decommission)"));
	assert_null(reason(&h, CL_HEALTH_HEAL_PROGRESS, r));
	assert_int_equal(cl_health_state(&h), CL_HEALTH_WARN);
	assert_int_equal(cl_health_nodes_draining(&h), 1);
	/* a progress key of a node that is not live counts for nothing */
	other.pending_cells = 9;
	assert_int_equal(cl_health_node_stat(&h, "dn-9", &other), 0);
	cl_health_heal_progress(&h, &p);
	assert_int_equal(p.cells, 0);
	assert_string_equal(cl_health_code_name(CL_HEALTH_NODE_DRAINING), "node_draining");
	assert_string_equal(cl_health_code_name(CL_HEALTH_MAINTENANCE), "maintenance");
	assert_string_equal(cl_health_code_name(CL_HEALTH_HEAL_PROGRESS), "heal_progress");
	cl_health_fini(&h);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_healstat_roundtrip), cmocka_unit_test(test_healstat_parse),
		cmocka_unit_test(test_mark_parse),         cmocka_unit_test(test_maintenance),
		cmocka_unit_test(test_drain_progress),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
