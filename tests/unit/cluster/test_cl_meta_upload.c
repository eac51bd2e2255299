/*
 * cl_meta_compose_upload against a real etcd with etcd's default limits
 * (--max-txn-ops 128, --max-request-bytes 1.5 MiB): 200 and 10000 parts composed in O(1)
 * ops; the parts' records gone (the unlisted one too), the upload's own record kept; the
 * moved key naming the target; the index keys still naming the parts, and
 * cl_meta_extent_record following the moved key (an unlisted part's extent not named);
 * the moved key going with an overwrite and with a delete of the target; the fences: a
 * part overwritten between the read and the Txn (the test hook), an upload record deleted
 * or rewritten (an Abort's mark) meanwhile, a part not under the prefix. Skips (77)
 * without /usr/bin/etcd.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmeta_test.h"
#include "cl_index.h"
#include "zc.h"

/* The value of etcd key k, or NULL. */
static const char *
val(struct cl_etcd *c, const char *k)
{
	static char v[1400];
	struct cl_etcd_kvs kvs = { 0 };
	int rc = cl_etcd_get(c, k, strlen(k), false, &kvs, 0);

	if (rc == ZC_E(ZC_NO_KEY))
		return NULL;
	CHECK_EQ(rc, 0);
	snprintf(v, sizeof(v), "%.*s", (int)kvs.kv[0].value_len, kvs.kv[0].value);
	cl_etcd_kvs_fini(&kvs);
	return v;
}

static bool
ix_is(struct cl_etcd *c, uint64_t id, const char *bucket, const char *key)
{
	char k[CL_META_EXTENT_KEY_CAP], want[1400];
	const char *v;

	CHECK(cl_meta_extent_key(id, k, sizeof(k)) > 0);
	v = val(c, k);
	CHECK(cl_meta_object_key(bucket, key, want, sizeof(want)) > 0);
	return v && strcmp(v, want) == 0;
}

/* The record extent id belongs to, as the collector finds it: its key, or NULL. */
static const char *
owner(struct cl_etcd *c, uint64_t id)
{
	static char k[1400];
	struct cl_rec_object o;
	char *rk = NULL;
	int64_t rev = 0;
	int rc = cl_meta_extent_record(c, id, false, &o, &rk, &rev, 0);
	bool has = false;

	if (rc == ZC_E(ZC_NO_KEY)) {
		free(rk);
		return NULL;
	}
	CHECK_EQ(rc, 0);
	for (size_t i = 0; i < o.nextents; i++)
		has |= o.extents[i].id == id;
	snprintf(k, sizeof(k), "%s", rk);
	free(rk);
	cl_rec_object_fini(&o);
	return has ? k : NULL;
}

static void
parts_put(struct cl_etcd *c, const char *uid, unsigned n, uint64_t base, struct cl_meta_part *pp,
          char (*keys)[48])
{
	for (unsigned i = 0; i < n; i++) {
		snprintf(keys[i], sizeof(keys[i]), "p/%s/%05u", uid, i + 1);
		t_put1(c, ".zest-mpu", keys[i], base + i, 4096);
		pp[i] = (struct cl_meta_part){ ".zest-mpu", keys[i], NULL };
	}
}

static int
compose(struct cl_etcd *c, const char *key, const char *uid, struct cl_meta_part *pp, size_t n,
        uint64_t *size, unsigned timeout_ms)
{
	char prefix[48], fence[64];
	struct cl_meta_upload up = { ".zest-mpu", prefix, fence };
	struct cl_meta_old old;
	int rc;

	snprintf(prefix, sizeof(prefix), "p/%s/", uid);
	snprintf(fence, sizeof(fence), "u/ub/%s", uid);
	rc = cl_meta_compose_upload(c, "ub", key, &up, pp, n, "\"m\"", NULL, 0, NULL, 1, timeout_ms,
	                            size, &old);
	cl_meta_old_fini(&old);
	return rc;
}

