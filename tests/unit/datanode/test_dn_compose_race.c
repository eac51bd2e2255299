/*
 * A part uploaded again (and its extent's other owner deleted) between a compose's read
 * of the parts and its commit transaction, forced there by the engine's fault point
 * "dn.compose" (zc_fault.h): the composed object never names a freed extent. The cases: an
 * extent shared with a copy's source that survives (the version read is composed, the new
 * one dropped with the part's name), one whose last other owner goes too (the compose reads
 * again: a pinned ETag then fails it with ZC_E(ZC_CHANGED) and changes nothing, an unpinned one
 * composes the new version), and an unshared one. Every object reads back its bytes, and
 * once they are deleted no cell file is left.
 */
#include "dn_test.h"
#include "t_fault.h"

struct hook {
	struct dn_store *s;
	const uint8_t *nb; /* part 1's new bytes */
	size_t nl;
	bool del_src; /* delete "src" too (the extent's other owner) */
	unsigned on;  /* the attempt to act on */
};

static int
put_etag(struct dn_store *s, const char *key, const uint8_t *buf, size_t len, const char *etag)
{
	struct dn_write *w;
	int err = t_feed(s, "b", key, buf, len, 5000, true, &w);

	return err ? err : t_commit(w, etag, NULL);
}

static void
hook(void *arg, unsigned attempt)
{
	struct hook *h = arg;

	if (attempt != h->on)
		return;
	CHECK_EQ(put_etag(h->s, "p1", h->nb, h->nl, "new"), 0);
	if (h->del_src)
		CHECK_EQ(dn_delete(h->s, "b", "src"), 1);
}

/* Run fn(arg, attempt) at the point (NULL: off); attempts count from 1 since set. */
static void
compose_fault(void (*fn)(void *arg, unsigned attempt), void *arg)
{
	t_fault(ZC_FP_DN_COMPOSE, NULL,
	        fn ? &(struct zc_fault){ .kind = ZC_FAULT_CALL, .fn = fn, .arg = arg } : NULL);
}

static uint8_t *
cat(const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	uint8_t *p = malloc(al + bl);

	CHECK(p);
	memcpy(p, a, al);
	memcpy(p + al, b, bl);
	return p;
}

static int
compose(struct dn_store *s, const char *const *etags)
{
	static const char *const parts[] = { "p1", "p2" };
	struct dn_write_result res;

	return dn_compose_if(s, "b", "obj", NULL, parts, etags, 2, true, "m-2", NULL, 0, NULL,
	                     &res);
}

/* p1 a server-side copy of src (sharing its extent) or its own object, p2 its own. */
static void
setup(struct t_env *e, bool shared, const uint8_t *a, size_t al, const uint8_t *b, size_t bl)
{
	static const char *const src[] = { "src" };
	struct dn_write_result res;

	if (shared) {
		CHECK_EQ(put_etag(e->s, "src", a, al, "ea"), 0);
		CHECK_EQ(dn_compose(e->s, "b", "p1", NULL, src, 1, false, "ea", NULL, 0, &res), 0);
	} else {
		CHECK_EQ(put_etag(e->s, "p1", a, al, "ea"), 0);
	}
	CHECK_EQ(put_etag(e->s, "p2", b, bl, "eb"), 0);
}

static void
drain(struct t_env *e)
{
	static const char *const keys[] = { "obj", "src", "p1", "p2" };

	for (size_t i = 0; i < 4; i++)
		CHECK(dn_delete(e->s, "b", keys[i]) >= 0);
	CHECK_EQ(t_count_files(e), 0);
}

int
main(void)
{
	static const char *const pinned[] = { "ea", "eb" };
	enum { AL = 70000, BL = 9000, NL = 50000 };
	uint8_t *a = malloc(AL), *b = malloc(BL), *nb = malloc(NL), *want;
	struct t_env e;
	struct hook h;

	CHECK(a && b && nb);
	t_fill(a, AL);
	t_fill(b, BL);
	t_fill(nb, NL);
	t_env_open(&e, 6, 4, 2, "b");
	h = (struct hook){ .s = e.s, .nb = nb, .nl = NL, .on = 1 };

	/* shared, the source survives: the version read is composed (its extent has a ref
	 * left), the new p1 goes with the part's name; the source still reads */
	setup(&e, true, a, AL, b, BL);
	compose_fault(hook, &h);
	CHECK_EQ(compose(e.s, pinned), 0);
	want = cat(a, AL, b, BL);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, want, AL + BL), 0);
	free(want);
	CHECK_EQ(t_check_read(e.s, "b", "src", 0, 0, false, a, AL), 0);
	CHECK_EQ(t_check_read(e.s, "b", "p1", 0, 0, false, NULL, 0), ZC_E(ZC_NO_KEY));
	drain(&e);

	/* shared, the source deleted too: the extent read is freed, the compose reads again;
	 * pinned, the new p1 is not the listed one: ZC_E(ZC_CHANGED), nothing composed or dropped
	 */
	setup(&e, true, a, AL, b, BL);
	h.del_src = true;
	compose_fault(hook, &h);
	CHECK_EQ(compose(e.s, pinned), ZC_E(ZC_CHANGED));
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(t_check_read(e.s, "b", "p1", 0, 0, false, nb, NL), 0);
	CHECK_EQ(t_check_read(e.s, "b", "p2", 0, 0, false, b, BL), 0);
	/* unpinned: the new version */
	compose_fault(NULL, NULL);
	CHECK_EQ(compose(e.s, NULL), 0);
	want = cat(nb, NL, b, BL);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, want, NL + BL), 0);
	free(want);
	drain(&e);

	/* unshared: the overwrite frees the extent read, the compose reads again */
	setup(&e, false, a, AL, b, BL);
	h.del_src = false;
	compose_fault(hook, &h);
	CHECK_EQ(compose(e.s, NULL), 0);
	compose_fault(NULL, NULL);
	want = cat(nb, NL, b, BL);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, want, NL + BL), 0);
	free(want);
	drain(&e);

	/* the same after a restart: what the metadata says matches the files */
	setup(&e, true, a, AL, b, BL);
	h.del_src = false;
	compose_fault(hook, &h);
	CHECK_EQ(compose(e.s, pinned), 0);
	compose_fault(NULL, NULL);
	t_close(&e);
	t_open(&e);
	want = cat(a, AL, b, BL);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, want, AL + BL), 0);
	free(want);
	drain(&e);

	t_env_fini(&e);
	free(a);
	free(b);
	free(nb);
	printf("ok\n");
	return 0;
}
