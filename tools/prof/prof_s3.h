/*
 * zest-prof --s3: the datanode and the S3 gateway together, driven through S3 by
 * zest-bench's own load engine (tools/bench/bench_s3_load.h), PUT then GET in every run.
 *
 * Each round starts, for every mode in turn, a fresh datanode (the mode's marshaller and
 * --data-io) and a gateway in front of it over mutual TLS (a throwaway CA made with
 * tools/zest-certs.sh in the work folder, as `make run` does, or --tls-dir's), warms up with
 * uncounted PUTs, then measures a PUT phase and, after preloading objects, a GET phase.
 * Around each phase it reads both processes' CPU (/proc/PID/stat and by thread), their
 * payload copy counters by stage and the gateway's payload bytes (/metrics), the drive
 * files' bytes in the page cache (mincore) and the peak RSS (VmHWM, reset at the phase's
 * start through /proc/PID/clear_refs); prof_s3_report.h turns the rounds into medians and
 * ratios against the first mode.
 *
 * Threading: the caller's thread, plus the load's workers during a phase.
 */
#ifndef ZEST_PROF_S3_H
#define ZEST_PROF_S3_H

#include "prof_opts.h"

/*
 * The rounds of o (filled by prof_opts_parse; --s3 without --perf or --callgrind) and the
 * report on stdout. Returns 0, or -errno after saying why on stderr.
 */
int prof_s3_main(const struct prof_opts *o);

#endif
