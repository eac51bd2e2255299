/*
 * Tests' side of the fault-point registry (common/zc_fault.h). A test that needs a fault
 * calls these; in a build without -Dtest_faults they end the test as skipped (exit 77),
 * for its assertions would not hold. Rules are process-wide: a drive index names that
 * drive in every store of the test process.
 */
#ifndef ZEST_T_FAULT_H
#define ZEST_T_FAULT_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "zc_fault.h"

static inline void
t_fault_require(void)
{
#ifndef ZC_FAULTS
	printf("SKIP: this test needs fault points: build with -Dtest_faults=true\n");
	fflush(stdout);
	exit(77);
#endif
}

/* Arm f on p for inst (NULL: all); f NULL: disarm p's rule for inst. */
static inline void
t_fault(enum zc_fault_point p, const char *inst, const struct zc_fault *f)
{
	t_fault_require();
#ifdef ZC_FAULTS
	if (!f) {
		zc_fault_disarm(p, inst);
	} else if (zc_fault_arm(p, inst, f) < 0) {
		fprintf(stderr, "zc_fault_arm failed\n");
		abort();
	}
#else
	(void)p, (void)inst, (void)f;
#endif
}

/* p's instance idx (a drive, a replica): delay each hit by ns (0: disarm). */
static inline void
t_fault_delay_idx(enum zc_fault_point p, unsigned idx, uint64_t ns)
{
	char inst[16];

	snprintf(inst, sizeof(inst), "%u", idx);
	t_fault(p, inst, ns ? &(struct zc_fault){ .kind = ZC_FAULT_DELAY, .delay_ns = ns } : NULL);
}

/* p's instance idx: the next n hits fail with err (n 0: disarm). */
static inline void
t_fault_err_idx(enum zc_fault_point p, unsigned idx, int err, unsigned n)
{
	char inst[16];

	snprintf(inst, sizeof(inst), "%u", idx);
	t_fault(p, inst,
	        n ? &(struct zc_fault){ .kind = ZC_FAULT_ERR, .err = err, .count = n } : NULL);
}

#endif
