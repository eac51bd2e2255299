/*
 * zc_loop: the loop's thread runs its passes between waits, a stop wakes a long wait at
 * once (counted: the pass count stops growing and the thread is joined, no timing), and a
 * loop that never started stops and finishes too.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "zc_loop.h"

struct counter {
	struct zc_loop loop;
	atomic_int passes;
	uint64_t wait_ns;
};

static void *
run(void *arg)
{
	struct counter *c = arg;

	while (zc_loop_wait(&c->loop, c->wait_ns))
		atomic_fetch_add(&c->passes, 1);
	return NULL;
}

static void
test_passes_then_stop(void **state)
{
	struct counter c = { .wait_ns = 1000000 }; /* 1 ms */

	(void)state;
	zc_loop_init(&c.loop);
	assert_int_equal(zc_loop_start(&c.loop, "zc-loop-test", run, &c), 0);
	while (atomic_load(&c.passes) < 5)
		;
	assert_false(zc_loop_stopping(&c.loop));
	zc_loop_stop(&c.loop);
	assert_true(zc_loop_stopping(&c.loop));
	int n = atomic_load(&c.passes);
	assert_false(zc_loop_wait(&c.loop, 1000000000)); /* stopped: no sleep */
	assert_int_equal(atomic_load(&c.passes), n);
	zc_loop_stop(&c.loop); /* again: a no-op */
	zc_loop_fini(&c.loop);
}

static void
test_stop_wakes_a_long_wait(void **state)
{
	/* an hour's wait: the test ends only because stop wakes it */
	struct counter c = { .wait_ns = 3600000000000ull };

	(void)state;
	zc_loop_init(&c.loop);
	assert_int_equal(zc_loop_start(&c.loop, "zc-loop-test", run, &c), 0);
	zc_loop_stop(&c.loop);
	assert_int_equal(atomic_load(&c.passes), 0);
	zc_loop_fini(&c.loop);
}

static void
test_never_started(void **state)
{
	struct zc_loop l;

	(void)state;
	zc_loop_init(&l);
	zc_loop_stop(&l);
	assert_true(zc_loop_stopping(&l));
	zc_loop_fini(&l);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_passes_then_stop),
		cmocka_unit_test(test_stop_wakes_a_long_wait),
		cmocka_unit_test(test_never_started),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
