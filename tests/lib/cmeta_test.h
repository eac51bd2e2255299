/*
 * Shared by test_rpc_cmeta.c and test_dn_cgc.c: a real etcd client that waits for a leader,
 * and a one-extent put of RS(2,1) cells of 4 KiB, one stripe per group.
 */
#ifndef ZEST_TEST_CMETA_H
#define ZEST_TEST_CMETA_H

#include <string.h>
#include <time.h>
#include <unistd.h>

#include "rpc_cmeta.h"
#include "etcd_test.h"
#include "t_check.h"

#define T_GROUP_BYTES (2 * 4096)
#define T_MAX_GROUPS  8

static inline uint64_t
t_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static inline struct rpc_etcd *
t_etcd_client(struct t_etcd *e)
{
	struct rpc_etcd *c;
	uint64_t end = t_mono_ms() + 20000;

	CHECK_EQ(rpc_etcd_create(e->endpoints, NULL, &c), 0);
	while (rpc_etcd_put(c, "ready", 5, "1", 1, 0, NULL, 1000) != 0) {
		CHECK(t_mono_ms() < end);
		usleep(100 * 1000);
	}
	return c;
}

/* A put of one extent of size bytes: group g's cell i on nodes[(g + i) % nnodes]. */
struct t_put {
	struct rpc_cmeta_put p;
	struct rpc_cmeta_extent x;
	struct rpc_cmeta_group g[T_MAX_GROUPS];
	char etag[40];
};

static inline void
t_put_init(struct t_put *t, const char *bucket, const char *key, uint64_t extent, uint64_t size,
           const char *const *nodes, unsigned nnodes)
{
	size_t ng = (size + T_GROUP_BYTES - 1) / T_GROUP_BYTES;

	CHECK(ng >= 1 && ng <= T_MAX_GROUPS);
	memset(t, 0, sizeof(*t));
	snprintf(t->etag, sizeof(t->etag), "\"etag-%016llx\"", (unsigned long long)extent);
	for (size_t g = 0; g < ng; g++)
		for (unsigned i = 0; i < 3; i++)
			t->g[g].node[i] = nodes[(g + i) % nnodes];
	t->x = (struct rpc_cmeta_extent){ .id = extent,
		                          .size = size,
		                          .k = 2,
		                          .m = 1,
		                          .cell_size = 4096,
		                          .stripes_per_group = 1,
		                          .groups = t->g,
		                          .ngroups = ng };
	t->p = (struct rpc_cmeta_put){ .bucket = bucket,
		                       .key = key,
		                       .size = size,
		                       .etag = t->etag,
		                       .crc32c = (uint32_t)extent,
		                       .mtime_ns = 1700000000000000000ull,
		                       .extents = &t->x,
		                       .nextents = 1,
		                       .timeout_ms = 3000 };
}

#endif
