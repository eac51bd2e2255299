/*
 * zest-prof's report: the figures of one zest-prof run, printed as a text table, as JSON or
 * drawn as an SVG bar chart. Private to zest-prof (tools/prof); nothing here measures.
 *
 * Ratios are against the FIRST mode listed: for each later mode, the median over rounds of
 * (that mode / first mode) in the same round. With the default modes (copy,zerocopy) the
 * output is the one zest-prof has always printed, plus the per-thread table.
 *
 * Threading: plain functions on the caller's data.
 */
#ifndef ZEST_PROF_REPORT_H
#define ZEST_PROF_REPORT_H

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>

#include "prof_modes.h"
#include "prof_store.h"
#include "prof_threads.h"

enum prof_metric {
	PROF_M_MIBS,
	PROF_M_CPU,
	PROF_M_COPIED,
	PROF_M_P50,
	PROF_M_P99,
	PROF_M_RSS,
	PROF_M_IPB,
	PROF_M_COUNT
};

/* Thread groups kept per run and per mode; more fold into "other". */
#define PROF_MAX_GROUPS 32

/* What --perf drew for one mode. */
struct prof_flame_out {
	char svg[PATH_MAX + 32], folded[PATH_MAX + 32];
	long samples;      /* -errno when there is no profile */
	double copy_share; /* share of samples with a user-space memcpy/memmove frame */
};

/* One mode's medians over the rounds. */
struct prof_mode_summary {
	enum prof_mode mode;
	double v[PROF_M_COUNT];
	double ratio[PROF_M_COUNT]; /* against the first mode; unused for the first */
	unsigned n_groups;
	/* datanode CPU-s per payload GiB by thread group, median over rounds, largest first */
	struct prof_thread_group groups[PROF_MAX_GROUPS];
	struct prof_flame_out flame;
};

struct prof_summary {
	unsigned n_modes, rounds, concurrent, k, m;
	struct prof_mode_summary mode[PROF_MAX_MODES];
	const char *obj_size, *ec, *drives;
	bool s3, has_flame, has_store;
	struct prof_store_result store; /* medians over rounds, when has_store */
	double floor; /* discard's CPU-s/GiB + (k+m)/k x store's; NAN unless both measured */
};

/* True for the modes copy,zerocopy in that order: the legacy JSON keys and texts. */
bool prof_report_is_default(const struct prof_summary *s);

/* The text tables: metrics, per-thread CPU, store baseline and floor, flame graphs. */
void prof_report_table(FILE *out, const struct prof_summary *s);

/* One JSON object and a newline. Default modes: {"copy":{..},"zerocopy":{..},"ratio":{..},
 * ...}; else one object per mode and "ratio_MODE" per later mode. */
void prof_report_json(FILE *out, const struct prof_summary *s);

/* A bar chart, one group of bars per metric, each scaled to its largest. Returns 0 or -errno. */
int prof_report_svg(const char *path, const struct prof_summary *s);

#endif
