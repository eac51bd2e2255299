/*
 * zest-prof's kernel store baseline: what the kernel charges to store bytes in a folder's
 * filesystem, measured the plain way, to set the datanode's full write path against.
 *
 * It writes total bytes as 1 MiB write()s, round-robin over `files` fresh files (k+m, as the
 * datanode spreads a stripe's cells over its drives), fdatasyncs each file at the end and
 * reads the calling thread's CPU time (getrusage RUSAGE_THREAD) and the wall time around it.
 *
 * Threading: runs on the calling thread, blocking; no state kept.
 */
#ifndef ZEST_PROF_STORE_H
#define ZEST_PROF_STORE_H

#include <stdint.h>

struct prof_store_result {
	double mib_per_s;      /* bytes / wall seconds, fdatasync included */
	double cpu_s_per_gib;  /* user + system */
	double user_s_per_gib; /* ~0: the cost is the kernel's */
	double sys_s_per_gib;
};

/* The block size of every write(). */
#define PROF_STORE_BLOCK (1u << 20)

/*
 * Measures the store cost in a fresh folder made under dir, removed afterwards. files:
 * 1..64; total: at least files x PROF_STORE_BLOCK, rounded down to whole blocks per file.
 * Returns 0, -EINVAL on bad arguments, -ENOMEM, or the -errno of a failed file operation.
 */
int prof_store_measure(const char *dir, unsigned files, uint64_t total,
                       struct prof_store_result *r);

#endif
