/* zest-prof's per-thread CPU: the stat-line parser on canned lines, name folding, grouping
 * two canned snapshots, and a live snapshot of this process with a named thread. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "prof_threads.h"

static void
test_parse_stat(void **state)
{
	/* Fields 14 and 15 (utime, stime) are 250 and 75 in each line. */
	static const char plain[] =
	        "4242 (dn-drive3) S 1 4242 4242 0 -1 4194624 9 0 0 0 250 75 0 0 20 0 9 0 "
	        "123456 1234567 890 18446744073709551615 1 1 0 0 0 0 0 4096 0 0 0 0 17 1 0 0 0 "
	        "0 0\n";
	/* A comm may hold spaces, '(' and ')': only the last ')' ends it. */
	static const char odd[] = "77 (a) b (c)) R 1 77 77 34816 77 4194304 120 0 0 0 250 75 "
	                          "0 0 20 0 1 0 99 4096 10 18446744073709551615\n";
	char comm[PROF_THREAD_NAME_MAX];
	uint64_t ut = 0, st = 0;

	(void)state;
	assert_int_equal(prof_threads_parse_stat(plain, comm, sizeof(comm), &ut, &st), 0);
	assert_string_equal(comm, "dn-drive3");
	assert_int_equal(ut, 250);
	assert_int_equal(st, 75);
	ut = st = 0;
	assert_int_equal(prof_threads_parse_stat(odd, comm, sizeof(comm), &ut, &st), 0);
	assert_string_equal(comm, "a) b (c)");
	assert_int_equal(ut, 250);
	assert_int_equal(st, 75);
	/* cut to the buffer, still NUL-terminated */
	assert_int_equal(prof_threads_parse_stat(odd, comm, 4, &ut, &st), 0);
	assert_string_equal(comm, "a) ");
}

static void
test_parse_stat_malformed(void **state)
{
	char comm[PROF_THREAD_NAME_MAX];
	uint64_t ut, st;

	(void)state;
	assert_int_equal(prof_threads_parse_stat("", comm, sizeof(comm), &ut, &st), -EINVAL);
	assert_int_equal(
	        prof_threads_parse_stat("12 dn-write S 1 2 3", comm, sizeof(comm), &ut, &st),
	        -EINVAL);
	assert_int_equal(prof_threads_parse_stat("12 )dn-write( S 1 2 3 4 5 6 7 8 9 10 11 12", comm,
	                                         sizeof(comm), &ut, &st),
	                 -EINVAL);
	/* cut short before stime */
	assert_int_equal(prof_threads_parse_stat("12 (x) S 1 12 12 0 -1 0 0 0 0 0 250", comm,
	                                         sizeof(comm), &ut, &st),
	                 -EINVAL);
	assert_int_equal(prof_threads_parse_stat("12 (x) S 1 12 12 0 -1 0 0 0 0 0 a b", comm,
	                                         sizeof(comm), &ut, &st),
	                 -EINVAL);
}

static void
expect_fold(const char *comm, const char *folded)
{
	char out[PROF_THREAD_NAME_MAX];

	prof_threads_fold_name(comm, out, sizeof(out));
	assert_string_equal(out, folded);
}

static void
test_fold_name(void **state)
{
	char small[4];

	(void)state;
	expect_fold("dn-drive3", "dn-drive#");
	expect_fold("dn-drive12", "dn-drive#");
	expect_fold("iou-wrk-1234", "iou-wrk-#");
	expect_fold("iou-sqp-99", "iou-sqp-#");
	expect_fold("dn-write", "dn-write");
	expect_fold("rpc-srv-cq", "rpc-srv-cq");
	expect_fold("2x4", "2x#");
	expect_fold("v8worker", "v8worker");
	expect_fold("1234", "#");
	expect_fold("", "");
	prof_threads_fold_name("iou-wrk-1", small, sizeof(small));
	assert_string_equal(small, "iou");
}

static void
add(struct prof_thread_stat *t, int tid, const char *name, uint64_t ticks)
{
	t->tid = tid;
	snprintf(t->name, sizeof(t->name), "%s", name);
	t->ticks = ticks;
}

