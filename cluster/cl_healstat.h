/*
 * cl_healstat: one healer's progress, as it puts it in /zest/healstat/<node> after every
 * pass (under its lock lease, so a dead node's goes with it), and the rates and estimates
 * `zest-admin status` and the health gauge compute from them (docs/operations.md
 * "Heal progress").
 *
 * The value is one line of `name=value` fields ("v=1 t_ms=... passes=..."); unknown
 * fields are skipped, so newer writers stay readable. It carries the previous pass's
 * totals too, so one reading gives a rate: (healed - prev_healed) / (t - prev_t).
 *
 * Everything here is pure. Threading: none.
 */
#ifndef ZEST_CL_HEALSTAT_H
#define ZEST_CL_HEALSTAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CL_HEALSTAT_PREFIX "/zest/healstat/"
#define CL_HEALSTAT_CAP    512 /* a formatted value fits */

struct cl_healstat {
	uint64_t t_ms;   /* wall clock of the pass's end */
	uint64_t passes; /* passes since the healer started */
	/* cells (and their bytes) among the objects this node heals that need healing or
	 * moving, at this pass */
	uint64_t pending_cells, pending_bytes;
	/* cells rebuilt or moved since start, and the same at the previous pass */
	uint64_t healed_cells, healed_bytes;
	uint64_t prev_t_ms, prev_healed_cells, prev_healed_bytes;
	/* cells records name on this node, from its last pass over every record; -1: none
	 * counted (the node reads every record only while some node drains). prev_own_*: the
	 * count before, for a drain's rate. */
	int64_t own_cells, own_bytes;
	uint64_t own_t_ms;
	int64_t prev_own_cells;
	uint64_t prev_own_t_ms;
	/* the since-when (unix s) of this node's drain or decommission key in the view its
	 * counting pass started with; 0: none. A drain's count is its progress only when this
	 * is the key's own value: a count from before the key says nothing of the drain. */
	int64_t own_drain_s;
};

/* Format s into buf (cap >= CL_HEALSTAT_CAP): the length, or -ENOSPC. */
int cl_healstat_format(const struct cl_healstat *s, char *buf, size_t cap);
/* Parse a value: 0 and *s, or -EINVAL (no t_ms, or a field that is not a number). */
int cl_healstat_parse(const char *val, size_t len, struct cl_healstat *s);

/* Cells healed per second between the two passes s carries; 0 when it cannot tell. */
double cl_healstat_rate(const struct cl_healstat *s);
/* Cells per second by which own_cells went down between its two counts; 0 likewise. */
double cl_healstat_own_rate(const struct cl_healstat *s);
/* Seconds until left cells are done at rate: -1 when the rate is 0 (unknown). */
int64_t cl_healstat_eta(uint64_t left, double rate);

#endif
