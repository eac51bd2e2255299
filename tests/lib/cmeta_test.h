/*
 * Shared by test_cl_meta.c, test_cl_meta_upload.c, test_dn_cgc.c and test_dn_cheal.c: a
 * real etcd client that waits for a leader, a one-extent put of RS(2,1) cells of 4 KiB, one
 * stripe per group, its commit, and multipart parts written in bulk.
 */
#ifndef ZEST_TEST_CMETA_H
#define ZEST_TEST_CMETA_H

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cl_meta_internal.h" /* cl_meta_encode, cl_meta_extent_key */
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

static inline struct cl_etcd *
t_etcd_client(struct t_etcd *e)
{
	struct cl_etcd *c;
	uint64_t end = t_mono_ms() + 60000;

	CHECK_EQ(cl_etcd_create(e->endpoints, NULL, &c), 0);
	while (cl_etcd_put(c, "ready", 5, "1", 1, 0, NULL, 1000) != 0) {
		CHECK(t_mono_ms() < end);
		usleep(100 * 1000);
	}
	return c;
}

/* A put of one extent of size bytes: group g's cell i on nodes[(g + i) % nnodes]. */
struct t_put {
	struct cl_meta_put p;
	struct cl_meta_extent x;
	struct cl_meta_group g[T_MAX_GROUPS];
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
	t->x = (struct cl_meta_extent){ .id = extent,
		                        .size = size,
		                        .k = 2,
		                        .m = 1,
		                        .cell_size = 4096,
		                        .stripes_per_group = 1,
		                        .groups = t->g,
		                        .ngroups = ng };
	t->p = (struct cl_meta_put){ .bucket = bucket,
		                     .key = key,
		                     .size = size,
		                     .etag = t->etag,
		                     .crc32c = (uint32_t)extent,
		                     .mtime_ns = 1700000000000000000ull,
		                     .extents = &t->x,
		                     .nextents = 1,
		                     .timeout_ms = 3000 };
}

/* Commits bucket/key as one extent of size bytes on dn-1, dn-2, dn-3 (the record it replaced
 * dropped). */
static inline void
t_put1(struct cl_etcd *c, const char *bucket, const char *key, uint64_t extent, uint64_t size)
{
	static const char *const nodes[] = { "dn-1", "dn-2", "dn-3" };
	struct cl_meta_old old;
	struct t_put t;

	t_put_init(&t, bucket, key, extent, size, nodes, 3);
	CHECK_EQ(cl_meta_commit(c, &t.p, &old), 0);
	cl_meta_old_fini(&old);
}

/*
 * n parts of upload uid in .zest-mpu, p/<uid>/00001 on, part i one 4 KiB extent base + i on
 * dn-1..dn-3: their records and index keys as commits would leave them, but written by Txns
 * of batch records (2 * batch ops, within etcd's ops limit), so that thousands of parts take
 * seconds. keys[i] gets part i's key, pp[i] names it (any ETag).
 */
static inline void
t_parts_put_batched(struct cl_etcd *c, const char *uid, unsigned n, uint64_t base, unsigned batch,
                    struct cl_meta_part *pp, char (*keys)[48])
{
	static const char *const nodes[] = { "dn-1", "dn-2", "dn-3" };
	struct cl_etcd_op *ops = calloc(2 * (size_t)batch, sizeof(*ops));
	char(*okeys)[96] = calloc(batch, sizeof(*okeys));
	char(*xkeys)[CL_META_EXTENT_KEY_CAP] = calloc(batch, sizeof(*xkeys));
	uint8_t **val = calloc(batch, sizeof(*val));
	char why[CL_REC_WHY_MAX];

	CHECK(batch > 0 && ops && okeys && xkeys && val);
	for (unsigned b = 0; b < n; b += batch) {
		unsigned m = n - b < batch ? n - b : batch;
		struct cl_etcd_txn txn = { .then = ops, .n_then = 2 * (size_t)m };

		for (unsigned j = 0; j < m; j++) {
			unsigned i = b + j;
			struct t_put t;
			size_t len;
			int kl, xl;

			snprintf(keys[i], sizeof(keys[i]), "p/%s/%05u", uid, i + 1);
			pp[i] = (struct cl_meta_part){ ".zest-mpu", keys[i], NULL };
			t_put_init(&t, ".zest-mpu", keys[i], base + i, 4096, nodes, 3);
			CHECK_EQ(cl_meta_encode(&t.p, &val[j], &len, why, sizeof(why)), 0);
			kl = cl_meta_object_key(".zest-mpu", keys[i], okeys[j], sizeof(okeys[j]));
			xl = cl_meta_extent_key(base + i, xkeys[j], sizeof(xkeys[j]));
			CHECK(kl > 0 && xl > 0);
			ops[2 * j] = (struct cl_etcd_op){ .type = CL_ETCD_OP_PUT,
				                          .r = { .key = okeys[j],
				                                 .key_len = (size_t)kl },
				                          .value = val[j],
				                          .value_len = len };
			ops[2 * j + 1] = (struct cl_etcd_op){ .type = CL_ETCD_OP_PUT,
				                              .r = { .key = xkeys[j],
				                                     .key_len = (size_t)xl },
				                              .value = okeys[j],
				                              .value_len = (size_t)kl };
		}
		CHECK_EQ(cl_etcd_txn(c, &txn, NULL, 0), 0);
		for (unsigned j = 0; j < m; j++)
			free(val[j]);
	}
	free(val);
	free(xkeys);
	free(okeys);
	free(ops);
}

#endif
