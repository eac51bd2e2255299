/* dn_write + dn_read: round trips for several schemes and sizes fed as unaligned segments. */
#include <stdatomic.h>
#include <stdint.h>

#include "dn_test.h"
#include "t_fault.h"

static void
round_trip(struct t_env *e, unsigned k, size_t size, bool size_known)
{
	size_t cell = e->o.cell_size, stripe = k * cell, group = stripe * e->o.stripes_per_group;
	uint8_t *buf = malloc(size + 1);
	struct dn_object_info info;
	struct dn_write *w;
	uint32_t crc = 0;
	char key[64];

	CHECK(buf);
	t_fill(buf, size);
	snprintf(key, sizeof(key), "../../k%u/%zu/%d", k, size, size_known);
	CHECK_EQ(t_feed(e->s, "b", key, buf, size, 1 + t_rand() % 70000, size_known, &w), 0);
	CHECK_EQ(t_commit(w, "e1", &crc), 0);
	CHECK_EQ(crc, zc_crc32c(0, buf, size));
	CHECK_EQ(dn_stat(e->s, "b", key, &info), 0);
	CHECK_EQ(info.size, size);
	CHECK_EQ(info.crc32c, crc);
	CHECK(strcmp(info.etag, "e1") == 0);
	CHECK_EQ(info.nattrs, 1);
	CHECK(strcmp(info.attrs[0].name, "content-type") == 0);
	dn_object_info_fini(&info);
	CHECK_EQ(t_check_read(e->s, "b", key, 0, 0, false, buf, size), 0);
	/* Ranges: inside one cell, across cells, stripes and groups, and the tail. */
	for (int i = 0; i < 6 && size > 0; i++) {
		uint64_t off = t_rand() % size, len = t_rand() % (size - off + 1);

		CHECK_EQ(t_check_read(e->s, "b", key, off, len, true, buf + off, len), 0);
	}
	if (size > group + 10)
		CHECK_EQ(t_check_read(e->s, "b", key, group - 5, 10, true, buf + group - 5, 10), 0);
	CHECK_EQ(t_check_read(e->s, "b", key, size, 0, true, NULL, 0), 0);
	CHECK_EQ(t_check_read(e->s, "b", key, size, 1, true, NULL, 0), -EINVAL);
	free(buf);
}

static void
scheme(unsigned k, unsigned m, unsigned ndrives)
{
	struct t_env e;

	t_env_init(&e, ndrives, k, m);
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	size_t cell = e.o.cell_size, stripe = k * cell, group = stripe * e.o.stripes_per_group;
	size_t sizes[] = { 0,          1,      cell - 1,   cell,           cell + 1,
		           stripe - 1, stripe, stripe + 1, 5 * stripe + 7, 3 * group + 123,
		           group };

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		round_trip(&e, k, sizes[i], true);
		round_trip(&e, k, sizes[i], false);
	}
	t_close(&e);
	/* Everything is still there after a restart. */
	t_open(&e);
	{
		struct dn_list_result lr;

		CHECK_EQ(dn_list(e.s, "b", "", "", 1000, "", &lr), 0);
		CHECK_EQ(lr.nentries, 2 * (sizeof(sizes) / sizeof(sizes[0])));
		dn_list_result_fini(&lr);
	}
	t_env_fini(&e);
}

static void
size_mismatch(void)
{
	struct t_env e;
	struct dn_write *w;
	uint8_t buf[100] = { 1 };
	struct zc_seg seg = { buf, sizeof(buf), NULL };
	struct dn_list_result lr;

	t_env_open(&e, 6, 4, 2, NULL);
	CHECK_EQ(dn_write_begin(e.s, "nob", "k", 0, false, 0, 0, &w), ZC_E(ZC_NO_BUCKET));
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	CHECK_EQ(dn_write_begin(e.s, "b", "k", 50, true, 0, 0, &w), 0);
	CHECK_EQ(dn_write_data(w, 0, &seg, 1), -EINVAL); /* more than announced */
	seg.len = 40;
	CHECK_EQ(dn_write_data(w, 1, &seg, 1), -EINVAL); /* offset gap */
	CHECK_EQ(dn_write_data(w, 0, &seg, 1), 0);
	CHECK_EQ(t_commit(w, "x", NULL), -EINVAL); /* 40 of 50 bytes */
	CHECK_EQ(dn_write_begin(e.s, "b", "k", 0, false, 9, 9, &w), -EINVAL);
	CHECK_EQ(dn_list(e.s, "b", "", "", 0, "", &lr), 0);
	CHECK_EQ(lr.nentries, 0);
	dn_list_result_fini(&lr);
	t_env_fini(&e);
}

