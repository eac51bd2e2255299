/*
 * --data-io: data cells written buffered (WRITEV from the slices) or direct (copied into
 * aligned pool buffers, WRITE_FIXED, O_DIRECT). Real io_uring on real files, on the VM's
 * disk (TMPDIR, default /tmp) and on tmpfs (/dev/shm): both modes leave the same files with
 * the same bytes and lengths, each reads what the other wrote (whole, ranges, degraded),
 * the align counter is the data bytes in direct mode and 0 in buffered, pool exhaustion is
 * -EAGAIN, and an aborted direct write leaves nothing after a restart.
 */
#include <fcntl.h>
#include <sys/stat.h>

#include "dn_test.h"
#include "dn_internal.h"
#include "t_fault.h"

#define NOBJ 8

static uint8_t *bufs[NOBJ];
static size_t lens[NOBJ];
static const char *base;

static void
make_objects(const struct dn_store_opts *o)
{
	size_t cell = o->cell_size, group = cell * o->k * o->stripes_per_group;
	size_t sizes[NOBJ] = {
		0, 1, 4096, cell - 1, cell + 1, 3 * group + 5, 2 * cell * o->k, group - 4095
	};

	for (int i = 0; i < NOBJ; i++) {
		lens[i] = sizes[i];
		bufs[i] = malloc(lens[i] ? lens[i] : 1);
		t_fill(bufs[i], lens[i]);
	}
}

static void
env_init(struct t_env *e, bool direct)
{
	setenv("TMPDIR", base, 1);
	t_env_init(e, 6, 4, 2);
	e->o.data_direct = direct;
}

/* Every object, fed in odd spans (object i's segments at most 1 + 7 * i * 1000 bytes). */
static void
put_all(struct t_env *e)
{
	for (int i = 0; i < NOBJ; i++) {
		struct dn_write *w;
		char key[16];

		snprintf(key, sizeof(key), "o%d", i);
		CHECK_EQ(t_feed(e->s, "b", key, bufs[i], lens[i], 1 + 7000 * (size_t)i, true, &w),
		         0);
		CHECK_EQ(t_commit(w, "etag", NULL), 0);
	}
}

static void
check_all(struct t_env *e)
{
	for (int i = 0; i < NOBJ; i++) {
		char key[16];

		snprintf(key, sizeof(key), "o%d", i);
		CHECK_EQ(t_check_read(e->s, "b", key, 0, 0, false, bufs[i], lens[i]), 0);
		CHECK_EQ(t_check_read(e->s, "b", key, lens[i] / 3, lens[i] / 2, true,
		                      bufs[i] + lens[i] / 3, lens[i] / 2),
		         0);
	}
}

static uint64_t
counter(struct dn_store *s, bool degraded)
{
	struct dn_counters c;

	dn_counters_get(s, &c);
	return degraded ? c.degraded_reads : c.align_copied_bytes;
}

/* The cell files of a store: relative name and size, one a line, sorted. */
static char *
listing(struct t_env *e)
{
	char cmd[600], *out = NULL;
	size_t cap = 0;
	FILE *p, *m;

	snprintf(cmd, sizeof(cmd),
	         "cd %s && find . -path '*/data/*' -type f -printf '%%p %%s\\n' | sort", e->root);
	p = popen(cmd, "r");
	CHECK(p);
	m = open_memstream(&out, &cap);
	CHECK(m);
	for (int ch; (ch = fgetc(p)) != EOF;)
		fputc(ch, m);
	fclose(m);
	pclose(p);
	return out;
}

/* Same files, same lengths, same bytes (the file systems' view, not our reads). */
static void
check_same_files(struct t_env *a, struct t_env *b)
{
	char *la = listing(a), *lb = listing(b), cmd[700];

	CHECK(strlen(la) > 0);
	CHECK_EQ(strcmp(la, lb), 0);
	for (unsigned d = 0; d < a->n; d++) {
		snprintf(cmd, sizeof(cmd), "diff -r %s/data %s/data >/dev/null", a->dirs[d],
		         b->dirs[d]);
		CHECK_EQ(system(cmd), 0);
	}
	free(la);
	free(lb);
}

static uint64_t
total_bytes(void)
{
	uint64_t n = 0;

	for (int i = 0; i < NOBJ; i++)
		n += lens[i];
	return n;
}

/* Both modes side by side; then each store reopened in the other mode reads everything. */
static void
round_trips(void)
{
	struct t_env eb, ed;

	env_init(&eb, false);
	env_init(&ed, true);
	make_objects(&eb.o);
	t_open(&eb);
	t_open(&ed);
	CHECK_EQ(dn_bucket_create(eb.s, "b", NULL), 0);
	CHECK_EQ(dn_bucket_create(ed.s, "b", NULL), 0);
	put_all(&eb);
	put_all(&ed);
	CHECK_EQ(counter(eb.s, false), 0);
	CHECK_EQ(counter(ed.s, false), total_bytes());
	check_all(&eb);
	check_all(&ed);
	t_close(&eb);
	t_close(&ed);
	check_same_files(&eb, &ed);

	/* Cross: written buffered, read by a direct store, and the other way round. */
	eb.o.data_direct = true;
	ed.o.data_direct = false;
	t_open(&eb);
	t_open(&ed);
	check_all(&eb);
	check_all(&ed);
	CHECK_EQ(counter(eb.s, true), 0);
	CHECK_EQ(counter(ed.s, true), 0);
	t_env_fini(&eb);
	t_env_fini(&ed);
	for (int i = 0; i < NOBJ; i++)
		free(bufs[i]);
}

