/*
 * The fault-point registry (common/zc_fault.h): rules armed by the API and by the
 * ZEST_FAULTS syntax, their windows (@FROM, *COUNT), instances, a caller's own hit
 * numbers, the actions' results, and a pause released by deleting its file. Skipped (77)
 * in a build without -Dtest_faults, where ZC_FAULT() must be the constant 0.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t_check.h"
#include "zc.h"
#include "zc_fault.h"

#ifdef ZC_FAULTS
static unsigned calls, last_hit;

static void
on_call(void *arg, unsigned hit)
{
	CHECK(arg == &calls);
	calls++;
	last_hit = hit;
}

static void
test_api(void)
{
	/* nothing armed: nothing fires, and the point is one load */
	CHECK_EQ(atomic_load(&zc_fault_armed[ZC_FP_DRIVE_WRITE]), 0);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 0, 0), 0);
	/* the next two hits of drive 1 fail with -ENOSPC, then the rule is spent */
	CHECK_EQ(zc_fault_arm(ZC_FP_DRIVE_WRITE, "1",
	                      &(struct zc_fault){ .kind = ZC_FAULT_ERR, .err = -ENOSPC,
	                                          .count = 2 }),
	         0);
	CHECK_EQ(atomic_load(&zc_fault_armed[ZC_FP_DRIVE_WRITE]), 1);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 0, 0), 0); /* another instance */
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 1, 0), -ENOSPC);
	CHECK_EQ(zc_fault_fired(ZC_FP_DRIVE_WRITE, "1"), 1);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 1, 0), -ENOSPC);
	CHECK_EQ(atomic_load(&zc_fault_armed[ZC_FP_DRIVE_WRITE]), 0);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 1, 0), 0);
	/* the caller's hit numbers (a stream's messages): message 2 of every stream resets */
	CHECK_EQ(zc_fault_arm(ZC_FP_PEER_SEND, "h:1",
	                      &(struct zc_fault){ .kind = ZC_FAULT_RESET, .from = 2, .count = 1 }),
	         0);
	for (int stream = 0; stream < 3; stream++) {
		CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "h:1", 1), 0);
		CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "h:1", 2), ZC_FAULT_RESET);
		CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "h:1", 3), 0);
	}
	CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "h:2", 2), 0);
	CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, NULL, 2), 0);
	CHECK_EQ(zc_fault_fired(ZC_FP_PEER_SEND, "h:1"), 3);
	/* re-arming replaces the rule; disarm removes it */
	CHECK_EQ(zc_fault_arm(ZC_FP_PEER_SEND, "h:1", &(struct zc_fault){ .kind = ZC_FAULT_DROP }),
	         0);
	CHECK_EQ(atomic_load(&zc_fault_armed[ZC_FP_PEER_SEND]), 1);
	CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "h:1", 1), ZC_FAULT_DROP);
	zc_fault_disarm(ZC_FP_PEER_SEND, "h:1");
	CHECK_EQ(atomic_load(&zc_fault_armed[ZC_FP_PEER_SEND]), 0);
	/* an instance-less rule covers every instance; call runs with the rule's hit */
	CHECK_EQ(zc_fault_arm(ZC_FP_DN_COMPOSE, NULL,
	                      &(struct zc_fault){ .kind = ZC_FAULT_CALL, .fn = on_call,
	                                          .arg = &calls }),
	         0);
	CHECK_EQ(ZC_FAULT(ZC_FP_DN_COMPOSE, "x", 0), 0);
	CHECK_EQ(ZC_FAULT(ZC_FP_DN_COMPOSE, NULL, 0), 0);
	CHECK_EQ(calls, 2);
	CHECK_EQ(last_hit, 2);
	/* a level: reported, never slept, not counted */
	CHECK_EQ(zc_fault_arm(ZC_FP_ADM_LATENCY, NULL,
	                      &(struct zc_fault){ .kind = ZC_FAULT_DELAY, .delay_ns = 7 }),
	         0);
	CHECK_EQ(ZC_FAULT_LEVEL_NS(ZC_FP_ADM_LATENCY), 7);
	CHECK_EQ(zc_fault_fired(ZC_FP_ADM_LATENCY, NULL), 0);
	zc_fault_clear();
	for (int p = 0; p < ZC_FP_COUNT; p++)
		CHECK_EQ(atomic_load(&zc_fault_armed[p]), 0);
	CHECK_EQ(ZC_FAULT_LEVEL_NS(ZC_FP_ADM_LATENCY), 0);
	/* bad rules */
	CHECK_EQ(zc_fault_arm(ZC_FP_COUNT, NULL, &(struct zc_fault){ .kind = ZC_FAULT_DROP }),
	         -EINVAL);
	CHECK_EQ(zc_fault_arm(ZC_FP_MPU_LISTED, NULL, &(struct zc_fault){ .kind = ZC_FAULT_PAUSE }),
	         -EINVAL);
	CHECK_EQ(zc_fault_arm(ZC_FP_MPU_LISTED, NULL, &(struct zc_fault){ 0 }), -EINVAL);
}

