/*
 * A read racing a delete or an overwrite of the object it reads, forced by the engine's
 * fault point "dn.read" (zc_fault.h): a read holds the extents of the version it looked up
 * from right after the lookup until it closes, so an extent freed meanwhile keeps its cell
 * files for it. The cases: the object deleted (or overwritten) after its extent was found
 * and before its cell files opened (the read returns the version it started on, whole;
 * before the holds it failed with -EIO on the unlinked cells), after the object lookup and
 * before the holds (ZC_E(ZC_NO_KEY): that version is gone), a cursor stepped one
 * stripe and the object deleted before the next groups' files open (the rest still reads),
 * and a composed object of two pieces. Every freed extent's files go once the read closes:
 * no cell file is left.
 */
#include "dn_test.h"
#include "t_fault.h"

struct hook {
	struct dn_store *s;
	const char *key;
	const uint8_t *nb; /* NULL: delete key; else overwrite it with nb */
	size_t nl;
	unsigned on, hits; /* the hit to act on; hits seen */
};

static void
hook(void *arg, unsigned hit)
{
	struct hook *h = arg;

	(void)hit;
	if (++h->hits != h->on)
		return;
	if (h->nb)
		CHECK_EQ(t_put(h->s, "b", h->key, h->nb, h->nl), 0);
	else
		CHECK_EQ(dn_delete(h->s, "b", h->key), 1);
}

static void
arm(const char *inst, struct hook *h)
{
	h->hits = 0;
	t_fault(ZC_FP_DN_READ, NULL, NULL);
	if (inst)
		t_fault(ZC_FP_DN_READ, inst,
		        &(struct zc_fault){ .kind = ZC_FAULT_CALL, .fn = hook, .arg = h });
}

struct sink {
	size_t len;
	const uint8_t *want;
};

static int
sink_cb(void *arg, uint64_t off, const struct zc_seg *seg)
{
	struct sink *k = arg;

	CHECK_EQ(off, k->len);
	CHECK(memcmp(seg->ptr, k->want + off, seg->len) == 0);
	k->len += seg->len;
	return 0;
}

int
main(void)
{
	/* cell 16 KiB, k 4: 64 KiB stripes, 256 KiB groups; L spans three groups */
	enum { L = 600000, NL = 70000 };
	static const char *const parts[] = { "p1", "p2" };
	uint8_t *a = malloc(L), *nb = malloc(NL), *want;
	struct dn_write_result res;
	struct dn_object_info info;
	struct dn_rcur *cur;
	struct sink k;
	struct t_env e;
	struct hook h;
	int more;

	CHECK(a && nb);
	t_fill(a, L);
	t_fill(nb, NL);
	t_env_open(&e, 6, 4, 2, "b");
	h = (struct hook){ .s = e.s, .key = "obj", .on = 1 };

	/* deleted once the extent is found, before its cells open: the whole version */
	CHECK_EQ(t_put(e.s, "b", "obj", a, L), 0);
	arm("cells", &h);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, a, L), 0);
	CHECK_EQ(h.hits, 1);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(t_count_files(&e), 0);

	/* a range in the last group, the same */
	CHECK_EQ(t_put(e.s, "b", "obj", a, L), 0);
	arm("cells", &h);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 590000, 9000, true, a + 590000, 9000), 0);
	CHECK_EQ(t_count_files(&e), 0);

	/* overwritten there: the version the read started on; the next read, the new one */
	CHECK_EQ(t_put(e.s, "b", "obj", a, L), 0);
	h.nb = nb;
	h.nl = NL;
	arm("cells", &h);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, a, L), 0);
	arm(NULL, &h);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, nb, NL), 0);
	CHECK_EQ(dn_delete(e.s, "b", "obj"), 1);
	CHECK_EQ(t_count_files(&e), 0);
	h.nb = NULL;

	/* deleted after the object lookup, before the holds: no such key */
	CHECK_EQ(t_put(e.s, "b", "obj", a, L), 0);
	arm("extent", &h);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, NULL, 0), ZC_E(ZC_NO_KEY));
	CHECK_EQ(h.hits, 1);
	CHECK_EQ(t_count_files(&e), 0);
	/* and deleted before: the same, at the lookup */
	arm(NULL, &h);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, NULL, 0), ZC_E(ZC_NO_KEY));

	/* a cursor one stripe in, the object deleted: the later groups' cells still read */
	CHECK_EQ(t_put(e.s, "b", "obj", a, L), 0);
	CHECK_EQ(dn_read_open(e.s, "b", "obj", 0, 0, false, &info, &cur), 0);
	k = (struct sink){ 0, a };
	more = dn_read_next(cur, 1, sink_cb, &k);
	CHECK_EQ(more, 1);
	CHECK_EQ(k.len, 65536);
	CHECK_EQ(dn_delete(e.s, "b", "obj"), 1);
	CHECK(t_count_files(&e) > 0); /* kept for the read */
	CHECK_EQ(dn_read_next(cur, UINT64_MAX, sink_cb, &k), 0);
	CHECK_EQ(k.len, L);
	dn_read_close(cur);
	dn_object_info_fini(&info);
	CHECK_EQ(t_count_files(&e), 0);

	/* composed of two pieces, deleted before the first piece's cells open: both read */
	CHECK_EQ(t_put(e.s, "b", "p1", a, L), 0);
	CHECK_EQ(t_put(e.s, "b", "p2", nb, NL), 0);
	CHECK_EQ(dn_compose(e.s, "b", "obj", NULL, parts, 2, true, "m-2", NULL, 0, &res), 0);
	want = malloc(L + NL);
	CHECK(want);
	memcpy(want, a, L);
	memcpy(want + L, nb, NL);
	arm("cells", &h);
	CHECK_EQ(t_check_read(e.s, "b", "obj", 0, 0, false, want, L + NL), 0);
	arm(NULL, &h);
	free(want);
	CHECK(dn_delete(e.s, "b", "p1") >= 0);
	CHECK(dn_delete(e.s, "b", "p2") >= 0);
	CHECK_EQ(t_count_files(&e), 0);

	t_env_fini(&e);
	free(a);
	free(nb);
	printf("ok\n");
	return 0;
}
