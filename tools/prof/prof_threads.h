/*
 * zest-prof's per-thread CPU: where a process spends its CPU, by thread name.
 *
 * A snapshot reads /proc/PID/task/<tid>/stat for every thread of a process. Two snapshots
 * taken around a measured run give each thread's CPU seconds in between; threads are then
 * grouped by name with trailing digits folded ("dn-drive3" -> "dn-drive#", "iou-wrk-1234"
 * -> "iou-wrk-#"), so that the six drive threads or io_uring's short-lived workers show as
 * one line. Threads that exited during the run are not in the second snapshot; what the
 * whole process used beyond the live threads' sum is reported as PROF_THREADS_EXITED.
 *
 * Threading: a snapshot belongs to the caller; nothing here is shared.
 */
#ifndef ZEST_PROF_THREADS_H
#define ZEST_PROF_THREADS_H

#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

/* The kernel's comm is at most 15 bytes; the fold adds one. */
#define PROF_THREAD_NAME_MAX 24
#define PROF_THREADS_EXITED  "(exited)"

struct prof_thread_stat {
	int tid;
	char name[PROF_THREAD_NAME_MAX]; /* folded */
	uint64_t ticks;                  /* utime + stime, clock ticks */
};

/* One snapshot of a process's threads (caller's storage; prof_threads_fini frees). */
struct prof_threads {
	struct prof_thread_stat *t;
	size_t n, cap;
};

/* CPU seconds of one group of threads. */
struct prof_thread_group {
	char name[PROF_THREAD_NAME_MAX];
	double cpu_s;
};

/*
 * Parses one /proc/.../stat line: comm (between the first '(' and the LAST ')', since a
 * comm may hold spaces and parentheses) into comm (cut to comm_len), and utime and stime
 * (fields 14 and 15) in clock ticks. Returns 0 or -EINVAL on a malformed line.
 */
int prof_threads_parse_stat(const char *line, char *comm, size_t comm_len, uint64_t *utime,
                            uint64_t *stime);

/* Writes comm with its trailing digits replaced by one '#' into out (cut to n); a name
 * without trailing digits is copied unchanged. */
void prof_threads_fold_name(const char *comm, char *out, size_t n);

/* Reads every thread of pid into s (which it empties first; zero-initialise it once).
 * Returns the number of threads, or -errno (-ESRCH when the process is gone, -ENOMEM). */
int prof_threads_snapshot(pid_t pid, struct prof_threads *s);

/* Frees a snapshot's storage; s may be reused after prof_threads_snapshot again. */
void prof_threads_fini(struct prof_threads *s);

/*
 * Groups the CPU seconds each thread used between before and after by folded name, into
 * groups (at most max; later names go into the last slot's sum when full, renamed "other").
 * A thread only in after counts from zero. process_cpu_s is the whole process's CPU over the
 * same interval (NAN: unknown); what it has beyond the threads' sum (by more than their
 * rounding to ticks) becomes a group
 * PROF_THREADS_EXITED. tick_s is seconds per clock tick. Groups come sorted by CPU,
 * largest first. Returns the number of groups.
 */
unsigned prof_threads_delta(const struct prof_threads *before, const struct prof_threads *after,
                            double process_cpu_s, double tick_s, struct prof_thread_group *groups,
                            unsigned max);

#endif
