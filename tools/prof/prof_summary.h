/*
 * zest-prof's gRPC rounds into a report (prof_report.h): per mode the medians over rounds and
 * the median per-round ratios against the first mode, per-thread medians, the kernel store
 * baseline (prof_store.h) sized to each round and its floor; and --perf's flame graphs.
 *
 * Threading: the caller's thread.
 */
#ifndef ZEST_PROF_SUMMARY_H
#define ZEST_PROF_SUMMARY_H

#include "prof_grpc.h"
#include "prof_opts.h"
#include "prof_report.h"
#include "prof_store.h"

/*
 * The store baseline of one round into r, sized to what the round's full-path modes stored
 * (their runs in `round`); a failure is reported and leaves NANs.
 */
void prof_summary_store_round(const struct prof_opts *o, struct prof_run (*runs)[PROF_MAX_PAIRS],
                              unsigned round, struct prof_store_result *r);

/* runs[mode][round] (and store[round] with --store-baseline) into s. */
void prof_summarize(const struct prof_opts *o, struct prof_run (*runs)[PROF_MAX_PAIRS],
                    const struct prof_store_result *store, struct prof_summary *s);

/*
 * Folds o->work/perf.MODE.data (perf script) into PREFIX-MODE.folded and draws
 * PREFIX-MODE.svg (PREFIX: o->flame), into fo. Returns the number of samples or -errno
 * (said on stderr).
 */
long prof_summary_flame(const struct prof_opts *o, enum prof_mode pm, struct prof_flame_out *fo);

#endif