static void
test_parse(void)
{
	CHECK_EQ(zc_fault_point_of("drive.write"), ZC_FP_DRIVE_WRITE);
	CHECK_EQ(zc_fault_point_of("mpu.after-compose"), ZC_FP_MPU_COMPOSED);
	CHECK_EQ(zc_fault_point_of("drive.writes"), -EINVAL);
	CHECK_EQ(zc_fault_parse("drive.write/0=delay:1ms,drive.write/2*3=eio,peer.send@2=reset,"
	                        "meta.txn/1=err:ENOSPC,meta.txn/2@2*2=err:28"),
	         5);
	CHECK_EQ(atomic_load(&zc_fault_armed[ZC_FP_DRIVE_WRITE]), 2);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 0, 0), 0); /* slept 1 ms */
	CHECK_EQ(zc_fault_fired(ZC_FP_DRIVE_WRITE, "0"), 1);
	for (int i = 0; i < 3; i++)
		CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 2, 0), -EIO);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_DRIVE_WRITE, 2, 0), 0);
	/* @2 alone: message 2 only, of any peer */
	CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "p", 1), 0);
	CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "p", 2), ZC_FAULT_RESET);
	CHECK_EQ(ZC_FAULT(ZC_FP_PEER_SEND, "q", 3), 0);
	/* an errno by name (every hit) and by number (hits 2 and 3) */
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_META_TXN, 1, 0), -ENOSPC);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_META_TXN, 1, 0), -ENOSPC);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_META_TXN, 2, 0), 0);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_META_TXN, 2, 0), -ENOSPC);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_META_TXN, 2, 0), -ENOSPC);
	CHECK_EQ(ZC_FAULT_IDX(ZC_FP_META_TXN, 2, 0), 0);
	zc_fault_clear();
	/* a bad rule arms nothing of its spec */
	const char *bad[] = { "nope=drop", "drive.write", "drive.write/=drop", "drive.write=slow",
		              "drive.write=delay:fast", "drive.write*=eio", "drive.write@0=eio",
		              "drive.write=drop:1", "meta.txn=err:EWHAT", "mpu.abort-marked=pause:",
		              "drive.write=eio,nope=drop" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(zc_fault_parse(bad[i]), -EINVAL);
		for (int p = 0; p < ZC_FP_COUNT; p++)
			CHECK_EQ(atomic_load(&zc_fault_armed[p]), 0);
	}
	CHECK_EQ(zc_fault_parse(""), 0);
}

struct pauser {
	char path[256];
	_Atomic bool passed;
};

static void *
paused(void *arg)
{
	struct pauser *p = arg;

	CHECK_EQ(ZC_FAULT(ZC_FP_MPU_MARKED, NULL, 0), 0);
	atomic_store(&p->passed, true);
	return NULL;
}

/* pause:PATH holds the caller while PATH exists; PATH.reached says it got there. */
static void
test_pause(void)
{
	char dir[] = "/tmp/zc-fault-XXXXXX", reached[300], spec[300];
	struct pauser p = { 0 };
	struct stat st;
	pthread_t t;
	FILE *f;

	CHECK(mkdtemp(dir));
	snprintf(p.path, sizeof(p.path), "%s/hold", dir);
	snprintf(reached, sizeof(reached), "%s.reached", p.path);
	snprintf(spec, sizeof(spec), "mpu.complete-marked=pause:%s", p.path);
	CHECK_EQ(zc_fault_parse(spec), 1);
	/* not held: the point creates .reached and goes on */
	CHECK_EQ(ZC_FAULT(ZC_FP_MPU_MARKED, NULL, 0), 0);
	CHECK_EQ(stat(reached, &st), 0);
	CHECK_EQ(unlink(reached), 0);
	/* held: the caller waits at the point until the file goes */
	f = fopen(p.path, "w");
	CHECK(f);
	fclose(f);
	CHECK_EQ(pthread_create(&t, NULL, paused, &p), 0);
	for (int i = 0; i < 3000 && stat(reached, &st) != 0; i++)
		usleep(10000);
	CHECK_EQ(stat(reached, &st), 0);
	CHECK(!atomic_load(&p.passed)); /* .reached is made before the wait */
	CHECK_EQ(unlink(p.path), 0);
	CHECK_EQ(pthread_join(t, NULL), 0);
	CHECK(atomic_load(&p.passed));
	CHECK_EQ(zc_fault_fired(ZC_FP_MPU_MARKED, NULL), 2);
	zc_fault_clear();
	CHECK_EQ(unlink(reached), 0);
	CHECK_EQ(rmdir(dir), 0);
}
#endif

int
main(void)
{
	zc_log_init();
#ifndef ZC_FAULTS
	/* the points compile to nothing: a constant 0 */
	_Static_assert(ZC_FAULT(ZC_FP_DRIVE_WRITE, NULL, 0) == 0, "no fault without the option");
	printf("SKIP: built without -Dtest_faults: no fault points\n");
	return 77;
#else
	test_api();
	test_parse();
	test_pause();
	printf("test_zc_fault: ok\n");
	return 0;
#endif
}
