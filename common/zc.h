/*
 * common: the few helpers every zest program shares: logging, clocks, size parsing.
 * Everything here is thread-safe and allocation-free.
 */
#ifndef ZEST_ZC_H
#define ZEST_ZC_H

#include <stdint.h>
#include <stdio.h>
#include <time.h>

enum zc_level { ZC_LEVEL_ERR, ZC_LEVEL_WARN, ZC_LEVEL_INFO, ZC_LEVEL_DBG };

/* Messages above this level are dropped; ZEST_LOG=debug|info|warn|error sets it. */
extern enum zc_level zc_log_level;

/* One line to stderr: "<time> <LEVEL> <component>: <message>". */
void zc_log(enum zc_level level, const char *component, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

#define ZC_ERR(comp, ...)  zc_log(ZC_LEVEL_ERR, comp, __VA_ARGS__)
#define ZC_WARN(comp, ...) zc_log(ZC_LEVEL_WARN, comp, __VA_ARGS__)
#define ZC_INFO(comp, ...) zc_log(ZC_LEVEL_INFO, comp, __VA_ARGS__)
#define ZC_DBG(comp, ...)                                        \
	do {                                                     \
		if (zc_log_level >= ZC_LEVEL_DBG)                \
			zc_log(ZC_LEVEL_DBG, comp, __VA_ARGS__); \
	} while (0)

/*
 * Memory the kernel filled where no instrumentation sees it (an io_uring read completes into
 * our buffer without a syscall that names it): tell valgrind's memcheck that it is defined.
 * Costs a few instructions outside valgrind; nothing when its header is missing.
 */
#ifdef ZC_HAVE_VALGRIND
#include <valgrind/memcheck.h>
#define ZC_MEM_DEFINED(p, n) ((void)VALGRIND_MAKE_MEM_DEFINED((p), (n)))
#else
#define ZC_MEM_DEFINED(p, n) ((void)(p), (void)(n))
#endif

/* Read ZEST_LOG from the environment once, at program start. */
void zc_log_init(void);

/* Monotonic clock in nanoseconds. */
static inline uint64_t
zc_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Thread CPU time (user + system) in nanoseconds. */
static inline uint64_t
zc_thread_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ts = now on clock + wait_ns, normalised: a deadline for pthread_cond_timedwait and friends. */
static inline void
zc_deadline(struct timespec *ts, clockid_t clock, uint64_t wait_ns)
{
	clock_gettime(clock, ts);
	ts->tv_sec += (time_t)(wait_ns / 1000000000u);
	ts->tv_nsec += (long)(wait_ns % 1000000000u);
	if (ts->tv_nsec >= 1000000000L) {
		ts->tv_sec++;
		ts->tv_nsec -= 1000000000L;
	}
}

/*
 * Parse a byte size: a number with an optional unit B, KiB, MiB, GiB, TiB (binary) or
 * KB, MB, GB, TB (decimal); K/M/G/T alone are binary. Returns 0 or -EINVAL.
 */
int zc_parse_size(const char *s, uint64_t *out);

/* Parse a duration: a number with unit ms, s, m or h (default s). Returns 0 or -EINVAL. */
int zc_parse_duration_ns(const char *s, uint64_t *out);

/* Parse a decimal count, the whole string, at most max. Returns 0 or -EINVAL. */
int zc_parse_uint(const char *s, unsigned max, unsigned *out);

/* Write v as a JSON string literal: quotes, backslashes and control characters escaped. */
void zc_json_string(FILE *out, const char *v);

/* Median of n doubles; sorts v in place. n must be > 0. */
double zc_median(double *v, size_t n);

#endif