static void
test_delta(void **state)
{
	struct prof_thread_stat b[4], a[4];
	struct prof_threads before = { .t = b, .n = 4 }, after = { .t = a, .n = 4 };
	struct prof_thread_group g[8];
	unsigned n;

	(void)state;
	add(&b[0], 10, "dn-drive#", 100);
	add(&b[1], 11, "dn-drive#", 50);
	add(&b[2], 12, "rpc-srv-cq", 10);
	add(&b[3], 13, "iou-wrk-#", 500); /* exits during the run */
	add(&a[0], 10, "dn-drive#", 150);
	add(&a[1], 11, "dn-drive#", 80);
	add(&a[2], 12, "rpc-srv-cq", 40);
	add(&a[3], 20, "iou-wrk-#", 30); /* started during the run */
	/* 50 + 30 + 30 + 30 ticks alive, and 20 more by the thread that exited */
	n = prof_threads_delta(&before, &after, 1.6, 0.01, g, 8);
	assert_int_equal(n, 4);
	assert_string_equal(g[0].name, "dn-drive#");
	assert_true(fabs(g[0].cpu_s - 0.8) < 1e-9);
	assert_string_equal(g[1].name, "iou-wrk-#"); /* ties in name order */
	assert_true(fabs(g[1].cpu_s - 0.3) < 1e-9);
	assert_string_equal(g[2].name, "rpc-srv-cq");
	assert_true(fabs(g[2].cpu_s - 0.3) < 1e-9);
	assert_string_equal(g[3].name, PROF_THREADS_EXITED);
	assert_true(fabs(g[3].cpu_s - 0.2) < 1e-9);

	/* within the threads' rounding to ticks, or unknown: no exited group */
	assert_int_equal(prof_threads_delta(&before, &after, 1.44, 0.01, g, 8), 3);
	assert_int_equal(prof_threads_delta(&before, &after, NAN, 0.01, g, 8), 3);

	/* full: the last slot sums the rest as "other" */
	n = prof_threads_delta(&before, &after, NAN, 0.01, g, 2);
	assert_int_equal(n, 2);
	assert_string_equal(g[0].name, "dn-drive#");
	assert_string_equal(g[1].name, "other");
	assert_true(fabs(g[1].cpu_s - 0.6) < 1e-9);
	assert_int_equal(prof_threads_delta(&before, &after, NAN, 0.01, g, 0), 0);
}

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static bool done;

static void *
worker(void *arg)
{
	(void)arg;
	pthread_mutex_lock(&lock);
	while (!done)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	return NULL;
}

/* This process, with two threads named tst-worker7 and tst-worker8: one folded group. */
static void
test_snapshot_self(void **state)
{
	struct prof_threads s = { 0 };
	pthread_t t[2];
	int workers = 0, n;

	(void)state;
	for (int i = 0; i < 2; i++) {
		char name[16];

		assert_int_equal(pthread_create(&t[i], NULL, worker, NULL), 0);
		snprintf(name, sizeof(name), "tst-worker%d", 7 + i);
		assert_int_equal(pthread_setname_np(t[i], name), 0);
	}
	n = prof_threads_snapshot(getpid(), &s);
	assert_true(n >= 3);
	for (size_t i = 0; i < s.n; i++)
		workers += !strcmp(s.t[i].name, "tst-worker#");
	assert_int_equal(workers, 2);
	/* a second snapshot reuses the storage */
	assert_int_equal(prof_threads_snapshot(getpid(), &s), n);
	pthread_mutex_lock(&lock);
	done = true;
	pthread_cond_broadcast(&cond);
	pthread_mutex_unlock(&lock);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	prof_threads_fini(&s);
	assert_null(s.t);
	assert_int_equal(prof_threads_snapshot(INT_MAX, &s), -ESRCH);
	prof_threads_fini(&s);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_parse_stat),    cmocka_unit_test(test_parse_stat_malformed),
		cmocka_unit_test(test_fold_name),     cmocka_unit_test(test_delta),
		cmocka_unit_test(test_snapshot_self),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
