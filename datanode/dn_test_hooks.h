/*
 * TEST BUILDS ONLY: fault injection for the zest-datanode-hooks executable (built with
 * ZEST_TEST_HOOKS, never installed; the shipped zest-datanode has none of this).
 *
 *   ZEST_TEST_DRIVE_DELAY=N:DURATION[,N:DURATION...]
 *
 * delays every write SQE of drive N (0-based --drive index) by DURATION on its ring thread
 * (dn_drive_inject_delay), so that drive serves at most 1/DURATION writes a second: a slow
 * disk, deterministic, for zest-bench admission's slowed-drive runs (docs/benchmarks.md).
 */
#ifndef ZEST_DN_TEST_HOOKS_H
#define ZEST_DN_TEST_HOOKS_H

#include "dn.h"

/* Applies the hooks the environment asks for, logging each. Returns 0, or -EINVAL with
 * the bad value logged. Call once, after dn_store_open, before serving. */
int dn_test_hooks_apply(struct dn_store *s, unsigned ndrives);

#endif