static void
test_200(struct cl_etcd *c)
{
	enum { N = 200 };
	static struct cl_meta_part pp[N + 1];
	static char keys[N + 1][48];
	struct cl_rec_object o;
	uint64_t size = 0;

	parts_put(c, "up200", N + 1, 0xa000, pp, keys); /* part 201 is not listed */
	t_put1(c, ".zest-mpu", "u/ub/up200", 0xafff, 10);
	CHECK_EQ(compose(c, "obj", "up200", pp, N, &size, 0), 0);
	CHECK_EQ(size, (uint64_t)N * 4096);
	CHECK_EQ(cl_meta_get(c, "ub", "obj", false, &o, NULL, 0), 0);
	CHECK_EQ(o.nextents, N);
	CHECK(o.extents[0].id == 0xa000 && o.extents[N - 1].id == 0xa000 + N - 1);
	CHECK(o.moved && strcmp(o.moved, "/zest/moved/.zest-mpu/p/up200/") == 0);
	cl_rec_object_fini(&o);
	/* every part gone, the unlisted one too; the upload's record kept */
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", keys[0], false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", keys[N], false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", "u/ub/up200", false, &o, NULL, 0), 0);
	cl_rec_object_fini(&o);
	CHECK(strcmp(val(c, "/zest/moved/.zest-mpu/p/up200/"), "/zest/objects/ub/obj") == 0);
	/* the index still names the parts; the collector's lookup follows the moved key */
	CHECK(ix_is(c, 0xa000, ".zest-mpu", keys[0]));
	CHECK(owner(c, 0xa000) && strcmp(owner(c, 0xa000), "/zest/objects/ub/obj") == 0);
	CHECK(owner(c, 0xa000 + N - 1) &&
	      strcmp(owner(c, 0xa000 + N - 1), "/zest/objects/ub/obj") == 0);
	CHECK(!owner(c, 0xa000 + N)); /* the unlisted part: nobody's */
	/* a repeated Complete of the same parts: they are gone (S3's gateway retries) */
	CHECK_EQ(compose(c, "obj", "up200", pp, N, &size, 0), ZC_E(ZC_NO_KEY));
	/* overwritten: 200 index deletes are past etcd's ops limit, so they stay (dangling,
	 * the collector's); the moved key goes in the same Txn, and nothing names them */
	t_put1(c, "ub", "obj", 0xa999, 1);
	CHECK(!val(c, "/zest/moved/.zest-mpu/p/up200/"));
	CHECK(!owner(c, 0xa000) && !owner(c, 0xa000 + N - 1));
}

#ifdef ZC_FAULTS /* the compose fault hook: test builds only */
/* Changes the parts or the upload between the read and the Txn (the fault hook). */
struct change {
	struct cl_etcd *c;
	const char *key; /* a part to overwrite, or NULL */
	const char *del; /* a key of .zest-mpu to delete, or NULL */
	unsigned on;
	uint64_t ext; /* the extent id key gets (0: 0xbf00 + attempt) */
};

static void
change(void *arg, unsigned attempt)
{
	struct change *ch = arg;
	struct cl_meta_old old;

	if (attempt != ch->on)
		return;
	if (ch->key)
		t_put1(ch->c, ".zest-mpu", ch->key, ch->ext ? ch->ext : 0xbf00 + attempt, 4096);
	if (ch->del) {
		CHECK_EQ(cl_meta_delete(ch->c, ".zest-mpu", ch->del, 0, &old, 0), 1);
		cl_meta_old_fini(&old);
	}
}

