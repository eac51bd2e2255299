/* zest-prof's kernel store baseline: k+m files, 1 MiB write()s, fdatasync, rusage. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "prof_store.h"

#define MAX_FILES 64
#define GIB       (1024.0 * 1024.0 * 1024.0)

/*
 * The source of the writes: 64 MiB, cycled. The datanode's io_uring workers copy from gRPC
 * slices that arrived on the socket a while ago and are no longer in cache. A single 1 MiB
 * block written again and again would be read from cache (these VMs: 512 KiB of L2 per core,
 * 32 MiB of L3) and make the kernel's copy look cheaper than the one the datanode pays;
 * 64 MiB is larger than both.
 */
#define SOURCE_SIZE (64u << 20)

static double
seconds(const struct timeval *tv)
{
	return (double)tv->tv_sec + (double)tv->tv_usec / 1e6;
}

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Writes the blocks round-robin over the open files, then fdatasyncs each. */
static int
store(const int *fds, unsigned files, uint64_t blocks_per_file, const unsigned char *src)
{
	size_t off = 0;

	for (uint64_t b = 0; b < blocks_per_file; b++) {
		for (unsigned i = 0; i < files; i++) {
			ssize_t w = write(fds[i], src + off, PROF_STORE_BLOCK);

			if (w < 0)
				return -errno;
			if (w != PROF_STORE_BLOCK)
				return -ENOSPC;
			off = (off + PROF_STORE_BLOCK) % SOURCE_SIZE;
		}
	}
	for (unsigned i = 0; i < files; i++)
		if (fdatasync(fds[i]) < 0)
			return -errno;
	return 0;
}

int
prof_store_measure(const char *dir, unsigned files, uint64_t total, struct prof_store_result *r)
{
	char root[PATH_MAX], path[PATH_MAX + 16];
	int fds[MAX_FILES];
	uint64_t blocks_per_file;
	struct rusage r0, r1;
	unsigned char *src;
	unsigned opened = 0;
	double t0, t1, gib;
	int rc;

	if (!dir || files < 1 || files > MAX_FILES || total < (uint64_t)files * PROF_STORE_BLOCK)
		return -EINVAL;
	blocks_per_file = total / files / PROF_STORE_BLOCK;
	if (snprintf(root, sizeof(root), "%s/store.XXXXXX", dir) >= (int)sizeof(root))
		return -EINVAL;
	src = aligned_alloc(4096, SOURCE_SIZE);
	if (!src)
		return -ENOMEM;
	/* Every byte touched (and not all zero) before the clock starts: no page faults in it. */
	for (size_t i = 0; i < SOURCE_SIZE; i++)
		src[i] = (unsigned char)(i * 2654435761u >> 13);
	if (!mkdtemp(root)) {
		rc = -errno;
		goto free_src;
	}
	for (; opened < files; opened++) {
		snprintf(path, sizeof(path), "%s/f%u", root, opened);
		fds[opened] = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
		if (fds[opened] < 0) {
			rc = -errno;
			goto close_files;
		}
	}
	getrusage(RUSAGE_THREAD, &r0);
	t0 = now_s();
	rc = store(fds, files, blocks_per_file, src);
	t1 = now_s();
	getrusage(RUSAGE_THREAD, &r1);
	if (rc == 0) {
		gib = (double)blocks_per_file * files * PROF_STORE_BLOCK / GIB;
		r->mib_per_s = gib * 1024 / (t1 - t0);
		r->user_s_per_gib = (seconds(&r1.ru_utime) - seconds(&r0.ru_utime)) / gib;
		r->sys_s_per_gib = (seconds(&r1.ru_stime) - seconds(&r0.ru_stime)) / gib;
		r->cpu_s_per_gib = r->user_s_per_gib + r->sys_s_per_gib;
	}
close_files:
	for (unsigned i = 0; i < opened; i++) {
		close(fds[i]);
		snprintf(path, sizeof(path), "%s/f%u", root, i);
		unlink(path);
	}
	rmdir(root);
free_src:
	free(src);
	return rc;
}
