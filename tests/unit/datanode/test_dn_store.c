/*
 * Random operations against an in-memory model: put (known and unknown size), overwrite,
 * delete, compose, ranged reads, drives failing and being healed, restarts. Every read
 * must match the model; at the end no file is left that no object owns.
 */
#include "dn_test.h"

#define NKEYS 8
#define NOPS  260

struct model {
	uint8_t *data;
	size_t len;
	bool exists;
};

static struct model mdl[NKEYS];

static void
model_set(int i, const uint8_t *p, size_t len)
{
	free(mdl[i].data);
	mdl[i].data = malloc(len + 1);
	memcpy(mdl[i].data, p, len);
	mdl[i].len = len;
	mdl[i].exists = true;
}

/* Drive folders know their store and index: reordering or mixing stores is refused. */
static void
identity(void)
{
	struct t_env e, other;
	const char *tmp;
	uint8_t x = 1;

	t_env_open(&e, 6, 4, 2, "b");
	CHECK_EQ(t_put(e.s, "b", "k", &x, 1), 0);
	t_close(&e);
	tmp = e.drives[1];
	e.drives[1] = e.drives[2];
	e.drives[2] = tmp;
	CHECK_EQ(dn_store_open(&e.o, &e.s), -EINVAL);
	e.drives[2] = e.drives[1];
	e.drives[1] = tmp;
	/* A drive of another store in the list. */
	t_env_init(&other, 6, 4, 2);
	t_open(&other);
	t_close(&other);
	e.drives[5] = other.drives[5];
	CHECK_EQ(dn_store_open(&e.o, &e.s), -EINVAL);
	e.drives[5] = e.dirs[5];
	t_open(&e);
	CHECK_EQ(t_check_read(e.s, "b", "k", 0, 0, false, &x, 1), 0);
	t_env_fini(&e);
	e.s = NULL;
	t_env_fini(&other);
}

int
main(void)
{
	identity();
	struct t_env e;
	static uint8_t buf[400000];
	unsigned failed = 0; /* drives currently failed, at most m */
	int fail_drive[2] = { -1, -1 };

	if (getenv("ZEST_TEST_SEED")) /* replay or explore: ZEST_TEST_SEED=n */
		t_rng = strtoull(getenv("ZEST_TEST_SEED"), NULL, 0) | 1;
	t_env_open(&e, 7, 4, 2, "b");
	for (int op = 0; op < NOPS; op++) {
		int i = (int)(t_rand() % NKEYS), r = (int)(t_rand() % 100);
		char key[16];

		snprintf(key, sizeof(key), "key%d", i);
		if (r < 35) {
			size_t len = t_rand() % 4 == 0 ? t_rand() % 100 : t_rand() % sizeof(buf);
			struct dn_write *w;

			t_fill(buf, len);
			CHECK_EQ(t_feed(e.s, "b", key, buf, len, 1 + t_rand() % 30000, t_rand() % 2,
			                &w),
			         0);
			if (t_rand() % 8 == 0) {
				dn_write_abort(w);
			} else {
				CHECK_EQ(t_commit(w, "e", NULL), 0);
				model_set(i, buf, len);
			}
		} else if (r < 45) {
			CHECK_EQ(dn_delete(e.s, "b", key), mdl[i].exists ? 1 : 0);
			mdl[i].exists = false;
		} else if (r < 55) {
			int a = (int)(t_rand() % NKEYS), b = (int)(t_rand() % NKEYS);
			char ka[16], kb[16];
			const char *parts[2] = { ka, kb };
			struct dn_write_result res;
			bool drop = t_rand() % 3 == 0 && a != b && a != i && b != i;
			int err;

			snprintf(ka, sizeof(ka), "key%d", a);
			snprintf(kb, sizeof(kb), "key%d", b);
			err = dn_compose(e.s, "b", key, NULL, parts, 2, drop, "c", NULL, 0, &res);
			if (!mdl[a].exists || !mdl[b].exists) {
				CHECK_EQ(err, ZC_E(ZC_NO_KEY));
				continue;
			}
			CHECK_EQ(err, 0);
			{
				size_t la = mdl[a].len, lb = mdl[b].len;
				uint8_t *cat = malloc(la + lb + 1);

				memcpy(cat, mdl[a].data, la);
				memcpy(cat + la, mdl[b].data, lb);
				CHECK_EQ(res.crc32c, zc_crc32c(0, cat, la + lb));
				model_set(i, cat, la + lb);
				free(cat);
			}
			if (drop) {
				mdl[a].exists = false;
				mdl[b].exists = false;
			}
		} else if (r < 85) {
			struct t_read rd = { NULL, 0, 0, 0 };
			int err;

			if (!mdl[i].exists) {
				CHECK_EQ(dn_read(e.s, "b", key, 0, 0, false, NULL, t_read_cb, &rd),
				         ZC_E(ZC_NO_KEY));
				continue;
			}
			{
				uint64_t off = mdl[i].len ? t_rand() % (mdl[i].len + 1) : 0;
				uint64_t len = t_rand() % (mdl[i].len - off + 1);

				err = t_check_read(e.s, "b", key, off, len, true, mdl[i].data + off,
				                   len);
				CHECK_EQ(err, 0);
			}
		} else if (r < 90 && failed < 2) {
			int d = (int)(t_rand() % 7);

			if (d == fail_drive[0] || d == fail_drive[1])
				continue;
			CHECK_EQ(dn_drive_fail(e.s, (unsigned)d), 0);
			fail_drive[failed++] = d;
		} else if (r < 95 && failed > 0) {
			int d = fail_drive[--failed];

			t_rmrf(e.dirs[d]); /* a new, empty disk */
			CHECK(dn_heal(e.s, (unsigned)d) >= 0);
			fail_drive[failed] = -1;
		} else if (failed == 0) {
			t_close(&e);
			t_open(&e);
		}
	}
	while (failed > 0) {
		int d = fail_drive[--failed];

		CHECK(dn_heal(e.s, (unsigned)d) >= 0);
	}
	for (int i = 0; i < NKEYS; i++) {
		char key[16];

		snprintf(key, sizeof(key), "key%d", i);
		if (mdl[i].exists)
			CHECK_EQ(t_check_read(e.s, "b", key, 0, 0, false, mdl[i].data, mdl[i].len),
			         0);
		CHECK_EQ(dn_delete(e.s, "b", key), mdl[i].exists ? 1 : 0);
		free(mdl[i].data);
	}
	t_close(&e);
	t_open(&e);
	CHECK_EQ(t_count_files(&e), 0);
	t_env_fini(&e);
	printf("ok\n");
	return 0;
}