static void
test_fences(struct cl_etcd *c)
{
	static struct cl_meta_part pp[3];
	static char keys[3][48];
	struct cl_rec_object o;
	struct change ch = { .c = c, .on = 1 };
	uint64_t size;

	parts_put(c, "upf", 3, 0xb000, pp, keys);
	/* no upload record: an Abort (or a Complete) ended it */
	CHECK_EQ(compose(c, "f", "upf", pp, 3, &size, 0), ZC_E(ZC_NO_KEY));
	t_put1(c, ".zest-mpu", "u/ub/upf", 0xbfff, 10);
	/* a part outside the prefix */
	pp[2].key = "p/other/00003";
	CHECK_EQ(compose(c, "f", "upf", pp, 3, &size, 0), ZC_E(ZC_INVALID));
	pp[2].key = keys[2];
	/* a part overwritten meanwhile, its ETag given: ZC_E(ZC_CHANGED), nothing changed */
	ch.key = keys[1];
	pp[1].etag = "\"etag-000000000000b001\"";
	cl_meta_compose_fault(change, &ch);
	CHECK_EQ(compose(c, "f", "upf", pp, 3, &size, 0), ZC_E(ZC_CHANGED));
	CHECK_EQ(cl_meta_get(c, "ub", "f", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK(ix_is(c, 0xb000, ".zest-mpu", keys[0]) && ix_is(c, 0xbf01, ".zest-mpu", keys[1]));
	/* any ETag: read again, composed as the part is now */
	pp[1].etag = NULL;
	CHECK_EQ(compose(c, "f", "upf", pp, 3, &size, 0), 0);
	CHECK_EQ(cl_meta_get(c, "ub", "f", false, &o, NULL, 0), 0);
	CHECK(o.nextents == 3 && o.extents[1].id == 0xbf01);
	cl_rec_object_fini(&o);
	/* an Abort between the read and the Txn: its record went, the Txn is fenced off */
	parts_put(c, "upa", 2, 0xb100, pp, keys);
	t_put1(c, ".zest-mpu", "u/ub/upa", 0xb1ff, 10);
	ch = (struct change){ .c = c, .del = "u/ub/upa", .on = 1 };
	CHECK_EQ(compose(c, "a", "upa", pp, 2, &size, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(cl_meta_get(c, "ub", "a", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK(ix_is(c, 0xb100, ".zest-mpu", keys[0]));
	/* a new part under the prefix meanwhile: the range compare fails, read again */
	t_put1(c, ".zest-mpu", "u/ub/upa", 0xb1fe, 10);
	ch = (struct change){ .c = c, .key = "p/upa/00009", .on = 1 };
	CHECK_EQ(compose(c, "a", "upa", pp, 2, &size, 0), 0);
	/* an Abort's mark between the read and the Txn (the gateway's s3_mpu_state.c: the
	 * upload's record rewritten, then its first part deleted): fenced off and not read
	 * again, though the record still exists; nothing composed, the other part kept */
	{
		static struct cl_meta_part pm[2];
		static char km[2][48];

		parts_put(c, "upm", 2, 0xb200, pm, km);
		t_put1(c, ".zest-mpu", "u/ub/upm", 0xb2ff, 10);
		ch = (struct change){
			.c = c, .key = "u/ub/upm", .del = km[0], .on = 1, .ext = 0xb2fe
		};
		CHECK_EQ(compose(c, "m", "upm", pm, 2, &size, 0), ZC_E(ZC_NO_KEY));
		CHECK_EQ(cl_meta_get(c, "ub", "m", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
		CHECK_EQ(cl_meta_get(c, ".zest-mpu", km[1], false, &o, NULL, 0), 0);
		cl_rec_object_fini(&o);
		CHECK(!val(c, "/zest/moved/.zest-mpu/p/upm/"));
		CHECK(ix_is(c, 0xb201, ".zest-mpu", km[1]));
		/* the same mark without a delete: still fenced off */
		parts_put(c, "upn", 2, 0xb300, pm, km);
		t_put1(c, ".zest-mpu", "u/ub/upn", 0xb3ff, 10);
		ch = (struct change){ .c = c, .key = "u/ub/upn", .on = 1, .ext = 0xb3fe };
		CHECK_EQ(compose(c, "n", "upn", pm, 2, &size, 0), ZC_E(ZC_NO_KEY));
		CHECK_EQ(cl_meta_get(c, "ub", "n", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	}
	cl_meta_compose_fault(NULL, NULL);
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", "p/upa/00009", false, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	/* deleted: the moved key goes with the record */
	CHECK(val(c, "/zest/moved/.zest-mpu/p/upa/"));
	{
		struct cl_meta_old old;

		CHECK_EQ(cl_meta_delete(c, "ub", "a", 0, &old, 0), 1);
		cl_meta_old_fini(&old);
	}
	CHECK(!val(c, "/zest/moved/.zest-mpu/p/upa/"));
	CHECK(!owner(c, 0xb100));
}
#endif

/* S3's 10000 parts through an etcd with its default limits. The parts are written by
 * Txns of 50 records and index keys (as commits would leave them), to keep it short. */
static void
test_10000(struct cl_etcd *c)
{
	enum { N = 10000, BATCH = 50 };
	static struct cl_meta_part pp[N];
	static char keys[N][48];
	struct cl_rec_object o;
	uint64_t size, t0;
	uint8_t *rv;
	size_t rl;
	char why[CL_REC_WHY_MAX];

	t_parts_put_batched(c, "0123456789abcdef0123456789abcdef", N, 0x100000, BATCH, pp, keys);
	t_put1(c, ".zest-mpu", "u/ub/0123456789abcdef0123456789abcdef", 0x1fffff, 10);
	t0 = t_mono_ms();
	CHECK_EQ(
	        compose(c, "a/big/object", "0123456789abcdef0123456789abcdef", pp, N, &size, 30000),
	        0);
	printf("compose of %u parts: %llu ms\n", N, (unsigned long long)(t_mono_ms() - t0));
	CHECK_EQ(size, (uint64_t)N * 4096);
	CHECK_EQ(cl_meta_get(c, "ub", "a/big/object", true, &o, NULL, 0), 0);
	CHECK_EQ(o.nextents, N);
	CHECK(o.extents[0].id == 0x100000 && o.extents[N - 1].id == 0x100000 + N - 1);
	CHECK_EQ(cl_rec_object_encode(&o, &rv, &rl, why, sizeof(why)), 0);
	printf("record of %u parts: %zu bytes\n", N, rl);
	free(rv);
	cl_rec_object_fini(&o);
	CHECK(owner(c, 0x100000 + N / 2) &&
	      strcmp(owner(c, 0x100000 + N / 2), "/zest/objects/ub/a/big/object") == 0);
	CHECK_EQ(cl_meta_get(c, ".zest-mpu", keys[N / 2], true, &o, NULL, 0), ZC_E(ZC_NO_KEY));
	/* overwritten: 10000 index deletes are past etcd's ops limit, so they stay (dangling,
	 * the collector's), but the moved key goes and nothing names the extents any more */
	t_put1(c, "ub", "a/big/object", 0x1, 1);
	CHECK(!val(c, "/zest/moved/.zest-mpu/p/0123456789abcdef0123456789abcdef/"));
	CHECK(!owner(c, 0x100000) && !owner(c, 0x100000 + N - 1));
}

int
main(void)
{
	struct cl_etcd *c;
	struct t_etcd e;

	zc_log_init();
	t_etcd_require();
	t_etcd_start(&e, 1);
	c = t_etcd_client(&e);
	CHECK_EQ(cl_meta_bucket_create(c, "ub", 1, 0), 0);
	CHECK_EQ(cl_meta_bucket_create(c, ".zest-mpu", 1, 0), 0);
	test_200(c);
#ifdef ZC_FAULTS
	test_fences(c);
#endif
	test_10000(c);
	cl_etcd_destroy(c);
	t_etcd_stop(&e);
	printf("ok\n");
	return 0;
}
