/*
 * zest-prof's gRPC rounds: one run of one datanode mode, driven by `zest-bench grpc` (or
 * `zest-bench s3 put` through the gateway, for --perf and --callgrind with --s3): daemons up
 * (prof_daemon.h), a warm-up load, the measured load with the datanode's CPU, by thread,
 * and its payload counters read around it, optionally under perf or callgrind; daemons down.
 *
 * Threading: the caller's thread; zest-bench and the profilers are child processes.
 */
#ifndef ZEST_PROF_GRPC_H
#define ZEST_PROF_GRPC_H

#include "prof_opts.h"
#include "prof_report.h"

/* One run's figures. */
struct prof_run {
	double v[PROF_M_COUNT];
	unsigned n_groups;
	/* CPU-s per payload GiB by thread group, over the measured load */
	struct prof_thread_group groups[PROF_MAX_GROUPS];
};

/* A run plain, under valgrind's callgrind (PROF_M_IPB) or recorded by perf. */
enum prof_tool { PROF_TOOL_NONE, PROF_TOOL_CALLGRIND, PROF_TOOL_PERF };

/*
 * One run of mode pm into r; idx names its drive folders (o->drives_base/runIDX-MODE). With
 * PROF_TOOL_PERF, perf records the measured load into o->work/perf.MODE.data; with
 * PROF_TOOL_CALLGRIND the datanode's instructions go to o->work/callgrind.MODE.out. Returns
 * 0, or -errno after saying why on stderr.
 */
int prof_grpc_run(const struct prof_opts *o, enum prof_mode pm, unsigned idx, enum prof_tool tool,
                  struct prof_run *r);

#endif