static unsigned
open_fds(void)
{
	char cmd[64];
	unsigned n = 0;
	FILE *p;

	snprintf(cmd, sizeof(cmd), "ls /proc/%d/fd | wc -l", (int)getpid());
	p = popen(cmd, "r");
	CHECK(p && fscanf(p, "%u", &n) == 1);
	pclose(p);
	return n;
}

/* Finished block groups sync and close their files before the object commits. */
static void
bounded_files(void)
{
	struct t_env e;
	size_t size;
	uint8_t *buf;
	struct dn_write *w;
	unsigned base, during;

	t_env_open(&e, 6, 4, 2, "b");
	size = 12 * e.o.cell_size * 4 * e.o.stripes_per_group + 5; /* 13 groups */
	buf = malloc(size);
	t_fill(buf, size);
	base = open_fds();
	CHECK_EQ(t_feed(e.s, "b", "big", buf, size, 60000, true, &w), 0);
	usleep(200000);
	during = open_fds();
	/* Only the last group's 6 files (and the popen's pipe) may be open; not 13 x 6. */
	CHECK(during <= base + 6 + 2);
	CHECK_EQ(t_commit(w, "e", NULL), 0);
	CHECK_EQ(t_check_read(e.s, "b", "big", 0, 0, false, buf, size), 0);
	free(buf);
	t_env_fini(&e);
}

/* Writers on several threads, some racing on the same keys; readers never see a mix. */
#define NTHR  4
#define NITER 12
static struct t_env cenv;
static uint8_t *versions[NTHR][NITER];
static size_t vlens[NTHR][NITER];

static void *
writer(void *arg)
{
	int t = (int)(intptr_t)arg;

	for (int i = 0; i < NITER; i++) {
		char key[32];

		snprintf(key, sizeof(key), "shared%d", i % 3);
		CHECK_EQ(t_put(cenv.s, "b", key, versions[t][i], vlens[t][i]), 0);
		snprintf(key, sizeof(key), "own%d-%d", t, i);
		CHECK_EQ(t_put(cenv.s, "b", key, versions[t][i], vlens[t][i]), 0);
	}
	return NULL;
}

static void
concurrent(void)
{
	pthread_t th[NTHR];
	size_t cell = 16384;

	t_env_init(&cenv, 6, 4, 2);
	t_open(&cenv);
	CHECK_EQ(dn_bucket_create(cenv.s, "b", NULL), 0);
	for (int t = 0; t < NTHR; t++)
		for (int i = 0; i < NITER; i++) {
			vlens[t][i] = t_rand() % (20 * cell);
			versions[t][i] = malloc(vlens[t][i] + 1);
			t_fill(versions[t][i], vlens[t][i]);
		}
	for (int t = 0; t < NTHR; t++)
		CHECK_EQ(pthread_create(&th[t], NULL, writer, (void *)(intptr_t)t), 0);
	for (int t = 0; t < NTHR; t++)
		pthread_join(th[t], NULL);
	for (int t = 0; t < NTHR; t++)
		for (int i = 0; i < NITER; i++) {
			char key[32];

			snprintf(key, sizeof(key), "own%d-%d", t, i);
			CHECK_EQ(t_check_read(cenv.s, "b", key, 0, 0, false, versions[t][i],
			                      vlens[t][i]),
			         0);
		}
	/* A shared key holds exactly one of the versions written to it. */
	for (int k = 0; k < 3; k++) {
		struct t_read r = { NULL, 0, 0, 0 };
		char key[32];
		bool found = false;

		snprintf(key, sizeof(key), "shared%d", k);
		CHECK_EQ(dn_read(cenv.s, "b", key, 0, 0, false, NULL, t_read_cb, &r), 0);
		for (int t = 0; t < NTHR; t++)
			for (int i = k; i < NITER; i += 3)
				if (vlens[t][i] == r.len &&
				    (r.len == 0 || memcmp(versions[t][i], r.buf, r.len) == 0))
					found = true;
		CHECK(found);
		free(r.buf);
	}
	for (int t = 0; t < NTHR; t++)
		for (int i = 0; i < NITER; i++)
			free(versions[t][i]);
	t_env_fini(&cenv);
}