/* Written direct, m drives lost, read degraded by a store in either mode; heal; scrub. */
static void
degraded_reads(void)
{
	struct t_env e;

	env_init(&e, true);
	make_objects(&e.o);
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	put_all(&e);
	t_close(&e);
	t_rmrf(e.dirs[1]);
	t_rmrf(e.dirs[4]);
	for (int mode = 0; mode < 2; mode++) {
		e.o.data_direct = mode;
		t_open(&e);
		check_all(&e);
		CHECK(counter(e.s, true) > 0);
		t_close(&e);
	}
	/* Heal writes the lost cells back; a later read needs no reconstruction. */
	t_open(&e);
	CHECK(dn_heal(e.s, 1) > 0);
	CHECK(dn_heal(e.s, 4) > 0);
	t_close(&e);
	t_open(&e);
	check_all(&e);
	CHECK_EQ(counter(e.s, true), 0);
	t_env_fini(&e);
	for (int i = 0; i < NOBJ; i++)
		free(bufs[i]);
}

/* Every pool buffer back on its drive's free list (the writes have drained). */
static void
check_pools(struct dn_store *s)
{
	for (unsigned d = 0; d < s->ndrives; d++) {
		struct dn_drive *dr = &s->drives[d];

		pthread_mutex_lock(&dr->plock);
		CHECK_EQ(dr->pool_top, dr->pool_n);
		pthread_mutex_unlock(&dr->plock);
	}
}

/*
 * Slow drives and two buffers per drive: a large direct write runs out of pool buffers
 * and gets -EAGAIN (no buffer is allocated instead); aborted, it gives every buffer back
 * and, after a restart, leaves no file.
 */
static void
pool_exhaustion(void)
{
	struct t_env e;
	size_t len = 64 * 16384;
	uint8_t *buf = malloc(len);
	struct dn_write *w;
	int err;

	env_init(&e, true);
	e.o.parity_bufs = 1;
	e.o.wait_ns = 1000000; /* 1 ms */
	t_open(&e);
	CHECK_EQ(dn_bucket_create(e.s, "b", NULL), 0);
	CHECK_EQ(e.s->drives[0].pool_n, 2u);
	t_fill(buf, len);
	for (unsigned d = 0; d < e.n; d++)
		t_fault_delay_idx(ZC_FP_DRIVE_WRITE, d, 20000000); /* 20 ms per write */
	err = t_feed(e.s, "b", "big", buf, len, 5000, true, &w);
	CHECK_EQ(err, -EAGAIN); /* t_feed aborted it */
	for (unsigned d = 0; d < e.n; d++)
		t_fault_delay_idx(ZC_FP_DRIVE_WRITE, d, 0);
	t_close(&e);                 /* waits for the aborted write's ios */
	e.o.wait_ns = 2000000000ull; /* the default: enough for any drive that keeps up */
	t_open(&e);
	check_pools(e.s);
	CHECK_EQ(t_count_files(&e), 0);
	CHECK_EQ(t_check_read(e.s, "b", "big", 0, 0, false, NULL, 0), ZC_E(ZC_NO_KEY));
	/* With room again the same write goes through. */
	CHECK_EQ(t_put(e.s, "b", "big", buf, len), 0);
	CHECK_EQ(t_check_read(e.s, "b", "big", 0, 0, false, buf, len), 0);
	CHECK_EQ(counter(e.s, false), len);
	t_close(&e);
	t_open(&e);
	check_pools(e.s);
	t_env_fini(&e);
	free(buf);
}

/* data_direct with no_direct is a contradiction, refused before anything is created. */
static void
bad_opts(void)
{
	struct t_env e;
	struct dn_store *s = NULL;
	struct stat st;

	env_init(&e, true);
	e.o.no_direct = true;
	CHECK_EQ(dn_store_open(&e.o, &s), -EINVAL);
	CHECK(s == NULL);
	CHECK(stat(e.dirs[0], &st) < 0);
	t_env_fini(&e);
}

int
main(void)
{
	const char *bases[] = { getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", "/dev/shm" };

	base = bases[0];
	bad_opts();
	for (int i = 0; i < 2; i++) {
		struct stat st;

		if (stat(bases[i], &st) < 0)
			continue;
		base = bases[i];
		fprintf(stderr, "folder %s\n", base);
		round_trips();
		degraded_reads();
		pool_exhaustion();
	}
	printf("ok\n");
	return 0;
}