/* A tiny in-flight cap: writes still complete, and held payload stays near the cap. */
static atomic_bool watching;
static uint64_t max_inflight;

static void *
watcher(void *arg)
{
	struct dn_store *s = arg;

	while (atomic_load(&watching)) {
		struct dn_counters c;

		dn_counters_get(s, &c);
		if (c.inflight_bytes > max_inflight)
			max_inflight = c.inflight_bytes;
		usleep(200);
	}
	return NULL;
}

static void
inflight_cap(void)
{
	struct t_env e;
	size_t size = 3 << 20;
	uint8_t *buf = malloc(size);
	pthread_t th;

	t_fill(buf, size);
	t_env_init(&e, 6, 4, 2);
	e.o.inflight_cap = 32768;
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	t_fault_delay_idx(ZC_FP_DRIVE_WRITE, 1, 200000);
	atomic_store(&watching, true);
	CHECK_EQ(pthread_create(&th, NULL, watcher, e.s), 0);
	CHECK_EQ(t_put(e.s, "b", "k", buf, size), 0);
	atomic_store(&watching, false);
	pthread_join(th, NULL);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, buf, size), 0);
	/* cap + what one dn_write_data call may add (8 segments of <= 5000 bytes) */
	CHECK(max_inflight > 0);
	CHECK(max_inflight <= 32768 + 8 * 5000);
	free(buf);
	t_env_fini(&e);
}

/* Per-call CRC32C (a WriteChunk's crc32c) is checked without a second pass. */
static void
checked(void)
{
	struct t_env e;
	static uint8_t buf[100000];
	struct dn_write *w;
	struct zc_seg a = { buf, 30000, NULL }, b = { buf + 30000, 70000, NULL };
	struct dn_object_info info;

	t_fill(buf, sizeof(buf));
	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(dn_write_begin(e.s, "b", "k", sizeof(buf), true, 0, 0, &w), 0);
	CHECK_EQ(dn_write_data_checked(w, 0, &a, 1, zc_crc32c(0, buf, 30000)), 0);
	CHECK_EQ(dn_write_data_checked(w, 30000, &b, 1, zc_crc32c(0, buf + 30000, 70000)), 0);
	CHECK_EQ(t_commit(w, "e", NULL), 0);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, buf, sizeof(buf)), 0);
	/* One flipped CRC bit: BadDigest, and the object keeps its committed version. */
	CHECK_EQ(dn_write_begin(e.s, "b", "k", sizeof(buf), true, 0, 0, &w), 0);
	CHECK_EQ(dn_write_data_checked(w, 0, &a, 1, zc_crc32c(0, buf, 30000)), 0);
	CHECK_EQ(dn_write_data_checked(w, 30000, &b, 1, zc_crc32c(0, buf + 30000, 70000) ^ 1),
	         -EBADMSG);
	CHECK_EQ(t_commit(w, "e", NULL), -EBADMSG);
	CHECK_EQ(dn_stat(e.s, "b", "k", &info), 0);
	CHECK(strcmp(info.etag, "e") == 0);
	dn_object_info_fini(&info);
	t_env_fini(&e);
}

int
main(void)
{
	checked();
	inflight_cap();
	concurrent();
	bounded_files();
	size_mismatch();
	scheme(4, 2, 6);
	scheme(2, 1, 4);
	scheme(3, 2, 7);
	scheme(6, 3, 9);
	printf("ok\n");
	return 0;
}
